//! The scheduler's view of the cluster: nodes and the pods placed on them.
//!
//! A pod is *assumed* on its node the moment the scheduler decides, before
//! the binding request is even sent, so the next decision already sees the
//! resources as taken. The watch event of the bound pod *confirms* it; a
//! failed binding *forgets* it. Whatever order the binding response, the
//! watch event and the next decision come in, a pod is counted on exactly
//! one node exactly once, and a finished or deleted pod is never resurrected
//! by a late binding response: over-allocation cannot happen through the
//! cache.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use crate::model::{NodeInfo, PodInfo, PodKey};
use crate::resources::QuantityError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PodState {
    /// Decided by us; the binding is in flight or done but not yet seen on the watch.
    Assumed,
    /// Seen bound on the watch.
    Bound,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CacheError {
    #[error("pod {0} is already in the cache")]
    AlreadyPresent(String),
    #[error("node {0} is not in the cache")]
    NoSuchNode(String),
}

#[derive(Debug, Default)]
pub struct Cache {
    nodes: HashMap<String, NodeInfo>,
    /// Nodes in the order they were added: the order filters walk them in.
    node_order: Vec<String>,
    pods: HashMap<PodKey, (String, PodState)>,
    /// Pods that preempted others and wait for the room on this node.
    nominated: HashMap<PodKey, (String, Arc<PodInfo>)>,
    generation: u64,
    /// Placed pods with required anti-affinity terms: the only ones the
    /// symmetric anti-affinity check has to look at (upstream keeps the
    /// same list per node).
    with_anti_affinity: BTreeSet<PodKey>,
    /// Placed (bound or assumed) pods per pod group `namespace/name`.
    group_placed: HashMap<String, usize>,
}

impl Cache {
    pub fn new() -> Cache {
        Cache::default()
    }

    /// Changes whenever anything a filter or a score reads changes.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn node_names(&self) -> &[String] {
        &self.node_order
    }

    /// Nodes that exist (not placeholders for pods seen before their node).
    pub fn node_count(&self) -> usize {
        self.node_order.len()
    }

    pub fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.nodes.get(name).filter(|n| n.node.is_some())
    }

    pub fn nodes(&self) -> impl Iterator<Item = &NodeInfo> {
        self.node_order.iter().filter_map(|n| self.nodes.get(n))
    }

    /// Adds or updates a node. Returns true if it is new.
    pub fn upsert_node(&mut self, node: Node) -> Result<bool, QuantityError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        self.generation += 1;
        let entry = self
            .nodes
            .entry(name.clone())
            .or_insert_with(|| NodeInfo::empty(&name));
        let new = entry.node.is_none();
        entry.set_node(node)?;
        if new {
            self.node_order.push(name);
        }
        Ok(new)
    }

    pub fn remove_node(&mut self, name: &str) {
        self.generation += 1;
        self.node_order.retain(|n| n != name);
        if let Some(n) = self.nodes.get_mut(name) {
            if n.pods.is_empty() {
                self.nodes.remove(name);
            } else {
                // Keep counting its pods until they go.
                n.node = None;
            }
        }
    }

    pub fn is_assumed(&self, key: &str) -> bool {
        matches!(self.pods.get(key), Some((_, PodState::Assumed)))
    }

    pub fn contains_pod(&self, key: &str) -> bool {
        self.pods.contains_key(key)
    }

    pub fn pod_node(&self, key: &str) -> Option<&str> {
        self.pods.get(key).map(|(n, _)| n.as_str())
    }

    /// Places a pod we just decided on, before its binding is sent.
    pub fn assume(&mut self, pod: Arc<PodInfo>, node: &str) -> Result<(), CacheError> {
        if self.pods.contains_key(&pod.key) {
            return Err(CacheError::AlreadyPresent(pod.key.clone()));
        }
        let Some(info) = self.nodes.get_mut(node).filter(|n| n.node.is_some()) else {
            return Err(CacheError::NoSuchNode(node.to_string()));
        };
        self.generation += 1;
        self.nominated.remove(&pod.key);
        self.pods
            .insert(pod.key.clone(), (node.to_string(), PodState::Assumed));
        Self::index(
            &mut self.with_anti_affinity,
            &mut self.group_placed,
            &pod,
            true,
        );
        info.add_pod(pod);
        Ok(())
    }

    /// The binding failed: release an assumed pod. A pod already confirmed by
    /// the watch (or gone) is left alone.
    pub fn forget(&mut self, key: &str) -> bool {
        if !self.is_assumed(key) {
            return false;
        }
        self.remove_pod(key);
        true
    }

    /// A bound, unfinished pod seen on the watch: confirms an assumed pod or
    /// adds it. Returns whether it was not seen bound before (upstream's
    /// `AssignedPodAdd`).
    pub fn add_or_update_bound(&mut self, pod: Arc<PodInfo>) -> bool {
        let Some(node) = pod.node_name().map(str::to_string) else {
            return false;
        };
        self.generation += 1;
        self.nominated.remove(&pod.key);
        let previous = self.pods.get(&pod.key).cloned();
        if let Some((old_node, _)) = previous.clone() {
            if let Some(n) = self.nodes.get_mut(&old_node) {
                // Labels and terms may have changed: unindex the old version.
                let old = if old_node != node {
                    n.remove_pod(&pod.key)
                } else {
                    n.pods.get(&pod.key).cloned()
                };
                if let Some(old) = old {
                    Self::index(
                        &mut self.with_anti_affinity,
                        &mut self.group_placed,
                        &old,
                        false,
                    );
                }
            }
        }
        Self::index(
            &mut self.with_anti_affinity,
            &mut self.group_placed,
            &pod,
            true,
        );
        self.pods
            .insert(pod.key.clone(), (node.clone(), PodState::Bound));
        self.nodes
            .entry(node.clone())
            .or_insert_with(|| NodeInfo::empty(&node))
            .add_pod(pod);
        !matches!(previous, Some((_, PodState::Bound)))
    }

    /// A pod deleted or finished: frees its resources. Returns whether it held any.
    pub fn remove_pod(&mut self, key: &str) -> bool {
        self.nominated.remove(key);
        let Some((node, _)) = self.pods.remove(key) else {
            return false;
        };
        self.generation += 1;
        if let Some(n) = self.nodes.get_mut(&node) {
            if let Some(old) = n.remove_pod(key) {
                Self::index(
                    &mut self.with_anti_affinity,
                    &mut self.group_placed,
                    &old,
                    false,
                );
            }
            if n.node.is_none() && n.pods.is_empty() {
                self.nodes.remove(&node);
            }
        }
        true
    }

    fn index(
        with_anti: &mut BTreeSet<PodKey>,
        groups: &mut HashMap<String, usize>,
        pod: &PodInfo,
        add: bool,
    ) {
        if !pod.terms.anti_affinity.is_empty() {
            if add {
                with_anti.insert(pod.key.clone());
            } else {
                with_anti.remove(&pod.key);
            }
        }
        if let Some(g) = &pod.group {
            if add {
                *groups.entry(g.clone()).or_insert(0) += 1;
            } else if let Some(c) = groups.get_mut(g) {
                *c -= 1;
                if *c == 0 {
                    groups.remove(g);
                }
            }
        }
    }

    /// Placed pods with required anti-affinity terms, and their nodes (that
    /// exist: a pod on a node not yet seen has no topology).
    pub fn pods_with_required_anti_affinity(
        &self,
    ) -> impl Iterator<Item = (&Arc<PodInfo>, &NodeInfo)> + '_ {
        self.with_anti_affinity.iter().filter_map(|k| {
            let (node, _) = self.pods.get(k)?;
            let n = self.node(node)?;
            Some((n.pods.get(k)?, n))
        })
    }

    /// How many pods of the group `namespace/name` are placed (bound or assumed).
    pub fn group_placed(&self, group: &str) -> usize {
        self.group_placed.get(group).copied().unwrap_or(0)
    }

    /// Records that `pod` waits for room on `node` (after preemption).
    pub fn nominate(&mut self, pod: Arc<PodInfo>, node: &str) {
        self.generation += 1;
        self.nominated
            .insert(pod.key.clone(), (node.to_string(), pod));
    }

    pub fn clear_nomination(&mut self, key: &str) {
        if self.nominated.remove(key).is_some() {
            self.generation += 1;
        }
    }

    /// Pods nominated on `node` (upstream `addNominatedPods` adds those with
    /// priority >= the incoming pod's before filtering).
    pub fn nominated_on<'a>(
        &'a self,
        node: &'a str,
    ) -> impl Iterator<Item = &'a Arc<PodInfo>> + 'a {
        self.nominated
            .values()
            .filter(move |(n, _)| n == node)
            .map(|(_, p)| p)
    }

    pub fn nomination_of(&self, key: &str) -> Option<&str> {
        self.nominated.get(key).map(|(n, _)| n.as_str())
    }

    pub fn has_nominations(&self) -> bool {
        !self.nominated.is_empty()
    }

    /// Pod keys the cache holds (for resync after a watch restart).
    pub fn pod_keys(&self) -> Vec<PodKey> {
        self.pods.keys().cloned().collect()
    }

    /// Checks that no node holds more than its allocatable. Used by tests and debug assertions.
    pub fn overcommitted_nodes(&self) -> Vec<String> {
        self.nodes
            .values()
            .filter(|n| n.node.is_some())
            .filter(|n| {
                let a = &n.allocatable;
                let r = &n.requested;
                r.milli_cpu > a.milli_cpu
                    || r.memory > a.memory
                    || (a.pods > 0 && n.pod_count() > a.pods)
                    || r.scalar.iter().any(|(k, v)| *v > a.get(k))
            })
            .map(|n| n.name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, cpu: &str) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "1Gi", "pods": "110"}}
        }))
        .unwrap()
    }

    fn pod(name: &str, node: Option<&str>) -> Arc<PodInfo> {
        let mut spec = serde_json::json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]});
        if let Some(n) = node {
            spec["nodeName"] = serde_json::json!(n);
        }
        Arc::new(
            PodInfo::new(
                serde_json::from_value(serde_json::json!({
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": spec
                }))
                .unwrap(),
            )
            .unwrap(),
        )
    }

    #[test]
    fn assume_confirm_forget() {
        let mut c = Cache::new();
        c.upsert_node(node("n0", "2")).unwrap();
        c.assume(pod("a", None), "n0").unwrap();
        assert_eq!(c.node("n0").unwrap().requested.milli_cpu, 1000);
        // Watch confirms it: still counted once.
        c.add_or_update_bound(pod("a", Some("n0")));
        assert_eq!(c.node("n0").unwrap().requested.milli_cpu, 1000);
        assert!(!c.forget("default/a"), "a confirmed pod is not forgotten");
        // A failed binding releases an assumed pod.
        c.assume(pod("b", None), "n0").unwrap();
        assert_eq!(c.node("n0").unwrap().requested.milli_cpu, 2000);
        assert!(c.forget("default/b"));
        assert_eq!(c.node("n0").unwrap().requested.milli_cpu, 1000);
        assert_eq!(
            c.assume(pod("a", None), "n0"),
            Err(CacheError::AlreadyPresent("default/a".into()))
        );
    }

    #[test]
    fn finished_before_binding_returns_is_not_resurrected() {
        let mut c = Cache::new();
        c.upsert_node(node("n0", "1")).unwrap();
        c.assume(pod("a", None), "n0").unwrap();
        // The watch shows it bound then finished before the binding response arrives.
        c.add_or_update_bound(pod("a", Some("n0")));
        assert!(c.remove_pod("default/a"));
        // The late response (success or failure) changes nothing.
        assert!(!c.forget("default/a"));
        assert_eq!(c.node("n0").unwrap().requested.milli_cpu, 0);
        assert!(c.overcommitted_nodes().is_empty());
    }

    #[test]
    fn pods_before_their_node_are_counted() {
        let mut c = Cache::new();
        c.add_or_update_bound(pod("a", Some("n0")));
        assert!(c.node("n0").is_none());
        c.upsert_node(node("n0", "1")).unwrap();
        assert_eq!(c.node("n0").unwrap().requested.milli_cpu, 1000);
        assert_eq!(c.node_names(), ["n0".to_string()]);
    }
}
