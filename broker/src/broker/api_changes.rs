//! The reaction to what the scheduler changed through the API: bindings
//! become EXECUTE_JOB (through the kubelet model), deletions of running
//! pods KILL_JOB, group objects and Kueue workloads are followed.

use std::sync::Arc;
use std::time::Instant;

use fakeapi::{Change, EventType};
use serde_json::Value;

use super::batsim_events::{running_status, terminal_status};
use super::record::EndReason;
use super::{Broker, Phase, Timer, SIM_EPOCH_SECS};
use crate::translate;
use batsim::protocol::{build, EventData};
use batsim::IntervalSet;

impl Broker {
    /// Applies every change already queued; returns the number of decisions.
    pub(super) fn drain_changes(&mut self, out: &mut Vec<EventData>) -> anyhow::Result<usize> {
        let mut decided = 0;
        let mut any = false;
        while let Ok(ch) = self.changes.try_recv() {
            let rv = ch.resource_version;
            decided += self.on_change(ch, out)?;
            self.processed
                .store(rv, std::sync::atomic::Ordering::Release);
            any = true;
        }
        decided += self.take_answers(out);
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
    pub(super) fn on_change(
        &mut self,
        ch: Change,
        out: &mut Vec<EventData>,
    ) -> anyhow::Result<usize> {
        if ch.origin.is_client() {
            self.timeline.http_change(self.clock.now(), &ch);
        }
        if matches!(
            (ch.resource.group, ch.resource.plural),
            ("scheduling.volcano.sh", "queues") | ("kueue.x-k8s.io", "clusterqueues")
        ) {
            self.queues.touched(&ch.name);
        }
        if !self.secret_mounts.is_empty() && ch.resource.plural == "secrets" {
            self.secret_changed(&ch);
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
        if self.cfg.submit_as != translate::SubmitAs::Pod && ch.origin.is_client() {
            self.workload_changed(&ch);
        }
        if !ch.origin.is_client() || ch.resource.plural != "pods" {
            return Ok(0);
        }
        let i = match self.job_by_pod.get(&ch.name) {
            Some(&i) => i,
            // A pod a controller made for a job submitted as a workload
            // object (`--submit-as`).
            None if ch.kind == EventType::Added => match self.adopt_pod(&ch, out) {
                Some(i) => i,
                None => return Ok(0),
            },
            None => return Ok(0),
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
                // A scheduler that gives up on a pending pod writes it
                // Failed (YuniKorn, for an application no queue takes, or
                // a gang whose placeholders timed out under its Hard
                // style): the job is rejected with the scheduler's reason.
                let failed = |o: &Value| o["status"]["phase"] == "Failed";
                if self.jobs[i].phase == Phase::Pending
                    && failed(&ch.object)
                    && !ch.old.as_deref().is_some_and(failed)
                {
                    let st = &ch.object["status"];
                    let why = format!(
                        "{}: {}",
                        st["reason"].as_str().unwrap_or("Failed"),
                        st["message"].as_str().unwrap_or("").trim()
                    );
                    let job_id = self.jobs[i].record.job_id.clone();
                    tracing::warn!(job = %job_id, %why, "job rejected: the scheduler failed its pod");
                    out.push(build::reject_job(&job_id));
                    self.set_phase(i, Phase::Done);
                    self.jobs[i].record.outcome =
                        format!("REJECTED: failed by the scheduler: {why}");
                    if let Err(e) = self
                        .store
                        .delete("pods", Some(translate::NAMESPACE), &ch.name)
                    {
                        tracing::debug!(pod = %ch.name, error = %e, "failed pod not deleted");
                    }
                    if self.jobs[i].gang.is_some() {
                        self.end_gang_with(i, "was failed by the scheduler");
                    }
                    self.last_decision_at = now;
                    self.last_decision_wall = Instant::now();
                    return Ok(1);
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
    pub(super) fn pod_deleted(&mut self, i: usize, now: f64, out: &mut Vec<EventData>) {
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
    pub(super) fn kueue_workload_reason(&mut self, wl: &Value) {
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

    pub(super) fn bind(
        &mut self,
        i: usize,
        node_name: &str,
        out: &mut Vec<EventData>,
    ) -> anyhow::Result<()> {
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
        // A pod that takes its node whole where nodes differ asked for the
        // smallest node's share (translate::WholeNode): it uses all of
        // this one's.
        if self.jobs[i].whole_node {
            let requests = &mut self.jobs[i].record.requests;
            for k in ["cpu", "memory"] {
                if let Some(&v) = self.nodes[node].allocatable.get(k) {
                    requests.insert(k.into(), v);
                }
            }
        }
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
    pub(super) fn missing_queue(
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
    pub(super) fn create_group(
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

    pub(super) fn cancel_start(&mut self, i: usize) {
        self.timers
            .retain(|_, t| !matches!(t, Timer::Start { job } if *job == i));
    }

    /// The container starts: EXECUTE_JOB, and the pod shows Running; a
    /// gang's pods all start together, once all are bound.
    pub(super) fn start_job(&mut self, i: usize, out: &mut Vec<EventData>) -> anyhow::Result<()> {
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
        self.executor_started(i, now);
        let rid = self.nodes[node].resource_id;
        out.push(build::execute_job(
            &self.jobs[i].record.job_id,
            IntervalSet::single(rid),
        ));
        let status = running_status(now, &self.jobs[i].image);
        self.write_status(i, status, "running");
        Ok(())
    }
}
