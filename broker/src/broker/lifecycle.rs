//! Cluster dynamics on simulated time: what Kubernetes' controllers do when
//! machines fail and users operate the cluster.
//!
//! - **Node lifecycle** (kube-controller-manager's node lifecycle controller
//!   and taint eviction): Batsim's NOTIFY `event_machine_unavailable` stops
//!   the node's kubelet. After `--node-monitor-grace-period` (upstream 50 s
//!   since Kubernetes 1.32) the node's `Ready` condition turns `Unknown` and
//!   it gets the `node.kubernetes.io/unreachable` taints (NoSchedule and
//!   NoExecute, as TaintNodesByCondition and the taint manager set them).
//!   Each pod bound there is evicted (deleted) when its toleration of the
//!   NoExecute taint runs out: at once without one, after
//!   `tolerationSeconds` (the DefaultTolerationSeconds admission plugin
//!   gives every pod 300 s, `--default-unreachable-toleration-seconds`),
//!   never with an unbounded one. An evicted running job gets KILL_JOB.
//!   `event_machine_available` clears the taints and the condition, and
//!   cancels evictions not yet done. Batsim refuses EXECUTE_JOB on an
//!   unavailable machine: a pod bound there (before the taint) waits, as
//!   with a dead kubelet, and starts when the machine is back.
//! - **Resubmission** (`--resubmit-evicted`, as a Job controller would): an
//!   evicted job is registered again (Batsim dynamic jobs: REGISTER_JOB,
//!   same profile, so the **full** duration: a pod restarts its work from
//!   the beginning), as `<id>-r<n>`; the lost work is the evicted
//!   attempt's run time. NOTIFY `registration_finished` goes out when no
//!   job can be evicted any more.
//! - **Scenarios** (`--scenario`, see [`crate::scenario`]): each operation
//!   is a timer at its instant (so Batsim is asked to wake the broker then),
//!   applied through the API as a user would.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{Pod, Toleration};
use serde_json::{json, Value};

use super::{Broker, Phase, Timer};
use crate::batsim::protocol::{build, notify, EventData, Notify};
use crate::scenario::{self, Action, Op};
use crate::translate;
use batsim::standin::events::{MACHINE_AVAILABLE, MACHINE_UNAVAILABLE};

pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";
/// The finalizer that keeps a pod terminating for its grace period.
const TERMINATING_FINALIZER: &str = "batkube.io/terminating";

/// Delays and switches, with the upstream defaults.
#[derive(Debug, Clone)]
pub struct LifecycleConfig {
    /// `--node-monitor-grace-period` (seconds).
    pub node_monitor_grace: f64,
    /// `--default-unreachable-toleration-seconds` and the not-ready one.
    pub default_toleration_seconds: i64,
    pub resubmit_evicted: bool,
    pub scenario: Vec<Op>,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        Self {
            node_monitor_grace: 50.0,
            default_toleration_seconds: 300,
            resubmit_evicted: false,
            scenario: Vec::new(),
        }
    }
}

/// Lifecycle timers (in the broker's timer queue).
#[derive(Debug, Clone)]
pub enum LifeTimer {
    /// The grace period of an unavailable node ran out.
    NodeUnreachable { node: usize, generation: u64 },
    /// A pod's toleration of the unreachable taint ran out.
    TaintEviction {
        job: usize,
        node: usize,
        generation: u64,
    },
    /// A terminating pod's grace period ran out.
    GraceOver { job: usize, why: String },
    /// The scenario's operation number.
    Scenario(usize),
}

impl LifeTimer {
    /// The job it acts on.
    pub(super) fn job(&self) -> Option<usize> {
        match self {
            LifeTimer::TaintEviction { job, .. } | LifeTimer::GraceOver { job, .. } => Some(*job),
            LifeTimer::NodeUnreachable { .. } | LifeTimer::Scenario(_) => None,
        }
    }
}

#[derive(Debug, Default, Clone)]
struct NodeLife {
    unavailable: bool,
    /// Bumped on every availability change: stale timers are ignored.
    generation: u64,
    tainted: bool,
}

/// The lifecycle's state.
#[derive(Debug, Default)]
pub struct Lifecycle {
    pub cfg: LifecycleConfig,
    nodes: HashMap<usize, NodeLife>,
    /// Submitted jobs (for resubmission).
    job_json: HashMap<usize, Value>,
    /// Resubmissions per original job id.
    attempts: HashMap<String, u32>,
    /// Registered, not yet submitted back by Batsim.
    pub(super) awaiting: BTreeSet<String>,
    /// Batsim takes dynamic jobs (SIMULATION_BEGINS).
    pub(super) dynamic_jobs: bool,
    registration_finished: bool,
    /// Node objects of platform hosts removed by the scenario.
    removed: BTreeMap<String, Value>,
    /// Nodes added by the scenario that Batsim does not know.
    kubernetes_only: BTreeSet<String>,
    /// Jobs being terminated (grace period running).
    terminating: BTreeSet<usize>,
    /// A machine came back in this instant: held pods may start.
    became_available: bool,
    pub evictions: u64,
    pub lost_work: f64,
    pub resubmissions: u64,
}

impl Lifecycle {
    pub fn new(cfg: LifecycleConfig) -> Self {
        Self {
            cfg,
            ..Default::default()
        }
    }
}

/// The DefaultTolerationSeconds admission plugin: every pod tolerates the
/// not-ready and unreachable NoExecute taints for `secs` unless it says
/// otherwise.
pub fn admit(pod: &mut Pod, secs: i64) {
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    let tols = spec.tolerations.get_or_insert_with(Vec::new);
    for key in [NOT_READY_TAINT, UNREACHABLE_TAINT] {
        let has = tols.iter().any(|t| {
            (t.key.as_deref() == Some(key) || t.key.is_none())
                && matches!(t.effect.as_deref(), Some("NoExecute") | None)
        });
        if !has {
            tols.push(Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some("NoExecute".into()),
                toleration_seconds: Some(secs),
                ..Default::default()
            });
        }
    }
}

/// How long a pod tolerates the unreachable NoExecute taint: `None` for
/// ever, `Some(0)` not at all.
pub fn toleration_of_unreachable(pod: &Value) -> Option<f64> {
    // The longest matching toleration wins, an unbounded one above all.
    let mut longest = 0.0f64;
    for t in pod["spec"]["tolerations"].as_array().into_iter().flatten() {
        let key = t["key"].as_str().unwrap_or("");
        let op = t["operator"].as_str().unwrap_or("Equal");
        let effect = t["effect"].as_str().unwrap_or("");
        let key_ok = (key.is_empty() && op == "Exists") || key == UNREACHABLE_TAINT;
        let value_ok = op == "Exists" || t["value"].as_str().unwrap_or("").is_empty();
        if !(key_ok && value_ok && (effect.is_empty() || effect == "NoExecute")) {
            continue;
        }
        match t["tolerationSeconds"].as_f64() {
            None => return None,
            Some(s) => longest = longest.max(s),
        }
    }
    Some(longest)
}

impl Broker {
    /// The scenario's operations become timers at their instants.
    pub(super) fn schedule_scenario(&mut self) {
        for k in 0..self.life.cfg.scenario.len() {
            let at = self.life.cfg.scenario[k].at;
            self.add_timer(at, Timer::Life(LifeTimer::Scenario(k)));
        }
    }

    /// SIMULATION_BEGINS: whether Batsim takes dynamic jobs.
    pub(super) fn life_begins(&mut self, config: &serde_json::Map<String, Value>) {
        self.life.dynamic_jobs = config
            .get("dynamic-jobs-enabled")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if self.life.cfg.resubmit_evicted && !self.life.dynamic_jobs {
            tracing::warn!(
                "--resubmit-evicted needs Batsim's dynamic jobs (--enable-dynamic-jobs \
                 --acknowledge-dynamic-jobs): evicted jobs will not be resubmitted"
            );
        }
    }

    /// A job the broker lets go of (retired): what the lifecycle kept for it.
    pub(super) fn life_forget(&mut self, i: usize) {
        self.life.job_json.remove(&i);
        self.life.terminating.remove(&i);
    }

    /// A pod about to be created for a job: admission, and what
    /// resubmission needs.
    pub(super) fn life_admit(
        &mut self,
        idx: usize,
        pod: &mut Pod,
        job: &crate::batsim::protocol::Job,
    ) {
        admit(pod, self.life.cfg.default_toleration_seconds);
        self.life.awaiting.remove(&job.id);
        if self.life.cfg.resubmit_evicted {
            if let Ok(v) = serde_json::to_value(job) {
                self.life.job_json.insert(idx, v);
            }
        }
    }

    /// NOTIFY events of Batsim's that the lifecycle handles.
    pub(super) fn life_notify(&mut self, n: &Notify) -> anyhow::Result<()> {
        let down = match n.kind.as_str() {
            MACHINE_UNAVAILABLE => true,
            MACHINE_AVAILABLE => false,
            _ => return Ok(()),
        };
        let Some(res) = n.extra.get("resources").and_then(Value::as_str) else {
            return self.fail(format!("NOTIFY {} without resources", n.kind));
        };
        let set = crate::batsim::IntervalSet::parse(res)
            .map_err(|e| anyhow::anyhow!("NOTIFY {}: resources {res:?}: {e}", n.kind))?;
        let now = self.clock.now();
        for rid in set.iter() {
            let Some(node) = self.nodes.iter().position(|n| n.resource_id == rid) else {
                tracing::warn!(
                    resource = rid,
                    "availability event for a machine that is not a node"
                );
                continue;
            };
            let name = self.nodes[node].name.clone();
            let st = self.life.nodes.entry(node).or_default();
            st.unavailable = down;
            st.generation += 1;
            let generation = st.generation;
            let verb = if down {
                "machine-unavailable"
            } else {
                "machine-available"
            };
            self.timeline.push(
                now,
                "batsim",
                verb,
                "Node",
                "",
                name.to_string(),
                format!("resource={rid}"),
            );
            if down {
                let grace = self.life.cfg.node_monitor_grace;
                self.add_timer(
                    now + grace,
                    Timer::Life(LifeTimer::NodeUnreachable { node, generation }),
                );
            } else {
                self.life.became_available = true;
                if self.life.nodes[&node].tainted {
                    self.life.nodes.get_mut(&node).expect("present").tainted = false;
                    self.set_unreachable(node, false);
                }
            }
        }
        Ok(())
    }

    /// Pods bound to machines back in service start (their kubelet is back).
    pub(super) fn life_start_held(&mut self, out: &mut Vec<EventData>) -> anyhow::Result<()> {
        if !std::mem::take(&mut self.life.became_available) {
            return Ok(());
        }
        let held: Vec<usize> = self
            .jobs
            .iter()
            .filter(|(i, j)| match j.phase {
                Phase::Bound { node } => {
                    !self.node_unavailable(node)
                        && !self
                            .timers
                            .values()
                            .any(|t| matches!(t, Timer::Start { job } if job == i))
                }
                _ => false,
            })
            .map(|(i, _)| i)
            .collect();
        for i in held {
            self.start_job(i, out)?;
        }
        Ok(())
    }

    pub(super) fn node_unavailable(&self, node: usize) -> bool {
        self.life.nodes.get(&node).is_some_and(|s| s.unavailable)
    }

    /// A pod was just bound: on a node already tainted, its toleration
    /// starts running.
    pub(super) fn life_bound(&mut self, i: usize, node: usize) {
        if self.life.nodes.get(&node).is_some_and(|s| s.tainted) {
            self.schedule_taint_eviction(i, node);
        }
    }

    pub(super) fn fire_life(
        &mut self,
        t: LifeTimer,
        out: &mut Vec<EventData>,
    ) -> anyhow::Result<()> {
        match t {
            LifeTimer::NodeUnreachable { node, generation } => {
                let Some(st) = self.life.nodes.get_mut(&node) else {
                    return Ok(());
                };
                if st.generation != generation || !st.unavailable {
                    return Ok(());
                }
                st.tainted = true;
                self.set_unreachable(node, true);
                let on: Vec<usize> = self.jobs_on(node);
                for i in on {
                    self.schedule_taint_eviction(i, node);
                }
                // Evictions due now happen now.
                Ok(())
            }
            LifeTimer::TaintEviction {
                job,
                node,
                generation,
            } => {
                let current = self
                    .life
                    .nodes
                    .get(&node)
                    .is_some_and(|s| s.generation == generation && s.tainted);
                if current && self.job_node(job) == Some(node) {
                    self.evict(
                        job,
                        "broker",
                        &format!(
                            "node {} unreachable (taint eviction)",
                            self.nodes[node].name
                        ),
                        out,
                    )?;
                }
                Ok(())
            }
            LifeTimer::GraceOver { job, why } => {
                self.life.terminating.remove(&job);
                self.evict(job, "kubelet", &why, out)
            }
            LifeTimer::Scenario(k) => self.run_op(k, out),
        }
    }

    fn jobs_on(&self, node: usize) -> Vec<usize> {
        self.jobs
            .keys()
            .filter(|&i| self.job_node(i) == Some(node))
            .collect()
    }

    /// The node of a bound or running job.
    fn job_node(&self, i: usize) -> Option<usize> {
        match self.jobs[i].phase {
            Phase::Bound { node } | Phase::Running { node } => Some(node),
            _ => None,
        }
    }

    fn schedule_taint_eviction(&mut self, i: usize, node: usize) {
        let pod = self
            .store
            .get("pods", Some(translate::NAMESPACE), &self.jobs[i].record.pod)
            .unwrap_or(Value::Null);
        let Some(secs) = toleration_of_unreachable(&pod) else {
            return;
        };
        let generation = self.life.nodes.get(&node).map_or(0, |s| s.generation);
        let at = self.clock.now() + secs;
        self.add_timer(
            at,
            Timer::Life(LifeTimer::TaintEviction {
                job: i,
                node,
                generation,
            }),
        );
    }

    /// Ready=Unknown and the unreachable taints, or back to Ready.
    fn set_unreachable(&mut self, node: usize, down: bool) {
        let now = self.clock.now();
        let name = self.nodes[node].name.clone();
        let stamp = super::to_datetime(now).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let res = self.edit_node(&name, |n| {
            let taints = n["spec"]["taints"].as_array().cloned().unwrap_or_default();
            let mut taints: Vec<Value> = taints
                .into_iter()
                .filter(|t| t["key"] != UNREACHABLE_TAINT)
                .collect();
            if down {
                for effect in ["NoSchedule", "NoExecute"] {
                    let mut t = json!({"key": UNREACHABLE_TAINT, "effect": effect});
                    if effect == "NoExecute" {
                        t["timeAdded"] = json!(stamp);
                    }
                    taints.push(t);
                }
            }
            if taints.is_empty() {
                if let Some(spec) = n["spec"].as_object_mut() {
                    spec.remove("taints");
                }
            } else {
                n["spec"]["taints"] = Value::Array(taints);
            }
            let cond = if down {
                json!({"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                       "message": "Kubelet stopped posting node status.",
                       "lastTransitionTime": stamp, "lastHeartbeatTime": stamp})
            } else {
                json!({"type": "Ready", "status": "True", "reason": "KubeletReady",
                       "message": "simulated by batkube",
                       "lastTransitionTime": stamp, "lastHeartbeatTime": stamp})
            };
            let conds = n["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let mut conds: Vec<Value> =
                conds.into_iter().filter(|c| c["type"] != "Ready").collect();
            conds.push(cond);
            n["status"]["conditions"] = Value::Array(conds);
        });
        let (verb, detail) = if down {
            (
                "taint",
                format!("{UNREACHABLE_TAINT}:NoSchedule,NoExecute; Ready=Unknown"),
            )
        } else {
            ("untaint", format!("{UNREACHABLE_TAINT}; Ready=True"))
        };
        match res {
            Ok(()) => self
                .timeline
                .push(now, "broker", verb, "Node", "", name.to_string(), detail),
            Err(e) => tracing::warn!(node = %name, error = %e, "node not updated"),
        }
    }

    /// Reads, changes and writes back a node.
    fn edit_node(&self, name: &str, f: impl FnOnce(&mut Value)) -> anyhow::Result<()> {
        let mut n = self
            .store
            .get("nodes", None, name)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        f(&mut n);
        self.store
            .update("nodes", None, n)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(())
    }

    /// Ends a job's pod now: KILL_JOB if it runs, REJECT_JOB if it never
    /// started; the pod leaves the API; resubmitted if asked.
    pub(super) fn evict(
        &mut self,
        i: usize,
        source: &'static str,
        why: &str,
        out: &mut Vec<EventData>,
    ) -> anyhow::Result<()> {
        let now = self.clock.now();
        let job_id = self.jobs[i].record.job_id.clone();
        let mut resubmit = false;
        match self.jobs[i].phase.clone() {
            Phase::Pending => {
                out.push(build::reject_job(&job_id));
                self.jobs[i].record.outcome = format!("REJECTED: {why}");
            }
            Phase::Bound { node } => {
                self.cancel_start(i);
                out.push(build::reject_job(&job_id));
                if let Some(b) = self.jobs[i]
                    .record
                    .bound
                    .filter(|_| self.jobs[i].gang.is_some())
                {
                    self.partial_gang_node_seconds += now - b;
                }
                self.jobs[i].record.finished = Some(now);
                self.jobs[i].record.outcome = format!("EVICTED before it started: {why}");
                self.release(i, node);
                resubmit = true;
            }
            Phase::Running { node } => {
                out.push(build::kill_jobs([job_id.as_str()]));
                self.jobs[i].record.finished = Some(now);
                self.jobs[i].record.outcome = format!("EVICTED: {why}");
                self.life.lost_work += now - self.jobs[i].record.started.unwrap_or(now);
                self.release(i, node);
                resubmit = true;
            }
            Phase::Completing { node } => {
                self.jobs[i].record.finished = Some(now);
                self.release(i, node);
            }
            Phase::Done => {}
        }
        let was_live = !matches!(self.jobs[i].phase, Phase::Done);
        let ends_gang = was_live && !matches!(self.jobs[i].phase, Phase::Completing { .. });
        self.set_phase(i, Phase::Done);
        if ends_gang && self.jobs[i].gang.is_some() {
            self.end_gang_with(i, &format!("was evicted ({why})"));
        }
        if resubmit {
            self.life.evictions += 1;
        }
        let pod = self.jobs[i].record.pod.clone();
        if self.terminate_pod(&pod) && was_live {
            self.timeline.push(
                now,
                source,
                "delete",
                "Pod",
                translate::NAMESPACE,
                pod,
                why.to_string(),
            );
        }
        if resubmit && self.life.cfg.resubmit_evicted && self.life.dynamic_jobs {
            self.resubmit(i, out);
        }
        Ok(())
    }

    /// Removes a pod from the API (finishing a graceful deletion).
    fn terminate_pod(&self, pod: &str) -> bool {
        let ns = Some(translate::NAMESPACE);
        let Ok(v) = self.store.get("pods", ns, pod) else {
            return false;
        };
        if v["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
        {
            let _ = self.store.patch(
                "pods",
                ns,
                pod,
                fakeapi::PatchKind::Merge,
                br#"{"metadata":{"finalizers":null}}"#,
            );
        }
        match self.store.delete("pods", ns, pod) {
            Ok(_) => true,
            // Removing the finalizer may have finished the deletion.
            Err(_) => self.store.get("pods", ns, pod).is_err(),
        }
    }

    /// A user's deletion with a grace period: the pod is marked (its
    /// deletionTimestamp set, it still holds its node) and its job ends
    /// when the grace period runs out.
    fn delete_gracefully(
        &mut self,
        i: usize,
        grace: i64,
        source: &'static str,
        why: &str,
        out: &mut Vec<EventData>,
    ) -> anyhow::Result<()> {
        let running = matches!(
            self.jobs[i].phase,
            Phase::Running { .. } | Phase::Bound { .. }
        );
        if grace <= 0 || !running {
            return self.evict(i, source, why, out);
        }
        if !self.life.terminating.insert(i) {
            return Ok(());
        }
        let now = self.clock.now();
        let pod = self.jobs[i].record.pod.clone();
        let ns = Some(translate::NAMESPACE);
        let marked = self
            .store
            .patch(
                "pods",
                ns,
                &pod,
                fakeapi::PatchKind::Merge,
                format!(
                    r#"{{"metadata":{{"finalizers":["{TERMINATING_FINALIZER}"]}},"spec":{{"terminationGracePeriodSeconds":{grace}}}}}"#
                )
                .as_bytes(),
            )
            .and_then(|_| self.store.delete("pods", ns, &pod));
        if let Err(e) = marked {
            tracing::warn!(%pod, error = %e, "pod not marked for deletion");
        }
        self.timeline.push(
            now,
            source,
            "evict",
            "Pod",
            translate::NAMESPACE,
            pod,
            format!("{why}; grace period {grace} s"),
        );
        self.add_timer(
            now + grace as f64,
            Timer::Life(LifeTimer::GraceOver {
                job: i,
                why: why.to_string(),
            }),
        );
        Ok(())
    }

    /// REGISTER_JOB for an evicted job: same profile (full duration).
    fn resubmit(&mut self, i: usize, out: &mut Vec<EventData>) {
        let Some(mut job) = self.life.job_json.get(&i).cloned() else {
            return;
        };
        let old = self.jobs[i].record.job_id.clone();
        let new_id = self.next_attempt_id(&old);
        if let Some(m) = job.as_object_mut() {
            m.insert("id".into(), json!(new_id));
            m.remove("subtime");
        }
        self.life.awaiting.insert(new_id.clone());
        self.life.resubmissions += 1;
        out.push(build::register_job(&new_id, job));
    }

    /// The id of job `old`'s next attempt: `<id>-r<n>`, n counted per
    /// original job (`w0!7-r2` -> `w0!7-r3`).
    pub(super) fn next_attempt_id(&mut self, old: &str) -> String {
        let base = match old.rsplit_once("-r") {
            Some((b, n)) if n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty() => b.to_string(),
            _ => old.to_string(),
        };
        let mut n = *self.life.attempts.get(&base).unwrap_or(&0);
        let new_id = loop {
            n += 1;
            let id = format!("{base}-r{n}");
            if !self.job_by_id.contains_key(&id) && !self.life.awaiting.contains(&id) {
                break id;
            }
        };
        self.life.attempts.insert(base, n);
        new_id
    }

    /// NOTIFY registration_finished once no job can be evicted any more.
    pub(super) fn life_finish_registration(&mut self, out: &mut Vec<EventData>) {
        if !self.life.dynamic_jobs
            || self.life.registration_finished
            || !self.no_more_static
            || !self.life.awaiting.is_empty()
            || out.iter().any(|e| matches!(e, EventData::RegisterJob(_)))
            || self.jobs.iter().any(|(_, j)| j.phase != Phase::Done)
        {
            return;
        }
        // A workload object may still make pods for another attempt.
        if self.workloads_hold_registration(self.clock.now()) {
            return;
        }
        self.life.registration_finished = true;
        out.push(build::notify(notify::REGISTRATION_FINISHED));
    }

    pub(super) fn life_summary(&self, s: &mut super::record::Summary) {
        s.evictions = self.life.evictions;
        s.lost_work_seconds = self.life.lost_work;
        s.resubmissions = self.life.resubmissions;
    }

    /// Why a binding to `node_name` is refused.
    pub(super) fn not_a_node_why(&self, node_name: &str) -> &'static str {
        if self.life.kubernetes_only.contains(node_name) {
            "a Kubernetes-only node added by the scenario: Batsim has no machine for it, so \
             jobs cannot run there (it carries the batkube.io/kubernetes-only NoSchedule taint \
             for this reason)"
        } else if self.life.removed.contains_key(node_name) {
            "a node the scenario removed"
        } else {
            "not a node of the platform"
        }
    }

    /// One scenario operation, through the API.
    fn run_op(&mut self, k: usize, out: &mut Vec<EventData>) -> anyhow::Result<()> {
        let op = self.life.cfg.scenario[k].clone();
        let now = self.clock.now();
        let (verb, kind, ns, name) = op.describe();
        let result = self.apply_op(&op, out);
        let detail = match &result {
            Ok(d) => d.clone(),
            Err(e) => {
                tracing::warn!(line = op.line, error = %e, "scenario operation failed");
                format!("failed: {e}")
            }
        };
        self.timeline.push(
            now,
            "scenario",
            verb,
            kind,
            ns,
            name,
            format!(
                "line {}{}{}",
                op.line,
                if detail.is_empty() { "" } else { ": " },
                detail
            ),
        );
        Ok(())
    }

    fn apply_op(&mut self, op: &Op, out: &mut Vec<EventData>) -> anyhow::Result<String> {
        let err = |e: fakeapi::ApiError| anyhow::anyhow!("{e}");
        match &op.action {
            Action::Create {
                resource,
                namespace,
                object,
            } => {
                self.store
                    .create(resource, namespace.as_deref(), object.clone())
                    .map_err(err)?;
                Ok(String::new())
            }
            Action::Patch {
                resource,
                namespace,
                name,
                kind,
                body,
            } => {
                self.store
                    .patch(
                        resource,
                        namespace.as_deref(),
                        name,
                        kind.kind(),
                        body.to_string().as_bytes(),
                    )
                    .map_err(err)?;
                Ok(String::new())
            }
            Action::Delete {
                resource,
                namespace,
                name,
                grace,
            } => {
                let job = (resource == "pods"
                    && namespace.as_deref() == Some(translate::NAMESPACE))
                .then(|| self.job_by_pod.get(name).copied())
                .flatten();
                match job {
                    Some(i) => {
                        if self.jobs[i].phase == Phase::Done {
                            self.store
                                .delete(resource, namespace.as_deref(), name)
                                .map_err(err)?;
                            return Ok("the job had ended".into());
                        }
                        let grace = grace.unwrap_or_else(|| self.grace_of(name));
                        self.delete_gracefully(
                            i,
                            grace,
                            "scenario",
                            "deleted by the scenario",
                            out,
                        )?;
                        Ok(format!("grace period {grace} s"))
                    }
                    None => {
                        self.store
                            .delete(resource, namespace.as_deref(), name)
                            .map_err(err)?;
                        Ok(String::new())
                    }
                }
            }
            Action::Cordon(node) => {
                self.cordon(node, true)?;
                Ok(String::new())
            }
            Action::Uncordon(node) => {
                self.cordon(node, false)?;
                Ok(String::new())
            }
            Action::Drain { node, grace } => {
                self.cordon(node, true)?;
                let Some(&idx) = self.node_by_name.get(node) else {
                    return Ok("no Batsim pods there".into());
                };
                let on = self.jobs_on(idx);
                for &i in &on {
                    let pod = self.jobs[i].record.pod.clone();
                    let g = grace.unwrap_or_else(|| self.grace_of(&pod));
                    self.delete_gracefully(i, g, "scenario", &format!("drain of {node}"), out)?;
                }
                Ok(format!("{} pod(s) evicted", on.len()))
            }
            Action::AddNode { name, object } => {
                let (object, known) = match self.life.removed.remove(name) {
                    Some(original) => (original, true),
                    None => {
                        let mut o = object.clone();
                        o["spec"]["taints"] = json!([{"key": scenario::KUBERNETES_ONLY_TAINT,
                                                      "effect": "NoSchedule"}]);
                        (o, false)
                    }
                };
                self.store.create("nodes", None, object).map_err(err)?;
                if known {
                    if let Some(idx) = self.nodes.iter().position(|n| *n.name == **name) {
                        self.node_by_name.insert(name.clone(), idx);
                    }
                    Ok("a platform node back".into())
                } else {
                    self.life.kubernetes_only.insert(name.clone());
                    Ok("Kubernetes-only (no Batsim machine)".into())
                }
            }
            Action::RemoveNode(name) => {
                if let Some(idx) = self.node_by_name.remove(name) {
                    for i in self.jobs_on(idx) {
                        self.evict(i, "broker", &format!("node {name} deleted"), out)?;
                    }
                    let mut n = self.store.get("nodes", None, name).map_err(err)?;
                    if let Some(m) = n["metadata"].as_object_mut() {
                        for k in ["resourceVersion", "uid", "creationTimestamp"] {
                            m.remove(k);
                        }
                    }
                    self.life.removed.insert(name.clone(), n);
                }
                self.life.kubernetes_only.remove(name);
                self.store.delete("nodes", None, name).map_err(err)?;
                Ok(String::new())
            }
        }
    }

    fn grace_of(&self, pod: &str) -> i64 {
        self.store
            .get("pods", Some(translate::NAMESPACE), pod)
            .ok()
            .and_then(|p| p["spec"]["terminationGracePeriodSeconds"].as_i64())
            .unwrap_or(30)
    }

    /// `kubectl cordon` (and the unschedulable taint the node lifecycle
    /// controller adds for it).
    fn cordon(&mut self, node: &str, on: bool) -> anyhow::Result<()> {
        self.edit_node(node, |n| {
            let taints = n["spec"]["taints"].as_array().cloned().unwrap_or_default();
            let mut taints: Vec<Value> = taints
                .into_iter()
                .filter(|t| t["key"] != UNSCHEDULABLE_TAINT)
                .collect();
            if on {
                n["spec"]["unschedulable"] = json!(true);
                taints.push(json!({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}));
            } else if let Some(spec) = n["spec"].as_object_mut() {
                spec.remove("unschedulable");
            }
            if taints.is_empty() {
                if let Some(spec) = n["spec"].as_object_mut() {
                    spec.remove("taints");
                }
            } else {
                n["spec"]["taints"] = Value::Array(taints);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_adds_the_default_tolerations_once() {
        let mut pod = Pod {
            spec: Some(Default::default()),
            ..Default::default()
        };
        admit(&mut pod, 300);
        admit(&mut pod, 300);
        let v = serde_json::to_value(&pod).unwrap();
        assert_eq!(v["spec"]["tolerations"].as_array().unwrap().len(), 2);
        assert_eq!(toleration_of_unreachable(&v), Some(300.0));
    }

    #[test]
    fn tolerations_of_the_unreachable_taint() {
        let pod = |t: Value| json!({"spec": {"tolerations": t}});
        assert_eq!(toleration_of_unreachable(&json!({})), Some(0.0));
        assert_eq!(
            toleration_of_unreachable(&pod(
                json!([{"key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoExecute"}])
            )),
            None
        );
        assert_eq!(
            toleration_of_unreachable(&pod(json!([{"operator": "Exists"}]))),
            None
        );
        assert_eq!(
            toleration_of_unreachable(&pod(json!([
                {"key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10},
                {"key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
                {"key": "other", "operator": "Exists", "effect": "NoExecute"}
            ]))),
            Some(60.0)
        );
        assert_eq!(
            toleration_of_unreachable(&pod(
                json!([{"key": UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"}])
            )),
            Some(0.0)
        );
    }
}
