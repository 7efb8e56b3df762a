//! What kube-apiserver refuses in built-in objects, with its messages and
//! field paths (a 422 `Invalid` with one cause per field), for the checks
//! clients meet: object metadata (names, labels, annotations, owner
//! references, finalizers), pod specs (containers, resources, restart
//! policy, and on update the fields a pod may not change), workloads'
//! selectors, leases, config keys, events.
//!
//! Not every rule of `k8s.io/kubernetes/pkg/apis/*/validation` is here:
//! what is not is accepted (written down in `fakeapi/README.md`).

use crate::error::{FieldError, FieldErrorKind};
use regex::Regex;
use serde_json::{json, Value};
use std::sync::OnceLock;

/// apimachinery's `RegexError`: the message, examples, the regex.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut s = msg.to_string();
    if examples.is_empty() {
        return format!("{s} (regex used for validation is '{fmt}')");
    }
    s.push_str(" (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

macro_rules! re {
    ($name:ident, $pat:expr) => {
        fn $name() -> &'static Regex {
            static RE: OnceLock<Regex> = OnceLock::new();
            RE.get_or_init(|| Regex::new($pat).expect("a valid regex"))
        }
    };
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const CONFIG_KEY_FMT: &str = "[-._a-zA-Z0-9]+";

re!(dns1123_label_re, "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
re!(
    dns1123_subdomain_re,
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
);
re!(dns1035_label_re, "^[a-z]([-a-z0-9]*[a-z0-9])?$");
re!(label_key_re, "^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$");
re!(
    label_value_re,
    "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
);
re!(config_key_re, "^[-._a-zA-Z0-9]+$");

fn max_len(n: usize) -> String {
    format!("must be no more than {n} characters")
}

pub(crate) fn is_dns1123_label(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push(max_len(63));
    }
    if !dns1123_label_re().is_match(v) {
        if dns1123_subdomain_re().is_match(v) {
            errs.push("must not contain dots".into());
        } else {
            errs.push(regex_error(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

pub(crate) fn is_dns1123_subdomain(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 253 {
        errs.push(max_len(253));
    }
    if !dns1123_subdomain_re().is_match(v) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

pub(crate) fn is_dns1035_label(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push(max_len(63));
    }
    if !dns1035_label_re().is_match(v) {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `IsQualifiedName` (label keys, annotation keys, finalizers).
pub(crate) fn is_qualified_name(v: &str) -> Vec<String> {
    let msg = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
    let mut errs = Vec::new();
    let parts: Vec<&str> = v.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".into());
            } else {
                errs.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(msg, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len(63)));
    }
    if !label_key_re().is_match(name) {
        errs.push(format!(
            "name part {}",
            regex_error(msg, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

pub(crate) fn is_label_value(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 63 {
        errs.push(max_len(63));
    }
    if !label_value_re().is_match(v) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

fn invalid(field: &str, value: &Value, msgs: Vec<String>, out: &mut Vec<FieldError>) {
    for m in msgs {
        out.push(FieldError::invalid(field, value, m));
    }
}

/// How a kind's names are checked.
fn name_rule(group: &str, kind: &str) -> fn(&str) -> Vec<String> {
    match (group, kind) {
        ("", "Namespace") => is_dns1123_label,
        ("", "Service") => is_dns1035_label,
        _ => is_dns1123_subdomain,
    }
}

/// `ValidateObjectMeta`: the name (by the kind's rule; a generated one
/// checked on its prefix), labels, annotations, owner references,
/// finalizers.
fn validate_meta(group: &str, kind: &str, obj: &Value, out: &mut Vec<FieldError>) {
    let meta = obj.get("metadata").cloned().unwrap_or(json!({}));
    if let Some(name) = meta.get("name").and_then(Value::as_str) {
        let rule = name_rule(group, kind);
        invalid("metadata.name", &json!(name), rule(name), out);
    }
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        for (k, v) in labels {
            invalid("metadata.labels", &json!(k), is_qualified_name(k), out);
            if let Some(v) = v.as_str() {
                invalid("metadata.labels", &json!(v), is_label_value(v), out);
            }
        }
    }
    if let Some(annotations) = meta.get("annotations").and_then(Value::as_object) {
        let mut total = 0;
        for (k, v) in annotations {
            invalid(
                "metadata.annotations",
                &json!(k),
                is_qualified_name(&k.to_lowercase()),
                out,
            );
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > 256 * 1024 {
            out.push(FieldError::new(
                FieldErrorKind::TooLong,
                "metadata.annotations",
                None,
                format!("must have at most {} bytes", 256 * 1024),
            ));
        }
    }
    for r in meta
        .get("ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
        let version = s("apiVersion").rsplit('/').next().unwrap_or("");
        if version.is_empty() {
            out.push(FieldError::invalid(
                "metadata.ownerReferences.apiVersion",
                &json!(s("apiVersion")),
                "version must not be empty",
            ));
        }
        for f in ["kind", "name", "uid"] {
            if s(f).is_empty() {
                out.push(FieldError::invalid(
                    format!("metadata.ownerReferences.{f}"),
                    &json!(""),
                    "must not be empty",
                ));
            }
        }
    }
    for f in meta
        .get("finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        invalid("metadata.finalizers", &json!(f), is_qualified_name(f), out);
    }
}

/// A quantity that is negative (`-1`, `-100m`).
fn negative(q: &Value) -> bool {
    match q {
        Value::String(s) => s.trim_start().starts_with('-'),
        Value::Number(n) => n.as_f64().is_some_and(|f| f < 0.0),
        _ => false,
    }
}

/// `ValidatePodSpec`, the parts clients meet.
fn validate_pod_spec(spec: &Value, path: &str, out: &mut Vec<FieldError>) {
    let containers = spec.get("containers").and_then(Value::as_array);
    if containers.is_none_or(|c| c.is_empty()) {
        out.push(FieldError::required(format!("{path}.containers"), ""));
    }
    let mut names: Vec<&str> = Vec::new();
    for key in ["initContainers", "containers"] {
        for (i, c) in spec
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = format!("{path}.{key}[{i}]");
            match c
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                None => out.push(FieldError::required(format!("{at}.name"), "")),
                Some(n) => {
                    invalid(&format!("{at}.name"), &json!(n), is_dns1123_label(n), out);
                    if names.contains(&n) {
                        out.push(FieldError::new(
                            FieldErrorKind::Duplicate,
                            format!("{at}.name"),
                            Some(crate::error::go_quote(n)),
                            "",
                        ));
                    }
                    names.push(n);
                }
            }
            if c.get("image")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                out.push(FieldError::required(format!("{at}.image"), ""));
            }
            for part in ["requests", "limits"] {
                for (r, q) in c
                    .pointer(&format!("/resources/{part}"))
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    if negative(q) {
                        let shown = match q {
                            Value::String(s) => json!(s),
                            other => json!(other.to_string()),
                        };
                        out.push(FieldError::invalid(
                            format!("{at}.resources.{part}[{r}]"),
                            &shown,
                            "must be greater than or equal to 0",
                        ));
                    }
                }
            }
        }
    }
    if let Some(p) = spec.get("restartPolicy").and_then(Value::as_str) {
        if !["Always", "OnFailure", "Never"].contains(&p) {
            out.push(FieldError::not_supported(
                format!("{path}.restartPolicy"),
                &json!(p),
                &["Always", "OnFailure", "Never"].map(String::from),
            ));
        }
    }
}

/// A workload's selector against its template's labels (apps/v1 and batch).
fn validate_selector(obj: &Value, out: &mut Vec<FieldError>) {
    let Some(selector) = obj.pointer("/spec/selector") else {
        out.push(FieldError::required("spec.selector", ""));
        return;
    };
    let labels = obj
        .pointer("/spec/template/metadata/labels")
        .cloned()
        .unwrap_or(json!({}));
    if !selector_matches(selector, &labels) {
        out.push(FieldError::invalid(
            "spec.template.metadata.labels",
            &labels,
            "`selector` does not match template `labels`",
        ));
    }
}

/// A `LabelSelector` (matchLabels and matchExpressions) against labels.
fn selector_matches(sel: &Value, labels: &Value) -> bool {
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    let ml_ok = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| get(k) == v.as_str());
    let me_ok = sel
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e.get("key").and_then(Value::as_str).unwrap_or("");
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match e.get("operator").and_then(Value::as_str).unwrap_or("") {
                "In" => get(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => !get(key).is_some_and(|v| values.contains(&v)),
                "Exists" => get(key).is_some(),
                "DoesNotExist" => get(key).is_none(),
                _ => false,
            }
        });
    ml_ok && me_ok
}

fn non_negative(obj: &Value, pointer: &str, field: &str, out: &mut Vec<FieldError>) {
    if let Some(n) = obj.pointer(pointer).and_then(Value::as_i64) {
        if n < 0 {
            out.push(FieldError::invalid(
                field,
                &json!(n),
                "must be greater than or equal to 0",
            ));
        }
    }
}

/// The causes of a 422 for a built-in object being created (`old` None)
/// or updated; empty when it is valid (as far as checked here).
pub(crate) fn validate(
    group: &str,
    kind: &str,
    obj: &Value,
    old: Option<&Value>,
) -> Vec<FieldError> {
    let mut out = Vec::new();
    validate_meta(group, kind, obj, &mut out);
    match (group, kind) {
        ("", "Pod") => {
            if let Some(spec) = obj.get("spec") {
                validate_pod_spec(spec, "spec", &mut out);
            }
            if let Some(old) = old {
                validate_pod_update(obj, old, &mut out);
            }
        }
        ("", "PodTemplate") => {
            if let Some(spec) = obj.pointer("/template/spec") {
                validate_pod_spec(spec, "template.spec", &mut out);
            }
        }
        ("", "ReplicationController") => {
            non_negative(obj, "/spec/replicas", "spec.replicas", &mut out);
            if let Some(spec) = obj.pointer("/spec/template/spec") {
                validate_pod_spec(spec, "spec.template.spec", &mut out);
            }
        }
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => {
            non_negative(obj, "/spec/replicas", "spec.replicas", &mut out);
            validate_selector(obj, &mut out);
            if let Some(spec) = obj.pointer("/spec/template/spec") {
                validate_pod_spec(spec, "spec.template.spec", &mut out);
            }
            if let Some(old) = old {
                if old.pointer("/spec/selector") != obj.pointer("/spec/selector") {
                    out.push(FieldError::invalid(
                        "spec.selector",
                        obj.pointer("/spec/selector").unwrap_or(&Value::Null),
                        "field is immutable",
                    ));
                }
            }
        }
        // batch/v1 Jobs: `crate::strategy` (with their immutable fields).
        ("coordination.k8s.io", "Lease") => {
            if let Some(d) = obj
                .pointer("/spec/leaseDurationSeconds")
                .and_then(Value::as_i64)
            {
                if d <= 0 {
                    out.push(FieldError::invalid(
                        "spec.leaseDurationSeconds",
                        &json!(d),
                        "must be greater than 0",
                    ));
                }
            }
        }
        ("", "ConfigMap" | "Secret") => {
            for field in ["data", "binaryData", "stringData"] {
                for k in obj
                    .get(field)
                    .and_then(Value::as_object)
                    .into_iter()
                    .flat_map(|m| m.keys())
                {
                    let mut msgs = Vec::new();
                    if k.len() > 253 {
                        msgs.push(max_len(253));
                    }
                    if !config_key_re().is_match(k) {
                        msgs.push(regex_error(
                            "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                            CONFIG_KEY_FMT,
                            &["key.name", "KEY_NAME", "key-name"],
                        ));
                    }
                    if k == "." || k == ".." || k.starts_with("..") {
                        msgs.push(match k.as_str() {
                            "." => "must not be '.'".to_string(),
                            ".." => "must not be '..'".to_string(),
                            _ => "must not start with '..'".to_string(),
                        });
                    }
                    invalid(&format!("{field}[{k}]"), &json!(k), msgs, &mut out);
                }
            }
        }
        ("flowcontrol.apiserver.k8s.io", "FlowSchema" | "PriorityLevelConfiguration") => {
            crate::flowcontrol::spec::validate(kind, obj, &mut out);
        }
        ("events.k8s.io", "Event") if old.is_none() => {
            // Checked as kube-apiserver checks every Event (in its internal
            // form, hence the core field names).
            let ns = obj
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            let regarding_ns = obj
                .pointer("/regarding/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            if regarding_ns != ns && !(regarding_ns.is_empty() && ns == "default") {
                out.push(FieldError::invalid(
                    "involvedObject.namespace",
                    &json!(regarding_ns),
                    "does not match event.namespace",
                ));
            }
            if obj.get("eventTime").is_none_or(Value::is_null) {
                out.push(FieldError::required("eventTime", ""));
            }
        }
        _ => {}
    }
    out
}

const UPDATABLE_POD_SPEC_FIELDS: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// `ValidatePodUpdate`: a pod's spec changes only in its images, active
/// deadline, tolerations (additions), scheduling gates (removals), and,
/// while it is gated, its node selector and node affinity.
fn validate_pod_update(new: &Value, old: &Value, out: &mut Vec<FieldError>) {
    let (Some(ns), Some(os)) = (new.get("spec"), old.get("spec")) else {
        return;
    };
    for key in ["containers", "initContainers"] {
        let len = |s: &Value| s.get(key).and_then(Value::as_array).map_or(0, Vec::len);
        if len(ns) != len(os) {
            out.push(FieldError::forbidden(
                format!("spec.{key}"),
                "pod updates may not add or remove containers",
            ));
            return;
        }
    }
    let list = |s: &Value, k: &str| {
        s.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let new_gates = list(ns, "schedulingGates");
    let old_gates = list(os, "schedulingGates");
    for g in &new_gates {
        if !old_gates.contains(g) {
            let name = g.get("name").and_then(Value::as_str).unwrap_or("");
            out.push(FieldError::forbidden(
                "spec.schedulingGates",
                format!("only deletion is allowed, but found new scheduling gate '{name}'"),
            ));
        }
    }
    let mut munged = ns.clone();
    for key in ["containers", "initContainers"] {
        if let (Some(mc), Some(oc)) = (
            munged.get_mut(key).and_then(Value::as_array_mut),
            os.get(key).and_then(Value::as_array),
        ) {
            for (m, o) in mc.iter_mut().zip(oc) {
                match o.get("image") {
                    Some(i) => m["image"] = i.clone(),
                    None => {
                        m.as_object_mut().map(|m| m.remove("image"));
                    }
                }
            }
        }
    }
    let gated = !old_gates.is_empty();
    let mut keep = vec!["activeDeadlineSeconds", "schedulingGates", "tolerations"];
    if gated {
        keep.push("nodeSelector");
    }
    for k in keep {
        match os.get(k) {
            Some(v) => munged[k] = v.clone(),
            None => {
                munged.as_object_mut().map(|m| m.remove(k));
            }
        }
    }
    if gated {
        match os.pointer("/affinity/nodeAffinity") {
            Some(a) => {
                if munged.get("affinity").is_some_and(Value::is_object) {
                    munged["affinity"]["nodeAffinity"] = a.clone();
                }
            }
            None => {
                if let Some(aff) = munged.get_mut("affinity").and_then(Value::as_object_mut) {
                    aff.remove("nodeAffinity");
                    if aff.is_empty() && os.get("affinity").is_none() {
                        munged.as_object_mut().map(|m| m.remove("affinity"));
                    }
                }
            }
        }
    }
    if munged != *os {
        out.push(FieldError::forbidden(
            "spec",
            format!("pod updates may not change fields other than {UPDATABLE_POD_SPEC_FIELDS}"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_as_apimachinery_words_them() {
        assert_eq!(
            is_qualified_name("bad key!"),
            ["name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]
        );
        assert_eq!(is_dns1123_subdomain("ok.example"), Vec::<String>::new());
        assert_eq!(is_dns1123_label("a.b"), ["must not contain dots"]);
    }

    #[test]
    fn a_pod_may_only_change_what_kube_apiserver_lets_it() {
        let old = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "a:1"}],
            "schedulingGates": [{"name": "g"}]}});
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = json!("a:2");
        new["spec"]["schedulingGates"] = json!([]);
        new["spec"]["nodeSelector"] = json!({"zone": "a"});
        assert!(validate("", "Pod", &new, Some(&old)).is_empty());
        new["spec"]["nodeName"] = json!("n1");
        let errs = validate("", "Pod", &new, Some(&old));
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec");
    }
}
