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

pub mod decisions;
mod jobs;
pub mod kubelet;
pub mod lifecycle;
pub mod podgc;
pub mod queues;
pub mod record;
pub mod sync;
pub mod timeline;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use fakeapi::{Change, EventType, Store};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus, PodCondition,
    PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;
use timeshim::policy::{Policy, PolicyConfig, Situation, Step};
use timeshim::SimTime;

use crate::translate::{self, Amounts};
use batsim::protocol::{build, EventData, JobState, Message};
use batsim::IntervalSet;
use kubelet::KubeletModel;
use podgc::PodGc;
use record::{EndReason, NodeLog, NodeSample, PodLog, PodRecord, Summary};
use sync::{Quiet, ShimSide};

/// Simulated second 0 is this Unix time (2026-01-01T00:00:00Z), so that the
/// scheduler's wall clock reads plausible dates, identically in every run.
pub const SIM_EPOCH_SECS: f64 = 1_767_225_600.0;

/// The simulated clock shared by the broker, the API's timestamps and the
/// shim page: Batsim seconds as f64 bits.
#[derive(Clone, Default)]
pub struct SimClock(Arc<AtomicU64>);

impl SimClock {
    /// A clock that starts at Batsim time `t` (negative for a warm-up
    /// before the simulation's time 0).
    pub fn starting_at(t: f64) -> Self {
        let c = SimClock::default();
        c.set(t);
        c
    }

    pub fn now(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Acquire))
    }
    fn set(&self, t: f64) {
        self.0.store(t.to_bits(), Ordering::Release);
    }
    /// A timestamp source for the API store.
    pub fn store_clock(&self) -> fakeapi::Clock {
        let c = self.clone();
        Arc::new(move || to_datetime(c.now()))
    }
}

pub fn to_datetime(t: f64) -> DateTime<Utc> {
    let total = SIM_EPOCH_SECS + t;
    let secs = total.floor();
    let nanos = ((total - secs) * 1e9).round().min(999_999_999.0) as u32;
    DateTime::from_timestamp(secs as i64, nanos).unwrap_or_default()
}

fn to_time(t: f64) -> Time {
    let dt = to_datetime(t);
    Time(
        k8s_openapi::jiff::Timestamp::new(dt.timestamp(), dt.timestamp_subsec_nanos() as i32)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}

const SIM_EPOCH_NANOS: u64 = 1_767_225_600_000_000_000;

/// Batsim seconds to the shim's clock, in integer nanoseconds (an f64 of
/// seconds since 1970 would only resolve about 0.2 us).
/// Negative Batsim times (the scheduler's warm-up) come before the epoch.
pub fn sim_time(t: f64) -> SimTime {
    let ns = SIM_EPOCH_NANOS as i128 + (t * 1e9).round() as i128;
    SimTime::from_nanos(ns.clamp(0, u64::MAX as i128) as u64)
}

pub fn batsim_time(t: SimTime) -> f64 {
    (t.as_nanos() as i128 - SIM_EPOCH_NANOS as i128) as f64 / 1e9
}

/// Rounds up to Batsim's microsecond so that a wake-up is never before the
/// timer it serves.
fn ceil_us(t: f64) -> f64 {
    (t * 1e6 - 1e-3).ceil() / 1e6
}

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
    /// Terminated pods kept in the API, as kube-controller-manager's
    /// `--terminated-pod-gc-threshold` (0: keep every pod); see [`podgc`].
    pub terminated_pod_gc_threshold: usize,
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
}

/// A parallel job's pods: entries `first..first + size` of the broker's
/// jobs. The one place that knows a job is several pods: EXECUTE_JOB when
/// all are bound, one KILL_JOB or REJECT_JOB for all, completions for all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Gang {
    first: usize,
    size: u32,
}

impl Gang {
    fn members(self) -> std::ops::Range<usize> {
        self.first..self.first + self.size as usize
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
    nodes: Vec<NodeRt>,
    node_by_name: HashMap<String, usize>,
    /// Profiles by workload and name, as compact JSON text (generated
    /// workloads have one per job: parsed, a million of them fill
    /// gigabytes).
    profiles: HashMap<String, HashMap<String, Box<str>>>,
    pending_wakeups: BTreeSet<u64>,
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
    gangs_started: u64,
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
    last_unserved_check: Instant,
    last_unserved_sim: f64,
    life: lifecycle::Lifecycle,
    timeline: timeline::Timeline,
    queues: queues::Queues,
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
        let processed = Arc::new(std::sync::atomic::AtomicU64::new(store.resource_version()));
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
            nodes: Vec::new(),
            node_by_name: HashMap::new(),
            profiles: HashMap::new(),
            pending_wakeups: BTreeSet::new(),
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
            scheduler_wakeup: None,
            controllers_wakeup: None,
            windows: 0,
            windows_bound_hit: 0,
            partial_instants: 0,
            quiet_mark: None,
            quiescence_contradicted: 0,
            gangs_started: 0,
            partial_gang_node_seconds: 0.0,
            wakeups: 0,
            messages: 0,
            started: Instant::now(),
            last_progress: Instant::now(),
            ended: false,
            served: BTreeSet::new(),
            warned: BTreeSet::new(),
            warnings: Vec::new(),
            last_unserved_check: Instant::now(),
            last_unserved_sim: f64::NEG_INFINITY,
            life,
            timeline: timeline::Timeline::default(),
            queues: queues::Queues::default(),
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

    /// Handles one Batsim message and returns the reply.
    pub fn handle(&mut self, msg: Message) -> anyhow::Result<Message> {
        self.messages += 2;
        let t = msg.now.max(self.clock.now());
        for ev in &msg.events {
            self.timeline_batsim(t, "batsim", &ev.data);
        }
        self.check_quiet_mark(t);
        let mut out: Vec<EventData> = std::mem::take(&mut self.early);
        // Nodes exist before the first pod, as in a real cluster: the hosts
        // become nodes, the scheduler takes them in (during its warm-up,
        // before simulated time 0, if the clock started earlier), and only
        // then do the instant's other events (the first submissions)
        // happen. Otherwise the scheduler may see pods before nodes and put
        // them in backoff, or still be syncing its caches.
        let mut msg = msg;
        if let Some(i) = msg
            .events
            .iter()
            .position(|e| matches!(e.data, EventData::SimulationBegins(_)))
        {
            let begins = msg.events.remove(i);
            // The scheduler started before Batsim: it may be in the middle
            // of a request (its first lists) when the nodes come. They come
            // once it is quiescent, behind its closed gate, so that a list
            // has either none of them or all, whatever the machine's load
            // (under --deterministic, the run's outcome depended on it).
            // (a settle that may move the clock to no instant: it only
            // waits for quiescence)
            self.settle(f64::NEG_INFINITY, &mut out)?;
            let gate = match &self.side {
                SchedulerSide::Shim(s) => Some(s.close_gate()),
                SchedulerSide::External => None,
            };
            {
                let _hold = self.store.hold();
                self.apply(begins.data, &mut out)?;
            }
            if let Some(g) = gate {
                if g.deliver(Duration::from_secs(30)) {
                    self.partial_instants += 1;
                }
            }
            self.settle(t, &mut out)?;
        }
        // Everything of one instant reaches each watcher in one frame, so
        // the scheduler sees simultaneous events together (16 completions
        // at once, not one and then 15 more while it already decides); its
        // gate, closed meanwhile, makes the clock's move and those frames
        // one step for it, however the kernel delivers them.
        let gate = match &self.side {
            SchedulerSide::Shim(s) => Some(s.close_gate()),
            SchedulerSide::External => None,
        };
        let applied = self.advance(t).and_then(|()| {
            let _hold = self.store.hold();
            self.apply_instant(t, msg, &mut out)
        });
        if let Some(g) = gate {
            if g.deliver(Duration::from_secs(30)) {
                self.partial_instants += 1;
            }
        }
        applied?;
        if self.ended {
            self.drain_changes(&mut out)?;
            return Ok(Message::empty(t));
        }
        let reply_now = self.window(t, &mut out)?;
        self.warn_unserved();
        self.give_up_if_stuck(reply_now, &mut out)?;
        // The scheduler's concurrent requests reach the API in an order
        // that varies run to run; decisions of one window are simultaneous,
        // so a canonical order keeps runs bit-for-bit reproducible.
        self.life_finish_registration(&mut out);
        canonical_order(&mut out);
        for ev in &out {
            self.timeline_batsim(reply_now, "broker", ev);
        }
        let mut reply = Message::new(reply_now);
        for ev in out {
            reply.push(reply_now, ev);
        }
        self.request_wakeups(reply_now, &mut reply);
        self.progress();
        Ok(reply)
    }

    /// Waits until the scheduler has taken in what the API just told it (at
    /// startup: its caches hold every node). The clock moves only through
    /// the warm-up, the scheduler's own timers before `until` (a scheduler
    /// polling for its caches to sync, as the upstream one does every
    /// 100 ms, is ready when the simulation starts).
    fn settle(&mut self, until: f64, out: &mut Vec<EventData>) -> anyhow::Result<()> {
        const BOUND: Duration = Duration::from_secs(30);
        let start = Instant::now();
        match &self.side {
            SchedulerSide::Shim(_) => {
                loop {
                    let SchedulerSide::Shim(s) = &self.side else {
                        unreachable!()
                    };
                    // Changes are taken in as they come (the settle of a
                    // deterministic run waits for the broker to have
                    // reacted to each; the scheduler's leases and events
                    // need no reaction).
                    let changes = &self.changes;
                    let q = s
                        .wait(Duration::from_millis(50), &|| !changes.is_empty())
                        .map_err(|e| anyhow::anyhow!("watching the scheduler: {e}"))?;
                    if self.drain_changes(out)? > 0 || q == Quiet::Busy {
                        if start.elapsed() >= BOUND {
                            tracing::warn!(
                                "the scheduler was still busy after {BOUND:?}; the run goes on"
                            );
                            return Ok(());
                        }
                        continue;
                    }
                    let api = self.api_deadline();
                    // The next timer of the scheduler, a controller or the API.
                    let next = |earliest: Option<SimTime>, controllers: Option<SimTime>| {
                        earliest
                            .into_iter()
                            .chain(controllers)
                            .map(batsim_time)
                            .chain(api)
                            .reduce(f64::min)
                    };
                    match q {
                        Quiet::Yes {
                            earliest_deadline,
                            controllers,
                        } if next(earliest_deadline, controllers).is_some_and(|d| d < until)
                            && start.elapsed() < BOUND =>
                        {
                            let d = next(earliest_deadline, controllers).expect("checked above");
                            self.advance_gated(d)?;
                        }
                        Quiet::Yes { .. } => {
                            tracing::debug!(waited = ?start.elapsed(), "scheduler settled after the nodes were created");
                            return Ok(());
                        }
                        Quiet::Exited(i) => return self.process_exited(i),
                        Quiet::Busy if start.elapsed() >= BOUND => {
                            tracing::warn!(
                                "the scheduler was still busy after {BOUND:?}; the run goes on"
                            );
                            return Ok(());
                        }
                        Quiet::Busy => {}
                    }
                }
            }
            // Not observable: give the watch events time to be written.
            SchedulerSide::External => {
                if let Some(a) = &self.cfg.activity {
                    while !a.snapshot().is_idle() && start.elapsed() < Duration::from_secs(1) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                Ok(())
            }
        }
    }

    /// Everything that happens at instant `t`, before the scheduler looks.
    fn apply_instant(
        &mut self,
        t: f64,
        msg: Message,
        out: &mut Vec<EventData>,
    ) -> anyhow::Result<()> {
        // The scenario's operations of this instant come before Batsim's
        // events of it: queues, quotas or priority classes created at time
        // 0 exist when the first jobs of time 0 are submitted.
        self.fire_scenario(t, out)?;
        for ev in msg.events {
            self.apply(ev.data, out)?;
        }
        if !self.ended {
            self.life_start_held(out)?;
            self.pending_wakeups
                .retain(|&w| (w as f64) / 1e6 > t + 1e-9);
            self.fire_timers(t, out)?;
            self.collect_garbage();
        }
        self.retire_jobs();
        Ok(())
    }

    /// kube-controller-manager's pod GC and the API server's event TTL:
    /// terminated pods beyond the threshold leave the API (the scheduler sees them DELETED, in the
    /// same frame as the instant's other changes).
    fn collect_garbage(&mut self) {
        // Events (a scheduler writes one per binding) expire on simulated
        // time, as with the API server's --event-ttl.
        self.store.expire_events();
        for pod in self.gc.collect() {
            if let Err(e) = self.store.delete("pods", Some(translate::NAMESPACE), &pod) {
                tracing::debug!(%pod, error = %e, "terminated pod not collected");
            }
        }
    }

    fn advance(&mut self, t: f64) -> anyhow::Result<()> {
        if t < self.clock.now() {
            return Ok(());
        }
        self.clock.set(t);
        // The API's timers due by now (a watch's timeoutSeconds, bookmarks)
        // fire now: the broker asks Batsim to stop at each of them, so they
        // fire at their own instant (to Batsim's microsecond).
        if let fakeapi::WatchTimers::Simulated(timers) = &self.store.config().watch_timers {
            let ns = SIM_EPOCH_NANOS as i128 + (t * 1e9).round() as i128 + 999;
            let fired = timers.fire_until(DateTime::from_timestamp_nanos(
                ns.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            ));
            if fired > 0 {
                tracing::debug!(time = t, fired, "API timers fired");
                self.timers_written();
            }
        }
        if let SchedulerSide::Shim(s) = &self.side {
            // On a realtime clock the scheduler's time runs on by itself and
            // may already be past `t`: it never goes back.
            let target = sim_time(t);
            if target > s.now() {
                s.advance_to(target)
                    .map_err(|e| anyhow::anyhow!("moving the scheduler's clock: {e}"))?;
            }
        }
        Ok(())
    }

    /// [`advance`](Self::advance) behind the programs' gates: each sees
    /// the clock's move as one step, and under --deterministic with several
    /// programs none decides before every one has seen it (an instant's
    /// delivery closes them itself).
    fn advance_gated(&mut self, t: f64) -> anyhow::Result<()> {
        let _gate = match &self.side {
            SchedulerSide::Shim(s) => Some(s.close_gate()),
            SchedulerSide::External => None,
        };
        self.advance(t)
    }

    /// Waits until what the API's fired timers write (bookmarks, the end
    /// of a timed-out watch) is written, before anything else changes: a
    /// bookmark carries the store's version, and whether it is taken
    /// before or after the instant's first change (or, on a watch with a
    /// queued event, is sent at all) would otherwise depend on which thread
    /// the machine runs first.
    fn timers_written(&self) {
        const BOUND: Duration = Duration::from_secs(5);
        let Some(a) = &self.cfg.activity else {
            return;
        };
        let start = Instant::now();
        let mut looks = 0u32;
        while a.snapshot().watch_events_pending != 0 {
            if start.elapsed() >= BOUND {
                tracing::warn!(
                    "the API's fired timers were not all written after {BOUND:?}; the run goes on"
                );
                return;
            }
            // A bookmark is written within microseconds: yield to the
            // API's workers first, sleep only if it takes longer.
            looks += 1;
            if looks < 200 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    fn apply(&mut self, ev: EventData, out: &mut Vec<EventData>) -> anyhow::Result<()> {
        let now = self.clock.now();
        match ev {
            EventData::SimulationBegins(b) => {
                if !b.allow_compute_sharing {
                    return self.fail(
                        "Batsim runs without compute sharing, so it would abort as soon as two \
                         pods share a node: start Batsim with --enable-compute-sharing",
                    );
                }
                self.life_begins(&b.config);
                if let Some(p) = &b.profiles {
                    for (w, profs) in p {
                        if let Value::Object(m) = profs {
                            let m = m
                                .iter()
                                .map(|(k, v)| (k.clone(), v.to_string().into_boxed_str()))
                                .collect();
                            self.profiles.insert(w.clone(), m);
                        }
                    }
                }
                for r in &b.compute_resources {
                    let node = translate::node_from_host(r, to_time(now))
                        .map_err(|e| anyhow::anyhow!("{e}"))?;
                    let allocatable = translate::node_allocatable(r)
                        .map_err(|e| anyhow::anyhow!("host {:?}: {e}", r.name))?;
                    let name = node.metadata.name.clone().unwrap_or_default();
                    if self.node_by_name.contains_key(&name) {
                        return self.fail(format!("two hosts map to node name {name:?}"));
                    }
                    self.store
                        .create_node(node)
                        .map_err(|e| anyhow::anyhow!("creating node {name}: {e}"))?;
                    self.timeline.push(
                        now,
                        "broker",
                        "create",
                        "Node",
                        "",
                        name.clone(),
                        format!("host {}", r.name),
                    );
                    self.node_by_name.insert(name.clone(), self.nodes.len());
                    self.nodes.push(NodeRt {
                        name: name.into(),
                        resource_id: r.id,
                        allocatable,
                        used: Amounts::new(),
                        pods: 0,
                    });
                }
                for i in 0..self.nodes.len() {
                    self.sample(i);
                }
            }
            EventData::JobSubmitted(s) => {
                let workload = s.job_id.split_once('!').map(|(w, _)| w).unwrap_or("");
                let profile = s.profile.clone().or_else(|| {
                    self.profiles
                        .get(workload)
                        .and_then(|m| m.get(&s.job.profile))
                        .and_then(|text| serde_json::from_str(text).ok())
                });
                let mut record = PodRecord {
                    job_id: s.job_id.clone(),
                    pod: translate::pod_name(&s.job_id),
                    created: now,
                    ..Default::default()
                };
                let machines = self.nodes.len();
                let pods = if s.job.res as usize > machines {
                    Err(format!(
                        "it asks for {} machines; the platform has {machines}",
                        s.job.res
                    ))
                } else if let Some(why) = self.missing_queue(&s.job, profile.as_ref()) {
                    Err(why)
                } else {
                    translate::pods_from_job(
                        &s.job_id,
                        &s.job,
                        profile.as_ref(),
                        to_time(now),
                        self.cfg.gang,
                        self.cfg.default_queue.as_deref(),
                    )
                };
                match pods {
                    Ok(pods) => {
                        let n = pods.len();
                        for pod in &pods {
                            let name = pod.metadata.name.as_deref().unwrap_or_default();
                            if let Some(&other) = self.job_by_pod.get(name) {
                                return self.fail(format!(
                                    "jobs {:?} and {:?} map to the same pod name {name:?}",
                                    s.job_id, self.jobs[other].record.job_id
                                ));
                            }
                        }
                        let first = self.jobs.len();
                        let gang = (n > 1).then_some(Gang {
                            first,
                            size: n as u32,
                        });
                        let group = gang.map(|_| self.intern(&record.pod));
                        if let Some(g) = &group {
                            self.create_group(g, n as u32, &s.job, profile.as_ref())?;
                        }
                        let queue = translate::job_queue_or(
                            self.cfg.gang,
                            &s.job,
                            profile.as_ref(),
                            self.cfg.default_queue.as_deref(),
                        )
                        .map(|q| self.queues.resolve(&self.store, q));
                        if let Some(q) = &queue {
                            self.queues.submitted(q);
                        }
                        for (rank, mut pod) in pods.into_iter().enumerate() {
                            if let (Some(name), Some(spec)) =
                                (&self.cfg.scheduler_name, pod.spec.as_mut())
                            {
                                if !translate::names_scheduler(&s.job, profile.as_ref()) {
                                    spec.scheduler_name = Some(name.clone());
                                }
                            }
                            let scheduler = self.intern(
                                pod.spec
                                    .as_ref()
                                    .and_then(|s| s.scheduler_name.as_deref())
                                    .unwrap_or_default(),
                            );
                            let image = self.intern(
                                pod.spec
                                    .as_ref()
                                    .and_then(|s| s.containers.first())
                                    .and_then(|c| c.image.as_deref())
                                    .unwrap_or_default(),
                            );
                            let record = PodRecord {
                                job_id: s.job_id.clone(),
                                pod: pod.metadata.name.clone().unwrap_or_default(),
                                created: now,
                                requests: translate::pod_requests(&pod),
                                group: group.clone(),
                                rank: rank as u32,
                                queue: queue.clone(),
                                ..Default::default()
                            };
                            let idx = self.jobs.len();
                            self.life_admit(idx, &mut pod, &s.job);
                            self.store.add_pod(&pod).map_err(|e| {
                                anyhow::anyhow!("creating pod {} for {}: {e}", record.pod, s.job_id)
                            })?;
                            self.timeline.push(
                                now,
                                "broker",
                                "create",
                                "Pod",
                                translate::NAMESPACE,
                                record.pod.clone(),
                                format!("job {}", s.job_id),
                            );
                            let pod_name = record.pod.clone();
                            let idx = self.push_job(JobRt {
                                record,
                                phase: Phase::Pending,
                                image,
                                scheduler,
                                touched: false,
                                created_wall: Instant::now(),
                                batsim_open: false,
                                pod_gone: false,
                                gang,
                            });
                            self.job_by_pod.insert(pod_name, idx);
                        }
                        self.job_by_id.insert(s.job_id.clone(), first);
                    }
                    Err(why) => {
                        tracing::warn!(job = %s.job_id, %why, "job rejected: it cannot be pods");
                        out.push(build::reject_job(&s.job_id));
                        record.outcome = format!("REJECTED: {why}");
                        let none = self.intern("");
                        let idx = self.push_job(JobRt {
                            record,
                            phase: Phase::Done,
                            image: none.clone(),
                            scheduler: none,
                            touched: false,
                            created_wall: Instant::now(),
                            batsim_open: false,
                            pod_gone: true,
                            gang: None,
                        });
                        self.job_by_id.insert(s.job_id.clone(), idx);
                        self.retirable.push(idx);
                    }
                }
            }
            EventData::JobCompleted(c) => {
                let Some(&first) = self.job_by_id.get(&c.job_id) else {
                    return self.fail(format!("JOB_COMPLETED for unknown job {:?}", c.job_id));
                };
                // Every pod of a gang ends with its job.
                let members: Vec<usize> = match self.jobs[first].gang {
                    Some(g) => g.members().filter(|&k| self.jobs.contains(k)).collect(),
                    None => vec![first],
                };
                for i in members {
                    self.jobs[i].batsim_open = false;
                    self.retirable.push(i);
                    let node = match self.jobs[i].phase {
                        Phase::Running { node } | Phase::Bound { node } => node,
                        // Killed after the scheduler deleted its pod: already done.
                        _ => continue,
                    };
                    self.set_phase(i, Phase::Completing { node });
                    self.jobs[i].record.outcome = c.job_state.as_str().to_string();
                    let delay = self.cfg.kubelet.report_delay();
                    if delay > 0.0 {
                        self.add_timer(
                            now + delay,
                            Timer::Report {
                                job: i,
                                state: c.job_state.clone(),
                            },
                        );
                    } else {
                        self.report_finished(i, &c.job_state)?;
                    }
                }
            }
            EventData::JobKilled(_)
            | EventData::RequestedCall
            | EventData::ResourceStateChanged(_) => {}
            EventData::Notify(n) => {
                if n.kind == batsim::protocol::notify::NO_MORE_STATIC_JOB_TO_SUBMIT {
                    self.no_more_static = true;
                }
                self.life_notify(&n)?;
            }
            EventData::SimulationEnds => self.ended = true,
            EventData::Unknown { kind, .. } => {
                tracing::warn!(%kind, "unknown Batsim event ignored");
            }
            other => {
                tracing::warn!(kind = other.kind(), "unexpected event from Batsim ignored");
            }
        }
        Ok(())
    }

    fn add_timer(&mut self, at: f64, timer: Timer) {
        self.timer_seq += 1;
        self.timers
            .insert(((ceil_us(at) * 1e6).round() as u64, self.timer_seq), timer);
    }

    /// The scenario's operations due by `t`, before anything else of the
    /// instant (their timers, in file order among equal times).
    fn fire_scenario(&mut self, t: f64, out: &mut Vec<EventData>) -> anyhow::Result<()> {
        let due_key = ((t + 1e-9) * 1e6).floor() as u64;
        let due: Vec<(u64, u64)> = self
            .timers
            .range(..(due_key + 1, 0))
            .filter(|(_, timer)| matches!(timer, Timer::Life(lifecycle::LifeTimer::Scenario(_))))
            .map(|(k, _)| *k)
            .collect();
        for key in due {
            if let Some(Timer::Life(l)) = self.timers.remove(&key) {
                self.fire_life(l, out)?;
            }
        }
        Ok(())
    }

    fn fire_timers(&mut self, t: f64, out: &mut Vec<EventData>) -> anyhow::Result<()> {
        let due_key = ((t + 1e-9) * 1e6).floor() as u64;
        while let Some((&key, _)) = self.timers.first_key_value() {
            if key.0 > due_key {
                break;
            }
            let timer = self.timers.remove(&key).expect("present");
            // A retired job's timers have nothing left to do.
            if timer.job().is_some_and(|j| !self.jobs.contains(j)) {
                continue;
            }
            match timer {
                Timer::Start { job } => self.start_job(job, out)?,
                Timer::Report { job, state } => self.report_finished(job, &state)?,
                Timer::Life(t) => self.fire_life(t, out)?,
            }
        }
        Ok(())
    }

    /// The kubelet's report: the pod leaves its node in the API.
    fn report_finished(&mut self, i: usize, state: &JobState) -> anyhow::Result<()> {
        let now = self.clock.now();
        let Phase::Completing { node } = self.jobs[i].phase else {
            return Ok(());
        };
        self.set_phase(i, Phase::Done);
        self.jobs[i].record.finished = Some(now);
        self.release(i, node);
        let (phase, reason, code) = match state {
            JobState::CompletedSuccessfully => ("Succeeded", "Completed", 0),
            JobState::CompletedWalltimeReached => ("Failed", "DeadlineExceeded", 137),
            JobState::CompletedKilled => ("Failed", "Killed", 137),
            _ => ("Failed", "Error", 1),
        };
        let started = self.jobs[i].record.started.unwrap_or(now);
        let status = terminal_status(phase, reason, code, started, now, &self.jobs[i].image);
        self.write_status(i, status, "final");
        let r = &self.jobs[i].record;
        self.gc
            .terminated(&r.pod, SIM_EPOCH_SECS + r.created, reason == "Evicted");
        Ok(())
    }

    /// Writes a pod's status; the scheduler may have deleted the pod meanwhile.
    fn write_status(&mut self, i: usize, status: PodStatus, what: &str) {
        let pod = self.jobs[i].record.pod.clone();
        let phase = status.phase.clone().unwrap_or_default();
        match self
            .store
            .set_pod_status(translate::NAMESPACE, &pod, &status)
        {
            Ok(_) => self.timeline.push(
                self.clock.now(),
                "kubelet",
                "status",
                "Pod",
                translate::NAMESPACE,
                pod,
                phase,
            ),
            Err(e) => tracing::debug!(%pod, error = %e, "{what} pod status not written"),
        }
    }

    fn release(&mut self, i: usize, node: usize) {
        let req = self.jobs[i].record.requests.clone();
        let n = &mut self.nodes[node];
        for (k, v) in req {
            *n.used.entry(k).or_default() -= v;
        }
        n.pods = n.pods.saturating_sub(1);
        self.sample(node);
    }

    fn sample(&mut self, node: usize) {
        let n = &self.nodes[node];
        let get = |a: &Amounts, k: &str| a.get(k).copied().unwrap_or(0);
        self.samples.push(NodeSample {
            time: self.clock.now(),
            node: n.name.clone(),
            cpu_used: get(&n.used, "cpu"),
            cpu_allocatable: get(&n.allocatable, "cpu"),
            memory_used: get(&n.used, "memory"),
            memory_allocatable: get(&n.allocatable, "memory"),
            pods: n.pods,
        });
    }

    /// Lets the scheduler react; returns the reply's `now`.
    fn window(&mut self, t: f64, out: &mut Vec<EventData>) -> anyhow::Result<f64> {
        self.windows += 1;
        self.timeline.begin_window();
        self.samples.begin_window();
        let pending = self.pending.len();
        let running = self.active;
        let mut w = self
            .policy
            .open(sim_time(t), Situation { pending, running });
        let opened = Instant::now();
        let mut mark = None;
        loop {
            match w.step() {
                Step::Close => break,
                Step::Wait { at_most } => {
                    let decided = match &self.side {
                        SchedulerSide::Shim(s) => {
                            let slice = at_most.min(Duration::from_millis(20));
                            let changes = &self.changes;
                            let q = s
                                .wait(slice, &|| !changes.is_empty())
                                .map_err(|e| anyhow::anyhow!("watching the scheduler: {e}"))?;
                            // Taken at the decision, to check it by later.
                            let look =
                                matches!(q, Quiet::Yes { .. }).then(|| QuietMark::take(s, t));
                            let decided = self.drain_changes(out)?;
                            mark = None;
                            match q {
                                Quiet::Exited(i) => return self.process_exited(i),
                                // Changes drained after the check may have
                                // woken it again: look once more.
                                Quiet::Yes {
                                    earliest_deadline,
                                    controllers,
                                } if decided == 0 => {
                                    self.controllers_wakeup = controllers.map(batsim_time);
                                    mark = look;
                                    w.quiescent(earliest_deadline)
                                }
                                _ => {}
                            }
                            decided
                        }
                        SchedulerSide::External => {
                            let got = self.rt.block_on(async {
                                tokio::time::timeout(at_most, self.changes.recv()).await
                            });
                            let mut decided = 0;
                            if let Ok(Some(ch)) = got {
                                decided += self.on_change(ch, out)?;
                            }
                            decided += self.drain_changes(out)?;
                            decided
                        }
                    };
                    for _ in 0..decided {
                        w.decision();
                    }
                    self.warn_unserved();
                    w.wall_elapsed(opened.elapsed());
                }
            }
        }
        let outcome = self.policy.close(w);
        self.timeline.end_window();
        self.samples.end_window();
        self.queues.flush(&self.store, t);
        tracing::debug!(
            time = t,
            decisions = outcome.decisions,
            wall_ms = opened.elapsed().as_secs_f64() * 1e3,
            wake_up = ?outcome.wake_up_at.map(batsim_time),
            "window closed"
        );
        if outcome.bound_hit {
            self.windows_bound_hit += 1;
            tracing::warn!(
                time = t,
                "the scheduler was still busy when the window's wall-clock bound ran out"
            );
        }
        if let Some(f) = outcome.failure {
            return self.fail_because(EndReason::Stalled, f.to_string());
        }
        let reply_now = batsim_time(outcome.reply_at).max(t);
        if let Some(at) = outcome.wake_up_at {
            let at = batsim_time(at);
            if at > reply_now {
                self.scheduler_wakeup = Some(at);
            }
        }
        // Decisions become Batsim events stamped with the reply's time.
        if reply_now > t {
            self.advance_gated(reply_now)?;
        } else {
            self.quiet_mark = mark;
        }
        Ok(reply_now)
    }

    /// A window that closed on quiescence said the scheduler would do
    /// nothing until the clock moved or the API told it something. Before
    /// the next instant, neither has happened: if the API served it
    /// meanwhile (a request, a change), the decision was wrong, and what
    /// it did then lands at the next instant instead of this one. Exact,
    /// and costs one look per window; counted in the summary and warned
    /// about (with the processes' CPU times), for the soak to find.
    fn check_quiet_mark(&mut self, t: f64) {
        let (Some(mark), SchedulerSide::Shim(s)) = (self.quiet_mark.take(), &self.side) else {
            return;
        };
        let now = QuietMark::take(s, mark.time);
        let changes = !self.changes.is_empty();
        // CPU time alone proves nothing: a program under the seccomp
        // supervisor may run a few microseconds (a thread's held wait
        // answered and entered again) without doing anything.
        if now.same_api(&mark) && !changes {
            return;
        }
        self.quiescence_contradicted += 1;
        if self.quiescence_contradicted <= 5 {
            tracing::warn!(
                decided_at = mark.time,
                next_instant = t,
                ?mark,
                ?now,
                changes,
                "the scheduler moved after it was found quiescent, before the next instant"
            );
        }
    }
}

/// What a quiescence decision can be checked against later: each
/// process's CPU time, and the API's counts of requests and watch events.
#[derive(Debug, Clone, PartialEq)]
struct QuietMark {
    time: f64,
    cpu_ns: Vec<Option<u64>>,
    requests_served: u64,
    requests_in_flight: usize,
    watch_events_written: u64,
}

impl QuietMark {
    fn same_api(&self, other: &QuietMark) -> bool {
        (
            self.requests_served,
            self.requests_in_flight,
            self.watch_events_written,
        ) == (
            other.requests_served,
            other.requests_in_flight,
            other.watch_events_written,
        )
    }

    fn take(s: &sync::ShimSide, time: f64) -> QuietMark {
        let a = s.activity.snapshot();
        QuietMark {
            time,
            cpu_ns: s.procs.iter().map(|p| p.controller.cpu_time_ns()).collect(),
            requests_served: a.requests_served,
            requests_in_flight: a.requests_in_flight,
            watch_events_written: a.watch_events_written,
        }
    }
}

/// The decisions of one window in a canonical order: rejections, kills,
/// executions, the rest, each by job id. A job both started and killed in
/// the window (a gang bound, then preempted in the same instant: Kueue
/// admits a workload and reclaims its quota at once) is killed after its
/// EXECUTE_JOB, which Batsim needs (a KILL_JOB for a job that is not
/// running aborts it): it runs for 0 s and ends killed.
fn canonical_order(out: &mut [EventData]) {
    let executed: BTreeSet<String> = out
        .iter()
        .filter_map(|ev| match ev {
            EventData::ExecuteJob(e) => Some(e.job_id.clone()),
            _ => None,
        })
        .collect();
    out.sort_by_cached_key(|ev| match ev {
        EventData::RejectJob(r) => (0, r.job_id.clone()),
        EventData::KillJob(k) if k.job_ids.iter().any(|j| executed.contains(j)) => {
            (3, k.job_ids.join(" "))
        }
        EventData::KillJob(k) => (1, k.job_ids.join(" ")),
        EventData::ExecuteJob(e) => (2, e.job_id.clone()),
        other => (4, other.kind().to_string()),
    });
}

/// A pod's status once its container runs.
fn running_status(now: f64, image: &str) -> PodStatus {
    PodStatus {
        phase: Some("Running".into()),
        start_time: Some(to_time(now)),
        conditions: Some(vec![
            condition("PodScheduled", "True", None, now),
            condition("Initialized", "True", None, now),
            condition("ContainersReady", "True", None, now),
            condition("Ready", "True", None, now),
        ]),
        container_statuses: Some(vec![ContainerStatus {
            name: "job".into(),
            image: image.to_string(),
            image_id: String::new(),
            ready: true,
            started: Some(true),
            restart_count: 0,
            state: Some(ContainerState {
                running: Some(ContainerStateRunning {
                    started_at: Some(to_time(now)),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        ..Default::default()
    }
}

/// The status a kubelet writes when a pod's container has ended.
fn terminal_status(
    phase: &str,
    reason: &str,
    code: i32,
    started: f64,
    now: f64,
    image: &str,
) -> PodStatus {
    PodStatus {
        phase: Some(phase.into()),
        reason: (phase == "Failed").then(|| reason.to_string()),
        start_time: Some(to_time(started)),
        conditions: Some(vec![
            condition("PodScheduled", "True", None, started),
            condition("Ready", "False", Some("PodCompleted"), now),
        ]),
        container_statuses: Some(vec![ContainerStatus {
            name: "job".into(),
            image: image.to_string(),
            image_id: String::new(),
            ready: false,
            restart_count: 0,
            state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: code,
                    reason: Some(reason.into()),
                    started_at: Some(to_time(started)),
                    finished_at: Some(to_time(now)),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        ..Default::default()
    }
}

fn condition(kind: &str, status: &str, reason: Option<&str>, at: f64) -> PodCondition {
    PodCondition {
        type_: kind.into(),
        status: status.into(),
        reason: reason.map(str::to_string),
        last_transition_time: Some(to_time(at)),
        ..Default::default()
    }
}

impl Broker {
    /// Applies every change already queued; returns the number of decisions.
    fn drain_changes(&mut self, out: &mut Vec<EventData>) -> anyhow::Result<usize> {
        let mut decided = 0;
        let mut any = false;
        while let Ok(ch) = self.changes.try_recv() {
            let rv = ch.resource_version;
            decided += self.on_change(ch, out)?;
            self.processed
                .store(rv, std::sync::atomic::Ordering::Release);
            any = true;
        }
        if any {
            timeshim::settle_progress();
        }
        Ok(decided)
    }

    /// Takes in the changes the programs made before the simulation began
    /// (a controller creating its objects while the scheduler starts): the
    /// settle of a deterministic run waits for the broker to have reacted
    /// to each, and the broker's loop has not started yet.
    pub fn take_early_changes(&mut self) -> anyhow::Result<()> {
        let mut early = std::mem::take(&mut self.early);
        self.drain_changes(&mut early)?;
        self.early = early;
        Ok(())
    }

    /// The resourceVersion of the last change the broker has reacted to.
    pub fn processed_changes(&self) -> Arc<std::sync::atomic::AtomicU64> {
        self.processed.clone()
    }

    /// Reads one change made through the API; returns 1 for a decision.
    fn on_change(&mut self, ch: Change, out: &mut Vec<EventData>) -> anyhow::Result<usize> {
        if ch.origin.is_client() {
            self.timeline.http_change(self.clock.now(), &ch);
        }
        if matches!(
            (ch.resource.group, ch.resource.plural),
            ("scheduling.volcano.sh", "queues") | ("kueue.x-k8s.io", "clusterqueues")
        ) {
            self.queues.touched(&ch.name);
        }
        if ch.kind == EventType::Deleted && ch.resource.plural == "pods" {
            if let Some(&i) = self.job_by_pod.get(&ch.name) {
                self.jobs[i].pod_gone = true;
                self.retirable.push(i);
            }
        }
        if self.cfg.gang == translate::GangStyle::Kueue
            && ch.origin.is_client()
            && ch.kind != EventType::Deleted
            && ch.resource.group == "kueue.x-k8s.io"
            && ch.resource.plural == "workloads"
        {
            self.kueue_workload_reason(&ch.object);
            return Ok(0);
        }
        if !ch.origin.is_client() || ch.resource.plural != "pods" {
            return Ok(0);
        }
        let Some(&i) = self.job_by_pod.get(&ch.name) else {
            return Ok(0);
        };
        if !self.jobs[i].touched {
            self.jobs[i].touched = true;
            self.served.insert(self.jobs[i].scheduler.to_string());
        }
        let now = self.clock.now();
        // A client's deletion of a pod with finalizers (Kueue's, on the pods
        // it manages) only marks it: as for a deletion, its job ends now
        // (a kubelet stops the containers of a terminating pod); the pod
        // stays until its finalizers are gone, with the status a kubelet
        // would write, which is what the finalizers' owner waits for.
        let marked = ch.kind == EventType::Modified
            && !ch.object["metadata"]["deletionTimestamp"].is_null()
            && ch
                .old
                .as_ref()
                .is_some_and(|o| o["metadata"]["deletionTimestamp"].is_null());
        if marked {
            let running = matches!(
                self.jobs[i].phase,
                Phase::Bound { .. } | Phase::Running { .. }
            );
            let started = self.jobs[i].record.started.unwrap_or(now);
            self.pod_deleted(i, now, out);
            if running {
                let status =
                    terminal_status("Failed", "Killed", 137, started, now, &self.jobs[i].image);
                self.write_status(i, status, "killed");
            }
            return Ok(1);
        }
        match ch.kind {
            EventType::Deleted => {
                let r = &self.jobs[i].record;
                self.gc.forget(&r.pod, SIM_EPOCH_SECS + r.created, false);
                let was_marked = ch
                    .old
                    .as_ref()
                    .is_some_and(|o| !o["metadata"]["deletionTimestamp"].is_null());
                if was_marked && self.jobs[i].phase == Phase::Done {
                    // Its deletion was seen when it was marked.
                    return Ok(0);
                }
                self.pod_deleted(i, now, out);
                Ok(1)
            }
            EventType::Modified | EventType::Added => {
                let r = &self.jobs[i].record;
                self.decisions
                    .observe(now, &r.job_id, &r.pod, &ch.object, ch.old.as_deref());
                let node_name = ch.object["spec"]["nodeName"].as_str().unwrap_or("");
                let was = ch
                    .old
                    .as_ref()
                    .and_then(|o| o["spec"]["nodeName"].as_str())
                    .unwrap_or("");
                if !node_name.is_empty() && was.is_empty() && self.jobs[i].phase == Phase::Pending {
                    return self.bind(i, node_name, out).map(|_| 1);
                }
                // A scheduling failure written into the pod's status.
                if let Some(conds) = ch.object["status"]["conditions"].as_array() {
                    for c in conds {
                        // SchedulingGated is the API's, written when a
                        // gated pod is created: no scheduling attempt, and
                        // the gate holder's reason (Kueue's) says more.
                        if c["type"] == "PodScheduled"
                            && c["status"] == "False"
                            && c["reason"] != "SchedulingGated"
                        {
                            let msg = c["message"].as_str().unwrap_or("").to_string();
                            let old_msg = ch.old.as_ref().and_then(|o| {
                                o["status"]["conditions"].as_array().and_then(|cs| {
                                    cs.iter().find(|c| c["type"] == "PodScheduled").map(|c| {
                                        (c["message"].clone(), c["lastTransitionTime"].clone())
                                    })
                                })
                            });
                            let new_key = (c["message"].clone(), c["lastTransitionTime"].clone());
                            if old_msg.as_ref() != Some(&new_key) || msg.is_empty() {
                                self.jobs[i].record.attempts += 1;
                            }
                            self.jobs[i].record.last_unschedulable_reason = Some(msg);
                        }
                    }
                }
                Ok(0)
            }
        }
    }

    /// A client deleted (or marked for deletion) job `i`'s pod: a pending
    /// job is rejected, a bound or running one killed (preemption), its
    /// node freed now, and the rest of its gang ended.
    fn pod_deleted(&mut self, i: usize, now: f64, out: &mut Vec<EventData>) {
        let job_id = self.jobs[i].record.job_id.clone();
        let ends_gang = self.jobs[i].gang.is_some()
            && matches!(
                self.jobs[i].phase,
                Phase::Pending | Phase::Bound { .. } | Phase::Running { .. }
            );
        match self.jobs[i].phase.clone() {
            Phase::Pending => {
                out.push(build::reject_job(&job_id));
                self.set_phase(i, Phase::Done);
                self.jobs[i].record.outcome = "REJECTED: pod deleted before binding".into();
            }
            Phase::Bound { node } | Phase::Running { node } => {
                // Preemption: the job is killed, its node freed now.
                if matches!(self.jobs[i].phase, Phase::Running { .. }) {
                    out.push(build::kill_jobs([job_id.as_str()]));
                } else {
                    self.cancel_start(i);
                    if let Some(b) = self.jobs[i]
                        .record
                        .bound
                        .filter(|_| self.jobs[i].gang.is_some())
                    {
                        self.partial_gang_node_seconds += now - b;
                    }
                    out.push(build::reject_job(&job_id));
                }
                self.set_phase(i, Phase::Done);
                self.jobs[i].record.finished = Some(now);
                self.jobs[i].record.outcome = "PREEMPTED".into();
                self.release(i, node);
            }
            Phase::Completing { node } => {
                self.set_phase(i, Phase::Done);
                self.jobs[i].record.finished = Some(now);
                self.release(i, node);
            }
            Phase::Done => {}
        }
        if ends_gang {
            self.end_gang_with(i, "was deleted");
        }
        self.last_decision_at = now;
        self.last_decision_wall = Instant::now();
    }

    /// Kueue writes why a workload waits into the Workload, not into its
    /// pods (they keep the `kueue.x-k8s.io/admission` gate, which the
    /// scheduler does not look past): the reason of a Workload's
    /// `QuotaReserved=False` becomes its pods' `last_unschedulable_reason`
    /// in pods.csv (`Kueue <reason>: <message>`), not counted as a
    /// scheduling attempt. The pods are the Workload's owners.
    fn kueue_workload_reason(&mut self, wl: &Value) {
        let Some(c) = wl["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "QuotaReserved"))
        else {
            return;
        };
        if c["status"] != "False" {
            return;
        }
        let why = format!(
            "Kueue {}: {}",
            c["reason"].as_str().unwrap_or(""),
            c["message"].as_str().unwrap_or("")
        );
        for owner in wl["metadata"]["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if owner["kind"] != "Pod" {
                continue;
            }
            let Some(&i) = owner["name"].as_str().and_then(|n| self.job_by_pod.get(n)) else {
                continue;
            };
            if self.jobs[i].phase == Phase::Pending {
                self.jobs[i].record.last_unschedulable_reason = Some(why.clone());
            }
        }
    }

    fn bind(&mut self, i: usize, node_name: &str, out: &mut Vec<EventData>) -> anyhow::Result<()> {
        let now = self.clock.now();
        let Some(&node) = self.node_by_name.get(node_name) else {
            return self.fail_because(
                EndReason::Invariant,
                format!(
                    "the scheduler bound pod {} to {node_name:?}, which is {}",
                    self.jobs[i].record.pod,
                    self.not_a_node_why(node_name)
                ),
            );
        };
        self.jobs[i].record.attempts += 1;
        self.jobs[i].record.bound = Some(now);
        self.jobs[i].record.node = Some(node_name.to_string());
        self.set_phase(i, Phase::Bound { node });
        self.last_decision_at = now;
        self.last_decision_wall = Instant::now();
        // The overcommit invariant, checked at the moment of binding.
        let req = self.jobs[i].record.requests.clone();
        let n = &mut self.nodes[node];
        let mut over = Vec::new();
        for (k, v) in &req {
            let used = n.used.entry(k.clone()).or_default();
            *used += v;
            let cap = n.allocatable.get(k).copied().unwrap_or(0);
            if *used > cap {
                over.push(format!("{k} {used} > {cap}"));
            }
        }
        n.pods += 1;
        if i64::from(n.pods) > n.allocatable.get("pods").copied().unwrap_or(110) {
            over.push(format!("pods {} > {}", n.pods, n.allocatable["pods"]));
        }
        self.sample(node);
        self.life_bound(i, node);
        if !over.is_empty() {
            self.overcommits += 1;
            let msg = format!(
                "overcommit: pod {} bound to {node_name} makes {}",
                self.jobs[i].record.pod,
                over.join(", ")
            );
            tracing::error!("{msg}");
            if self.cfg.strict {
                return self.fail_because(EndReason::Overcommit, format!("{msg} (--strict)"));
            }
        }
        let Some(g) = self.jobs[i].gang else {
            let image = self.jobs[i].image.clone();
            let delay = self.cfg.kubelet.start_delay(node_name, &image);
            return if delay > 0.0 {
                self.add_timer(now + delay, Timer::Start { job: i });
                Ok(())
            } else {
                self.start_job(i, out)
            };
        };
        // Batsim runs a parallel job on distinct machines: two pods of a
        // gang on one node cannot be executed (their pods carry a required
        // anti-affinity; a scheduler that ignores it ends here).
        let mut nodes = Vec::with_capacity(g.size as usize);
        for k in g.members() {
            match self.jobs.contains(k).then(|| self.jobs[k].phase.clone()) {
                Some(Phase::Bound { node: other }) => {
                    if k != i && other == node {
                        return self.fail_because(
                            EndReason::Invariant,
                            format!(
                                "the scheduler bound pods {} and {} of one gang to node {node_name}: \
                                 a parallel job needs distinct machines (its pods carry a required \
                                 pod anti-affinity on kubernetes.io/hostname, which this scheduler \
                                 does not honour)",
                                self.jobs[k].record.pod, self.jobs[i].record.pod
                            ),
                        );
                    }
                    nodes.push(other);
                }
                // Not all bound yet: the bound ones hold their nodes.
                _ => return Ok(()),
            }
        }
        // Every pod bound: the job starts when the slowest kubelet starts
        // its container.
        let delay = nodes
            .iter()
            .map(|&n| {
                let name = self.nodes[n].name.clone();
                self.cfg.kubelet.start_delay(&name, &self.jobs[i].image)
            })
            .fold(0.0, f64::max);
        if delay > 0.0 {
            self.add_timer(now + delay, Timer::Start { job: g.first });
            Ok(())
        } else {
            self.start_job(g.first, out)
        }
    }

    /// Under `--gang volcano`, why a job cannot enter its queue: the Volcano
    /// Queue it names (or `--default-queue` names) is not in the API when
    /// it is submitted. Volcano would take its PodGroup and never schedule
    /// it (vc-scheduler skips jobs of unknown queues; only its Job
    /// admission refuses them), so the job is rejected now, with the
    /// reason, rather than after `--give-up-after`. Volcano's own `default`
    /// queue is vc-scheduler's to create, and nothing is checked when the
    /// API does not serve Queues.
    fn missing_queue(
        &self,
        job: &batsim::protocol::Job,
        profile: Option<&Value>,
    ) -> Option<String> {
        if self.cfg.gang != translate::GangStyle::Volcano {
            return None;
        }
        let q = translate::job_queue_or(
            self.cfg.gang,
            job,
            profile,
            self.cfg.default_queue.as_deref(),
        )?;
        if q == translate::VOLCANO_DEFAULT_QUEUE {
            return None;
        }
        let found = self.store.list(
            "queues.scheduling.volcano.sh",
            None,
            None,
            Some(&format!("metadata.name={q}")),
        );
        match found {
            Ok(list) if list.is_empty() => Some(format!(
                "its queue {q:?} does not exist (no Volcano Queue of that name in the API)"
            )),
            _ => None,
        }
    }

    /// The group object of a gang, in the convention of `--gang`, created
    /// before its pods.
    fn create_group(
        &mut self,
        group: &str,
        size: u32,
        job: &batsim::protocol::Job,
        profile: Option<&Value>,
    ) -> anyhow::Result<()> {
        let style = self.cfg.gang;
        let queue = translate::job_queue_or(style, job, profile, self.cfg.default_queue.as_deref());
        let (Some(resource), Some(obj)) = (
            style.group_resource(),
            translate::group_object(style, group, size, queue),
        ) else {
            return Ok(());
        };
        let kind = obj["kind"].as_str().unwrap_or_default().to_string();
        // The queue the group object names (Volcano's), for the timeline.
        let detail = match obj["spec"]["queue"].as_str() {
            Some(q) => format!("gang of {size} in queue {q}"),
            None => format!("gang of {size}"),
        };
        if let Err(e) = self.store.create(resource, Some(translate::NAMESPACE), obj) {
            return self.fail(format!(
                "creating the {kind} of gang {group:?} ({resource}, --gang {}): {e}",
                style.as_str()
            ));
        }
        self.timeline.push(
            self.clock.now(),
            "broker",
            "create",
            &kind,
            translate::NAMESPACE,
            group.to_string(),
            detail,
        );
        Ok(())
    }

    /// Node-seconds held until `until` by the bound pods of gangs not
    /// started yet.
    fn partial_holds(&self, until: f64) -> f64 {
        self.jobs
            .iter()
            .filter(|(_, j)| j.gang.is_some() && matches!(j.phase, Phase::Bound { .. }))
            .filter_map(|(_, j)| j.record.bound.map(|b| until - b))
            .sum()
    }

    /// The live pods of `i`'s gang other than `i` (none for a plain job).
    fn gang_mates(&self, i: usize) -> Vec<usize> {
        match self.jobs[i].gang {
            Some(g) => g
                .members()
                .filter(|&k| k != i && self.jobs.contains(k))
                .collect(),
            None => Vec::new(),
        }
    }

    /// A gang whose pod `i` ended early (deleted, evicted) ends whole, as
    /// a job controller with `restartPolicy: Never` ends a parallel job:
    /// the other pods leave their nodes; if the job ran (Batsim kills it,
    /// the caller sent KILL_JOB) they fail, killed; if it never started
    /// (the caller sent REJECT_JOB) they leave the API.
    fn end_gang_with(&mut self, i: usize, why: &str) {
        let now = self.clock.now();
        let pod = self.jobs[i].record.pod.clone();
        for k in self.gang_mates(i) {
            let was = self.jobs[k].phase.clone();
            match was {
                Phase::Done => continue,
                Phase::Pending => {}
                Phase::Bound { node } => {
                    self.cancel_start(k);
                    if let Some(b) = self.jobs[k].record.bound {
                        self.partial_gang_node_seconds += now - b;
                    }
                    self.release(k, node);
                }
                Phase::Running { node } | Phase::Completing { node } => self.release(k, node),
            }
            self.set_phase(k, Phase::Done);
            self.jobs[k].batsim_open = false;
            let r = &mut self.jobs[k].record;
            if matches!(was, Phase::Running { .. } | Phase::Completing { .. }) {
                r.finished = Some(now);
                r.outcome = format!("KILLED: pod {pod} of its gang {why}");
                let status = PodStatus {
                    phase: Some("Failed".into()),
                    reason: Some("Killed".into()),
                    message: Some(format!("pod {pod} of the gang {why}")),
                    ..Default::default()
                };
                self.write_status(k, status, "killed");
            } else {
                if matches!(was, Phase::Bound { .. }) {
                    r.finished = Some(now);
                }
                r.outcome =
                    format!("REJECTED: pod {pod} of its gang {why} before the gang started");
                let name = r.pod.clone();
                if self
                    .store
                    .delete("pods", Some(translate::NAMESPACE), &name)
                    .is_ok()
                {
                    self.timeline.push(
                        now,
                        "broker",
                        "delete",
                        "Pod",
                        translate::NAMESPACE,
                        name,
                        format!("gang ended: pod {pod} {why}"),
                    );
                }
            }
        }
    }

    fn cancel_start(&mut self, i: usize) {
        self.timers
            .retain(|_, t| !matches!(t, Timer::Start { job } if *job == i));
    }

    /// The container starts: EXECUTE_JOB, and the pod shows Running; a
    /// gang's pods all start together, once all are bound.
    fn start_job(&mut self, i: usize, out: &mut Vec<EventData>) -> anyhow::Result<()> {
        if let Some(g) = self.jobs[i].gang {
            return self.start_gang(g, out);
        }
        let Phase::Bound { node } = self.jobs[i].phase else {
            return Ok(());
        };
        // Batsim refuses jobs on an unavailable machine; the pod waits
        // for its kubelet (lifecycle.rs starts it when the machine is back).
        if self.node_unavailable(node) {
            return Ok(());
        }
        let now = self.clock.now();
        self.set_phase(i, Phase::Running { node });
        self.jobs[i].record.started = Some(now);
        self.jobs[i].batsim_open = true;
        let rid = self.nodes[node].resource_id;
        out.push(build::execute_job(
            &self.jobs[i].record.job_id,
            IntervalSet::single(rid),
        ));
        let status = running_status(now, &self.jobs[i].image);
        self.write_status(i, status, "running");
        Ok(())
    }

    /// EXECUTE_JOB on the machines of every pod of the gang, once all are
    /// bound and available; every pod shows Running from this instant.
    fn start_gang(&mut self, g: Gang, out: &mut Vec<EventData>) -> anyhow::Result<()> {
        let mut nodes = Vec::with_capacity(g.size as usize);
        for k in g.members() {
            if !self.jobs.contains(k) {
                return Ok(());
            }
            match self.jobs[k].phase {
                Phase::Bound { node } if !self.node_unavailable(node) => nodes.push(node),
                _ => return Ok(()),
            }
        }
        let now = self.clock.now();
        self.partial_gang_node_seconds += self.partial_holds_of(g, now);
        self.gangs_started += 1;
        let alloc = IntervalSet::from_ids(nodes.iter().map(|&n| self.nodes[n].resource_id));
        out.push(build::execute_job(&self.jobs[g.first].record.job_id, alloc));
        for (k, node) in g.members().zip(nodes) {
            self.set_phase(k, Phase::Running { node });
            self.jobs[k].record.started = Some(now);
            self.jobs[k].batsim_open = true;
            let status = running_status(now, &self.jobs[k].image);
            self.write_status(k, status, "running");
        }
        Ok(())
    }

    /// Node-seconds the bound pods of gang `g` held until `until`.
    fn partial_holds_of(&self, g: Gang, until: f64) -> f64 {
        g.members()
            .filter(|&k| self.jobs.contains(k))
            .filter(|&k| matches!(self.jobs[k].phase, Phase::Bound { .. }))
            .filter_map(|k| self.jobs[k].record.bound.map(|b| until - b))
            .sum()
    }

    /// With nothing left to happen but pods the scheduler will not place,
    /// rejects them so that Batsim can end, saying why.
    fn give_up_if_stuck(&mut self, now: f64, out: &mut Vec<EventData>) -> anyhow::Result<()> {
        if !self.no_more_static || !self.timers.is_empty() {
            return Ok(());
        }
        if self.pending.is_empty() || now - self.last_decision_at < self.cfg.give_up_after {
            return Ok(());
        }
        // Pods bound and not started are gangs waiting for their other
        // pods (or a kubelet's start): a deadlock once no job runs.
        let mut partial = 0usize;
        if self.active > 0 {
            let mut started = false;
            for (_, j) in self.jobs.iter() {
                match j.phase {
                    Phase::Running { .. } | Phase::Completing { .. } => started = true,
                    Phase::Bound { .. } if j.gang.is_some() => partial += 1,
                    _ => {}
                }
            }
            if started || partial == 0 {
                return Ok(());
            }
        }
        // Unless quiescence is observed (exact mode), the scheduler reacts
        // on wall time (its backoff without the shim, its run time within a
        // window with it), however fast simulated time goes: give it time.
        let observed = matches!(self.side, SchedulerSide::Shim(_))
            && matches!(
                self.cfg.policy.end,
                timeshim::policy::WindowEnd::Exact { .. }
            );
        if !observed && self.last_decision_wall.elapsed() < EXTERNAL_PATIENCE {
            return Ok(());
        }
        if out.iter().any(|e| matches!(e, EventData::ExecuteJob(_))) {
            return Ok(());
        }
        if partial > 0 {
            let gangs: BTreeSet<&str> = self
                .jobs
                .iter()
                .filter(|(_, j)| j.gang.is_some() && matches!(j.phase, Phase::Bound { .. }))
                .filter_map(|(_, j)| j.record.group.as_deref())
                .collect();
            let mut names: Vec<&str> = gangs.iter().copied().take(5).collect();
            if gangs.len() > 5 {
                names.push("…");
            }
            return self.fail_because(
                EndReason::Deadlock,
                format!(
                    "deadlock: {} gang(s) partly bound ({}) hold {partial} node(s) their other pods \
                     wait for; no job runs and nothing more is to arrive (a gang scheduler places \
                     a gang all or nothing: --gang and a scheduler that reads it)",
                    gangs.len(),
                    names.join(", ")
                ),
            );
        }
        let mut rejected = BTreeSet::new();
        for i in std::mem::take(&mut self.pending) {
            self.count_phase(i, &Phase::Done, 1);
            let j = &mut self.jobs[i];
            let why = j
                .record
                .last_unschedulable_reason
                .clone()
                .unwrap_or_else(|| "never scheduled".into());
            if rejected.insert(j.record.job_id.clone()) {
                tracing::warn!(job = %j.record.job_id, %why, "rejected: still pending with nothing else left to happen");
                out.push(build::reject_job(&j.record.job_id));
            }
            j.phase = Phase::Done;
            j.record.outcome =
                format!("REJECTED: unschedulable at the end of the simulation: {why}");
        }
        Ok(())
    }

    /// Asks Batsim for a wake-up at the next instant something is due (the
    /// scheduler's timer, a kubelet event), unless one is already pending
    /// at or before it.
    fn request_wakeups(&mut self, now: f64, reply: &mut Message) {
        let mut want: Vec<f64> = Vec::new();
        if let Some(t) = self.scheduler_wakeup.take() {
            // Nothing to wake up for when nothing can change any more.
            let pending = self.done < self.jobs.len();
            if pending || !self.no_more_static {
                want.push(t);
            }
        }
        if let Some(t) = self.controllers_wakeup.take() {
            if self.done < self.jobs.len() || !self.no_more_static {
                want.push(t);
            }
        }
        if let Some((&(key, _), _)) = self.timers.first_key_value() {
            want.push(key as f64 / 1e6);
        }
        // The API's next timer, as the scheduler's own: with fast-forward,
        // only while pods wait (otherwise it fires at the next event, and
        // the simulation's end is not moved by a bookmark).
        if let Some(t) = self.api_deadline() {
            let waiting = !self.pending.is_empty();
            let unfinished = self.done < self.jobs.len();
            // Nothing to wake up for when nothing can change any more.
            if waiting || (!self.cfg.policy.fast_forward && (unfinished || !self.no_more_static)) {
                want.push(t);
            }
        }
        for t in want {
            let t = ceil_us(t).max(ceil_us(now + 1e-6));
            let key = (t * 1e6).round() as u64;
            if self.pending_wakeups.range(..=key).next().is_some() {
                continue;
            }
            self.pending_wakeups.insert(key);
            self.wakeups += 1;
            reply.push(now, build::call_me_later(t));
        }
    }

    fn progress(&mut self) {
        if !self.cfg.progress || self.last_progress.elapsed() < Duration::from_millis(500) {
            return;
        }
        self.last_progress = Instant::now();
        let done = self.done;
        eprint!(
            "\r[batkube] simulated time {:.1} s, jobs done {done}/{}, {} message(s), {:.1} s of wall time   ",
            self.clock.now(),
            self.jobs.len(),
            self.messages,
            self.started.elapsed().as_secs_f64()
        );
    }

    /// Warns (once per name) when pods of a schedulerName the scheduler has
    /// acted on none of stay pending: it most likely serves another name,
    /// and would otherwise idle until the run gives up on them.
    fn warn_unserved(&mut self) {
        let now = self.clock.now();
        // A look costs a pass over the jobs: at most every 100 ms of wall
        // time or half the simulated delay.
        if self.last_unserved_check.elapsed() < Duration::from_millis(100)
            && now - self.last_unserved_sim < UNSERVED_SIMULATED / 2.0
        {
            return;
        }
        self.last_unserved_check = Instant::now();
        self.last_unserved_sim = now;
        // Per name: pods waiting, the first of them.
        let mut waiting: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for &i in &self.pending {
            let j = &self.jobs[i];
            if !j.touched
                && !self.served.contains(&*j.scheduler)
                && !self.warned.contains(&*j.scheduler)
            {
                waiting.entry(&*j.scheduler).or_insert((0, i)).0 += 1;
            }
        }
        let mut found = Vec::new();
        for (name, (count, first)) in waiting {
            let j = &self.jobs[first];
            let sim = now - j.record.created;
            if j.created_wall.elapsed() < UNSERVED_WALL && sim < UNSERVED_SIMULATED {
                continue;
            }
            let selected = self
                .store
                .get("pods", Some(translate::NAMESPACE), &j.record.pod)
                .and_then(|p| self.store.watchers_selecting("pods", &p))
                .unwrap_or(1);
            let why = if selected == 0 {
                "no open watch of pods selects them (the scheduler's field selectors leave \
                 them out)"
                    .to_string()
            } else {
                format!(
                    "{selected} open watch(es) of pods select them, but no client has bound them \
                     or written their status"
                )
            };
            found.push((
                name.to_string(),
                format!(
                    "{count} pod(s) with schedulerName {name:?} have been pending since simulated \
                     time {:.6} ({sim:.1} simulated s, {:.1} s of wall time) and the scheduler \
                     has acted on none of them: {why}. If it serves another scheduler name, run \
                     with --scheduler-name NAME (sets it on every pod whose job names none), or \
                     give it a profile for {name:?}",
                    j.record.created,
                    j.created_wall.elapsed().as_secs_f64()
                ),
            ));
        }
        for (name, message) in found {
            tracing::warn!("{message}");
            self.warned.insert(name);
            self.warnings.push(message);
        }
    }

    /// The API's earliest timer (Batsim seconds), when they run on
    /// simulated time.
    fn api_deadline(&self) -> Option<f64> {
        match &self.store.config().watch_timers {
            fakeapi::WatchTimers::Simulated(timers) => timers.earliest_deadline().and_then(|d| {
                Some((d.timestamp_nanos_opt()? as i128 - SIM_EPOCH_NANOS as i128) as f64 / 1e9)
            }),
            _ => None,
        }
    }

    /// The records and summary of the run so far. The node samples are
    /// handed over (not copied: on a long run they are the broker's largest
    /// record), so a second report has none.
    pub fn report(&mut self) -> (Vec<PodRecord>, Vec<NodeSample>, Summary) {
        let partial_now = self.partial_holds(self.clock.now());
        // Every job still here joins the retired ones' records, in order.
        let here: Vec<usize> = self.jobs.keys().collect();
        for i in here {
            let j = self.jobs.remove(i).expect("listed");
            self.pods_log.finished(i, j.record);
        }
        let pods = self.pods_log.take_kept();
        let cpu: i64 = self
            .nodes
            .iter()
            .map(|n| n.allocatable.get("cpu").copied().unwrap_or(0))
            .sum();
        let mut s = self.pods_log.stats().summary(cpu);
        s.completed = self.ended;
        s.end_time = self.clock.now();
        s.overcommit_count = self.overcommits;
        s.wall_seconds = self.started.elapsed().as_secs_f64();
        s.messages_exchanged = self.messages;
        s.simulated_to_wall_ratio = if s.wall_seconds > 0.0 {
            self.clock.now().max(0.0) / s.wall_seconds
        } else {
            0.0
        };
        s.windows = self.windows;
        s.pods_garbage_collected = self.gc.collected();
        s.windows_bound_hit = self.windows_bound_hit;
        s.partial_instants = self.partial_instants;
        s.quiescence_contradicted = self.quiescence_contradicted;
        s.gangs_started = self.gangs_started;
        s.partial_gang_node_seconds = self.partial_gang_node_seconds + partial_now;
        s.wake_ups_requested = self.wakeups;
        s.warnings = self.warnings.clone();
        self.queues.flush(&self.store, s.end_time);
        s.queues = self.queues.summary(s.end_time, cpu as f64 * s.makespan);
        self.life_summary(&mut s);
        if self.cfg.progress {
            eprintln!();
        }
        (pods, self.samples.take_kept(), s)
    }

    /// Streams `pods.csv` and `nodes.csv` into `dir` as the run goes (see
    /// [`retire_jobs`](Self::retire_jobs)); [`report`](Self::report) then
    /// hands over no records and [`finish_records`](Self::finish_records)
    /// completes the files.
    pub fn stream_records(&mut self, dir: &std::path::Path) -> std::io::Result<()> {
        self.pods_log.stream_to(&dir.join("pods.csv"))?;
        self.queues.stream_to(&dir.join("queues.csv"));
        self.samples.stream_to(&dir.join("nodes.csv"))
    }

    /// Records the attempts schedulers explain on their pods in `path`
    /// (`decisions.jsonl`, see [`decisions`]): created now when `eager`
    /// (`--explain`), else at the first explained attempt.
    pub fn stream_decisions(&mut self, path: &std::path::Path, eager: bool) -> std::io::Result<()> {
        self.decisions.stream_to(path, eager)
    }

    /// Flushes the streamed `pods.csv`, `nodes.csv` and `decisions.jsonl` (after
    /// [`report`](Self::report)).
    pub fn finish_records(&mut self) -> std::io::Result<()> {
        self.decisions.flush()?;
        self.pods_log.flush()?;
        self.queues.finish()?;
        self.samples.flush()
    }

    /// Jobs the broker still holds, and finished records waiting for an
    /// earlier job to finish (what memory holds of the run's jobs).
    pub fn jobs_held(&self) -> (usize, usize) {
        (self.jobs.live(), self.pods_log.waiting())
    }

    /// Lets go of the jobs nothing can refer to any more: done, their pod
    /// out of the API (deleted, collected, or never created), and Batsim
    /// done with them (no JOB_COMPLETED to come). Their record goes to
    /// pods.csv; a later timer of theirs is skipped (it would find the job
    /// done and do nothing).
    fn retire_jobs(&mut self) {
        for i in std::mem::take(&mut self.retirable) {
            let ready = self.jobs.contains(i) && {
                let j = &self.jobs[i];
                j.phase == Phase::Done && j.pod_gone && !j.batsim_open
            };
            if !ready {
                continue;
            }
            let j = self.jobs.remove(i).expect("checked");
            if self.job_by_pod.get(&j.record.pod) == Some(&i) {
                self.job_by_pod.remove(&j.record.pod);
            }
            if self.job_by_id.get(&j.record.job_id) == Some(&i) {
                self.job_by_id.remove(&j.record.job_id);
            }
            self.life_forget(i);
            self.pods_log.finished(i, j.record);
        }
    }

    /// Finishes `timeline.csv` (see [`stream_timeline`](Self::stream_timeline)).
    pub fn write_timeline(&mut self, path: &std::path::Path) -> std::io::Result<()> {
        self.timeline.write_csv(path)
    }

    /// Streams `timeline.csv` to `path` as the run goes, so that memory
    /// holds one window's rows; [`write_timeline`](Self::write_timeline)
    /// with the same path finishes it.
    pub fn stream_timeline(&mut self, path: &std::path::Path) -> std::io::Result<()> {
        self.timeline.stream_to(path)
    }

    /// The timeline rows not written out yet (all of them when not streaming).
    pub fn timeline(&self) -> &[timeline::Row] {
        self.timeline.rows()
    }

    /// A Batsim event received or a decision sent, as a timeline row.
    fn timeline_batsim(&mut self, t: f64, source: &'static str, ev: &EventData) {
        let (name, detail) = match ev {
            EventData::JobSubmitted(s) => (s.job_id.clone(), String::new()),
            EventData::JobCompleted(c) => (c.job_id.clone(), c.job_state.as_str().to_string()),
            EventData::JobKilled(k) => (k.job_ids.join(" "), String::new()),
            EventData::ExecuteJob(e) => (e.job_id.clone(), format!("alloc={}", e.alloc)),
            EventData::KillJob(k) => (k.job_ids.join(" "), String::new()),
            EventData::RejectJob(r) => (r.job_id.clone(), String::new()),
            EventData::RegisterJob(r) => (r.job_id.clone(), String::new()),
            EventData::CallMeLater(c) => (String::new(), format!("at={:.6}", c.timestamp)),
            EventData::Notify(n) => (
                n.extra
                    .get("resources")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                n.kind.clone(),
            ),
            _ => (String::new(), String::new()),
        };
        self.timeline
            .push(t, source, ev.kind().to_string(), "batsim", "", name, detail);
    }

    /// Prometheus text for the broker's own figures.
    pub fn metrics_text(&self) -> String {
        let done = self.done;
        format!(
            "# HELP batkube_simulated_seconds Simulated time.\n# TYPE batkube_simulated_seconds gauge\nbatkube_simulated_seconds {}\n\
             # HELP batkube_jobs Jobs seen.\n# TYPE batkube_jobs gauge\nbatkube_jobs {}\n\
             # HELP batkube_jobs_done Jobs finished or rejected.\n# TYPE batkube_jobs_done gauge\nbatkube_jobs_done {done}\n\
             # HELP batkube_overcommits_total Bindings that put a node over its allocatable.\n# TYPE batkube_overcommits_total counter\nbatkube_overcommits_total {}\n\
             # HELP batkube_messages_total Batsim messages exchanged.\n# TYPE batkube_messages_total counter\nbatkube_messages_total {}\n",
            self.clock.now(),
            self.jobs.len(),
            self.overcommits,
            self.messages
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(out: &[EventData]) -> Vec<(String, String)> {
        out.iter()
            .map(|ev| {
                let id = match ev {
                    EventData::RejectJob(r) => r.job_id.clone(),
                    EventData::KillJob(k) => k.job_ids.join(" "),
                    EventData::ExecuteJob(e) => e.job_id.clone(),
                    _ => String::new(),
                };
                (ev.kind().to_string(), id)
            })
            .collect()
    }

    #[test]
    fn a_job_started_and_killed_in_one_window_is_executed_before_its_kill() {
        let mut out = vec![
            build::kill_jobs(["w0!b"]),
            build::execute_job("w0!c", IntervalSet::single(1)),
            build::kill_jobs(["w0!a"]),
            build::execute_job("w0!b", IntervalSet::single(3)),
            build::reject_job("w0!d"),
        ];
        canonical_order(&mut out);
        let want = [
            ("REJECT_JOB", "w0!d"),
            ("KILL_JOB", "w0!a"),
            ("EXECUTE_JOB", "w0!b"),
            ("EXECUTE_JOB", "w0!c"),
            ("KILL_JOB", "w0!b"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, j)| (k.to_string(), j.to_string()))
            .collect();
        assert_eq!(order(&out), want);
    }
}
