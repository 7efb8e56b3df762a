//! Label and field selectors, parsed once per request and evaluated per object.

use crate::error::ApiError;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed `labelSelector` (`a=b,c!=d,e in (x,y),f notin (z),g,!h`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<LabelReq>);

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

fn set_values(rest: &str, whole: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            ApiError::BadRequest(format!(
                "unable to parse requirement: {whole:?}: expected a set like (a,b)"
            ))
        })?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            // An operator with no key before it, in the words of
            // apimachinery's selector lexer.
            for op in ["!=", "==", "="] {
                if part.trim_start().starts_with(op) {
                    return Err(ApiError::BadRequest(format!(
                        "found '{op}', expected: !, identifier, or 'end of string'"
                    )));
                }
            }
            let req = if let Some((k, v)) = part.split_once("!=") {
                LabelReq::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                LabelReq::NotIn(k.trim().into(), set_values(rest, part)?)
            } else if let Some((k, rest)) = part.split_once(" in ") {
                LabelReq::In(k.trim().into(), set_values(rest, part)?)
            } else if let Some(k) = part.strip_prefix('!') {
                LabelReq::NotExists(k.trim().into())
            } else if part.contains(char::is_whitespace) || part.contains('(') {
                return Err(ApiError::BadRequest(format!(
                    "unable to parse requirement: {part:?}"
                )));
            } else {
                LabelReq::Exists(part.into())
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`
    /// with `In`, `NotIn`, `Exists`, `DoesNotExist`), as
    /// `LabelSelectorAsSelector` reads it; `null` or `{}` selects
    /// everything. A bad one is an error naming what is wrong.
    pub fn from_object(sel: &Value) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if sel.is_null() {
            return Ok(LabelSelector(reqs));
        }
        if let Some(m) = sel.get("matchLabels").filter(|m| !m.is_null()) {
            let m = m
                .as_object()
                .ok_or("matchLabels must be a map of strings")?;
            let mut keys: Vec<_> = m.iter().collect();
            keys.sort_by(|a, b| a.0.cmp(b.0));
            for (k, v) in keys {
                let v = v.as_str().ok_or("matchLabels must be a map of strings")?;
                reqs.push(LabelReq::Eq(k.clone(), v.to_string()));
            }
        }
        if let Some(es) = sel.get("matchExpressions").filter(|e| !e.is_null()) {
            let es = es.as_array().ok_or("matchExpressions must be a list")?;
            for e in es {
                let key = e
                    .get("key")
                    .and_then(Value::as_str)
                    .ok_or("a matchExpression needs a key")?
                    .to_string();
                let values: Vec<String> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|vs| {
                        vs.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
                reqs.push(match op {
                    "In" | "NotIn" if values.is_empty() => {
                        return Err(format!(
                            "for 'in', 'notin' operators, values set can't be empty (key {key:?})"
                        ))
                    }
                    "In" => LabelReq::In(key, values),
                    "NotIn" => LabelReq::NotIn(key, values),
                    "Exists" | "DoesNotExist" if !values.is_empty() => {
                        return Err(format!(
                            "values set must be empty for exists and does not exist (key {key:?})"
                        ))
                    }
                    "Exists" => LabelReq::Exists(key),
                    "DoesNotExist" => LabelReq::NotExists(key),
                    other => {
                        return Err(format!("{other:?} is not a valid label selector operator"))
                    }
                });
            }
        }
        Ok(LabelSelector(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether a set of labels (a JSON map, or null for none) matches.
    pub fn matches_labels(&self, labels: Option<&Value>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => !get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.matches_labels(obj.pointer("/metadata/labels"))
    }
}

/// A parsed `fieldSelector` (`=`, `==`, `!=` on any dotted field path, e.g.
/// `spec.nodeName`, `status.phase`, `involvedObject.uid`). A missing field
/// reads as the empty string, as in the real API server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(Vec<String>, bool, String)>);

impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::BadRequest(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let path = k.trim().split('.').map(str::to_string).collect();
            reqs.push((path, eq, v.trim().to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The fields selected on, as written (`spec.nodeName`).
    pub fn fields(&self) -> impl Iterator<Item = String> + '_ {
        self.0.iter().map(|(path, _, _)| path.join("."))
    }

    /// Renames a field (an alias the server accepts: a pod's `spec.host`).
    pub fn rename(&mut self, from: &str, to: &str) {
        for (path, _, _) in &mut self.0 {
            if path.join(".") == from {
                *path = to.split('.').map(str::to_string).collect();
            }
        }
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(path, eq, want)| {
            let mut cur = Some(obj);
            for seg in path {
                cur = cur.and_then(|c| c.get(seg));
            }
            let value = match cur {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                Some(other) => other.to_string(),
            };
            (value == *want) == *eq
        })
    }
}

/// The fields a built-in kind can be selected on (kube-apiserver's field
/// label conversions), with the error for any other, and aliases.
pub(crate) fn check_builtin_fields(
    group: &str,
    kind: &str,
    sel: &mut FieldSelector,
) -> Result<(), ApiError> {
    const META: &[&str] = &["metadata.name", "metadata.namespace"];
    let known: &[&str] = match (group, kind) {
        ("", "Pod") => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
            "spec.host",
        ],
        ("", "Node") => &["metadata.name", "spec.unschedulable"],
        ("", "ReplicationController") => {
            &["metadata.name", "metadata.namespace", "status.replicas"]
        }
        ("", "Event") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
            "metadata.namespace",
            "metadata.name",
        ],
        ("events.k8s.io", "Event") => &[
            "reason",
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reportingController",
            "type",
            "metadata.namespace",
            "metadata.name",
        ],
        ("", "Namespace") => &["status.phase", "metadata.name"],
        ("", "Secret") => &["type", "metadata.namespace", "metadata.name"],
        ("", "Service") => &[
            "metadata.namespace",
            "metadata.name",
            "spec.clusterIP",
            "spec.type",
        ],
        ("batch", "Job") => &["metadata.name", "metadata.namespace", "status.successful"],
        ("resource.k8s.io", "ResourceSlice") => &["metadata.name", "spec.nodeName", "spec.driver"],
        _ => META,
    };
    for f in sel.fields().collect::<Vec<_>>() {
        if known.contains(&f.as_str()) {
            continue;
        }
        return Err(ApiError::BadRequest(match (group, kind) {
            (_, _) if std::ptr::eq(known, META) => format!(
                "\"{f}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
            ),
            ("batch", "Job") => format!("field label \"{f}\" not supported for Job"),
            ("resource.k8s.io", "ResourceSlice") => {
                format!("field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: {f}")
            }
            _ => format!("field label not supported: {f}"),
        }));
    }
    if (group, kind) == ("", "Pod") {
        sel.rename("spec.host", "spec.nodeName");
    }
    Ok(())
}

/// What a list or watch selects: namespace, labels, fields.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Selection {
    pub fn parse(
        namespace: Option<&str>,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Result<Self, ApiError> {
        Ok(Selection {
            namespace: namespace.map(str::to_string),
            labels: LabelSelector::parse(label_selector.unwrap_or(""))?,
            fields: FieldSelector::parse(field_selector.unwrap_or(""))?,
        })
    }

    pub fn is_everything(&self) -> bool {
        self.namespace.is_none() && self.labels.is_empty() && self.fields.is_empty()
    }

    pub fn matches(&self, namespace: &str, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace {
            if ns != namespace {
                return false;
            }
        }
        self.labels.matches(obj) && self.fields.matches(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors() {
        let o = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(&o);
        assert!(m(""));
        assert!(m("app=web"));
        assert!(m("app==web,tier"));
        assert!(!m("app!=web"));
        assert!(m("app in (db, web)"));
        assert!(!m("app notin (db,web)"));
        assert!(m("!missing"));
        assert!(!m("missing"));
        assert!(m("missing!=x"));
        assert!(LabelSelector::parse("app in db").is_err());
    }

    #[test]
    fn field_selectors() {
        let o = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let m = |s: &str| FieldSelector::parse(s).unwrap().matches(&o);
        assert!(m("status.phase!=Succeeded,status.phase!=Failed"));
        assert!(m("spec.nodeName=n1"));
        assert!(!m("spec.nodeName="));
        assert!(m("spec.schedulerName="));
        assert!(m("metadata.name==p"));
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
