//! `batkube workload …`: tools for Batsim workloads: `validate`, `generate`,
//! `convert swf`, `convert volcano`.

use std::path::{Path, PathBuf};

use std::fmt::Write as _;

use anyhow::Context;

use super::quantity;
use super::workload_check;
use super::workload_gen::{self, Arrival, Dist, GenerateSpec, Parallel, SwfSpec};
use batsim::platform::Platform;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Check workloads against Batsim's rules, the broker's and the
    /// stand-in's; every problem with the line of the offending job.
    Validate {
        /// Workload files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Also warn about every job on more machines (`res`) than this
        /// platform's compute hosts: it can never run.
        #[arg(long)]
        platform: Option<PathBuf>,
        /// Master host of --platform, as Batsim's -m.
        #[arg(short = 'm', long = "master-host", requires = "platform")]
        master: Option<String>,
    },
    /// Generate a synthetic workload (deterministic for a given seed).
    ///
    /// Distributions: V, const:V, uniform:A:B, exp:MEAN, normal:MEAN:SD,
    /// lognormal:MU:SIGMA, choice:A,B,C, choice:A:WEIGHT,B:WEIGHT,….
    Generate {
        /// Number of jobs.
        #[arg(short = 'n', long = "jobs")]
        jobs: usize,
        /// burst (all at 0), interval:SECONDS, poisson:MEAN_SECONDS.
        #[arg(long, default_value = "burst")]
        arrival: Arrival,
        /// Job duration in seconds.
        #[arg(long, default_value = "170")]
        duration: String,
        /// Cpu request in cores or quantities (500m).
        #[arg(long, default_value = "1")]
        cpu: String,
        /// Memory request (4Gi, 512Mi, bytes); none by default.
        #[arg(long)]
        memory: Option<String>,
        /// Machines per job, one pod each with the --cpu and --memory drawn
        /// for the job (a distribution of whole numbers: uniform:A:B draws
        /// A..=B, exp/normal/lognormal are rounded, at least 1).
        #[arg(long, default_value = "1")]
        res: String,
        /// Walltime of every job in seconds (none by default).
        #[arg(long)]
        walltime: Option<f64>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Output file (stdout when absent).
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
    },
    /// Convert traces into workloads.
    #[command(subcommand)]
    Convert(Convert),
}

// Parsed once from the command line: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, clap::Subcommand)]
pub enum Convert {
    /// A Standard Workload Format trace (Parallel Workloads Archive).
    ///
    /// By default a job stays parallel: res = ceil(processors /
    /// --procs-per-node) machines, one pod each, with cpu = (processors /
    /// res) / --procs-reference × --node-cpu (1m floor, capped), so a pod
    /// on a whole traced node asks for --node-cpu. `--parallel fold` is the
    /// way the 2020 study made KIT_10h_80.json: one pod per job (res 1),
    /// cpu = processors / reference × node cpu.
    ///
    /// KIT_10h_80: --parallel fold --node-cpu 6 --cpu-cap 5.9 --trim 3600.
    Swf {
        trace: PathBuf,
        /// split: one pod per traced node (res = ceil(processors /
        /// --procs-per-node)); fold: one pod holding the whole job (res 1).
        #[arg(long, value_enum, default_value_t = Parallel::Split)]
        parallel: Parallel,
        /// Processors of one traced node [default: MaxProcs / MaxNodes of
        /// the trace's header when it is a whole number, else 1].
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        procs_per_node: Option<u32>,
        /// Leave out jobs on more machines than this (listed on stderr with their trace line).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        max_res: Option<u32>,
        /// Leave out jobs on more machines than this platform's compute
        /// hosts (listed on stderr with their trace line).
        #[arg(long)]
        platform: Option<PathBuf>,
        /// Master host of --platform, as Batsim's -m.
        #[arg(short = 'm', long = "master-host", requires = "platform")]
        master: Option<String>,
        /// Window start in trace seconds (default: first submission).
        #[arg(long)]
        window_start: Option<f64>,
        /// Window length in seconds (default: to the end of the trace).
        #[arg(long)]
        window_length: Option<f64>,
        /// Search the first window of --window-length with this utilisation
        /// (0..1) of the traced machine, as evalys' period extraction.
        #[arg(long)]
        utilisation: Option<f64>,
        #[arg(long, default_value_t = 0.01)]
        tolerance: f64,
        /// Cap job durations at this many seconds.
        #[arg(long)]
        trim: Option<f64>,
        /// Cpu of a pod holding --procs-reference processors.
        #[arg(long, default_value_t = 1.0)]
        node_cpu: f64,
        /// Largest cpu request written (default: --node-cpu).
        #[arg(long)]
        cpu_cap: Option<f64>,
        /// Processors that map to --node-cpu [default: split: the procs per
        /// node; fold: the largest job of the window, as in 2020].
        #[arg(long)]
        procs_reference: Option<f64>,
        /// Memory request of each pod whose trace line gives none (SWF's
        /// used memory is per processor: a pod gets its processors' share).
        #[arg(long)]
        memory: Option<String>,
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
    },
    /// A Volcano-simulator pods.csv (cpu_request, memory_request, runsec,
    /// createtime, nodeSelector, priority, queueName).
    Volcano {
        pods_csv: PathBuf,
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
    },
}

fn write_out(output: Option<&Path>, text: &str) -> anyhow::Result<()> {
    match output {
        Some(p) => std::fs::write(p, text).with_context(|| format!("writing {}", p.display())),
        None => {
            print!("{text}");
            Ok(())
        }
    }
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// The compute machines of a platform, as Batsim counts them.
fn compute_machines(path: &Path, master: Option<&str>) -> anyhow::Result<usize> {
    let p = Platform::from_file(path)?;
    let m = p
        .machines(master)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(m.compute.len())
}

/// How many refused jobs `convert swf` lists one by one before counting.
const REFUSED_LISTED: usize = 20;

pub fn run(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::Validate {
            files,
            platform,
            master,
        } => {
            let bound = platform
                .as_deref()
                .map(|p| {
                    Ok::<_, anyhow::Error>(workload_check::PlatformSize {
                        machines: compute_machines(p, master.as_deref())?,
                        name: p.display().to_string(),
                    })
                })
                .transpose()?;
            let mut failed = 0;
            for f in &files {
                let shown = f.display().to_string();
                let text = read(f)?;
                match workload_check::check_on(&text, &shown, bound.as_ref()) {
                    Ok(c) => {
                        for w in &c.warnings {
                            eprintln!("{shown}:{w}");
                        }
                        println!("{shown}: {} jobs, {} profiles: ok", c.jobs, c.profiles);
                    }
                    Err(findings) => {
                        failed += 1;
                        for e in &findings {
                            eprintln!("{shown}:{e}");
                        }
                    }
                }
            }
            if failed > 0 {
                anyhow::bail!("{failed} of {} workloads are not valid", files.len());
            }
            Ok(())
        }
        Command::Generate {
            jobs,
            arrival,
            duration,
            cpu,
            memory,
            res,
            walltime,
            seed,
            output,
        } => {
            let secs = |s: &str| {
                s.parse::<f64>()
                    .map_err(|_| format!("{s:?} is not a number of seconds"))
            };
            let spec = GenerateSpec {
                jobs,
                arrival,
                duration: Dist::parse(&duration, &secs).map_err(anyhow::Error::msg)?,
                cpu: Some(Dist::parse(&cpu, &quantity::parse_cpu).map_err(anyhow::Error::msg)?),
                memory: memory
                    .map(|m| Dist::parse(&m, &quantity::parse_memory))
                    .transpose()
                    .map_err(anyhow::Error::msg)?,
                // The default draws nothing: files made before --res stay as they were.
                res: Some(workload_gen::parse_res_dist(&res).map_err(anyhow::Error::msg)?)
                    .filter(|d| *d != Dist::Const(1.0)),
                walltime,
                seed,
            };
            let b = workload_gen::generate(&spec);
            if let Some((id, d)) = b.first_non_positive_delay() {
                anyhow::bail!(
                    "--duration {duration}: job {id} got a duration of {d} s (after rounding to \
                     the millisecond); Batsim 4.2.1 refuses a delay that is not strictly \
                     positive: give a distribution of positive durations"
                );
            }
            let mut desc = format!(
                "batkube workload generate -n {jobs} --arrival {:?} --duration {duration} --cpu {cpu} --seed {seed}",
                spec.arrival
            );
            if spec.res.is_some() {
                let _ = write!(desc, " --res {res}");
            }
            write_out(output.as_deref(), &b.to_json(&desc))
        }
        Command::Convert(Convert::Swf {
            trace,
            parallel,
            procs_per_node,
            max_res,
            platform,
            master,
            window_start,
            window_length,
            utilisation,
            tolerance,
            trim,
            node_cpu,
            cpu_cap,
            procs_reference,
            memory,
            output,
        }) => {
            let t = workload_gen::parse_swf(&read(&trace)?)
                .map_err(|e| anyhow::anyhow!("{}: {e}", trace.display()))?;
            let platform = platform
                .as_deref()
                .map(|p| {
                    let n = compute_machines(p, master.as_deref())?;
                    Ok::<_, anyhow::Error>((
                        u32::try_from(n).unwrap_or(u32::MAX),
                        p.display().to_string(),
                    ))
                })
                .transpose()?;
            let spec = SwfSpec {
                parallel,
                procs_per_node: procs_per_node.map(f64::from),
                max_res,
                platform,
                start: window_start,
                length: window_length,
                utilisation,
                tolerance,
                trim,
                node_cpu,
                cpu_cap,
                procs_reference,
                memory: memory
                    .map(|m| quantity::parse_memory(&m))
                    .transpose()
                    .map_err(anyhow::Error::msg)?,
            };
            let (b, sel) = workload_gen::convert_swf(&t, &spec)
                .map_err(|e| anyhow::anyhow!("{}: {e}", trace.display()))?;
            let name = trace
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            let trimmed_at = trim.map_or("none".to_string(), |t| format!("{t} s"));
            let utilisation = sel
                .utilisation
                .map_or(String::new(), |u| format!(", utilisation {u:.3}"));
            // The fold description is the one the shipped 2020-style files
            // carry, so they regenerate byte for byte.
            let mut desc = match parallel {
                Parallel::Fold => format!(
                    "converted from {name} by batkube workload convert swf: window start {}, {} jobs, \
                     cpu = procs / {} x {node_cpu} (cap {}), durations trimmed at {trimmed_at}{utilisation}",
                    sel.start,
                    b.len(),
                    sel.procs_reference,
                    cpu_cap.unwrap_or(node_cpu),
                ),
                Parallel::Split => format!(
                    "converted from {name} by batkube workload convert swf: window start {}, {} jobs, \
                     res = ceil(procs / {}) machines, one pod each with cpu = procs / res / {} x {node_cpu} \
                     (cap {}), durations trimmed at {trimmed_at}{utilisation}",
                    sel.start,
                    b.len(),
                    sel.procs_per_node,
                    sel.procs_reference,
                    cpu_cap.unwrap_or(node_cpu),
                ),
            };
            if !sel.refused.is_empty() {
                let _ = write!(
                    desc,
                    ", {} jobs left out (more machines than {})",
                    sel.refused.len(),
                    match (&max_res, &spec.platform) {
                        (Some(m), Some((n, p))) => format!("--max-res {m} or the {n} of {p}"),
                        (Some(m), None) => format!("--max-res {m}"),
                        (None, Some((n, p))) => format!("the {n} of {p}"),
                        (None, None) => String::new(),
                    }
                );
            }
            eprintln!(
                "{}: {} jobs ({} lines skipped, {} durations trimmed, {} run times of 0 s raised to \
                 1 s, {} left out), window start {}, procs reference {}{utilisation}",
                trace.display(),
                b.len(),
                t.skipped,
                sel.trimmed,
                sel.raised,
                sel.refused.len(),
                sel.start,
                sel.procs_reference,
            );
            if parallel == Parallel::Split {
                eprintln!(
                    "{}: {} procs per node ({}); {}",
                    trace.display(),
                    sel.procs_per_node,
                    sel.procs_per_node_from,
                    b.res_summary()
                );
            }
            for r in sel.refused.iter().take(REFUSED_LISTED) {
                eprintln!(
                    "{}:{}: job {} left out: {}",
                    trace.display(),
                    r.line,
                    r.id,
                    r.reason
                );
            }
            if sel.refused.len() > REFUSED_LISTED {
                eprintln!(
                    "{}: … and {} more jobs left out",
                    trace.display(),
                    sel.refused.len() - REFUSED_LISTED
                );
            }
            write_out(output.as_deref(), &b.to_json(&desc))
        }
        Command::Convert(Convert::Volcano { pods_csv, output }) => {
            let b = workload_gen::convert_volcano_pods(&read(&pods_csv)?)
                .map_err(|e| anyhow::anyhow!("{}: {e}", pods_csv.display()))?;
            let name = pods_csv.display().to_string();
            write_out(
                output.as_deref(),
                &b.to_json(&format!(
                    "converted from {name} by batkube workload convert volcano"
                )),
            )
        }
    }
}
