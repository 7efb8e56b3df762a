//! The `batkube` command.
//!
//! - `batkube batsim …`: the built-in Batsim stand-in, with real Batsim's
//!   option names, so scripts can swap one for the other.
//! - `batkube completions SHELL` and `batkube man`: the shell completions
//!   and the manual pages, generated from this definition of the command.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, CommandFactory, Parser, Subcommand};

mod reference_cli;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use batsim::compare::cases::{Case, Scheduler};
use batsim::compare::{CaseFiles, RunOptions};
use batsim::link::DEFAULT_ENDPOINT;
use batsim::platform::Platform;
use batsim::standin::fcfs::Fcfs;
use batsim::standin::{DecisionProcess, Options, StandIn, ZmqDecisionProcess};
use batsim::workload::Workload;

/// `batkube --version`: the package's version and the commit it was built
/// from (hash and date; "commit unknown" outside a git checkout).
const VERSION: &str = batkube_commit::version!();

#[derive(Parser)]
#[command(
    name = "batkube",
    version = VERSION,
    about = "Simulate Kubernetes schedulers on Batsim"
)]
struct Cli {
    /// More log detail (-v, -vv).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a whole simulation: API, broker, the scheduler under the time
    /// shim, and Batsim (real if installed, else the built-in stand-in).
    Run(batkube::run::RunArgs),
    /// Run only the API and the broker; start Batsim and the scheduler yourself.
    Serve(batkube::run::ServeArgs),
    /// The built-in Batsim stand-in (Batsim v4.2 protocol; delay and
    /// parallel_homogeneous profiles). Same option names as Batsim.
    Batsim(BatsimArgs),
    /// Workload tools: validate, generate, convert.
    #[command(subcommand)]
    Workload(batkube_inputs::workload::Command),
    /// Platform tools: validate, generate, convert.
    #[command(subcommand)]
    Platform(batkube_inputs::platform::Command),
    /// Replay a workload on a real cluster in real time (one pod per job) and
    /// record it in Batsim's jobs.csv layout.
    Replay(batkube_inputs::replay::ReplayArgs),
    /// Write DIR/report.html: one self-contained page of a run (Gantt chart,
    /// totals over time, distributions, pod table, summary in words) or of a
    /// sweep (the axes against the results, linking each run's page).
    Report(batkube_report::ReportArgs),
    /// Compare two runs of one case (their jobs.csv, pods.csv and, when
    /// both have it, requests.csv from --log-requests) and name the first
    /// difference in simulated time. Exit status 0 when identical.
    Compare(batkube::run::compare::CompareArgs),
    /// Write the shell completion script for SHELL to stdout, e.g.
    /// `batkube completions bash > ~/.local/share/bash-completion/completions/batkube`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the manual page to stdout (`batkube man | man -l -`), or with
    /// --dir one page per command into DIR (batkube.1, batkube-run.1, …).
    Man {
        /// Directory to write the pages into (created if missing).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Write the guide's command reference (docs/src/reference/cli.md) to
    /// stdout, generated from this definition.
    #[command(hide = true)]
    ReferenceCli,
}

#[derive(Args)]
struct BatsimArgs {
    /// SimGrid platform file.
    #[arg(short = 'p', long = "platform", required_unless_present = "generate")]
    platform: Option<PathBuf>,
    /// Batsim JSON workload (repeat for several; named w0, w1, …).
    #[arg(short = 'w', long = "workload", required_unless_present = "generate")]
    workloads: Vec<PathBuf>,
    /// Decision process endpoint (Batsim connects a REQ socket there).
    #[arg(short = 's', long = "socket-endpoint", default_value = DEFAULT_ENDPOINT)]
    socket: String,
    /// Output prefix: writes <prefix>jobs.csv and <prefix>schedule.csv; the
    /// directory must exist.
    #[arg(short = 'e', long = "export", default_value = "out/")]
    export: PathBuf,
    /// Master host name (when no host has role=master).
    #[arg(short = 'm', long = "master-host")]
    master: Option<String>,
    /// Allow several jobs on one machine.
    #[arg(long = "enable-compute-sharing")]
    compute_sharing: bool,
    /// Use at most this many compute machines (0: all).
    #[arg(long = "mmax", default_value_t = 0)]
    mmax: u32,
    /// Send each job's profile in JOB_SUBMITTED.
    #[arg(long = "forward-profiles-on-submission")]
    forward_profiles: bool,
    /// Accept REGISTER_JOB / REGISTER_PROFILE.
    #[arg(long = "enable-dynamic-jobs")]
    dynamic_jobs: bool,
    /// Answer REGISTER_JOB with JOB_SUBMITTED.
    #[arg(long = "acknowledge-dynamic-jobs")]
    ack_dynamic_jobs: bool,
    /// Text forwarded as `sched-config` in SIMULATION_BEGINS.
    /// External events (Batsim 4.2's format: one JSON object per line);
    /// may be given several times.
    #[arg(long = "events", value_name = "FILE")]
    events: Vec<PathBuf>,
    /// Forward external events of unknown types as NOTIFY.
    #[arg(long = "forward-unknown-events")]
    forward_unknown_events: bool,
    #[arg(long = "sched-cfg", default_value = "")]
    sched_cfg: String,
    /// Instead of connecting to a decision process, run a native one
    /// in-process: `fcfs`, or `random:SEED` (starts, kills and calls at
    /// random, the same for the same seed and messages).
    #[arg(long = "builtin-scheduler", value_name = "NAME")]
    builtin: Option<String>,
    /// Differential check: run real Batsim (this binary) on the same
    /// inputs and options under the built-in scheduler (`fcfs` unless
    /// --builtin-scheduler), record the conversation, replay it against
    /// the stand-in and print the first message that differs (exit 1).
    #[arg(
        long = "compare-with",
        value_name = "BATSIM",
        conflicts_with = "replay"
    )]
    compare_with: Option<PathBuf>,
    /// With --compare-with: instead of -p/-w, compare on N generated cases
    /// (platforms, workloads, options and scheduler from seeds --seed..).
    #[arg(long = "generate", value_name = "N", requires = "compare_with")]
    generate: Option<u64>,
    /// First seed of --generate.
    #[arg(long = "seed", default_value_t = 0)]
    seed: u64,
    /// Where --compare-with leaves each case (inputs, real Batsim's
    /// conversation real.jsonl and logs) and summary.txt.
    #[arg(long = "cases-dir", default_value = "compare-cases")]
    cases_dir: PathBuf,
    /// Simulated seconds the built-in scheduler charges per decision.
    #[arg(long = "builtin-decision-time", default_value_t = 0.0)]
    builtin_decision_time: f64,
    /// Record the whole conversation in FILE (the shared transcript format:
    /// one JSON object per message with seq, dir, wall, raw, msg).
    #[arg(long = "record-protocol", value_name = "FILE")]
    record_protocol: Option<PathBuf>,
    /// Play the decision process's replies recorded in FILE (a conversation
    /// of real Batsim or of the stand-in) and compare every message the
    /// stand-in sends with the recorded one; prints the first difference
    /// and exits 1 if there is one.
    #[arg(long = "replay", value_name = "FILE", conflicts_with = "builtin")]
    replay: Option<PathBuf>,
}

/// At most two glibc malloc arenas (glibc's default is eight per core).
/// The API's objects are made on the runtime's worker threads and the
/// broker's thread and freed on others (a pod's versions, the watch
/// history, the pod GC): with an arena per thread, each arena kept its own
/// free memory, and a run's peak RSS held that slack (583 -> 448 MB at
/// 100,000 jobs, 315 -> 293 MB at 10,000). Set before any thread starts;
/// `MALLOC_ARENA_MAX` in the environment still decides when given.
fn few_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt with integer arguments, before other threads exist.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, 2) };
    }
}

fn main() -> ExitCode {
    // The broker's waits for the scheduler are short sleeps (tens of
    // microseconds) on its critical path; Linux stretches every sleep of a
    // normal thread by its timer slack (50 µs by default). Threads made
    // later inherit this; the scheduler's own sleeps are simulated.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    few_malloc_arenas();
    let cli = Cli::parse();
    let level = match cli.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("BATKUBE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let result = match cli.command {
        Command::Run(args) if args.compare_exact => batkube::run::compare::compare_exact(&args),
        Command::Run(args) => batkube::run::run(args).map(|s| print_summary(&s)),
        Command::Compare(args) => batkube::run::compare::run(args),
        Command::Serve(args) => batkube::run::serve(args).map(|s| print_summary(&s)),
        Command::Batsim(args) => run_standin(args),
        Command::Workload(cmd) => batkube_inputs::workload::run(cmd),
        Command::Platform(cmd) => batkube_inputs::platform::run(cmd),
        Command::Replay(args) => batkube_inputs::replay::run(args),
        Command::Report(args) => batkube_report::run(args),
        Command::Completions { shell } => completions(shell),
        Command::Man { dir } => man(dir.as_deref()),
        Command::ReferenceCli => std::io::stdout()
            .write_all(reference_cli::markdown(Cli::command()).as_bytes())
            .context("writing the command reference"),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // A run that ended early says how far it got before why.
            let mut code = 1;
            if let Some(inc) = e.downcast_ref::<batkube::ending::Incomplete>() {
                print_summary(&inc.summary);
                code = inc.summary.end_reason.exit_code();
            } else if let Some(s) = e.downcast_ref::<batkube::ending::Stopped>() {
                code = s.0.exit_code();
            }
            eprintln!("batkube: error: {}", batkube::ending::error_text(&e));
            ExitCode::from(code)
        }
    }
}

/// `batkube completions SHELL`.
fn completions(shell: clap_complete::Shell) -> anyhow::Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "batkube", &mut script);
    std::io::stdout()
        .write_all(&script)
        .context("writing the completion script")
}

/// `batkube man [--dir DIR]`.
fn man(dir: Option<&Path>) -> anyhow::Result<()> {
    let cmd = Cli::command();
    match dir {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(cmd).render(&mut page)?;
            std::io::stdout()
                .write_all(&page)
                .context("writing the manual page")
        }
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("writing the manual pages into {}", dir.display()))?;
            eprintln!("batkube man: wrote the manual pages into {}", dir.display());
            Ok(())
        }
    }
}

fn print_summary(s: &batkube::broker::record::Summary) {
    if s.jobs_whole_node > 0 {
        eprintln!(
            "batkube: {} job(s) asked for no cpu or memory: each of their pods took its node \
             whole, as in Batsim (--no-requests-means nothing: pods that ask for nothing)",
            s.jobs_whole_node
        );
    }
    let how = if s.completed {
        "simulation complete".to_string()
    } else {
        format!(
            "simulation incomplete ({} at simulated time {:.6} s)",
            serde_json::to_value(s.end_reason)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            s.end_time
        )
    };
    eprintln!(
        "batkube: {how}: {} jobs ({} succeeded, {} failed, {} rejected), makespan \
         {:.6} s, mean wait {:.6} s, max wait {:.6} s, utilisation {:.3}, {} overcommit(s), \
         {:.3} s of wall time ({:.0}x faster than real time)",
        s.jobs,
        s.jobs_succeeded,
        s.jobs_failed,
        s.jobs_rejected,
        s.makespan,
        s.mean_wait,
        s.max_wait,
        s.utilisation,
        s.overcommit_count,
        s.wall_seconds,
        s.simulated_to_wall_ratio
    );
}

fn run_standin(args: BatsimArgs) -> anyhow::Result<()> {
    if let Some(batsim) = args.compare_with.clone() {
        return compare_with(&batsim, &args);
    }
    let platform_path = args.platform.clone().context("-p PLATFORM is required")?;
    let platform = Platform::from_file(&platform_path)?;
    let mut workloads = Vec::new();
    for (i, path) in args.workloads.iter().enumerate() {
        workloads.push(Workload::from_file(path, &format!("w{i}"))?);
    }
    let opts = Options {
        compute_sharing: args.compute_sharing,
        forward_profiles: args.forward_profiles,
        dynamic_jobs: args.dynamic_jobs,
        acknowledge_dynamic_jobs: args.ack_dynamic_jobs,
        mmax: args.mmax,
        sched_config: args.sched_cfg,
        export_prefix: Some(args.export.clone()),
        master: args.master,
        events: args.events,
        forward_unknown_events: args.forward_unknown_events,
    };
    let sim = StandIn::new(platform, workloads, opts)?;
    if let Some(path) = &args.replay {
        let lines = batsim::transcript::read(path)?;
        return match batsim::transcript::replay(sim, &lines) {
            Ok(n) => {
                eprintln!(
                    "batkube batsim: the stand-in sent the {n} recorded messages of {} identically",
                    path.display()
                );
                Ok(())
            }
            Err(diff) => Err(anyhow::anyhow!("replaying {}: {diff}", path.display())),
        };
    }
    let mut dp: Box<dyn DecisionProcess> =
        match args.builtin.as_deref() {
            None => Box::new(ZmqDecisionProcess::connect(&args.socket).with_context(|| {
                format!("connecting to the decision process at {}", args.socket)
            })?),
            Some("fcfs") => Box::new(Fcfs::new(args.builtin_decision_time)),
            Some(other) => Scheduler::parse(other).map_err(anyhow::Error::msg)?.make(),
        };
    let summary = match &args.record_protocol {
        None => sim.run(dp.as_mut())?,
        Some(path) => {
            let recorder = batsim::transcript::Recorder::create(path)?;
            let mut recording = batsim::transcript::Recording {
                inner: dp.as_mut(),
                recorder,
            };
            sim.run(&mut recording)?
        }
    };
    let s = &summary.stats;
    eprintln!(
        "batkube batsim: simulation ended at {:.6} s: {} jobs ({} succeeded, {} killed, {} \
         rejected), makespan {:.6} s, mean waiting time {:.6} s, {} messages, {:.3} s of wall time; \
         outputs {}jobs.csv and {}schedule.csv",
        summary.end_time,
        s.nb_jobs,
        s.nb_jobs_success,
        s.nb_jobs_killed,
        s.nb_jobs_rejected,
        s.makespan,
        s.mean_waiting_time(),
        summary.messages,
        summary.wall_seconds,
        args.export.display(),
        args.export.display()
    );
    Ok(())
}

/// `batkube batsim --compare-with BATSIM`: real Batsim and the stand-in on
/// the same inputs and decisions (the given ones, or `--generate N`
/// cases), compared message by message.
fn compare_with(batsim: &std::path::Path, args: &BatsimArgs) -> anyhow::Result<()> {
    if args.forward_profiles
        || args.dynamic_jobs
        || args.ack_dynamic_jobs
        || args.mmax != 0
        || !args.events.is_empty()
        || args.forward_unknown_events
        || !args.sched_cfg.is_empty()
    {
        anyhow::bail!(
            "--compare-with passes only --enable-compute-sharing and -m to both engines; \
             remove the other Batsim options"
        );
    }
    let timeout = std::time::Duration::from_secs(120);
    std::fs::create_dir_all(&args.cases_dir)
        .with_context(|| format!("creating {}", args.cases_dir.display()))?;
    let mut report = String::new();
    let mut failures = 0u64;
    let mut run_one = |name: String,
                       files: CaseFiles,
                       opts: RunOptions,
                       scheduler: Scheduler,
                       what: String|
     -> anyhow::Result<()> {
        let (outcome, real) =
            batsim::compare::compare_case(batsim, &files, &opts, scheduler, timeout)
                .with_context(|| format!("case {name}"))?;
        if !outcome.is_identical() {
            failures += 1;
        }
        let line = format!(
            "{name}: {} ({} lines, real Batsim {:.2} s) {what}",
            outcome.summary(),
            real.lines.len(),
            real.wall_seconds
        );
        println!("{line}");
        std::fs::write(files.dir.join("result.txt"), format!("{line}\n"))?;
        report.push_str(&line);
        report.push('\n');
        Ok(())
    };
    let total;
    match args.generate {
        Some(n) => {
            total = n;
            for seed in args.seed..args.seed + n {
                let case = Case::generate(seed);
                let dir = args.cases_dir.join(format!("case-{seed:05}"));
                let files = batsim::compare::write_case(&case, &dir)
                    .with_context(|| format!("writing {}", dir.display()))?;
                let opts = RunOptions {
                    compute_sharing: case.compute_sharing,
                    master: case.master.clone(),
                };
                run_one(
                    format!("case-{seed:05}"),
                    files,
                    opts,
                    case.scheduler,
                    case.describe(),
                )?;
            }
        }
        None => {
            total = 1;
            if args.workloads.len() != 1 {
                anyhow::bail!("--compare-with compares one workload (-w) at a time");
            }
            let platform = args.platform.clone().context("-p PLATFORM is required")?;
            let scheduler = Scheduler::parse(args.builtin.as_deref().unwrap_or("fcfs"))
                .map_err(anyhow::Error::msg)?;
            let files = CaseFiles {
                dir: args.cases_dir.clone(),
                platform,
                workload: args.workloads[0].clone(),
            };
            let opts = RunOptions {
                compute_sharing: args.compute_sharing,
                master: args.master.clone(),
            };
            run_one("case".into(), files, opts, scheduler, scheduler.name())?;
        }
    }
    let summary = format!(
        "{} case(s), {} identical, {failures} not\n",
        total,
        total - failures
    );
    report.push_str(&summary);
    std::fs::write(args.cases_dir.join("summary.txt"), &report)?;
    eprint!("batkube batsim --compare-with: {summary}");
    if failures > 0 {
        anyhow::bail!(
            "{failures} case(s) differ (see {})",
            args.cases_dir.join("summary.txt").display()
        );
    }
    Ok(())
}
