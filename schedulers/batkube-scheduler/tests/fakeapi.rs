//! The scheduler against fakeapi over real HTTP (no Batsim, real time): the
//! test plays the kubelet and checks capacity on every observed state.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use batkube_scheduler::config::{default_profile, ScoringStrategy};
use batkube_scheduler::explain::{self, ExplainConfig};
use batkube_scheduler::runner::{self, Notice, RunOptions};
use batkube_scheduler::{Scheduler, SchedulerConfig, TieBreak};
use fakeapi::{Change, Store};
use k8s_openapi::api::core::v1::{Node, Pod, PodStatus};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

/// Safety net only: every wait below returns as soon as its event happens.
const TIMEOUT: Duration = Duration::from_secs(120);

fn node(name: &str, cpu: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    }))
    .unwrap()
}

fn pod(name: &str, cpu: &str, priority: i32) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "priority": priority,
            "schedulerName": "default-scheduler",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]
        },
        "status": {"phase": "Pending"}
    }))
    .unwrap()
}

fn fast_backoff(mut cfg: SchedulerConfig) -> SchedulerConfig {
    // Real time in these tests: keep the upstream doubling, scaled down.
    cfg.pod_initial_backoff = Duration::from_millis(10);
    cfg.pod_max_backoff = Duration::from_millis(80);
    cfg
}

struct Harness {
    store: Store,
    changes: mpsc::UnboundedReceiver<Change>,
    notices: mpsc::UnboundedReceiver<Notice>,
    _stop: oneshot::Sender<()>,
    _server: fakeapi::RunningServer,
}

async fn client_for(addr: std::net::SocketAddr) -> kube::Client {
    let kc = Kubeconfig::from_yaml(&fakeapi::kubeconfig_yaml(addr)).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(cfg).unwrap()
}

/// Starts fakeapi with `nodes` and `pods`, then the scheduler.
async fn start(config: SchedulerConfig, nodes: Vec<Node>, pods: Vec<Pod>) -> Harness {
    start_explained(config, nodes, pods, None).await
}

/// [`start`], the scheduler explaining its decisions when asked.
async fn start_explained(
    config: SchedulerConfig,
    nodes: Vec<Node>,
    pods: Vec<Pod>,
    explain: Option<ExplainConfig>,
) -> Harness {
    let store = Store::new();
    let changes = store.subscribe();
    for n in nodes {
        store.create_node(n).unwrap();
    }
    for p in pods {
        store.create_pod(p).unwrap();
    }
    let server = fakeapi::serve(store.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let client = client_for(server.addr()).await;
    let (ntx, notices) = mpsc::unbounded_channel();
    let (stop, stop_rx) = oneshot::channel::<()>();
    let mut sched = Scheduler::new(config, TieBreak::NodeName);
    sched.set_explain(explain);
    tokio::spawn(runner::run(
        client,
        sched,
        RunOptions {
            metrics: None,
            notices: Some(ntx),
        },
        async move {
            let _ = stop_rx.await;
        },
    ));
    Harness {
        store,
        changes,
        notices,
        _stop: stop,
        _server: server,
    }
}

impl Harness {
    async fn next_change(&mut self) -> Change {
        tokio::time::timeout(TIMEOUT, self.changes.recv())
            .await
            .expect("timed out waiting for a change")
            .expect("store closed")
    }

    async fn next_notice(&mut self) -> Notice {
        tokio::time::timeout(TIMEOUT, self.notices.recv())
            .await
            .expect("timed out waiting for the scheduler")
            .expect("scheduler stopped")
    }

    /// Waits for the binding of a pod to be committed; returns (pod, node).
    async fn next_binding(&mut self) -> (String, String) {
        loop {
            let c = self.next_change().await;
            if let Some((pod, node)) = binding_of(&c) {
                return (pod, node);
            }
        }
    }

    fn finish(&self, name: &str) {
        self.store
            .update_pod_status(
                "default",
                name,
                PodStatus {
                    phase: Some("Succeeded".into()),
                    ..PodStatus::default()
                },
            )
            .unwrap();
    }
}

fn binding_of(c: &Change) -> Option<(String, String)> {
    if c.resource.plural != "pods" {
        return None;
    }
    let node = c.object["spec"]["nodeName"].as_str()?;
    // A binding turns an existing unbound pod into a bound one.
    let old = c.old.as_ref()?;
    if old["spec"]["nodeName"].is_string() {
        return None;
    }
    Some((c.name.clone(), node.to_string()))
}

fn cpu_milli(pod: &Value) -> i64 {
    let q = pod["spec"]["containers"][0]["resources"]["requests"]["cpu"]
        .as_str()
        .unwrap_or("0");
    batkube_scheduler::resources::parse_quantity(q, 3).unwrap()
}

/// Tracks the cluster from the store's changes and asserts, after each
/// one, that no node runs more cpu than it has.
#[derive(Default)]
struct CapacityChecker {
    capacity: HashMap<String, i64>,
    pods: HashMap<String, (String, i64)>,
    max_seen: BTreeMap<String, i64>,
}

impl CapacityChecker {
    fn observe(&mut self, c: &Change) {
        match c.resource.plural {
            "nodes" => {
                let cpu = c.object["status"]["allocatable"]["cpu"]
                    .as_str()
                    .unwrap_or("0");
                self.capacity.insert(
                    c.name.clone(),
                    batkube_scheduler::resources::parse_quantity(cpu, 3).unwrap(),
                );
            }
            "pods" => {
                let key = format!("{}/{}", c.namespace, c.name);
                let phase = c.object["status"]["phase"].as_str().unwrap_or("");
                let node = c.object["spec"]["nodeName"].as_str();
                let deleted = c.kind == fakeapi::EventType::Deleted;
                match node {
                    Some(n) if !deleted && phase != "Succeeded" && phase != "Failed" => {
                        self.pods.insert(key, (n.to_string(), cpu_milli(&c.object)));
                    }
                    _ => {
                        self.pods.remove(&key);
                    }
                }
                let mut used: HashMap<&str, i64> = HashMap::new();
                for (n, cpu) in self.pods.values() {
                    *used.entry(n.as_str()).or_insert(0) += cpu;
                }
                for (n, u) in used {
                    let cap = self.capacity.get(n).copied().unwrap_or(0);
                    assert!(u <= cap, "node {n} over capacity: {u}m of {cap}m");
                    let m = self.max_seen.entry(n.to_string()).or_insert(0);
                    *m = (*m).max(u);
                }
            }
            _ => {}
        }
    }
}

/// 200 one-cpu pods on 16 one-cpu nodes: placed 16 at a time, no node ever
/// over capacity, every pod ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_pods_on_sixteen_nodes_in_waves() {
    let nodes = (0..16).map(|i| node(&format!("node-{i}"), "1")).collect();
    let pods = (0..200).map(|i| pod(&format!("job-{i}"), "1", 0)).collect();
    let mut h = start(fast_backoff(SchedulerConfig::default()), nodes, pods).await;
    let mut checker = CapacityChecker::default();
    let mut done = 0;
    let mut waves = Vec::new();
    while done < 200 {
        let want = 16.min(200 - done);
        let mut bound = Vec::new();
        while bound.len() < want {
            let c = h.next_change().await;
            checker.observe(&c);
            if let Some((p, _)) = binding_of(&c) {
                bound.push(p);
            }
        }
        waves.push(bound.len());
        // The kubelet: the whole wave finishes.
        for p in &bound {
            h.finish(p);
        }
        done += bound.len();
    }
    // Drain what is left to observe (our own finish updates) and re-check.
    while let Ok(c) = h.changes.try_recv() {
        checker.observe(&c);
    }
    assert_eq!(waves.len(), 13);
    assert!(waves[..12].iter().all(|w| *w == 16));
    assert_eq!(checker.max_seen.len(), 16);
    assert!(checker.max_seen.values().all(|m| *m == 1000));
}

/// Pods of three priorities, all pending when the scheduler starts, are
/// decided in priority order (then arrival order).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_are_decided_in_priority_order() {
    let mut pods = Vec::new();
    for i in 0..9 {
        let prio = [0, 1000, 500][i % 3];
        pods.push(pod(&format!("p{i}"), "1", prio));
    }
    let mut h = start(
        fast_backoff(SchedulerConfig::default()),
        vec![node("node-0", "9")],
        pods,
    )
    .await;
    let mut order = Vec::new();
    while order.len() < 9 {
        if let Notice::Assumed { pod, .. } = h.next_notice().await {
            order.push(pod);
        }
    }
    assert_eq!(
        order,
        [
            "default/p1",
            "default/p4",
            "default/p7",
            "default/p2",
            "default/p5",
            "default/p8",
            "default/p0",
            "default/p3",
            "default/p6"
        ]
    );
}

/// A pod that still carries a scheduling gate cannot be bound: the API
/// refuses the binding as kube-apiserver does (409, "has non-empty
/// .spec.schedulingGates"; this scheduler, like kube-scheduler before 1.27
/// without `PodSchedulingReadiness`, does not look at gates itself), the
/// scheduler puts the pod back and, once the gate is gone (as Kueue admits
/// a workload), its retry binds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_pods_binding_is_refused_and_retried_after_the_gate_goes() {
    let mut gated = pod("gated", "1", 0);
    gated.spec.as_mut().unwrap().scheduling_gates = Some(vec![serde_json::from_value(
        json!({"name": "kueue.x-k8s.io/admission"}),
    )
    .unwrap()]);
    let mut h = start(
        fast_backoff(SchedulerConfig::default()),
        vec![node("node-0", "2")],
        vec![gated],
    )
    .await;
    loop {
        match h.next_notice().await {
            Notice::BindingFailed { pod, error } => {
                assert_eq!(pod, "default/gated");
                assert!(
                    error.contains("pod gated has non-empty .spec.schedulingGates"),
                    "{error}"
                );
                break;
            }
            Notice::Bound { pod, node } => panic!("{pod} bound to {node} with its gate"),
            _ => {}
        }
    }
    let p = h.store.get_pod("default", "gated").unwrap();
    assert_eq!(p.spec.unwrap().node_name, None);
    h.store
        .patch(
            "pods",
            Some("default"),
            "gated",
            fakeapi::PatchKind::Merge,
            br#"{"spec": {"schedulingGates": null}}"#,
        )
        .unwrap();
    loop {
        if let Notice::Bound { pod, node } = h.next_notice().await {
            assert_eq!((pod.as_str(), node.as_str()), ("default/gated", "node-0"));
            break;
        }
    }
    let p = h.store.get_pod("default", "gated").unwrap();
    assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("node-0"));
}

/// An unschedulable pod gets the upstream condition and event, and is
/// retried when a node is added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unschedulable_pod_reports_and_retries_on_node_add() {
    let mut h = start(
        fast_backoff(SchedulerConfig::default()),
        vec![node("node-0", "1")],
        vec![pod("big", "2", 0)],
    )
    .await;
    let want = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod..";
    let mut saw_condition = false;
    let mut saw_event = false;
    while !(saw_condition && saw_event) {
        let c = h.next_change().await;
        if c.resource.plural == "pods" && c.name == "big" {
            if let Some(conds) = c.object["status"]["conditions"].as_array() {
                if let Some(cond) = conds.iter().find(|x| x["type"] == "PodScheduled") {
                    assert_eq!(cond["status"], "False");
                    assert_eq!(cond["reason"], "Unschedulable");
                    assert_eq!(cond["message"], want);
                    saw_condition = true;
                }
            }
        }
        if c.resource.plural == "events" && c.object["reason"] == "FailedScheduling" {
            // As the upstream kube-scheduler writes it (events.k8s.io/v1).
            assert_eq!(c.resource.group, "events.k8s.io");
            assert_eq!(c.object["type"], "Warning");
            assert_eq!(c.object["action"], "Scheduling");
            assert_eq!(c.object["note"], want);
            assert_eq!(c.object["regarding"]["name"], "big");
            assert_eq!(c.object["reportingController"], "default-scheduler");
            saw_event = true;
        }
    }
    h.store.create_node(node("node-big", "4")).unwrap();
    let (p, n) = h.next_binding().await;
    assert_eq!((p.as_str(), n.as_str()), ("big", "node-big"));
    loop {
        let c = h.next_change().await;
        if c.resource.plural == "events" && c.object["reason"] == "Scheduled" {
            assert_eq!(
                c.object["note"],
                "Successfully assigned default/big to node-big"
            );
            assert_eq!(c.object["action"], "Binding");
            break;
        }
    }
}

async fn placements(strategy: ScoringStrategy) -> Vec<String> {
    let mut cfg = fast_backoff(SchedulerConfig::default());
    cfg.profiles = vec![default_profile("default-scheduler").with_strategy(strategy)];
    let nodes = (0..4).map(|i| node(&format!("node-{i}"), "4")).collect();
    let pods = (0..4).map(|i| pod(&format!("p{i}"), "1", 0)).collect();
    let mut h = start(cfg, nodes, pods).await;
    let mut out = BTreeMap::new();
    while out.len() < 4 {
        let (p, n) = h.next_binding().await;
        out.insert(p, n);
    }
    out.into_values().collect()
}

/// LeastAllocated spreads, MostAllocated packs, as upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn most_allocated_packs_where_least_allocated_spreads() {
    let mut spread = placements(ScoringStrategy::LeastAllocated).await;
    spread.sort();
    spread.dedup();
    assert_eq!(spread.len(), 4, "one pod per node: {spread:?}");
    let mut packed = placements(ScoringStrategy::MostAllocated).await;
    packed.dedup();
    assert_eq!(packed, vec!["node-0"]);
}

/// The annotations of a pod change, each value read as the JSON it holds
/// (selected-node and our attempt number and message are plain strings).
fn explained(c: &Change) -> Option<BTreeMap<String, Value>> {
    let a = c.object["metadata"]["annotations"].as_object()?;
    a.get(explain::FILTER_RESULT)?;
    Some(
        a.iter()
            .map(|(k, v)| {
                let s = v.as_str().unwrap();
                let v = serde_json::from_str(s).unwrap_or_else(|_| json!(s));
                (k.clone(), v)
            })
            .collect(),
    )
}

/// `--explain`: a failed attempt is written on the pod (one patch), a
/// successful one with the binding, in the kube-scheduler-simulator's keys
/// and layout, and the history keeps both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explained_attempts_are_written_as_the_simulator_writes_them() {
    let mut h = start_explained(
        fast_backoff(SchedulerConfig::default()),
        vec![node("node-0", "1")],
        vec![pod("big", "2", 0)],
        Some(ExplainConfig {
            history_bytes: explain::SIMULATOR_HISTORY_BYTES,
        }),
    )
    .await;
    let want = "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod..";
    let failed = loop {
        let c = h.next_change().await;
        if c.name == "big" {
            if let Some(a) = explained(&c) {
                break a;
            }
        }
    };
    assert_eq!(failed[explain::ATTEMPT], json!(1));
    assert_eq!(failed[explain::MESSAGE], json!(want));
    assert_eq!(failed[explain::SELECTED_NODE], json!(""));
    assert_eq!(failed[explain::BIND_RESULT], json!({}));
    // Filters stop at the first failure: InterPodAffinity (after
    // NodeResourcesFit in the default profile) is not named.
    assert_eq!(
        failed[explain::FILTER_RESULT],
        json!({"node-0": {"NodeAffinity": "passed", "NodeName": "passed",
            "NodeResourcesFit": "Insufficient cpu", "NodeUnschedulable": "passed",
            "TaintToleration": "passed"}})
    );
    assert_eq!(failed[explain::SCORE_RESULT], json!({}));
    assert_eq!(failed[explain::POSTFILTER_RESULT], json!({"node-0": {}}));
    assert_eq!(failed[explain::RESULT_HISTORY].as_array().unwrap().len(), 1);

    // Two nodes that fit, seen at once: both are scored.
    {
        let _hold = h.store.hold();
        h.store.create_node(node("node-big", "4")).unwrap();
        h.store.create_node(node("node-huge", "8")).unwrap();
    }
    let c = loop {
        let c = h.next_change().await;
        if binding_of(&c).is_some() {
            break c;
        }
    };
    let (bound, node) = binding_of(&c).unwrap();
    assert_eq!(bound, "big");
    let ok = explained(&c).expect("the binding carries the explanation");
    assert_eq!(ok[explain::SELECTED_NODE], json!(node));
    assert_eq!(
        ok[explain::BIND_RESULT],
        json!({"DefaultBinder": "success"})
    );
    // A binding adds annotations, it cannot remove one: success is an empty message.
    assert_eq!(ok[explain::MESSAGE], json!(""));
    let fin = &ok[explain::FINALSCORE_RESULT];
    let raw = &ok[explain::SCORE_RESULT];
    for n in ["node-big", "node-huge"] {
        // Default weights: TaintToleration 3, NodeAffinity 2, the others 1.
        assert_eq!(fin[n]["TaintToleration"], json!("300"), "{fin}");
        assert_eq!(raw[n]["TaintToleration"], json!("0"), "{raw}");
        assert_eq!(fin[n]["NodeResourcesFit"], raw[n]["NodeResourcesFit"]);
    }
    // LeastAllocated: 2 of 8 cpu leaves more than 2 of 4.
    let fit = |n: &str| {
        fin[n]["NodeResourcesFit"]
            .as_str()
            .unwrap()
            .parse::<i64>()
            .unwrap()
    };
    assert!(fit("node-huge") > fit("node-big"), "{fin}");
    assert_eq!(node, "node-huge");
    assert_eq!(
        ok[explain::FILTER_RESULT]["node-0"]["NodeResourcesFit"],
        json!("Insufficient cpu")
    );
    // The retries before the nodes came saw what the first saw: not
    // written again, they only count (the binding's attempt number jumps).
    let history = ok[explain::RESULT_HISTORY].as_array().unwrap();
    let n: u64 = ok[explain::ATTEMPT].as_u64().unwrap();
    assert!(n >= 2, "{n}");
    let numbers: Vec<u64> = history
        .iter()
        .map(|e| e[explain::ATTEMPT].as_str().unwrap().parse().unwrap())
        .collect();
    assert_eq!(numbers.first(), Some(&1));
    assert_eq!(numbers.last(), Some(&n));
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
    assert_eq!(history.last().unwrap()[explain::SELECTED_NODE], json!(node));
    assert_eq!(history[0][explain::SELECTED_NODE], json!(""));
}

/// A high-priority pod evicts the lowest-priority pod only, then lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preemption_deletes_the_minimal_lowest_priority_set() {
    let mut running = Vec::new();
    for (name, prio) in [("low", 1), ("mid", 5)] {
        let mut p = pod(name, "1", prio);
        p.spec.as_mut().unwrap().node_name = Some("node-0".into());
        p.status = Some(PodStatus {
            phase: Some("Running".into()),
            ..PodStatus::default()
        });
        running.push(p);
    }
    let mut h = start(
        fast_backoff(SchedulerConfig::default()),
        vec![node("node-0", "2")],
        running,
    )
    .await;
    loop {
        if let Notice::Synced = h.next_notice().await {
            break;
        }
    }
    h.store.create_pod(pod("high", "1", 10)).unwrap();
    let mut deleted = Vec::new();
    let mut checker = CapacityChecker::default();
    checker.capacity.insert("node-0".into(), 2000);
    loop {
        let c = h.next_change().await;
        checker.observe(&c);
        if c.resource.plural == "pods" && c.kind == fakeapi::EventType::Deleted {
            deleted.push(c.name.clone());
        }
        if let Some((p, n)) = binding_of(&c) {
            assert_eq!((p.as_str(), n.as_str()), ("high", "node-0"));
            break;
        }
    }
    assert_eq!(deleted, vec!["low"]);
    assert!(h.store.get_pod("default", "mid").is_ok());
}

/// The binary itself, unpatched time (no simulation: the shim is a no-op),
/// against fakeapi with a kubeconfig file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_binds_against_fakeapi_on_real_time() {
    let store = Store::new();
    let mut changes = store.subscribe();
    store.create_node(node("node-0", "2")).unwrap();
    store.create_pod(pod("job-1", "1", 0)).unwrap();
    let server = fakeapi::serve(store.clone(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = std::env::temp_dir().join(format!("batkube-sched-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    std::fs::write(&kc, fakeapi::kubeconfig_yaml(server.addr())).unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_batkube-scheduler"))
        .arg("--kubeconfig")
        .arg(&kc)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let bound = async {
        loop {
            let c = changes.recv().await.expect("store open");
            if let Some(b) = binding_of(&c) {
                return b;
            }
        }
    };
    let (p, n) = tokio::time::timeout(TIMEOUT, bound)
        .await
        .expect("bound in time");
    assert_eq!((p.as_str(), n.as_str()), ("job-1", "node-0"));
    child.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
