//! The window loop: one Batsim message in, one reply out. The clock moves
//! to the message's instant, its events are applied behind the
//! scheduler's gate, a window lets the scheduler react under the clock
//! policy (quiescence checked at the next message, `QuietMark`), and the
//! reply carries the decisions in a canonical order and the wake-ups
//! (the scheduler's, the kubelet model's and the API's timers).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use chrono::DateTime;
use timeshim::elide::Look;
use timeshim::policy::{Situation, Step};
use timeshim::SimTime;

use super::record::EndReason;
use super::sync::{self, Quiet};
use super::{
    batsim_time, ceil_us, lifecycle, sim_time, Broker, Phase, SchedulerSide, Timer,
    EXTERNAL_PATIENCE, SIM_EPOCH_NANOS, UNSERVED_SIMULATED, UNSERVED_WALL,
};
use crate::translate;
use batsim::protocol::{build, Event, EventData, Message};

impl Broker {
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
    pub(super) fn settle(&mut self, until: f64, out: &mut Vec<EventData>) -> anyhow::Result<()> {
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
                            ..
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
    pub(super) fn apply_instant(
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
    pub(super) fn collect_garbage(&mut self) {
        // Events (a scheduler writes one per binding) expire on simulated
        // time, as with the API server's --event-ttl.
        self.store.expire_events();
        for pod in self.gc.collect() {
            if let Err(e) = self.store.delete("pods", Some(translate::NAMESPACE), &pod) {
                tracing::debug!(%pod, error = %e, "terminated pod not collected");
            }
        }
    }

    pub(super) fn advance(&mut self, t: f64) -> anyhow::Result<()> {
        if t < self.clock.now() {
            return Ok(());
        }
        self.clock.set(t);
        self.elision.advanced(sim_time(t));
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
    pub(super) fn advance_gated(&mut self, t: f64) -> anyhow::Result<()> {
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
    pub(super) fn timers_written(&self) {
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

    pub(super) fn add_timer(&mut self, at: f64, timer: Timer) {
        self.timer_seq += 1;
        self.timers
            .insert(((ceil_us(at) * 1e6).round() as u64, self.timer_seq), timer);
    }

    /// The scenario's operations due by `t`, before anything else of the
    /// instant (their timers, in file order among equal times).
    pub(super) fn fire_scenario(&mut self, t: f64, out: &mut Vec<EventData>) -> anyhow::Result<()> {
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

    pub(super) fn fire_timers(&mut self, t: f64, out: &mut Vec<EventData>) -> anyhow::Result<()> {
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

    /// Lets the scheduler react; returns the reply's `now`.
    pub(super) fn window(&mut self, t: f64, out: &mut Vec<EventData>) -> anyhow::Result<f64> {
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
                                    each,
                                } if decided == 0 => {
                                    let (earliest_deadline, controllers) =
                                        self.elide(t, &each, earliest_deadline, controllers);
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
            let state = match &self.side {
                SchedulerSide::Shim(s) => s.describe(),
                SchedulerSide::External => String::new(),
            };
            tracing::warn!(
                time = t,
                "the scheduler was still busy when the window's wall-clock bound ran out{state}"
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

    /// The timers to honour, the programs being quiescent at `t` with
    /// their earliest timers `each` (see [`timeshim::elide`]): all of them
    /// (`earliest`, `controllers`) unless a rule of `--elide` is in force.
    fn elide(
        &mut self,
        t: f64,
        each: &[Option<SimTime>],
        earliest: Option<SimTime>,
        controllers: Option<SimTime>,
    ) -> (Option<SimTime>, Option<SimTime>) {
        let SchedulerSide::Shim(s) = &self.side else {
            return (earliest, controllers);
        };
        if !self.elision.config().any() {
            return (earliest, controllers);
        }
        // What each program asked and was sent since its last look; a
        // webhook call reaches every program (whichever serves it).
        let webhooks = s.activity.webhook_calls_made();
        let webhooked = webhooks != self.elision_webhooks;
        self.elision_webhooks = webhooks;
        self.elision_marks.resize(s.procs.len(), Default::default());
        let looks: Vec<Look> = s
            .procs
            .iter()
            .zip(each)
            .zip(&mut self.elision_marks)
            .map(|((p, &deadline), mark)| {
                let now = s.activity.group_activity(p.group);
                let look = Look {
                    deadline,
                    acted: now.requests != mark.requests,
                    reached: webhooked || now.events_written != mark.events_written,
                    is_scheduler: p.is_scheduler,
                };
                *mark = now;
                look
            })
            .collect();
        let situation = Situation {
            pending: self.pending.len(),
            running: self.active,
        };
        let h = self.elision.quiescent(sim_time(t), &looks, situation);
        (h.scheduler, h.controllers)
    }

    /// A window that closed on quiescence said the scheduler would do
    /// nothing until the clock moved or the API told it something. Before
    /// the next instant, neither has happened: if the API served it
    /// meanwhile (a request, a change), the decision was wrong, and what
    /// it did then lands at the next instant instead of this one. Exact,
    /// and costs one look per window; counted in the summary and warned
    /// about (with the processes' CPU times), for the soak to find.
    pub(super) fn check_quiet_mark(&mut self, t: f64) {
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
pub(super) struct QuietMark {
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
pub(super) fn canonical_order(out: &mut [EventData]) {
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

impl Broker {
    /// With nothing left to happen but pods the scheduler will not place,
    /// rejects them so that Batsim can end, saying why.
    pub(super) fn give_up_if_stuck(
        &mut self,
        now: f64,
        out: &mut Vec<EventData>,
    ) -> anyhow::Result<()> {
        if !self.no_more_static || !self.timers.is_empty() {
            return Ok(());
        }
        // Since the last decision, and since the last pod became pending:
        // a job that arrives after a long quiet spell gets its time too
        // (Volcano's 1 s session had not run when the NASA trace's last
        // job, arriving 6 s after every other had ended, was rejected at
        // its own arrival).
        let since = self.last_decision_at.max(self.last_pending_at);
        if self.pending.is_empty() || now - since < self.cfg.give_up_after {
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
        if !observed
            && (self.last_decision_wall.elapsed() < EXTERNAL_PATIENCE
                || self.last_pending_wall.elapsed() < EXTERNAL_PATIENCE)
        {
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
            let made_none = self.workload_why(i);
            let j = &mut self.jobs[i];
            let why = j
                .record
                .last_unschedulable_reason
                .clone()
                .or(made_none)
                .unwrap_or_else(|| "never scheduled".into());
            if rejected.insert(j.record.job_id.clone()) {
                tracing::warn!(job = %j.record.job_id, %why, "rejected: still pending with nothing else left to happen");
                out.push(build::reject_job(&j.record.job_id));
            }
            j.phase = Phase::Done;
            j.record.outcome =
                format!("REJECTED: unschedulable at the end of the simulation: {why}");
        }
        for job_id in rejected {
            self.forget_workload(&job_id);
        }
        Ok(())
    }

    /// Asks Batsim for a wake-up at the next instant something is due (the
    /// scheduler's timer, a kubelet event), unless one is already pending
    /// at or before it.
    /// A job's executor starts at `now` (EXECUTE_JOB, once per Batsim
    /// job; its entry's `started` is `now`): its end is known if its
    /// profile is a delay. JOB_COMPLETED takes it out again.
    pub(super) fn executor_started(&mut self, first: usize, now: f64) {
        if let Some(&d) = self.batsim_delays.get(&self.jobs[first].record.job_id) {
            self.ends_due.insert((key_us(now + d), first));
        }
    }

    pub(super) fn request_wakeups(&mut self, now: f64, reply: &mut Message) {
        let mut want: Vec<f64> = Vec::new();
        // Nothing to wake up for when nothing can change any more: every
        // job done, none to come, no workload object that may make pods.
        let live = self.done < self.jobs.len() || !self.no_more_static || self.workloads.open;
        if let Some(t) = self.scheduler_wakeup.take() {
            if live {
                want.push(t);
            }
        }
        if let Some(t) = self.controllers_wakeup.take() {
            if live {
                want.push(t);
            }
        }
        // Registration held open for workload objects closes at the
        // give-up instant at the latest (their controllers' timers may be
        // passed over meanwhile).
        if self.workloads.open {
            want.push(self.last_decision_at + self.cfg.give_up_after);
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
        // A job executor that ended at this very instant (its job's
        // nominal end, to the microsecond, and not reported yet) posted its
        // message to Batsim's server after the server had sent this
        // instant's message: the server takes that message first, over the
        // compute host's route, and this reply's events only after it
        // (`standin` module doc, "messages that wait travel together").
        // Seen on the NASA trace under YuniKorn on platforms/128-node.xml:
        // a job ended at 1681944.0 as a wake-up was due there, and the
        // reply's CALL_ME_LATER at 1681944.0002 reached the server at
        // 1681944.0002000062.
        let in_flight = self
            .ends_due
            .first()
            .is_some_and(|&(end, _)| end <= key_us(now) + 1);
        let base = if in_flight {
            now + self.cfg.completion_message_time
        } else {
            now
        };
        let floors = CallFloors::of(now, base, reply, self.cfg.reply_message_time);
        let mut near: Option<f64> = None;
        for t in want {
            let t = ceil_us(t).max(floors.today);
            if t <= floors.at_end {
                // Too close to name after the reply's other events: first,
                // at the earliest instant it can name there (later wants
                // close by are asked again at that wake-up).
                near = Some(near.map_or(t, |n: f64| n.min(t)));
                continue;
            }
            if self.pending_wakeups.range(..=key_us(t)).next().is_some() {
                continue;
            }
            self.pending_wakeups.insert(key_us(t));
            self.wakeups += 1;
            reply.push(now, build::call_me_later(t));
        }
        if let Some(t) = near {
            let t = t.max(floors.first);
            if self.pending_wakeups.range(..=key_us(t)).next().is_none() {
                self.pending_wakeups.insert(key_us(t));
                self.wakeups += 1;
                reply.events.insert(
                    0,
                    Event {
                        timestamp: now,
                        data: build::call_me_later(t),
                    },
                );
            }
        }
    }

    pub(super) fn progress(&mut self) {
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
    pub(super) fn warn_unserved(&mut self) {
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
    pub(super) fn api_deadline(&self) -> Option<f64> {
        match &self.store.config().watch_timers {
            fakeapi::WatchTimers::Simulated(timers) => timers.earliest_deadline().and_then(|d| {
                Some((d.timestamp_nanos_opt()? as i128 - SIM_EPOCH_NANOS as i128) as f64 / 1e9)
            }),
            _ => None,
        }
    }
}

pub(super) fn key_us(t: f64) -> u64 {
    (t * 1e6).round() as u64
}

/// The earliest instants a CALL_ME_LATER can name in a reply at `now`.
///
/// Batsim applies a reply one event at a time: each is a message from the
/// master host to itself, taking the master's route (`message`: SimGrid's
/// loopback, 1e-10 s, or up and down a `<cluster>`'s links, 0.0002 s or
/// more), and the server receives them in the order they were posted. A
/// CALL_ME_LATER must name an instant after its own arrival, or Batsim
/// aborts ("You asked to be awaken in the past!"). What can arrive before
/// it:
/// - put first, only the message the sender of the last message Batsim
///   handled may post at `now` (a submitter's goodbye: it resumes after
///   the server sent its request), so it arrives by `now + 2 x message`;
/// - put last, the reply's other events, that message, and what the
///   reply's KILL_JOBs make the server's killers post.
///
/// Not counted: a job this reply starts that ends within the reply's own
/// transfer (its executor's report could come between); then Batsim aborts
/// as before.
struct CallFloors {
    /// The floor before any of this: one microsecond after `now`.
    today: f64,
    /// The latest a CALL_ME_LATER put last arrives: wants at or before it
    /// go first.
    at_end: f64,
    /// The earliest instant a CALL_ME_LATER put first can name.
    first: f64,
}

impl CallFloors {
    /// `base`: when the reply's first event reaches the server (`now`,
    /// or later when another message is on its way there first).
    fn of(now: f64, base: f64, reply: &Message, message: f64) -> CallFloors {
        let today = ceil_us(now + 1e-6);
        // The floor of today is kept wherever it is already later than the
        // arrival (always on a loopback: 1e-10 s a message).
        let after = |arrives: f64| {
            if today > arrives + 1e-9 {
                arrives
            } else {
                ceil_us(arrives + 1e-6)
            }
        };
        let kills = reply
            .events
            .iter()
            .filter(|e| matches!(e.data, EventData::KillJob(_)))
            .count();
        let ahead = (reply.events.len() + kills + 2) as f64;
        CallFloors {
            today,
            at_end: base + ahead * message + 1e-9,
            first: after(base + 2.0 * message).max(today),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use batsim::IntervalSet;

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
