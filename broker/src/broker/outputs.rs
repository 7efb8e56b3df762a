//! The run's outputs: pods.csv, nodes.csv and summary.json (`record.rs`),
//! decisions.jsonl, timeline.csv, the jobs retired once written, and the
//! broker's metrics.

use serde_json::Value;

use super::record::{NodeSample, PodRecord, Summary};
use super::{timeline, Broker, Phase};
use crate::translate;
use batsim::protocol::EventData;

impl Broker {
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
        let (held, busiest) = timeshim::spin_stats();
        s.spins_held = held;
        s.spin_busiest_calls = busiest;
        if busiest > 0 {
            tracing::info!(
                busiest_calls = busiest,
                spins_held = held,
                "deterministic programs: the most system calls made at one instant between two \
                 quiet points, short of --spin-bound"
            );
        }
        s.partial_instants = self.partial_instants;
        s.quiescence_contradicted = self.quiescence_contradicted;
        s.elide = self.elision.config().to_string();
        let skipped = self.elision.skipped();
        if self.elision.config().idle {
            s.wake_ups_elided.insert("idle".into(), skipped.idle);
        }
        if self.elision.config().controllers {
            s.wake_ups_elided
                .insert("controllers".into(), skipped.controllers);
        }
        if self.elision.config().go_poller {
            // The supervisors' count: this process's, so this run's.
            s.wake_ups_elided
                .insert("go-poller".into(), timeshim::go_early_wakes_passed());
        }
        s.gangs_started = self.gangs_started;
        s.jobs_whole_node = self.jobs_whole_node;
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
    /// (`decisions.jsonl`, see [`decisions`](super::decisions)): created now when `eager`
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
    pub(super) fn retire_jobs(&mut self) {
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
            if let Some(g) = j.gang {
                self.gang_left(g);
            }
            self.pods_log.finished(i, j.record);
        }
    }

    /// Deletes the group object of gang `g` once every pod of it has left
    /// the API (retired): the pods are its owners.
    fn gang_left(&mut self, g: super::gangs::Gang) {
        if g.members().any(|k| self.jobs.contains(k)) {
            return;
        }
        let (Some(name), Some(resource)) = (
            self.group_objects.remove(&g.first),
            self.cfg.gang.group_resource(),
        ) else {
            return;
        };
        match self
            .store
            .delete(resource, Some(translate::NAMESPACE), &name)
        {
            Ok(obj) => {
                let kind = obj["kind"].as_str().unwrap_or("PodGroup").to_string();
                self.timeline.push(
                    self.clock.now(),
                    "broker",
                    "delete",
                    &kind,
                    translate::NAMESPACE,
                    name.to_string(),
                    "its pods are gone".to_string(),
                );
            }
            // A client deleted it first.
            Err(e) => tracing::debug!(group = %name, error = %e, "group object not deleted"),
        }
    }

    /// The timeline names the requests of `program` (the scheduler's file
    /// name, its `User-Agent`'s product) `scheduler`.
    pub fn name_scheduler(&mut self, program: &str) {
        self.timeline.name_scheduler(program);
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
    pub(super) fn timeline_batsim(&mut self, t: f64, source: &'static str, ev: &EventData) {
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
