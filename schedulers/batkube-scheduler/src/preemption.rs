//! `DefaultPreemption`: when a pod fits nowhere, find the node where evicting
//! the fewest, least important lower-priority pods makes it fit (upstream
//! `SelectVictimsOnNode` + `pickOneNodeForPreemption`, without PDBs).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use crate::affinity::InterPodState;
use crate::cache::Cache;
use crate::config::Profile;
use crate::framework::{run_filters, FilterFailure};
use crate::model::{NodeInfo, PodInfo, PodKey};
use crate::resources::Resources;

pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod.";
pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling.";

/// Where to preempt and whom.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub node: String,
    /// In the order they should be deleted (least important first).
    pub victims: Vec<Arc<PodInfo>>,
}

/// Upstream `FitError.Error()` body: `0/N nodes are available: <sorted "count reason">.`
pub fn nodes_available_message<'a>(
    num_nodes: usize,
    reasons: impl IntoIterator<Item = &'a str>,
) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in reasons {
        *counts.entry(r).or_insert(0) += 1;
    }
    let mut parts: Vec<String> = counts.iter().map(|(r, c)| format!("{c} {r}")).collect();
    parts.sort();
    format!("0/{num_nodes} nodes are available: {}.", parts.join(", "))
}

/// Upstream `MoreImportantPod`: higher priority, then earlier start.
fn more_important_first(a: &Arc<PodInfo>, b: &Arc<PodInfo>) -> std::cmp::Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| a.start_time().cmp(&b.start_time()))
        .then_with(|| a.key.cmp(&b.key))
}

/// Requests of pods nominated on `node` that `pod` must leave room for.
pub fn nominated_extra(cache: &Cache, pod: &PodInfo, node: &str) -> (Resources, i64) {
    let mut extra = Resources::default();
    let mut count = 0;
    for p in cache.nominated_on(node) {
        if p.key != pod.key && p.priority >= pod.priority {
            extra.add(&p.requests);
            count += 1;
        }
    }
    (extra, count)
}

fn select_victims_on_node(
    profile: &Profile,
    cache: &Cache,
    pod: &PodInfo,
    node: &NodeInfo,
    inter_pod: &InterPodState,
) -> Result<Vec<Arc<PodInfo>>, FilterFailure> {
    let mut potential: Vec<Arc<PodInfo>> = node
        .pods
        .values()
        .filter(|p| p.priority < pod.priority)
        .cloned()
        .collect();
    if potential.is_empty() {
        return Err(FilterFailure {
            plugin: "DefaultPreemption",
            reasons: vec![NO_VICTIMS.to_string()],
            unresolvable: true,
        });
    }
    let mut trial = node.clone();
    // Upstream's PreFilter extensions: the counts follow the trial node.
    let mut state = inter_pod.clone();
    for p in &potential {
        trial.remove_pod(&p.key);
        state.update_with_pod(pod, p, node, -1);
    }
    let (extra, extra_pods) = nominated_extra(cache, pod, &node.name);
    run_filters(profile, pod, &trial, Some(&extra), extra_pods, &state)?;
    potential.sort_by(more_important_first);
    let mut victims = Vec::new();
    for p in potential {
        trial.add_pod(p.clone());
        state.update_with_pod(pod, &p, node, 1);
        if run_filters(profile, pod, &trial, Some(&extra), extra_pods, &state).is_err() {
            trial.remove_pod(&p.key);
            state.update_with_pod(pod, &p, node, -1);
            victims.push(p);
        }
    }
    // Delete the least important first.
    victims.reverse();
    Ok(victims)
}

/// Runs preemption for `pod`, given why each node rejected it. On failure,
/// returns upstream's post-filter message (without the `preemption: ` prefix).
pub fn preempt(
    profile: &Profile,
    cache: &Cache,
    pod: &PodInfo,
    failures: &BTreeMap<String, FilterFailure>,
    deleting: &HashSet<PodKey>,
    inter_pod: &InterPodState,
) -> Result<Candidate, String> {
    if pod.preemption_policy_never() {
        return Err("not eligible due to preemptionPolicy=Never.".to_string());
    }
    let nominated = cache
        .nomination_of(&pod.key)
        .map(str::to_string)
        .or_else(|| pod.nominated_node_name().map(str::to_string));
    if let Some(n) = nominated.as_deref().and_then(|n| cache.node(n)) {
        let waiting = n.pods.values().any(|p| {
            p.priority < pod.priority && (p.is_terminating() || deleting.contains(&p.key))
        });
        if waiting {
            return Err("not eligible due to a terminating pod on the nominated node.".to_string());
        }
    }
    let mut statuses: Vec<String> = Vec::new();
    let mut candidates: Vec<Candidate> = Vec::new();
    for name in cache.node_names() {
        let Some(node) = cache.node(name) else {
            continue;
        };
        match failures.get(name) {
            Some(f) if f.unresolvable => {
                statuses.push(NOT_HELPFUL.to_string());
                continue;
            }
            None => continue,
            Some(_) => {}
        }
        match select_victims_on_node(profile, cache, pod, node, inter_pod) {
            Ok(victims) => candidates.push(Candidate {
                node: name.clone(),
                victims,
            }),
            Err(f) => statuses.extend(f.reasons),
        }
    }
    if candidates.is_empty() {
        return Err(nodes_available_message(
            cache.node_count(),
            statuses.iter().map(String::as_str),
        ));
    }
    Ok(pick_one_node(candidates))
}

/// Upstream `pickOneNodeForPreemption` (no PDB criterion): lowest highest
/// victim priority, lowest priority sum, fewest victims, latest start of the
/// highest-priority victims, then the first node.
fn pick_one_node(mut candidates: Vec<Candidate>) -> Candidate {
    let key = |c: &Candidate| {
        let highest = c
            .victims
            .iter()
            .map(|v| v.priority)
            .max()
            .unwrap_or(i32::MIN);
        let sum: i128 = c
            .victims
            .iter()
            .map(|v| v.priority as i128 + i32::MAX as i128 + 1)
            .sum();
        let earliest_of_highest = c
            .victims
            .iter()
            .filter(|v| v.priority == highest)
            .filter_map(|v| v.start_time().cloned())
            .min();
        (
            highest,
            sum,
            c.victims.len(),
            std::cmp::Reverse(earliest_of_highest),
        )
    };
    let mut best = 0;
    for i in 1..candidates.len() {
        if key(&candidates[i]) < key(&candidates[best]) {
            best = i;
        }
    }
    candidates.swap_remove(best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_sorts_reason_strings_like_upstream() {
        let reasons = ["Insufficient cpu"; 10]
            .into_iter()
            .chain(["node(s) were unschedulable"; 2])
            .chain(["Insufficient memory"; 4]);
        assert_eq!(
            nodes_available_message(16, reasons),
            "0/16 nodes are available: 10 Insufficient cpu, 2 node(s) were unschedulable, 4 Insufficient memory."
        );
    }
}
