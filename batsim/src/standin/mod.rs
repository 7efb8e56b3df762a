//! The built-in Batsim stand-in: plays Batsim v4.2's side of the protocol for
//! machines without Batsim, and for tests that must drive the broker over a
//! real socket.
//!
//! It reproduces what real Batsim sends, message for message, for what it
//! supports (`delay` profiles exactly; `parallel_homogeneous` without
//! contention), following Batsim's own event model:
//!
//! - The server sends the pending events only when the decision process is
//!   ready (its previous reply has been applied) *and* no other event is due
//!   at the current instant (Batsim's `mailbox_empty` check), so events of
//!   one instant travel together; SIMULATION_ENDS always travels alone.
//! - The events of a reply are applied at their own timestamps, then the
//!   decision process is ready again at the reply's `now` (a decision process
//!   may charge its decision time this way).
//! - A job's completion reaches the server after a 1-byte message from the
//!   job's first host to the master (route latency under SimGrid's ptask_L07
//!   model: the 1e-4 s offsets of the transcripts). Kills are done on the
//!   master and pay nothing.
//! - The static submitter of each workload submits all jobs of one subtime
//!   together (sorted by id as text), then says goodbye in a later message.
//! - The simulation ends when every submitter is done, every submitted job
//!   is complete or rejected, nothing runs and no CALL_ME_LATER is pending.

pub mod fcfs;
pub mod output;

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
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
    },
    /// Its end is known; the report may still be travelling to the server.
    Finished,
}

#[derive(Debug, Clone)]
struct JobEntry {
    /// `workload!id`
    full_id: String,
    workload: usize,
    json: Map<String, Value>,
    subtime: f64,
    walltime: Option<f64>,
    res: u32,
    profile: String,
    status: JobStatus,
    metadata: String,
    generation: u64,
}

#[derive(Debug)]
enum Action {
    Submit {
        workload: usize,
        jobs: Vec<usize>,
    },
    SubmitterBye,
    JobEnd {
        job: usize,
        generation: u64,
        state: JobState,
        runtime: f64,
    },
    Decision(crate::Event),
    SchedReady,
    Wake,
}

struct Timed {
    time: f64,
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
        // Min-heap on (time, seq).
        o.time
            .total_cmp(&self.time)
            .then_with(|| o.seq.cmp(&self.seq))
    }
}

struct WorkloadState {
    name: String,
    path: String,
    profiles: Vec<(String, Value)>,
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

/// The simulation state.
pub struct StandIn {
    opts: Options,
    platform: Platform,
    machines: Vec<Host>,
    master: Host,
    workloads: Vec<WorkloadState>,
    nb_static_workloads: usize,
    jobs: Vec<JobEntry>,
    job_index: HashMap<String, usize>,
    queue: BinaryHeap<Timed>,
    seq: u64,
    now: f64,
    outbox: Vec<(f64, EventData)>,
    deferred: Vec<(f64, Action)>,
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
        if opts.mmax > 0 && compute.len() > opts.mmax as usize {
            compute.truncate(opts.mmax as usize);
        }
        let out = OutputWriter::new(opts.export_prefix.as_deref())?;
        let mut s = StandIn {
            machine_load: vec![(0, 0.0); compute.len()],
            machines: compute,
            master: m.master,
            platform,
            workloads: Vec::new(),
            nb_static_workloads: workloads.len(),
            jobs: Vec::new(),
            job_index: HashMap::new(),
            queue: BinaryHeap::new(),
            seq: 0,
            now: 0.0,
            outbox: Vec::new(),
            deferred: Vec::new(),
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
            out,
            messages: 0,
            scheduling_wall: 0.0,
            opts,
        };
        for w in workloads {
            let wi = s.workloads.len();
            s.workloads.push(WorkloadState {
                name: w.name.clone(),
                path: w.path.clone(),
                profiles: w
                    .profiles
                    .iter()
                    .map(|p| (p.name.clone(), p.json.clone()))
                    .collect(),
            });
            let mut order: Vec<usize> = Vec::with_capacity(w.jobs.len());
            for j in w.jobs {
                let full_id = format!("{}!{}", w.name, j.id);
                let idx = s.jobs.len();
                s.job_index.insert(full_id.clone(), idx);
                s.jobs.push(JobEntry {
                    full_id,
                    workload: wi,
                    json: j.json,
                    subtime: j.subtime,
                    walltime: j.walltime,
                    res: j.res,
                    profile: j.profile,
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
            let mut batches: Vec<(f64, Vec<usize>)> = Vec::new();
            for idx in order {
                let t = s.jobs[idx].subtime;
                match batches.last_mut() {
                    Some((bt, v)) if *bt == t => v.push(idx),
                    _ => batches.push((t, vec![idx])),
                }
            }
            if batches.is_empty() {
                s.schedule(0.0, Action::SubmitterBye);
            }
            for (t, jobs) in batches {
                s.schedule(t, Action::Submit { workload: wi, jobs });
            }
        }
        Ok(s)
    }

    fn schedule(&mut self, time: f64, action: Action) {
        self.seq += 1;
        self.queue.push(Timed {
            time,
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
        config.insert("forward-unknown-events".into(), json!(false));
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
        let profiles = self
            .workloads
            .iter()
            .map(|w| {
                let m: Map<String, Value> = w.profiles.iter().cloned().collect();
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
        let mut progress = Progress::new(self.jobs.len());
        loop {
            progress.tick(self.now, self.completed);
            self.maybe_send(dp)?;
            for (t, a) in std::mem::take(&mut self.deferred) {
                self.schedule(t, a);
            }
            if self.ended {
                return Ok(());
            }
            let Some(next) = self.queue.pop() else {
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
            self.now = self.now.max(next.time);
            self.apply(next.action)?;
        }
    }

    /// Sends pending events if the decision process is ready and nothing
    /// else is due now.
    fn maybe_send(&mut self, dp: &mut dyn DecisionProcess) -> anyhow::Result<()> {
        if !self.sched_ready || self.ends_sent {
            return Ok(());
        }
        if self.queue.peek().is_some_and(|t| t.time <= self.now) {
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
            let t = ev.timestamp.max(self.now);
            self.schedule(t, Action::Decision(ev));
        }
        let t = reply.now.max(self.now);
        self.schedule(t, Action::SchedReady);
        Ok(())
    }

    fn apply(&mut self, action: Action) -> anyhow::Result<()> {
        match action {
            Action::Submit { workload, jobs } => {
                let last = !self.queue.iter().any(
                    |t| matches!(&t.action, Action::Submit { workload: w, .. } if *w == workload),
                );
                for idx in jobs {
                    self.submit(idx);
                }
                if last {
                    // The submitter's goodbye reaches the server after it
                    // handled (and possibly sent) this batch.
                    self.deferred.push((self.now, Action::SubmitterBye));
                }
            }
            Action::SubmitterBye => {
                self.submitters_done += 1;
                if self.submitters_done == self.nb_static_workloads {
                    self.outbox.push((
                        self.now,
                        EventData::Notify(Notify::new(notify::NO_MORE_STATIC_JOB_TO_SUBMIT)),
                    ));
                }
            }
            Action::JobEnd {
                job,
                generation,
                state,
                runtime,
            } => {
                if self.jobs[job].generation == generation {
                    self.finish_job(job, state, runtime, -1)?;
                }
            }
            Action::SchedReady => {
                self.sched_ready = true;
                if self.ends_sent {
                    self.ended = true;
                }
            }
            Action::Wake => {
                self.waiters -= 1;
                if !self.ends_sent {
                    self.outbox.push((self.now, EventData::RequestedCall));
                }
            }
            Action::Decision(ev) => self.decide(ev.data)?,
        }
        Ok(())
    }

    fn submit(&mut self, idx: usize) {
        self.jobs[idx].status = JobStatus::Submitted;
        self.submitted += 1;
        let job = &self.jobs[idx];
        let mut jv = job.json.clone();
        jv.insert("id".into(), json!(job.full_id));
        let profile = if self.opts.forward_profiles {
            self.profile_json(job.workload, &job.profile)
        } else {
            None
        };
        let full_id = job.full_id.clone();
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

    fn profile_json(&self, workload: usize, name: &str) -> Option<Value> {
        self.workloads[workload]
            .profiles
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
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
                self.schedule(c.timestamp, Action::Wake);
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
                if w.profiles.iter().any(|(n, _)| *n == p.profile_name) {
                    return self.fail(format!(
                        "profile {:?} is already registered in workload {:?}",
                        p.profile_name, p.workload_name
                    ));
                }
                w.profiles.push((p.profile_name, p.profile));
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
        let profile = obj
            .get("profile")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if self.profile_json(wi, &profile).is_none() {
            return self.fail(format!(
                "REGISTER_JOB {job_id:?}: profile {profile:?} is not registered in workload {wname:?}"
            ));
        }
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
            full_id: job_id,
            workload: wi,
            json: obj,
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
        let Some(profile) = self.profile_json(job.workload, &job.profile) else {
            return self.fail(format!(
                "job {:?}: profile {:?} is not defined",
                e.job_id, job.profile
            ));
        };
        let kind = match profile_kind(&profile) {
            Ok(k) => k,
            Err(why) => {
                return self.fail(format!(
                    "job {:?} uses profile {:?}: {why}",
                    e.job_id, job.profile
                ))
            }
        };
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
                latency + compute.max(comm)
            }
        };
        let (runtime, state) = match job.walltime {
            Some(w) if duration > w => (w, JobState::CompletedWalltimeReached),
            _ => (duration, JobState::CompletedSuccessfully),
        };
        let first = &self.machines[alloc_ids[0] as usize].name;
        let report = self.platform.message_time(first, &self.master.name, 1.0);
        let generation = self.jobs[i].generation + 1;
        self.jobs[i].generation = generation;
        self.jobs[i].status = JobStatus::Running {
            start: self.now,
            alloc: e.alloc,
            hosts: alloc_ids.clone(),
            generation,
        };
        self.running += 1;
        for &m in &alloc_ids {
            self.machine_busy(m, 1);
        }
        self.schedule(
            self.now + runtime + report,
            Action::JobEnd {
                job: i,
                generation,
                state,
                runtime,
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

    fn finish_job(
        &mut self,
        i: usize,
        state: JobState,
        runtime: f64,
        _code: i32,
    ) -> anyhow::Result<()> {
        let JobStatus::Running {
            start,
            alloc,
            hosts,
            ..
        } = std::mem::replace(&mut self.jobs[i].status, JobStatus::Finished)
        else {
            return Ok(());
        };
        self.jobs[i].generation += 1;
        self.running -= 1;
        self.completed += 1;
        for m in hosts {
            self.machine_busy(m, -1);
        }
        let return_code = if state.is_success() { 0 } else { -1 };
        self.outbox.push((
            self.now,
            EventData::JobCompleted(JobCompleted {
                job_id: self.jobs[i].full_id.clone(),
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
            .unwrap_or_else(|| j.full_id.clone());
        JobRow {
            job_id: id,
            workload_name: w.name.clone(),
            profile: j.profile.clone(),
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

    fn kill(&mut self, ids: &[String]) -> anyhow::Result<()> {
        let mut progress = Map::new();
        for id in ids {
            let i = self.job_by_id(id)?;
            match self.jobs[i].status.clone() {
                JobStatus::Running { start, .. } => {
                    let j = &self.jobs[i];
                    let elapsed = self.now - start;
                    let p = match self
                        .profile_json(j.workload, &j.profile)
                        .and_then(|p| profile_kind(&p).ok())
                    {
                        Some(ProfileKind::Delay { delay }) if delay > 0.0 => elapsed / delay,
                        Some(ProfileKind::Delay { .. }) => 1.0,
                        _ => 0.0,
                    };
                    progress.insert(
                        id.clone(),
                        json!({"profile_name": j.profile, "progress": p}),
                    );
                    self.finish_job(i, JobState::CompletedKilled, elapsed, -1)?;
                }
                JobStatus::Finished => {}
                _ => {
                    return self.fail(format!(
                        "KILL_JOB for job {id:?}, which is not running (Batsim aborts)"
                    ))
                }
            }
        }
        self.outbox.push((
            self.now,
            EventData::JobKilled(JobKilled {
                job_ids: ids.to_vec(),
                job_progress: progress,
                extra: Map::new(),
            }),
        ));
        Ok(())
    }
}
