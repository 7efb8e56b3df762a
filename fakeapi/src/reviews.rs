//! The answers of the create-only review kinds (rows with `stored: false`
//! but Binding): authentication.k8s.io's TokenReview and SelfSubjectReview,
//! authorization.k8s.io's SubjectAccessReview, LocalSubjectAccessReview,
//! SelfSubjectAccessReview and SelfSubjectRulesReview. As kube-apiserver's
//! REST storage of them (`pkg/registry/authentication`,
//! `pkg/registry/authorization`): the request is validated, answered with
//! its status filled in, and kept nowhere.
//!
//! fakeapi authenticates nobody and authorizes everything: every request,
//! with or without a token, is served as the user kube-apiserver's
//! `system:masters` clients are ([`USER`], the user admission webhooks and
//! policies are told of), and every request is allowed, as kube-apiserver
//! with `--authorization-mode=AlwaysAllow`. So a TokenReview of any token
//! authenticates (as that user: the token is accepted by fakeapi as any
//! other), every access review allows (with no reason, as AlwaysAllow
//! gives none), and a rules review lists AlwaysAllow's rules (everything).

use crate::error::{ApiError, FieldError, Result};
use crate::resources::ResourceInfo;
use serde_json::{json, Value};

/// The user every request is served as.
pub(crate) const USER: &str = "system:admin";
/// Its groups.
pub(crate) const GROUPS: &[&str] = &["system:masters", "system:authenticated"];

fn user_info() -> Value {
    json!({"username": USER, "groups": GROUPS})
}

/// The answer to a create of review kind `info` in `namespace` (the
/// request's, `None` outside one), from its `body`; `now` is the store's
/// clock, in RFC 3339.
pub(crate) fn answer(
    info: &ResourceInfo,
    namespace: Option<&str>,
    mut body: Value,
    now: &str,
) -> Result<Value> {
    if !body.is_object() {
        return Err(ApiError::BadRequest(format!(
            "not a {}: the body is not an object",
            info.kind
        )));
    }
    // As kube-apiserver's create handler, before the storage sees it: the
    // request's namespace is the object's.
    if let (true, Some(ns)) = (info.namespaced, namespace) {
        match body.pointer("/metadata/namespace").and_then(Value::as_str) {
            None | Some("") => {
                if !body.get("metadata").is_some_and(Value::is_object) {
                    body["metadata"] = json!({});
                }
                body["metadata"]["namespace"] = json!(ns);
            }
            Some(o) if o != ns => {
                return Err(ApiError::BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request".into(),
                ))
            }
            Some(_) => {}
        }
    }
    let group = info.group;
    match (group, info.kind) {
        ("authentication.k8s.io", "TokenReview") => {
            let token = body
                .pointer("/spec/token")
                .and_then(Value::as_str)
                .unwrap_or("");
            if token.is_empty() {
                return Err(ApiError::BadRequest(
                    "token is required for TokenReview in authentication".into(),
                ));
            }
            // kube-apiserver answers with the audiences the authenticator
            // gave, which are those asked for (it refuses a token for none
            // of them); fakeapi has no `--api-audiences` of its own.
            let mut status = json!({"authenticated": true, "user": user_info()});
            if let Some(a) = body
                .pointer("/spec/audiences")
                .filter(|a| a.as_array().is_some_and(|a| !a.is_empty()))
            {
                status["audiences"] = a.clone();
            }
            body["status"] = status;
        }
        ("authentication.k8s.io", "SelfSubjectReview") => {
            // A new object, as kube-apiserver's: its metadata but the
            // creation time, and any status sent, are dropped.
            body = json!({
                "metadata": {"creationTimestamp": now},
                "status": {"userInfo": user_info()},
            });
        }
        ("authorization.k8s.io", "SelfSubjectRulesReview") => {
            if body
                .pointer("/spec/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .is_empty()
            {
                return Err(ApiError::BadRequest("no namespace on request".into()));
            }
            // What AlwaysAllow's rule resolver answers for any user.
            body = json!({
                "metadata": {},
                "spec": {},
                "status": {
                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                    "incomplete": false,
                },
            });
        }
        ("authorization.k8s.io", kind) => {
            let errs = access_review_errors(kind, &body);
            if !errs.is_empty() {
                return Err(ApiError::invalid(group, kind, "", errs));
            }
            if kind == "LocalSubjectAccessReview" {
                let ns = namespace.unwrap_or("");
                if ns.is_empty() {
                    return Err(ApiError::BadRequest(
                        "namespace is required on this type: ".into(),
                    ));
                }
                if body.pointer("/metadata/namespace").and_then(Value::as_str) != Some(ns) {
                    return Err(ApiError::BadRequest(format!(
                        "spec.resourceAttributes.namespace must match namespace: {ns}"
                    )));
                }
            }
            body["status"] = json!({"allowed": true});
        }
        _ => {
            return Err(ApiError::MethodNotAllowed(format!(
                "the server does not allow this method on the requested resource ({})",
                info.qualified_name()
            )))
        }
    }
    body["apiVersion"] = json!(info.api_version());
    body["kind"] = json!(info.kind);
    Ok(body)
}

/// kube-apiserver's validation of a (self, local) subject access review
/// (`pkg/apis/authorization/validation`): exactly one of the attributes,
/// a subject for the reviews that name one, metadata left empty.
fn access_review_errors(kind: &str, body: &Value) -> Vec<FieldError> {
    let spec = &body["spec"];
    let present = |k: &str| spec.get(k).is_some_and(|v| !v.is_null());
    let (res, non_res) = (
        present("resourceAttributes"),
        present("nonResourceAttributes"),
    );
    let mut errs = Vec::new();
    if res && non_res {
        errs.push(FieldError::invalid(
            "spec.nonResourceAttributes",
            &spec["nonResourceAttributes"],
            "cannot be specified in combination with resourceAttributes",
        ));
    }
    if !res && !non_res {
        errs.push(FieldError::invalid(
            "spec.resourceAttributes",
            &Value::Null,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        ));
    }
    let nonempty = |k: &str| match spec.get(k) {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        _ => false,
    };
    if kind != "SelfSubjectAccessReview" && !nonempty("user") && !nonempty("groups") {
        errs.push(FieldError::invalid(
            "spec.user",
            spec.get("user").unwrap_or(&json!("")),
            "at least one of user or group must be specified",
        ));
    }
    let mut meta = body
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    meta.remove("managedFields");
    // An unset creation time is how Go writes an empty ObjectMeta.
    if meta.get("creationTimestamp").is_some_and(Value::is_null) {
        meta.remove("creationTimestamp");
    }
    if kind == "LocalSubjectAccessReview" {
        meta.remove("namespace");
        let ns = body
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        if res {
            let attr_ns = spec
                .pointer("/resourceAttributes/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            if attr_ns != ns {
                errs.push(FieldError::invalid(
                    "spec.resourceAttributes.namespace",
                    &json!(attr_ns),
                    "must match metadata.namespace",
                ));
            }
        }
        if non_res {
            errs.push(FieldError::invalid(
                "spec.nonResourceAttributes",
                &spec["nonResourceAttributes"],
                "disallowed on this kind of request",
            ));
        }
    }
    if !meta.is_empty() {
        errs.push(FieldError::invalid(
            "metadata",
            &Value::Object(meta),
            if kind == "LocalSubjectAccessReview" {
                "must be empty except for namespace"
            } else {
                "must be empty"
            },
        ));
    }
    errs
}
