//! `--scenario FILE`: operations a user makes on the cluster at simulated
//! times (KEP-140's scenarios), read and checked before the simulation
//! starts. The broker applies them (see `broker/lifecycle.rs`).
//!
//! The file is a YAML list; each item has `at` (simulated seconds, >= 0)
//! and one operation:
//!
//! ```yaml
//! - at: 100
//!   cordon: node-3                  # spec.unschedulable + the unschedulable taint
//! - at: 100
//!   drain: node-3                   # cordon, then evict every pod bound there
//!   gracePeriodSeconds: 30          # optional: else each pod's own (30 s by default)
//! - at: 900
//!   uncordon: node-3
//! - at: 150
//!   delete: {kind: Pod, name: w0-7}  # namespace: default; gracePeriodSeconds as above
//! - at: 10
//!   create: {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: high}, value: 1000}
//! - at: 20
//!   patch: {kind: Node, name: node-1}
//!   merge: {metadata: {labels: {zone: b}}}   # or strategic: {...} or json: [...]
//! - at: 30
//!   addNode: {name: extra-0, cpu: 4, memory: 8Gi}
//! - at: 40
//!   removeNode: node-2
//! ```
//!
//! Custom kinds are those of the CustomResourceDefinitions given with
//! `--crds` (`Known::api`): their objects are checked against the CRD's
//! schema in a scratch store, as the API will check them. The broker runs
//! an instant's operations before Batsim's events of that instant.
//!
//! Refused before the simulation, with the item's line: a negative or
//! missing time, an unknown operation or field, a kind the API does not
//! serve, an object without `metadata.name` or that is not a valid Pod,
//! Node or PriorityClass or that its CRD's schema refuses, a node that does not exist at that time (a
//! platform node, or one added earlier and not removed since), a pod that
//! is neither a job's nor created earlier by the scenario.

use std::collections::BTreeSet;
use std::path::Path;

use fakeapi::PatchKind;
use serde_json::{json, Map, Value};

use crate::translate;

/// What an operation does.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Create {
        resource: String,
        namespace: Option<String>,
        object: Value,
    },
    Patch {
        resource: String,
        namespace: Option<String>,
        name: String,
        kind: PatchKindName,
        body: Value,
    },
    Delete {
        resource: String,
        namespace: Option<String>,
        name: String,
        grace: Option<i64>,
    },
    Cordon(String),
    Uncordon(String),
    Drain {
        node: String,
        grace: Option<i64>,
    },
    /// A Node object to create (Kubernetes-only, or a platform node back).
    AddNode {
        name: String,
        object: Value,
    },
    RemoveNode(String),
}

/// The patch formats (`fakeapi::PatchKind` is not `PartialEq`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PatchKindName {
    Merge,
    Strategic,
    Json,
}

impl PatchKindName {
    pub fn kind(self) -> PatchKind {
        match self {
            PatchKindName::Merge => PatchKind::Merge,
            PatchKindName::Strategic => PatchKind::StrategicMerge,
            PatchKindName::Json => PatchKind::Json,
        }
    }
}

/// One operation at its time.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    pub at: f64,
    /// The line of its item in the file.
    pub line: usize,
    pub action: Action,
}

impl Op {
    /// (verb, kind, namespace, name) for the timeline.
    pub fn describe(&self) -> (&'static str, String, String, String) {
        let ns = |n: &Option<String>| n.clone().unwrap_or_default();
        match &self.action {
            Action::Create {
                object, namespace, ..
            } => (
                "create",
                object["kind"].as_str().unwrap_or("").to_string(),
                ns(namespace),
                object["metadata"]["name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            ),
            Action::Patch {
                resource,
                namespace,
                name,
                ..
            } => ("patch", kind_of(resource), ns(namespace), name.clone()),
            Action::Delete {
                resource,
                namespace,
                name,
                ..
            } => ("delete", kind_of(resource), ns(namespace), name.clone()),
            Action::Cordon(n) => ("cordon", "Node".into(), String::new(), n.clone()),
            Action::Uncordon(n) => ("uncordon", "Node".into(), String::new(), n.clone()),
            Action::Drain { node, .. } => ("drain", "Node".into(), String::new(), node.clone()),
            Action::AddNode { name, .. } => {
                ("add-node", "Node".into(), String::new(), name.clone())
            }
            Action::RemoveNode(n) => ("remove-node", "Node".into(), String::new(), n.clone()),
        }
    }
}

fn kind_of(resource: &str) -> String {
    let plural = resource.split('.').next().unwrap_or(resource);
    fakeapi::resources::RESOURCES
        .iter()
        .find(|r| r.plural == plural)
        .map(|r| r.kind.to_string())
        .unwrap_or_else(|| resource.to_string())
}

/// What exists before the simulation starts, to check names against.
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// Node names of the platform's hosts.
    pub nodes: BTreeSet<String>,
    /// Pod names of the workloads' jobs, with their submission times.
    pub pods: std::collections::BTreeMap<String, f64>,
    /// What `--crds` installs: its CustomResourceDefinitions make their
    /// kinds creatable, patchable and deletable by a scenario, checked
    /// against their schemas.
    pub api: Vec<fakeapi::Manifest>,
}

/// A bad scenario, with the line.
#[derive(Debug, thiserror::Error)]
#[error("{path}:{line}: {message}")]
pub struct ScenarioError {
    pub path: String,
    pub line: usize,
    pub message: String,
}

/// The taint of a node Batsim does not know: Batsim jobs cannot run there.
pub const KUBERNETES_ONLY_TAINT: &str = "batkube.io/kubernetes-only";

pub fn load(path: &Path, known: &Known) -> anyhow::Result<Vec<Op>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read the scenario {}: {e}", path.display()))?;
    parse(&text, &path.display().to_string(), known).map_err(anyhow::Error::from)
}

/// Parses and checks a scenario; operations sorted by time (file order
/// among equal times).
pub fn parse(text: &str, path: &str, known: &Known) -> Result<Vec<Op>, ScenarioError> {
    let err = |line: usize, message: String| ScenarioError {
        path: path.to_string(),
        line,
        message,
    };
    let doc: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| {
        err(
            e.location().map(|l| l.line()).unwrap_or(1),
            format!("not valid YAML: {e}"),
        )
    })?;
    let items = match doc {
        serde_yaml::Value::Null => Vec::new(),
        serde_yaml::Value::Sequence(s) => s,
        _ => {
            return Err(err(
                1,
                "a scenario is a YAML list of operations (`- at: 10` then one operation)".into(),
            ))
        }
    };
    let lines = item_lines(text);
    // The kinds the run's API will serve, custom ones included: a scratch
    // store with --crds installed (already checked) resolves kinds and
    // validates custom objects as the API will.
    let api = fakeapi::Store::new();
    api.install_manifests(&known.api)
        .map_err(|e| err(1, format!("--crds: {e}")))?;
    let mut ops = Vec::new();
    for (k, item) in items.into_iter().enumerate() {
        let line = lines.get(k).copied().unwrap_or(1);
        let v: Value = serde_json::to_value(&item)
            .map_err(|e| err(line, format!("cannot read the operation: {e}")))?;
        let op = parse_op(v, line, &api).map_err(|m| err(line, m))?;
        ops.push(op);
    }
    ops.sort_by(|a, b| a.at.total_cmp(&b.at));
    check_names(&ops, known).map_err(|(line, m)| err(line, m))?;
    Ok(ops)
}

/// The line of each top-level list item (`- ` at the list's indentation).
fn item_lines(text: &str) -> Vec<usize> {
    let mut indent = None;
    let mut out = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let trimmed = l.trim_start();
        if trimmed.starts_with('#') || trimmed.is_empty() {
            continue;
        }
        let ind = l.len() - trimmed.len();
        if trimmed == "-" || trimmed.starts_with("- ") {
            let want = *indent.get_or_insert(ind);
            if ind == want {
                out.push(i + 1);
            }
        }
    }
    out
}

const VERBS: &[&str] = &[
    "create",
    "patch",
    "delete",
    "cordon",
    "uncordon",
    "drain",
    "addNode",
    "removeNode",
];

fn parse_op(v: Value, line: usize, api: &fakeapi::Store) -> Result<Op, String> {
    let Value::Object(mut m) = v else {
        return Err("an operation is a mapping with `at` and one operation".into());
    };
    let at = match m.remove("at") {
        Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
        Some(other) => {
            return Err(format!(
                "`at` must be a number of simulated seconds, not {other}"
            ))
        }
        None => return Err("the operation has no `at` (simulated seconds)".into()),
    };
    if !(at >= 0.0 && at.is_finite()) {
        return Err(format!(
            "`at: {at}` is in the past: simulated time starts at 0"
        ));
    }
    let grace = match m.remove("gracePeriodSeconds") {
        None => None,
        Some(Value::Number(n)) if n.as_i64().is_some_and(|g| g >= 0) => n.as_i64(),
        Some(other) => {
            return Err(format!(
                "`gracePeriodSeconds` must be a non-negative integer, not {other}"
            ))
        }
    };
    let patch_body: Vec<(PatchKindName, Value)> = [
        ("merge", PatchKindName::Merge),
        ("strategic", PatchKindName::Strategic),
        ("json", PatchKindName::Json),
    ]
    .into_iter()
    .filter_map(|(k, kind)| m.remove(k).map(|b| (kind, b)))
    .collect();
    let verbs: Vec<&str> = VERBS
        .iter()
        .copied()
        .filter(|v| m.contains_key(*v))
        .collect();
    if let Some(extra) = m.keys().find(|k| !VERBS.contains(&k.as_str())) {
        return Err(format!(
            "unknown field {extra:?} (operations: {})",
            VERBS.join(", ")
        ));
    }
    let verb = match verbs.as_slice() {
        [v] => *v,
        [] => return Err(format!("no operation (one of: {})", VERBS.join(", "))),
        many => {
            return Err(format!(
                "one operation per item, not {}",
                many.join(" and ")
            ))
        }
    };
    let arg = m.remove(verb).expect("checked");
    if grace.is_some() && !matches!(verb, "drain" | "delete") {
        return Err("`gracePeriodSeconds` goes with drain or delete".into());
    }
    if !patch_body.is_empty() && verb != "patch" {
        return Err("`merge`, `strategic` and `json` go with patch".into());
    }
    let node_name = |a: &Value| -> Result<String, String> {
        match a {
            Value::String(s) if !s.is_empty() => Ok(s.clone()),
            _ => Err(format!("`{verb}` takes a node name, not {a}")),
        }
    };
    let action = match verb {
        "cordon" => Action::Cordon(node_name(&arg)?),
        "uncordon" => Action::Uncordon(node_name(&arg)?),
        "drain" => Action::Drain {
            node: node_name(&arg)?,
            grace,
        },
        "removeNode" => Action::RemoveNode(node_name(&arg)?),
        "addNode" => add_node(&arg)?,
        "create" => create(arg, api)?,
        "delete" | "patch" => {
            let Value::Object(r) = &arg else {
                return Err(format!(
                    "`{verb}` takes {{kind: …, name: …, namespace: …}}, not {arg}"
                ));
            };
            let kind = r
                .get("kind")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("`{verb}` needs a `kind` (Pod, Node, PriorityClass…)"))?;
            let name = r
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| format!("`{verb}` needs a `name`"))?
                .to_string();
            if let Some(k) = r
                .keys()
                .find(|k| !["kind", "name", "namespace", "apiVersion"].contains(&k.as_str()))
            {
                return Err(format!("unknown field {k:?} in `{verb}`"));
            }
            let info = resource_for(kind, r.get("apiVersion").and_then(Value::as_str), api)?;
            let namespace = info.namespaced.then(|| {
                r.get("namespace")
                    .and_then(Value::as_str)
                    .unwrap_or(translate::NAMESPACE)
                    .to_string()
            });
            let resource = qualified(info);
            if verb == "delete" {
                if info.kind == "Node" {
                    Action::RemoveNode(name)
                } else {
                    Action::Delete {
                        resource,
                        namespace,
                        name,
                        grace,
                    }
                }
            } else {
                let (kind, body) = match patch_body.as_slice() {
                    [(k, b)] => (*k, b.clone()),
                    [] => return Err("`patch` needs a body: `merge`, `strategic` or `json`".into()),
                    _ => return Err("one patch body per operation".into()),
                };
                match (kind, &body) {
                    (PatchKindName::Json, Value::Array(_)) => {}
                    (PatchKindName::Json, _) => {
                        return Err("a `json` patch is a list of operations".into())
                    }
                    (_, Value::Object(_)) => {}
                    _ => return Err("a `merge` or `strategic` patch is a mapping".into()),
                }
                Action::Patch {
                    resource,
                    namespace,
                    name,
                    kind,
                    body,
                }
            }
        }
        _ => unreachable!("verbs are listed"),
    };
    Ok(Op { at, line, action })
}

fn resource_for(
    kind: &str,
    api_version: Option<&str>,
    api: &fakeapi::Store,
) -> Result<&'static fakeapi::ResourceInfo, String> {
    if let Some(r) = fakeapi::resources::RESOURCES
        .iter()
        .filter(|r| r.kind == kind && r.plural != "bindings")
        .find(|r| api_version.is_none_or(|v| r.api_version() == v))
    {
        return Ok(r);
    }
    match api_version {
        Some(v) => api.resource_for_kind(v, kind).ok_or_else(|| {
            format!(
                "the API does not serve kind {kind:?} in {v:?} (a custom kind is served once \
                 its CustomResourceDefinition is given with --crds)"
            )
        }),
        None => Err(format!(
            "the API does not serve kind {kind:?} (a custom kind needs its `apiVersion`, and \
             its CustomResourceDefinition given with --crds)"
        )),
    }
}

fn qualified(info: &fakeapi::ResourceInfo) -> String {
    if info.group.is_empty() {
        info.plural.to_string()
    } else {
        format!("{}.{}", info.plural, info.group)
    }
}

fn create(arg: Value, api: &fakeapi::Store) -> Result<Action, String> {
    let Value::Object(obj) = &arg else {
        return Err(format!("`create` takes a Kubernetes object, not {arg}"));
    };
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("the object has no `kind`")?;
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .ok_or("the object has no `apiVersion`")?;
    let info = resource_for(kind, Some(api_version), api)?;
    let name = arg["metadata"]["name"].as_str().unwrap_or("");
    if name.is_empty() {
        return Err(format!("the {kind} has no `metadata.name`"));
    }
    // The kinds a scenario is about are checked against their schema.
    let typed = match kind {
        "Pod" => serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(arg.clone())
            .map(|_| ())
            .map_err(|e| e.to_string()),
        "Node" => serde_json::from_value::<k8s_openapi::api::core::v1::Node>(arg.clone())
            .map(|_| ())
            .map_err(|e| e.to_string()),
        "PriorityClass" => {
            serde_json::from_value::<k8s_openapi::api::scheduling::v1::PriorityClass>(arg.clone())
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        // A custom object: created in the scratch store, which checks it
        // against its CRD's schema as the API will (422, field path).
        _ if fakeapi::resources::RESOURCES
            .iter()
            .all(|r| !std::ptr::eq(r, info)) =>
        {
            let ns = info.namespaced.then(|| {
                arg["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or(translate::NAMESPACE)
            });
            let resource = qualified(info);
            api.create(&resource, ns, arg.clone())
                .map(|_| {
                    let _ = api.delete(&resource, ns, name);
                })
                .map_err(|e| e.to_string())
        }
        _ => Ok(()),
    };
    typed.map_err(|e| format!("malformed {kind} {name:?}: {e}"))?;
    if kind == "Pod"
        && arg["spec"]["containers"]
            .as_array()
            .is_none_or(|c| c.is_empty())
    {
        return Err(format!("malformed Pod {name:?}: spec.containers is empty"));
    }
    if kind == "Node" {
        return Ok(Action::AddNode {
            name: name.to_string(),
            object: arg,
        });
    }
    let namespace = info.namespaced.then(|| {
        arg["metadata"]["namespace"]
            .as_str()
            .unwrap_or(translate::NAMESPACE)
            .to_string()
    });
    Ok(Action::Create {
        resource: qualified(info),
        namespace,
        object: arg,
    })
}

/// `addNode: {name, cpu, memory, pods, labels}`: a Node object.
fn add_node(arg: &Value) -> Result<Action, String> {
    let Value::Object(a) = arg else {
        return Err(format!(
            "`addNode` takes {{name: …, cpu: …, memory: …}}, not {arg}"
        ));
    };
    let name = a
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| translate::is_dns1123_subdomain(n))
        .ok_or("`addNode` needs a `name` that is a DNS-1123 name")?
        .to_string();
    let mut capacity = Map::new();
    for (k, v) in a {
        match k.as_str() {
            "name" | "labels" => {}
            "cpu" | "memory" | "pods" | "ephemeral-storage" => {
                let amount =
                    translate::parse_quantity(k, v).map_err(|e| format!("`addNode` {k}: {e}"))?;
                capacity.insert(
                    k.clone(),
                    serde_json::to_value(translate::format_quantity(k, amount)).unwrap_or_default(),
                );
            }
            other if other.contains('/') => {
                let amount =
                    translate::parse_quantity(k, v).map_err(|e| format!("`addNode` {k}: {e}"))?;
                capacity.insert(k.clone(), json!(amount.to_string()));
            }
            other => return Err(format!("unknown field {other:?} in `addNode`")),
        }
    }
    capacity.entry("pods").or_insert(json!("110"));
    let mut labels = Map::new();
    labels.insert("kubernetes.io/hostname".into(), json!(name));
    labels.insert("kubernetes.io/os".into(), json!("linux"));
    labels.insert("kubernetes.io/arch".into(), json!("amd64"));
    if let Some(l) = a.get("labels") {
        let Value::Object(l) = l else {
            return Err("`addNode` labels must be a mapping".into());
        };
        for (k, v) in l {
            labels.insert(
                k.clone(),
                json!(v.as_str().map(str::to_string).unwrap_or(v.to_string())),
            );
        }
    }
    let object = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "simulated by batkube"}],
        },
    });
    Ok(Action::AddNode { name, object })
}

/// Nodes and pods named by the operations must exist when they run.
fn check_names(ops: &[Op], known: &Known) -> Result<(), (usize, String)> {
    let mut nodes = known.nodes.clone();
    let pods = &known.pods;
    let mut created: BTreeSet<String> = BTreeSet::new();
    for op in ops {
        let need_node = |n: &str, nodes: &BTreeSet<String>| -> Result<(), (usize, String)> {
            if nodes.contains(n) {
                Ok(())
            } else {
                Err((
                    op.line,
                    format!(
                        "unknown node {n:?} at simulated time {} (the platform's nodes: {}{})",
                        op.at,
                        nodes.iter().take(8).cloned().collect::<Vec<_>>().join(", "),
                        if nodes.len() > 8 { ", …" } else { "" }
                    ),
                ))
            }
        };
        match &op.action {
            Action::Cordon(n) | Action::Uncordon(n) => need_node(n, &nodes)?,
            Action::Drain { node, .. } => need_node(node, &nodes)?,
            Action::RemoveNode(n) => {
                need_node(n, &nodes)?;
                nodes.remove(n);
            }
            Action::AddNode { name, .. } => {
                if !nodes.insert(name.clone()) {
                    return Err((op.line, format!("node {name:?} already exists then")));
                }
            }
            Action::Patch { resource, name, .. } | Action::Delete { resource, name, .. } => {
                if resource == "nodes" {
                    need_node(name, &nodes)?;
                }
                if resource == "pods" && !created.contains(name) {
                    if let Some(&subtime) = pods.get(name) {
                        if op.at < subtime {
                            return Err((
                                op.line,
                                format!(
                                    "pod {name:?} does not exist yet at simulated time {}: its job \
                                     is submitted at {subtime}",
                                    op.at
                                ),
                            ));
                        }
                        continue;
                    }
                    return Err((
                        op.line,
                        format!(
                            "unknown pod {name:?}: neither a job's pod (`<workload>-<job id>`, \
                             such as w0-1) nor created earlier by the scenario"
                        ),
                    ));
                }
            }
            Action::Create {
                resource, object, ..
            } => {
                if resource == "pods" {
                    created.insert(object["metadata"]["name"].as_str().unwrap_or("").into());
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known() -> Known {
        Known {
            nodes: ["node-0", "node-1"].iter().map(|s| s.to_string()).collect(),
            pods: [("w0-1", 0.0), ("w0-2", 50.0)]
                .iter()
                .map(|(s, t)| (s.to_string(), *t))
                .collect(),
            api: Vec::new(),
        }
    }

    /// A cluster-scoped custom kind (a queue-like `Tenant` with a required
    /// integer `spec.weight` >= 1), given as --crds would give it.
    fn with_crd() -> Known {
        let crd: Value = serde_yaml::from_str(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: tenants.example.org}\nspec:\n  group: example.org\n  scope: Cluster\n  names: {plural: tenants, singular: tenant, kind: Tenant, listKind: TenantList}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            required: [weight]\n            properties:\n              weight: {type: integer, minimum: 1}\n",
        )
        .unwrap();
        Known {
            api: vec![fakeapi::Manifest {
                file: "crds.yaml".into(),
                document: 1,
                object: crd,
            }],
            ..known()
        }
    }

    #[test]
    fn custom_kinds_of_crds_are_created_patched_and_deleted_checked_against_their_schema() {
        let text = "- at: 0\n  create: {apiVersion: example.org/v1, kind: Tenant, metadata: {name: a}, spec: {weight: 2}}\n- at: 10\n  patch: {apiVersion: example.org/v1, kind: Tenant, name: a}\n  merge: {spec: {weight: 3}}\n- at: 20\n  delete: {apiVersion: example.org/v1, kind: Tenant, name: a}\n";
        let ops = parse(text, "s.yaml", &with_crd()).unwrap();
        assert!(matches!(&ops[0].action,
            Action::Create { resource, namespace: None, .. } if resource == "tenants.example.org"));
        assert!(matches!(&ops[2].action,
            Action::Delete { resource, name, .. } if resource == "tenants.example.org" && name == "a"));
        // Against the schema, with the field path, at the item's line.
        let bad = "- at: 0\n  create: {apiVersion: example.org/v1, kind: Tenant, metadata: {name: a}, spec: {weight: 0}}\n";
        let e = parse(bad, "s.yaml", &with_crd()).unwrap_err().to_string();
        assert!(
            e.starts_with("s.yaml:1:") && e.contains("spec.weight"),
            "{e}"
        );
        // Without its CRD, the kind is not served, and the message says what to give.
        let e = parse(text, "s.yaml", &known()).unwrap_err().to_string();
        assert!(e.contains("\"Tenant\"") && e.contains("--crds"), "{e}");
    }

    #[test]
    fn a_scenario_is_read_and_sorted() {
        let text = "# maintenance\n- at: 300\n  uncordon: node-1\n- at: 100\n  drain: node-1\n  gracePeriodSeconds: 10\n- at: 120\n  delete: {kind: Pod, name: w0-2}\n- at: 5\n  create:\n    apiVersion: scheduling.k8s.io/v1\n    kind: PriorityClass\n    metadata: {name: high}\n    value: 1000\n- at: 6\n  patch: {kind: Node, name: node-0}\n  merge: {metadata: {labels: {zone: b}}}\n- at: 7\n  addNode: {name: extra-0, cpu: 4, memory: 8Gi}\n";
        let ops = parse(text, "s.yaml", &known()).unwrap();
        let lines: Vec<usize> = ops.iter().map(|o| o.line).collect();
        assert_eq!(lines, [9, 15, 18, 4, 7, 2]);
        assert_eq!(
            ops[4].action,
            Action::Delete {
                resource: "pods".into(),
                namespace: Some("default".into()),
                name: "w0-2".into(),
                grace: None
            }
        );
        assert!(
            matches!(&ops[0].action, Action::Create { resource, .. } if resource == "priorityclasses.scheduling.k8s.io")
        );
    }

    #[test]
    fn bad_scenarios_are_refused_with_the_line() {
        for (text, line, want) in [
            ("- at: 1\n  cordon: node-0\n- at: 2\n  cordon: node-9\n", 3, "unknown node"),
            ("- at: -5\n  cordon: node-0\n", 1, "in the past"),
            ("- at: 1\n  cordon: node-0\n\n- at: 2\n  delete: {kind: Pod, name: nope}\n", 4, "unknown pod"),
            ("- at: 1\n  create: {apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: 3}}\n", 1, "malformed Pod"),
            ("- at: 1\n  create: {apiVersion: v1, kind: Gadget, metadata: {name: p}}\n", 1, "does not serve"),
            ("- at: 1\n  frobnicate: node-0\n", 1, "unknown field"),
            ("- at: 1\n  removeNode: node-0\n- at: 2\n  cordon: node-0\n", 3, "unknown node"),
            ("- at: 10\n  delete: {kind: Pod, name: w0-2}\n", 1, "does not exist yet"),
            ("- at: 1\n  patch: {kind: Node, name: node-0}\n", 1, "needs a body"),
        ] {
            let e = parse(text, "s.yaml", &known()).unwrap_err();
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.to_string().contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn added_nodes_exist_afterwards() {
        let text = "- at: 1\n  addNode: {name: extra-0, cpu: 2}\n- at: 2\n  cordon: extra-0\n";
        let ops = parse(text, "s", &known()).unwrap();
        let Action::AddNode { object, .. } = &ops[0].action else {
            panic!()
        };
        assert_eq!(object["status"]["allocatable"]["cpu"], "2");
        assert_eq!(object["status"]["allocatable"]["pods"], "110");
    }
}
