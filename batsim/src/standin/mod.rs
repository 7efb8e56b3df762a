//! The built-in Batsim stand-in: plays Batsim v4.2's side of the protocol for
//! machines without Batsim, and for tests that must drive the broker over a
//! real socket.
//!
//! It reproduces what real Batsim sends, message for message, for what it
//! supports (`delay` and `parallel_homogeneous` profiles, parallel tasks
//! sharing CPUs and links as SimGrid's L07 model shares them), by running Batsim 4.2.1's actors (`src/server.cpp`,
//! `src/network.cpp`, `src/jobs_execution.cpp`, `src/job_submitter.cpp`,
//! `src/event_submitter.cpp`) on an emulation of SimGrid 3.32's engine
//! (see [`kernel`]): the actors ready at a date run one after the other
//! until their next simcall (a sleep, a put's send then its wait, the
//! server's receive, an actor's creation), then the simcalls are answered
//! in that order (`EngineImpl::run`); when none is ready the clock moves
//! by one step of the L07 model and the actors whose actions ended are
//! ready, in the order the actions were created. So an actor woken in the
//! step in which a message reaches the server puts its own message after
//! the server looked at its mailbox; a sleep within 1e-9 s after a step
//! ends in it; and dates are sums of steps as SimGrid's clock is.
//! The rules below, written before that engine, still describe what it
//! does; where they speak of a parallel task ending "after everything
//! else of its instant", the engine does it by the 1e-10 s each message of
//! the master takes over the loopback.
//!
//! - Every actor (static submitters, job executors, CALL_ME_LATER waiters,
//!   the request-reply actor that applies the decision process's replies,
//!   killers) talks to the server by putting a 1-byte message in the
//!   server's mailbox. The server receives them one at a time, in the order
//!   they were posted, and each takes the route's time from its sender's
//!   host to the master: latency plus one byte over the narrowest link
//!   (SimGrid's ptask_L07 model). Every actor but the executors runs on the
//!   master (the loopback: 1e-10 s a message, see below). So simultaneous job ends on 16-node.xml
//!   reach the server 0.0002 s apart (2 x 1e-4 latency, plus 8e-9 for the
//!   byte) and their times accumulate: 170.0002, 170.0004, ...
//! - After handling a message, the server sends what it has to the decision
//!   process only if that one is ready (its previous reply fully applied)
//!   *and* the mailbox is empty (`mailbox_empty`): messages that wait
//!   travel together; the sender of the message just handled resumes after
//!   that check (so a submitter's goodbye, NOTIFY
//!   no_more_static_job_to_submit, travels in a message of its own).
//! - Actors that wake at the same instant post in the order they began to
//!   sleep; one that wakes at the instant a message arrives posts before
//!   the server's check.
//! - The request-reply actor posts each event of a reply at
//!   max(its timestamp, the clock) (the decision process answers Batsim's
//!   six-decimal text, so the rounded time counts), then SCHED_READY at the
//!   reply's now.
//! - A static submitter submits all jobs of one subtime together (sorted by
//!   id as text), sleeps until the next subtime, and says goodbye after its
//!   last batch.
//! - Compute resources are the non-master hosts in SimGrid's order (by name,
//!   byte by byte); see [`crate::platform::Platform::machines`] for roles.
//! - The actors on the master talk to the server over the master's route to
//!   itself: SimGrid's loopback in a Full zone (`FullZone::do_seal`; no
//!   time, see below), but in a `<cluster>` (a StarZone,
//!   `sg_platf_new_cluster_flat`) up the host's private link, the backbone
//!   and down again, with the private link's latency twice when it is
//!   split-duplex (the DTD's default); zone routes go through their
//!   `gw_src`/`gw_dst` (`NetZoneImpl::get_global_route`). See
//!   [`crate::platform::Platform::message_time`].
//! - A static submitter first says hello (a put like any other), takes
//!   the date once it is received, submits at once the jobs due by then,
//!   and after each batch sleeps `next subtime - that date`
//!   (`static_job_submitter_process`, `src/job_submitter.cpp`).
//! - SIMULATION_BEGINS lists only the profiles some job uses
//!   (`Profiles::remove_unreferenced_profiles` at workload load).
//! - KILL_JOB on a `parallel_homogeneous` job cancels its task: return
//!   code -2 and progress `1 - remaining ratio`
//!   (`execute_parallel_task`, `BatTask::compute_leaf_progress`); a delay
//!   job's actor is killed (-1, progress elapsed/delay).
//! - A `parallel_homogeneous` job over its walltime reports at once, but
//!   its task goes on using its CPUs and links until its executor ends,
//!   once that report is received: Batsim keeps the task
//!   (`execute_parallel_task`: `wait_for` throws, `btask->ptask` holds it)
//!   and SimGrid cancels an actor's activities as the actor ends
//!   (`ActorImpl::cleanup_from_self`).
//! - The simulation ends when every submitter is done, every submitted job
//!   is complete or rejected, nothing runs and no CALL_ME_LATER is pending.
//! - A `parallel_homogeneous` job that completes ends after everything
//!   else of its instant: the messages, the sleeps and the exchanges with
//!   the decision process at that instant come first (SimGrid 3.32,
//!   Batsim's `host/model:ptask_L07`). Why: a message between two actors
//!   on the master takes time in SimGrid (and in the engine):
//!   one byte over the `__loopback__` link (FATPIPE, `network/loopback-bw`
//!   10 GBps, latency 0), 1e-10 s. What absorbs these offsets is a
//!   precision: a sleep's `max_duration` is zeroed below
//!   `sg_surf_precision` (1e-9 s, `Action::update_max_duration`), so a
//!   sleep ending within 1e-9 s after a step ends in that step (hence the
//!   rules above). A parallel task is not a sleep: its remaining work (a
//!   unit cost, at the rate the fair-bottleneck solver gives it: here
//!   exactly 1/duration, its CPU bound) is zeroed only below
//!   `sg_maxmin_precision * sg_surf_precision` (1e-14,
//!   `Action::update_remains`), so it ends at its real date: its nominal
//!   end plus the offset of its start. On `sharing-dynamic.jsonl` the task
//!   starts at 12 + 3e-10 (the submitter woke 1e-10 late, the delay of its
//!   previous put, then its put and the EXECUTE_JOB message) and ends at
//!   13 + 3e-10, while the submitter, which sleeps `next subtime - the date
//!   it woke` from after its put, wakes at 13 + 1e-10, and the messages of
//!   that instant take 2e-14 s each while the task shares the loopback
//!   (two executors on one host): fair bottleneck gives a FATPIPE's
//!   remaining bandwidth to the message again at every round in which the
//!   task takes only 1e6 of its 1e10 B/s, about 5e13 B/s in all.
//!
//! Measured by the differential harness against real Batsim 4.2.1
//! (`batkube batsim --compare-with`, `batsim/tests/differential/`): the
//! same messages on every generated case real Batsim completed. SimGrid's
//! selective update (`System::modified_constraint_set`) only tells lazy
//! models which actions to update; L07 updates them all, and the
//! fair-bottleneck solve is a function of the system's state, so the
//! kernel solves again whenever anything changed.

pub mod events;
pub mod fcfs;
pub mod kernel;
pub mod output;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::time::Instant;

use serde_json::{json, Map, Value};

use crate::platform::{Host, Platform};
use crate::protocol::{
    notify, EventData, ExecuteJob, JobCompleted, JobKilled, JobState, JobSubmitted, Message,
    Notify, Resource, SimulationBegins,
};
use crate::workload::{profile_kind, ProfileKind, Workload};
use crate::{round6, IntervalSet};
use kernel::ActionId;
use output::{JobRow, MachineTimes, OutputWriter};

/// Batsim's command-line options the stand-in supports.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// `--enable-compute-sharing`
    pub compute_sharing: bool,
    /// `--forward-profiles-on-submission`
    pub forward_profiles: bool,
    /// `--enable-dynamic-jobs`
    pub dynamic_jobs: bool,
    /// `--acknowledge-dynamic-jobs`
    pub acknowledge_dynamic_jobs: bool,
    /// `--mmax`: at most this many compute machines (0: no limit).
    pub mmax: u32,
    /// `--sched-cfg`
    pub sched_config: String,
    /// `-e`: output prefix (`None`: no output files).
    pub export_prefix: Option<PathBuf>,
    /// `-m`: the master host's name.
    pub master: Option<String>,
    /// `--events`: external event files (see [`events`]).
    pub events: Vec<PathBuf>,
    /// `--forward-unknown-events`
    pub forward_unknown_events: bool,
}

/// Something that decides: given a Batsim message, returns the reply.
pub trait DecisionProcess {
    fn exchange(&mut self, msg: &Message) -> anyhow::Result<Message>;
}

impl<F: FnMut(&Message) -> anyhow::Result<Message>> DecisionProcess for F {
    fn exchange(&mut self, msg: &Message) -> anyhow::Result<Message> {
        self(msg)
    }
}

/// A decision process reached over ZeroMQ (Batsim's REQ side).
pub struct ZmqDecisionProcess {
    socket: zmq::Socket,
    _ctx: zmq::Context,
    endpoint: String,
    /// Messages exchanged, both directions.
    pub messages: u64,
}

impl ZmqDecisionProcess {
    /// Connects a REQ socket to `endpoint` (Batsim's `-s`).
    pub fn connect(endpoint: &str) -> anyhow::Result<Self> {
        let ctx = zmq::Context::new();
        let socket = ctx.socket(zmq::REQ)?;
        socket.set_linger(0)?;
        socket
            .connect(endpoint)
            .map_err(|e| anyhow::anyhow!("cannot connect to {endpoint}: {e}"))?;
        Ok(Self {
            socket,
            _ctx: ctx,
            endpoint: endpoint.to_string(),
            messages: 0,
        })
    }
}

impl DecisionProcess for ZmqDecisionProcess {
    fn exchange(&mut self, msg: &Message) -> anyhow::Result<Message> {
        let text = crate::to_batsim_text(msg);
        self.socket.send(text.as_bytes(), 0)?;
        let reply = self.socket.recv_bytes(0)?;
        self.messages += 2;
        let reply = std::str::from_utf8(&reply).map_err(|_| {
            anyhow::anyhow!(
                "the decision process at {} sent bytes that are not UTF-8",
                self.endpoint
            )
        })?;
        Message::from_json(reply).map_err(|e| {
            let shown: String = reply.chars().take(200).collect();
            anyhow::anyhow!(
                "the decision process at {} sent an invalid message ({e}): {shown}",
                self.endpoint
            )
        })
    }
}

/// What a finished run reports.
#[derive(Debug, Clone)]
pub struct RunSummary {
    pub end_time: f64,
    pub messages: u64,
    pub stats: output::ScheduleStats,
    pub wall_seconds: f64,
}

/// A stand-in error: what real Batsim would abort on, in the user's terms.
#[derive(Debug, thiserror::Error)]
#[error("at simulated time {time:.6}: {message}")]
pub struct SimulationError {
    pub time: f64,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
enum JobStatus {
    NotSubmitted,
    Submitted,
    Running {
        start: f64,
        alloc: IntervalSet,
        hosts: Vec<u32>,
        generation: u64,
        /// A parallel task (see [`l07_task`]).
        ptask: Option<Task>,
    },
    /// Its execution ended (or was killed); the report may still be
    /// travelling to the server.
    Ended {
        start: f64,
        alloc: IntervalSet,
        state: JobState,
        runtime: f64,
        return_code: i64,
    },
    /// Complete or rejected, as far as the server knows.
    Finished,
}

#[derive(Debug, Clone)]
struct JobEntry {
    /// `workload!id`
    full_id: Box<str>,
    workload: usize,
    /// The job object as compact JSON text (dropped once the job is
    /// submitted: a million jobs wait as text, not as parsed maps).
    json: Box<str>,
    subtime: f64,
    walltime: Option<f64>,
    res: u32,
    /// Index in its workload's profiles.
    profile: u32,
    status: JobStatus,
    metadata: String,
    generation: u64,
}

/// Who sends a message to the server, and what it says.
#[derive(Debug)]
enum Payload {
    Submit {
        jobs: Vec<usize>,
    },
    SubmitterHello,
    SubmitterBye {
        events: bool,
    },
    JobCompleted {
        job: usize,
    },
    WaitingDone,
    Decision(crate::Event),
    /// External events of one date.
    External {
        events: Vec<events::ExternalEvent>,
    },
    SchedReady,
    KillingDone {
        ids: Vec<String>,
        progress: Map<String, Value>,
        killed: Vec<usize>,
    },
}

/// What a static submitter submits: a workload's jobs or an events
/// file's events (Batsim's `static_job_submitter_process` and
/// `static_event_submitter_process` are the same program).
#[derive(Debug)]
enum Items {
    Jobs(Vec<usize>),
    Events(Vec<Option<events::ExternalEvent>>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum SubmitterPhase {
    Hello,
    AfterHello,
    WokeUp,
    Loop,
    Done,
}

#[derive(Debug)]
struct SubmitterProgram {
    items: Items,
    /// The items' dates, in the order they are submitted.
    times: Vec<f64>,
    next: usize,
    batch: Vec<usize>,
    /// `current_submission_date`: the date it last woke.
    date: f64,
    phase: SubmitterPhase,
}

#[derive(Debug, Clone, PartialEq)]
enum ExecutorPhase {
    Start,
    /// The parallel task started; it waits for it next.
    Started,
    /// Sleeping or waiting for its task: the state it ends in if its
    /// sleep ends.
    Waiting(JobState),
    Ended(JobState),
    Reported,
}

/// A Batsim actor (`src/server.cpp`, `src/job_submitter.cpp`,
/// `src/network.cpp`, `src/jobs_execution.cpp`), written as a program
/// that runs until its next simcall.
#[derive(Debug)]
enum Program {
    Server {
        started: bool,
        check: bool,
    },
    Submitter(SubmitterProgram),
    /// The request-reply actor: one exchange with the decision process,
    /// then each event of the reply posted at its date.
    ReqRep {
        message: Option<Message>,
        events: VecDeque<(f64, Payload)>,
        slept: bool,
    },
    Executor {
        job: usize,
        phase: ExecutorPhase,
        task: Option<ActionId>,
        timeout: Option<ActionId>,
    },
    Waiter {
        target: f64,
        phase: u8,
    },
    Killer {
        kills: usize,
        done: Option<Payload>,
    },
}

impl SubmitterProgram {
    fn new(items: Items, times: Vec<f64>) -> Self {
        Self {
            items,
            times,
            next: 0,
            batch: Vec::new(),
            date: 0.0,
            phase: SubmitterPhase::Hello,
        }
    }

    /// The batch due, as the message that submits it.
    fn take_batch(&mut self) -> Payload {
        let batch = std::mem::take(&mut self.batch);
        match &mut self.items {
            Items::Jobs(order) => Payload::Submit {
                jobs: batch.iter().map(|&k| order[k]).collect(),
            },
            Items::Events(events) => Payload::External {
                events: batch.iter().filter_map(|&k| events[k].take()).collect(),
            },
        }
    }
}

struct Actor {
    program: Option<Program>,
    /// A message it just put in a mailbox: it waits for it next.
    isent: Option<u64>,
}

impl Actor {
    /// An actor with nothing left to run and no message sent.
    fn ended() -> Actor {
        Actor {
            program: None,
            isent: None,
        }
    }
}

/// What an actor asks of SimGrid's kernel when it stops running.
enum Simcall {
    Sleep(f64),
    /// `Mailbox::put`'s first half: the message enters the server's
    /// mailbox (or meets the server's pending receive); its second half,
    /// the wait, is the actor's next simcall.
    Isend {
        payload: Payload,
        route: Route,
    },
    Wait(u64),
    /// The server's `receive_message`.
    Get,
    Create(Program),
    /// A simcall answered at once (killing an actor).
    Yield,
    /// A parallel task starts (answered at once).
    ExecStart(Task),
    /// Waiting for it, with a timeout (a sleep) when there is a walltime.
    ExecWait(f64),
    Exit,
}

/// A message between an actor and the server.
struct Comm {
    payload: Payload,
    route: Route,
    /// Those it wakes when it arrives, in the order they waited.
    waiters: Vec<usize>,
}

/// An L07 action as the kernel takes it (a parallel task, or a message:
/// the task of its two hosts with one byte between them): its latency,
/// its bound, its weights on the solver's constraints and whether it has
/// no work at all (see [`l07_task`]).
#[derive(Debug, Clone, PartialEq)]
struct Task {
    latency: f64,
    bound: f64,
    elements: Vec<(usize, f64)>,
    no_work: bool,
}

/// A message's way to the master.
type Route = Task;

/// The solver's constraint for link `name` or, with a key of its own, a
/// host's CPU (created at first use).
fn resource(
    kernel: &mut kernel::Kernel,
    resources: &mut HashMap<String, usize>,
    name: &str,
    capacity: f64,
    fatpipe: bool,
) -> usize {
    if let Some(&r) = resources.get(name) {
        return r;
    }
    let r = kernel.resource(capacity, fatpipe);
    resources.insert(name.to_string(), r);
    r
}

/// SimGrid's `L07Action::L07Action` for a task on `hosts` with `flops[i]`
/// on host `i` and `bytes(i, j)` from host `i` to host `j`:
/// - one element per host on its CPU (capacity `cores * speed`,
///   `CpuImpl::seal`), weight its flops, even when a host comes twice
///   (`expand(..., true)`);
/// - for each pair with bytes, in the order `i * n + j`, its route's links
///   (`route_to`), each link once per task: a link met again adds the
///   bytes (SHARED) or keeps the larger (FATPIPE, `expand_add_to_elem`);
/// - its latency the largest route latency of those pairs;
/// - its bound (`update_bound`) the smaller of `TCP-gamma / (2 *
///   max(latency * bytes))` (`calculate_network_bound`) and `min(speed /
///   flops)` over its hosts with flops (`calculate_cpu_bound`: one
///   core's speed);
/// - no work when it has no host with flops and no link (`remains` 0).
fn l07_task(
    platform: &Platform,
    kernel: &mut kernel::Kernel,
    resources: &mut HashMap<String, usize>,
    hosts: &[&Host],
    flops: &[f64],
    bytes: &dyn Fn(usize, usize) -> f64,
) -> Task {
    let n = hosts.len();
    let mut elements: Vec<(usize, f64)> = Vec::with_capacity(n + 2);
    let mut cpu_bound = f64::MAX;
    let mut used_hosts = 0;
    for (h, &f) in hosts.iter().zip(flops) {
        let key = format!("\0cpu {}", h.name);
        let c = resource(kernel, resources, &key, f64::from(h.cores) * h.speed, false);
        elements.push((c, f));
        if f > 0.0 {
            used_hosts += 1;
            cpu_bound = cpu_bound.min(h.speed / f);
        }
    }
    let mut latency: f64 = 0.0;
    let mut lat_current: f64 = 0.0;
    let mut links = 0;
    for k in 0..n * n {
        let (i, j) = (k / n, k % n);
        let b = bytes(i, j);
        if b <= 0.0 {
            continue;
        }
        let (lat, route) = platform.route_links(&hosts[i].name, &hosts[j].name);
        latency = latency.max(lat);
        lat_current = lat_current.max(lat * b);
        for (name, bw, fatpipe) in route {
            let r = resource(kernel, resources, &name, bw, fatpipe);
            match elements[n..].iter_mut().find(|e| e.0 == r) {
                Some(e) if fatpipe => e.1 = e.1.max(b),
                Some(e) => e.1 += b,
                None => {
                    elements.push((r, b));
                    links += 1;
                }
            }
        }
    }
    Task {
        latency,
        bound: kernel::task_bound(kernel::network_bound(lat_current), cpu_bound),
        elements,
        no_work: links + used_hosts == 0,
    }
}

/// Whom an action wakes when it ends.
#[derive(Debug, Clone, Copy)]
enum Owner {
    Sleep(usize),
    Comm(u64),
    Task(usize),
    Timeout(usize),
}

struct WorkloadState {
    name: String,
    path: String,
    /// Profiles as compact JSON text, in order; jobs refer to them by index.
    profiles: Vec<(String, Box<str>)>,
    profile_index: HashMap<String, u32>,
}

impl WorkloadState {
    fn add_profile(&mut self, name: String, json: Box<str>) {
        self.profile_index
            .insert(name.clone(), self.profiles.len() as u32);
        self.profiles.push((name, json));
    }
}

/// A progress line on a terminal for long runs (at most once a second).
struct Progress {
    enabled: bool,
    total: usize,
    last: Instant,
    ticks: u32,
}

impl Progress {
    fn new(total: usize) -> Self {
        use std::io::IsTerminal;
        Self {
            enabled: std::io::stderr().is_terminal(),
            total,
            last: Instant::now(),
            ticks: 0,
        }
    }

    fn tick(&mut self, now: f64, done: usize) {
        self.ticks = self.ticks.wrapping_add(1);
        if !self.enabled || self.ticks % 1024 != 0 || self.last.elapsed().as_secs() < 1 {
            return;
        }
        self.last = Instant::now();
        eprint!(
            "\r[batsim stand-in] simulated time {now:.1} s, jobs done {done}/{}   ",
            self.total
        );
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.enabled && self.ticks >= 1024 {
            eprintln!();
        }
    }
}

/// Parses JSON text this module serialized itself.
fn parse_own(text: &str) -> Value {
    serde_json::from_str(text).expect("JSON text we serialized parses")
}

/// The simulation state.
pub struct StandIn {
    opts: Options,
    platform: Platform,
    machines: Vec<Host>,
    /// Route from each machine to the master (where the server runs):
    /// latency and the rate of a 1-byte message.
    report: Vec<Route>,
    /// Route from the master to itself (every actor but the executors runs
    /// there): SimGrid's loopback, or in a `<cluster>` the private link and
    /// the backbone.
    master_route: Route,
    /// The solver's shared resources, by link name.
    resources: HashMap<String, usize>,
    workloads: Vec<WorkloadState>,
    nb_static_workloads: usize,
    jobs: Vec<JobEntry>,
    job_index: HashMap<String, usize>,
    /// SimGrid's clock and actions.
    kernel: kernel::Kernel,
    /// `kernel.now`, as every handler reads it.
    now: f64,
    outbox: Vec<(f64, EventData)>,
    /// Batsim's live actors by id, and SimGrid's run queue. An actor
    /// leaves the map when it ends: a run creates several per job (a
    /// request-reply per message, an executor per job), and keeping the
    /// ended ones made the table grow with the run's length (about 100 MB of
    /// peak RSS at 100,000 jobs). Ids are never reused; an id not in the map is an
    /// ended actor.
    actors: BTreeMap<usize, Actor>,
    /// The id of the next actor created (SimGrid's creation order).
    next_actor: usize,
    to_run: Vec<usize>,
    server: usize,
    /// The message the server just received.
    server_msg: Option<Payload>,
    /// The server waits in `receive_message` with nothing in its mailbox.
    server_waiting: bool,
    /// Actors the server creates while it handles its message.
    creations: VecDeque<Program>,
    /// The server's mailbox: messages put and not yet received.
    mailbox: VecDeque<u64>,
    comms: HashMap<u64, Comm>,
    next_comm: u64,
    owners: HashMap<ActionId, Owner>,
    sched_ready: bool,
    ends_sent: bool,
    ended: bool,
    submitters_done: usize,
    submitted: usize,
    completed: usize,
    running: usize,
    waiters: usize,
    registration_finished: bool,
    /// Jobs running per machine, and when each machine last changed.
    machine_load: Vec<(u32, f64)>,
    machine_times: MachineTimes,
    /// External events: machines made unavailable, event submitters.
    availability: events::Availability,
    event_submitters: usize,
    event_submitters_done: usize,
    out: OutputWriter,
    messages: u64,
    scheduling_wall: f64,
}

impl StandIn {
    /// Prepares a simulation; nothing is sent yet.
    pub fn new(
        platform: Platform,
        workloads: Vec<Workload>,
        opts: Options,
    ) -> anyhow::Result<Self> {
        let m = platform
            .machines(opts.master.as_deref())
            .map_err(|e| anyhow::anyhow!("platform: {e}"))?;
        let mut compute = m.compute;
        if opts.mmax > 0 {
            if opts.mmax as usize > compute.len() {
                anyhow::bail!(
                    "platform: Impossible to compute on M={} machines: only {} machines are \
                     described in the PLATFORM_FILE (option --mmax; Batsim aborts)",
                    opts.mmax,
                    compute.len()
                );
            }
            compute.truncate(opts.mmax as usize);
        }
        // A 1-byte message (`NetworkL07Model::communicate`): the task of
        // its two hosts, no flops, one byte from the first to the second.
        let mut kernel = kernel::Kernel::default();
        let mut resources = HashMap::new();
        let mut route = |src: &Host| {
            let one_byte = |i: usize, j: usize| if (i, j) == (0, 1) { 1.0 } else { 0.0 };
            l07_task(
                &platform,
                &mut kernel,
                &mut resources,
                &[src, &m.master],
                &[0.0, 0.0],
                &one_byte,
            )
        };
        let report = compute.iter().map(&mut route).collect();
        let master_route = route(&m.master);
        let out = OutputWriter::new(opts.export_prefix.as_deref())?;
        let mut s = StandIn {
            master_route,
            machine_load: vec![(0, 0.0); compute.len()],
            machines: compute,
            report,
            platform,
            workloads: Vec::new(),
            nb_static_workloads: workloads.len(),
            jobs: Vec::new(),
            job_index: HashMap::new(),
            kernel,
            resources,
            now: 0.0,
            outbox: Vec::new(),
            actors: BTreeMap::new(),
            next_actor: 0,
            to_run: Vec::new(),
            server: 0,
            server_msg: None,
            server_waiting: false,
            creations: VecDeque::new(),
            mailbox: VecDeque::new(),
            comms: HashMap::new(),
            next_comm: 0,
            owners: HashMap::new(),
            sched_ready: true,
            ends_sent: false,
            ended: false,
            submitters_done: 0,
            submitted: 0,
            completed: 0,
            running: 0,
            waiters: 0,
            registration_finished: false,
            machine_times: MachineTimes::default(),
            availability: events::Availability::new(0),
            event_submitters: 0,
            event_submitters_done: 0,
            out,
            messages: 0,
            scheduling_wall: 0.0,
            opts,
        };
        for w in workloads {
            let wi = s.workloads.len();
            let mut ws = WorkloadState {
                name: w.name.clone(),
                path: w.path.clone(),
                profiles: Vec::with_capacity(w.profiles.len()),
                profile_index: HashMap::with_capacity(w.profiles.len()),
            };
            for p in w.profiles {
                ws.add_profile(p.name, p.raw);
            }
            s.workloads.push(ws);
            s.jobs.reserve(w.jobs.len());
            s.job_index.reserve(w.jobs.len());
            let mut order: Vec<usize> = Vec::with_capacity(w.jobs.len());
            for j in w.jobs {
                let full_id: Box<str> = format!("{}!{}", w.name, j.id).into();
                let idx = s.jobs.len();
                s.job_index.insert(full_id.to_string(), idx);
                let profile = s.workloads[wi].profile_index[&j.profile];
                s.jobs.push(JobEntry {
                    full_id,
                    workload: wi,
                    json: j.raw,
                    subtime: j.subtime,
                    walltime: j.walltime,
                    res: j.res,
                    profile,
                    status: JobStatus::NotSubmitted,
                    metadata: String::new(),
                    generation: 0,
                });
                order.push(idx);
            }
            // Batsim's submitter: by subtime, then by id as text.
            order.sort_by(|&a, &b| {
                let (ja, jb) = (&s.jobs[a], &s.jobs[b]);
                ja.subtime
                    .total_cmp(&jb.subtime)
                    .then_with(|| ja.full_id.cmp(&jb.full_id))
            });
            let times = order.iter().map(|&j| s.jobs[j].subtime).collect();
            s.spawn(Program::Submitter(SubmitterProgram::new(
                Items::Jobs(order),
                times,
            )));
        }
        // Batsim creates the job submitters, then the event submitters,
        // then the server; they run in that order at 0.
        s.load_external_events()?;
        s.server = s.spawn(Program::Server {
            started: false,
            check: false,
        });
        Ok(s)
    }

    /// A live actor's program (`None` for an ended actor).
    fn program_mut(&mut self, id: usize) -> Option<&mut Program> {
        self.actors.get_mut(&id).and_then(|a| a.program.as_mut())
    }

    /// A new actor, run next.
    fn spawn(&mut self, program: Program) -> usize {
        let id = self.next_actor;
        self.next_actor += 1;
        self.actors.insert(
            id,
            Actor {
                program: Some(program),
                isent: None,
            },
        );
        self.to_run.push(id);
        id
    }

    fn fail<T>(&self, message: impl Into<String>) -> anyhow::Result<T> {
        Err(SimulationError {
            time: self.now,
            message: message.into(),
        }
        .into())
    }

    /// The first message: SIMULATION_BEGINS.
    fn simulation_begins(&self) -> EventData {
        let mut config = Map::new();
        config.insert("redis-enabled".into(), json!(false));
        config.insert("redis-hostname".into(), json!("127.0.0.1"));
        config.insert("redis-port".into(), json!(6379));
        config.insert("redis-prefix".into(), json!("default"));
        config.insert(
            "profiles-forwarded-on-submission".into(),
            json!(self.opts.forward_profiles),
        );
        config.insert("dynamic-jobs-enabled".into(), json!(self.opts.dynamic_jobs));
        config.insert(
            "dynamic-jobs-acknowledged".into(),
            json!(self.opts.acknowledge_dynamic_jobs),
        );
        config.insert("profile-reuse-enabled".into(), json!(false));
        config.insert("sched-config".into(), json!(self.opts.sched_config));
        config.insert(
            "forward-unknown-events".into(),
            json!(self.opts.forward_unknown_events),
        );
        let resources: Vec<Resource> = self
            .machines
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let mut properties = Map::new();
                properties.insert("role".into(), json!(""));
                for (k, v) in &h.properties {
                    if k != "role" {
                        properties.insert(k.clone(), json!(v));
                    }
                }
                let zone_properties = h
                    .zone_properties
                    .iter()
                    .map(|(k, v)| (k.clone(), json!(v)))
                    .collect();
                Resource {
                    id: i as u32,
                    name: h.name.clone(),
                    state: "idle".into(),
                    properties,
                    zone_properties,
                    extra: Map::new(),
                }
            })
            .collect();
        let workloads = self
            .workloads
            .iter()
            .map(|w| (w.name.clone(), json!(w.path)))
            .collect();
        // Batsim drops the profiles no job uses once the workload is read
        // (`Profiles::remove_unreferenced_profiles`, `src/workload.cpp`) and
        // lists only the others (`append_simulation_begins`).
        let mut used: Vec<Vec<bool>> = self
            .workloads
            .iter()
            .map(|w| vec![false; w.profiles.len()])
            .collect();
        for j in &self.jobs {
            used[j.workload][j.profile as usize] = true;
        }
        let profiles = self
            .workloads
            .iter()
            .zip(&used)
            .map(|(w, used)| {
                let m: Map<String, Value> = w
                    .profiles
                    .iter()
                    .zip(used)
                    .filter(|(_, u)| **u)
                    .map(|((n, p), _)| (n.clone(), parse_own(p)))
                    .collect();
                (w.name.clone(), Value::Object(m))
            })
            .collect();
        EventData::SimulationBegins(Box::new(SimulationBegins {
            nb_resources: resources.len() as u32,
            nb_compute_resources: resources.len() as u32,
            nb_storage_resources: 0,
            allow_compute_sharing: self.opts.compute_sharing,
            allow_storage_sharing: true,
            config,
            compute_resources: resources,
            storage_resources: Vec::new(),
            workloads,
            profiles: Some(profiles),
            extra: Map::new(),
        }))
    }

    fn is_finished(&self) -> bool {
        self.submitters_done >= self.nb_static_workloads
            && self.completed == self.submitted
            && self.running == 0
            && self.waiters == 0
            && (!self.opts.dynamic_jobs || self.registration_finished)
            && self.event_submitters_done >= self.event_submitters
    }

    /// Runs the simulation to its end against `dp`.
    pub fn run(mut self, dp: &mut dyn DecisionProcess) -> anyhow::Result<RunSummary> {
        let started = Instant::now();
        let result = self.run_inner(dp);
        // Whatever happened, keep what was written.
        let flushed = self.out.flush();
        result?;
        flushed?;
        let wall = started.elapsed().as_secs_f64();
        self.account_machines(self.now);
        self.out.finish(
            self.machines.len(),
            &self.machine_times,
            self.scheduling_wall,
            wall,
        )?;
        Ok(RunSummary {
            end_time: self.now,
            messages: self.messages,
            stats: self.out.stats.clone(),
            wall_seconds: wall,
        })
    }

    /// SimGrid's main loop (`EngineImpl::run`): the actors ready to run
    /// run one after the other until their next simcall, then the simcalls
    /// are answered in that order (which may make actors ready again at the
    /// same date); when none is ready, the clock moves to the next end of
    /// an action (`kernel::Kernel::step`) and the actors those ends
    /// concern are ready, in the order the actions were created.
    fn run_inner(&mut self, dp: &mut dyn DecisionProcess) -> anyhow::Result<()> {
        let mut progress = Progress::new(self.jobs.len());
        loop {
            while !self.to_run.is_empty() {
                let ran = std::mem::take(&mut self.to_run);
                let mut calls = Vec::with_capacity(ran.len());
                for id in ran {
                    let call = self.run_actor(id, dp)?;
                    calls.push((id, call));
                }
                for (id, call) in calls {
                    self.answer(id, call);
                }
                if self.ended {
                    return Ok(());
                }
            }
            progress.tick(self.now, self.completed);
            let Some(done) = self.kernel.step() else {
                if self.sched_ready {
                    let stuck = self.submitted - self.completed;
                    return self.fail(format!(
                        "the simulation cannot progress: {stuck} submitted job(s) were never \
                         executed nor rejected and nothing else can happen (real Batsim \
                         deadlocks here); the decision process must EXECUTE_JOB or REJECT_JOB \
                         every job"
                    ));
                }
                return self.fail("internal: waiting for a decision with nothing scheduled");
            };
            self.now = self.kernel.now;
            for action in done {
                self.action_ended(action);
            }
        }
    }

    /// An action ended: whom it concerns is ready to run
    /// (`ActivityImpl::post`, `CommImpl::finish`).
    fn action_ended(&mut self, action: ActionId) {
        let Some(owner) = self.owners.remove(&action) else {
            return;
        };
        match owner {
            Owner::Sleep(actor) => self.to_run.push(actor),
            Owner::Comm(c) => {
                let comm = self.comms.remove(&c).expect("a message in flight");
                self.server_msg = Some(comm.payload);
                self.to_run.extend(comm.waiters);
            }
            Owner::Task(actor) | Owner::Timeout(actor) => {
                let Some(Program::Executor {
                    phase,
                    task,
                    timeout,
                    ..
                }) = self.actors.get_mut(&actor).and_then(|a| a.program.as_mut())
                else {
                    return;
                };
                let state = if matches!(owner, Owner::Task(_)) {
                    JobState::CompletedSuccessfully
                } else {
                    JobState::CompletedWalltimeReached
                };
                *phase = ExecutorPhase::Ended(state);
                // The task done, its timeout goes. Over its walltime, the
                // task goes on using its hosts and links until its executor
                // ends (after its report is received): SimGrid cancels an
                // actor's activities when it ends
                // (`ActorImpl::cleanup_from_self`), and Batsim keeps the
                // timed-out task (`execute_parallel_task`: `wait_for`
                // throws, `btask->ptask` holds it). Its end wakes nobody.
                if let Some(t) = timeout.take() {
                    if t != action {
                        self.kernel.cancel(t);
                        self.owners.remove(&t);
                    }
                }
                if *task == Some(action) {
                    *task = None;
                } else if let Some(t) = *task {
                    self.owners.remove(&t);
                }
                self.to_run.push(actor);
            }
        }
    }

    /// Answers an actor's simcall (`ActorImpl::simcall_handle`).
    fn answer(&mut self, id: usize, call: Simcall) {
        match call {
            Simcall::Sleep(d) => {
                let a = self.kernel.sleep(d);
                self.owners.insert(a, Owner::Sleep(id));
            }
            Simcall::Isend { payload, route } => {
                let c = self.next_comm;
                self.next_comm += 1;
                self.comms.insert(
                    c,
                    Comm {
                        payload,
                        route,
                        waiters: Vec::new(),
                    },
                );
                if self.server_waiting {
                    self.server_waiting = false;
                    self.start_comm(c);
                } else {
                    self.mailbox.push_back(c);
                }
                // (An actor killed in this round of simcalls gets its entry
                // back: it waits for its message, then ends, as it did
                // when ended actors stayed in place.)
                self.actors.entry(id).or_insert_with(Actor::ended).isent = Some(c);
                self.to_run.push(id);
            }
            Simcall::Wait(c) => {
                if let Some(comm) = self.comms.get_mut(&c) {
                    comm.waiters.push(id);
                }
            }
            Simcall::Get => match self.mailbox.pop_front() {
                Some(c) => self.start_comm(c),
                None => self.server_waiting = true,
            },
            Simcall::Create(program) => {
                self.spawn(program);
                self.to_run.push(id);
            }
            Simcall::Yield => self.to_run.push(id),
            Simcall::ExecStart(t) => {
                let a = self
                    .kernel
                    .execute(t.latency, t.bound, t.elements, t.no_work);
                self.owners.insert(a, Owner::Task(id));
                if let Some(Program::Executor { task, .. }) = self.program_mut(id) {
                    *task = Some(a);
                }
                self.to_run.push(id);
            }
            Simcall::ExecWait(t) => {
                if t >= 0.0 {
                    let a = self.kernel.sleep(t);
                    self.owners.insert(a, Owner::Timeout(id));
                    if let Some(Program::Executor { timeout, .. }) = self.program_mut(id) {
                        *timeout = Some(a);
                    }
                }
            }
            Simcall::Exit => {
                self.actors.remove(&id);
            }
        }
    }

    /// The server receives message `c`: it travels now.
    fn start_comm(&mut self, c: u64) {
        let comm = self.comms.get_mut(&c).expect("a message in the mailbox");
        comm.waiters.push(self.server);
        let r = &comm.route;
        let a = self
            .kernel
            .execute(r.latency, r.bound, r.elements.clone(), r.no_work);
        self.owners.insert(a, Owner::Comm(c));
    }

    /// Runs an actor until its next simcall.
    fn run_actor(&mut self, id: usize, dp: &mut dyn DecisionProcess) -> anyhow::Result<Simcall> {
        let Some(actor) = self.actors.get_mut(&id) else {
            return Ok(Simcall::Exit);
        };
        if let Some(c) = actor.isent.take() {
            return Ok(Simcall::Wait(c));
        }
        let Some(mut program) = actor.program.take() else {
            return Ok(Simcall::Exit);
        };
        let call = match &mut program {
            Program::Server { started, check } => self.run_server(started, check)?,
            Program::Submitter(sub) => self.run_submitter(sub),
            Program::ReqRep {
                message,
                events,
                slept,
            } => {
                if let Some(msg) = message.take() {
                    let t0 = Instant::now();
                    let reply = dp.exchange(&msg)?;
                    self.scheduling_wall += t0.elapsed().as_secs_f64();
                    self.messages += 2;
                    *events = self.accept_reply(msg.now, reply)?;
                }
                // `send_message_at_time`: it sleeps until the event's date,
                // then puts it.
                match events.front() {
                    Some(&(t, _)) if !*slept && t > self.now => {
                        *slept = true;
                        Simcall::Sleep(t - self.now)
                    }
                    Some(_) => {
                        *slept = false;
                        let (_, payload) = events.pop_front().expect("checked");
                        self.put(payload, self.master_route.clone())
                    }
                    None => Simcall::Exit,
                }
            }
            Program::Executor { job, phase, .. } => self.run_executor(*job, phase)?,
            Program::Waiter { target, phase } => {
                // `waiter_process`: it sleeps at least 1e-5 s.
                if *phase == 0 {
                    *phase = 1;
                    if self.now < *target {
                        let d = (*target - self.now).max(1e-5);
                        return self.keep(id, program, Simcall::Sleep(d));
                    }
                }
                if *phase == 1 && !self.ends_sent {
                    *phase = 2;
                    self.put(Payload::WaitingDone, self.master_route.clone())
                } else {
                    Simcall::Exit
                }
            }
            Program::Killer { kills, done } => {
                if *kills > 0 {
                    *kills -= 1;
                    Simcall::Yield
                } else if let Some(payload) = done.take() {
                    self.put(payload, self.master_route.clone())
                } else {
                    Simcall::Exit
                }
            }
        };
        self.keep(id, program, call)
    }

    fn keep(&mut self, id: usize, program: Program, call: Simcall) -> anyhow::Result<Simcall> {
        if !matches!(call, Simcall::Exit) {
            self.actors.entry(id).or_insert_with(Actor::ended).program = Some(program);
        } else if let Program::Executor { task: Some(t), .. } = program {
            // An executor's task still running (over its walltime) is
            // cancelled as the actor ends (`ActorImpl::cleanup_from_self`).
            self.kernel.cancel(t);
            self.owners.remove(&t);
        }
        Ok(call)
    }

    fn put(&self, payload: Payload, route: Route) -> Simcall {
        Simcall::Isend { payload, route }
    }

    /// The server's loop (`server_process`): it handles the message it
    /// received (creating actors as it goes: each creation is a simcall),
    /// then sends what it has to the decision process if that one is
    /// ready and its mailbox is empty, then receives again.
    fn run_server(&mut self, started: &mut bool, check: &mut bool) -> anyhow::Result<Simcall> {
        if !*started {
            *started = true;
            self.outbox.push((0.0, self.simulation_begins()));
            let message = self.take_message();
            return Ok(self.req_rep(message));
        }
        if let Some(payload) = self.server_msg.take() {
            self.handle(payload)?;
            *check = true;
        }
        if let Some(program) = self.creations.pop_front() {
            return Ok(Simcall::Create(program));
        }
        if std::mem::take(check) {
            if let Some(message) = self.maybe_send() {
                return Ok(self.req_rep(message));
            }
        }
        if self.ended {
            return Ok(Simcall::Exit);
        }
        Ok(Simcall::Get)
    }

    fn req_rep(&self, message: Message) -> Simcall {
        Simcall::Create(Program::ReqRep {
            message: Some(message),
            events: VecDeque::new(),
            slept: false,
        })
    }

    /// A static submitter (`static_job_submitter_process`,
    /// `static_event_submitter_process`): hello, then each batch of what
    /// is due at the date it woke, sleeping `next date - that date`
    /// (computed on `long double`s) in between, then goodbye.
    fn run_submitter(&mut self, sub: &mut SubmitterProgram) -> Simcall {
        loop {
            match sub.phase {
                SubmitterPhase::Hello => {
                    sub.phase = SubmitterPhase::AfterHello;
                    return self.put(Payload::SubmitterHello, self.master_route.clone());
                }
                SubmitterPhase::AfterHello => {
                    sub.date = self.now;
                    sub.phase = SubmitterPhase::Loop;
                }
                SubmitterPhase::WokeUp => {
                    // It woke for this item, whatever the rounding.
                    sub.date = self.now;
                    sub.batch.push(sub.next);
                    sub.next += 1;
                    sub.phase = SubmitterPhase::Loop;
                }
                SubmitterPhase::Loop => {
                    while sub.next < sub.times.len() {
                        let t = sub.times[sub.next];
                        if t > sub.date {
                            if !sub.batch.is_empty() {
                                return self.put(sub.take_batch(), self.master_route.clone());
                            }
                            sub.phase = SubmitterPhase::WokeUp;
                            return Simcall::Sleep(kernel::sub_extended(t, sub.date));
                        }
                        sub.batch.push(sub.next);
                        sub.next += 1;
                    }
                    if !sub.batch.is_empty() {
                        return self.put(sub.take_batch(), self.master_route.clone());
                    }
                    sub.phase = SubmitterPhase::Done;
                    let events = matches!(sub.items, Items::Events(_));
                    return self.put(Payload::SubmitterBye { events }, self.master_route.clone());
                }
                SubmitterPhase::Done => return Simcall::Exit,
            }
        }
    }

    /// A job's executor (`execute_job_process`), on the allocation's
    /// first machine: a delay job sleeps its delay, or its walltime if
    /// that is not longer (`do_delay_task`); a parallel task runs with
    /// the walltime as a timeout (`execute_parallel_task`); then it
    /// reports to the server from its machine.
    fn run_executor(&mut self, job: usize, phase: &mut ExecutorPhase) -> anyhow::Result<Simcall> {
        match phase.clone() {
            ExecutorPhase::Start => {
                let JobStatus::Running { ptask, .. } = self.jobs[job].status.clone() else {
                    return Ok(Simcall::Exit);
                };
                let walltime = self.jobs[job].walltime.unwrap_or(-1.0);
                match ptask {
                    Some(task) => {
                        *phase = ExecutorPhase::Started;
                        Ok(Simcall::ExecStart(task))
                    }
                    None => {
                        let delay = self.job_delay(job);
                        if walltime < 0.0 || delay < walltime {
                            *phase = ExecutorPhase::Waiting(JobState::CompletedSuccessfully);
                            Ok(Simcall::Sleep(delay))
                        } else {
                            *phase = ExecutorPhase::Waiting(JobState::CompletedWalltimeReached);
                            Ok(Simcall::Sleep(walltime))
                        }
                    }
                }
            }
            ExecutorPhase::Started => {
                let walltime = self.jobs[job].walltime.unwrap_or(-1.0);
                *phase = ExecutorPhase::Waiting(JobState::CompletedSuccessfully);
                Ok(Simcall::ExecWait(walltime))
            }
            ExecutorPhase::Waiting(state) | ExecutorPhase::Ended(state) => {
                *phase = ExecutorPhase::Reported;
                let host = self.end_execution(job, state);
                Ok(self.put(
                    Payload::JobCompleted { job },
                    self.report[host as usize].clone(),
                ))
            }
            ExecutorPhase::Reported => Ok(Simcall::Exit),
        }
    }

    fn job_delay(&self, job: usize) -> f64 {
        let j = &self.jobs[job];
        match self
            .profile_json(j.workload, j.profile)
            .and_then(|p| profile_kind(&p).ok())
        {
            Some(ProfileKind::Delay { delay }) => delay,
            _ => 0.0,
        }
    }

    /// What the server has to send, if the decision process is ready and
    /// its mailbox is empty (Batsim's `mailbox_empty` check); once the
    /// simulation is over, SIMULATION_ENDS.
    fn maybe_send(&mut self) -> Option<Message> {
        if !self.sched_ready || self.ends_sent || !self.mailbox.is_empty() {
            return None;
        }
        if self.outbox.is_empty() {
            if !self.is_finished() {
                return None;
            }
            self.outbox.push((self.now, EventData::SimulationEnds));
            self.ends_sent = true;
        }
        Some(self.take_message())
    }

    /// The pending events as one message (`generate_current_message`).
    fn take_message(&mut self) -> Message {
        let mut msg = Message::new(round6(self.now));
        for (t, ev) in self.outbox.drain(..) {
            msg.push(round6(t), ev);
        }
        self.sched_ready = false;
        msg
    }

    fn accept_reply(
        &mut self,
        sent_now: f64,
        reply: Message,
    ) -> anyhow::Result<VecDeque<(f64, Payload)>> {
        let mut out = VecDeque::new();
        if !reply.now.is_finite() {
            return self.fail(format!(
                "the reply's now ({}) is not a finite number",
                reply.now
            ));
        }
        if reply.now < sent_now {
            tracing::warn!(
                reply_now = reply.now,
                sent_now,
                "the decision process replied with a now earlier than the message's"
            );
        }
        let mut last = f64::NEG_INFINITY;
        for (i, ev) in reply.events.into_iter().enumerate() {
            if !ev.timestamp.is_finite() || ev.timestamp > reply.now {
                return self.fail(format!(
                    "event #{i} ({}) of the reply has timestamp {} after the reply's now {} \
                     (Batsim aborts on this)",
                    ev.data.kind(),
                    ev.timestamp,
                    reply.now
                ));
            }
            if ev.timestamp < last {
                tracing::warn!(index = i, "reply event timestamps decrease");
            }
            last = ev.timestamp;
            out.push_back((ev.timestamp, Payload::Decision(ev)));
        }
        // SCHED_READY goes last, at the reply's now.
        out.push_back((reply.now, Payload::SchedReady));
        Ok(out)
    }

    fn handle(&mut self, payload: Payload) -> anyhow::Result<()> {
        match payload {
            Payload::Submit { jobs } => {
                for idx in jobs {
                    self.submit(idx);
                }
            }
            Payload::SubmitterHello => {}
            Payload::SubmitterBye { events: true } => self.external_bye(),
            Payload::SubmitterBye { events: false } => {
                self.submitters_done += 1;
                if self.submitters_done == self.nb_static_workloads {
                    self.outbox.push((
                        self.now,
                        EventData::Notify(Notify::new(notify::NO_MORE_STATIC_JOB_TO_SUBMIT)),
                    ));
                }
            }
            Payload::JobCompleted { job } => self.report_completion(job)?,
            Payload::SchedReady => {
                self.sched_ready = true;
                if self.ends_sent {
                    self.ended = true;
                }
            }
            Payload::WaitingDone => {
                self.waiters -= 1;
                self.outbox.push((self.now, EventData::RequestedCall));
            }
            Payload::Decision(ev) => self.decide(ev.data)?,
            Payload::KillingDone {
                ids,
                progress,
                killed,
            } => {
                for job in killed {
                    self.report_completion(job)?;
                }
                self.outbox.push((
                    self.now,
                    EventData::JobKilled(JobKilled {
                        job_ids: ids,
                        job_progress: progress,
                        extra: Map::new(),
                    }),
                ));
            }
            Payload::External { events } => self.external_events(events)?,
        }
        Ok(())
    }

    fn submit(&mut self, idx: usize) {
        self.jobs[idx].status = JobStatus::Submitted;
        self.submitted += 1;
        let json = std::mem::take(&mut self.jobs[idx].json);
        let job = &self.jobs[idx];
        let Value::Object(mut jv) = parse_own(&json) else {
            return;
        };
        jv.insert("id".into(), json!(job.full_id));
        let profile = if self.opts.forward_profiles {
            self.profile_json(job.workload, job.profile)
        } else {
            None
        };
        let full_id = job.full_id.to_string();
        let Ok(parsed) = serde_json::from_value(Value::Object(jv)) else {
            // Workloads are validated at load time; dynamic jobs in decide().
            return;
        };
        self.outbox.push((
            self.now,
            EventData::JobSubmitted(JobSubmitted {
                job_id: full_id,
                job: parsed,
                profile,
                extra: Map::new(),
            }),
        ));
    }

    fn profile_json(&self, workload: usize, profile: u32) -> Option<Value> {
        self.workloads[workload]
            .profiles
            .get(profile as usize)
            .map(|(_, v)| parse_own(v))
    }

    fn profile_name(&self, job: usize) -> &str {
        let j = &self.jobs[job];
        &self.workloads[j.workload].profiles[j.profile as usize].0
    }

    fn job_by_id(&self, id: &str) -> anyhow::Result<usize> {
        match self.job_index.get(id) {
            Some(&i) => Ok(i),
            None => self.fail(format!(
                "the decision process named job {id:?}, which does not exist"
            )),
        }
    }

    fn decide(&mut self, ev: EventData) -> anyhow::Result<()> {
        match ev {
            EventData::ExecuteJob(e) => self.execute(e),
            EventData::RejectJob(r) => {
                let i = self.job_by_id(&r.job_id)?;
                if self.jobs[i].status != JobStatus::Submitted {
                    return self.fail(format!(
                        "REJECT_JOB for job {:?}, which is not waiting (Batsim aborts)",
                        r.job_id
                    ));
                }
                self.jobs[i].status = JobStatus::Finished;
                self.completed += 1;
                let row = self.row(i, JobState::Rejected, None, None, String::new());
                self.out.job(&row)?;
                Ok(())
            }
            EventData::KillJob(k) => self.kill(&k.job_ids),
            EventData::CallMeLater(c) => {
                if c.timestamp <= self.now {
                    return self.fail(format!(
                        "CALL_ME_LATER at {} is not in the future (now is {}); Batsim aborts \
                         with \"You asked to be awaken in the past!\"",
                        c.timestamp, self.now
                    ));
                }
                self.waiters += 1;
                self.creations.push_back(Program::Waiter {
                    target: c.timestamp,
                    phase: 0,
                });
                Ok(())
            }
            EventData::Notify(n) => {
                match n.kind.as_str() {
                    notify::REGISTRATION_FINISHED => self.registration_finished = true,
                    notify::CONTINUE_REGISTRATION => self.registration_finished = false,
                    other => tracing::warn!(kind = other, "NOTIFY kind ignored by the stand-in"),
                }
                Ok(())
            }
            EventData::RegisterProfile(p) => {
                self.need_dynamic("REGISTER_PROFILE")?;
                if let Err(why) = profile_kind(&p.profile) {
                    return self.fail(format!("REGISTER_PROFILE {:?}: {why}", p.profile_name));
                }
                let wi = self.workload_index(&p.workload_name);
                let w = &mut self.workloads[wi];
                if w.profile_index.contains_key(&p.profile_name) {
                    return self.fail(format!(
                        "profile {:?} is already registered in workload {:?}",
                        p.profile_name, p.workload_name
                    ));
                }
                w.add_profile(p.profile_name, p.profile.to_string().into());
                Ok(())
            }
            EventData::RegisterJob(r) => self.register_job(r.job_id, r.job),
            EventData::SetJobMetadata(m) => {
                let i = self.job_by_id(&m.job_id)?;
                self.jobs[i].metadata = m.metadata;
                Ok(())
            }
            EventData::SetResourceState(s) => {
                self.outbox.push((
                    self.now,
                    EventData::ResourceStateChanged(crate::protocol::ResourceStateChanged {
                        resources: s.resources,
                        state: s.state,
                        extra: Map::new(),
                    }),
                ));
                Ok(())
            }
            EventData::Answer(_) => {
                tracing::warn!("ANSWER ignored: the stand-in asks no question");
                Ok(())
            }
            other => self.fail(format!(
                "the stand-in does not support the decision {:?} (real Batsim may)",
                other.kind()
            )),
        }
    }

    fn need_dynamic(&self, what: &str) -> anyhow::Result<()> {
        if self.opts.dynamic_jobs {
            Ok(())
        } else {
            self.fail(format!("{what} needs --enable-dynamic-jobs"))
        }
    }

    fn workload_index(&mut self, name: &str) -> usize {
        if let Some(i) = self.workloads.iter().position(|w| w.name == name) {
            return i;
        }
        self.workloads.push(WorkloadState {
            name: name.to_string(),
            path: String::new(),
            profiles: Vec::new(),
            profile_index: HashMap::new(),
        });
        self.workloads.len() - 1
    }

    fn register_job(&mut self, job_id: String, job: Value) -> anyhow::Result<()> {
        self.need_dynamic("REGISTER_JOB")?;
        if self.registration_finished {
            return self.fail(format!(
                "REGISTER_JOB {job_id:?} after NOTIFY registration_finished"
            ));
        }
        let Some((wname, _)) = job_id.split_once('!') else {
            return self.fail(format!(
                "REGISTER_JOB id {job_id:?} must be \"<workload>!<job>\""
            ));
        };
        if self.job_index.contains_key(&job_id) {
            return self.fail(format!("REGISTER_JOB: job {job_id:?} already exists"));
        }
        let Value::Object(mut obj) = job else {
            return self.fail(format!("REGISTER_JOB {job_id:?}: \"job\" is not an object"));
        };
        let wi = self.workload_index(wname);
        let profile_name = obj
            .get("profile")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let Some(&profile) = self.workloads[wi].profile_index.get(profile_name) else {
            return self.fail(format!(
                "REGISTER_JOB {job_id:?}: profile {profile_name:?} is not registered in workload {wname:?}"
            ));
        };
        let res = obj
            .get("res")
            .and_then(crate::protocol::value_as_f64)
            .filter(|r| *r >= 1.0 && r.fract() == 0.0)
            .map(|r| r as u32);
        let Some(res) = res else {
            return self.fail(format!(
                "REGISTER_JOB {job_id:?}: \"res\" must be a positive integer"
            ));
        };
        let walltime = obj
            .get("walltime")
            .and_then(crate::protocol::value_as_f64)
            .filter(|w| *w > 0.0);
        obj.insert("id".into(), json!(job_id));
        obj.insert("subtime".into(), json!(self.now));
        let idx = self.jobs.len();
        self.job_index.insert(job_id.clone(), idx);
        self.jobs.push(JobEntry {
            full_id: job_id.into(),
            workload: wi,
            json: Value::Object(obj).to_string().into(),
            subtime: self.now,
            walltime,
            res,
            profile,
            status: JobStatus::NotSubmitted,
            metadata: String::new(),
            generation: 0,
        });
        if self.opts.acknowledge_dynamic_jobs {
            self.submit(idx);
        } else {
            self.jobs[idx].status = JobStatus::Submitted;
            self.submitted += 1;
        }
        Ok(())
    }

    fn execute(&mut self, e: ExecuteJob) -> anyhow::Result<()> {
        let i = self.job_by_id(&e.job_id)?;
        if self.jobs[i].status != JobStatus::Submitted {
            return self.fail(format!(
                "EXECUTE_JOB for job {:?}, which is not waiting (Batsim aborts)",
                e.job_id
            ));
        }
        if e.alloc.is_empty() {
            return self.fail(format!("EXECUTE_JOB {:?}: empty allocation", e.job_id));
        }
        let n = self.machines.len() as u32;
        if let Some(last) = e.alloc.last() {
            if last >= n {
                return self.fail(format!(
                    "EXECUTE_JOB {:?}: allocation {} names machine {last}, but there are only \
                     {n} (0-{})",
                    e.job_id,
                    e.alloc,
                    n - 1
                ));
            }
        }
        let alloc_ids: Vec<u32> = e.alloc.iter().collect();
        // Executor -> host, through the mapping when there is one.
        let hosts: Vec<u32> = match &e.mapping {
            None => alloc_ids.clone(),
            Some(map) => {
                let mut v = vec![u32::MAX; map.len()];
                for (k, val) in map {
                    let (Ok(k), Ok(val)) = (k.parse::<usize>(), val.parse::<usize>()) else {
                        return self.fail(format!(
                            "EXECUTE_JOB {:?}: mapping entries must be integers",
                            e.job_id
                        ));
                    };
                    if k >= v.len() || val >= alloc_ids.len() {
                        return self.fail(format!(
                            "EXECUTE_JOB {:?}: mapping {k}->{val} is out of range",
                            e.job_id
                        ));
                    }
                    v[k] = alloc_ids[val];
                }
                if v.contains(&u32::MAX) {
                    return self.fail(format!(
                        "EXECUTE_JOB {:?}: mapping keys must be 0..n-1 without gaps",
                        e.job_id
                    ));
                }
                v
            }
        };
        let res = self.jobs[i].res;
        if hosts.len() as u64 != u64::from(res) {
            return self.fail(format!(
                "EXECUTE_JOB {:?}: the job requests {res} resource(s) but the allocation {}{} \
                 gives {} (Batsim aborts)",
                e.job_id,
                e.alloc,
                if e.mapping.is_some() {
                    " with its mapping"
                } else {
                    ""
                },
                hosts.len()
            ));
        }
        self.check_available(&e.job_id, &alloc_ids)?;
        if !self.opts.compute_sharing {
            for &m in &alloc_ids {
                if self.machine_load[m as usize].0 > 0 {
                    return self.fail(format!(
                        "EXECUTE_JOB {:?}: machine {m} ({}) is already computing another job; \
                         several jobs on one machine need --enable-compute-sharing (Batsim aborts)",
                        e.job_id, self.machines[m as usize].name
                    ));
                }
            }
        }
        let job = &self.jobs[i];
        let Some(profile) = self.profile_json(job.workload, job.profile) else {
            return self.fail(format!(
                "job {:?}: profile {:?} is not defined",
                e.job_id,
                self.profile_name(i)
            ));
        };
        let kind = match profile_kind(&profile) {
            Ok(k) => k,
            Err(why) => {
                return self.fail(format!(
                    "job {:?} uses profile {:?}: {why}",
                    e.job_id,
                    self.profile_name(i)
                ))
            }
        };
        // A parallel task (`generate_parallel_homogeneous`,
        // `execute_parallel_task`): `cpu` flops on each of its hosts (in
        // the allocation's order, through the mapping), `com` bytes from
        // each to each other.
        let ptask = match kind {
            ProfileKind::Delay { .. } => None,
            ProfileKind::ParallelHomogeneous { cpu, com } => {
                let on: Vec<&Host> = hosts.iter().map(|&h| &self.machines[h as usize]).collect();
                let flops = vec![cpu; on.len()];
                let bytes = |x: usize, y: usize| if x != y && com > 0.0 { com } else { 0.0 };
                Some(l07_task(
                    &self.platform,
                    &mut self.kernel,
                    &mut self.resources,
                    &on,
                    &flops,
                    &bytes,
                ))
            }
        };
        let generation = self.jobs[i].generation + 1;
        self.jobs[i].generation = generation;
        self.jobs[i].status = JobStatus::Running {
            start: self.now,
            alloc: e.alloc,
            hosts: alloc_ids.clone(),
            generation,
            ptask,
        };
        self.running += 1;
        for &m in &alloc_ids {
            self.machine_busy(m, 1);
        }
        // Its executor is an actor the server creates.
        self.creations.push_back(Program::Executor {
            job: i,
            phase: ExecutorPhase::Start,
            task: None,
            timeout: None,
        });
        Ok(())
    }

    fn machine_busy(&mut self, m: u32, delta: i32) {
        let now = self.now;
        let (count, since) = self.machine_load[m as usize];
        let span = now - since;
        if count > 0 {
            self.machine_times.computing += span;
        } else {
            self.machine_times.idle += span;
        }
        let new = (i64::from(count) + i64::from(delta)).max(0) as u32;
        self.machine_load[m as usize] = (new, now);
    }

    fn account_machines(&mut self, end: f64) {
        for m in 0..self.machine_load.len() {
            let now = self.now;
            self.now = end;
            self.machine_busy(m as u32, 0);
            self.now = now;
        }
    }

    /// A job's execution ends now (its executor finished, or it was
    /// killed): its machines are free at once. Returns the machine its
    /// executor ran on.
    fn end_execution(&mut self, i: usize, state: JobState) -> u32 {
        let JobStatus::Running {
            start,
            alloc,
            hosts,
            ptask,
            ..
        } = self.jobs[i].status.clone()
        else {
            unreachable!("only running jobs end");
        };
        self.jobs[i].generation += 1;
        for &m in &hosts {
            self.machine_busy(m, -1);
        }
        // A killed parallel task is cancelled and its executor returns -2
        // (`execute_parallel_task`, `src/task_execution.cpp`); a killed
        // delay job's actor is killed (-1), as is any job over its walltime.
        let return_code = match (&state, ptask) {
            (JobState::CompletedKilled, Some(_)) => -2,
            (s, _) if s.is_success() => 0,
            _ => -1,
        };
        self.jobs[i].status = JobStatus::Ended {
            start,
            alloc,
            state,
            runtime: self.now - start,
            return_code,
        };
        hosts[0]
    }

    /// The server learns that a job ended: JOB_COMPLETED and its jobs.csv row.
    fn report_completion(&mut self, i: usize) -> anyhow::Result<()> {
        let JobStatus::Ended {
            start,
            alloc,
            state,
            runtime,
            return_code,
        } = std::mem::replace(&mut self.jobs[i].status, JobStatus::Finished)
        else {
            return Ok(());
        };
        self.running -= 1;
        self.completed += 1;
        self.outbox.push((
            self.now,
            EventData::JobCompleted(JobCompleted {
                job_id: self.jobs[i].full_id.to_string(),
                job_state: state.clone(),
                return_code,
                alloc: alloc.clone(),
                extra: Map::new(),
            }),
        ));
        let row = self.row(i, state, Some(start), Some(runtime), alloc.to_string());
        self.out.job(&row)?;
        Ok(())
    }

    fn row(
        &self,
        i: usize,
        state: JobState,
        start: Option<f64>,
        runtime: Option<f64>,
        alloc: String,
    ) -> JobRow {
        let j = &self.jobs[i];
        let w = &self.workloads[j.workload];
        let id = j
            .full_id
            .split_once('!')
            .map(|(_, id)| id.to_string())
            .unwrap_or_else(|| j.full_id.to_string());
        JobRow {
            job_id: id,
            workload_name: w.name.clone(),
            profile: self.profile_name(i).to_string(),
            submission_time: j.subtime,
            requested_number_of_resources: j.res,
            requested_time: j.walltime.unwrap_or(-1.0),
            final_state: state,
            starting_time: start,
            execution_time: runtime,
            allocated_resources: alloc,
            metadata: j.metadata.clone(),
        }
    }

    /// KILL_JOB: a killer actor on the master stops the running jobs at
    /// once and reports to the server (JOB_COMPLETED for each job it
    /// really killed, then JOB_KILLED).
    fn kill(&mut self, ids: &[String]) -> anyhow::Result<()> {
        let mut progress = Map::new();
        let mut killed = Vec::new();
        for id in ids {
            let i = self.job_by_id(id)?;
            match self.jobs[i].status.clone() {
                JobStatus::Running { start, .. } => {
                    let task = self.stop_executor(i);
                    let j = &self.jobs[i];
                    let elapsed = self.now - start;
                    let p = match self
                        .profile_json(j.workload, j.profile)
                        .and_then(|p| profile_kind(&p).ok())
                    {
                        Some(ProfileKind::Delay { delay }) if delay > 0.0 => elapsed / delay,
                        Some(ProfileKind::Delay { .. }) => 1.0,
                        // 1 - the task's remaining ratio
                        // (`BatTask::compute_leaf_progress`).
                        _ => 1.0 - task.unwrap_or(1.0),
                    };
                    progress.insert(
                        id.clone(),
                        json!({"profile_name": self.profile_name(i), "progress": p}),
                    );
                    self.end_execution(i, JobState::CompletedKilled);
                    killed.push(i);
                }
                JobStatus::Ended { .. } | JobStatus::Finished => {}
                _ => {
                    return self.fail(format!(
                        "KILL_JOB for job {id:?}, which is not running (Batsim aborts)"
                    ))
                }
            }
        }
        // The killer kills each job's executor (a simcall each), then
        // reports (`killer_process`).
        self.creations.push_back(Program::Killer {
            kills: killed.len(),
            done: Some(Payload::KillingDone {
                ids: ids.to_vec(),
                progress,
                killed,
            }),
        });
        Ok(())
    }

    /// Kills job `i`'s executor and cancels its actions; returns what its
    /// parallel task still had to do.
    fn stop_executor(&mut self, i: usize) -> Option<f64> {
        let mut remains = None;
        let executors: Vec<(usize, Option<ActionId>, Option<ActionId>)> = self
            .actors
            .iter()
            .filter_map(|(&id, a)| match &a.program {
                Some(Program::Executor {
                    job, task, timeout, ..
                }) if *job == i => Some((id, *task, *timeout)),
                _ => None,
            })
            .collect();
        for (id, task, timeout) in executors {
            for a in [task, timeout].into_iter().flatten() {
                if Some(a) == task {
                    remains = self.kernel.remains(a);
                }
                self.kernel.cancel(a);
                self.owners.remove(&a);
            }
            let sleeping: Vec<ActionId> = self
                .owners
                .iter()
                .filter(|(_, o)| matches!(o, Owner::Sleep(x) if *x == id))
                .map(|(a, _)| *a)
                .collect();
            for a in sleeping {
                self.kernel.cancel(a);
                self.owners.remove(&a);
            }
            self.actors.remove(&id);
            self.to_run.retain(|&x| x != id);
        }
        self.creations
            .retain(|p| !matches!(p, Program::Executor { job, .. } if *job == i));
        remains
    }
}
