//! Connects the core to an API server with kube-rs: one task owns the
//! [`Scheduler`]; it reads pod and node watch events, runs cycles, and sends
//! bindings, status patches, events and preemption deletions from spawned
//! tasks so that no request ever blocks a decision.
//!
//! Ordering that keeps the cache honest: a decision assumes the pod before
//! its binding is sent; the loop drains every ready watch event before each
//! cycle, and never decides inside an instant of batkube's API (a watch
//! that has read an instant's begin and not its end, or that is behind the
//! others: [`crate::watch::Instants`]); a binding response only ever
//! *forgets* a pod that is still assumed. The loop sleeps until the queue's next deadline (one timer), not
//! on a periodic tick.
//!
//! PodGroups (`podgroups.scheduling.x-k8s.io`) are watched when discovery
//! shows the API serves them; otherwise the scheduler runs without gangs
//! (a pod's group label is ignored) and says so once.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Binding, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::runtime::watcher::Event;
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::mpsc;

use crate::events;
use crate::explain::{self, Attempt};
use crate::gang;
use crate::metrics::{AttemptResult, Metrics};
use crate::model::{node_scheduling_properties_changed, PodInfo, PodKey};
use crate::queue::{ClusterEvent, QueuedPod};
use crate::scheduler::{CycleOutcome, Decision, Scheduler};
use crate::watch::{Instants, Item};

/// What the runner reports to an observer (tests, progress output).
#[derive(Debug, Clone)]
pub enum Notice {
    /// Both watches listed everything; scheduling starts.
    Synced,
    /// A decision: the pod is assumed on `node`, its binding is being sent.
    Assumed {
        pod: PodKey,
        node: String,
    },
    Bound {
        pod: PodKey,
        node: String,
    },
    Unschedulable {
        pod: PodKey,
        message: String,
    },
    BindingFailed {
        pod: PodKey,
        error: String,
    },
    Preempting {
        pod: PodKey,
        node: String,
        victims: Vec<PodKey>,
    },
}

pub struct RunOptions {
    pub metrics: Option<Arc<Metrics>>,
    pub notices: Option<mpsc::UnboundedSender<Notice>>,
}

/// What the runner remembers of a pod's explanations (`--explain`).
#[derive(Debug, Clone)]
struct Explained {
    /// The last attempt number given.
    given: u64,
    /// The last one written on the pod.
    written: u64,
    /// The `result-history` last written.
    history: Option<Arc<str>>,
}

struct BindResult {
    key: PodKey,
    node: String,
    result: Result<(), String>,
}

/// An event to record ([`crate::events`]).
struct EventToWrite {
    pod: Arc<Pod>,
    /// The pod it is related to (a preemption's preemptor).
    related: Option<Arc<Pod>>,
    reason: &'static str,
    action: &'static str,
    type_: &'static str,
    message: String,
    component: String,
}

fn now_time() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// The machine's name, for an event's reporting instance.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Records events one after another, off the scheduling loop, as
/// upstream's event broadcaster does: repeats fold into a series.
fn spawn_event_writer(client: Client) -> mpsc::UnboundedSender<EventToWrite> {
    let (tx, mut rx) = mpsc::unbounded_channel::<EventToWrite>();
    tokio::spawn(async move {
        let mut recorder = events::Recorder::new(&host_name());
        while let Some(e) = rx.recv().await {
            let e = events::NewEvent {
                regarding: events::pod_reference(&e.pod),
                related: e.related.as_deref().map(events::pod_reference),
                type_: e.type_,
                reason: e.reason,
                action: e.action,
                note: e.message,
                controller: e.component,
            };
            for w in recorder.record(e, k8s_openapi::jiff::Timestamp::now()) {
                if let Err(err) = write_event(&client, w).await {
                    tracing::debug!(%err, "writing event failed");
                }
            }
        }
    });
    tx
}

/// One request of the event recorder. The answers (the events back) are
/// read but not parsed: nothing uses them.
async fn write_event(client: &Client, w: events::Write) -> Result<(), kube::Error> {
    let create = |namespace: &str, event: &serde_json::Value| {
        let body = serde_json::to_vec(event).map_err(kube::Error::SerdeError)?;
        kube::core::Request::new(format!(
            "/apis/events.k8s.io/v1/namespaces/{namespace}/events"
        ))
        .create(&PostParams::default(), body)
        .map_err(kube::Error::BuildRequest)
    };
    match w {
        events::Write::Create { namespace, event } => {
            client.request_text(create(&namespace, &event)?).await?;
        }
        events::Write::Patch {
            namespace,
            name,
            patch,
            event,
        } => {
            let req = kube::core::Request::new(format!(
                "/apis/events.k8s.io/v1/namespaces/{namespace}/events"
            ))
            .patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
            .map_err(kube::Error::BuildRequest)?;
            match client.request_text(req).await {
                // Gone (its time to live ran out): created again, as upstream.
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    client.request_text(create(&namespace, &event)?).await?;
                }
                r => {
                    r?;
                }
            }
        }
    }
    Ok(())
}

struct Runner {
    sched: Scheduler,
    client: Client,
    events: mpsc::UnboundedSender<EventToWrite>,
    bind_tx: mpsc::UnboundedSender<BindResult>,
    /// Pods whose binding is in flight, to requeue them if it fails.
    binding: HashMap<PodKey, QueuedPod>,
    metrics: Option<Arc<Metrics>>,
    notices: Option<mpsc::UnboundedSender<Notice>>,
    pods_synced: bool,
    nodes_synced: bool,
    /// True from the start when the API does not serve PodGroups.
    groups_synced: bool,
    pod_relist: Option<HashSet<PodKey>>,
    node_relist: Option<HashSet<String>>,
    group_relist: Option<HashSet<String>>,
    /// A labelled pod was seen while PodGroups are not served (said once).
    warned_unserved_group: bool,
    /// `--explain`: the last attempt number given and the `result-history`
    /// last written on a pod, until the watch shows the pod with them (the
    /// next attempt may come first; the pod's own annotations are read
    /// otherwise), or, for an attempt not written (the same as the last),
    /// until the pod is bound or gone.
    explained: HashMap<PodKey, Explained>,
}

impl Runner {
    fn notify(&self, n: Notice) {
        if let Some(tx) = &self.notices {
            let _ = tx.send(n);
        }
    }

    fn synced(&self) -> bool {
        self.pods_synced && self.nodes_synced && self.groups_synced
    }

    fn on_pod_apply(&mut self, pod: Pod) {
        let info = match PodInfo::new(pod) {
            Ok(i) => i,
            Err(e) => {
                tracing::warn!(error = %e, "ignoring a pod with invalid requests");
                return;
            }
        };
        let key = info.key.clone();
        let now = Instant::now();
        if let Some(e) = self.explained.get(&key) {
            if attempt_of(&info.pod) >= e.given {
                self.explained.remove(&key);
            }
        }
        if info.is_finished() {
            self.pod_gone(&key, now);
            return;
        }
        if info.node_name().is_some() {
            self.sched.queue.delete(&key);
            if self.sched.cache.add_or_update_bound(Arc::new(info)) {
                self.sched.queue.move_all(ClusterEvent::AssignedPodAdd, now);
            }
            return;
        }
        if let (Some(group), false) = (&info.group, self.sched.pod_groups_enabled()) {
            if !self.warned_unserved_group {
                self.warned_unserved_group = true;
                tracing::warn!(
                    pod = %key,
                    %group,
                    "the API does not serve {}.{}/{}: pods of a pod group are scheduled one by one",
                    gang::PLURAL,
                    gang::GROUP,
                    gang::VERSION
                );
            }
        }
        if self.sched.cache.is_assumed(&key) {
            // Our binding is in flight; upstream skips updates of assumed pods.
            return;
        }
        if self.sched.responsible_for(&info) {
            self.sched.queue.add_or_update(info, now);
        } else {
            self.sched.queue.delete(&key);
        }
    }

    fn pod_gone(&mut self, key: &str, now: Instant) {
        self.explained.remove(key);
        self.sched.queue.delete(key);
        self.sched.victim_gone(key);
        self.sched.cache.clear_nomination(key);
        self.binding.remove(key);
        if self.sched.cache.remove_pod(key) {
            self.sched
                .queue
                .move_all(ClusterEvent::AssignedPodDelete, now);
        }
    }

    fn on_pod_event(&mut self, ev: Event<Pod>) {
        if tracing::enabled!(tracing::Level::TRACE) {
            let (kind, key) = match &ev {
                Event::Apply(p) => ("apply", crate::model::pod_key(p)),
                Event::Delete(p) => ("delete", crate::model::pod_key(p)),
                Event::Init => ("init", String::new()),
                Event::InitApply(p) => ("init-apply", crate::model::pod_key(p)),
                Event::InitDone => ("init-done", String::new()),
            };
            tracing::trace!(kind, pod = %key, "pod watch event");
        }
        match ev {
            Event::Apply(p) => self.on_pod_apply(p),
            Event::Delete(p) => {
                let key = crate::model::pod_key(&p);
                self.pod_gone(&key, Instant::now());
            }
            Event::Init => self.pod_relist = Some(HashSet::new()),
            Event::InitApply(p) => {
                if let Some(seen) = self.pod_relist.as_mut() {
                    seen.insert(crate::model::pod_key(&p));
                }
                self.on_pod_apply(p);
            }
            Event::InitDone => {
                if let Some(seen) = self.pod_relist.take() {
                    let mut stale: Vec<PodKey> = self.sched.cache.pod_keys();
                    stale.extend(self.sched.queue.pending().map(|p| p.info.key.clone()));
                    stale.retain(|k| !seen.contains(k));
                    let now = Instant::now();
                    for k in stale {
                        self.pod_gone(&k, now);
                    }
                }
                if !self.pods_synced {
                    self.pods_synced = true;
                    if self.synced() {
                        self.notify(Notice::Synced);
                    }
                }
            }
        }
    }

    fn on_node_apply(&mut self, node: Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let old = self.sched.cache.node(&name).and_then(|n| n.node.clone());
        let changed = old
            .as_ref()
            .map(|o| node_scheduling_properties_changed(o, &node))
            .unwrap_or(true);
        match self.sched.cache.upsert_node(node) {
            Ok(true) => {
                self.sched
                    .queue
                    .move_all(ClusterEvent::NodeAdd, Instant::now());
            }
            Ok(false) if changed => {
                self.sched
                    .queue
                    .move_all(ClusterEvent::NodeUpdate, Instant::now());
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(node = %name, error = %e, "ignoring a node with invalid allocatable")
            }
        }
    }

    fn on_node_event(&mut self, ev: Event<Node>) {
        match ev {
            Event::Apply(n) => self.on_node_apply(n),
            Event::Delete(n) => {
                self.sched
                    .cache
                    .remove_node(n.metadata.name.as_deref().unwrap_or(""));
            }
            Event::Init => self.node_relist = Some(HashSet::new()),
            Event::InitApply(n) => {
                if let Some(seen) = self.node_relist.as_mut() {
                    seen.insert(n.metadata.name.clone().unwrap_or_default());
                }
                self.on_node_apply(n);
            }
            Event::InitDone => {
                if let Some(seen) = self.node_relist.take() {
                    let stale: Vec<String> = self
                        .sched
                        .cache
                        .node_names()
                        .iter()
                        .filter(|n| !seen.contains(*n))
                        .cloned()
                        .collect();
                    for n in stale {
                        self.sched.cache.remove_node(&n);
                    }
                }
                if !self.nodes_synced {
                    self.nodes_synced = true;
                    if self.synced() {
                        self.notify(Notice::Synced);
                    }
                }
            }
        }
    }

    fn on_group_event(&mut self, ev: Event<DynamicObject>) {
        if let Event::Apply(o) | Event::InitApply(o) | Event::Delete(o) = &ev {
            tracing::trace!(group = ?o.metadata.name, "pod group watch event");
        }
        let key = |o: &DynamicObject| {
            format!(
                "{}/{}",
                o.metadata.namespace.as_deref().unwrap_or("default"),
                o.metadata.name.as_deref().unwrap_or("")
            )
        };
        let now = Instant::now();
        match ev {
            Event::Apply(o) => self.on_group_apply(key(&o), &o),
            Event::Delete(o) => {
                self.sched.remove_pod_group(&key(&o));
                self.sched.queue.move_all(ClusterEvent::PodGroupChange, now);
            }
            Event::Init => self.group_relist = Some(HashSet::new()),
            Event::InitApply(o) => {
                let k = key(&o);
                if let Some(seen) = self.group_relist.as_mut() {
                    seen.insert(k.clone());
                }
                self.on_group_apply(k, &o);
            }
            Event::InitDone => {
                if let Some(seen) = self.group_relist.take() {
                    let stale: Vec<String> = self
                        .sched
                        .groups
                        .iter()
                        .flat_map(|g| g.keys())
                        .filter(|k| !seen.contains(*k))
                        .cloned()
                        .collect();
                    for k in stale {
                        self.sched.remove_pod_group(&k);
                    }
                    self.sched.queue.move_all(ClusterEvent::PodGroupChange, now);
                }
                if !self.groups_synced {
                    self.groups_synced = true;
                    if self.synced() {
                        self.notify(Notice::Synced);
                    }
                }
            }
        }
    }

    fn on_group_apply(&mut self, key: String, o: &DynamicObject) {
        let min = gang::min_member(&o.data).unwrap_or_else(|e| {
            tracing::warn!(group = %key, error = %e, "PodGroup with an invalid minMember: its pods are not held together");
            0
        });
        if self.sched.groups.as_ref().and_then(|g| g.get(&key)) != Some(&min) {
            self.sched.set_pod_group(&key, min);
            self.sched
                .queue
                .move_all(ClusterEvent::PodGroupChange, Instant::now());
        }
    }

    fn on_bind_result(&mut self, r: BindResult) {
        let now = Instant::now();
        match r.result {
            Ok(()) => {
                self.explained.remove(&r.key);
                if let Some(qp) = self.binding.remove(&r.key) {
                    if let Some(m) = &self.metrics {
                        m.observe_e2e(now.saturating_duration_since(qp.first_seen));
                    }
                    let _ = self.events.send(EventToWrite {
                        pod: qp.info.pod.clone(),
                        related: None,
                        reason: "Scheduled",
                        action: "Binding",
                        type_: "Normal",
                        message: format!("Successfully assigned {} to {}", qp.info.key, r.node),
                        component: qp.info.scheduler_name().to_string(),
                    });
                }
                self.notify(Notice::Bound {
                    pod: r.key,
                    node: r.node,
                });
            }
            Err(error) => {
                tracing::info!(pod = %r.key, %error, "binding failed");
                if let Some(m) = &self.metrics {
                    m.attempt(AttemptResult::Error);
                }
                let forgot = self.sched.cache.forget(&r.key);
                if let Some(qp) = self.binding.remove(&r.key) {
                    self.sched.queue.readd_after_binding_failure(qp, now);
                }
                if forgot {
                    self.sched
                        .queue
                        .move_all(ClusterEvent::AssignedPodDelete, now);
                }
                self.notify(Notice::BindingFailed { pod: r.key, error });
            }
        }
    }

    /// The annotations of an explained attempt: the attempt's, and the
    /// history with it appended. `None` for a failed attempt that the pod
    /// already shows (the same verdicts, scores and message as its last
    /// written one): as the `PodScheduled` condition, it is not written
    /// again, and the next attempt written carries the count (its number
    /// jumps). A retry in an unchanged cluster costs no request.
    fn explain_annotations(
        &mut self,
        info: &PodInfo,
        a: &Attempt,
    ) -> Option<BTreeMap<String, String>> {
        let limit = self.sched.explain().map_or(0, |c| c.history_bytes);
        let seen = attempt_of(&info.pod);
        let last = match self.explained.get(&info.key) {
            Some(e) => e.clone(),
            None => Explained {
                given: seen,
                written: seen,
                history: info
                    .pod
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(explain::RESULT_HISTORY))
                    .map(|h| Arc::from(h.as_str())),
            },
        };
        let n = last.given + 1;
        let mut ann = a.annotations(n);
        // Only a view of the pod that has our last write can tell.
        let up_to_date = seen >= last.written;
        if a.selected.is_none() && up_to_date && shows_already(&info.pod, &ann) {
            self.explained
                .insert(info.key.clone(), Explained { given: n, ..last });
            return None;
        }
        let history = match explain::next_history(last.history.as_deref(), &ann, limit) {
            Some(h) => {
                let h: Arc<str> = Arc::from(h);
                ann.insert(explain::RESULT_HISTORY.to_string(), h.to_string());
                Some(h)
            }
            None => last.history,
        };
        self.explained.insert(
            info.key.clone(),
            Explained {
                given: n,
                written: n,
                history,
            },
        );
        Some(ann)
    }

    /// Writes an explained failed attempt on the pod (one merge patch; a
    /// binding carries a successful one itself).
    fn spawn_explain_patch(&self, info: &PodInfo, annotations: BTreeMap<String, String>) {
        let client = self.client.clone();
        let name = info.name().to_string();
        let path = format!("/api/v1/namespaces/{}/pods", info.namespace());
        tokio::spawn(async move {
            // `{"metadata":{"annotations":{...}}}`, serialized from the map
            // itself (not copied into a `Value` first).
            #[derive(serde::Serialize)]
            struct Metadata<'a> {
                annotations: &'a BTreeMap<String, String>,
            }
            #[derive(serde::Serialize)]
            struct Body<'a> {
                metadata: Metadata<'a>,
            }
            let patch = Patch::Merge(Body {
                metadata: Metadata {
                    annotations: &annotations,
                },
            });
            // The answer (the whole pod) is read but not parsed: the watch
            // brings the pod anyway.
            let sent = send_unparsed(
                &client,
                kube::core::Request::new(path).patch(&name, &PatchParams::default(), &patch),
            )
            .await;
            if let Err(err) = sent {
                tracing::debug!(pod = %name, %err, "writing the explanation failed");
            }
        });
    }

    fn spawn_binding(
        &self,
        info: &PodInfo,
        node: &str,
        annotations: Option<BTreeMap<String, String>>,
    ) {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), info.namespace());
        // The API server copies a binding's annotations onto the pod, in
        // the same write as the node: an explained decision costs no request.
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(info.name().to_string()),
                namespace: Some(info.namespace().to_string()),
                uid: info.pod.metadata.uid.clone(),
                annotations,
                ..ObjectMeta::default()
            },
            target: ObjectReference {
                kind: Some("Node".into()),
                name: Some(node.to_string()),
                ..ObjectReference::default()
            },
        };
        let name = info.name().to_string();
        let key = info.key.clone();
        let node = node.to_string();
        let tx = self.bind_tx.clone();
        tokio::spawn(async move {
            let result = api
                .create_subresource::<_, serde_json::Value>(
                    "binding",
                    &name,
                    &PostParams::default(),
                    &binding,
                )
                .await
                .map(|_| ())
                .map_err(|e| e.to_string());
            let _ = tx.send(BindResult { key, node, result });
        });
    }

    fn on_unschedulable(&self, info: &PodInfo, message: &str, nominated: Option<&str>) {
        // Upstream skips the patch when the condition would not change.
        let current = info
            .pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"));
        let unchanged = current.is_some_and(|c| {
            c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
                && c.message.as_deref() == Some(message)
        });
        if !unchanged || nominated.is_some() {
            let mut status = json!({
                "conditions": [{
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastProbeTime": null,
                    "lastTransitionTime": now_time(),
                }]
            });
            if let Some(n) = nominated {
                status["nominatedNodeName"] = json!(n);
            }
            let client = self.client.clone();
            let path = format!("/api/v1/namespaces/{}/pods", info.namespace());
            let name = info.name().to_string();
            tokio::spawn(async move {
                let patch = Patch::Strategic(json!({ "status": status }));
                // `Api::patch_status`'s request; its answer (the whole pod,
                // explanations included) is read but not parsed: the watch
                // brings the pod anyway.
                let sent = send_unparsed(
                    &client,
                    kube::core::Request::new(path).patch_subresource(
                        "status",
                        &name,
                        &PatchParams::default(),
                        &patch,
                    ),
                )
                .await;
                if let Err(err) = sent {
                    tracing::debug!(pod = %name, %err, "status patch failed");
                }
            });
        }
        let _ = self.events.send(EventToWrite {
            pod: info.pod.clone(),
            related: None,
            reason: "FailedScheduling",
            action: "Scheduling",
            type_: "Warning",
            message: message.to_string(),
            component: info.scheduler_name().to_string(),
        });
    }

    fn spawn_preemption(&self, preemptor: &PodInfo, node: &str, victims: &[Arc<PodInfo>]) {
        let client = self.client.clone();
        let component = preemptor.scheduler_name().to_string();
        let uid = preemptor.uid().to_string();
        for v in victims {
            let _ = self.events.send(EventToWrite {
                pod: v.pod.clone(),
                related: Some(preemptor.pod.clone()),
                reason: "Preempted",
                action: "Preempting",
                type_: "Normal",
                message: format!("Preempted by pod {uid} on node {node}"),
                component: component.clone(),
            });
        }
        let victims: Vec<(String, String)> = victims
            .iter()
            .map(|v| (v.namespace().to_string(), v.name().to_string()))
            .collect();
        tokio::spawn(async move {
            for (ns, name) in victims {
                let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
                let cond = json!({"status": {"conditions": [{
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "PreemptionByScheduler",
                    "message": format!("{component}: preempting to accommodate a higher priority pod"),
                    "lastTransitionTime": now_time(),
                }]}});
                if let Err(err) = api
                    .patch_status(&name, &PatchParams::default(), &Patch::Strategic(cond))
                    .await
                {
                    tracing::debug!(pod = %name, %err, "DisruptionTarget patch failed");
                }
                if let Err(err) = api.delete(&name, &DeleteParams::default()).await {
                    tracing::info!(pod = %name, %err, "deleting a preemption victim failed");
                }
            }
        });
    }

    fn handle_outcome(&mut self, out: CycleOutcome) {
        for (pod, decision, explain) in out.all_explained() {
            self.handle_decision(pod, decision, explain.as_deref());
        }
    }

    fn handle_decision(&mut self, pod: QueuedPod, decision: Decision, explain: Option<&Attempt>) {
        let annotations = explain.and_then(|a| self.explain_annotations(&pod.info, a));
        match decision {
            Decision::Bind { node } => {
                tracing::debug!(pod = %pod.info.key, %node, "assumed");
                if let Some(m) = &self.metrics {
                    m.attempt(AttemptResult::Scheduled);
                }
                self.spawn_binding(&pod.info, &node, annotations);
                self.notify(Notice::Assumed {
                    pod: pod.info.key.clone(),
                    node: node.clone(),
                });
                self.binding.insert(pod.info.key.clone(), pod);
            }
            Decision::Unschedulable {
                message,
                preemption,
                ..
            } => {
                tracing::debug!(pod = %pod.info.key, %message, "unschedulable");
                if let Some(m) = &self.metrics {
                    m.attempt(AttemptResult::Unschedulable);
                }
                let nominated = preemption.as_ref().map(|c| c.node.as_str());
                if let Some(a) = annotations {
                    self.spawn_explain_patch(&pod.info, a);
                }
                self.on_unschedulable(&pod.info, &message, nominated);
                if let Some(c) = &preemption {
                    self.spawn_preemption(&pod.info, &c.node, &c.victims);
                    self.notify(Notice::Preempting {
                        pod: pod.info.key.clone(),
                        node: c.node.clone(),
                        victims: c.victims.iter().map(|v| v.key.clone()).collect(),
                    });
                }
                self.notify(Notice::Unschedulable {
                    pod: pod.info.key.clone(),
                    message,
                });
            }
        }
    }

    fn update_gauges(&self) {
        if let Some(m) = &self.metrics {
            let l = self.sched.queue.lengths();
            m.set_pending(l.active, l.backoff, l.unschedulable);
        }
    }
}

/// Whether the pod's annotations show this attempt's results (every key
/// but the attempt's number and the history).
fn shows_already(pod: &Pod, ann: &BTreeMap<String, String>) -> bool {
    let Some(current) = pod.metadata.annotations.as_ref() else {
        return false;
    };
    ann.iter()
        .filter(|(k, _)| k.as_str() != explain::ATTEMPT)
        .all(|(k, v)| current.get(k) == Some(v))
}

/// The explained attempt last written on the pod (0: none).
fn attempt_of(pod: &Pod) -> u64 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(explain::ATTEMPT))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Whether the API serves PodGroups (discovery of their group version).
async fn pod_groups_served(client: &Client) -> bool {
    let gv = format!("{}/{}", gang::GROUP, gang::VERSION);
    match client.list_api_group_resources(&gv).await {
        Ok(list) => list.resources.iter().any(|r| r.name == gang::PLURAL),
        Err(kube::Error::Api(s)) if s.code == 404 => false,
        Err(e) => {
            tracing::warn!(error = %e, "discovery of {gv} failed; running without pod groups");
            false
        }
    }
}

/// Runs the scheduler until `shutdown` resolves.
pub async fn run(
    client: Client,
    mut sched: Scheduler,
    opts: RunOptions,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let served = pod_groups_served(&client).await;
    let mut groups = if served {
        sched.enable_pod_groups();
        let gvk = GroupVersionKind::gvk(gang::GROUP, gang::VERSION, gang::KIND);
        let ar = ApiResource::from_gvk_with_plural(&gvk, gang::PLURAL);
        crate::watch::watch(
            Api::<DynamicObject>::all_with(client.clone(), &ar),
            "groups",
        )
        .boxed()
    } else {
        tracing::info!(
            "the API does not serve {}.{}/{}: running without pod groups",
            gang::PLURAL,
            gang::GROUP,
            gang::VERSION
        );
        futures::stream::pending().boxed()
    };
    let mut pods = Box::pin(crate::watch::watch(Api::<Pod>::all(client.clone()), "pods"));
    let mut nodes = Box::pin(crate::watch::watch(
        Api::<Node>::all(client.clone()),
        "nodes",
    ));
    // Which watch is which in `instants`.
    const PODS: usize = 0;
    const NODES: usize = 1;
    const GROUPS: usize = 2;
    let names = ["pods", "nodes", "groups"];
    let mut instants = Instants::new(&names[..if served { 3 } else { 2 }]);
    let (bind_tx, mut bind_rx) = mpsc::unbounded_channel();
    let mut r = Runner {
        sched,
        events: spawn_event_writer(client.clone()),
        client,
        bind_tx,
        binding: HashMap::new(),
        metrics: opts.metrics,
        notices: opts.notices,
        pods_synced: false,
        nodes_synced: false,
        groups_synced: !served,
        pod_relist: None,
        node_relist: None,
        group_relist: None,
        warned_unserved_group: false,
        explained: HashMap::new(),
    };
    tokio::pin!(shutdown);
    // Whether everything that was ready to be read has been taken in since
    // the loop last woke. A cycle decides only on a settled view: after any
    // wake (a watch event, a binding's answer, a timer), the I/O driver and
    // the connection tasks run first, and whatever they bring is applied,
    // until a pass brings nothing new. A timer and the watch frames of the
    // same instant arrive together (the broker delivers an instant as one
    // step), and the loop, polled before the connection tasks, would
    // otherwise decide with the timer's effect and without the frames.
    let mut settled = false;
    loop {
        let now = Instant::now();
        r.sched.queue.flush(now);
        r.update_gauges();
        // Never on part of an instant: a watch inside one, or behind the
        // others, has more of it to bring (`crate::watch`).
        let can_schedule = r.synced() && r.sched.queue.has_active() && instants.settled();
        let deadline = r.sched.queue.next_deadline();
        let sleep =
            tokio::time::sleep_until(tokio::time::Instant::from_std(deadline.unwrap_or(now)));
        tokio::select! {
            biased;
            _ = &mut shutdown => return,
            Some(ev) = pods.next() => {
                settled = false;
                match ev {
                    Ok(item) => {
                        instants.note(PODS, &item);
                        if let Item::Event(ev) = item {
                            r.on_pod_event(ev);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "pod watch error; retrying"),
                }
            }
            Some(ev) = nodes.next() => {
                settled = false;
                match ev {
                    Ok(item) => {
                        instants.note(NODES, &item);
                        if let Item::Event(ev) = item {
                            r.on_node_event(ev);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "node watch error; retrying"),
                }
            }
            Some(ev) = groups.next() => {
                settled = false;
                match ev {
                    Ok(item) => {
                        instants.note(GROUPS, &item);
                        if let Item::Event(ev) = item {
                            r.on_group_event(ev);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "pod group watch error; retrying"),
                }
            }
            Some(res) = bind_rx.recv() => {
                settled = false;
                r.on_bind_result(res);
            }
            _ = std::future::ready(()), if can_schedule => {
                if !settled {
                    // Let the I/O driver and the connection tasks run once
                    // (a large watch frame is read in chunks, by another
                    // task), and take in what they bring before deciding.
                    settled = true;
                    tokio::task::yield_now().await;
                } else {
                    if let Some(out) = r.sched.cycle(Instant::now()) {
                        r.handle_outcome(out);
                    }
                    // A long queue must not starve the binding tasks: give
                    // them the thread once the cooperative budget is spent.
                    tokio::task::consume_budget().await;
                }
            }
            _ = sleep, if deadline.is_some() && !can_schedule => settled = false,
        }
    }
}

/// Sends a request built by `kube::core::Request` and reads its answer as
/// text without parsing it (a patched pod, explanations included: the
/// watch brings the pod anyway).
async fn send_unparsed(
    client: &kube::Client,
    req: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
) -> Result<(), String> {
    match req {
        Ok(req) => client
            .request_text(req)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    }
}
