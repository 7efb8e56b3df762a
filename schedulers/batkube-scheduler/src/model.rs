//! What the scheduler knows about a pod and a node, precomputed once per
//! watch event so that a scheduling cycle never re-parses quantities.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::affinity::RequiredTerms;
use crate::gang::POD_GROUP_LABEL;
use crate::resources::{node_allocatable, pod_requests, QuantityError, Resources};

/// `namespace/name`, the queue's and the cache's key.
pub type PodKey = String;

pub fn pod_key(pod: &Pod) -> PodKey {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// A pod with everything a scheduling cycle needs, computed once.
#[derive(Debug, Clone)]
pub struct PodInfo {
    pub key: PodKey,
    pub pod: Arc<Pod>,
    /// Requests as `NodeResourcesFit`'s filter counts them.
    pub requests: Resources,
    /// Requests with the upstream non-zero defaults, for scoring.
    pub non_zero_requests: Resources,
    pub priority: i32,
    /// Required pod (anti-)affinity terms, for `InterPodAffinity`.
    pub terms: RequiredTerms,
    /// Why the terms could not be read (the pod waits with this reason).
    pub terms_error: Option<String>,
    /// `namespace/name` of the pod group it belongs to (label
    /// `scheduling.x-k8s.io/pod-group`), whether or not gangs are served.
    pub group: Option<String>,
}

impl PodInfo {
    pub fn new(pod: Pod) -> Result<PodInfo, QuantityError> {
        let requests = pod_requests(&pod, false)?;
        let non_zero_requests = pod_requests(&pod, true)?;
        let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
        let (terms, terms_error) = match RequiredTerms::of(&pod) {
            Ok(t) => (t, None),
            Err(e) => (RequiredTerms::default(), Some(e)),
        };
        let group = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(POD_GROUP_LABEL))
            .filter(|g| !g.is_empty())
            .map(|g| {
                format!(
                    "{}/{g}",
                    pod.metadata.namespace.as_deref().unwrap_or("default")
                )
            });
        Ok(PodInfo {
            key: pod_key(&pod),
            pod: Arc::new(pod),
            requests,
            non_zero_requests,
            priority,
            terms,
            terms_error,
            group,
        })
    }

    pub fn namespace(&self) -> &str {
        self.pod.metadata.namespace.as_deref().unwrap_or("default")
    }

    pub fn name(&self) -> &str {
        self.pod.metadata.name.as_deref().unwrap_or("")
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key))
            .map(String::as_str)
    }

    pub fn uid(&self) -> &str {
        self.pod.metadata.uid.as_deref().unwrap_or("")
    }

    pub fn node_name(&self) -> Option<&str> {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty())
    }

    pub fn scheduler_name(&self) -> &str {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or("default-scheduler")
    }

    pub fn nominated_node_name(&self) -> Option<&str> {
        self.pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            .filter(|n| !n.is_empty())
    }

    /// Succeeded or Failed: holds no resources any more.
    pub fn is_finished(&self) -> bool {
        matches!(
            self.pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded") | Some("Failed")
        )
    }

    pub fn is_terminating(&self) -> bool {
        self.pod.metadata.deletion_timestamp.is_some()
    }

    pub fn preemption_policy_never(&self) -> bool {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.preemption_policy.as_deref())
            == Some("Never")
    }

    /// Start time as upstream's `GetPodStartTime` (creation time as fallback).
    pub fn start_time(&self) -> Option<&Time> {
        self.pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .or(self.pod.metadata.creation_timestamp.as_ref())
    }
}

/// A node and the pods the cache places on it (bound or assumed).
#[derive(Debug, Clone, Default)]
pub struct NodeInfo {
    pub name: String,
    /// `None` while pods are known on a node the node watch has not shown yet.
    pub node: Option<Arc<Node>>,
    pub allocatable: Resources,
    pub requested: Resources,
    pub non_zero_requested: Resources,
    pub pods: BTreeMap<PodKey, Arc<PodInfo>>,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
}

impl NodeInfo {
    pub fn empty(name: &str) -> NodeInfo {
        NodeInfo {
            name: name.to_string(),
            ..NodeInfo::default()
        }
    }

    pub fn set_node(&mut self, node: Node) -> Result<(), QuantityError> {
        self.allocatable = node_allocatable(&node)?;
        self.labels = node.metadata.labels.clone().unwrap_or_default();
        let spec = node.spec.as_ref();
        self.taints = spec.and_then(|s| s.taints.clone()).unwrap_or_default();
        self.unschedulable = spec.and_then(|s| s.unschedulable).unwrap_or(false);
        self.node = Some(Arc::new(node));
        Ok(())
    }

    pub fn add_pod(&mut self, pod: Arc<PodInfo>) {
        self.requested.add(&pod.requests);
        self.non_zero_requested.add(&pod.non_zero_requests);
        if let Some(old) = self.pods.insert(pod.key.clone(), pod) {
            self.requested.sub(&old.requests);
            self.non_zero_requested.sub(&old.non_zero_requests);
        }
    }

    pub fn remove_pod(&mut self, key: &str) -> Option<Arc<PodInfo>> {
        let old = self.pods.remove(key)?;
        self.requested.sub(&old.requests);
        self.non_zero_requested.sub(&old.non_zero_requests);
        Some(old)
    }

    /// Number of pods the `pods` resource counts.
    pub fn pod_count(&self) -> i64 {
        self.pods.len() as i64
    }
}

/// Whether a node update can make an unschedulable pod schedulable
/// (upstream `nodeSchedulingPropertiesChange`): heartbeats are not.
pub fn node_scheduling_properties_changed(old: &Node, new: &Node) -> bool {
    let spec = |n: &Node| {
        let s = n.spec.as_ref();
        (
            s.and_then(|s| s.unschedulable).unwrap_or(false),
            s.and_then(|s| s.taints.clone()).unwrap_or_default(),
        )
    };
    let alloc = |n: &Node| n.status.as_ref().and_then(|s| s.allocatable.clone());
    let ready = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .map(|cs| {
                cs.iter()
                    .map(|c| (c.type_.clone(), c.status.clone()))
                    .collect::<Vec<_>>()
            })
    };
    spec(old) != spec(new)
        || alloc(old) != alloc(new)
        || old.metadata.labels != new.metadata.labels
        || ready(old) != ready(new)
}
