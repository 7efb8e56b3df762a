//! `admissionregistration.k8s.io/v1` MutatingWebhookConfiguration and
//! ValidatingWebhookConfiguration: their defaults and validation when
//! written (kube-apiserver 1.35's `SetDefaults_*Webhook` and
//! `ValidateMutatingWebhookConfiguration`, with its messages; their
//! `matchConditions` by [`super::conditions`]), and the
//! parsed [`Hook`]s the admission chain calls.

use crate::error::{ApiError, FieldError, Result};
use crate::selector::LabelSelector;
use base64::Engine as _;
use serde_json::{json, Value};
use std::time::Duration;

/// One webhook of a configuration, as the dispatcher uses it.
#[derive(Debug, Clone)]
pub(crate) struct Hook {
    /// `metadata.name` of its configuration.
    pub configuration: String,
    pub name: String,
    /// `configuration/name/index`: its identity for reinvocation.
    pub uid: String,
    pub mutating: bool,
    pub client: ClientConfig,
    pub rules: Vec<Rule>,
    /// `failurePolicy: Ignore`.
    pub ignore_failures: bool,
    /// `matchPolicy: Equivalent`.
    pub equivalent: bool,
    pub namespace_selector: LabelSelector,
    pub object_selector: LabelSelector,
    /// `None` or `NoneOnDryRun` (the only classes v1 admits).
    pub side_effects: String,
    pub timeout: Duration,
    /// `reinvocationPolicy: IfNeeded`.
    pub reinvoke: bool,
    /// Whether it reads AdmissionReview v1 (else v1beta1 only).
    pub review_v1: bool,
    /// `matchConditions`, compiled.
    pub match_conditions: Vec<super::conditions::Condition>,
}

/// Where a webhook is reached.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ClientConfig {
    pub target: Target,
    /// The PEM certificates its serving certificate must chain to.
    pub ca_bundle: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Target {
    /// `clientConfig.url`.
    Url(String),
    /// `clientConfig.service`.
    Service {
        namespace: String,
        name: String,
        port: u16,
        path: String,
    },
}

/// A rule: operations, and the group, version, resource (and
/// subresource) and scope of a request.
#[derive(Debug, Clone)]
pub(crate) struct Rule {
    pub operations: Vec<String>,
    pub groups: Vec<String>,
    pub versions: Vec<String>,
    pub resources: Vec<String>,
    pub scope: String,
}

impl Rule {
    /// A rule as written in a webhook's `rules` or a policy's
    /// `resourceRules` (scope `*` when not given).
    pub(crate) fn from_json(r: &Value) -> Rule {
        Rule {
            operations: strings(r.get("operations")),
            groups: strings(r.get("apiGroups")),
            versions: strings(r.get("apiVersions")),
            resources: strings(r.get("resources")),
            scope: r
                .get("scope")
                .and_then(Value::as_str)
                .unwrap_or("*")
                .to_string(),
        }
    }
}

pub(crate) fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The hooks of a stored configuration, in their order. Stored ones were
/// defaulted and validated when written, so nothing here fails but a
/// `caBundle` that is not base64 (which validation refused too).
pub(crate) fn hooks_of(config: &Value, mutating: bool) -> Vec<Hook> {
    let configuration = config
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let Some(hooks) = config.get("webhooks").and_then(Value::as_array) else {
        return Vec::new();
    };
    hooks
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let name = h
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let cc = h.get("clientConfig").cloned().unwrap_or(Value::Null);
            let target = match (cc.get("url").and_then(Value::as_str), cc.get("service")) {
                (Some(u), _) => Target::Url(u.to_string()),
                (None, Some(s)) => Target::Service {
                    namespace: s
                        .get("namespace")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .into(),
                    name: s.get("name").and_then(Value::as_str).unwrap_or("").into(),
                    port: s.get("port").and_then(Value::as_u64).unwrap_or(443) as u16,
                    path: s
                        .get("path")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                },
                (None, None) => Target::Url(String::new()),
            };
            let ca_bundle = cc
                .get("caBundle")
                .and_then(Value::as_str)
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .unwrap_or_default();
            let rules = h
                .get("rules")
                .and_then(Value::as_array)
                .map(|rs| rs.iter().map(Rule::from_json).collect())
                .unwrap_or_default();
            let selector = |k: &str| {
                LabelSelector::from_object(h.get(k).unwrap_or(&Value::Null)).unwrap_or_default()
            };
            let versions = strings(h.get("admissionReviewVersions"));
            Hook {
                uid: format!("{configuration}/{name}/{i}"),
                configuration: configuration.clone(),
                name,
                mutating,
                client: ClientConfig { target, ca_bundle },
                rules,
                ignore_failures: h.get("failurePolicy").and_then(Value::as_str) == Some("Ignore"),
                equivalent: h.get("matchPolicy").and_then(Value::as_str) != Some("Exact"),
                namespace_selector: selector("namespaceSelector"),
                object_selector: selector("objectSelector"),
                side_effects: h
                    .get("sideEffects")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                timeout: Duration::from_secs(
                    h.get("timeoutSeconds")
                        .and_then(Value::as_u64)
                        .unwrap_or(10),
                ),
                reinvoke: h.get("reinvocationPolicy").and_then(Value::as_str) == Some("IfNeeded"),
                review_v1: versions
                    .iter()
                    .find(|v| *v == "v1" || *v == "v1beta1")
                    .is_none_or(|v| v == "v1"),
                match_conditions: super::conditions::compile_cached(h.get("matchConditions")),
            }
        })
        .collect()
}

/// Defaults and validation of a configuration being written (`kind` is
/// `MutatingWebhookConfiguration` or `ValidatingWebhookConfiguration`).
pub(crate) fn admit(kind: &str, obj: &mut Value, old: Option<&Value>) -> Result<()> {
    let mutating = kind == "MutatingWebhookConfiguration";
    // `metadata.generation`: 1, bumped when the webhooks change.
    let generation =
        crate::store::next_generation(old, |o| o.get("webhooks") != obj.get("webhooks"));
    if obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"]["generation"] = json!(generation);
    }
    if let Some(hooks) = obj.get_mut("webhooks").and_then(Value::as_array_mut) {
        for h in hooks.iter_mut().filter(|h| h.is_object()) {
            default_hook(h, mutating);
        }
    }
    let mut errs = Vec::new();
    let mut names = std::collections::HashSet::new();
    // An update that changes no webhook's match conditions does not check
    // them again (`ignoreMatchConditions`): what compiled when written
    // stays writable.
    let conditions_of = |o: &Value| -> Option<Vec<Value>> {
        o.get("webhooks").and_then(Value::as_array).map(|hs| {
            hs.iter()
                .map(|h| h.get("matchConditions").cloned().unwrap_or(Value::Null))
                .collect()
        })
    };
    let check_conditions = old.is_none_or(|o| conditions_of(o) != conditions_of(obj));
    if let Some(hooks) = obj.get("webhooks").and_then(Value::as_array) {
        for (i, h) in hooks.iter().enumerate() {
            let at = format!("webhooks[{i}]");
            validate_hook(h, mutating, &at, check_conditions, &mut errs);
            let versions = h.get("admissionReviewVersions");
            review_versions(
                versions,
                &format!("{at}.admissionReviewVersions"),
                &mut errs,
            );
            if let Some(n) = h
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                if !names.insert(n.to_string()) {
                    errs.push(FieldError::new(
                        crate::error::FieldErrorKind::Duplicate,
                        format!("{at}.name"),
                        Some(crate::error::go_quote(n)),
                        "",
                    ));
                }
            }
        }
    }
    if errs.is_empty() {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    Err(ApiError::invalid(
        "admissionregistration.k8s.io",
        kind,
        name,
        errs,
    ))
}

fn default_hook(h: &mut Value, mutating: bool) {
    let m = h.as_object_mut().expect("an object");
    m.entry("failurePolicy").or_insert(json!("Fail"));
    m.entry("matchPolicy").or_insert(json!("Equivalent"));
    m.entry("namespaceSelector").or_insert(json!({}));
    m.entry("objectSelector").or_insert(json!({}));
    m.entry("timeoutSeconds").or_insert(json!(10));
    if mutating {
        m.entry("reinvocationPolicy").or_insert(json!("Never"));
    }
    if let Some(rules) = m.get_mut("rules").and_then(Value::as_array_mut) {
        for r in rules.iter_mut().filter_map(Value::as_object_mut) {
            r.entry("scope").or_insert(json!("*"));
        }
    }
    if let Some(s) = m
        .get_mut("clientConfig")
        .and_then(|c| c.get_mut("service"))
        .and_then(Value::as_object_mut)
    {
        s.entry("port").or_insert(json!(443));
    }
}

fn not_supported(errs: &mut Vec<FieldError>, field: String, v: &Value, allowed: &[&str]) {
    let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
    errs.push(FieldError::not_supported(field, v, &allowed));
}

fn validate_hook(
    h: &Value,
    mutating: bool,
    at: &str,
    check_conditions: bool,
    errs: &mut Vec<FieldError>,
) {
    let name = h.get("name").and_then(Value::as_str).unwrap_or("");
    if name.is_empty() {
        errs.push(FieldError::required(format!("{at}.name"), ""));
    } else {
        let bad = crate::crd::dns1123_subdomain(name);
        if !bad.is_empty() {
            errs.push(FieldError::invalid(
                format!("{at}.name"),
                &json!(name),
                bad.join(","),
            ));
        } else if name.split('.').count() < 3 {
            errs.push(FieldError::invalid(
                format!("{at}.name"),
                &json!(name),
                "should be a domain with at least three segments separated by dots",
            ));
        }
    }
    if let Some(rules) = h.get("rules").and_then(Value::as_array) {
        for (i, r) in rules.iter().enumerate() {
            validate_rule(r, &format!("{at}.rules[{i}]"), errs);
        }
    }
    let one_of = |k: &str, allowed: &[&str], errs: &mut Vec<FieldError>| {
        if let Some(v) = h.get(k).filter(|v| !v.is_null()) {
            if !v.as_str().is_some_and(|s| allowed.contains(&s)) {
                not_supported(errs, format!("{at}.{k}"), v, allowed);
            }
        }
    };
    one_of("failurePolicy", &["Fail", "Ignore"], errs);
    one_of("matchPolicy", &["Equivalent", "Exact"], errs);
    if mutating {
        one_of("reinvocationPolicy", &["IfNeeded", "Never"], errs);
    }
    match h.get("sideEffects").filter(|v| !v.is_null()) {
        None => errs.push(FieldError::required(
            format!("{at}.sideEffects"),
            "must specify one of None, NoneOnDryRun",
        )),
        Some(v) => {
            if !matches!(v.as_str(), Some("None" | "NoneOnDryRun")) {
                not_supported(
                    errs,
                    format!("{at}.sideEffects"),
                    v,
                    &["None", "NoneOnDryRun"],
                );
            }
        }
    }
    if let Some(t) = h.get("timeoutSeconds").and_then(Value::as_i64) {
        if !(1..=30).contains(&t) {
            errs.push(FieldError::invalid(
                format!("{at}.timeoutSeconds"),
                &json!(t),
                "the timeout value must be between 1 and 30 seconds",
            ));
        }
    }
    for k in ["namespaceSelector", "objectSelector"] {
        if let Some(sel) = h.get(k) {
            if let Err(e) = LabelSelector::from_object(sel) {
                errs.push(FieldError::invalid(format!("{at}.{k}"), sel, e));
            }
        }
    }
    let cc = h.get("clientConfig").cloned().unwrap_or(Value::Null);
    if let Some(b) = cc.get("caBundle").and_then(Value::as_str) {
        if base64::engine::general_purpose::STANDARD.decode(b).is_err() {
            errs.push(FieldError::invalid(
                format!("{at}.clientConfig.caBundle"),
                &json!(b),
                "must be base64 encoded (the PEM certificates of the webhook's CA)",
            ));
        }
    }
    let url = cc.get("url").filter(|v| !v.is_null());
    let service = cc.get("service").filter(|v| !v.is_null());
    match (url, service) {
        (Some(_), Some(_)) | (None, None) => errs.push(FieldError::required(
            format!("{at}.clientConfig"),
            "exactly one of url or service is required",
        )),
        (Some(u), None) => validate_url(
            u.as_str().unwrap_or(""),
            &format!("{at}.clientConfig.url"),
            errs,
        ),
        (None, Some(s)) => validate_service(s, &format!("{at}.clientConfig.service"), errs),
    }
    if check_conditions {
        super::conditions::validate(
            h.get("matchConditions"),
            &format!("{at}.matchConditions"),
            false,
            errs,
        );
    }
}

const URL_FORM: &str = "; desired format: https://host[/path]";

fn validate_url(u: &str, at: &str, errs: &mut Vec<FieldError>) {
    let (scheme, rest) = u.split_once("://").unwrap_or(("", u));
    if scheme != "https" {
        errs.push(FieldError::invalid(
            at,
            &json!(scheme),
            format!("'https' is the only allowed URL scheme{URL_FORM}"),
        ));
    }
    let (authority, tail) = match rest.find(['/', '?', '#']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    if let Some((user, _)) = authority.split_once('@') {
        errs.push(FieldError::invalid(
            at,
            &json!(user),
            "user information is not permitted in the URL",
        ));
    }
    let host = authority.rsplit('@').next().unwrap_or("");
    if host.is_empty() {
        errs.push(FieldError::invalid(
            at,
            &json!(host),
            format!("host must be specified{URL_FORM}"),
        ));
    }
    if let Some((_, frag)) = tail.split_once('#') {
        errs.push(FieldError::invalid(
            at,
            &json!(frag),
            "fragments are not permitted in the URL",
        ));
    }
    let no_frag = tail.split('#').next().unwrap_or("");
    if let Some((_, q)) = no_frag.split_once('?') {
        errs.push(FieldError::invalid(
            at,
            &json!(q),
            "query parameters are not permitted in the URL",
        ));
    }
}

fn validate_service(s: &Value, at: &str, errs: &mut Vec<FieldError>) {
    for k in ["name", "namespace"] {
        if s.get(k).and_then(Value::as_str).is_none_or(str::is_empty) {
            errs.push(FieldError::required(format!("{at}.{k}"), ""));
        }
    }
    let port = s.get("port").and_then(Value::as_i64).unwrap_or(443);
    if !(1..=65535).contains(&port) {
        errs.push(FieldError::invalid(
            format!("{at}.port"),
            &json!(port),
            "port is not valid: must be between 1 and 65535, inclusive",
        ));
    }
    let Some(path) = s.get("path").and_then(Value::as_str) else {
        return;
    };
    if path.is_empty() || path == "/" {
        return;
    }
    let field = format!("{at}.path");
    if path == "//" {
        errs.push(FieldError::invalid(
            field,
            &json!(path),
            "segment[0] may not be empty",
        ));
        return;
    }
    if !path.starts_with('/') {
        errs.push(FieldError::invalid(
            &field,
            &json!(path),
            "must start with a '/'",
        ));
    }
    let inner = path.strip_prefix('/').unwrap_or(path);
    let inner = inner.strip_suffix('/').unwrap_or(inner);
    for (i, step) in inner.split('/').enumerate() {
        if step.is_empty() {
            errs.push(FieldError::invalid(
                &field,
                &json!(path),
                format!("segment[{i}] may not be empty"),
            ));
            continue;
        }
        for failure in crate::crd::dns1123_subdomain(step) {
            errs.push(FieldError::invalid(
                &field,
                &json!(path),
                format!("segment[{i}]: {failure}"),
            ));
        }
    }
}

pub(crate) fn validate_rule(r: &Value, at: &str, errs: &mut Vec<FieldError>) {
    let ops = strings(r.get("operations"));
    if ops.is_empty() {
        errs.push(FieldError::required(format!("{at}.operations"), ""));
    }
    if ops.len() > 1 && ops.iter().any(|o| o == "*") {
        errs.push(FieldError::invalid(
            format!("{at}.operations"),
            r.get("operations").unwrap_or(&Value::Null),
            "if '*' is present, must not specify other operations",
        ));
    }
    for (i, op) in ops.iter().enumerate() {
        let allowed = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
        if !allowed.contains(&op.as_str()) {
            not_supported(errs, format!("{at}.operations[{i}]"), &json!(op), &allowed);
        }
    }
    for (k, what) in [("apiGroups", "API groups"), ("apiVersions", "API versions")] {
        let v = strings(r.get(k));
        if v.is_empty() {
            errs.push(FieldError::required(format!("{at}.{k}"), ""));
        }
        if v.len() > 1 && v.iter().any(|g| g == "*") {
            errs.push(FieldError::invalid(
                format!("{at}.{k}"),
                r.get(k).unwrap_or(&Value::Null),
                format!("if '*' is present, must not specify other {what}"),
            ));
        }
        if k == "apiVersions" {
            for (i, ver) in v.iter().enumerate() {
                if ver.is_empty() {
                    errs.push(FieldError::required(format!("{at}.{k}[{i}]"), ""));
                }
            }
        }
    }
    validate_resources(
        &strings(r.get("resources")),
        r.get("resources"),
        &format!("{at}.resources"),
        errs,
    );
    if let Some(scope) = r.get("scope").filter(|v| !v.is_null()) {
        if !matches!(scope.as_str(), Some("*" | "Cluster" | "Namespaced")) {
            not_supported(
                errs,
                format!("{at}.scope"),
                scope,
                &["*", "Cluster", "Namespaced"],
            );
        }
    }
}

fn validate_resources(
    resources: &[String],
    raw: Option<&Value>,
    at: &str,
    errs: &mut Vec<FieldError>,
) {
    if resources.is_empty() {
        errs.push(FieldError::required(at, ""));
    }
    let mut res_wild_sub = std::collections::HashSet::new();
    let mut sub_wild_res = std::collections::HashSet::new();
    let (mut double, mut single, mut plain) = (false, false, false);
    for (i, rs) in resources.iter().enumerate() {
        if rs.is_empty() {
            errs.push(FieldError::required(format!("{at}[{i}]"), ""));
            continue;
        }
        double |= rs == "*/*";
        single |= rs == "*";
        let Some((res, sub)) = rs.split_once('/') else {
            plain = rs != "*";
            continue;
        };
        if res_wild_sub.contains(res) {
            errs.push(FieldError::invalid(
                format!("{at}[{i}]"),
                &json!(rs),
                format!("if '{res}/*' is present, must not specify {rs}"),
            ));
        }
        if sub_wild_res.contains(sub) {
            errs.push(FieldError::invalid(
                format!("{at}[{i}]"),
                &json!(rs),
                format!("if '*/{sub}' is present, must not specify {rs}"),
            ));
        }
        if sub == "*" {
            res_wild_sub.insert(res.to_string());
        }
        if res == "*" {
            sub_wild_res.insert(sub.to_string());
        }
    }
    let raw = raw.cloned().unwrap_or(Value::Null);
    if resources.len() > 1 && double {
        errs.push(FieldError::invalid(
            at,
            &raw,
            "if '*/*' is present, must not specify other resources",
        ));
    }
    if single && plain {
        errs.push(FieldError::invalid(
            at,
            &raw,
            "if '*' is present, must not specify other resources without subresources",
        ));
    }
}

fn review_versions(v: Option<&Value>, at: &str, errs: &mut Vec<FieldError>) {
    let versions = strings(v);
    if versions.is_empty() {
        errs.push(FieldError::required(at, "must specify one of v1, v1beta1"));
        return;
    }
    let mut seen = std::collections::HashSet::new();
    let mut accepted = false;
    for (i, ver) in versions.iter().enumerate() {
        if !seen.insert(ver) {
            errs.push(FieldError::invalid(
                format!("{at}[{i}]"),
                &json!(ver),
                "duplicate version",
            ));
            continue;
        }
        for e in crate::crd::dns1035_label(ver) {
            errs.push(FieldError::invalid(format!("{at}[{i}]"), &json!(ver), e));
        }
        accepted |= ver == "v1" || ver == "v1beta1";
    }
    if !accepted {
        errs.push(FieldError::invalid(
            at,
            v.unwrap_or(&Value::Null),
            "must include at least one of v1, v1beta1",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Value {
        json!({"metadata": {"name": "c"}, "webhooks": [{
            "name": "pods.example.com",
            "clientConfig": {"service": {"namespace": "ns", "name": "svc", "path": "/mutate"}},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }]})
    }

    #[test]
    fn defaults_are_written_and_hooks_parsed() {
        let mut c = config();
        admit("MutatingWebhookConfiguration", &mut c, None).unwrap();
        let h = &c["webhooks"][0];
        assert_eq!(h["failurePolicy"], "Fail");
        assert_eq!(h["matchPolicy"], "Equivalent");
        assert_eq!(h["timeoutSeconds"], 10);
        assert_eq!(h["reinvocationPolicy"], "Never");
        assert_eq!(h["rules"][0]["scope"], "*");
        assert_eq!(h["clientConfig"]["service"]["port"], 443);
        let hooks = hooks_of(&c, true);
        assert_eq!(hooks[0].uid, "c/pods.example.com/0");
        assert_eq!(
            hooks[0].client.target,
            Target::Service {
                namespace: "ns".into(),
                name: "svc".into(),
                port: 443,
                path: "/mutate".into()
            }
        );
        assert!(!hooks[0].ignore_failures && hooks[0].equivalent && !hooks[0].reinvoke);
        let mut v = config();
        admit("ValidatingWebhookConfiguration", &mut v, None).unwrap();
        assert!(v["webhooks"][0].get("reinvocationPolicy").is_none());
    }

    #[test]
    fn bad_configurations_get_the_real_messages() {
        let mut c = config();
        let h = &mut c["webhooks"][0];
        h["name"] = json!("pods");
        h.as_object_mut().unwrap().remove("sideEffects");
        h["timeoutSeconds"] = json!(31);
        h["clientConfig"] = json!({"url": "http://x/y?z=1"});
        h["admissionReviewVersions"] = json!(["v2"]);
        h["rules"][0]["operations"] = json!(["PUT"]);
        let e = admit("MutatingWebhookConfiguration", &mut c, None)
            .unwrap_err()
            .to_string();
        for want in [
            r#"webhooks[0].name: Invalid value: "pods": should be a domain with at least three segments separated by dots"#,
            "webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun",
            "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
            r#"webhooks[0].clientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]"#,
            r#"webhooks[0].clientConfig.url: Invalid value: "z=1": query parameters are not permitted in the URL"#,
            r#"webhooks[0].admissionReviewVersions: Invalid value: ["v2"]: must include at least one of v1, v1beta1"#,
            r#"webhooks[0].rules[0].operations[0]: Unsupported value: "PUT": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE""#,
        ] {
            assert!(e.contains(want), "{want}\nnot in\n{e}");
        }
        assert!(
            e.starts_with(
                r#"MutatingWebhookConfiguration.admissionregistration.k8s.io "c" is invalid"#
            ),
            "{e}"
        );
        let mut two = config();
        let dup = two["webhooks"][0].clone();
        two["webhooks"].as_array_mut().unwrap().push(dup);
        let e = admit("ValidatingWebhookConfiguration", &mut two, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(r#"webhooks[1].name: Duplicate value: "pods.example.com""#),
            "{e}"
        );
    }
}
