//! The built-in Batsim stand-in: plays Batsim v4.2's side of the protocol for
//! machines without Batsim, and for tests that must drive the broker over a
//! real socket.
//!
//! It reproduces what real Batsim sends, message for message, for what it
//! supports (`delay` profiles exactly; `parallel_homogeneous` without
//! contention), by modelling Batsim's actors and SimGrid's mailboxes rather
//! than fitting times (`src/server.cpp`, `src/ipp.cpp`,
//! `src/jobs_execution.cpp`, `src/job_submitter.cpp` of Batsim 4.2.1):
//!
//! - Every actor (static submitters, job executors, CALL_ME_LATER waiters,
//!   the request-reply actor that applies the decision process's replies,
//!   killers) talks to the server by putting a 1-byte message in the
//!   server's mailbox. The server receives them one at a time, in the order
//!   they were posted, and each takes the route's time from its sender's
//!   host to the master: latency plus one byte over the narrowest link
//!   (SimGrid's ptask_L07 model). Every actor but the executors runs on the
//!   master (loopback: no time). So simultaneous job ends on 16-node.xml
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
//! - The simulation ends when every submitter is done, every submitted job
//!   is complete or rejected, nothing runs and no CALL_ME_LATER is pending.
//! - A `parallel_homogeneous` job that completes ends after everything
//!   else of its instant: the messages, the sleeps and the exchanges with
//!   the decision process at that instant come first (SimGrid 3.32,
//!   Batsim's `host/model:ptask_L07`). Why: the stand-in counts no time
//!   for a message between two actors on the master, but SimGrid does:
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
//! Known limits, measured by the differential harness against real Batsim
//! 4.2.1 (`batkube batsim --compare-with`, `batsim/tests/differential/`):
//! - the stand-in orders a parallel task's end, it does not compute its
//!   date to 1e-10 s; tasks sharing a host or a link are not solved (no
//!   contention in the L07 model), so `parallel_homogeneous` jobs that
//!   overlap on a resource, or whose communications cross shared links,
//!   end at other dates than in SimGrid;
//! - when the master's own messages take time (master inside a
//!   `<cluster>`), events that SimGrid dates within floating-point rounding
//!   of each other (a submitter's wake against its next subtime, a sleep's
//!   end against a message's arrival) may be ordered the other way: SimGrid
//!   accumulates its clock step by step, the stand-in computes each date
//!   once.

pub mod events;
pub mod fcfs;
pub mod output;

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap, VecDeque};
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
        /// A parallel task's latency and whole duration (its progress
        /// when killed).
        ptask: Option<(f64, f64)>,
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

/// What an actor does when its sleep ends: in Batsim, every actor talks
/// to the server by putting a message in the server's mailbox.
#[derive(Debug)]
enum Action {
    /// A static submitter wakes for its next batch.
    SubmitterWake { workload: usize },
    /// A job's executor ends (its delay elapsed or its walltime was reached).
    JobEnd {
        job: usize,
        generation: u64,
        state: JobState,
    },
    /// A CALL_ME_LATER waiter wakes.
    Wake,
    /// The request-reply actor reaches the timestamp of its next event.
    ReqRep,
    /// An event submitter (`--events`) wakes with its batch of one instant
    /// (`last`: its final batch).
    External {
        events: Vec<events::ExternalEvent>,
        last: bool,
    },
    /// An event submitter with no events says goodbye.
    ExternalBye,
}

/// Who sends a message to the server, and what it says.
#[derive(Debug)]
enum Payload {
    Submit {
        workload: usize,
        jobs: Vec<usize>,
    },
    SubmitterHello {
        workload: usize,
    },
    SubmitterBye,
    JobCompleted {
        job: usize,
    },
    WaitingDone,
    Decision(crate::Event),
    /// A batch of external events of one instant (`last`: the submitter's
    /// final batch).
    External {
        events: Vec<events::ExternalEvent>,
        last: bool,
    },
    ExternalBye,
    SchedReady,
    KillingDone {
        ids: Vec<String>,
        progress: Map<String, Value>,
        killed: Vec<usize>,
    },
}

/// A message in the server's mailbox: it travels from its sender's host to
/// the master in `comm` seconds once the server starts receiving it.
#[derive(Debug)]
struct Put {
    comm: f64,
    payload: Payload,
}

/// A static submitter (one per workload): its jobs by submission time
/// (then id as text), and the next one to submit.
struct Submitter {
    order: Vec<usize>,
    next: usize,
    /// When it last woke (`current_submission_date` in Batsim).
    woke_at: f64,
}

struct Timed {
    time: f64,
    /// Ends only after everything else of its instant (a parallel task
    /// that completes: see the module doc).
    late: bool,
    seq: u64,
    action: Action,
}

impl PartialEq for Timed {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Timed {}
impl PartialOrd for Timed {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Timed {
    fn cmp(&self, o: &Self) -> Ordering {
        // Min-heap on (time, late, seq).
        o.time
            .total_cmp(&self.time)
            .then_with(|| o.late.cmp(&self.late))
            .then_with(|| o.seq.cmp(&self.seq))
    }
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
    /// Time a 1-byte message takes from each machine to the master (where
    /// the server runs): route latency plus the byte over the narrowest
    /// link, SimGrid's ptask_L07 model.
    report: Vec<f64>,
    /// Time a 1-byte message takes from the master to itself (every actor
    /// but the executors runs there): none over SimGrid's loopback, the
    /// private link and the backbone in a `<cluster>`.
    master_comm: f64,
    workloads: Vec<WorkloadState>,
    nb_static_workloads: usize,
    jobs: Vec<JobEntry>,
    job_index: HashMap<String, usize>,
    /// Sleeping actors, by wake-up time.
    queue: BinaryHeap<Timed>,
    seq: u64,
    now: f64,
    outbox: Vec<(f64, EventData)>,
    /// The server's mailbox: messages posted and not yet being received.
    mailbox: VecDeque<Put>,
    /// The message the server is receiving, and when it arrives.
    receiving: Option<(f64, Put)>,
    /// Events of the last reply the request-reply actor still has to post.
    reqrep: VecDeque<(f64, Payload)>,
    /// The request-reply actor sleeps or waits for its message to arrive.
    reqrep_busy: bool,
    /// Messages of actors created by the server while it handled a message;
    /// they post after the sender of that message resumes.
    spawned: Vec<Put>,
    submitters: Vec<Submitter>,
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
        let report = compute
            .iter()
            .map(|h| platform.message_time(&h.name, &m.master.name, 1.0))
            .collect();
        let master_comm = platform.message_time(&m.master.name, &m.master.name, 1.0);
        let out = OutputWriter::new(opts.export_prefix.as_deref())?;
        let mut s = StandIn {
            master_comm,
            machine_load: vec![(0, 0.0); compute.len()],
            machines: compute,
            report,
            platform,
            workloads: Vec::new(),
            nb_static_workloads: workloads.len(),
            jobs: Vec::new(),
            job_index: HashMap::new(),
            queue: BinaryHeap::new(),
            seq: 0,
            now: 0.0,
            outbox: Vec::new(),
            mailbox: VecDeque::new(),
            receiving: None,
            reqrep: VecDeque::new(),
            reqrep_busy: false,
            spawned: Vec::new(),
            submitters: Vec::new(),
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
            // The submitter says hello at 0; what it does next depends on
            // the date its hello arrived (see `submitter_resumes`).
            s.mailbox.push_back(Put {
                comm: s.master_comm,
                payload: Payload::SubmitterHello { workload: wi },
            });
            s.submitters.push(Submitter {
                order,
                next: 0,
                woke_at: 0.0,
            });
        }
        s.load_external_events()?;
        Ok(s)
    }

    fn schedule(&mut self, time: f64, action: Action) {
        self.schedule_at(time, false, action);
    }

    fn schedule_at(&mut self, time: f64, late: bool, action: Action) {
        self.seq += 1;
        self.queue.push(Timed {
            time,
            late,
            seq: self.seq,
            action,
        });
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

    fn run_inner(&mut self, dp: &mut dyn DecisionProcess) -> anyhow::Result<()> {
        // The server announces the simulation before any submitter runs.
        self.outbox.push((0.0, self.simulation_begins()));
        self.send(dp)?;
        self.reqrep_next();
        let mut progress = Progress::new(self.jobs.len());
        while !self.ended {
            progress.tick(self.now, self.completed);
            // The server receives its messages one at a time, in the order
            // they were posted; each travels from its sender's host.
            if self.receiving.is_none() {
                if let Some(put) = self.mailbox.pop_front() {
                    self.receiving = Some((self.now + put.comm, put));
                }
            }
            let timer = self.queue.peek().map(|t| (t.time, t.late));
            match (&self.receiving, timer) {
                // An actor whose sleep ends no later than the message being
                // received posts first (its sleep began before that
                // communication, and SimGrid ends actions in that order).
                // A parallel task's end is not a sleep: it comes after a
                // message arriving at its instant.
                (Some((arrival, _)), Some((t, late)))
                    if t < *arrival || (!late && t == *arrival) =>
                {
                    self.wake()
                }
                (None, Some(_)) => self.wake(),
                (Some(_), _) => {
                    let (arrival, put) = self.receiving.take().expect("checked above");
                    self.now = self.now.max(arrival);
                    self.receive(put, dp)?;
                }
                (None, None) => {
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
                }
            }
        }
        Ok(())
    }

    /// The earliest sleeping actor wakes and acts.
    fn wake(&mut self) {
        let next = self.queue.pop().expect("a timer is due");
        self.now = self.now.max(next.time);
        match next.action {
            Action::SubmitterWake { workload } => {
                self.submitters[workload].woke_at = self.now;
                // It woke for the next job, whatever the rounding of its
                // sleep, and takes every later one already due.
                self.submit_batch(workload, true);
            }
            Action::JobEnd {
                job,
                generation,
                state,
            } => {
                if self.jobs[job].generation == generation {
                    let host = self.end_execution(job, state);
                    self.mailbox.push_back(Put {
                        comm: self.report[host as usize],
                        payload: Payload::JobCompleted { job },
                    });
                }
            }
            Action::Wake => {
                // A waiter does not report once the simulation has ended.
                if !self.ends_sent {
                    self.mailbox.push_back(Put {
                        comm: self.master_comm,
                        payload: Payload::WaitingDone,
                    });
                }
            }
            Action::ReqRep => self.reqrep_post(),
            Action::External { events, last } => self.mailbox.push_back(Put {
                comm: self.master_comm,
                payload: Payload::External { events, last },
            }),
            Action::ExternalBye => self.mailbox.push_back(Put {
                comm: self.master_comm,
                payload: Payload::ExternalBye,
            }),
        }
    }

    /// The server has received `put`: it handles it, then sends what it
    /// has to the decision process if that one is ready and nothing else
    /// waits in the mailbox; then the sender resumes.
    fn receive(&mut self, put: Put, dp: &mut dyn DecisionProcess) -> anyhow::Result<()> {
        let from_reqrep = matches!(put.payload, Payload::Decision(_) | Payload::SchedReady);
        let submitter = match &put.payload {
            Payload::Submit { workload, .. } => Some((*workload, false)),
            Payload::SubmitterHello { workload } => Some((*workload, true)),
            _ => None,
        };
        self.handle(put.payload)?;
        self.maybe_send(dp)?;
        // The sender resumes after the server's look at its mailbox.
        if let Some((w, hello)) = submitter {
            self.submitter_resumes(w, hello);
        }
        if from_reqrep {
            self.reqrep_busy = false;
        }
        // The request-reply actor goes on (or, created by a send just now,
        // starts) after the sender.
        self.reqrep_next();
        self.mailbox.extend(self.spawned.drain(..));
        Ok(())
    }

    /// A static submitter's put was received; it goes on
    /// (`static_job_submitter_process` of Batsim's `src/job_submitter.cpp`):
    /// after its hello it takes the date (`current_submission_date`) and
    /// submits at once every job due by then; after a batch, it sleeps
    /// `next subtime - current_submission_date` (so it wakes late by the
    /// time its put took), or says goodbye after its last job.
    fn submitter_resumes(&mut self, w: usize, hello: bool) {
        if hello {
            self.submitters[w].woke_at = self.now;
            if self.submit_batch(w, false) {
                return;
            }
        }
        let sub = &self.submitters[w];
        match sub.order.get(sub.next) {
            Some(&j) => {
                let at = self.now + (self.jobs[j].subtime - sub.woke_at);
                self.schedule(at, Action::SubmitterWake { workload: w });
            }
            None => self.mailbox.push_back(Put {
                comm: self.master_comm,
                payload: Payload::SubmitterBye,
            }),
        }
    }

    /// Posts the jobs of submitter `w` due at its date (`first`: the next
    /// one whatever its subtime). Returns whether it posted anything.
    fn submit_batch(&mut self, w: usize, first: bool) -> bool {
        let sub = &mut self.submitters[w];
        let mut jobs = Vec::new();
        while let Some(&j) = sub.order.get(sub.next) {
            if !(first && jobs.is_empty()) && self.jobs[j].subtime > sub.woke_at {
                break;
            }
            jobs.push(j);
            sub.next += 1;
        }
        if jobs.is_empty() {
            return false;
        }
        self.mailbox.push_back(Put {
            comm: self.master_comm,
            payload: Payload::Submit { workload: w, jobs },
        });
        true
    }

    /// The request-reply actor goes on with the next event of the reply:
    /// it sleeps until the event's timestamp, then posts it.
    fn reqrep_next(&mut self) {
        if self.reqrep_busy {
            return;
        }
        let Some(&(t, _)) = self.reqrep.front() else {
            return;
        };
        self.reqrep_busy = true;
        if t > self.now {
            self.schedule(t, Action::ReqRep);
        } else {
            self.reqrep_post();
        }
    }

    fn reqrep_post(&mut self) {
        if let Some((_, payload)) = self.reqrep.pop_front() {
            self.mailbox.push_back(Put {
                comm: self.master_comm,
                payload,
            });
        }
    }

    /// Sends pending events if the decision process is ready and the
    /// server's mailbox is empty (Batsim's `mailbox_empty` check).
    fn maybe_send(&mut self, dp: &mut dyn DecisionProcess) -> anyhow::Result<()> {
        if !self.sched_ready || self.ends_sent || !self.mailbox.is_empty() {
            return Ok(());
        }
        if self.outbox.is_empty() {
            if !self.is_finished() {
                return Ok(());
            }
            self.outbox.push((self.now, EventData::SimulationEnds));
            self.ends_sent = true;
        }
        self.send(dp)
    }

    fn send(&mut self, dp: &mut dyn DecisionProcess) -> anyhow::Result<()> {
        let now = round6(self.now);
        let mut msg = Message::new(now);
        for (t, ev) in self.outbox.drain(..) {
            msg.push(round6(t), ev);
        }
        self.sched_ready = false;
        let t0 = Instant::now();
        let reply = dp.exchange(&msg)?;
        self.scheduling_wall += t0.elapsed().as_secs_f64();
        self.messages += 2;
        self.accept_reply(now, reply)
    }

    fn accept_reply(&mut self, sent_now: f64, reply: Message) -> anyhow::Result<()> {
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
            self.reqrep.push_back((ev.timestamp, Payload::Decision(ev)));
        }
        // SCHED_READY goes last, at the reply's now.
        self.reqrep.push_back((reply.now, Payload::SchedReady));
        Ok(())
    }

    fn handle(&mut self, payload: Payload) -> anyhow::Result<()> {
        match payload {
            Payload::Submit { jobs, .. } => {
                for idx in jobs {
                    self.submit(idx);
                }
            }
            Payload::SubmitterHello { .. } => {}
            Payload::SubmitterBye => {
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
            Payload::External { events, last } => self.external_events(events, last)?,
            Payload::ExternalBye => self.external_bye(),
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
                // Batsim's waiter sleeps at least 1e-5 s.
                let at = c.timestamp.max(self.now + 1e-5);
                self.schedule(at, Action::Wake);
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
        let mut ptask = None;
        let duration = match kind {
            ProfileKind::Delay { delay } => delay,
            ProfileKind::ParallelHomogeneous { cpu, com } => {
                let mut names: Vec<&str> = hosts
                    .iter()
                    .map(|&h| self.machines[h as usize].name.as_str())
                    .collect();
                let speed = hosts
                    .iter()
                    .map(|&h| self.machines[h as usize].speed)
                    .fold(f64::INFINITY, f64::min);
                names.dedup();
                let compute = if cpu > 0.0 { cpu / speed } else { 0.0 };
                let (latency, comm) = self.platform.ptask_communication(&names, com);
                ptask = Some((latency, latency + compute.max(comm)));
                latency + compute.max(comm)
            }
        };
        let (runtime, state) = match job.walltime {
            Some(w) if duration > w => (w, JobState::CompletedWalltimeReached),
            _ => (duration, JobState::CompletedSuccessfully),
        };
        // A parallel task that completes ends when its remaining work runs
        // out, not within a precision of its instant as sleeps (a walltime
        // is a sleep) do: it comes after everything else of that instant.
        let late = state == JobState::CompletedSuccessfully
            && matches!(kind, ProfileKind::ParallelHomogeneous { .. });
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
        // The executor runs on the allocation's first machine; at its end
        // it reports to the server from there.
        self.schedule_at(
            self.now + runtime,
            late,
            Action::JobEnd {
                job: i,
                generation,
                state,
            },
        );
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
                JobStatus::Running { start, ptask, .. } => {
                    let j = &self.jobs[i];
                    let elapsed = self.now - start;
                    let p = match self
                        .profile_json(j.workload, j.profile)
                        .and_then(|p| profile_kind(&p).ok())
                    {
                        Some(ProfileKind::Delay { delay }) if delay > 0.0 => elapsed / delay,
                        Some(ProfileKind::Delay { .. }) => 1.0,
                        // 1 - the task's remaining ratio
                        // (`BatTask::compute_leaf_progress`): its work
                        // advances at a constant rate once its latency is
                        // paid (no contention modelled).
                        _ => match ptask {
                            Some((lat, dur)) if dur > lat => {
                                ((elapsed - lat) / (dur - lat)).clamp(0.0, 1.0)
                            }
                            _ => 0.0,
                        },
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
        self.spawned.push(Put {
            comm: self.master_comm,
            payload: Payload::KillingDone {
                ids: ids.to_vec(),
                progress,
                killed,
            },
        });
        Ok(())
    }
}
