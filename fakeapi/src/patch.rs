//! Patch formats: JSON merge patch, JSON patch, strategic merge patch and
//! (as a strategic merge) server-side apply.
//!
//! The strategic merge knows list merge keys by field name rather than from
//! the OpenAPI schema: that covers the fields clients patch (conditions by
//! `type`, containers by `name`, ...) without shipping the schema.
//! Custom resources have no patch strategies: [`apply_patch_custom`] refuses
//! strategic merge (415) and applies as a merge, as the real server does.

use crate::error::ApiError;
use crate::schema::Schema;
use serde_json::{Map, Value};

/// The patch content types understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    Json,
    Merge,
    StrategicMerge,
    Apply,
}

impl PatchKind {
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let ct = ct.split(';').next().unwrap_or("").trim();
        match ct {
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Some(PatchKind::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchKind::Apply)
            }
            _ => None,
        }
    }
}

/// Merge key of a list field, by field name.
pub(crate) fn merge_key(field: &str) -> Option<&'static str> {
    Some(match field {
        "conditions" => "type",
        "addresses" => "type",
        "containers" | "initContainers" | "ephemeralContainers" => "name",
        "env" | "volumes" | "imagePullSecrets" | "resourceClaims" | "readinessGates" => "name",
        "containerStatuses" | "initContainerStatuses" | "ephemeralContainerStatuses" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "ports" => "containerPort",
        "ownerReferences" => "uid",
        "hostAliases" => "ip",
        "podIPs" | "hostIPs" => "ip",
        "taints" => "key",
        _ => return None,
    })
}

/// Lists of scalars merged as sets.
fn is_set_list(field: &str) -> bool {
    matches!(field, "finalizers")
}

/// Parses a patch body and applies it to `target`.
pub fn apply_patch(kind: PatchKind, target: &Value, body: &[u8]) -> Result<Value, ApiError> {
    match kind {
        PatchKind::Json => {
            let p: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::BadRequest(format!("error decoding patch: {e}")))?;
            let mut doc = target.clone();
            // kube-apiserver says no more (the patch library's error is
            // logged, not sent).
            json_patch::patch(&mut doc, &p).map_err(|_| ApiError::Plain {
                code: 422,
                reason: "Invalid",
                message: "the server rejected our request due to an error in our request".into(),
            })?;
            Ok(doc)
        }
        PatchKind::Merge => {
            let p = parse_json(body)?;
            let mut doc = target.clone();
            json_patch::merge(&mut doc, &p);
            Ok(doc)
        }
        PatchKind::StrategicMerge => {
            let p = parse_json(body)?;
            Ok(strategic_merge(target, &p))
        }
        PatchKind::Apply => {
            let p: Value = serde_yaml::from_slice(body).map_err(|e| {
                ApiError::BadRequest(format!("invalid apply patch (YAML or JSON expected): {e}"))
            })?;
            Ok(apply_merge(target, &p))
        }
    }
}

/// The patch types the real server takes for custom resources.
pub const CUSTOM_PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];

/// Patches a custom object: strategic merge is refused with the real
/// server's 415 (custom resources have no patch strategies), and an apply
/// merges its YAML as structured-merge-diff does, by the list and map
/// types of `schema` and of ObjectMeta (`store/fields.rs`'s
/// `merge_applied`: a `set` list value by value, a `map` list item by
/// item, `metadata.finalizers` a set whatever the kind).
pub(crate) fn apply_patch_custom(
    kind: PatchKind,
    target: &Value,
    body: &[u8],
    schema: Option<&Schema>,
) -> Result<Value, ApiError> {
    match kind {
        PatchKind::StrategicMerge => Err(ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            CUSTOM_PATCH_TYPES.join(", ")
        ))),
        PatchKind::Apply => {
            let p: Value = serde_yaml::from_slice(body).map_err(|e| {
                ApiError::BadRequest(format!("invalid apply patch (YAML or JSON expected): {e}"))
            })?;
            if !p.is_object() {
                return Err(ApiError::BadRequest(
                    "an apply patch must be an object".to_string(),
                ));
            }
            let mut doc = target.clone();
            crate::store::fields::merge_applied(
                &mut doc,
                &p,
                crate::store::fields::Ty::root(schema, true),
            );
            Ok(doc)
        }
        _ => apply_patch(kind, target, body),
    }
}

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    let p: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("error decoding patch: {e}")))?;
    if !p.is_object() {
        return Err(ApiError::BadRequest(
            "a merge patch must be a JSON object".to_string(),
        ));
    }
    Ok(p)
}

/// Strategic merge patch of `patch` onto `target`.
pub fn strategic_merge(target: &Value, patch: &Value) -> Value {
    merge_value(target, patch, Order::Strategic)
}

/// An applied configuration merged onto `target` (server-side apply, with
/// no field ownership): as a strategic merge, but entries new to a list
/// with merge keys go after the live ones, as structured-merge-diff puts
/// them.
pub fn apply_merge(target: &Value, patch: &Value) -> Value {
    merge_value(target, patch, Order::Apply)
}

/// Where entries a patch adds to a keyed list go.
#[derive(Clone, Copy, PartialEq)]
enum Order {
    /// Among the live ones, by apimachinery's `mergeSortedSlice`.
    Strategic,
    /// After the live ones.
    Apply,
}

fn merge_value(target: &Value, patch: &Value, order: Order) -> Value {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => Value::Object(merge_map(t, p, order)),
        (_, p) => strip_directives(p),
    }
}

fn merge_map(
    target: &Map<String, Value>,
    patch: &Map<String, Value>,
    order: Order,
) -> Map<String, Value> {
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        return match strip_directives(&Value::Object(patch.clone())) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
    }
    let mut out = target.clone();
    for (k, pv) in patch {
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(cur)), Value::Array(del)) = (out.get_mut(field), pv) {
                cur.retain(|x| !del.contains(x));
            }
            continue;
        }
        if pv.is_null() {
            out.remove(k);
            continue;
        }
        let merged = match (out.get(k), pv) {
            (Some(Value::Object(tv)), Value::Object(pm)) => {
                if pm.get("$patch").and_then(Value::as_str) == Some("delete") {
                    out.remove(k);
                    continue;
                }
                Value::Object(merge_map(tv, pm, order))
            }
            (Some(Value::Array(tl)), Value::Array(pl)) => merge_list(k, tl, pl, order),
            (None, Value::Array(pl)) => merge_list(k, &[], pl, order),
            (_, p) => strip_directives(p),
        };
        out.insert(k.clone(), merged);
    }
    out
}

fn merge_list(field: &str, target: &[Value], patch: &[Value], order: Order) -> Value {
    if patch
        .iter()
        .any(|p| p.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        return Value::Array(
            patch
                .iter()
                .filter(|p| p.get("$patch").is_none())
                .map(strip_directives)
                .collect(),
        );
    }
    if is_set_list(field) {
        let mut out = target.to_vec();
        for p in patch {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
        return Value::Array(out);
    }
    let Some(key) = merge_key(field) else {
        return Value::Array(patch.iter().map(strip_directives).collect());
    };
    // `ports` of a Service are keyed by `port` (a container's by
    // `containerPort`): without it, an applied Service port matched none
    // of the live ones and was added again beside it.
    let key = if field == "ports"
        && !target
            .iter()
            .chain(patch)
            .any(|i| i.get("containerPort").is_some())
    {
        "port"
    } else {
        key
    };
    if order == Order::Apply {
        let mut out = target.to_vec();
        for p in patch {
            let Some(pk) = p.get(key) else {
                out.push(strip_directives(p));
                continue;
            };
            let pos = out.iter().position(|t| t.get(key) == Some(pk));
            let delete = p.get("$patch").and_then(Value::as_str) == Some("delete");
            match (pos, delete) {
                (Some(i), true) => {
                    out.remove(i);
                }
                (None, true) => {}
                (Some(i), false) => out[i] = merge_value(&out[i], p, order),
                (None, false) => out.push(strip_directives(p)),
            }
        }
        return Value::Array(out);
    }
    // As apimachinery's strategic merge: the patch's items (merged with
    // the live ones of the same key) in the patch's order, and the live
    // items the patch does not name put back among them by their live
    // order (`mergeSortedSlice`: an item goes before the first patch item
    // it preceded in the live list; new items go first).
    let position = |v: &Value| {
        v.get(key)
            .and_then(|k| target.iter().position(|t| t.get(key) == Some(k)))
    };
    let mut patched = Vec::new();
    for p in patch {
        let delete = p.get("$patch").and_then(Value::as_str) == Some("delete");
        if delete {
            continue;
        }
        match position(p) {
            Some(i) if p.get(key).is_some() => patched.push(merge_value(&target[i], p, order)),
            _ => patched.push(strip_directives(p)),
        }
    }
    let named = |t: &Value| {
        t.get(key)
            .is_some_and(|k| patch.iter().any(|p| p.get(key) == Some(k)))
    };
    let server_only: Vec<Value> = target.iter().filter(|t| !named(t)).cloned().collect();
    let mut out = Vec::with_capacity(patched.len() + server_only.len());
    let (mut i, mut j) = (0, 0);
    while i < server_only.len() || j < patched.len() {
        let take_left = if i >= server_only.len() {
            false
        } else if j >= patched.len() {
            true
        } else {
            matches!((position(&server_only[i]), position(&patched[j])), (Some(l), Some(r)) if l < r)
        };
        if take_left {
            out.push(server_only[i].clone());
            i += 1;
        } else {
            out.push(patched[j].clone());
            j += 1;
        }
    }
    Value::Array(out)
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_services_ports_merge_by_port_and_a_containers_by_container_port() {
        let svc = json!({"spec": {"ports": [
            {"port": 8080, "protocol": "UDP", "targetPort": 8080}]}});
        let applied = json!({"spec": {"ports": [{"port": 8080, "protocol": "UDP"}]}});
        // The same port applied again is the live one, not a second.
        assert_eq!(apply_merge(&svc, &applied), svc);
        assert_eq!(strategic_merge(&svc, &applied), svc);
        let pod = json!({"spec": {"containers": [{"name": "c", "ports": [
            {"containerPort": 80, "protocol": "TCP"}]}]}});
        let applied = json!({"spec": {"containers": [{"name": "c", "ports": [
            {"containerPort": 80, "name": "http"}]}]}});
        assert_eq!(
            apply_merge(&pod, &applied)["spec"]["containers"][0]["ports"],
            json!([{"containerPort": 80, "protocol": "TCP", "name": "http"}])
        );
    }

    #[test]
    fn conditions_merge_by_type() {
        let pod = json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False"},
            {"type": "Ready", "status": "False"}]}});
        let p = json!({"status": {"conditions": [
            {"type": "PodScheduled", "status": "True", "reason": null},
            {"type": "DisruptionTarget", "status": "True"}]}});
        let out = strategic_merge(&pod, &p);
        // The patch's order, live items put back by their live order: a new
        // item comes before the live ones that follow the patch's.
        assert_eq!(
            out,
            json!({"status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "DisruptionTarget", "status": "True"},
                {"type": "Ready", "status": "False"}]}})
        );
        // The live order wins between items it knows.
        let p = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let out = strategic_merge(&pod, &p);
        assert_eq!(
            out["status"]["conditions"],
            json!([{"type": "PodScheduled", "status": "False"}, {"type": "Ready", "status": "True"}])
        );
    }

    #[test]
    fn directives() {
        let o = json!({"metadata": {"finalizers": ["a", "b"], "labels": {"x": "1"}},
            "spec": {"containers": [{"name": "c", "image": "i"}, {"name": "d"}], "tolerations": [{"key": "k"}]}});
        let p = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"], "finalizers": ["c"], "labels": {"x": null, "y": "2"}},
            "spec": {"$setElementOrder/containers": [{"name": "c"}], "containers": [{"name": "d", "$patch": "delete"}, {"name": "c", "image": "j"}], "tolerations": []}});
        let out = strategic_merge(&o, &p);
        assert_eq!(
            out,
            json!({"metadata": {"finalizers": ["b", "c"], "labels": {"y": "2"}},
                "spec": {"containers": [{"name": "c", "image": "j"}], "tolerations": []}})
        );
    }

    #[test]
    fn apply_yaml_and_json_patch() {
        let o = json!({"status": {"conditions": []}});
        let y = b"status:\n  conditions:\n  - type: DisruptionTarget\n    status: \"True\"\n";
        let out = apply_patch(PatchKind::Apply, &o, y).unwrap();
        assert_eq!(out["status"]["conditions"][0]["type"], "DisruptionTarget");
        let jp = br#"[{"op":"add","path":"/status/phase","value":"Running"}]"#;
        let out = apply_patch(PatchKind::Json, &o, jp).unwrap();
        assert_eq!(out["status"]["phase"], "Running");
        let bad = br#"[{"op":"test","path":"/status/phase","value":"x"}]"#;
        assert_eq!(
            apply_patch(PatchKind::Json, &o, bad).unwrap_err().code(),
            422
        );
    }
}
