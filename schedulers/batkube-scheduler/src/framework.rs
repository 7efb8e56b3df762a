//! Filter and score plugins of upstream's default profile, with upstream's
//! reasons, integer arithmetic and normalization.

use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, Pod, Taint, Toleration,
};

use crate::affinity::InterPodState;
use crate::config::{
    FilterPlugin, FitArgs, Profile, ResourceWeight, ScorePlugin, ScoringStrategy, ShapePoint,
};
use crate::model::{NodeInfo, PodInfo};
use crate::resources::Resources;

pub const MAX_NODE_SCORE: i64 = 100;

pub const ERR_NODE_UNSCHEDULABLE: &str = "node(s) were unschedulable";
pub const ERR_NODE_NAME: &str = "node(s) didn't match the requested node name";
pub const ERR_NODE_AFFINITY: &str = "node(s) didn't match Pod's node affinity/selector";
pub const ERR_TOO_MANY_PODS: &str = "Too many pods";

/// Why a node was rejected: the first failing filter, as upstream (which
/// stops at the first failure per node).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterFailure {
    pub plugin: &'static str,
    pub reasons: Vec<String>,
    /// Upstream `UnschedulableAndUnresolvable`: preemption cannot help.
    pub unresolvable: bool,
}

fn fail(plugin: FilterPlugin, reason: impl Into<String>, unresolvable: bool) -> FilterFailure {
    FilterFailure {
        plugin: plugin.name(),
        reasons: vec![reason.into()],
        unresolvable,
    }
}

pub fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if let Some(e) = t.effect.as_deref().filter(|e| !e.is_empty()) {
        if e != taint.effect {
            return false;
        }
    }
    if let Some(k) = t.key.as_deref().filter(|k| !k.is_empty()) {
        if k != taint.key {
            return false;
        }
    }
    match t.operator.as_deref().unwrap_or("") {
        "" | "Equal" => t.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        "Exists" => true,
        _ => false,
    }
}

fn tolerations(pod: &Pod) -> &[Toleration] {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_deref())
        .unwrap_or(&[])
}

fn requirement_matches(req: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = req.values.as_deref().unwrap_or(&[]);
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => !value.is_some_and(|v| values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (value, values.first()) else {
                return false;
            };
            match (v.parse::<i64>(), bound.parse::<i64>()) {
                (Ok(v), Ok(b)) => {
                    if req.operator == "Gt" {
                        v > b
                    } else {
                        v < b
                    }
                }
                _ => false,
            }
        }
        _ => false,
    }
}

/// A node selector term: all expressions and fields must match; an empty term matches nothing.
pub fn term_matches(term: &NodeSelectorTerm, node: &NodeInfo) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    exprs
        .iter()
        .all(|r| requirement_matches(r, node.labels.get(&r.key).map(String::as_str)))
        && fields
            .iter()
            .all(|r| r.key == "metadata.name" && requirement_matches(r, Some(node.name.as_str())))
}

/// `nodeSelector` and required node affinity (upstream `RequiredNodeAffinity`).
pub fn node_affinity_matches(pod: &Pod, node: &NodeInfo) -> bool {
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    if let Some(sel) = spec.node_selector.as_ref() {
        if !sel.iter().all(|(k, v)| node.labels.get(k) == Some(v)) {
            return false;
        }
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    match required {
        None => true,
        Some(sel) => sel
            .node_selector_terms
            .iter()
            .any(|t| term_matches(t, node)),
    }
}

/// Upstream `fitsRequest`: every insufficient resource is a reason.
pub fn fit_reasons(
    pod: &PodInfo,
    node: &NodeInfo,
    extra: Option<&Resources>,
    extra_pods: i64,
    args: &FitArgs,
) -> Vec<String> {
    let mut reasons = Vec::new();
    let allowed_pods = node.allocatable.pods;
    if node.pod_count() + extra_pods + 1 > allowed_pods {
        reasons.push(ERR_TOO_MANY_PODS.to_string());
    }
    let req = &pod.requests;
    if req.is_zero() {
        return reasons;
    }
    let zero = Resources::default();
    let extra = extra.unwrap_or(&zero);
    let free = |name: &str| node.allocatable.get(name) - node.requested.get(name) - extra.get(name);
    if req.milli_cpu > 0 && req.milli_cpu > free("cpu") {
        reasons.push("Insufficient cpu".to_string());
    }
    if req.memory > 0 && req.memory > free("memory") {
        reasons.push("Insufficient memory".to_string());
    }
    if req.ephemeral_storage > 0 && req.ephemeral_storage > free("ephemeral-storage") {
        reasons.push("Insufficient ephemeral-storage".to_string());
    }
    for (name, q) in &req.scalar {
        if args.ignored_resources.contains(name) {
            continue;
        }
        if let Some((group, _)) = name.split_once('/') {
            if args.ignored_resource_groups.contains(group) {
                continue;
            }
        }
        if *q > 0 && *q > free(name) {
            reasons.push(format!("Insufficient {name}"));
        }
    }
    reasons
}

/// Runs the profile's filters in order; `extra` holds the requests of pods
/// nominated on this node that the incoming pod must leave room for;
/// `inter_pod` what `InterPodAffinity` counted for this pod over the
/// cluster (empty when the plugin is off).
pub fn run_filters(
    profile: &Profile,
    pod: &PodInfo,
    node: &NodeInfo,
    extra: Option<&Resources>,
    extra_pods: i64,
    inter_pod: &InterPodState,
) -> Result<(), FilterFailure> {
    for &f in &profile.filters {
        match f {
            FilterPlugin::NodeUnschedulable => {
                if node.unschedulable {
                    let taint = Taint {
                        key: "node.kubernetes.io/unschedulable".into(),
                        effect: "NoSchedule".into(),
                        ..Taint::default()
                    };
                    if !tolerations(&pod.pod).iter().any(|t| tolerates(t, &taint)) {
                        return Err(fail(f, ERR_NODE_UNSCHEDULABLE, true));
                    }
                }
            }
            FilterPlugin::NodeName => {
                if let Some(n) = pod.node_name() {
                    if n != node.name {
                        return Err(fail(f, ERR_NODE_NAME, true));
                    }
                }
            }
            FilterPlugin::TaintToleration => {
                let tols = tolerations(&pod.pod);
                if let Some(taint) = node.taints.iter().find(|t| {
                    (t.effect == "NoSchedule" || t.effect == "NoExecute")
                        && !tols.iter().any(|tol| tolerates(tol, t))
                }) {
                    return Err(fail(
                        f,
                        format!(
                            "node(s) had untolerated taint {{{}: {}}}",
                            taint.key,
                            taint.value.as_deref().unwrap_or("")
                        ),
                        true,
                    ));
                }
            }
            FilterPlugin::NodeAffinity => {
                if !node_affinity_matches(&pod.pod, node) {
                    return Err(fail(f, ERR_NODE_AFFINITY, true));
                }
            }
            FilterPlugin::NodeResourcesFit => {
                let reasons = fit_reasons(pod, node, extra, extra_pods, &profile.fit);
                if !reasons.is_empty() {
                    return Err(FilterFailure {
                        plugin: f.name(),
                        reasons,
                        unresolvable: false,
                    });
                }
            }
            FilterPlugin::InterPodAffinity => {
                if let Some((reason, unresolvable)) = crate::affinity::filter(inter_pod, pod, node)
                {
                    return Err(fail(f, reason, unresolvable));
                }
            }
        }
    }
    Ok(())
}

// ---- scores -----------------------------------------------------------------

fn least_requested(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 || requested > capacity {
        return 0;
    }
    (capacity - requested) * MAX_NODE_SCORE / capacity
}

fn most_requested(requested: i64, capacity: i64) -> i64 {
    if capacity == 0 {
        return 0;
    }
    requested.min(capacity) * MAX_NODE_SCORE / capacity
}

fn broken_linear(shape: &[ShapePoint], p: i64) -> i64 {
    for (i, pt) in shape.iter().enumerate() {
        if p <= pt.utilization {
            if i == 0 {
                return shape[0].score;
            }
            let prev = shape[i - 1];
            return prev.score
                + (pt.score - prev.score) * (p - prev.utilization)
                    / (pt.utilization - prev.utilization);
        }
    }
    shape.last().map(|s| s.score).unwrap_or(0)
}

/// Upstream `calculateResourceAllocatableRequest`: (allocatable, requested
/// including the incoming pod). cpu and memory use the non-zero requests
/// unless `use_requested`.
fn alloc_and_request(
    pod: &PodInfo,
    node: &NodeInfo,
    name: &str,
    use_requested: bool,
) -> (i64, i64) {
    let (node_req, pod_req) = match name {
        "cpu" | "memory" if !use_requested => (&node.non_zero_requested, &pod.non_zero_requests),
        _ => (&node.requested, &pod.requests),
    };
    match name {
        "cpu" | "memory" | "ephemeral-storage" => (
            node.allocatable.get(name),
            node_req.get(name) + pod_req.get(name),
        ),
        other => match node.allocatable.scalar.get(other) {
            Some(a) => (*a, node.requested.get(other) + pod.requests.get(other)),
            None => (0, 0),
        },
    }
}

/// `NodeResourcesFit` score for one node, per the configured strategy.
pub fn fit_score(pod: &PodInfo, node: &NodeInfo, args: &FitArgs) -> i64 {
    let mut node_score = 0i64;
    let mut weight_sum = 0i64;
    for ResourceWeight { name, weight } in &args.resources {
        let (alloc, req) = alloc_and_request(pod, node, name, false);
        if alloc == 0 {
            continue;
        }
        let s = match &args.strategy {
            ScoringStrategy::LeastAllocated => least_requested(req, alloc),
            ScoringStrategy::MostAllocated => most_requested(req, alloc),
            ScoringStrategy::RequestedToCapacityRatio(shape) => {
                let s = if req > alloc {
                    broken_linear(shape, 100)
                } else {
                    broken_linear(shape, req * 100 / alloc)
                };
                if s <= 0 {
                    // Upstream skips zero-scored resources in the weighted mean.
                    continue;
                }
                s
            }
        };
        node_score += s * weight;
        weight_sum += weight;
    }
    if weight_sum == 0 {
        return 0;
    }
    match args.strategy {
        ScoringStrategy::RequestedToCapacityRatio(_) => {
            (node_score as f64 / weight_sum as f64).round() as i64
        }
        _ => node_score / weight_sum,
    }
}

/// `NodeResourcesBalancedAllocation`: 100 * (1 - std deviation of the utilisation fractions).
pub fn balanced_allocation_score(
    pod: &PodInfo,
    node: &NodeInfo,
    resources: &[ResourceWeight],
) -> i64 {
    let mut fractions = Vec::with_capacity(resources.len());
    let mut total = 0.0;
    for r in resources {
        let (alloc, req) = alloc_and_request(pod, node, &r.name, true);
        if alloc == 0 {
            continue;
        }
        let f = (req as f64 / alloc as f64).min(1.0);
        total += f;
        fractions.push(f);
    }
    let std = match fractions.len() {
        0 | 1 => 0.0,
        2 => ((fractions[0] - fractions[1]) / 2.0).abs(),
        n => {
            let mean = total / n as f64;
            (fractions
                .iter()
                .map(|f| (f - mean) * (f - mean))
                .sum::<f64>()
                / n as f64)
                .sqrt()
        }
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

/// Raw `TaintToleration` score: intolerable PreferNoSchedule taints (reversed at normalization).
pub fn taint_toleration_raw(pod: &PodInfo, node: &NodeInfo) -> i64 {
    let tols: Vec<&Toleration> = tolerations(&pod.pod)
        .iter()
        .filter(|t| {
            matches!(
                t.effect.as_deref(),
                None | Some("") | Some("PreferNoSchedule")
            )
        })
        .collect();
    node.taints
        .iter()
        .filter(|t| t.effect == "PreferNoSchedule")
        .filter(|t| !tols.iter().any(|tol| tolerates(tol, t)))
        .count() as i64
}

/// Raw `NodeAffinity` score: sum of the weights of matching preferred terms.
pub fn node_affinity_raw(pod: &PodInfo, node: &NodeInfo) -> i64 {
    pod.pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.preferred_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|terms| {
            terms
                .iter()
                .filter(|t| t.weight != 0 && term_matches(&t.preference, node))
                .map(|t| t.weight as i64)
                .sum()
        })
        .unwrap_or(0)
}

/// Upstream `DefaultNormalizeScore`.
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|s| *s = MAX_NODE_SCORE);
        }
        return;
    }
    for s in scores.iter_mut() {
        let mut v = MAX_NODE_SCORE * *s / max;
        if reverse {
            v = MAX_NODE_SCORE - v;
        }
        *s = v;
    }
}

/// Weighted total score of each node (same order as `nodes`).
pub fn score_nodes(profile: &Profile, pod: &PodInfo, nodes: &[&NodeInfo]) -> Vec<i64> {
    score_nodes_recorded(profile, pod, nodes, None)
}

/// Per score plugin that ran: its name, the raw score per node and the
/// final one (normalized, times the weight), as `--explain` writes them.
pub type PluginScores = Vec<(&'static str, Vec<i64>, Vec<i64>)>;

/// [`score_nodes`], also keeping each plugin's raw and final scores in
/// `record` when given.
pub fn score_nodes_recorded(
    profile: &Profile,
    pod: &PodInfo,
    nodes: &[&NodeInfo],
    mut record: Option<&mut PluginScores>,
) -> Vec<i64> {
    let mut total = vec![0i64; nodes.len()];
    let mut scores = vec![0i64; nodes.len()];
    for &(plugin, weight) in &profile.scores {
        let mut raw = None;
        match plugin {
            ScorePlugin::NodeResourcesFit => {
                for (s, n) in scores.iter_mut().zip(nodes) {
                    *s = fit_score(pod, n, &profile.fit);
                }
            }
            ScorePlugin::NodeResourcesBalancedAllocation => {
                for (s, n) in scores.iter_mut().zip(nodes) {
                    *s = balanced_allocation_score(pod, n, &profile.balanced_resources);
                }
            }
            ScorePlugin::TaintToleration => {
                for (s, n) in scores.iter_mut().zip(nodes) {
                    *s = taint_toleration_raw(pod, n);
                }
                if record.is_some() {
                    raw = Some(scores.clone());
                }
                default_normalize(&mut scores, true);
            }
            ScorePlugin::NodeAffinity => {
                for (s, n) in scores.iter_mut().zip(nodes) {
                    *s = node_affinity_raw(pod, n);
                }
                if record.is_some() {
                    raw = Some(scores.clone());
                }
                default_normalize(&mut scores, false);
            }
        }
        for (t, s) in total.iter_mut().zip(&scores) {
            *t += s * weight;
        }
        if let Some(r) = record.as_deref_mut() {
            let raw = raw.unwrap_or_else(|| scores.clone());
            r.push((
                plugin.name(),
                raw,
                scores.iter().map(|s| s * weight).collect(),
            ));
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategy_formulas_match_upstream() {
        assert_eq!(least_requested(3000, 4000), 25);
        assert_eq!(least_requested(5000, 4000), 0);
        assert_eq!(most_requested(3000, 4000), 75);
        assert_eq!(most_requested(5000, 4000), 100);
        let shape = [
            ShapePoint {
                utilization: 0,
                score: 0,
            },
            ShapePoint {
                utilization: 100,
                score: 100,
            },
        ];
        assert_eq!(broken_linear(&shape, 30), 30);
        let mut s = vec![0, 2, 4];
        default_normalize(&mut s, true);
        assert_eq!(s, vec![100, 50, 0]);
        let mut s = vec![0, 0];
        default_normalize(&mut s, true);
        assert_eq!(s, vec![100, 100]);
    }

    #[test]
    fn toleration_matching() {
        let taint = Taint {
            key: "k".into(),
            value: Some("v".into()),
            effect: "NoSchedule".into(),
            ..Taint::default()
        };
        let eq = Toleration {
            key: Some("k".into()),
            operator: Some("Equal".into()),
            value: Some("v".into()),
            ..Toleration::default()
        };
        let exists_all = Toleration {
            operator: Some("Exists".into()),
            ..Toleration::default()
        };
        let wrong_effect = Toleration {
            key: Some("k".into()),
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            ..Toleration::default()
        };
        assert!(tolerates(&eq, &taint));
        assert!(tolerates(&exists_all, &taint));
        assert!(!tolerates(&wrong_effect, &taint));
    }
}
