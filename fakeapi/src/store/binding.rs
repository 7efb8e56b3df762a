//! The binding subresource (`pods/{name}/binding`, and the older
//! `namespaces/{ns}/bindings`): a scheduler's decision, accepted or refused
//! exactly as kube-apiserver 1.35 does it.
//!
//! kube-apiserver's path for a Binding (`BindingREST.Create` and
//! `setPodNodeAndMetadata` in `pkg/registry/core/pod/storage`, the create
//! handler before them) checks, in this order, and answers:
//!
//! | check | answer |
//! |---|---|
//! | the body's namespace is not the URL's | 400 `the namespace of the provided object does not match the namespace sent on the request` |
//! | the body's name is not the URL's pod (an empty one included) | 400 `name in URL does not match name in Binding object` |
//! | `target.kind` neither empty nor `Node`, `target.name` empty | 500 without a reason (the validation's errors are not a `Status`): `target.name: Required value` |
//! | no name at all (the older `bindings` path) | 400 `Name parameter required.` |
//! | the pod does not exist | 404 `pods "p" not found` |
//! | `metadata.uid` or `metadata.resourceVersion` given and not the pod's | 409 on `pods` (a storage precondition) |
//! | the pod is being deleted | 409 on `pods/binding`: `pod p is being deleted, cannot be assigned to a host` |
//! | the pod already has a node | 409 on `pods/binding`: `pod p is already assigned to node "n"` |
//! | the pod has scheduling gates | 409 on `pods/binding`: `pod p has non-empty .spec.schedulingGates` |
//!
//! Accepted, the pod gets `spec.nodeName`, loses `status.nominatedNodeName`
//! (`ClearingNominatedNodeNameAfterBinding`, on by default in 1.35), gets the
//! Binding's annotations and labels, plus, when `target.kind` is `Node`, the
//! node's `topology.kubernetes.io/zone` and `/region` labels (the
//! `PodTopologyLabels` admission plugin, on by default in 1.35), and a
//! `PodScheduled=True` condition (its transition time kept when it was
//! already true). `dryRun` checks everything and changes nothing.

use super::{kind_error, meta_mut, meta_str, EventType, Origin, Store};
use crate::error::{go_quote, ApiError, Result};
use crate::registry::Served;
use crate::resources;
use serde_json::{json, Map, Value};

/// The node labels kube-apiserver's `PodTopologyLabels` admission copies
/// onto a pod when it is bound.
const TOPOLOGY_LABELS: [&str; 2] = [
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
];

/// A Binding as a request carries it.
pub(crate) struct BindRequest<'a> {
    /// The namespace of the URL.
    pub namespace: &'a str,
    /// The pod of the URL (`pods/{name}/binding`); `None` on the older
    /// `bindings` path, where the Binding's own name is the pod's.
    pub pod: Option<&'a str>,
    /// The Binding.
    pub body: &'a Value,
    /// `dryRun=All`: check, change nothing.
    pub dry_run: bool,
}

impl Store {
    /// Binds a pod as the binding subresource does (see the module doc).
    pub(crate) fn bind(&self, req: BindRequest<'_>, origin: Origin) -> Result<()> {
        let body = req.body;
        let body_name = meta_str(body, "name").unwrap_or("");
        if let Some(ns) = meta_str(body, "namespace").filter(|n| !n.is_empty()) {
            if ns != req.namespace {
                return Err(ApiError::BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request".into(),
                ));
            }
        }
        if req.pod.is_some_and(|p| p != body_name) {
            return Err(ApiError::BadRequest(
                "name in URL does not match name in Binding object".into(),
            ));
        }
        let pod = body_name;
        let kind = body
            .pointer("/target/kind")
            .and_then(Value::as_str)
            .unwrap_or("");
        let target = body
            .pointer("/target/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut invalid = Vec::new();
        if !kind.is_empty() && kind != "Node" {
            invalid.push(format!(
                "target.kind: Unsupported value: {}: supported values: \"Node\", \"<empty>\"",
                go_quote(kind)
            ));
        }
        if target.is_empty() {
            invalid.push("target.name: Required value".to_string());
        }
        match invalid.len() {
            0 => {}
            1 => return Err(ApiError::Storage(invalid.remove(0))),
            _ => return Err(ApiError::Storage(format!("[{}]", invalid.join(", ")))),
        }
        check_path_segment(pod)?;

        let (idx, info) = resources::builtin("", "v1", "pods").expect("pods row");
        let served = Served::builtin(idx, info);
        let now = self.now_str();
        let mut st = self.inner.state.write();
        let key = (req.namespace.to_string(), pod.to_string());
        let old = st.tables[idx]
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| kind_error(info, pod))?;
        // Storage preconditions: the generic store's wording, on `pods`.
        let storage_key = format!("/registry/pods/{}/{pod}", req.namespace);
        if let Some(uid) = meta_str(body, "uid").filter(|u| !u.is_empty()) {
            let current = meta_str(&old.value, "uid").unwrap_or("");
            if uid != current {
                return Err(precondition_failed(
                    pod,
                    &storage_key,
                    format!("UID in precondition: {uid}, UID in object meta: {current}"),
                ));
            }
        }
        if let Some(rv) = meta_str(body, "resourceVersion").filter(|r| !r.is_empty()) {
            if rv != old.rv.to_string() {
                return Err(precondition_failed(
                    pod,
                    &storage_key,
                    format!(
                        "ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        old.rv
                    ),
                ));
            }
        }
        let refused = |why: String| ApiError::conflict("pods/binding", pod, why);
        if meta_str(&old.value, "deletionTimestamp").is_some() {
            return Err(refused(format!(
                "pod {pod} is being deleted, cannot be assigned to a host"
            )));
        }
        if let Some(node) = old
            .value
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        {
            return Err(refused(format!(
                "pod {pod} is already assigned to node {}",
                go_quote(node)
            )));
        }
        if old
            .value
            .pointer("/spec/schedulingGates")
            .and_then(Value::as_array)
            .is_some_and(|g| !g.is_empty())
        {
            return Err(refused(format!(
                "pod {pod} has non-empty .spec.schedulingGates"
            )));
        }
        if req.dry_run {
            return Ok(());
        }

        // The labels the Binding brings: its own, then (PodTopologyLabels)
        // its node's topology labels over them.
        let mut labels: Map<String, Value> = string_map(body.pointer("/metadata/labels"));
        if kind == "Node" {
            let (nodes, _) = resources::builtin("", "v1", "nodes").expect("nodes row");
            if let Some(node) = st.tables[nodes]
                .objects
                .get(&(String::new(), target.to_string()))
            {
                for l in TOPOLOGY_LABELS {
                    if let Some(v) = node
                        .value
                        .pointer("/metadata/labels")
                        .and_then(|m| m.get(l))
                    {
                        labels.insert(l.to_string(), v.clone());
                    }
                }
            }
        }
        let annotations = string_map(body.pointer("/metadata/annotations"));

        let mut obj = (*old.value).clone();
        obj["spec"]["nodeName"] = json!(target);
        let m = meta_mut(&mut obj);
        for (field, add) in [("annotations", annotations), ("labels", labels)] {
            // kube-apiserver makes the map, but an empty one is not written.
            if add.is_empty() {
                continue;
            }
            let entry = m.entry(field).or_insert_with(|| json!({}));
            if !entry.is_object() {
                *entry = json!({});
            }
            entry.as_object_mut().expect("an object").extend(add);
        }
        if !obj.get("status").is_some_and(Value::is_object) {
            obj["status"] = json!({});
        }
        let status = obj["status"].as_object_mut().expect("status is an object");
        status.remove("nominatedNodeName");
        let conds = status.entry("conditions").or_insert_with(|| json!([]));
        if !conds.is_array() {
            *conds = json!([]);
        }
        let list = conds.as_array_mut().expect("conditions is an array");
        let scheduled = |since: Value| json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": since});
        match list
            .iter_mut()
            .find(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled"))
        {
            Some(c) => {
                let since = if c.get("status").and_then(Value::as_str) == Some("True") {
                    c.get("lastTransitionTime").cloned().unwrap_or(Value::Null)
                } else {
                    json!(now)
                };
                *c = scheduled(since);
            }
            None => list.push(scheduled(json!(now))),
        }
        self.commit(
            &mut st,
            &served,
            key,
            obj,
            Some(old),
            EventType::Modified,
            origin,
        );
        Ok(())
    }
}

/// A map of strings from a Binding's metadata (annotations, labels).
fn string_map(v: Option<&Value>) -> Map<String, Value> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(_, v)| v.is_string())
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The generic store's key check (`NamespaceKeyFunc`): a name must be
/// present and usable as a path segment.
fn check_path_segment(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(ApiError::BadRequest("Name parameter required.".into()));
    }
    let why: Vec<String> = if name == "." || name == ".." {
        vec![format!("may not be '{name}'")]
    } else {
        ["/", "%"]
            .iter()
            .filter(|c| name.contains(*c))
            .map(|c| format!("may not contain '{c}'"))
            .collect()
    };
    if why.is_empty() {
        return Ok(());
    }
    Err(ApiError::BadRequest(format!(
        "Name parameter invalid: {}: {}",
        go_quote(name),
        why.join(";")
    )))
}

/// A storage precondition that failed, as kube-apiserver words it: a 409
/// on `pods` quoting etcd's error (`StorageError: invalid object`).
fn precondition_failed(pod: &str, key: &str, what: String) -> ApiError {
    ApiError::conflict(
        "pods",
        pod,
        format!(
            "StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: {what}"
        ),
    )
}
