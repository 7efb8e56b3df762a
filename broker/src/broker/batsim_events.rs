//! Batsim's events as API changes: hosts become Nodes, jobs Pods (or
//! REJECT_JOB), completions and kills a kubelet's status writes, and the
//! nodes' use sampled for nodes.csv.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus, PodCondition,
    PodStatus,
};
use serde_json::Value;

use super::clock::to_time;
use super::record::{NodeSample, PodRecord};
use super::window::key_us;
use super::{Broker, Gang, JobRt, NodeRt, Phase, Timer, SIM_EPOCH_SECS};
use crate::translate::{self, Amounts};
use batsim::protocol::{build, EventData, JobState};

impl Broker {
    pub(super) fn apply(&mut self, ev: EventData, out: &mut Vec<EventData>) -> anyhow::Result<()> {
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
                if self.cfg.no_requests == translate::NoRequests::WholeNode {
                    self.whole_node =
                        translate::WholeNode::of(self.nodes.iter().map(|n| &n.allocatable));
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
                // A delay job's executor reports exactly its delay after it
                // starts (its walltime, if shorter, kills it then): the
                // broker knows when its message leaves.
                if let Some(d) = profile
                    .as_ref()
                    .filter(|p| p["type"] == "delay")
                    .and_then(|p| p["delay"].as_f64())
                {
                    let end = match s.job.walltime {
                        Some(w) if w > 0.0 => d.min(w),
                        _ => d,
                    };
                    self.batsim_delays.insert(s.job_id.clone(), end);
                }
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
                    translate::pods_from_job_on(
                        &s.job_id,
                        &s.job,
                        profile.as_ref(),
                        to_time(now),
                        self.cfg.submit_as.pod_style(self.cfg.gang),
                        self.cfg.default_queue.as_deref(),
                        self.whole_node.as_ref(),
                    )
                };
                let whole_node = self.whole_node.is_some()
                    && translate::asks_for_no_cpu_or_memory(&s.job, profile.as_ref());
                let submit = self.cfg.submit_as;
                match pods {
                    Ok(pods) => {
                        let n = pods.len();
                        if whole_node {
                            self.jobs_whole_node += 1;
                        }
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
                            if submit.pod_style(self.cfg.gang) == self.cfg.gang {
                                self.create_group(g, n as u32, &s.job, profile.as_ref())?;
                                if self.cfg.gang.group_resource().is_some() {
                                    self.group_objects.insert(first, g.clone());
                                }
                            }
                        }
                        // Under --submit-as job|vcjob: the pods' template
                        // (the first pod as the broker would write it), and
                        // the entries that wait for the controller's pods.
                        let mut template = None;
                        let mut entries = Vec::new();
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
                            if submit != translate::SubmitAs::Pod {
                                if template.is_none() {
                                    template = Some(pod);
                                }
                                // No pod yet: the controller makes it.
                                let whole = whole_node
                                    && self.whole_node.as_ref().is_some_and(|w| w.nodes_differ);
                                entries.push(self.push_job(JobRt::new(
                                    record, image, scheduler, gang, whole, true,
                                )));
                                continue;
                            }
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
                            let whole = whole_node
                                && self.whole_node.as_ref().is_some_and(|w| w.nodes_differ);
                            let idx = self
                                .push_job(JobRt::new(record, image, scheduler, gang, whole, false));
                            self.job_by_pod.insert(pod_name, idx);
                        }
                        self.job_by_id.insert(s.job_id.clone(), first);
                        // A later attempt of a workload object: its
                        // controller made the pods already.
                        let template = match template {
                            Some(_) if self.attach_attempt(&s.job_id, &entries, out)? => None,
                            t => t,
                        };
                        if let Some(pod) = template {
                            let obj = translate::workload_object(
                                submit,
                                &s.job_id,
                                &s.job,
                                profile.as_ref(),
                                &pod,
                                self.cfg.gang,
                                self.cfg.default_queue.as_deref(),
                            );
                            match obj {
                                Ok(obj) => {
                                    let job = serde_json::to_value(&s.job).ok();
                                    self.submit_workload(&s.job_id, obj, entries, job)
                                }
                                Err(why) => {
                                    tracing::warn!(job = %s.job_id, %why, "job rejected");
                                    out.push(build::reject_job(&s.job_id));
                                    for i in entries {
                                        self.set_phase(i, Phase::Done);
                                        self.jobs[i].record.outcome = format!("REJECTED: {why}");
                                    }
                                }
                            }
                        }
                    }
                    Err(why) => {
                        tracing::warn!(job = %s.job_id, %why, "job rejected: it cannot be pods");
                        out.push(build::reject_job(&s.job_id));
                        record.outcome = format!("REJECTED: {why}");
                        let none = self.intern("");
                        let mut rt = JobRt::new(record, none.clone(), none, None, false, true);
                        rt.phase = Phase::Done;
                        let idx = self.push_job(rt);
                        self.job_by_id.insert(s.job_id.clone(), idx);
                        self.retirable.push(idx);
                    }
                }
            }
            EventData::JobCompleted(c) => {
                let Some(&first) = self.job_by_id.get(&c.job_id) else {
                    return self.fail(format!("JOB_COMPLETED for unknown job {:?}", c.job_id));
                };
                if let (Some(d), Some(at)) = (
                    self.batsim_delays.remove(&c.job_id),
                    self.jobs[first].record.started,
                ) {
                    self.ends_due.remove(&(key_us(at + d), first));
                }
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

    /// The kubelet's report: the pod leaves its node in the API.
    pub(super) fn report_finished(&mut self, i: usize, state: &JobState) -> anyhow::Result<()> {
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
    pub(super) fn write_status(&mut self, i: usize, status: PodStatus, what: &str) {
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

    pub(super) fn release(&mut self, i: usize, node: usize) {
        let req = self.jobs[i].record.requests.clone();
        let n = &mut self.nodes[node];
        for (k, v) in req {
            *n.used.entry(k).or_default() -= v;
        }
        n.pods = n.pods.saturating_sub(1);
        self.sample(node);
    }

    pub(super) fn sample(&mut self, node: usize) {
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
}

/// A pod's status once its container runs.
pub(super) fn running_status(now: f64, image: &str) -> PodStatus {
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
pub(super) fn terminal_status(
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

pub(super) fn condition(kind: &str, status: &str, reason: Option<&str>, at: f64) -> PodCondition {
    PodCondition {
        type_: kind.into(),
        status: status.into(),
        reason: reason.map(str::to_string),
        last_transition_time: Some(to_time(at)),
        ..Default::default()
    }
}
