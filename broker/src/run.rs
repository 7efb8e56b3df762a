//! `batkube run` and `batkube serve`: putting the pieces together.
//!
//! `run` starts the API, the scheduler under the shim (with a generated
//! kubeconfig), Batsim (the real one when given or on PATH, else the
//! built-in stand-in, in-process) and the broker; waits for the end; writes
//! the outputs; tears everything down whatever happened. `serve` runs only
//! the API and the broker, for users who start Batsim and their scheduler
//! themselves.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use parking_lot::Mutex;
use timeshim::policy::{Backoff, PolicyConfig, WindowEnd};
use timeshim::{ClockMode, Controller, ShimMode};

use crate::broker::kubelet::{KubeletModel, Latency};
use crate::broker::record::{self, EndReason};
use crate::broker::sync::ShimSide;
use crate::broker::{sim_time, Broker, BrokerConfig, Classified, SchedulerSide, SimClock};
use crate::ending::{error_text, Incomplete, Interrupt, Reaper, Shared, Stopped};
use batsim::link::{BatsimLink, DEFAULT_ENDPOINT};
use batsim::platform::Platform;
use batsim::standin::{Options, StandIn};
use batsim::workload::Workload;

/// How simulated time moves: the policies of timeshim, as flags.
#[derive(Debug, Clone, clap::Args)]
pub struct ClockArgs {
    /// `exact` (the default under the shim): a window ends when the
    /// scheduler is quiescent. `timeout`: at the first decision or after
    /// --timeout of wall time.
    #[arg(long = "sync", value_parser = ["exact", "timeout"])]
    pub sync: Option<String>,
    /// Wall time to wait for the scheduler in each window (timeout policy).
    #[arg(long = "timeout", default_value = "50ms", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Never close a window before this much wall time.
    #[arg(long = "min-delay", default_value = "0s", value_parser = parse_duration)]
    pub min_delay: Duration,
    /// Backoff wake-ups: first timestep (simulated seconds); enables backoff.
    #[arg(long = "base-timestep")]
    pub base_timestep: Option<f64>,
    /// Backoff wake-ups: largest timestep (simulated seconds).
    #[arg(long = "max-timestep", default_value_t = 1000.0)]
    pub max_timestep: f64,
    /// Backoff wake-ups: growth factor while nothing is decided.
    #[arg(long = "backoff-multiplier", default_value_t = 2.0)]
    pub backoff_multiplier: f64,
    /// With no pending pod, let Batsim jump to its next event.
    #[arg(long = "fast-forward", default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub fast_forward: bool,
    /// Fail when pods are pending, nothing runs and nothing was decided for
    /// this many simulated seconds.
    #[arg(long = "scheduler-crash-timeout")]
    pub crash_timeout: Option<f64>,
    /// `frozen` (default): decisions take no simulated time. `realtime`:
    /// simulated time runs with wall time during a window.
    #[arg(long = "clock", value_parser = ["frozen", "realtime"])]
    pub clock: Option<String>,
    /// Exact policy: wall-clock safety bound of one window.
    #[arg(long = "window-bound", default_value = "60s", value_parser = parse_duration)]
    pub window_bound: Duration,
}

impl ClockArgs {
    /// The policy, given whether the scheduler runs under the shim.
    pub fn policy(&self, shim: bool) -> anyhow::Result<PolicyConfig> {
        let sync = self
            .sync
            .clone()
            .unwrap_or_else(|| if shim { "exact" } else { "timeout" }.into());
        let mut p = match sync.as_str() {
            "exact" => {
                if !shim {
                    bail!(
                        "--sync exact needs the scheduler under the time shim (batkube run with \
                         --shim linked or preload); use --sync timeout for other schedulers"
                    );
                }
                PolicyConfig::exact(self.window_bound)
            }
            _ => PolicyConfig::timeout(self.timeout),
        };
        if let WindowEnd::Timeout { .. } = p.end {
            p.end = WindowEnd::Timeout {
                timeout: self.timeout,
            };
        }
        // Batkube's model polls with growing timesteps while pods wait;
        // under the exact policy the scheduler's own timers say when.
        let base = match (self.base_timestep, sync.as_str()) {
            (Some(b), _) => Some(b),
            (None, "timeout") => Some(1.0_f64.min(self.max_timestep)),
            (None, _) => None,
        };
        p.min_delay = self.min_delay;
        p.fast_forward = self.fast_forward;
        if let Some(base) = base {
            if !(base > 0.0 && self.max_timestep >= base && self.backoff_multiplier >= 1.0) {
                bail!("backoff needs 0 < --base-timestep <= --max-timestep and --backoff-multiplier >= 1");
            }
            p.backoff = Some(Backoff {
                base: Duration::from_secs_f64(base),
                max: Duration::from_secs_f64(self.max_timestep),
                multiplier: self.backoff_multiplier,
            });
        }
        p.crash_after = self.crash_timeout.map(Duration::from_secs_f64);
        p.clock = match self.clock.as_deref() {
            Some("realtime") => ClockMode::Realtime,
            Some(_) => ClockMode::Frozen,
            None if sync == "exact" => ClockMode::Frozen,
            None => ClockMode::Realtime,
        };
        Ok(p)
    }
}

/// `50ms`, `2s`, `1.5` (seconds), `100us`, `1m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, factor) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else {
        (t, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (examples: 50ms, 2s, 0.5)"))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("{s:?} must be a non-negative duration"));
    }
    Ok(Duration::from_secs_f64(v * factor))
}

/// The kubelet model's flags.
#[derive(Debug, Clone, clap::Args)]
pub struct KubeletArgs {
    /// Image pull latency (seconds or a file of samples), once per node and image.
    #[arg(long = "kubelet-pull")]
    pub pull: Option<String>,
    /// Container start latency (seconds or a file of samples).
    #[arg(long = "kubelet-start")]
    pub start: Option<String>,
    /// Completion-report latency (seconds or a file of samples).
    #[arg(long = "kubelet-report")]
    pub report: Option<String>,
    /// Seed for drawing from sample files.
    #[arg(long = "kubelet-seed", default_value_t = 1)]
    pub seed: u64,
}

impl KubeletArgs {
    fn model(&self) -> anyhow::Result<KubeletModel> {
        let parse = |s: &Option<String>| -> anyhow::Result<Option<Latency>> {
            s.as_deref()
                .map(Latency::parse)
                .transpose()
                .map_err(|e| anyhow::anyhow!(e))
        };
        Ok(KubeletModel::new(
            parse(&self.pull)?,
            parse(&self.start)?,
            parse(&self.report)?,
            self.seed,
        ))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShimChoice {
    /// Linked when the scheduler's binary carries timeshim, else seccomp.
    Auto,
    /// The scheduler links timeshim (`timeshim::install()` in main).
    Linked,
    /// LD_PRELOAD the shim library into an unmodified binary (--shim-lib).
    Preload,
    /// Any unmodified binary (Go, static, C, Rust): its clock reads and
    /// timed waits are answered by a seccomp supervisor in batkube.
    Seccomp,
    /// No shim: the scheduler runs on real time (timeout policy only).
    None,
}

/// The program a `--scheduler` command line runs: its first word after
/// leading `VAR=value` assignments (and an `env` prefix), found on PATH.
fn scheduler_program(command: &str) -> Option<PathBuf> {
    let words = shell_words(command)?;
    let mut it = words.iter().skip_while(|w| {
        w.as_str() == "exec"
            || w.as_str() == "env"
            || (w.contains('=') && !w.starts_with('=') && !w.starts_with('-'))
    });
    let prog = it.next()?;
    if prog.contains('/') {
        return Some(PathBuf::from(prog));
    }
    std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(prog))
                .collect::<Vec<_>>()
        })?
        .into_iter()
        .find(|p| p.is_file())
}

/// The length `--deterministic` gives PATH and PWD: the program's memory
/// layout follows its variables' sizes, so the same run from another
/// directory, or from a tool that prepends to PATH (pyenv's shims do),
/// would otherwise start from another layout.
const FIXED_VARIABLE_LEN: usize = 2048;

/// PATH padded with a directory that does not exist (searched last, never
/// found) to [`FIXED_VARIABLE_LEN`] bytes; a longer PATH is left as is.
fn fixed_length_path(path: &std::ffi::OsStr) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStrExt;
    const PAD: &str = ":/nonexistent-batkube-padding";
    let mut bytes = path.as_bytes().to_vec();
    if bytes.len() + PAD.len() <= FIXED_VARIABLE_LEN {
        bytes.extend_from_slice(PAD.as_bytes());
        bytes.resize(FIXED_VARIABLE_LEN, b'/');
    }
    std::ffi::OsStr::from_bytes(&bytes).to_os_string()
}

/// The working directory as `dir/./././…`, the same directory, at
/// [`FIXED_VARIABLE_LEN`] bytes (the shell keeps a PWD that names the
/// working directory); a longer one is left as is.
fn fixed_length_dir(dir: &std::ffi::OsStr) -> std::ffi::OsString {
    use std::os::unix::ffi::OsStrExt;
    let mut bytes = dir.as_bytes().to_vec();
    while bytes.len() + 2 <= FIXED_VARIABLE_LEN {
        bytes.extend_from_slice(b"/.");
    }
    std::ffi::OsStr::from_bytes(&bytes).to_os_string()
}

/// `exec CMD` for `sh -c`, so that the shell becomes the scheduler (one
/// process to watch and stop). Leading `VAR=value` words go through `env`:
/// `exec VAR=1 cmd` would ask the shell to exec a program named `VAR=1`.
fn exec_line(command: &str) -> String {
    let assigns = shell_words(command)
        .and_then(|w| w.first().cloned())
        .is_some_and(|w| {
            w.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty()
                    && !name.starts_with(|c: char| c.is_ascii_digit())
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            })
        });
    if assigns {
        format!("exec env {command}")
    } else {
        format!("exec {command}")
    }
}

/// Minimal POSIX word splitting (quotes and backslashes, no expansion).
fn shell_words(s: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    cur.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => cur.push(chars.next()?),
                        c => cur.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                cur.push(chars.next()?);
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Some(words)
}

/// Whether a binary links timeshim: its linked shim reads `TIMESHIM_PAGE`.
/// Read in chunks (the upstream kube-scheduler is 80 MB).
fn carries_shim(program: &Path) -> bool {
    use std::io::Read;
    let Ok(mut file) = std::fs::File::open(program) else {
        return false;
    };
    let finder = memchr::memmem::Finder::new(timeshim::ENV_PAGE.as_bytes());
    let keep = finder.needle().len() - 1;
    let mut buf = vec![0u8; 1 << 20];
    let mut filled = 0;
    loop {
        let n = match file.read(&mut buf[filled..]) {
            Ok(0) | Err(_) => return false,
            Ok(n) => n,
        };
        filled += n;
        if finder.find(&buf[..filled]).is_some() {
            return true;
        }
        // The needle may straddle two chunks.
        let tail = filled.saturating_sub(keep);
        buf.copy_within(tail..filled, 0);
        filled -= tail;
    }
}

/// The `schedulerName` of pods whose job names no scheduler: `--scheduler-name`,
/// else the `--gang` style's scheduler (`volcano`: the pods of a Volcano
/// PodGroup are written for it, and its PodGroup controller only groups
/// pods of the names it serves; `yunikorn`, as its admission controller
/// writes), else none (`default-scheduler`).
pub fn scheduler_name(given: Option<String>, gang: crate::translate::GangStyle) -> Option<String> {
    given.or_else(|| gang.scheduler_name().map(str::to_string))
}

/// `--shim auto`: linked when the binary carries the shim, else seccomp.
pub fn resolve_shim(choice: ShimChoice, command: &str) -> ShimChoice {
    match choice {
        ShimChoice::Auto => match scheduler_program(command) {
            Some(p) if carries_shim(&p) => ShimChoice::Linked,
            _ => ShimChoice::Seccomp,
        },
        other => other,
    }
}

/// `batkube run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// SimGrid platform file.
    #[arg(long, short = 'p')]
    pub platform: PathBuf,
    /// Batsim workload (repeat for several).
    #[arg(long = "workload", short = 'w', required = true)]
    pub workloads: Vec<PathBuf>,
    /// The scheduler command line, run as `sh -c 'exec CMD'` in batkube's
    /// working directory, for example 'batkube-scheduler --config
    /// sched.yaml' or 'RUST_LOG=debug my-scheduler'. Its environment has
    /// KUBECONFIG (a kubeconfig for the API, also in --out as
    /// kubeconfig.yaml; programs that ignore the variable take
    /// --kubeconfig "$KUBECONFIG"); its output goes to --out/scheduler.log.
    #[arg(long)]
    pub scheduler: String,
    /// Another program of the control plane beside the scheduler (a queue
    /// or job controller, Volcano's controller manager), repeatable: run as
    /// the scheduler is (`sh -c 'exec CMD'`, the same --shim, on the same
    /// simulated clock), with its own kubeconfig in KUBECONFIG
    /// (--out/kubeconfig-controller-N.yaml) and its output in
    /// --out/controller-N.log (N from 1, in flag order). Quiescence and
    /// timers cover every one of them; one that exits ends the run
    /// (`controller-exited`), as the scheduler's exit does.
    #[arg(long = "controller", value_name = "CMD")]
    pub controllers: Vec<String>,
    /// Output directory (created if needed).
    #[arg(long)]
    pub out: PathBuf,
    /// Real Batsim binary; without it, `batsim` on PATH, else the built-in stand-in.
    #[arg(long)]
    pub batsim: Option<PathBuf>,
    /// Use the built-in stand-in even if Batsim is installed.
    #[arg(long = "standin")]
    pub standin: bool,
    /// How the scheduler gets simulated time (`auto`: linked when its
    /// binary carries timeshim, else seccomp, which works for any binary).
    #[arg(long, value_enum, default_value_t = ShimChoice::Auto)]
    pub shim: ShimChoice,
    /// Under `--shim seccomp`: make the randomness the scheduler reads
    /// (AT_RANDOM, getrandom) a deterministic stream from this seed.
    #[arg(long = "seed", value_name = "N")]
    pub scheduler_seed: Option<u64>,
    /// Under `--shim seccomp`: run each program's threads one at a time, in
    /// an order decided by the program's state and the seed (0 without
    /// `--seed`), and let a thread read from the API only once everything
    /// it asked for has been answered: the same inputs and seed give the
    /// same outputs, at any machine load. The default with `--seed`. The
    /// program starts with PATH and batkube's variables only (put a
    /// variable it needs in its command). See README, "What is
    /// reproducible", for what it covers and what not yet.
    #[arg(long)]
    pub deterministic: bool,
    /// With `--seed`: the seed decides the program's randomness only, and
    /// its threads run as the OS schedules them (faster; outcomes may
    /// change from run to run).
    #[arg(long = "no-deterministic", conflicts_with = "deterministic")]
    pub no_deterministic: bool,
    /// Under a shim, the scheduler starts this many simulated seconds
    /// before the simulation's time 0, with the nodes already there, and
    /// runs its own timers until then (the upstream kube-scheduler polls for
    /// its caches to sync every 100 ms): the workload meets a ready
    /// scheduler, as on a real cluster.
    #[arg(long = "warm-up", value_name = "SECS", default_value_t = 1.0)]
    pub warm_up: f64,
    /// The preloadable shim library (libtimeshim.so) for --shim preload.
    #[arg(long = "shim-lib")]
    pub shim_lib: Option<PathBuf>,
    /// `schedulerName` of every pod whose job names no scheduler (default:
    /// `default-scheduler`, or `volcano` under `--gang volcano`), for a
    /// scheduler that serves another name.
    #[arg(long = "scheduler-name", value_name = "NAME")]
    pub scheduler_name: Option<String>,
    /// A binding that overcommits a node fails the run.
    #[arg(long)]
    pub strict: bool,
    /// Pods still pending when nothing else can happen are rejected after
    /// this many simulated seconds without a decision.
    #[arg(long = "give-up-after", default_value_t = 600.0)]
    pub give_up_after: f64,
    /// Terminated pods kept in the API (kube-controller-manager's pod GC):
    /// beyond it the oldest are deleted; 0 keeps every pod.
    #[arg(long = "terminated-pod-gc-threshold", default_value_t = crate::broker::podgc::DEFAULT_THRESHOLD)]
    pub terminated_pod_gc_threshold: usize,
    /// How a parallel job's gang of pods is written for the scheduler:
    /// coscheduling (a scheduling.x-k8s.io PodGroup, kubernetes-sigs/
    /// scheduler-plugins), volcano (a scheduling.volcano.sh PodGroup),
    /// kueue (Kueue's pod-group labels; pods of a job with a queue also
    /// get what Kueue's pod webhook writes: labels, finalizer, admission
    /// gate), yunikorn (what YuniKorn's admission controller writes, and a
    /// task group per gang: YuniKorn makes its placeholders), none (plain
    /// pods). Every gang's pods carry a required anti-affinity on
    /// kubernetes.io/hostname.
    #[arg(long = "gang", value_enum, default_value_t = crate::translate::GangStyle::Coscheduling)]
    pub gang: crate::translate::GangStyle,
    /// The queue of every job whose Batsim job names no `queue`, for the
    /// gang styles with queues (volcano: the PodGroup's `spec.queue` and the
    /// pods' `scheduling.volcano.sh/queue-name`, else Volcano's `default`;
    /// kueue: the `kueue.x-k8s.io/queue-name` label of a gang's pods).
    #[arg(long = "default-queue", value_name = "NAME")]
    pub default_queue: Option<String>,
    /// CustomResourceDefinitions (and any other objects) to install in the
    /// API before the scheduler starts: a file or a directory of YAML/JSON
    /// manifests, multi-document (repeatable). The PodGroup of
    /// `--gang coscheduling` is installed without it.
    #[arg(long = "crds", value_name = "PATH")]
    pub crds: Vec<PathBuf>,
    /// ZeroMQ endpoint for real Batsim (default: a free port on 127.0.0.1
    /// chosen when batkube starts Batsim, so that runs in parallel never
    /// collide).
    #[arg(long = "socket-endpoint")]
    pub socket: Option<String>,
    /// Record the whole conversation with Batsim in FILE (the shared
    /// transcript format: seq, dir, wall, raw, msg per message).
    #[arg(long = "record-protocol", value_name = "FILE")]
    pub record_protocol: Option<PathBuf>,
    /// Write report.html in --out at the end (as `batkube report`), however the run ends.
    #[arg(long = "report")]
    pub write_report: bool,
    /// Why each pod went where it went: the scheduler gets BATKUBE_EXPLAIN=1
    /// in its environment (batkube-scheduler then writes every attempt's
    /// filter verdicts per node, scores and choice on the pod, in the
    /// kube-scheduler-simulator's annotations), and the attempts go to
    /// --out/decisions.jsonl, shown in the report's pod table. (A
    /// scheduler writing those annotations is recorded without the flag.)
    #[arg(long)]
    pub explain: bool,
    #[command(flatten)]
    pub clock: ClockArgs,
    #[command(flatten)]
    pub kubelet: KubeletArgs,
    #[command(flatten)]
    pub dynamics: crate::dynamics::DynamicsArgs,
}

/// `batkube serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Where Batsim connects.
    #[arg(long = "socket-endpoint", short = 's', default_value = DEFAULT_ENDPOINT)]
    pub socket: String,
    /// API address.
    #[arg(long = "api", default_value = "127.0.0.1:8001")]
    pub api: std::net::SocketAddr,
    /// Output directory (kubeconfig, pods.csv, nodes.csv, summary.json).
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long)]
    pub strict: bool,
    #[arg(long = "give-up-after", default_value_t = 600.0)]
    pub give_up_after: f64,
    /// Terminated pods kept in the API (kube-controller-manager's pod GC):
    /// beyond it the oldest are deleted; 0 keeps every pod.
    #[arg(long = "terminated-pod-gc-threshold", default_value_t = crate::broker::podgc::DEFAULT_THRESHOLD)]
    pub terminated_pod_gc_threshold: usize,
    /// How a parallel job's gang of pods is written for the scheduler:
    /// coscheduling (a scheduling.x-k8s.io PodGroup, kubernetes-sigs/
    /// scheduler-plugins), volcano (a scheduling.volcano.sh PodGroup),
    /// kueue (Kueue's pod-group labels), yunikorn (YuniKorn's task
    /// groups), none (plain pods). Every gang's
    /// pods carry a required anti-affinity on kubernetes.io/hostname.
    #[arg(long = "gang", value_enum, default_value_t = crate::translate::GangStyle::Coscheduling)]
    pub gang: crate::translate::GangStyle,
    /// The queue of every job whose Batsim job names no `queue`, for the
    /// gang styles with queues (volcano: the PodGroup's `spec.queue` and the
    /// pods' `scheduling.volcano.sh/queue-name`, else Volcano's `default`;
    /// kueue: the `kueue.x-k8s.io/queue-name` label of a gang's pods).
    #[arg(long = "default-queue", value_name = "NAME")]
    pub default_queue: Option<String>,
    /// CustomResourceDefinitions (and any other objects) to install in the
    /// API before the scheduler starts: a file or a directory of YAML/JSON
    /// manifests, multi-document (repeatable). The PodGroup of
    /// `--gang coscheduling` is installed without it.
    #[arg(long = "crds", value_name = "PATH")]
    pub crds: Vec<PathBuf>,
    /// Record the whole conversation with Batsim in FILE (the shared
    /// transcript format: seq, dir, wall, raw, msg per message).
    #[arg(long = "record-protocol", value_name = "FILE")]
    pub record_protocol: Option<PathBuf>,
    /// Write report.html in --out at the end (as `batkube report`), however the run ends.
    #[arg(long = "report")]
    pub write_report: bool,
    /// Record the attempts the scheduler explains on its pods in
    /// --out/decisions.jsonl (created even if none come; start the
    /// scheduler explaining: `batkube-scheduler --explain` or
    /// BATKUBE_EXPLAIN=1). Without the flag, they are recorded if any come.
    #[arg(long)]
    pub explain: bool,
    #[command(flatten)]
    pub clock: ClockArgs,
    #[command(flatten)]
    pub kubelet: KubeletArgs,
}

/// A child is killed when batkube dies, even by SIGKILL (no orphans), and
/// leads its own process group, so that stopping it stops whatever it
/// forked (a wrapper script's children); a Ctrl-C at the terminal reaches
/// batkube only, which then stops the group.
fn own_group_dying_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

fn find_batsim(args: &RunArgs) -> Option<PathBuf> {
    if args.standin {
        return None;
    }
    if let Some(p) = &args.batsim {
        return Some(p.clone());
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("batsim"))
            .find(|p| p.is_file())
    })
}

fn flags() -> std::collections::BTreeMap<String, String> {
    let args: Vec<String> = std::env::args().collect();
    let mut m = std::collections::BTreeMap::new();
    m.insert("command_line".into(), args.join(" "));
    m
}

/// A program of the run on simulated time: the scheduler (index 0) or a
/// `--controller` (index N from 1).
struct Program {
    index: usize,
    /// `--shim` resolved for this program's command.
    shim: ShimChoice,
    /// How messages name it.
    name: String,
    command: String,
    /// Its output, in --out.
    log: String,
}

fn processes(args: &RunArgs) -> Vec<Program> {
    let mut all = vec![Program {
        index: 0,
        shim: resolve_shim(args.shim, &args.scheduler),
        name: "the scheduler".into(),
        command: args.scheduler.clone(),
        log: "scheduler.log".into(),
    }];
    for (i, c) in args.controllers.iter().enumerate() {
        let n = i + 1;
        all.push(Program {
            index: n,
            shim: resolve_shim(args.shim, c),
            name: format!("controller {n} ({})", short_command(c)),
            command: c.clone(),
            log: format!("controller-{n}.log"),
        });
    }
    all
}

/// A command line as messages quote it: its first 60 characters.
fn short_command(c: &str) -> String {
    let c = c.trim();
    match c.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &c[..i]),
        None => c.to_string(),
    }
}

/// The API server on simulated time, and the kubeconfig clients use.
struct Api {
    rt: tokio::runtime::Runtime,
    /// The API runtime's workers not parked (see `sync::settle_hook`).
    awake: Arc<std::sync::atomic::AtomicI64>,
    clock: SimClock,
    store: fakeapi::Store,
    server: fakeapi::RunningServer,
    kubeconfig: PathBuf,
}

/// The objects to install in the API before the run (`--crds`, and the
/// group kind `--gang` writes), checked now: a bad manifest is refused with
/// its file, document and reason, and a gang style whose group kind would
/// not be served stops the run before it starts.
fn api_objects(
    crds: &[PathBuf],
    gang: crate::translate::GangStyle,
) -> anyhow::Result<Vec<fakeapi::Manifest>> {
    let mut all = Vec::new();
    for path in crds {
        all.extend(fakeapi::load_manifests(path).map_err(|e| anyhow::anyhow!("--crds: {e}"))?);
    }
    let defines = |all: &[fakeapi::Manifest], resource: &str| {
        all.iter().any(|m| {
            let o = &m.object;
            o["kind"] == "CustomResourceDefinition"
                && format!(
                    "{}.{}",
                    o["spec"]["names"]["plural"].as_str().unwrap_or(""),
                    o["spec"]["group"].as_str().unwrap_or("")
                ) == resource
        })
    };
    if let Some(resource) = gang.group_resource() {
        if !defines(&all, resource) {
            if gang == crate::translate::GangStyle::Coscheduling {
                // batkube's own definition (fakeapi/crds), for the stand-in
                // path to need nothing else.
                let object: serde_json::Value =
                    serde_yaml::from_str(fakeapi::COSCHEDULING_PODGROUP_CRD)
                        .context("the shipped PodGroup CRD")?;
                all.insert(
                    0,
                    fakeapi::Manifest {
                        file: PathBuf::from("(batkube's PodGroup CRD)"),
                        document: 1,
                        object,
                    },
                );
            } else {
                bail!(
                    "--gang {} writes {resource} objects, whose CustomResourceDefinition is not \
                     installed: give it with --crds PATH (the project's CRD manifests), or choose \
                     another --gang",
                    gang.as_str()
                );
            }
        }
    }
    fakeapi::check_manifests(&all).map_err(|e| anyhow::anyhow!("--crds: {e}"))?;
    Ok(all)
}

/// `timers`: what the API's watch timers (timeoutSeconds, bookmarks) run
/// on: the simulated clock under `run` (the broker fires them), the wall
/// clock under `serve` (the user's scheduler runs on real time).
fn start_api(
    addr: std::net::SocketAddr,
    out: &Path,
    start: f64,
    timers: fakeapi::WatchTimers,
    objects: &[fakeapi::Manifest],
    id_seed: Option<u64>,
    frame_per_event: bool,
) -> anyhow::Result<Api> {
    // Workers start running, park when they find nothing to do, unpark
    // when woken: how many are awake says whether the API is still working
    // on what it was given (the settle of `--deterministic`).
    const WORKERS: usize = 2;
    let awake = Arc::new(std::sync::atomic::AtomicI64::new(WORKERS as i64));
    let (park, unpark) = (awake.clone(), awake.clone());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKERS)
        .on_thread_park(move || {
            if park.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1 {
                // The API has done all it can: a deterministic program's
                // supervisor waiting for that goes on at once.
                timeshim::settle_progress();
            }
        })
        .on_thread_unpark(move || {
            unpark.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        })
        .enable_all()
        .build()?;
    let clock = SimClock::starting_at(start);
    let store = fakeapi::Store::with_config(fakeapi::StoreConfig {
        clock: clock.store_clock(),
        // A watch resumes from at most this many changes back per resource
        // (older: 410 Gone and a relist, as with a real API server's watch
        // cache). The default (100k) kept every pod version of an 18k-job
        // trace in memory: 1.2 GB.
        watch_history: 10_000,
        watch_timers: timers,
        id_seed,
        frame_per_event,
        ..Default::default()
    });
    store
        .install_manifests(objects)
        .map_err(|e| anyhow::anyhow!("--crds: {e}"))?;
    let server = rt
        .block_on(fakeapi::serve(store.clone(), addr))
        .with_context(|| format!("starting the API server on {addr}"))?;
    let kubeconfig = out.join("kubeconfig.yaml");
    std::fs::write(&kubeconfig, fakeapi::kubeconfig_yaml(server.addr()))
        .with_context(|| format!("writing {}", kubeconfig.display()))?;
    Ok(Api {
        rt,
        awake,
        clock,
        store,
        server,
        kubeconfig,
    })
}

/// What a run started that the teardown must know of.
struct Started {
    link: Option<BatsimLink>,
    standin: Option<std::thread::JoinHandle<anyhow::Result<batsim::standin::RunSummary>>>,
}

/// Runs a whole simulation; `Ok(summary)` only if it completed and no
/// invariant failed. Once the API is up, every ending (done, a signal, a
/// child that died, a failed invariant, a bound hit) writes pods.csv,
/// nodes.csv, summary.json (and jobs.csv if Batsim could not), stops the
/// children and removes the clock page; a run that did not complete
/// returns [`Incomplete`].
pub fn run(mut args: RunArgs) -> anyhow::Result<record::Summary> {
    // A seed names an outcome: the same seed, the same outputs.
    if args.scheduler_seed.is_some() && !args.no_deterministic {
        args.deterministic = true;
    }
    let children = Shared::default();
    let interrupt = Interrupt::install(children.clone());
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating the output directory {}", args.out.display()))?;
    let out = args.out.clone();
    // Inputs are checked before anything starts.
    let platform = Platform::from_file(&args.platform)?;
    let mut workloads = Vec::new();
    for (i, p) in args.workloads.iter().enumerate() {
        workloads.push(Workload::from_file(p, &format!("w{i}"))?);
    }
    let shim_choice = resolve_shim(args.shim, &args.scheduler);
    let shim = shim_choice != ShimChoice::None;
    if args.scheduler_seed.is_some() && shim_choice != ShimChoice::Seccomp {
        anyhow::bail!(
            "--seed works under the seccomp supervisor only (the scheduler runs with --shim {:?}); add --shim seccomp",
            shim_choice
        );
    }
    if args.deterministic {
        // Every program under the supervisor: one left to the OS decides
        // by its own thread timing, and the settle counts the sends the
        // supervisors let through.
        for p in processes(&args) {
            if p.shim != ShimChoice::Seccomp {
                anyhow::bail!(
                    "--deterministic works under the seccomp supervisor only ({} runs with --shim {:?}); add --shim seccomp",
                    p.name,
                    p.shim
                );
            }
        }
    }
    let policy = args.clock.policy(shim)?;
    if !(args.warm_up >= 0.0 && args.warm_up.is_finite()) {
        bail!(
            "--warm-up must be a non-negative number of seconds, not {}",
            args.warm_up
        );
    }
    // Each program's mode: `--shim auto` resolves per program (a Go
    // controller beside a linked scheduler goes under seccomp).
    let shim_mode = |choice: ShimChoice, index: usize| -> anyhow::Result<Option<ShimMode>> {
        Ok(match choice {
            ShimChoice::Preload => Some(ShimMode::Preloaded(args.shim_lib.clone().ok_or_else(
                || anyhow::anyhow!("--shim preload needs --shim-lib PATH/libtimeshim.so"),
            )?)),
            // Another seed per process: two Go programs given the same
            // AT_RANDOM would share their hash seeds.
            ShimChoice::Seccomp => Some(ShimMode::Seccomp {
                seed: args.scheduler_seed.map(|s| s.wrapping_add(index as u64)),
                deterministic: args.deterministic,
            }),
            ShimChoice::None => None,
            _ => Some(ShimMode::Linked),
        })
    };
    for p in processes(&args) {
        shim_mode(p.shim, p.index)?;
    }
    let kubelet = args.kubelet.model()?;
    let objects = api_objects(&args.crds, args.gang)?;
    let lifecycle = args.dynamics.config(&platform, &workloads, &objects)?;
    interrupt.check()?;
    let Api {
        rt,
        awake,
        clock,
        store,
        server,
        kubeconfig,
    } = start_api(
        "127.0.0.1:0".parse()?,
        &out,
        if shim { -args.warm_up } else { 0.0 },
        // Nothing of the API's may happen at a wall-clock instant.
        fakeapi::WatchTimers::Simulated(Default::default()),
        &objects,
        // UIDs and generated names from a stream, the same on every run
        // (programs key their caches by UID), another one per seed.
        Some(args.scheduler_seed.unwrap_or(0)),
        // Under --deterministic the bytes a program reads must not depend
        // on how far a watch's queue had filled when it wrote.
        args.deterministic,
    )?;
    // Declared after the API and the controller: dropped (children stopped)
    // before them, on every path.
    // One clock page per process (the scheduler, then each controller),
    // all moved as one clock by the broker.
    let programs = processes(&args);
    let mut clocks: Vec<Arc<Controller>> = Vec::new();
    if shim {
        for _ in &programs {
            let c =
                Controller::new(sim_time(-args.warm_up)).context("creating the shim clock page")?;
            c.set_clock_mode(policy.clock);
            children.0.lock().files.push(c.page_path().to_path_buf());
            clocks.push(Arc::new(c));
        }
    }
    let controller = clocks.first().cloned();
    let reaper = Reaper(children.clone());
    let diag: Arc<parking_lot::Mutex<Option<crate::broker::sync::SockDiag>>> = Default::default();
    let side = if shim {
        SchedulerSide::Shim(ShimSide {
            procs: programs
                .iter()
                .zip(&clocks)
                .map(|(p, c)| crate::broker::sync::SimProcess {
                    name: p.name.clone(),
                    controller: c.clone(),
                    is_scheduler: p.index == 0,
                })
                .collect(),
            activity: server.activity(),
            api_port: server.addr().port(),
            diag: diag.clone(),
        })
    } else {
        SchedulerSide::External
    };
    let mut broker = Broker::new(
        store.clone(),
        rt.handle().clone(),
        clock,
        side,
        BrokerConfig {
            policy,
            strict: args.strict,
            kubelet,
            give_up_after: args.give_up_after,
            terminated_pod_gc_threshold: args.terminated_pod_gc_threshold,
            gang: args.gang,
            progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
            activity: Some(server.activity()),
            scheduler_name: scheduler_name(args.scheduler_name.clone(), args.gang),
            default_queue: args.default_queue.clone(),
            lifecycle,
        },
    );
    if args.deterministic {
        let hook = crate::broker::sync::settle_hook(
            server.activity(),
            diag.clone(),
            server.addr().port(),
            store.clone(),
            broker.processed_changes(),
            awake.clone(),
            clocks.clone(),
        );
        for c in &clocks {
            c.set_settle(hook.clone());
        }
        // Several programs: one thread of all of them at a time, so that
        // which one's request reaches the API first is the seed's choice.
        if clocks.len() > 1 {
            let ensemble = timeshim::Ensemble::new(clocks.len(), args.scheduler_seed.unwrap_or(0));
            for (i, c) in clocks.iter().enumerate() {
                c.join_ensemble(&ensemble, i);
            }
        }
    }
    broker
        .stream_timeline(&out.join("timeline.csv"))
        .with_context(|| format!("writing {}", out.join("timeline.csv").display()))?;
    broker
        .stream_records(&out)
        .with_context(|| format!("writing pods.csv and nodes.csv in {}", out.display()))?;
    broker
        .stream_decisions(&out.join("decisions.jsonl"), args.explain)
        .with_context(|| format!("writing {}", out.join("decisions.jsonl").display()))?;
    let metrics = Arc::new(Mutex::new(String::new()));
    {
        let m = metrics.clone();
        server.set_extra_metrics(move || m.lock().clone());
    }

    let mut started = Started {
        link: None,
        standin: None,
    };
    // Under --deterministic a program's outcome is a function of the bytes
    // it starts with: the length of its command line and environment moves
    // its memory layout, which Go's garbage collector pacing and its maps
    // keyed by pointers see. So its kubeconfig path must not depend on
    // --out: each program gets a copy at a path of fixed length (removed at
    // the end of the run).
    let fixed_paths = if args.deterministic {
        Some(
            tempfile::Builder::new()
                .prefix("batkube-")
                .rand_bytes(12)
                .tempdir()
                .context("creating a directory for the programs' kubeconfigs")?,
        )
    } else {
        None
    };
    let result = (|| -> anyhow::Result<()> {
        // The scheduler and the controllers, under the shim. Under
        // --deterministic with several programs, none moves before every
        // one has started (see `timeshim::Ensemble`): they start at once,
        // each on its own thread, and each start waits for its program to
        // be past its shell wrapper, which needs the others to be there.
        let mut starts = Vec::new();
        for p in &programs {
            let log_path = out.join(&p.log);
            let log = std::fs::File::create(&log_path)
                .with_context(|| format!("creating {}", log_path.display()))?;
            let own_kubeconfig = if p.index == 0 {
                kubeconfig.clone()
            } else {
                let path = out.join(format!("kubeconfig-controller-{}.yaml", p.index));
                let text = fakeapi::kubeconfig_yaml(server.addr())
                    .replace("user: batkube", &format!("user: controller-{}", p.index))
                    .replace(
                        "- name: batkube\n  user:",
                        &format!("- name: controller-{}\n  user:", p.index),
                    );
                std::fs::write(&path, text)
                    .with_context(|| format!("writing {}", path.display()))?;
                path
            };
            let own_kubeconfig = match &fixed_paths {
                Some(dir) => {
                    let path = dir.path().join(format!("kubeconfig-{}.yaml", p.index));
                    std::fs::copy(&own_kubeconfig, &path)
                        .with_context(|| format!("writing {}", path.display()))?;
                    path
                }
                None => own_kubeconfig,
            };
            let mut cmd = Command::new("sh");
            if args.deterministic {
                // The program's memory layout follows the size of every
                // variable of its environment (Go's runtime copies each to
                // its heap), and Go's garbage collector pacing and its maps
                // keyed by pointers see the layout: one more character in
                // OLDPWD after a `cd` could change the outcome. So it
                // starts with PATH and what batkube sets, nothing else; a
                // variable it needs goes in the command (`GOGC=50 prog`).
                cmd.env_clear();
                if let Some(path) = std::env::var_os("PATH") {
                    cmd.env("PATH", fixed_length_path(&path));
                }
                // The shell adds PWD (the working directory) if it is not
                // there: given here at a fixed length too.
                if let Ok(dir) = std::env::current_dir() {
                    cmd.env("PWD", fixed_length_dir(dir.as_os_str()));
                }
                // A home and a user name, which many programs look up
                // (controller-runtime's kubeconfig loading fails without
                // them in a binary built without cgo): the run's own
                // directory, of fixed length, and a fixed name.
                if let Some(dir) = &fixed_paths {
                    cmd.env("HOME", dir.path())
                        .env("USER", "batkube")
                        .env("LOGNAME", "batkube");
                }
            }
            cmd.arg("-c")
                .arg(exec_line(&p.command))
                .env("KUBECONFIG", &own_kubeconfig)
                // The run's seed, for the command (`--tie-break-seed
                // $BATKUBE_SEED`): it reaches the program under
                // --deterministic too, whose environment is cleared.
                .envs(args.scheduler_seed.map(|s| ("BATKUBE_SEED", s.to_string())))
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log);
            if args.explain && p.index == 0 {
                // Read by batkube-scheduler (its --explain); other
                // schedulers ignore it.
                cmd.env("BATKUBE_EXPLAIN", "1");
            }
            own_group_dying_with_parent(&mut cmd);
            starts.push((p, cmd, shim_mode(p.shim, p.index)?));
        }
        // Only a seccomp start may run on a thread of its own: its
        // launcher forks from a thread that stays, while a plain spawn
        // forks from the calling thread, and the child's death signal
        // (`own_group_dying_with_parent`) fires when that thread ends.
        let started_children: Vec<std::io::Result<std::process::Child>> =
            std::thread::scope(|scope| {
                enum Start<'s> {
                    Done(std::io::Result<std::process::Child>),
                    Running(
                        std::thread::ScopedJoinHandle<'s, std::io::Result<std::process::Child>>,
                    ),
                }
                let starts: Vec<Start> = starts
                    .into_iter()
                    .map(|(p, mut cmd, mode)| match (clocks.get(p.index), mode) {
                        (Some(c), Some(mode @ ShimMode::Seccomp { .. })) => {
                            tracing::info!(shim = ?p.shim, "starting {}", p.name);
                            Start::Running(scope.spawn(move || c.spawn(cmd, &mode)))
                        }
                        (Some(c), Some(mode)) => {
                            tracing::info!(shim = ?p.shim, "starting {}", p.name);
                            Start::Done(c.spawn(cmd, &mode))
                        }
                        _ => Start::Done(cmd.spawn()),
                    })
                    .collect();
                starts
                    .into_iter()
                    .map(|s| match s {
                        Start::Done(r) => r,
                        Start::Running(h) => h
                            .join()
                            .unwrap_or_else(|_| Err(std::io::Error::other("panicked"))),
                    })
                    .collect()
            });
        // Every child started is kept (and stopped on every path) before a
        // failure is reported.
        let mut first_error = None;
        for (p, child) in programs.iter().zip(started_children) {
            match child {
                Ok(child) => {
                    let mut ch = children.0.lock();
                    if p.index == 0 {
                        ch.scheduler = Some(child);
                    } else {
                        ch.controllers.push(child);
                    }
                }
                Err(e) => {
                    first_error.get_or_insert_with(|| {
                        anyhow::Error::new(e).context(format!("starting {}: {}", p.name, p.command))
                    });
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        interrupt.check()?;

        // Batsim: real when available, else the stand-in in-process.
        match find_batsim(&args) {
            Some(batsim) => {
                // A free port unless the user fixed the endpoint: runs in
                // parallel must not collide on Batsim's default 28000.
                let requested = args
                    .socket
                    .clone()
                    .unwrap_or_else(|| "tcp://127.0.0.1:*".to_string());
                let link = BatsimLink::bind(&requested)?;
                let endpoint = link.endpoint().unwrap_or(&requested).to_string();
                started.link = Some(link);
                let mut c = Command::new(&batsim);
                c.arg("-p").arg(&args.platform);
                for w in &args.workloads {
                    c.arg("-w").arg(w);
                }
                let file = |name: &str| {
                    let p = out.join(name);
                    std::fs::File::create(&p).with_context(|| format!("creating {}", p.display()))
                };
                c.arg("-e")
                    .arg(format!("{}/", out.display()))
                    .arg("-s")
                    .arg(&endpoint)
                    .arg("--enable-compute-sharing");
                for e in &args.dynamics.events {
                    c.arg("--events").arg(e);
                }
                if args.dynamics.resubmit_evicted {
                    c.arg("--enable-dynamic-jobs")
                        .arg("--acknowledge-dynamic-jobs");
                }
                c.stdin(Stdio::null())
                    .stdout(file("batsim.log")?)
                    .stderr(file("batsim.err.log")?);
                own_group_dying_with_parent(&mut c);
                let child = c
                    .spawn()
                    .with_context(|| format!("starting Batsim: {}", batsim.display()))?;
                children.0.lock().batsim = Some(child);
            }
            None => {
                let (link, mut batsim_side) = BatsimLink::in_process();
                started.link = Some(link);
                let opts = Options {
                    compute_sharing: true,
                    export_prefix: Some(PathBuf::from(format!("{}/", out.display()))),
                    events: args.dynamics.events.clone(),
                    dynamic_jobs: args.dynamics.resubmit_evicted,
                    acknowledge_dynamic_jobs: args.dynamics.resubmit_evicted,
                    ..Options::default()
                };
                let sim = StandIn::new(platform, workloads, opts)?;
                started.standin = Some(
                    std::thread::Builder::new()
                        .name("batsim-standin".into())
                        .spawn(move || sim.run(&mut batsim_side))?,
                );
            }
        };

        wait_for_scheduler(
            &store,
            &children,
            &interrupt,
            args.clock.window_bound,
            &out,
            &mut || broker.take_early_changes(),
        )?;
        if let Some(e) = batsim_exited(&children, &out) {
            return Err(e.into());
        }
        for (p, c) in programs.iter().zip(&clocks) {
            check_attached(c, &p.name, p.shim, &interrupt)?;
        }
        let link = started.link.as_mut().expect("set above");
        if let Some(path) = &args.record_protocol {
            link.record_to(batsim::transcript::Recorder::create(path)?);
        }
        let watch = || -> anyhow::Result<()> {
            interrupt.check()?;
            match batsim_exited(&children, &out) {
                Some(e) => Err(e.into()),
                None => Ok(()),
            }
        };
        drive(&mut broker, link, &metrics, rt.handle(), watch)
    })();
    drop(started.link.take());
    let standin_result = started.standin.take().map(|h| h.join());
    let (_, _, mut summary) = broker.report();
    summary.flags = flags();
    summary.shim = format!("{shim_choice:?}").to_lowercase();
    summary.supervisor = clocks
        .iter()
        .filter_map(|c| c.supervisor_counts())
        .reduce(|a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2))
        .map(|(reads, waits, wakes)| {
            [
                ("clock_reads", reads),
                ("timed_waits", waits),
                ("futex_wakes", wakes),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
        });
    // (an exit before the start already quotes the program's log)
    let quoted = result.as_ref().err().is_some_and(|e| {
        e.downcast_ref::<ExitedEarly>().is_some()
            || e.downcast_ref::<ControllerExitedEarly>().is_some()
    });
    let mut ending = result.err().map(|e| (end_reason(&e), error_text(&e)));
    if let Some((EndReason::SchedulerExited | EndReason::ControllerExited, message)) = &mut ending {
        if !quoted {
            message.push_str(&exit_details(&children, &out));
        }
    }
    match &standin_result {
        Some(Ok(Err(e))) if ending.is_none() => {
            ending = Some((
                EndReason::BatsimFailed,
                format!("Batsim stand-in: {}", error_text(e)),
            ))
        }
        Some(Err(_)) if ending.is_none() => {
            ending = Some((
                EndReason::BatsimFailed,
                "the Batsim stand-in panicked".into(),
            ))
        }
        _ => {}
    }
    if ending.is_none() && !summary.completed {
        ending = Some((
            EndReason::BatsimFailed,
            "Batsim ended the exchange before SIMULATION_ENDS".into(),
        ));
    }
    // A signal is why the run ended, whatever it broke on its way (the
    // scheduler it stopped, first of all).
    if let Some(r) = interrupt.reason() {
        if !summary.completed {
            ending = Some((
                r,
                format!("{} at simulated time {:.6}", Stopped(r), summary.end_time),
            ));
        }
    }
    if ending.is_none() && summary.overcommit_count > 0 {
        ending = Some((
            EndReason::Overcommit,
            format!(
                "{} overcommit(s): a node ran pods whose requests exceed its allocatable (see \
                 nodes.csv in {})",
                summary.overcommit_count,
                out.display()
            ),
        ));
    }
    if let Some((reason, message)) = &ending {
        summary.completed = false;
        summary.end_reason = *reason;
        summary.error = Some(message.clone());
    }
    if summary.completed {
        wait_for_batsim_exit(&children, &out);
    }
    // The scheduler goes first: its open connections would otherwise hold
    // the API's graceful shutdown for its full 5 s.
    drop(reaper);
    let written = write_outputs(&out, &mut broker, &summary, true).and_then(|()| {
        broker
            .write_timeline(&out.join("timeline.csv"))
            .with_context(|| format!("writing {}", out.join("timeline.csv").display()))
    });
    rt.block_on(server.shutdown());
    drop(broker);
    drop(controller);
    drop(clocks);
    written?;
    if args.write_report {
        crate::report::after_run(&out);
    }
    match ending {
        None => Ok(summary),
        Some((_, message)) => Err(Incomplete {
            summary,
            message: format!("{message} (outputs in {})", out.display()),
        }
        .into()),
    }
}

/// For a scheduler or controller that exited during the run: the exit
/// status of the first one found gone, and the end of its log.
fn exit_details(children: &Shared, out: &Path) -> String {
    let mut guard = children.0.lock();
    let c = &mut *guard;
    let logs = std::iter::once("scheduler.log".to_string())
        .chain((1..=c.controllers.len()).map(|n| format!("controller-{n}.log")));
    let kids = c.scheduler.iter_mut().chain(c.controllers.iter_mut());
    for (child, log) in kids.zip(logs) {
        if let Ok(Some(status)) = child.try_wait() {
            let path = out.join(&log);
            let tail = log_tail(&path, 10);
            return format!(
                " ({status}); the end of {}:\n{}",
                path.display(),
                if tail.is_empty() {
                    "(empty)".into()
                } else {
                    tail
                }
            );
        }
    }
    String::new()
}

/// Real Batsim's process ended before SIMULATION_ENDS.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BatsimExited(String);

/// The last `n` lines of a log file (empty if it cannot be read).
fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Real Batsim's exit, once it happened: its status is written to
/// `batsim.exit` in the outputs, and the error quotes the end of its
/// stderr (where Batsim and SimGrid say why they abort).
fn batsim_exited(children: &Shared, out: &Path) -> Option<BatsimExited> {
    let status = children.0.lock().batsim.as_mut()?.try_wait().ok()??;
    let _ = std::fs::write(out.join("batsim.exit"), format!("{status}\n"));
    let tail = log_tail(&out.join("batsim.err.log"), 15);
    Some(BatsimExited(format!(
        "Batsim exited ({status}) before the simulation ended; the end of its stderr ({}):\n{}",
        out.join("batsim.err.log").display(),
        if tail.is_empty() {
            "(empty)".to_string()
        } else {
            tail
        }
    )))
}

/// After SIMULATION_ENDS real Batsim writes its outputs and exits: give it
/// the time to, then record its exit status in `batsim.exit`.
fn wait_for_batsim_exit(children: &Shared, out: &Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = match children.0.lock().batsim.as_mut() {
            None => return,
            Some(c) => c.try_wait().ok().flatten(),
        };
        if let Some(status) = status {
            let _ = std::fs::write(out.join("batsim.exit"), format!("{status}\n"));
            return;
        }
        if std::time::Instant::now() > deadline {
            let _ = std::fs::write(
                out.join("batsim.exit"),
                "still running 10 s after SIMULATION_ENDS; stopped by batkube\n",
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The scheduler did not watch the API within the window bound.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct NeverWatched(String);

/// The scheduler process ended before it watched the API.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ExitedEarly(String);

/// A `--controller` ended before the simulation started.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ControllerExitedEarly(String);

/// Which way an error ended the run.
fn end_reason(e: &anyhow::Error) -> EndReason {
    if let Some(s) = e.downcast_ref::<Stopped>() {
        s.0
    } else if let Some(c) = e.downcast_ref::<Classified>() {
        c.reason
    } else if e.downcast_ref::<BatsimExited>().is_some() {
        EndReason::BatsimFailed
    } else if e.downcast_ref::<NeverWatched>().is_some() {
        EndReason::WindowBound
    } else if e.downcast_ref::<ExitedEarly>().is_some() {
        EndReason::SchedulerExited
    } else if e.downcast_ref::<ControllerExitedEarly>().is_some() {
        EndReason::ControllerExited
    } else if e.downcast_ref::<batsim::link::LinkError>().is_some() {
        EndReason::BatsimFailed
    } else {
        EndReason::Error
    }
}

/// Waits until the scheduler watches the API (it has started and listed),
/// or says why it did not.
fn wait_for_scheduler(
    store: &fakeapi::Store,
    children: &Shared,
    interrupt: &Interrupt,
    bound: Duration,
    out: &Path,
    take_changes: &mut dyn FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let start = std::time::Instant::now();
    loop {
        take_changes()?;
        if store.watcher_count() > 0 {
            return Ok(());
        }
        interrupt.check()?;
        if let Some(e) = batsim_exited(children, out) {
            return Err(e.into());
        }
        if let Some(c) = children.0.lock().scheduler.as_mut() {
            if let Ok(Some(status)) = c.try_wait() {
                return Err(ExitedEarly(format!(
                    "the scheduler exited ({status}) before watching the API; the end of its \
                     log:\n{}",
                    log_tail(&out.join("scheduler.log"), 15)
                ))
                .into());
            }
        }
        for (i, c) in children.0.lock().controllers.iter_mut().enumerate() {
            if let Ok(Some(status)) = c.try_wait() {
                let log = out.join(format!("controller-{}.log", i + 1));
                return Err(ControllerExitedEarly(format!(
                    "controller {} exited ({status}) before the simulation started; the end of \
                     its log ({}):\n{}",
                    i + 1,
                    log.display(),
                    log_tail(&log, 15)
                ))
                .into());
            }
        }
        if start.elapsed() > bound {
            return Err(NeverWatched(format!(
                "the scheduler did not watch the API within --window-bound {:?}; see {}",
                bound,
                out.join("scheduler.log").display()
            ))
            .into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A scheduler that watches the API but never read the clock through the
/// linked or preloaded shim runs on real time: say so at once, with what to
/// do, rather than letting the simulation crawl on wall-clock timeouts.
fn check_attached(
    c: &Controller,
    name: &str,
    shim: ShimChoice,
    interrupt: &Interrupt,
) -> anyhow::Result<()> {
    if !matches!(shim, ShimChoice::Linked | ShimChoice::Preload) {
        return Ok(());
    }
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        if c.attached_pid().is_some() {
            return Ok(());
        }
        interrupt.check()?;
        std::thread::sleep(Duration::from_millis(5));
    }
    let what = match shim {
        ShimChoice::Linked => "its binary does not link timeshim (`timeshim::install()` in main)",
        _ => "the preloaded library did not take (a static or Go binary ignores LD_PRELOAD)",
    };
    bail!(
        "{name} never read the clock through the time shim ({what}), so it would run on real \
         time; run it with --shim seccomp (any binary) or --shim auto"
    )
}

/// Answers Batsim until SIMULATION_ENDS or the peer is gone. `watch` is
/// called after every message and every 100 ms while Batsim is silent: an
/// error from it (a signal, Batsim's process gone) ends the run.
fn drive(
    broker: &mut Broker,
    link: &mut BatsimLink,
    metrics: &Mutex<String>,
    rt: &tokio::runtime::Handle,
    watch: impl Fn() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    loop {
        let msg = loop {
            let next = rt.block_on(async {
                tokio::time::timeout(Duration::from_millis(100), link.recv()).await
            });
            match next {
                Ok(m) => break m,
                Err(_) => watch()?,
            }
        };
        let Some(msg) = msg else { return Ok(()) };
        let reply = broker.handle(msg?)?;
        link.reply(reply)?;
        *metrics.lock() = broker.metrics_text();
        if broker.ended() {
            return Ok(());
        }
        watch()?;
    }
}

/// `jobs_csv`: Batsim exports to `out` (`run`), so a jobs.csv it did not
/// write is written from the broker's records (pods.csv, streamed during
/// the run and finished here).
fn write_outputs(
    out: &Path,
    broker: &mut Broker,
    summary: &record::Summary,
    jobs_csv: bool,
) -> anyhow::Result<()> {
    let ctx = |name: &str| format!("writing {}", out.join(name).display());
    broker
        .finish_records()
        .with_context(|| ctx("pods.csv, nodes.csv and decisions.jsonl"))?;
    if jobs_csv {
        adopt_batsim_outputs(out).with_context(|| ctx("Batsim's outputs"))?;
    }
    // Batsim writes jobs.csv when it ends; one that died did not.
    if jobs_csv && !wrote(&out.join("jobs.csv")) {
        let pods = record::read_pods_csv(&out.join("pods.csv"))
            .with_context(|| format!("reading {}", out.join("pods.csv").display()))?;
        write_jobs_csv(&out.join("jobs.csv"), &pods).with_context(|| ctx("jobs.csv"))?;
    }
    std::fs::write(
        out.join("summary.json"),
        serde_json::to_string_pretty(summary)? + "\n",
    )
    .with_context(|| ctx("summary.json"))?;
    Ok(())
}

/// Real Batsim names its outputs `<export prefix>_jobs.csv`, … (`src/export.cpp`
/// appends `_`), so with the prefix `DIR/` they land as `DIR/_jobs.csv`:
/// they take the names the stand-in gives them (`DIR/jobs.csv`, …). A file
/// Batsim left empty is not its output.
fn adopt_batsim_outputs(out: &Path) -> std::io::Result<()> {
    const OUTPUTS: [&str; 6] = [
        "jobs.csv",
        "schedule.csv",
        "machine_states.csv",
        "schedule.trace",
        "consumed_energy.csv",
        "pstate_changes.csv",
    ];
    for name in OUTPUTS {
        let from = out.join(format!("_{name}"));
        if !from.exists() {
            continue;
        }
        if wrote(&from) {
            std::fs::rename(&from, out.join(name))?;
        } else {
            std::fs::remove_file(&from)?;
        }
    }
    Ok(())
}

/// Whether a file exists with something in it.
fn wrote(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.len() > 0)
}

/// jobs.csv in Batsim's layout from the broker's records, for a Batsim
/// that ended without writing it: the jobs that reached a final state, as
/// far as the broker knows them (no profile, requested time -1).
fn write_jobs_csv(path: &Path, pods: &[record::PodRecord]) -> std::io::Result<()> {
    use batsim::protocol::JobState;
    use batsim::standin::output::{job_line, JobRow, JOBS_HEADER};
    let mut text = format!("{JOBS_HEADER}\n");
    for p in pods {
        let rejected = p.outcome.starts_with("REJECTED");
        let (starting_time, execution_time) = match (p.started, p.finished) {
            (Some(s), Some(f)) if !rejected => (Some(s), Some(f - s)),
            _ if rejected => (None, None),
            _ => continue,
        };
        let state = if rejected {
            JobState::Rejected
        } else if p.outcome == "PREEMPTED" {
            JobState::CompletedKilled
        } else {
            JobState::parse(&p.outcome)
        };
        let row = JobRow {
            job_id: p
                .job_id
                .split_once('!')
                .map_or(&*p.job_id, |(_, j)| j)
                .into(),
            workload_name: p.job_id.split_once('!').map_or("", |(w, _)| w).into(),
            profile: String::new(),
            submission_time: p.created,
            requested_number_of_resources: 1,
            requested_time: -1.0,
            final_state: state,
            starting_time,
            execution_time,
            allocated_resources: String::new(),
            metadata: String::new(),
        };
        text += &job_line(&row);
        text.push('\n');
    }
    std::fs::write(path, text)
}

/// `batkube serve`: the API and the broker; Batsim and the scheduler are
/// the user's. SIGINT and SIGTERM end it with every output written.
pub fn serve(args: ServeArgs) -> anyhow::Result<record::Summary> {
    let interrupt = Interrupt::install(Shared::default());
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating the output directory {}", args.out.display()))?;
    let policy = args.clock.policy(false)?;
    let kubelet = args.kubelet.model()?;
    let objects = api_objects(&args.crds, args.gang)?;
    let Api {
        rt,
        awake: _,
        clock,
        store,
        server,
        kubeconfig,
    } = start_api(
        args.api,
        &args.out,
        0.0,
        fakeapi::WatchTimers::Wall,
        &objects,
        // A live API server: random UIDs, as a real one.
        None,
        false,
    )?;
    let mut link = BatsimLink::bind(&args.socket)?;
    if let Some(path) = &args.record_protocol {
        link.record_to(batsim::transcript::Recorder::create(path)?);
    }
    eprintln!(
        "batkube serve: API on http://{} (kubeconfig {}), waiting for Batsim on {}",
        server.addr(),
        kubeconfig.display(),
        args.socket
    );
    let mut broker = Broker::new(
        store,
        rt.handle().clone(),
        clock,
        SchedulerSide::External,
        BrokerConfig {
            policy,
            strict: args.strict,
            kubelet,
            give_up_after: args.give_up_after,
            terminated_pod_gc_threshold: args.terminated_pod_gc_threshold,
            gang: args.gang,
            progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
            activity: None,
            scheduler_name: scheduler_name(None, args.gang),
            default_queue: args.default_queue.clone(),
            lifecycle: Default::default(),
        },
    );
    broker
        .stream_timeline(&args.out.join("timeline.csv"))
        .with_context(|| format!("writing {}", args.out.join("timeline.csv").display()))?;
    broker
        .stream_records(&args.out)
        .with_context(|| format!("writing pods.csv and nodes.csv in {}", args.out.display()))?;
    broker
        .stream_decisions(&args.out.join("decisions.jsonl"), args.explain)
        .with_context(|| format!("writing {}", args.out.join("decisions.jsonl").display()))?;
    let metrics = Arc::new(Mutex::new(String::new()));
    {
        let m = metrics.clone();
        server.set_extra_metrics(move || m.lock().clone());
    }
    let result = drive(&mut broker, &mut link, &metrics, rt.handle(), || {
        interrupt.check()
    });
    drop(link);
    let (_, _, mut summary) = broker.report();
    summary.flags = flags();
    let mut ending = result.err().map(|e| (end_reason(&e), error_text(&e)));
    if ending.is_none() && !summary.completed {
        ending = Some((
            EndReason::BatsimFailed,
            "Batsim ended the exchange before SIMULATION_ENDS".into(),
        ));
    }
    if let Some((reason, message)) = &ending {
        summary.completed = false;
        summary.end_reason = *reason;
        summary.error = Some(message.clone());
    }
    let written = write_outputs(&args.out, &mut broker, &summary, false).and_then(|()| {
        broker
            .write_timeline(&args.out.join("timeline.csv"))
            .with_context(|| format!("writing {}", args.out.join("timeline.csv").display()))
    });
    rt.block_on(server.shutdown());
    written?;
    if args.write_report {
        crate::report::after_run(&args.out);
    }
    match ending {
        None => Ok(summary),
        Some((_, message)) => Err(Incomplete {
            summary,
            message: format!("{message} (outputs in {})", args.out.display()),
        }
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::{carries_shim, exec_line, scheduler_name};
    use crate::translate::GangStyle;

    #[test]
    fn volcano_gangs_are_written_for_volcano_unless_told_otherwise() {
        assert_eq!(
            scheduler_name(None, GangStyle::Volcano).as_deref(),
            Some("volcano")
        );
        assert_eq!(scheduler_name(None, GangStyle::Coscheduling), None);
        assert_eq!(scheduler_name(None, GangStyle::Kueue), None);
        assert_eq!(
            scheduler_name(Some("mine".into()), GangStyle::Volcano).as_deref(),
            Some("mine")
        );
    }

    #[test]
    fn the_shim_marker_is_found_anywhere_in_a_binary() {
        let dir = tempfile::tempdir().unwrap();
        let needle = timeshim::ENV_PAGE.as_bytes();
        for at in [
            0,
            17,
            (1 << 20) - 3,
            (1 << 20) - needle.len(),
            1 << 20,
            (3 << 20) + 5,
        ] {
            let mut bytes = vec![b'x'; (4 << 20) + 11];
            bytes[at..at + needle.len()].copy_from_slice(needle);
            let p = dir.path().join(format!("b{at}"));
            std::fs::write(&p, &bytes).unwrap();
            assert!(carries_shim(&p), "marker at {at}");
        }
        let p = dir.path().join("none");
        std::fs::write(&p, vec![b'x'; 3 << 20]).unwrap();
        assert!(!carries_shim(&p));
        assert!(!carries_shim(&dir.path().join("missing")));
    }

    #[test]
    fn leading_assignments_go_through_env() {
        assert_eq!(exec_line("sched --x"), "exec sched --x");
        assert_eq!(
            exec_line("RUST_LOG=debug sched"),
            "exec env RUST_LOG=debug sched"
        );
        assert_eq!(exec_line("A=1 B='x y' sched"), "exec env A=1 B='x y' sched");
        assert_eq!(exec_line("./sched --opt=1"), "exec ./sched --opt=1");
        assert_eq!(exec_line("1A=2 sched"), "exec 1A=2 sched");
    }
}
