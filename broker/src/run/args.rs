//! The flags of `batkube run` and `batkube serve`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use timeshim::policy::{Backoff, PolicyConfig, WindowEnd};
use timeshim::ClockMode;

use super::processes::{carries_shim, scheduler_program};
use crate::broker::kubelet::{KubeletModel, Latency};
use batsim::link::DEFAULT_ENDPOINT;

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
    pub(super) fn model(&self) -> anyhow::Result<KubeletModel> {
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

/// The `schedulerName` of pods whose job names no scheduler: `--scheduler-name`,
/// else the `--gang` style's scheduler (`volcano`: the pods of a Volcano
/// PodGroup are written for it, and its PodGroup controller only groups
/// pods of the names it serves; `yunikorn`, as its admission controller
/// writes), else none (`default-scheduler`).
pub fn scheduler_name(given: Option<String>, gang: crate::translate::GangStyle) -> Option<String> {
    given.or_else(|| gang.scheduler_name().map(str::to_string))
}

/// Refuses a `--submit-as` style whose controller or CRDs the run lacks,
/// before anything starts, naming the flag that adds them.
pub fn check_submit_as(args: &RunArgs, objects: &[fakeapi::Manifest]) -> anyhow::Result<()> {
    use crate::translate::SubmitAs;
    let runs = |program: &str| {
        args.controllers.iter().any(|c| {
            scheduler_program(c)
                .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
                .is_some_and(|f| f == program)
        })
    };
    let defines = |resource: &str| super::api::defines_resource(objects, resource);
    match args.submit_as {
        SubmitAs::Pod => {}
        SubmitAs::Job if !runs("kube-controller-manager") => bail!(
            "--submit-as job: batch/v1 Jobs need kube-controller-manager's job controller to \
             make their pods; add --controller 'PATH/kube-controller-manager --kubeconfig \
             \"$KUBECONFIG\" --kube-api-content-type=application/json \
             --controllers=job-controller,garbage-collector-controller --leader-elect=false \
             --secure-port=0' (built by `bash schedulers/build-go.sh DIR kube-controller-manager`)"
        ),
        SubmitAs::Job => {}
        SubmitAs::Vcjob if !runs("vc-controller-manager") => bail!(
            "--submit-as vcjob: Volcano Jobs need vc-controller-manager to make their pods; add \
             --controller 'DEBUG_SOCKET_DIR=\"${{KUBECONFIG%/*}}\" PATH/vc-controller-manager \
             --kubeconfig \"$KUBECONFIG\" \
             --leader-elect=false' (built by `bash schedulers/build-go.sh DIR \
             vc-controller-manager`)"
        ),
        SubmitAs::Vcjob if !defines("jobs.batch.volcano.sh") => bail!(
            "--submit-as vcjob: the API has no Volcano Job (jobs.batch.volcano.sh); add Volcano's \
             CustomResourceDefinitions with --crds (schedulers/build-go.sh writes them to \
             DIR/crds/volcano)"
        ),
        SubmitAs::Vcjob => {}
        SubmitAs::Jobset if !runs("jobset-manager") => bail!(
            "--submit-as jobset: JobSets need JobSet's controller manager to make their Jobs; \
             add --controller 'PATH/jobset-manager --kubeconfig \"$KUBECONFIG\" --config \
             DIR/config.yaml' (built by `bash schedulers/build-go.sh GO_DIR jobset-manager`; \
             DIR/config.yaml written by `schedulers/jobset/webhook.sh DIR GO_DIR`)"
        ),
        SubmitAs::Jobset if !runs("kube-controller-manager") => bail!(
            "--submit-as jobset: a JobSet's Jobs need kube-controller-manager's job controller \
             to make their pods; add --controller 'PATH/kube-controller-manager --kubeconfig \
             \"$KUBECONFIG\" --kube-api-content-type=application/json \
             --controllers=job-controller,garbage-collector-controller --leader-elect=false \
             --secure-port=0' (built by `bash schedulers/build-go.sh GO_DIR \
             kube-controller-manager`)"
        ),
        SubmitAs::Jobset if !defines("jobsets.jobset.x-k8s.io") => bail!(
            "--submit-as jobset: the API has no JobSet (jobsets.jobset.x-k8s.io); add JobSet's \
             CustomResourceDefinition with --crds GO_DIR/crds/jobset (written by \
             `bash schedulers/build-go.sh GO_DIR jobset-manager`)"
        ),
        SubmitAs::Jobset if !super::api::mutates_resource(objects, "jobsets.jobset.x-k8s.io") => {
            bail!(
                "--submit-as jobset: no webhook defaults the JobSets (JobSet's controller needs \
                 the defaults its own webhook writes); add --crds DIR/webhook.yaml, JobSet's \
                 webhook configurations and the Service that reaches its manager, written by \
                 `schedulers/jobset/webhook.sh DIR GO_DIR` with the manager's DIR/config.yaml"
            )
        }
        SubmitAs::Jobset => {}
    }
    Ok(())
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

/// How jobs become the API's objects and when the broker gives up on
/// them: the flags `batkube run` and `batkube serve` share.
#[derive(Debug, clap::Args)]
pub struct TranslateArgs {
    /// A binding that overcommits a node fails the run.
    #[arg(long)]
    pub strict: bool,
    /// Pods still pending when nothing else can happen are rejected after
    /// this many simulated seconds without a decision or a new pending pod.
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
    /// What a job that asks for neither cpu nor memory means: whole-node
    /// (as in Batsim: each of its pods takes its node whole, through
    /// requests of a node's cpu and memory where nodes are alike, else the
    /// smallest node's and a required anti-affinity against every other
    /// pod), or nothing (pods that ask for nothing, which Kubernetes may
    /// stack on one node).
    #[arg(long = "no-requests-means", value_enum, value_name = "MEANING", default_value_t = crate::translate::NoRequests::WholeNode)]
    pub no_requests: crate::translate::NoRequests,
    /// CustomResourceDefinitions (and any other objects) to install in the
    /// API before the scheduler starts: a file or a directory of YAML/JSON
    /// manifests, multi-document (repeatable). The PodGroup of
    /// `--gang coscheduling` is installed without it.
    #[arg(long = "crds", value_name = "PATH")]
    pub crds: Vec<PathBuf>,
    /// How often the API compacts its past, as kube-apiserver has etcd
    /// compacted (its own `--etcd-compaction-interval`): a list continued
    /// from, or listed at exactly, a resourceVersion one to two intervals
    /// old gets 410 Expired (a continue token with a token to go on from,
    /// inconsistently); watches are not bounded by it. On simulated time
    /// under `run`, real time under `serve`; 0: never.
    #[arg(long = "etcd-compaction-interval", value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub compaction_interval: Duration,
}

impl TranslateArgs {
    /// `--etcd-compaction-interval` for the store (0: none).
    pub fn compaction(&self) -> Option<Duration> {
        Some(self.compaction_interval).filter(|d| !d.is_zero())
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
    /// A Secret's data as files in DIR, as a kubelet mounts a Secret volume
    /// into a pod (repeatable): each key a file, rewritten whenever the
    /// Secret changes. For a --controller that reads from files what it
    /// writes into a Secret (Kueue's cert controller: its webhook server's
    /// certificates; see schedulers/kueue/webhook.sh).
    #[arg(long = "mount-secret", value_name = "NAMESPACE/NAME=DIR", value_parser = crate::broker::secret_volumes::SecretMount::parse)]
    pub mount_secrets: Vec<crate::broker::secret_volumes::SecretMount>,
    /// What one Batsim job becomes: pod (its pods and gang object, written
    /// by batkube), job (a batch/v1 Job, Indexed with completions =
    /// parallelism = N for N machines; needs kube-controller-manager's job
    /// controller as a --controller), vcjob (a Volcano Job with one task of
    /// N replicas and minAvailable N; needs vc-controller-manager as a
    /// --controller and Volcano's CRDs in --crds), jobset (a JobSet with one
    /// replicated job, that Job; needs JobSet's controller manager and
    /// kube-controller-manager as --controller, JobSet's CRD and webhook
    /// configurations in --crds: schedulers/jobset/webhook.sh). The object
    /// goes through the API's admission webhooks; the broker follows the
    /// pods its controller makes.
    #[arg(long = "submit-as", value_enum, value_name = "STYLE", default_value_t = crate::translate::SubmitAs::Pod)]
    pub submit_as: crate::translate::SubmitAs,
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
    /// variable it needs in its command). See the guide,
    /// docs/src/concepts/reproducible.md, for what it covers and what not
    /// yet.
    #[arg(long)]
    pub deterministic: bool,
    /// With `--seed`: the seed decides the program's randomness only, and
    /// its threads run as the OS schedules them (faster; outcomes may
    /// change from run to run).
    #[arg(long = "no-deterministic", conflicts_with = "deterministic")]
    pub no_deterministic: bool,
    /// Under `--deterministic`: the most system calls a program may make
    /// at one simulated instant without once being quiet and without
    /// sending anything on a socket it connected. Past it the
    /// program is spinning until time passes (a retry loop with no
    /// back-off, a gang tried again and again until a node frees), which
    /// on a frozen clock never ends: it is held, the clock goes on to the
    /// next event, and it goes on from there (counted in
    /// `spins_held`). Counted in calls, which the seed orders, so the
    /// same on every run; `0`: never held (the window then lasts until
    /// `--window-bound`, by wall time, and what it did by then depends on
    /// the machine). See docs/src/concepts/reproducible.md.
    #[arg(long = "spin-bound", value_name = "CALLS", default_value_t = timeshim::DEFAULT_SPIN_BOUND)]
    pub spin_bound: u64,
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
    #[command(flatten)]
    pub translate: TranslateArgs,
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
    /// Timers the clock may pass over without stopping: model assumptions,
    /// none by default (`none`). `idle`: a program whose last timer firing
    /// sent the API nothing, and that nothing reached since (no watch
    /// event, no webhook call), is not woken for its next timers; they
    /// fire late, at the next instant anything happens. `controllers`:
    /// --fast-forward for the --controller programs too (no wake-up for
    /// their timers while nothing is pending). `go-poller`: a Go program
    /// under --shim seccomp whose poller wakes before its timer (Go waits
    /// in whole milliseconds, rounded down) is held until its next wait
    /// would end, a millisecond later; a timer another of the runtime's
    /// threads would have run at its own instant runs up to 1 ms late.
    /// Several: `idle,controllers`.
    /// Needs the exact policy; summary.json counts what each rule passed
    /// over (wake_ups_elided); --compare-exact checks a case against the
    /// run without them.
    #[arg(long = "elide", value_name = "RULES", default_value = "none")]
    pub elide: timeshim::elide::ElideConfig,
    /// Write every request the API answers to --out/requests.csv:
    /// simulated time, the program that made it (scheduler, controller-N),
    /// method, verb, resource, path, query, status code.
    #[arg(long = "log-requests")]
    pub log_requests: bool,
    /// Run the case twice, exactly (--elide none) into --out/exact and
    /// with the --elide rules into --out/elided, both with
    /// --log-requests, then compare jobs.csv, pods.csv and each program's
    /// requests with their simulated times (as `batkube compare`), and
    /// name the first difference. Exit status 0 when identical, 1 when
    /// not. Give --seed for programs whose randomness would differ anyway.
    #[arg(long = "compare-exact")]
    pub compare_exact: bool,
    /// The CPUs the run (broker, API, stand-in, and the programs it
    /// starts) runs on. `auto`: one CPU, a free one when runs go side by
    /// side (a run is a relay of hand-offs, cheaper on one CPU than across
    /// two); `all`: wherever the OS puts it; or a list (`0`, `2,3`, `0-3`).
    /// Outputs do not depend on it, only speed.
    #[arg(long = "cpus", value_name = "auto|all|LIST", default_value = "auto")]
    pub cpus: super::cpus::Cpus,
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
    #[command(flatten)]
    pub translate: TranslateArgs,
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

#[cfg(test)]
mod tests {
    use super::scheduler_name;
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
}
