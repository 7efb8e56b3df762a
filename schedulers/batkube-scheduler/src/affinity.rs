//! `InterPodAffinity`'s filter: a pod's *required* pod affinity and
//! anti-affinity terms, and the symmetric rule (an existing pod's required
//! anti-affinity keeps matching pods out of its topology domain), with
//! upstream's semantics and reasons.
//!
//! As upstream, the work is split in two: [`InterPodState::compute`] (the
//! PreFilter) counts, per topology pair `(key, value)` of the nodes, the
//! placed pods (bound or assumed) that the terms match, once per pod and
//! cycle; [`filter`] then answers per node from those counts. Preemption
//! removes and re-adds victims through [`InterPodState::update_with_pod`],
//! upstream's PreFilter extensions.
//!
//! Namespace selectors: the scheduler does not watch namespaces, so a
//! term's `namespaceSelector` is matched against the one label every
//! namespace carries, `kubernetes.io/metadata.name` (an empty selector
//! still selects every namespace). Preferred terms (the score) are not
//! implemented.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::cache::Cache;
use crate::model::{NodeInfo, PodInfo};

/// Upstream `ErrReasonAffinityRulesNotMatch`.
pub const ERR_AFFINITY: &str = "node(s) didn't match pod affinity rules";
/// Upstream `ErrReasonAntiAffinityRulesNotMatch`.
pub const ERR_ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
/// Upstream `ErrReasonExistingAntiAffinityRulesNotMatch`.
pub const ERR_EXISTING_ANTI_AFFINITY: &str =
    "node(s) didn't satisfy existing pods anti-affinity rules";

/// The label the API server puts on every namespace: what a
/// `namespaceSelector` can be matched against without a namespace watch.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// One requirement of a [`Selector`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: BTreeSet<String>,
}

impl Requirement {
    fn matches(&self, value: Option<&str>) -> bool {
        match self.operator {
            Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotIn => !value.is_some_and(|v| self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

/// A label selector as upstream's `LabelSelectorAsSelector` makes it: an
/// absent selector selects nothing, an empty one everything, otherwise
/// every requirement must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    Nothing,
    All(Vec<Requirement>),
}

impl Selector {
    /// Reads a selector, or says what is wrong with it (the API server
    /// refuses such pods; an API without validation may let one through).
    pub fn parse(selector: Option<&LabelSelector>) -> Result<Selector, String> {
        let Some(s) = selector else {
            return Ok(Selector::Nothing);
        };
        let mut reqs = Vec::new();
        for (k, v) in s.match_labels.iter().flatten() {
            reqs.push(Requirement {
                key: k.clone(),
                operator: Operator::In,
                values: BTreeSet::from([v.clone()]),
            });
        }
        for e in s.match_expressions.iter().flatten() {
            let values: BTreeSet<String> = e.values.iter().flatten().cloned().collect();
            let operator = match e.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(format!(
                        "matchExpressions key {:?}: operator {other:?} is not one of In, NotIn, Exists, DoesNotExist",
                        e.key
                    ))
                }
            };
            match operator {
                Operator::In | Operator::NotIn if values.is_empty() => {
                    return Err(format!(
                        "matchExpressions key {:?}: operator {} needs at least one value",
                        e.key, e.operator
                    ))
                }
                Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                    return Err(format!(
                        "matchExpressions key {:?}: operator {} takes no values",
                        e.key, e.operator
                    ))
                }
                _ => {}
            }
            reqs.push(Requirement {
                key: e.key.clone(),
                operator,
                values,
            });
        }
        Ok(Selector::All(reqs))
    }

    fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        match self {
            Selector::Nothing => false,
            Selector::All(reqs) => reqs.iter().all(|r| r.matches(get(&r.key))),
        }
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_with(|k| labels.get(k).map(String::as_str))
    }

    /// Adds upstream's `matchLabelKeys` / `mismatchLabelKeys` merge: the
    /// incoming pod's own value of each key, `In` or `NotIn`.
    fn restrict(&mut self, key: &str, value: &str, equal: bool) {
        if let Selector::All(reqs) = self {
            reqs.push(Requirement {
                key: key.to_string(),
                operator: if equal { Operator::In } else { Operator::NotIn },
                values: BTreeSet::from([value.to_string()]),
            });
        }
    }
}

/// One required term, resolved for the pod that carries it (upstream
/// `AffinityTerm`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AffinityTerm {
    /// The namespaces listed, or the pod's own when neither a list nor a
    /// namespace selector is given.
    namespaces: BTreeSet<String>,
    namespace_selector: Selector,
    selector: Selector,
    pub topology_key: String,
}

impl AffinityTerm {
    fn new(pod: &Pod, term: &PodAffinityTerm) -> Result<AffinityTerm, String> {
        let own_ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let mut namespaces: BTreeSet<String> = term.namespaces.iter().flatten().cloned().collect();
        if namespaces.is_empty() && term.namespace_selector.is_none() {
            namespaces.insert(own_ns.to_string());
        }
        let namespace_selector = Selector::parse(term.namespace_selector.as_ref())
            .map_err(|e| format!("namespaceSelector: {e}"))?;
        let mut selector = Selector::parse(term.label_selector.as_ref())
            .map_err(|e| format!("labelSelector: {e}"))?;
        let labels = pod.metadata.labels.as_ref();
        for (keys, equal) in [
            (&term.match_label_keys, true),
            (&term.mismatch_label_keys, false),
        ] {
            for k in keys.iter().flatten() {
                if let Some(v) = labels.and_then(|l| l.get(k)) {
                    selector.restrict(k, v, equal);
                }
            }
        }
        Ok(AffinityTerm {
            namespaces,
            namespace_selector,
            selector,
            topology_key: term.topology_key.clone(),
        })
    }

    /// Upstream `AffinityTerm.Matches`: the pod is in one of the term's
    /// namespaces and its labels match the selector.
    pub fn matches(&self, pod: &PodInfo) -> bool {
        let ns = pod.namespace();
        let in_namespace = self.namespaces.contains(ns)
            || self
                .namespace_selector
                .matches_with(|k| (k == NAMESPACE_NAME_LABEL).then_some(ns));
        in_namespace && self.selector.matches_with(|k| pod.label(k))
    }
}

/// A pod's required terms, parsed once per watch event.
#[derive(Debug, Clone, Default)]
pub struct RequiredTerms {
    pub affinity: Vec<AffinityTerm>,
    pub anti_affinity: Vec<AffinityTerm>,
}

impl RequiredTerms {
    pub fn is_empty(&self) -> bool {
        self.affinity.is_empty() && self.anti_affinity.is_empty()
    }

    /// The required terms of `pod`, or which term is invalid and why.
    pub fn of(pod: &Pod) -> Result<RequiredTerms, String> {
        let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
        let mut out = RequiredTerms::default();
        let aff = affinity
            .and_then(|a| a.pod_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            });
        for (i, t) in aff.iter().copied().flatten().enumerate() {
            out.affinity.push(AffinityTerm::new(pod, t).map_err(|e| {
                format!("spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[{i}].{e}")
            })?);
        }
        let anti = affinity
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .as_ref()
            });
        for (i, t) in anti.iter().copied().flatten().enumerate() {
            out.anti_affinity.push(AffinityTerm::new(pod, t).map_err(|e| {
                format!("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[{i}].{e}")
            })?);
        }
        Ok(out)
    }
}

/// Upstream `podMatchesAllAffinityTerms`: false without terms.
fn matches_all(terms: &[AffinityTerm], pod: &PodInfo) -> bool {
    !terms.is_empty() && terms.iter().all(|t| t.matches(pod))
}

/// Pods counted per topology pair: topology key, then the node label's
/// value. Nested so that a lookup borrows the node's strings instead of
/// building a pair per node and term.
#[derive(Debug, Clone, Default)]
struct TopologyCounts(HashMap<String, HashMap<String, i64>>);

impl TopologyCounts {
    fn bump(&mut self, key: &str, value: &str, by: i64) {
        let values = self.0.entry(key.to_string()).or_default();
        let c = values.entry(value.to_string()).or_insert(0);
        *c += by;
        // An absent pair and a pair counted to zero must look the same: the
        // affinity check asks whether any pair is counted at all.
        if *c == 0 {
            values.remove(value);
            if values.is_empty() {
                self.0.remove(key);
            }
        }
    }

    fn has(&self, key: &str, value: &str) -> bool {
        self.0
            .get(key)
            .is_some_and(|v| v.get(value).is_some_and(|c| *c > 0))
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What the filter needs about the rest of the cluster for one incoming pod
/// (upstream's InterPodAffinity `preFilterState`).
#[derive(Debug, Clone, Default)]
pub struct InterPodState {
    /// Placed pods whose required anti-affinity terms match the incoming pod.
    existing_anti: TopologyCounts,
    /// Placed pods matching all the incoming pod's affinity terms.
    affinity: TopologyCounts,
    /// Placed pods matching one of the incoming pod's anti-affinity terms.
    anti: TopologyCounts,
}

impl InterPodState {
    /// Counts over every pod the cache places (bound or assumed).
    pub fn compute(cache: &Cache, pod: &PodInfo) -> InterPodState {
        let mut s = InterPodState::default();
        for (existing, node) in cache.pods_with_required_anti_affinity() {
            s.add_existing_anti(pod, existing, node, 1);
        }
        if !pod.terms.is_empty() {
            for node in cache.nodes().filter(|n| n.node.is_some()) {
                for existing in node.pods.values() {
                    s.add_incoming(pod, existing, node, 1);
                }
            }
        }
        s
    }

    /// Nothing counted: the filter passes every node.
    pub fn is_empty(&self) -> bool {
        self.existing_anti.is_empty() && self.affinity.is_empty() && self.anti.is_empty()
    }

    fn add_existing_anti(&mut self, pod: &PodInfo, existing: &PodInfo, node: &NodeInfo, by: i64) {
        for t in &existing.terms.anti_affinity {
            if let Some(v) = node.labels.get(&t.topology_key) {
                if t.matches(pod) {
                    self.existing_anti.bump(&t.topology_key, v, by);
                }
            }
        }
    }

    fn add_incoming(&mut self, pod: &PodInfo, existing: &PodInfo, node: &NodeInfo, by: i64) {
        if matches_all(&pod.terms.affinity, existing) {
            for t in &pod.terms.affinity {
                if let Some(v) = node.labels.get(&t.topology_key) {
                    self.affinity.bump(&t.topology_key, v, by);
                }
            }
        }
        for t in &pod.terms.anti_affinity {
            if let Some(v) = node.labels.get(&t.topology_key) {
                if t.matches(existing) {
                    self.anti.bump(&t.topology_key, v, by);
                }
            }
        }
    }

    /// Upstream `updateWithPod`: `existing` added to (`by` = 1) or removed
    /// from (`by` = -1) `node`, as preemption tries victims.
    pub fn update_with_pod(&mut self, pod: &PodInfo, existing: &PodInfo, node: &NodeInfo, by: i64) {
        self.add_existing_anti(pod, existing, node, by);
        self.add_incoming(pod, existing, node, by);
    }
}

/// Why `node` is refused to `pod`, with whether preemption cannot help
/// (upstream: affinity is unresolvable, anti-affinity is not).
pub fn filter(
    state: &InterPodState,
    pod: &PodInfo,
    node: &NodeInfo,
) -> Option<(&'static str, bool)> {
    if !satisfies_affinity(state, pod, node) {
        return Some((ERR_AFFINITY, true));
    }
    if !state.anti.is_empty() {
        for t in &pod.terms.anti_affinity {
            if let Some(v) = node.labels.get(&t.topology_key) {
                if state.anti.has(&t.topology_key, v) {
                    return Some((ERR_ANTI_AFFINITY, false));
                }
            }
        }
    }
    // Upstream walks the node's labels; walking the few counted topology
    // keys instead gives the same answer.
    if state.existing_anti.0.keys().any(|k| {
        node.labels
            .get(k)
            .is_some_and(|v| state.existing_anti.has(k, v))
    }) {
        return Some((ERR_EXISTING_ANTI_AFFINITY, false));
    }
    None
}

fn satisfies_affinity(state: &InterPodState, pod: &PodInfo, node: &NodeInfo) -> bool {
    let mut pods_exist = true;
    for t in &pod.terms.affinity {
        match node.labels.get(&t.topology_key) {
            // Every topology key of the terms must be a label of the node.
            None => return false,
            Some(v) => {
                if !state.affinity.has(&t.topology_key, v) {
                    pods_exist = false;
                }
            }
        }
    }
    // The first pod of a series with affinity to itself: no pod anywhere
    // matches yet, and it matches its own terms, so it may start the series.
    pods_exist || (state.affinity.is_empty() && matches_all(&pod.terms.affinity, pod))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use k8s_openapi::api::core::v1::Node;

    fn node(name: &str, zone: &str) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": zone}},
            "status": {"allocatable": {"cpu": "4", "memory": "4Gi", "pods": "110"}}
        }))
        .unwrap()
    }

    fn pod(
        name: &str,
        ns: &str,
        labels: serde_json::Value,
        affinity: serde_json::Value,
    ) -> PodInfo {
        PodInfo::new(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": ns, "labels": labels},
                "spec": {"containers": [{"name": "c"}], "affinity": affinity}
            }))
            .unwrap(),
        )
        .unwrap()
    }

    fn anti(selector: serde_json::Value, key: &str) -> serde_json::Value {
        serde_json::json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": key}]}})
    }

    fn aff(selector: serde_json::Value, key: &str) -> serde_json::Value {
        serde_json::json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": key}]}})
    }

    /// n0, n1 in zone a; n2 in zone b.
    fn cache_with(placed: &[(&PodInfo, &str)]) -> Cache {
        let mut c = Cache::new();
        for (n, z) in [("n0", "a"), ("n1", "a"), ("n2", "b")] {
            c.upsert_node(node(n, z)).unwrap();
        }
        for (p, n) in placed {
            c.assume(Arc::new((*p).clone()), n).unwrap();
        }
        c
    }

    fn verdicts(c: &Cache, p: &PodInfo) -> Vec<Option<&'static str>> {
        let s = InterPodState::compute(c, p);
        ["n0", "n1", "n2"]
            .iter()
            .map(|n| filter(&s, p, c.node(n).unwrap()).map(|(r, _)| r))
            .collect()
    }

    #[test]
    fn selectors_follow_upstream_rules() {
        let l = |v: serde_json::Value| -> BTreeMap<String, String> {
            serde_json::from_value(v).unwrap()
        };
        let sel = |v: serde_json::Value| Selector::parse(Some(&serde_json::from_value(v).unwrap()));
        assert!(!Selector::parse(None)
            .unwrap()
            .matches(&l(serde_json::json!({}))));
        assert!(sel(serde_json::json!({}))
            .unwrap()
            .matches(&l(serde_json::json!({"a": "1"}))));
        let s = sel(
            serde_json::json!({"matchLabels": {"app": "x"}, "matchExpressions": [
            {"key": "tier", "operator": "NotIn", "values": ["db"]},
            {"key": "gone", "operator": "DoesNotExist"}]}),
        )
        .unwrap();
        assert!(s.matches(&l(serde_json::json!({"app": "x"}))));
        assert!(s.matches(&l(serde_json::json!({"app": "x", "tier": "web"}))));
        assert!(!s.matches(&l(serde_json::json!({"app": "x", "tier": "db"}))));
        assert!(!s.matches(&l(serde_json::json!({"app": "x", "gone": ""}))));
        assert!(!s.matches(&l(serde_json::json!({"app": "y"}))));
        let e = sel(serde_json::json!({"matchExpressions": [{"key": "k", "operator": "In"}]}))
            .unwrap_err();
        assert!(
            e.contains("\"k\"") && e.contains("needs at least one value"),
            "{e}"
        );
        let e = sel(serde_json::json!({"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["1"]}]}))
            .unwrap_err();
        assert!(e.contains("\"Gt\""), "{e}");
    }

    #[test]
    fn invalid_terms_name_the_field() {
        let raw: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c"}], "affinity": anti(
                serde_json::json!({"matchExpressions": [{"key": "k", "operator": "Exists", "values": ["v"]}]}),
                "kubernetes.io/hostname")}
        }))
        .unwrap();
        let e = RequiredTerms::of(&raw).unwrap_err();
        assert!(
            e.starts_with("spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector: "),
            "{e}"
        );
        assert!(e.contains("takes no values"), "{e}");
    }

    #[test]
    fn anti_affinity_keeps_a_pod_off_nodes_with_matching_pods() {
        let sel = serde_json::json!({"matchLabels": {"gang": "g"}});
        let a = pod(
            "a",
            "default",
            serde_json::json!({"gang": "g"}),
            anti(sel.clone(), "kubernetes.io/hostname"),
        );
        let b = pod(
            "b",
            "default",
            serde_json::json!({"gang": "g"}),
            anti(sel.clone(), "kubernetes.io/hostname"),
        );
        let c = cache_with(&[(&a, "n0")]);
        assert_eq!(verdicts(&c, &b), vec![Some(ERR_ANTI_AFFINITY), None, None]);
        // Zone as the topology: both nodes of zone a are out.
        let z = pod(
            "z",
            "default",
            serde_json::json!({}),
            anti(sel.clone(), "zone"),
        );
        assert_eq!(
            verdicts(&c, &z),
            vec![Some(ERR_ANTI_AFFINITY), Some(ERR_ANTI_AFFINITY), None]
        );
        // Another namespace is not selected by a term without namespaces.
        let other = pod("o", "other", serde_json::json!({}), anti(sel, "zone"));
        assert_eq!(verdicts(&c, &other), vec![None, None, None]);
    }

    #[test]
    fn existing_pods_anti_affinity_is_symmetric() {
        // The placed pod refuses neighbours labelled app=web; the incoming
        // one has no terms at all.
        let guard = pod(
            "guard",
            "default",
            serde_json::json!({}),
            anti(serde_json::json!({"matchLabels": {"app": "web"}}), "zone"),
        );
        let c = cache_with(&[(&guard, "n1")]);
        let web = pod(
            "web",
            "default",
            serde_json::json!({"app": "web"}),
            serde_json::json!(null),
        );
        assert_eq!(
            verdicts(&c, &web),
            vec![
                Some(ERR_EXISTING_ANTI_AFFINITY),
                Some(ERR_EXISTING_ANTI_AFFINITY),
                None
            ]
        );
        let db = pod(
            "db",
            "default",
            serde_json::json!({"app": "db"}),
            serde_json::json!(null),
        );
        assert_eq!(verdicts(&c, &db), vec![None, None, None]);
        // A namespaceSelector on the metadata.name label reaches other namespaces.
        let guard_all = pod(
            "guard",
            "default",
            serde_json::json!({}),
            serde_json::json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname",
                 "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "prod"}}}]}}),
        );
        let c = cache_with(&[(&guard_all, "n2")]);
        let prod_web = pod(
            "w",
            "prod",
            serde_json::json!({"app": "web"}),
            serde_json::json!(null),
        );
        assert_eq!(
            verdicts(&c, &prod_web),
            vec![None, None, Some(ERR_EXISTING_ANTI_AFFINITY)]
        );
        let dev_web = pod(
            "w",
            "dev",
            serde_json::json!({"app": "web"}),
            serde_json::json!(null),
        );
        assert_eq!(verdicts(&c, &dev_web), vec![None, None, None]);
    }

    #[test]
    fn affinity_needs_a_matching_pod_in_the_domain_except_for_the_first() {
        let sel = serde_json::json!({"matchLabels": {"app": "cache"}});
        let cache_pod = pod(
            "c0",
            "default",
            serde_json::json!({"app": "cache"}),
            serde_json::json!(null),
        );
        let c = cache_with(&[(&cache_pod, "n2")]);
        let follower = pod(
            "f",
            "default",
            serde_json::json!({}),
            aff(sel.clone(), "zone"),
        );
        assert_eq!(
            verdicts(&c, &follower),
            vec![Some(ERR_AFFINITY), Some(ERR_AFFINITY), None]
        );
        // Nobody matches yet: a pod that does not match its own terms waits...
        let empty = cache_with(&[]);
        assert_eq!(verdicts(&empty, &follower), vec![Some(ERR_AFFINITY); 3]);
        // ...one that matches them starts the series anywhere.
        let first = pod(
            "c1",
            "default",
            serde_json::json!({"app": "cache"}),
            aff(sel, "zone"),
        );
        assert_eq!(verdicts(&empty, &first), vec![None, None, None]);
        // A node without the topology label never satisfies affinity.
        let nolabel = pod(
            "x",
            "default",
            serde_json::json!({"app": "cache"}),
            aff(serde_json::json!({}), "rack"),
        );
        assert_eq!(verdicts(&c, &nolabel), vec![Some(ERR_AFFINITY); 3]);
    }

    #[test]
    fn removing_a_pod_updates_the_counts_as_preemption_needs() {
        let sel = serde_json::json!({"matchLabels": {"gang": "g"}});
        let a = pod(
            "a",
            "default",
            serde_json::json!({"gang": "g"}),
            anti(sel.clone(), "kubernetes.io/hostname"),
        );
        let b = pod(
            "b",
            "default",
            serde_json::json!({"gang": "g"}),
            anti(sel, "kubernetes.io/hostname"),
        );
        let c = cache_with(&[(&a, "n0")]);
        let mut s = InterPodState::compute(&c, &b);
        let n0 = c.node("n0").unwrap();
        assert!(filter(&s, &b, n0).is_some());
        s.update_with_pod(&b, &a, n0, -1);
        assert!(s.is_empty());
        assert!(filter(&s, &b, n0).is_none());
        s.update_with_pod(&b, &a, n0, 1);
        assert_eq!(filter(&s, &b, n0), Some((ERR_ANTI_AFFINITY, false)));
    }
}
