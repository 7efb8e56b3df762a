//! The scheduling core without an API server: placements, messages,
//! strategies, preemption, no over-allocation.

use std::sync::Arc;
use std::time::Instant;

use batkube_scheduler::config::{default_profile, ScoringStrategy, ShapePoint};
use batkube_scheduler::model::PodInfo;
use batkube_scheduler::{Decision, Scheduler, SchedulerConfig, TieBreak};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

fn node(name: &str, cpu: &str) -> Node {
    node_json(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}
    }))
}

fn node_json(v: serde_json::Value) -> Node {
    serde_json::from_value(v).unwrap()
}

fn pod_json(v: serde_json::Value) -> PodInfo {
    PodInfo::new(serde_json::from_value::<Pod>(v).unwrap()).unwrap()
}

fn pod(name: &str, cpu: &str, priority: i32) -> PodInfo {
    pod_json(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("u-{name}")},
        "spec": {
            "priority": priority,
            "schedulerName": "default-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]
        }
    }))
}

fn bound(p: &PodInfo, node: &str) -> Arc<PodInfo> {
    let mut pod = (*p.pod).clone();
    pod.spec.as_mut().unwrap().node_name = Some(node.to_string());
    Arc::new(PodInfo::new(pod).unwrap())
}

fn scheduler_with(nodes: &[Node], strategy: Option<ScoringStrategy>) -> Scheduler {
    let mut cfg = SchedulerConfig::default();
    if let Some(s) = strategy {
        cfg.profiles = vec![default_profile("default-scheduler").with_strategy(s)];
    }
    let mut s = Scheduler::new(cfg, TieBreak::NodeName);
    for n in nodes {
        s.cache.upsert_node(n.clone()).unwrap();
    }
    s
}

fn bind_node(d: &Decision) -> &str {
    match d {
        Decision::Bind { node } => node,
        other => panic!("expected a binding, got {other:?}"),
    }
}

/// 200 one-cpu pods on 16 one-cpu nodes: each wave places exactly 16, no
/// node ever holds more than its cpu, and finishing pods frees room.
#[test]
fn two_hundred_pods_on_sixteen_nodes_in_waves_without_overcommit() {
    let nodes: Vec<Node> = (0..16).map(|i| node(&format!("node-{i}"), "1")).collect();
    let mut s = scheduler_with(&nodes, None);
    let t0 = Instant::now();
    for i in 0..200 {
        s.queue.add_or_update(pod(&format!("job-{i}"), "1", 0), t0);
    }
    let mut done = 0;
    let mut now = t0;
    let mut waves = 0;
    while done < 200 {
        let mut placed = Vec::new();
        while let Some(out) = s.cycle(now) {
            if let Decision::Bind { node } = &out.decision {
                placed.push((out.pod.info.clone(), node.clone()));
            }
            assert!(s.cache.overcommitted_nodes().is_empty());
        }
        assert_eq!(placed.len(), 16.min(200 - done), "wave {waves}");
        let mut used: Vec<&str> = placed.iter().map(|(_, n)| n.as_str()).collect();
        used.sort();
        used.dedup();
        assert_eq!(used.len(), placed.len(), "one pod per node");
        // The watch confirms the bindings, then the pods finish.
        for (p, n) in &placed {
            s.cache.add_or_update_bound(bound(p, n));
        }
        assert!(s.cache.overcommitted_nodes().is_empty());
        for (p, _) in &placed {
            assert!(s.cache.remove_pod(&p.key));
        }
        s.queue.move_all(
            batkube_scheduler::queue::ClusterEvent::AssignedPodDelete,
            now,
        );
        // Wait out the backoff of the pods that failed in this wave.
        if let Some(d) = s.queue.next_deadline() {
            now = now.max(d);
        }
        s.queue.flush(now);
        done += placed.len();
        waves += 1;
    }
    assert_eq!(waves, 13);
}

#[test]
fn failure_message_has_upstream_form() {
    let nodes: Vec<Node> = (0..16).map(|i| node(&format!("node-{i}"), "1")).collect();
    let mut s = scheduler_with(&nodes, None);
    let d = s.schedule_one(&pod("big", "2", 0));
    match d {
        Decision::Unschedulable {
            message,
            plugins,
            preemption,
        } => {
            assert_eq!(
                message,
                "0/16 nodes are available: 16 Insufficient cpu. preemption: 0/16 nodes are available: 16 No preemption victims found for incoming pod.."
            );
            assert_eq!(
                plugins.into_iter().collect::<Vec<_>>(),
                vec!["NodeResourcesFit"]
            );
            assert!(preemption.is_none());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn mixed_reasons_are_counted_and_sorted() {
    let mut nodes: Vec<Node> = (0..3).map(|i| node(&format!("node-{i}"), "1")).collect();
    nodes.push(node_json(json!({
        "metadata": {"name": "cordoned"},
        "spec": {"unschedulable": true},
        "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}}
    })));
    nodes.push(node_json(json!({
        "metadata": {"name": "gpu"},
        "spec": {"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}}
    })));
    let mut s = scheduler_with(&nodes, None);
    let mut p = pod("p", "2", 0);
    let mut raw = (*p.pod).clone();
    raw.spec.as_mut().unwrap().preemption_policy = Some("Never".into());
    p = PodInfo::new(raw).unwrap();
    match s.schedule_one(&p) {
        Decision::Unschedulable { message, .. } => assert_eq!(
            message,
            "0/5 nodes are available: 1 node(s) had untolerated taint {gpu: true}, 1 node(s) were unschedulable, 3 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."
        ),
        other => panic!("{other:?}"),
    }
}

/// LeastAllocated spreads, MostAllocated packs, as upstream.
#[test]
fn strategy_changes_spread_to_pack() {
    let nodes: Vec<Node> = (0..4).map(|i| node(&format!("node-{i}"), "4")).collect();
    let place = |strategy: ScoringStrategy| -> Vec<String> {
        let mut s = scheduler_with(&nodes, Some(strategy));
        (0..4)
            .map(|i| bind_node(&s.schedule_one(&pod(&format!("p{i}"), "1", 0))).to_string())
            .collect()
    };
    assert_eq!(
        place(ScoringStrategy::LeastAllocated),
        vec!["node-0", "node-1", "node-2", "node-3"]
    );
    assert_eq!(
        place(ScoringStrategy::MostAllocated),
        vec!["node-0", "node-0", "node-0", "node-0"]
    );
    // A RequestedToCapacityRatio shape that rewards utilisation packs too.
    assert_eq!(
        place(ScoringStrategy::RequestedToCapacityRatio(vec![
            ShapePoint {
                utilization: 0,
                score: 0
            },
            ShapePoint {
                utilization: 100,
                score: 100
            },
        ])),
        vec!["node-0", "node-0", "node-0", "node-0"]
    );
}

#[test]
fn pods_pop_in_priority_order() {
    let nodes = [node("node-0", "100")];
    let mut s = scheduler_with(&nodes, None);
    let t0 = Instant::now();
    for i in 0..9 {
        let prio = [0, 1000, 500][i % 3];
        s.queue
            .add_or_update(pod(&format!("p{i}-prio{prio}"), "1", prio), t0);
    }
    let order: Vec<i32> = std::iter::from_fn(|| s.cycle(t0).map(|o| o.pod.info.priority)).collect();
    assert_eq!(order, vec![1000, 1000, 1000, 500, 500, 500, 0, 0, 0]);
}

/// Lowest-priority victims first, only as many as needed, on the node with
/// the least important victims.
#[test]
fn preemption_evicts_minimal_lowest_priority_set() {
    let nodes = [node("node-a", "4"), node("node-b", "4")];
    let mut s = scheduler_with(&nodes, None);
    // node-a: priorities 1 (1 cpu), 2 (1 cpu), 3 (2 cpu); node-b: 5, 5 (2 cpu each).
    for (name, cpu, prio, n) in [
        ("a1", "1", 1, "node-a"),
        ("a2", "1", 2, "node-a"),
        ("a3", "2", 3, "node-a"),
        ("b1", "2", 5, "node-b"),
        ("b2", "2", 5, "node-b"),
    ] {
        s.cache.add_or_update_bound(bound(&pod(name, cpu, prio), n));
    }
    let hi = pod("hi", "2", 10);
    match s.schedule_one(&hi) {
        Decision::Unschedulable {
            preemption: Some(c),
            ..
        } => {
            assert_eq!(c.node, "node-a");
            let victims: Vec<&str> = c.victims.iter().map(|v| v.key.as_str()).collect();
            assert_eq!(victims, vec!["default/a1", "default/a2"]);
        }
        other => panic!("{other:?}"),
    }
    // The victims go; the preemptor lands on its nominated node, and a
    // lower-priority pod cannot take the room meanwhile.
    s.cache.remove_pod("default/a1");
    assert!(matches!(
        s.schedule_one(&pod("sneaky", "1", 0)),
        Decision::Unschedulable { .. }
    ));
    s.cache.remove_pod("default/a2");
    assert_eq!(bind_node(&s.schedule_one(&hi)), "node-a");
    assert!(s.cache.overcommitted_nodes().is_empty());
}

#[test]
fn no_preemption_of_equal_or_higher_priority() {
    let nodes = [node("node-a", "1")];
    let mut s = scheduler_with(&nodes, None);
    s.cache
        .add_or_update_bound(bound(&pod("a", "1", 10), "node-a"));
    match s.schedule_one(&pod("b", "1", 10)) {
        Decision::Unschedulable {
            message,
            preemption,
            ..
        } => {
            assert!(preemption.is_none());
            assert!(
                message.ends_with("1 No preemption victims found for incoming pod.."),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn assumed_pods_count_before_the_watch_confirms() {
    let nodes = [node("node-0", "1")];
    let mut s = scheduler_with(&nodes, None);
    assert_eq!(bind_node(&s.schedule_one(&pod("a", "1", 0))), "node-0");
    // The binding is in flight; the next decision must see node-0 as full.
    assert!(matches!(
        s.schedule_one(&pod("b", "1", 0)),
        Decision::Unschedulable { .. }
    ));
    // The binding fails: the room is released.
    assert!(s.cache.forget("default/a"));
    assert_eq!(bind_node(&s.schedule_one(&pod("b", "1", 0))), "node-0");
}

#[test]
fn node_selector_affinity_and_taints() {
    let nodes = [
        node_json(json!({
            "metadata": {"name": "n-ssd", "labels": {"disk": "ssd", "zone": "a"}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
        })),
        node_json(json!({
            "metadata": {"name": "n-hdd", "labels": {"disk": "hdd", "zone": "b"}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
        })),
        node_json(json!({
            "metadata": {"name": "n-soft", "labels": {"disk": "ssd", "zone": "c"}},
            "spec": {"taints": [{"key": "spot", "effect": "PreferNoSchedule"}]},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}
        })),
    ];
    let mut s = scheduler_with(&nodes, None);
    let sel = pod_json(json!({
        "metadata": {"name": "sel", "namespace": "default"},
        "spec": {"nodeSelector": {"disk": "hdd"}, "containers": [{"name": "c"}]}
    }));
    assert_eq!(bind_node(&s.schedule_one(&sel)), "n-hdd");
    let pref = pod_json(json!({
        "metadata": {"name": "pref", "namespace": "default"},
        "spec": {
            "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}
                ]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["c"]}]}}
                ]
            }},
            "containers": [{"name": "c"}]
        }
    }));
    // Affinity weight 2 * 100 beats TaintToleration weight 3 * 100? No:
    // n-ssd gets taint 300 + affinity 0; n-soft gets taint 0 + affinity 200.
    assert_eq!(bind_node(&s.schedule_one(&pref)), "n-ssd");
}
