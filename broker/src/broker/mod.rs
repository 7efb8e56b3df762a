//! The broker proper: applies Batsim's events to the Kubernetes API, lets
//! the scheduler react within a clock window, and turns what it decided
//! into the reply.
//!
//! Per Batsim message at simulated time `t`:
//! 1. the simulated clock moves to `t` (never backwards): the API's
//!    timestamps and the scheduler's clock (through the shim page) follow;
//! 2. events are applied: hosts become nodes, jobs become pods (or are
//!    rejected), completions set pod phases, wake-ups fire kubelet timers;
//! 3. a window opens under the clock policy (exact: until the scheduler is
//!    quiescent; timeout: until the first decision or T of wall time);
//!    bindings become EXECUTE_JOB, deletions of running pods KILL_JOB;
//! 4. the reply asks for a wake-up (CALL_ME_LATER) at the scheduler's
//!    earliest timer or the next kubelet event, unless one is already
//!    pending at or before it.
//!
//! The overcommit invariant (requests on a node never above its
//! allocatable) is checked on every binding.
//!
//! This file holds the broker's state; each step has its file: `clock.rs`
//! (simulated time), `window.rs` (the loop: a message, its instant, the
//! window, the reply), `batsim_events.rs` (Batsim's events as API
//! changes), `api_changes.rs` (the scheduler's changes as decisions:
//! bindings, deletions), `gangs.rs` (a parallel job's pods as one),
//! `outputs.rs` (records, timeline, metrics), `workloads.rs` (jobs
//! submitted as Jobs or Volcano Jobs, their pods made by a controller).

mod api_changes;
mod batsim_events;
mod clock;
pub mod decisions;
mod gangs;
mod jobs;
pub mod kubelet;
pub mod lifecycle;
mod outputs;
pub mod podgc;
pub mod queues;
pub mod record;
pub mod secret_volumes;
pub mod sync;
pub mod timeline;
mod window;
mod workloads;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fakeapi::{Change, Store};
use timeshim::elide::{ElideConfig, Elision};
use timeshim::policy::{Policy, PolicyConfig};

use crate::translate::{self, Amounts};
use batsim::protocol::{EventData, JobState};
use kubelet::KubeletModel;
use podgc::PodGc;
use record::{EndReason, NodeLog, PodLog, PodRecord};
use sync::ShimSide;

pub use clock::{batsim_time, sim_time, to_datetime, SimClock, SIM_EPOCH_SECS};
use clock::{ceil_us, SIM_EPOCH_NANOS};
/// Simulated time 0 in Unix nanoseconds.
pub const SIM_EPOCH_NANOS_I128: i128 = SIM_EPOCH_NANOS as i128;
use gangs::Gang;
use window::QuietMark;

/// Wall time a scheduler gets after its last decision before pending pods
/// are given up on, when its idleness cannot be observed (above upstream's
/// 10 s max backoff).
const EXTERNAL_PATIENCE: Duration = Duration::from_secs(12);

/// How the scheduler is synchronised with.
pub enum SchedulerSide {
    /// Under the shim: quiescence is observable, the clock is ours.
    Shim(ShimSide),
    /// Not under the shim: only wall time and decisions are observable.
    External,
}

/// Broker settings.
pub struct BrokerConfig {
    pub policy: PolicyConfig,
    /// An overcommit fails the run.
    pub strict: bool,
    pub kubelet: KubeletModel,
    /// With no submission left and nothing running, pods the scheduler has
    /// left pending for this many simulated seconds without any decision are
    /// rejected, so that the simulation can end.
    pub give_up_after: f64,
    /// Show a progress line.
    pub progress: bool,
    /// The API's activity counters (to know when watch events are written).
    pub activity: Option<Arc<fakeapi::Activity>>,
    /// `schedulerName` of the pods whose job names no scheduler (else
    /// `default-scheduler`).
    pub scheduler_name: Option<String>,
    /// Node failures, evictions, resubmission, the scenario.
    pub lifecycle: lifecycle::LifecycleConfig,
    /// How a parallel job's gang is written for the scheduler.
    pub gang: translate::GangStyle,
    /// The queue of jobs that name none (`--default-queue`).
    pub default_queue: Option<String>,
    /// What a job asking for neither cpu nor memory means
    /// (`--no-requests-means`).
    pub no_requests: translate::NoRequests,
    /// Terminated pods kept in the API, as kube-controller-manager's
    /// `--terminated-pod-gc-threshold` (0: keep every pod); see [`podgc`].
    pub terminated_pod_gc_threshold: usize,
    /// Timer elision rules (`--elide`; none by default).
    pub elide: ElideConfig,
    /// What a Batsim job becomes (`--submit-as`): its pods, or a workload
    /// object whose controller makes them (see `workloads.rs`).
    pub submit_as: translate::SubmitAs,
    /// Simulated seconds one message of a reply takes to reach Batsim's
    /// server: the master host's route to itself (SimGrid's loopback, or up
    /// and down a `<cluster>`'s links: 0.0002 s on a 50 µs split-duplex
    /// cluster). A CALL_ME_LATER names an instant after its own arrival.
    /// 0 when the platform is unknown (`serve`).
    pub reply_message_time: f64,
    /// Simulated seconds the slowest job executor's message takes to reach
    /// Batsim's server (a compute host's route to the master, one byte).
    /// 0 when the platform is unknown (`serve`).
    pub completion_message_time: f64,
}

/// Pods of a schedulerName the scheduler has acted on none of, pending for
/// this long (wall or simulated), get a warning: the scheduler most likely
/// serves another name.
const UNSERVED_WALL: Duration = Duration::from_secs(2);
const UNSERVED_SIMULATED: f64 = 60.0;

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Pending,
    /// Bound; EXECUTE_JOB sent (or scheduled by the kubelet model).
    Bound {
        node: usize,
    },
    Running {
        node: usize,
    },
    /// Batsim reported the end; the pod still holds its node until the
    /// kubelet reports it.
    Completing {
        node: usize,
    },
    Done,
}

struct JobRt {
    record: PodRecord,
    phase: Phase,
    /// Shared by every job of the same image (interned).
    image: Arc<str>,
    /// The pod's schedulerName (interned).
    scheduler: Arc<str>,
    /// A client changed or deleted the pod (a binding, a status).
    touched: bool,
    created_wall: Instant,
    /// EXECUTE_JOB sent, JOB_COMPLETED not yet received.
    batsim_open: bool,
    /// The pod left the API (or never entered it).
    pod_gone: bool,
    /// For a pod of a parallel job: its gang (every pod of it is a job
    /// entry here, numbered `first..first + size`, sharing one Batsim id).
    gang: Option<Gang>,
    /// The pod takes its node whole and counts as using its allocatable
    /// once bound (its job asks for no cpu or memory, on nodes that
    /// differ: see `translate::WholeNode`).
    whole_node: bool,
}

impl JobRt {
    /// A job entry as submitted: pending, untouched, not yet executed;
    /// `pod_gone` when no pod of it is in the API (a workload object's
    /// controller makes it).
    fn new(
        record: PodRecord,
        image: Arc<str>,
        scheduler: Arc<str>,
        gang: Option<Gang>,
        whole_node: bool,
        pod_gone: bool,
    ) -> JobRt {
        JobRt {
            record,
            phase: Phase::Pending,
            image,
            scheduler,
            touched: false,
            created_wall: Instant::now(),
            batsim_open: false,
            pod_gone,
            gang,
            whole_node,
        }
    }
}

struct NodeRt {
    /// Shared with every sample of this node.
    name: Arc<str>,
    resource_id: u32,
    allocatable: Amounts,
    used: Amounts,
    pods: u32,
}

/// A kubelet-model event due at a simulated time.
#[derive(Debug, Clone)]
enum Timer {
    Start { job: usize },
    Report { job: usize, state: JobState },
    Life(lifecycle::LifeTimer),
}

impl Timer {
    /// The job it acts on.
    fn job(&self) -> Option<usize> {
        match self {
            Timer::Start { job } | Timer::Report { job, .. } => Some(*job),
            Timer::Life(t) => t.job(),
        }
    }
}

/// The broker's state for one simulation.
pub struct Broker {
    store: Store,
    changes: tokio::sync::mpsc::UnboundedReceiver<Change>,
    /// The resourceVersion of the last change taken in (and reacted to):
    /// with the store's, whether the broker is done reacting (the settle
    /// of a deterministic run, `sync::settle_hook`).
    processed: Arc<std::sync::atomic::AtomicU64>,
    /// What the broker's reactions to changes made before the simulation
    /// began produced (`take_early_changes`), sent with the first reply.
    early: Vec<EventData>,
    rt: tokio::runtime::Handle,
    clock: SimClock,
    side: SchedulerSide,
    policy: Policy,
    cfg: BrokerConfig,
    jobs: jobs::Jobs<JobRt>,
    job_by_id: HashMap<String, usize>,
    job_by_pod: HashMap<String, usize>,
    /// The group objects (PodGroups) the broker wrote for gangs, by the
    /// gang's first entry: deleted once every pod of the gang has left the
    /// API, as the garbage collector deletes an object whose owners are
    /// all gone (a user's job would own its group).
    group_objects: HashMap<usize, Arc<str>>,
    nodes: Vec<NodeRt>,
    node_by_name: HashMap<String, usize>,
    /// Profiles by workload and name, as compact JSON text (generated
    /// workloads have one per job: parsed, a million of them fill
    /// gigabytes).
    profiles: HashMap<String, HashMap<String, Box<str>>>,
    pending_wakeups: BTreeSet<u64>,
    /// The delay of each submitted job whose profile is a `delay`, by id.
    batsim_delays: HashMap<String, f64>,
    /// Jobs running under Batsim whose executor's end is known: (its
    /// nominal end in µs, the job's first entry).
    ends_due: BTreeSet<(u64, usize)>,
    timers: BTreeMap<(u64, u64), Timer>,
    timer_seq: u64,
    /// Jobs whose pod is pending, by index: what a window, a give-up and
    /// the unserved-name check look at, without a pass over every job
    /// ever submitted (a window's cost must not grow with the run).
    pending: BTreeSet<usize>,
    /// Jobs bound, running or completing.
    active: usize,
    /// Jobs done (finished, preempted or rejected).
    done: usize,
    samples: NodeLog,
    /// pods.csv: the records of retired jobs.
    pods_log: PodLog,
    /// decisions.jsonl: the attempts schedulers explained on their pods.
    decisions: decisions::DecisionLog,
    /// Jobs that may have become retirable (see `retire_jobs`).
    retirable: Vec<usize>,
    /// Images and scheduler names, one copy each.
    names: BTreeSet<Arc<str>>,
    gc: PodGc,
    overcommits: u64,
    no_more_static: bool,
    last_decision_at: f64,
    /// Wall time of the last decision (an unshimmed scheduler's backoff
    /// runs on wall time).
    last_decision_wall: Instant,
    /// When a pod last became pending (simulated, wall): the scheduler
    /// gets its time from there too before pods are given up on.
    last_pending_at: f64,
    last_pending_wall: Instant,
    scheduler_wakeup: Option<f64>,
    /// The earliest timer of the `--controller` processes at the last
    /// quiescence: always woken for (fast-forward is about the scheduler).
    controllers_wakeup: Option<f64>,
    windows: u64,
    windows_bound_hit: u64,
    /// Instants too large for the scheduler's receive windows (see
    /// `Gate::deliver`).
    partial_instants: u64,
    /// How the API and the scheduler stood when the last window closed on
    /// quiescence (see `check_quiet_mark`).
    quiet_mark: Option<QuietMark>,
    /// Quiescence decisions the scheduler contradicted (it ran, or the API
    /// served it, before the next instant).
    quiescence_contradicted: u64,
    /// Timers left unhonoured under `--elide` (see [`timeshim::elide`]),
    /// and what each program's API counters and the webhook calls stood
    /// at when it was last seen quiescent.
    elision: Elision,
    elision_marks: Vec<fakeapi::GroupActivity>,
    elision_webhooks: u64,
    gangs_started: u64,
    /// How a job asking for no cpu or memory takes its nodes whole on this
    /// platform (from SIMULATION_BEGINS; None under
    /// `--no-requests-means nothing`).
    whole_node: Option<translate::WholeNode>,
    /// Jobs whose pods took their nodes whole.
    jobs_whole_node: u64,
    /// Node-seconds held by partly bound gangs that have ended that state.
    partial_gang_node_seconds: f64,
    wakeups: u64,
    messages: u64,
    started: Instant,
    last_progress: Instant,
    ended: bool,
    /// schedulerNames of pods a client acted on.
    served: BTreeSet<String>,
    /// schedulerNames warned about.
    warned: BTreeSet<String>,
    warnings: Vec<String>,
    /// Secrets whose data the broker keeps as files (`--mount-secret`).
    secret_mounts: Vec<secret_volumes::SecretMount>,
    last_unserved_check: Instant,
    last_unserved_sim: f64,
    life: lifecycle::Lifecycle,
    timeline: timeline::Timeline,
    queues: queues::Queues,
    workloads: workloads::Workloads,
}

/// A run-stopping problem, in the user's terms.
#[derive(Debug, thiserror::Error)]
#[error("at simulated time {time:.6}: {message}")]
pub struct BrokerError {
    pub time: f64,
    pub message: String,
}

/// A [`BrokerError`] that says which way the run ended (unclassified
/// broker errors end it as [`EndReason::Error`]).
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct Classified {
    pub reason: EndReason,
    pub error: BrokerError,
}

impl Broker {
    pub fn new(
        store: Store,
        rt: tokio::runtime::Handle,
        clock: SimClock,
        side: SchedulerSide,
        cfg: BrokerConfig,
    ) -> Self {
        let changes = store.subscribe();
        let life = lifecycle::Lifecycle::new(cfg.lifecycle.clone());
        let gc = PodGc::new(cfg.terminated_pod_gc_threshold);
        let elision = Elision::new(cfg.elide);
        let processed = Arc::new(std::sync::atomic::AtomicU64::new(
            store.last_change_version(),
        ));
        let mut b = Broker {
            store,
            changes,
            processed,
            early: Vec::new(),
            rt,
            clock,
            side,
            policy: Policy::new(cfg.policy),
            cfg,
            jobs: jobs::Jobs::new(),
            job_by_id: HashMap::new(),
            job_by_pod: HashMap::new(),
            group_objects: HashMap::new(),
            nodes: Vec::new(),
            node_by_name: HashMap::new(),
            profiles: HashMap::new(),
            pending_wakeups: BTreeSet::new(),
            batsim_delays: HashMap::new(),
            ends_due: BTreeSet::new(),
            timers: BTreeMap::new(),
            timer_seq: 0,
            pending: BTreeSet::new(),
            active: 0,
            done: 0,
            samples: NodeLog::default(),
            pods_log: PodLog::default(),
            decisions: decisions::DecisionLog::default(),
            retirable: Vec::new(),
            names: BTreeSet::new(),
            gc,
            overcommits: 0,
            no_more_static: false,
            last_decision_at: 0.0,
            last_decision_wall: Instant::now(),
            last_pending_at: 0.0,
            last_pending_wall: Instant::now(),
            scheduler_wakeup: None,
            controllers_wakeup: None,
            windows: 0,
            windows_bound_hit: 0,
            partial_instants: 0,
            quiet_mark: None,
            quiescence_contradicted: 0,
            elision,
            elision_marks: Vec::new(),
            elision_webhooks: 0,
            gangs_started: 0,
            whole_node: None,
            jobs_whole_node: 0,
            partial_gang_node_seconds: 0.0,
            wakeups: 0,
            messages: 0,
            started: Instant::now(),
            last_progress: Instant::now(),
            ended: false,
            served: BTreeSet::new(),
            warned: BTreeSet::new(),
            warnings: Vec::new(),
            secret_mounts: Vec::new(),
            last_unserved_check: Instant::now(),
            last_unserved_sim: f64::NEG_INFINITY,
            life,
            timeline: timeline::Timeline::default(),
            queues: queues::Queues::default(),
            workloads: Default::default(),
        };
        b.schedule_scenario();
        b
    }

    fn fail<T>(&self, message: impl Into<String>) -> anyhow::Result<T> {
        Err(BrokerError {
            time: self.clock.now(),
            message: message.into(),
        }
        .into())
    }

    fn fail_because<T>(&self, reason: EndReason, message: impl Into<String>) -> anyhow::Result<T> {
        Err(Classified {
            reason,
            error: BrokerError {
                time: self.clock.now(),
                message: message.into(),
            },
        }
        .into())
    }

    /// Process `i` of the shim side (the scheduler, or a controller) ended
    /// during the simulation: the run ends, naming it.
    fn process_exited<T>(&self, i: usize) -> anyhow::Result<T> {
        let SchedulerSide::Shim(s) = &self.side else {
            unreachable!("only processes under the shim are watched")
        };
        let p = &s.procs[i];
        if p.is_scheduler {
            self.fail_because(
                EndReason::SchedulerExited,
                "the scheduler process exited during the simulation",
            )
        } else {
            self.fail_because(
                EndReason::ControllerExited,
                format!("{} exited during the simulation", p.name),
            )
        }
    }

    /// Moves job `i` to `phase`, keeping the phase counts.
    fn set_phase(&mut self, i: usize, phase: Phase) {
        let old = std::mem::replace(&mut self.jobs[i].phase, phase);
        self.count_phase(i, &old, -1);
        let new = self.jobs[i].phase.clone();
        self.count_phase(i, &new, 1);
        if new == Phase::Done {
            self.retirable.push(i);
            let j = &self.jobs[i];
            let first = j.gang.is_none_or(|g| g.first == i);
            if let (true, Some(q), Some(started)) = (first, &j.record.queue, j.record.started) {
                let end = j.record.finished.unwrap_or(self.clock.now());
                self.queues.finished(q, j.record.created, started, end);
            }
        }
    }

    fn count_phase(&mut self, i: usize, phase: &Phase, by: isize) {
        if let Some(q) = self.jobs[i].record.queue.clone() {
            self.count_in_queue(i, &q, phase, by);
        }
        match phase {
            Phase::Pending if by > 0 => {
                self.pending.insert(i);
                self.last_pending_at = self.clock.now();
                self.last_pending_wall = Instant::now();
            }
            Phase::Pending => {
                self.pending.remove(&i);
            }
            Phase::Done => self.done = self.done.saturating_add_signed(by),
            _ => self.active = self.active.saturating_add_signed(by),
        }
    }

    /// A phase change as its queue counts it: the job (its first pod)
    /// waiting or running, each pod's requests while it holds a node.
    fn count_in_queue(&mut self, i: usize, q: &Arc<str>, phase: &Phase, by: isize) {
        let counted = match phase {
            Phase::Pending | Phase::Bound { .. } => queues::Counted::Waiting,
            Phase::Running { .. } | Phase::Completing { .. } => queues::Counted::Running,
            Phase::Done => queues::Counted::Neither,
        };
        let j = &self.jobs[i];
        if j.gang.is_none_or(|g| g.first == i) {
            let (from, to) = if by > 0 {
                (queues::Counted::Neither, counted)
            } else {
                (counted, queues::Counted::Neither)
            };
            self.queues.job_moved(q, from, to);
        }
        if matches!(
            phase,
            Phase::Bound { .. } | Phase::Running { .. } | Phase::Completing { .. }
        ) {
            let now = self.clock.now();
            self.queues.hold(q, &j.record.requests, by as i64, now);
        }
    }

    /// One shared copy of a name many jobs carry.
    fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.names.get(s) {
            return a.clone();
        }
        let a: Arc<str> = s.into();
        self.names.insert(a.clone());
        a
    }

    /// Records a new job in `phase`.
    fn push_job(&mut self, job: JobRt) -> usize {
        let idx = self.jobs.len();
        let phase = job.phase.clone();
        self.jobs.push(job);
        self.count_phase(idx, &phase, 1);
        idx
    }

    /// Whether SIMULATION_ENDS was seen.
    pub fn ended(&self) -> bool {
        self.ended
    }

    pub fn overcommits(&self) -> u64 {
        self.overcommits
    }
}
