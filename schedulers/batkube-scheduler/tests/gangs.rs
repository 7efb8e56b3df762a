//! Pod groups and inter-pod anti-affinity in the scheduling core, without
//! an API server: a gang is placed all or nothing in one cycle, on distinct
//! nodes, nothing stays assumed when it does not fit, it waits for its
//! PodGroup and for its members, and the same inputs give the same
//! placements. Without pod groups, a gang's pods still land on distinct
//! nodes (anti-affinity) but one by one.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use batkube_scheduler::model::PodInfo;
use batkube_scheduler::queue::{ClusterEvent, Location};
use batkube_scheduler::scheduler::CycleOutcome;
use batkube_scheduler::{Decision, Scheduler, SchedulerConfig, TieBreak};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

fn node(name: &str, cpu: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}
    }))
    .unwrap()
}

/// Member `k` of gang `g` as the broker writes it: labelled with its group,
/// required anti-affinity against the other members on the hostname.
fn member(g: &str, k: usize, cpu: &str) -> PodInfo {
    PodInfo::new(
        serde_json::from_value::<Pod>(json!({
            "metadata": {"name": format!("{g}-{k}"), "namespace": "default",
                "labels": {"batkube.io/gang": g, "scheduling.x-k8s.io/pod-group": g}},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"batkube.io/gang": g}},
                     "topologyKey": "kubernetes.io/hostname"}]}}
            }
        }))
        .unwrap(),
    )
    .unwrap()
}

fn single(name: &str, cpu: &str) -> PodInfo {
    PodInfo::new(
        serde_json::from_value::<Pod>(json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
        }))
        .unwrap(),
    )
    .unwrap()
}

fn bound(p: &PodInfo, node: &str) -> Arc<PodInfo> {
    let mut pod = (*p.pod).clone();
    pod.spec.as_mut().unwrap().node_name = Some(node.to_string());
    Arc::new(PodInfo::new(pod).unwrap())
}

fn cluster(nodes: usize, cpu: &str, groups: bool) -> Scheduler {
    let mut s = Scheduler::new(SchedulerConfig::default(), TieBreak::NodeName);
    for i in 0..nodes {
        s.cache.upsert_node(node(&format!("n{i}"), cpu)).unwrap();
    }
    if groups {
        s.enable_pod_groups();
    }
    s
}

/// Runs cycles until the queue has nothing active; every decision made.
fn drain(s: &mut Scheduler, now: Instant) -> Vec<(String, Decision)> {
    let mut out = Vec::new();
    while let Some(o) = s.cycle(now) {
        out.extend(
            CycleOutcome::all(o)
                .into_iter()
                .map(|(p, d)| (p.info.name().to_string(), d)),
        );
    }
    out
}

fn bindings(ds: &[(String, Decision)]) -> Vec<(String, String)> {
    ds.iter()
        .filter_map(|(p, d)| match d {
            Decision::Bind { node } => Some((p.clone(), node.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_gang_that_fits_is_bound_whole_on_distinct_nodes_in_one_cycle() {
    let mut s = cluster(4, "1", true);
    s.set_pod_group("default/g", 3);
    let t0 = Instant::now();
    // Added out of rank order: placement follows the rank, not the arrival.
    for k in [2, 0, 1] {
        s.queue.add_or_update(member("g", k, "1"), t0);
    }
    let first = s.cycle(t0).expect("a member is active");
    let all = CycleOutcome::all(first);
    assert_eq!(all.len(), 3, "the whole group is decided in one cycle");
    assert!(s.cycle(t0).is_none(), "no member is left in the queue");
    let placed: Vec<(String, String)> = all
        .iter()
        .map(|(p, d)| match d {
            Decision::Bind { node } => (p.info.name().to_string(), node.clone()),
            other => panic!("{}: {other:?}", p.info.key),
        })
        .collect();
    let mut by_rank = placed.clone();
    by_rank.sort();
    assert_eq!(
        by_rank,
        vec![
            ("g-0".to_string(), "n0".to_string()),
            ("g-1".to_string(), "n1".to_string()),
            ("g-2".to_string(), "n2".to_string())
        ]
    );
    for k in 0..3 {
        assert!(s.cache.is_assumed(&format!("default/g-{k}")));
    }
    assert_eq!(s.cache.group_placed("default/g"), 3);
    assert!(s.cache.overcommitted_nodes().is_empty());
}

#[test]
fn a_gang_that_does_not_fit_assumes_nothing_and_waits_for_room() {
    // Four 2-cpu nodes; a 2-cpu pod takes n1. A gang of four 1-cpu pods,
    // each on its own node (anti-affinity), has only three nodes left.
    let mut s = cluster(4, "2", true);
    let t0 = Instant::now();
    let blocker = single("blocker", "2");
    s.cache.add_or_update_bound(bound(&blocker, "n1"));
    s.set_pod_group("default/g", 4);
    for k in 0..4 {
        s.queue.add_or_update(member("g", k, "1"), t0);
    }
    let generation_cpu: Vec<i64> = s.cache.nodes().map(|n| n.requested.milli_cpu).collect();
    let ds = drain(&mut s, t0);
    assert_eq!(ds.len(), 4, "every member decided once: {ds:?}");
    for (p, d) in &ds {
        match d {
            Decision::Unschedulable {
                message,
                plugins,
                preemption,
            } => {
                assert!(
                    message.starts_with("pod group default/g: 3 of 4 pods fit (minMember 4); g-3: 0/4 nodes are available: "),
                    "{p}: {message}"
                );
                assert!(
                    message.contains("3 node(s) didn't match pod anti-affinity rules"),
                    "{message}"
                );
                assert!(message.contains("1 Insufficient cpu"), "{message}");
                assert!(preemption.is_none(), "gang members do not preempt");
                assert_eq!(
                    plugins,
                    &BTreeSet::from([
                        "InterPodAffinity".to_string(),
                        "NodeResourcesFit".to_string()
                    ])
                );
            }
            other => panic!("{p}: {other:?}"),
        }
    }
    // No partial assumption left behind: the cache is as before the cycle.
    for k in 0..4 {
        let key = format!("default/g-{k}");
        assert!(!s.cache.contains_pod(&key), "{key} left in the cache");
        assert_eq!(s.queue.location(&key), Some(Location::Unschedulable));
    }
    assert_eq!(s.cache.group_placed("default/g"), 0);
    let after: Vec<i64> = s.cache.nodes().map(|n| n.requested.milli_cpu).collect();
    assert_eq!(after, generation_cpu);

    // The blocker finishes: the group moves back and fits, whole.
    assert!(s.cache.remove_pod("default/blocker"));
    s.queue.move_all(ClusterEvent::AssignedPodDelete, t0);
    let later = t0 + std::time::Duration::from_secs(60);
    s.queue.flush(later);
    let ds = drain(&mut s, later);
    let mut b = bindings(&ds);
    b.sort();
    assert_eq!(b.len(), 4, "{ds:?}");
    let nodes: BTreeSet<&str> = b.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(nodes.len(), 4, "one member per node: {b:?}");
}

#[test]
fn a_member_waits_for_its_pod_group_and_for_its_siblings() {
    let mut s = cluster(4, "1", true);
    let t0 = Instant::now();
    s.queue.add_or_update(member("g", 0, "1"), t0);
    s.queue.add_or_update(member("g", 1, "1"), t0);
    let ds = drain(&mut s, t0);
    assert_eq!(ds.len(), 2);
    for (p, d) in &ds {
        match d {
            Decision::Unschedulable { message, .. } => assert_eq!(
                message, "pod group default/g not found: its pods wait for their PodGroup",
                "{p}"
            ),
            other => panic!("{p}: {other:?}"),
        }
    }
    // The group appears with minMember 3: its two pods are not enough.
    s.set_pod_group("default/g", 3);
    assert_eq!(s.queue.move_all(ClusterEvent::PodGroupChange, t0), 2);
    let later = t0 + std::time::Duration::from_secs(60);
    s.queue.flush(later);
    let ds = drain(&mut s, later);
    assert_eq!(ds.len(), 2);
    for (p, d) in &ds {
        match d {
            Decision::Unschedulable { message, .. } => assert_eq!(
                message,
                "pod group default/g: 2 of its 3 pods (minMember) exist; waiting for the others",
                "{p}"
            ),
            other => panic!("{p}: {other:?}"),
        }
    }
    assert!(s.cache.pod_keys().is_empty(), "nothing held while waiting");
    // The third arrives: the three go together.
    s.queue.add_or_update(member("g", 2, "1"), later);
    let ds = drain(&mut s, later);
    assert_eq!(bindings(&ds).len(), 3, "{ds:?}");
}

#[test]
fn same_inputs_give_the_same_gang_placements() {
    let run = || {
        let mut s = cluster(6, "2", true);
        let t0 = Instant::now();
        for (g, size) in [("a", 3), ("b", 2), ("c", 4), ("d", 1)] {
            s.set_pod_group(&format!("default/{g}"), size);
            for k in 0..size as usize {
                s.queue.add_or_update(member(g, k, "1"), t0);
            }
        }
        let mut b = bindings(&drain(&mut s, t0));
        b.sort();
        b
    };
    let first = run();
    assert_eq!(first.len(), 10);
    assert_eq!(first, run());
}

#[test]
fn without_pod_groups_a_gang_spreads_but_is_placed_pod_by_pod() {
    // Three 1-cpu nodes, one busy: a gang of three gets two members placed
    // (on distinct nodes) and one left waiting, as the default scheduler does.
    let mut s = cluster(3, "1", false);
    let t0 = Instant::now();
    s.cache
        .add_or_update_bound(bound(&single("busy", "1"), "n2"));
    for k in 0..3 {
        s.queue.add_or_update(member("g", k, "500m"), t0);
    }
    let ds = drain(&mut s, t0);
    let b = bindings(&ds);
    assert_eq!(b.len(), 2, "{ds:?}");
    let nodes: BTreeSet<&str> = b.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(nodes, BTreeSet::from(["n0", "n1"]));
    let refused = ds
        .iter()
        .find_map(|(_, d)| match d {
            Decision::Unschedulable { message, .. } => Some(message.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        refused.starts_with("0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match pod anti-affinity rules."),
        "{refused}"
    );
}
