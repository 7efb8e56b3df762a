//! A ValidatingAdmissionPolicy or ValidatingAdmissionPolicyBinding being
//! written: kube-apiserver 1.35's defaults (`SetObjectDefaults_*`), its
//! strategy (a new policy's empty status and generation 1, the generation
//! bumped when the spec changes, the status subresource writing the status
//! only) and its validation (`ValidateValidatingAdmissionPolicy`,
//! `...Binding`, `...StatusUpdate`), with its field paths and messages. A
//! policy's expressions are compiled as the real server compiles them when
//! it stores one: against untyped objects (`dyn`), so that what fails here
//! is a syntax error, an undeclared name (`params` without a `paramKind`), a
//! result of the wrong type; the checks against the matched kinds' schemas
//! are the type checker's warnings (`typecheck.rs`).

use super::expr;
use crate::admission::config::{strings, validate_rule};
use crate::error::{go_quote, ApiError, FieldError, FieldErrorKind, Result};
use crate::validation::{
    is_dns1035_label, is_dns1123_subdomain, is_label_value, is_qualified_name,
};
use serde_json::{json, Value};
use std::collections::HashSet;

const GROUP: &str = "admissionregistration.k8s.io";

/// At most this many audit annotations a policy.
const MAX_AUDIT_ANNOTATIONS: usize = 20;
/// An audit annotation's value expression's longest form.
const MAX_AUDIT_VALUE_EXPRESSION: usize = 5 * 1024;

/// Defaults, strategy and validation of a policy (`kind`
/// `ValidatingAdmissionPolicy`) or binding being written; `old` on an
/// update; `status` when the write is to the status subresource.
pub(crate) fn admit(kind: &str, obj: &mut Value, old: Option<&Value>, status: bool) -> Result<()> {
    let policy = kind == "ValidatingAdmissionPolicy";
    if !obj.get("spec").is_some_and(Value::is_object) {
        obj["spec"] = json!({});
    }
    let mut errs = Vec::new();
    if policy {
        if status {
            // Only the status changes (the store kept the rest); it is all
            // that is checked.
            validate_status(obj, &mut errs);
        } else {
            default_policy(&mut obj["spec"]);
            let generation =
                crate::store::next_generation(old, |o| o.get("spec") != obj.get("spec"));
            obj["metadata"]["generation"] = json!(generation);
            match old {
                // `PrepareForCreate`: no status yet (the type checker
                // writes it).
                None => obj["status"] = json!({}),
                Some(o) => match o.get("status") {
                    Some(s) => obj["status"] = s.clone(),
                    None => {
                        obj.as_object_mut().map(|m| m.remove("status"));
                    }
                },
            }
            validate_policy(obj, &mut errs);
        }
    } else {
        if let Some(m) = obj["spec"].get_mut("matchResources") {
            default_match_resources(m);
        }
        let generation = crate::store::next_generation(old, |o| o.get("spec") != obj.get("spec"));
        obj["metadata"]["generation"] = json!(generation);
        validate_binding(obj, &mut errs);
    }
    if errs.is_empty() {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    Err(ApiError::invalid(GROUP, kind, name, errs))
}

fn default_policy(spec: &mut Value) {
    let Some(m) = spec.as_object_mut() else {
        return;
    };
    m.entry("failurePolicy").or_insert(json!("Fail"));
    if let Some(mc) = m.get_mut("matchConstraints") {
        default_match_resources(mc);
    }
}

/// `SetDefaults_MatchResources` and `SetDefaults_Rule` of its rules.
fn default_match_resources(mc: &mut Value) {
    let Some(m) = mc.as_object_mut() else {
        return;
    };
    m.entry("matchPolicy").or_insert(json!("Equivalent"));
    m.entry("namespaceSelector").or_insert(json!({}));
    m.entry("objectSelector").or_insert(json!({}));
    for k in ["resourceRules", "excludeResourceRules"] {
        if let Some(rules) = m.get_mut(k).and_then(Value::as_array_mut) {
            for r in rules.iter_mut().filter_map(Value::as_object_mut) {
                r.entry("scope").or_insert(json!("*"));
            }
        }
    }
}

fn text<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn present(v: &Value, k: &str) -> Option<Value> {
    v.get(k).filter(|x| !x.is_null()).cloned()
}

fn one_of(errs: &mut Vec<FieldError>, at: String, v: &Value, allowed: &[&str]) {
    let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
    errs.push(FieldError::not_supported(at, v, &allowed));
}

fn validate_policy(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = &obj["spec"];
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    match present(spec, "failurePolicy") {
        None => errs.push(FieldError::required("spec.failurePolicy", "")),
        Some(f) => {
            if !matches!(f.as_str(), Some("Fail" | "Ignore")) {
                one_of(errs, "spec.failurePolicy".into(), &f, &["Fail", "Ignore"]);
            }
        }
    }
    let param_kind = present(spec, "paramKind");
    if let Some(pk) = &param_kind {
        validate_param_kind(pk, errs);
    }
    match present(spec, "matchConstraints") {
        None => errs.push(FieldError::required("spec.matchConstraints", "")),
        Some(mc) => {
            validate_match_resources(&mc, "spec.matchConstraints", errs);
            if mc
                .get("resourceRules")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                errs.push(FieldError::required(
                    "spec.matchConstraints.resourceRules",
                    "",
                ));
            }
        }
    }
    let has_params = param_kind.is_some();
    let mut env = expr::Env::untyped(has_params);
    crate::admission::conditions::validate(
        spec.get("matchConditions"),
        "spec.matchConditions",
        has_params,
        errs,
    );
    if let Some(vars) = spec.get("variables").and_then(Value::as_array) {
        for (i, v) in vars.iter().enumerate() {
            let at = format!("spec.variables[{i}]");
            let var_name = text(v, "name");
            if var_name.trim().is_empty() {
                errs.push(FieldError::required(
                    format!("{at}.name"),
                    "name is not specified",
                ));
            } else if !is_cel_identifier(var_name) {
                errs.push(FieldError::invalid(
                    format!("{at}.name"),
                    &json!(var_name),
                    "must be a valid CEL identifier",
                ));
            }
            let e = text(v, "expression");
            if e.trim().is_empty() {
                errs.push(FieldError::required(
                    format!("{at}.expression"),
                    "expression is not specified",
                ));
                continue;
            }
            match expr::compile(e, &env, expr::Returns::Any) {
                Ok(c) => env.declare(var_name, c.ty.clone()),
                Err(detail) => {
                    env.declare(var_name, expr::dyn_ty());
                    errs.push(FieldError::invalid(
                        format!("{at}.expression"),
                        &json!(e),
                        detail,
                    ));
                }
            }
        }
    }
    let validations = spec.get("validations").and_then(Value::as_array);
    let audits = spec.get("auditAnnotations").and_then(Value::as_array);
    if validations.is_none_or(Vec::is_empty) && audits.is_none_or(Vec::is_empty) {
        let why = "validations or auditAnnotations must contain at least one item";
        errs.push(FieldError::required("spec.validations", why));
        errs.push(FieldError::required("spec.auditAnnotations", why));
        return;
    }
    for (i, v) in validations.into_iter().flatten().enumerate() {
        validate_validation(v, &format!("spec.validations[{i}]"), &env, errs);
    }
    if let Some(audits) = audits {
        if audits.len() > MAX_AUDIT_ANNOTATIONS {
            errs.push(FieldError::invalid(
                "spec.auditAnnotations",
                &Value::Array(audits.clone()),
                format!("must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations"),
            ));
        }
        let mut keys = HashSet::new();
        for (i, a) in audits.iter().enumerate() {
            let at = format!("spec.auditAnnotations[{i}]");
            let key = text(a, "key");
            if name.is_empty() {
                errs.push(FieldError::invalid(
                    format!("{at}.key"),
                    &json!(key),
                    "requires metadata.name be non-empty",
                ));
            } else {
                let full = format!("{name}/{key}");
                for m in is_qualified_name(&full) {
                    errs.push(FieldError::invalid(format!("{at}.key"), &json!(full), m));
                }
            }
            let ve = text(a, "valueExpression").trim();
            if ve.is_empty() {
                errs.push(FieldError::required(
                    format!("{at}.valueExpression"),
                    "valueExpression is not specified",
                ));
            } else if ve.len() > MAX_AUDIT_VALUE_EXPRESSION {
                errs.push(FieldError::required(
                    format!("{at}.valueExpression"),
                    format!("must not exceed {MAX_AUDIT_VALUE_EXPRESSION} bytes in length"),
                ));
            } else if let Err(detail) = expr::compile(ve, &env, expr::Returns::StringOrNull) {
                errs.push(FieldError::invalid(
                    format!("{at}.valueExpression"),
                    &json!(text(a, "valueExpression")),
                    detail,
                ));
            }
            if !keys.insert(key.to_string()) {
                errs.push(FieldError::new(
                    FieldErrorKind::Duplicate,
                    format!("{at}.key"),
                    Some(go_quote(key)),
                    "",
                ));
            }
        }
    }
}

fn validate_validation(v: &Value, at: &str, env: &expr::Env, errs: &mut Vec<FieldError>) {
    let e = text(v, "expression");
    if e.trim().is_empty() {
        errs.push(FieldError::required(
            format!("{at}.expression"),
            "expression is not specified",
        ));
    } else if let Err(detail) = expr::compile(e, env, expr::Returns::Bool) {
        errs.push(FieldError::invalid(
            format!("{at}.expression"),
            &json!(e),
            detail,
        ));
    }
    let me = text(v, "messageExpression");
    if !me.is_empty() && me.trim().is_empty() {
        errs.push(FieldError::invalid(
            format!("{at}.messageExpression"),
            &json!(me),
            "must be non-empty if specified",
        ));
    } else if !me.trim().is_empty() {
        // A message expression has no authorizer.
        let env = env.without_authorizer();
        if let Err(detail) = expr::compile(me, &env, expr::Returns::String) {
            errs.push(FieldError::invalid(
                format!("{at}.messageExpression"),
                &json!(me),
                detail,
            ));
        }
    }
    let m = text(v, "message");
    if !m.is_empty() && m.trim().is_empty() {
        errs.push(FieldError::invalid(
            format!("{at}.message"),
            &json!(m),
            "must be non-empty if specified",
        ));
    } else if m.trim().contains(['\n', '\r']) {
        errs.push(FieldError::invalid(
            format!("{at}.message"),
            &json!(m),
            "must not contain line breaks",
        ));
    }
    if let Some(r) = present(v, "reason") {
        if !matches!(
            r.as_str(),
            Some("Forbidden" | "Invalid" | "RequestEntityTooLarge")
        ) {
            one_of(
                errs,
                format!("{at}.reason"),
                &r,
                &["Forbidden", "Invalid", "RequestEntityTooLarge"],
            );
        }
    }
}

fn validate_param_kind(pk: &Value, errs: &mut Vec<FieldError>) {
    let api_version = text(pk, "apiVersion");
    if api_version.is_empty() {
        errs.push(FieldError::required("spec.paramKind.apiVersion", ""));
    } else {
        let (group, version) = match api_version.matches('/').count() {
            0 => ("", api_version),
            1 => api_version.split_once('/').expect("one slash"),
            _ => {
                errs.push(FieldError::invalid(
                    "spec.paramKind.apiVersion",
                    &json!(api_version),
                    format!("unexpected GroupVersion string: {api_version}"),
                ));
                ("", "x")
            }
        };
        if !group.is_empty() {
            let bad = is_dns1123_subdomain(group);
            if !bad.is_empty() {
                errs.push(FieldError::invalid(
                    "spec.paramKind.apiVersion",
                    &json!(group),
                    bad.join(","),
                ));
            }
        }
        if version.is_empty() {
            errs.push(FieldError::invalid(
                "spec.paramKind.apiVersion",
                &json!(api_version),
                "version must be specified",
            ));
        } else {
            let bad = is_dns1035_label(version);
            if !bad.is_empty() {
                errs.push(FieldError::invalid(
                    "spec.paramKind.apiVersion",
                    &json!(version),
                    bad.join(","),
                ));
            }
        }
    }
    let kind = text(pk, "kind");
    if kind.is_empty() {
        errs.push(FieldError::required("spec.paramKind.kind", ""));
    } else {
        let bad = is_dns1035_label(&kind.to_lowercase());
        if !bad.is_empty() {
            errs.push(FieldError::invalid(
                "spec.paramKind.kind",
                &json!(kind),
                format!(
                    "may have mixed case, but should otherwise match: {}",
                    bad.join(",")
                ),
            ));
        }
    }
}

fn validate_match_resources(mc: &Value, at: &str, errs: &mut Vec<FieldError>) {
    match present(mc, "matchPolicy") {
        None => errs.push(FieldError::required(format!("{at}.matchPolicy"), "")),
        Some(p) => {
            if !matches!(p.as_str(), Some("Equivalent" | "Exact")) {
                one_of(
                    errs,
                    format!("{at}.matchPolicy"),
                    &p,
                    &["Equivalent", "Exact"],
                );
            }
        }
    }
    for k in ["namespaceSelector", "objectSelector"] {
        match present(mc, k) {
            None => errs.push(FieldError::required(format!("{at}.{k}"), "")),
            Some(sel) => validate_label_selector(&sel, &format!("{at}.{k}"), errs),
        }
    }
    for k in ["resourceRules", "excludeResourceRules"] {
        if let Some(rules) = mc.get(k).and_then(Value::as_array) {
            for (i, r) in rules.iter().enumerate() {
                let rat = format!("{at}.{k}[{i}]");
                let mut seen = HashSet::new();
                for (j, n) in strings(r.get("resourceNames")).iter().enumerate() {
                    for m in path_segment_name(n) {
                        errs.push(FieldError::invalid(
                            format!("{rat}.resourceNames[{j}]"),
                            &json!(n),
                            m,
                        ));
                    }
                    if !seen.insert(n.clone()) {
                        errs.push(FieldError::new(
                            FieldErrorKind::Duplicate,
                            format!("{rat}.resourceNames[{j}]"),
                            Some(go_quote(n)),
                            "",
                        ));
                    }
                }
                validate_rule(r, &rat, errs);
            }
        }
    }
}

/// `ValidatePathSegmentName`.
fn path_segment_name(n: &str) -> Vec<String> {
    if n == "." || n == ".." {
        return vec![format!("may not be '{n}'")];
    }
    let mut out = Vec::new();
    for bad in ["/", "%"] {
        if n.contains(bad) {
            out.push(format!("may not contain '{bad}'"));
        }
    }
    out
}

/// `ValidateLabelSelector` (strict: the values of `matchLabels` and of
/// the expressions are label values).
pub(crate) fn validate_label_selector(sel: &Value, at: &str, errs: &mut Vec<FieldError>) {
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            for e in is_qualified_name(k) {
                errs.push(FieldError::invalid(
                    format!("{at}.matchLabels"),
                    &json!(k),
                    e,
                ));
            }
            let v = v.as_str().unwrap_or("");
            for e in is_label_value(v) {
                errs.push(FieldError::invalid(
                    format!("{at}.matchLabels"),
                    &json!(v),
                    e,
                ));
            }
        }
    }
    let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) else {
        return;
    };
    for (i, e) in exprs.iter().enumerate() {
        let eat = format!("{at}.matchExpressions[{i}]");
        let values = strings(e.get("values"));
        let op = text(e, "operator");
        match op {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.push(FieldError::required(
                        format!("{eat}.values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.push(FieldError::forbidden(
                        format!("{eat}.values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            _ => errs.push(FieldError::invalid(
                format!("{eat}.operator"),
                &json!(op),
                "not a valid selector operator",
            )),
        }
        let key = text(e, "key");
        for m in is_qualified_name(key) {
            errs.push(FieldError::invalid(format!("{eat}.key"), &json!(key), m));
        }
        for (j, v) in values.iter().enumerate() {
            for m in is_label_value(v) {
                errs.push(FieldError::invalid(
                    format!("{eat}.values[{j}]"),
                    &json!(v),
                    m,
                ));
            }
        }
    }
}

fn validate_binding(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = &obj["spec"];
    let policy = text(spec, "policyName");
    if policy.is_empty() {
        errs.push(FieldError::required("spec.policyName", ""));
    } else {
        for m in is_dns1123_subdomain(policy) {
            errs.push(FieldError::invalid("spec.policyName", &json!(policy), m));
        }
    }
    if let Some(pr) = present(spec, "paramRef") {
        validate_param_ref(&pr, errs);
    }
    if let Some(mr) = present(spec, "matchResources") {
        validate_match_resources(&mr, "spec.matchResources", errs);
    }
    let actions = strings(spec.get("validationActions"));
    let at = "spec.validationActions";
    let mut seen = HashSet::new();
    for (i, a) in actions.iter().enumerate() {
        if !matches!(a.as_str(), "Deny" | "Warn" | "Audit") {
            one_of(
                errs,
                format!("{at}[{i}]"),
                &json!(a),
                &["Audit", "Deny", "Warn"],
            );
        }
        if !seen.insert(a.as_str()) {
            errs.push(FieldError::new(
                FieldErrorKind::Duplicate,
                format!("{at}[{i}]"),
                Some(go_quote(a)),
                "",
            ));
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        errs.push(FieldError::invalid(
            at,
            &json!(actions),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if seen.is_empty() {
        errs.push(FieldError::required(
            at,
            "at least one validation action is required",
        ));
    }
}

fn validate_param_ref(pr: &Value, errs: &mut Vec<FieldError>) {
    let name = text(pr, "name");
    let selector = present(pr, "selector");
    if !name.is_empty() {
        for m in path_segment_name(name) {
            errs.push(FieldError::invalid("spec.paramRef.name", &json!(name), m));
        }
        if selector.is_some() {
            errs.push(FieldError::forbidden(
                "spec.paramRef.name",
                "name and selector are mutually exclusive",
            ));
        }
    }
    if let Some(sel) = &selector {
        validate_label_selector(sel, "spec.paramRef.selector", errs);
        if !name.is_empty() {
            errs.push(FieldError::forbidden(
                "spec.paramRef.selector",
                "name and selector are mutually exclusive",
            ));
        }
    }
    if name.is_empty() && selector.is_none() {
        errs.push(FieldError::required(
            "spec.paramRef",
            "one of name or selector must be specified",
        ));
    }
    match present(pr, "parameterNotFoundAction").filter(|a| a.as_str() != Some("")) {
        None => errs.push(FieldError::required(
            "spec.paramRef.parameterNotFoundAction",
            "",
        )),
        Some(a) => {
            if !matches!(a.as_str(), Some("Deny" | "Allow")) {
                one_of(
                    errs,
                    "spec.paramRef.parameterNotFoundAction".into(),
                    &a,
                    &["Deny", "Allow"],
                );
            }
        }
    }
}

fn validate_status(obj: &Value, errs: &mut Vec<FieldError>) {
    if let Some(ws) = obj
        .pointer("/status/typeChecking/expressionWarnings")
        .and_then(Value::as_array)
    {
        for (i, w) in ws.iter().enumerate() {
            let at = format!("status.typeChecking.expressionWarnings[{i}]");
            if text(w, "warning").is_empty() {
                errs.push(FieldError::required(format!("{at}.warning"), ""));
            }
            if text(w, "fieldRef").trim().is_empty() {
                errs.push(FieldError::required(format!("{at}.fieldRef"), ""));
            }
        }
    }
    if let Some(cs) = obj.pointer("/status/conditions").and_then(Value::as_array) {
        for (i, c) in cs.iter().enumerate() {
            let at = format!("status.conditions[{i}]");
            for k in ["type", "status", "reason", "lastTransitionTime"] {
                if c.get(k)
                    .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
                {
                    errs.push(FieldError::required(format!("{at}.{k}"), ""));
                }
            }
            if let Some(s) = c.get("status").and_then(Value::as_str) {
                if !s.is_empty() && !matches!(s, "True" | "False" | "Unknown") {
                    one_of(
                        errs,
                        format!("{at}.status"),
                        &json!(s),
                        &["False", "True", "Unknown"],
                    );
                }
            }
        }
    }
}

/// A CEL identifier that is not a reserved word (`isCELIdentifier`).
fn is_cel_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    first_ok
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !crate::schema::cel::reserved(name)
}
