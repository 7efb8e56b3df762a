//! The admission plugins kube-apiserver runs by default that change or
//! refuse pods, done on a pod's create (under the store's lock, as they
//! read other objects):
//!
//! - `Priority`: `spec.priorityClassName` resolved to `spec.priority` and
//!   `spec.preemptionPolicy` (the global default class, or 0 and
//!   `PreemptLowerPriority`, without one); 403 for a class that does not
//!   exist, or a priority or preemption policy the pod gave itself that is
//!   not its class's. The broker, which writes its pods through the Rust
//!   API with the priority of their Batsim job, is not held to it.
//! - `DefaultTolerationSeconds`: tolerations of the `not-ready` and
//!   `unreachable` NoExecute taints for [`StoreConfig::default_toleration_seconds`],
//!   unless the pod tolerates them already.
//! - `PodTopologyLabels`: a pod created bound to a node gets the node's
//!   `topology.kubernetes.io/zone` and `/region` labels.
//!
//! Not done (written down in `fakeapi/README.md`): `ServiceAccount` (no
//! service account token volume), `LimitRanger`. `ResourceQuota` is
//! `quota.rs`.
//!
//! [`StoreConfig::default_toleration_seconds`]: super::StoreConfig::default_toleration_seconds

use super::{meta_str, Origin, State, Store};
use crate::error::{ApiError, Result};
use crate::resources;
use serde_json::{json, Value};

const NOT_READY: &str = "node.kubernetes.io/not-ready";
const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
const TOPOLOGY_LABELS: [&str; 2] = [
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

/// The PriorityClasses kube-apiserver writes when it starts.
pub(crate) fn system_priority_classes() -> [Value; 2] {
    [
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "system-node-critical"}, "value": 2000001000,
            "description": "Used for system critical pods that must not be moved from their current node."}),
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "system-cluster-critical"}, "value": 2000000000,
            "description": "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."}),
    ]
}

/// The Service `default/kubernetes` that kube-apiserver's bootstrap
/// controller keeps, the API server's own address in the cluster: the first
/// address of the service range (10.96.0.0/16 here, as kubeadm's default),
/// port 443 `https`. Clients read it (the e2e suite learns the cluster's IP
/// family from it). Its `targetPort` is kube-apiserver's default secure
/// port: the store does not know where it is served, and nothing routes
/// cluster IPs in a simulation, so it has no Endpoints.
pub(crate) fn kubernetes_service() -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
            "internalTrafficPolicy": "Cluster", "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
            "sessionAffinity": "None", "type": "ClusterIP"},
        "status": {"loadBalancer": {}}})
}

impl Store {
    /// Admits a new pod (see the module doc).
    pub(super) fn admit_pod(&self, st: &State, pod: &mut Value, origin: Origin) -> Result<()> {
        if origin == Origin::Http {
            // `RuntimeClass`: an overhead comes from a runtime class only.
            if pod.pointer("/spec/overhead").is_some()
                && pod.pointer("/spec/runtimeClassName").is_none()
            {
                return Err(ApiError::Forbidden {
                    resource: "pods".into(),
                    name: meta_str(pod, "name").unwrap_or("").to_string(),
                    message: "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead".into(),
                });
            }
            self.admit_priority(st, pod)?;
        } else if let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) {
            spec.entry("priority").or_insert(json!(0));
            spec.entry("preemptionPolicy")
                .or_insert(json!("PreemptLowerPriority"));
        }
        if let Some(secs) = self.inner.config.default_toleration_seconds {
            default_tolerations(pod, secs);
        }
        topology_labels(st, pod);
        Ok(())
    }

    fn admit_priority(&self, st: &State, pod: &mut Value) -> Result<()> {
        let name = meta_str(pod, "name").unwrap_or("").to_string();
        let forbidden = |why: String| ApiError::Forbidden {
            resource: "pods".into(),
            name: name.clone(),
            message: why,
        };
        let (idx, _) = resources::builtin("scheduling.k8s.io", "v1", "priorityclasses")
            .expect("priorityclasses row");
        let classes = &st.tables[idx].objects;
        let class_name = pod
            .pointer("/spec/priorityClassName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let (class_name, priority, policy) = if class_name.is_empty() {
            // The global default with the lowest value, if any.
            let default = classes
                .values()
                .filter(|c| c.value.get("globalDefault") == Some(&json!(true)))
                .min_by_key(|c| c.value.get("value").and_then(Value::as_i64).unwrap_or(0));
            match default {
                Some(c) => (
                    meta_str(&c.value, "name").unwrap_or("").to_string(),
                    c.value.get("value").and_then(Value::as_i64).unwrap_or(0),
                    c.value
                        .get("preemptionPolicy")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                ),
                None => (String::new(), 0, Some("PreemptLowerPriority".to_string())),
            }
        } else {
            let c = classes
                .get(&(String::new(), class_name.clone()))
                .ok_or_else(|| {
                    forbidden(format!("no PriorityClass with name {class_name} was found"))
                })?;
            (
                class_name,
                c.value.get("value").and_then(Value::as_i64).unwrap_or(0),
                c.value
                    .get("preemptionPolicy")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            )
        };
        if let Some(given) = pod.pointer("/spec/priority").and_then(Value::as_i64) {
            if given != priority {
                return Err(forbidden(format!(
                    "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {priority} from the given PriorityClass name"
                )));
            }
        }
        let spec = &mut pod["spec"];
        if !class_name.is_empty() {
            spec["priorityClassName"] = json!(class_name);
        }
        spec["priority"] = json!(priority);
        if let Some(p) = policy {
            if let Some(given) = spec.get("preemptionPolicy").and_then(Value::as_str) {
                if given != p {
                    return Err(forbidden(format!(
                        "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {p} from the given PriorityClass name"
                    )));
                }
            }
            spec["preemptionPolicy"] = json!(p);
        }
        Ok(())
    }
}

/// A new Service's cluster IP, as kube-apiserver's allocator gives it: the
/// first free address of 10.96.0.0/16 after 10.96.0.9 (kube-apiserver picks
/// at random; here the order of creation decides), with its family fields.
/// `ExternalName` services get none; a headless one (`None`) keeps `None`.
pub(super) fn allocate_service_ip(st: &State, svc: &mut Value) {
    let Some(spec) = svc.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.get("type").and_then(Value::as_str) == Some("ExternalName") {
        return;
    }
    let ip = match spec.get("clusterIP").and_then(Value::as_str) {
        Some(ip) if !ip.is_empty() => ip.to_string(),
        _ => {
            let (idx, _) = resources::builtin("", "v1", "services").expect("services row");
            let used: std::collections::HashSet<&str> = st.tables[idx]
                .objects
                .values()
                .filter_map(|s| s.value.pointer("/spec/clusterIP").and_then(Value::as_str))
                .collect();
            let Some(free) = (10u32..65534)
                .map(|n| format!("10.96.{}.{}", n >> 8, n & 0xff))
                .find(|ip| !used.contains(ip.as_str()))
            else {
                return;
            };
            free
        }
    };
    spec.insert("clusterIP".into(), json!(ip));
    spec.entry("clusterIPs").or_insert_with(|| json!([ip]));
    spec.entry("ipFamilies").or_insert_with(|| json!(["IPv4"]));
    spec.entry("ipFamilyPolicy")
        .or_insert_with(|| json!("SingleStack"));
}

/// `DefaultTolerationSeconds`: a pod that does not tolerate the not-ready
/// or the unreachable NoExecute taint gets a toleration of it for `secs`.
fn default_tolerations(pod: &mut Value, secs: u64) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let tols = spec.entry("tolerations").or_insert_with(|| json!([]));
    let Some(list) = tols.as_array_mut() else {
        return;
    };
    let mut added = Vec::new();
    for key in [NOT_READY, UNREACHABLE] {
        let tolerated = list.iter().any(|t| {
            let k = t.get("key").and_then(Value::as_str).unwrap_or("");
            let e = t.get("effect").and_then(Value::as_str).unwrap_or("");
            (k == key || k.is_empty()) && (e == "NoExecute" || e.is_empty())
        });
        if !tolerated {
            added.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": secs}));
        }
    }
    list.extend(added);
    if list.is_empty() {
        spec.remove("tolerations");
    }
}

/// `PodTopologyLabels` for a pod created on a node.
fn topology_labels(st: &State, pod: &mut Value) {
    let Some(node) = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string)
    else {
        return;
    };
    let (nodes, _) = resources::builtin("", "v1", "nodes").expect("nodes row");
    let Some(n) = st.tables[nodes].objects.get(&(String::new(), node)) else {
        return;
    };
    let copy: Vec<(String, Value)> = TOPOLOGY_LABELS
        .iter()
        .filter_map(|l| {
            n.value
                .pointer("/metadata/labels")
                .and_then(|m| m.get(*l))
                .map(|v| (l.to_string(), v.clone()))
        })
        .collect();
    if copy.is_empty() {
        return;
    }
    let m = super::meta_mut(pod);
    let labels = m.entry("labels").or_insert_with(|| json!({}));
    if let Some(labels) = labels.as_object_mut() {
        labels.extend(copy);
    }
}
