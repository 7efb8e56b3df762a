//! ValidatingAdmissionPolicies over real HTTP: the API (discovery, the
//! status subresource, validation of bad policies and bindings), their
//! enforcement on writes (deny, warn, params, selectors, match conditions,
//! failure policies, deletes and subresources) and the type checker's
//! status, with kube-apiserver v1.35.8's answers (the same cases recorded
//! against it are in `tests/differential/cases/vap.yaml`).

mod common;

use common::*;
use fakeapi::StoreConfig;
use serde_json::{json, Value};
use std::net::SocketAddr;

const VAPS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
const BINDINGS: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";

async fn send(addr: SocketAddr, method: &str, path: &str, body: &Value) -> RawResponse {
    let bytes = serde_json::to_vec(body).unwrap();
    let ct = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    raw(addr, method, path, &[("Content-Type", ct)], Some(&bytes)).await
}

async fn get(addr: SocketAddr, path: &str) -> Value {
    let r = raw(addr, "GET", path, &[], None).await;
    assert_eq!(
        r.status,
        200,
        "GET {path}: {}",
        String::from_utf8_lossy(&r.body)
    );
    r.json()
}

async fn created(addr: SocketAddr, path: &str, body: Value) -> Value {
    let r = send(addr, "POST", path, &body).await;
    assert_eq!(
        r.status,
        201,
        "POST {path}: {}",
        String::from_utf8_lossy(&r.body)
    );
    r.json()
}

/// A namespace labelled `vap: "on"`, as the e2e suite labels its own.
async fn labelled_namespace(addr: SocketAddr, name: &str) {
    created(
        addr,
        "/api/v1/namespaces",
        json!({"metadata": {"name": name, "labels": {"vap": "on"}}}),
    )
    .await;
}

fn deployment(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": "nginx"}},
        "spec": {"replicas": replicas,
                 "selector": {"matchLabels": {"app": "nginx"}},
                 "template": {"metadata": {"labels": {"app": "nginx"}},
                              "spec": {"containers": [{"name": "nginx", "image": "nginx"}]}}}
    })
}

fn deployments(ns: &str) -> String {
    format!("/apis/apps/v1/namespaces/{ns}/deployments")
}

/// The e2e suite's policy: deployments (create and update) need more than
/// one replica, in the namespaces labelled `vap: "on"`.
fn replicas_policy(name: &str) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": {
                "namespaceSelector": {"matchLabels": {"vap": "on"}},
                "resourceRules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["apps"],
                                    "apiVersions": ["v1"], "resources": ["deployments"]}]
            },
            "validations": [
                {"expression": "object.spec.replicas > 1",
                 "messageExpression": "'wants replicas > 1, got ' + string(object.spec.replicas)"},
                {"expression": "namespaceObject.metadata.name.startsWith('vap-')",
                 "message": "other namespaces are not for this policy"}
            ]
        }
    })
}

fn binding(name: &str, policy: &str, actions: &[&str]) -> Value {
    json!({
        "metadata": {"name": name},
        "spec": {"policyName": policy, "validationActions": actions,
                 "matchResources": {"namespaceSelector": {"matchLabels": {"vap": "on"}}}}
    })
}

fn message(r: &RawResponse) -> String {
    r.json()["message"].as_str().unwrap_or("").to_string()
}

#[tokio::test]
async fn a_bound_policy_denies_as_kube_apiserver_does() {
    let (_store, server, _) = start(StoreConfig::default()).await;
    let addr = server.addr();
    labelled_namespace(addr, "vap-a").await;
    created(addr, VAPS, replicas_policy("replicas.example.com")).await;
    // A policy no binding names acts on nothing.
    created(addr, &deployments("vap-a"), deployment("lonely", 1)).await;
    created(
        addr,
        BINDINGS,
        binding(
            "replicas-binding.example.com",
            "replicas.example.com",
            &["Deny"],
        ),
    )
    .await;

    let r = send(addr, "POST", &deployments("vap-a"), &deployment("one", 1)).await;
    assert_eq!(r.status, 422, "{}", String::from_utf8_lossy(&r.body));
    let s = r.json();
    let inner = "ValidatingAdmissionPolicy 'replicas.example.com' with binding 'replicas-binding.example.com' denied request: wants replicas > 1, got 1";
    assert_eq!(s["reason"], "Invalid");
    assert_eq!(
        s["message"],
        format!("deployments.apps \"one\" is forbidden: {inner}")
    );
    assert_eq!(
        s["details"],
        json!({"name": "one", "group": "apps", "kind": "deployments", "causes": [{"message": inner}]})
    );

    // Allowed: two replicas; a ReplicaSet (not matched); another namespace.
    created(addr, &deployments("vap-a"), deployment("two", 2)).await;
    created(
        addr,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "plain"}}),
    )
    .await;
    created(addr, &deployments("plain"), deployment("one", 1)).await;
    let mut rs = deployment("rs", 1);
    rs["kind"] = json!("ReplicaSet");
    created(addr, "/apis/apps/v1/namespaces/vap-a/replicasets", rs).await;

    // Updates are checked too: a patch to one replica is refused, the
    // object left as it was.
    let r = send(
        addr,
        "PATCH",
        &format!("{}/two", deployments("vap-a")),
        &json!({"spec": {"replicas": 1}}),
    )
    .await;
    assert_eq!(r.status, 422);
    assert!(
        message(&r).ends_with("wants replicas > 1, got 1"),
        "{}",
        message(&r)
    );
    let two = get(addr, &format!("{}/two", deployments("vap-a"))).await;
    assert_eq!(two["spec"]["replicas"], 2);

    // The second validation: its message, in a namespace the policy's
    // selector takes that is not `vap-*`.
    labelled_namespace(addr, "other").await;
    let r = send(addr, "POST", &deployments("other"), &deployment("many", 3)).await;
    assert_eq!(r.status, 422);
    assert!(
        message(&r).ends_with("denied request: other namespaces are not for this policy"),
        "{}",
        message(&r)
    );

    // Deleting the binding lifts it.
    let r = raw(
        addr,
        "DELETE",
        &format!("{BINDINGS}/replicas-binding.example.com"),
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    created(addr, &deployments("vap-a"), deployment("one", 1)).await;
}

#[tokio::test]
async fn warn_and_audit_let_the_write_through() {
    let (_store, server, _) = start(StoreConfig::default()).await;
    let addr = server.addr();
    labelled_namespace(addr, "vap-w").await;
    created(addr, VAPS, replicas_policy("replicas.example.com")).await;
    created(
        addr,
        BINDINGS,
        binding(
            "warn.example.com",
            "replicas.example.com",
            &["Warn", "Audit"],
        ),
    )
    .await;
    let r = send(addr, "POST", &deployments("vap-w"), &deployment("one", 1)).await;
    assert_eq!(r.status, 201);
    let expected = "warning: 299 - \"Validation failed for ValidatingAdmissionPolicy 'replicas.example.com' with binding 'warn.example.com': wants replicas > 1, got 1\"";
    assert!(
        r.headers
            .to_ascii_lowercase()
            .contains(&expected.to_ascii_lowercase()),
        "{}",
        r.headers
    );
    // No warning when the validation passes.
    let r = send(addr, "POST", &deployments("vap-w"), &deployment("two", 2)).await;
    assert_eq!(r.status, 201);
    assert!(
        !r.headers.to_ascii_lowercase().contains("warning:"),
        "{}",
        r.headers
    );
}

#[tokio::test]
async fn variables_and_params_from_a_configmap() {
    let (_store, server, _) = start(StoreConfig::default()).await;
    let addr = server.addr();
    labelled_namespace(addr, "vap-p").await;
    created(
        addr,
        VAPS,
        json!({
            "metadata": {"name": "max-replicas.example.com"},
            "spec": {
                "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
                "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": ["apps"],
                    "apiVersions": ["v1"], "resources": ["deployments"]}]},
                "variables": [
                    {"name": "replicas", "expression": "object.spec.replicas"},
                    {"name": "limit", "expression": "int(params.data.maxReplicas)"}
                ],
                "validations": [{"expression": "variables.replicas <= variables.limit",
                                 "messageExpression": "'at most ' + params.data.maxReplicas + ' replicas'",
                                 "reason": "Forbidden"}]
            }
        }),
    )
    .await;
    created(
        addr,
        BINDINGS,
        json!({"metadata": {"name": "max-replicas-binding"},
               "spec": {"policyName": "max-replicas.example.com", "validationActions": ["Deny"],
                        "paramRef": {"name": "limits", "parameterNotFoundAction": "Deny"},
                        "matchResources": {"namespaceSelector": {"matchLabels": {"vap": "on"}}}}}),
    )
    .await;
    // The parameter is missing: denied by the binding's configuration.
    let r = send(addr, "POST", &deployments("vap-p"), &deployment("d", 2)).await;
    assert_eq!(r.status, 422);
    assert_eq!(
        message(&r),
        "deployments.apps \"d\" is forbidden: ValidatingAdmissionPolicy 'max-replicas.example.com' with binding 'max-replicas-binding' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
    );
    // The parameter, in the request's namespace.
    created(
        addr,
        "/api/v1/namespaces/vap-p/configmaps",
        json!({"metadata": {"name": "limits"}, "data": {"maxReplicas": "3"}}),
    )
    .await;
    created(addr, &deployments("vap-p"), deployment("three", 3)).await;
    let r = send(addr, "POST", &deployments("vap-p"), &deployment("four", 4)).await;
    assert_eq!(r.status, 403, "the reason's code");
    assert_eq!(r.json()["reason"], "Forbidden");
    assert!(
        message(&r).ends_with("denied request: at most 3 replicas"),
        "{}",
        message(&r)
    );
}

#[tokio::test]
async fn selectors_exclusions_names_and_match_conditions() {
    let (_store, server, _) = start(StoreConfig::default()).await;
    let addr = server.addr();
    created(
        addr,
        VAPS,
        json!({
            "metadata": {"name": "labelled-configmaps"},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "objectSelector": {"matchExpressions": [{"key": "checked", "operator": "Exists"}]},
                    "resourceRules": [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"],
                                       "resources": ["configmaps"]}],
                    "excludeResourceRules": [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"],
                                              "resources": ["configmaps"], "resourceNames": ["exempt"]}]
                },
                "matchConditions": [{"name": "not-dry", "expression": "!request.dryRun"}],
                "validations": [{"expression": "request.operation == 'DELETE' ? oldObject.data.keep != 'yes' : has(object.data) && 'owner' in object.data",
                                 "message": "needs an owner, and keeps what it must keep"}]
            }
        }),
    )
    .await;
    created(
        addr,
        BINDINGS,
        json!({"metadata": {"name": "labelled-configmaps"},
               "spec": {"policyName": "labelled-configmaps", "validationActions": ["Deny"]}}),
    )
    .await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let cm = |name: &str, labels: Value, data: Value| json!({"metadata": {"name": name, "labels": labels}, "data": data});
    // Not selected (no `checked` label), excluded by name, dry run.
    created(addr, cms, cm("free", json!({}), json!({}))).await;
    created(addr, cms, cm("exempt", json!({"checked": "1"}), json!({}))).await;
    let r = send(
        addr,
        "POST",
        &format!("{cms}?dryRun=All"),
        &cm("dry", json!({"checked": "1"}), json!({})),
    )
    .await;
    assert_eq!(r.status, 201);
    let r = send(
        addr,
        "POST",
        cms,
        &cm("bad", json!({"checked": "1"}), json!({})),
    )
    .await;
    assert_eq!(r.status, 422);
    assert!(message(&r).ends_with(
        "ValidatingAdmissionPolicy 'labelled-configmaps' with binding 'labelled-configmaps' denied request: needs an owner, and keeps what it must keep"
    ));
    created(
        addr,
        cms,
        cm(
            "kept",
            json!({"checked": "1"}),
            json!({"owner": "a", "keep": "yes"}),
        ),
    )
    .await;
    // A delete: the old object is what the policy sees.
    let r = raw(addr, "DELETE", &format!("{cms}/kept"), &[], None).await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["message"],
        "configmaps \"kept\" is forbidden: ValidatingAdmissionPolicy 'labelled-configmaps' with binding 'labelled-configmaps' denied request: needs an owner, and keeps what it must keep"
    );
}

#[tokio::test]
async fn failure_policies_decide_what_an_error_does() {
    let (_store, server, _) = start(StoreConfig::default()).await;
    let addr = server.addr();
    for (name, fp) in [("strict", "Fail"), ("lenient", "Ignore")] {
        created(
            addr,
            VAPS,
            json!({"metadata": {"name": name},
                   "spec": {"failurePolicy": fp,
                            "matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""],
                                "apiVersions": ["v1"], "resources": ["secrets"]}]},
                            "matchConditions": [{"name": "named", "expression": format!("object.metadata.name.startsWith('{name}')")}],
                            "validations": [{"expression": "object.data.missing == 'x'"}]}}),
        )
        .await;
        created(
            addr,
            BINDINGS,
            json!({"metadata": {"name": name},
                   "spec": {"policyName": name, "validationActions": ["Deny"]}}),
        )
        .await;
    }
    let secrets = "/api/v1/namespaces/default/secrets";
    created(
        addr,
        secrets,
        json!({"metadata": {"name": "lenient-1"}, "data": {}}),
    )
    .await;
    let r = send(
        addr,
        "POST",
        secrets,
        &json!({"metadata": {"name": "strict-1"}, "data": {}}),
    )
    .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        message(&r),
        "secrets \"strict-1\" is forbidden: ValidatingAdmissionPolicy 'strict' with binding 'strict' denied request: expression 'object.data.missing == 'x'' resulted in error: no such key: missing"
    );
}

#[tokio::test]
async fn a_policy_checks_pod_bindings() {
    let (store, server, _) = start(StoreConfig::default()).await;
    let addr = server.addr();
    store.add_pod(&pod("p")).unwrap();
    created(
        addr,
        VAPS,
        json!({"metadata": {"name": "no-bad-nodes"},
               "spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "apiGroups": [""],
                            "apiVersions": ["v1"], "resources": ["pods/binding"]}]},
                        "validations": [{"expression": "object.target.name != 'bad'", "message": "not on bad"}]}}),
    )
    .await;
    created(
        addr,
        BINDINGS,
        json!({"metadata": {"name": "no-bad-nodes"},
               "spec": {"policyName": "no-bad-nodes", "validationActions": ["Deny"]}}),
    )
    .await;
    let path = "/api/v1/namespaces/default/pods/p/binding";
    let b = |node: &str| {
        json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    };
    let r = send(addr, "POST", path, &b("bad")).await;
    assert_eq!(r.status, 422);
    assert_eq!(
        message(&r),
        "pods \"p\" is forbidden: ValidatingAdmissionPolicy 'no-bad-nodes' with binding 'no-bad-nodes' denied request: not on bad"
    );
    let r = send(addr, "POST", path, &b("good")).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
}

#[tokio::test]
async fn the_type_checker_writes_warnings_into_the_status() {
    let (_store, server, _) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let mut p = replicas_policy("confused.example.com");
    p["spec"]["validations"] = json!([{
        "expression": "object.spec.replicas > '1'",
        "messageExpression": "'wants replicas > 1, got ' + object.spec.replicas"
    }]);
    let c = created(addr, VAPS, p).await;
    // The create's answer has no type checking yet; it comes right after.
    assert_eq!(c["status"], json!({}));
    assert_eq!(c["metadata"]["generation"], 1);
    assert_eq!(c["spec"]["failurePolicy"], "Fail");
    assert_eq!(c["spec"]["matchConstraints"]["matchPolicy"], "Equivalent");
    let got = get(addr, &format!("{VAPS}/confused.example.com")).await;
    assert_eq!(got["status"]["observedGeneration"], 1);
    let w = &got["status"]["typeChecking"]["expressionWarnings"];
    assert_eq!(w[0]["fieldRef"], "spec.validations[0].expression");
    assert_eq!(
        w[0]["warning"],
        "apps/v1, Kind=Deployment: compilation failed: ERROR: <input>:1:22: found no matching overload for '_>_' applied to '(int, string)'\n | object.spec.replicas > '1'\n | .....................^\n"
    );
    assert_eq!(w[1]["fieldRef"], "spec.validations[0].messageExpression");
    assert!(
        w[1]["warning"]
            .as_str()
            .unwrap()
            .contains("found no matching overload for '_+_' applied to '(string, int)'"),
        "{w}"
    );
    // A correct one: no warnings.
    created(addr, VAPS, replicas_policy("correct.example.com")).await;
    let got = get(addr, &format!("{VAPS}/correct.example.com")).await;
    assert_eq!(got["status"]["typeChecking"], json!({}));

    // Against a CRD's schema: an undefined field.
    created(
        addr,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        json!({"metadata": {"name": "crontabs.stable.example.com"},
               "spec": {"group": "stable.example.com", "scope": "Namespaced",
                        "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
                        "versions": [{"name": "v1", "served": true, "storage": true,
                            "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
                                "type": "object", "properties": {"cronSpec": {"type": "string"},
                                "image": {"type": "string"}, "replicas": {"type": "integer"}}}}}}}]}}),
    )
    .await;
    created(
        addr,
        VAPS,
        json!({"metadata": {"name": "crd.example.com"},
               "spec": {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"],
                            "apiGroups": ["stable.example.com"], "apiVersions": ["v1"], "resources": ["crontabs"]}]},
                        "validations": [{"expression": "object.spec.replicas > 1"},
                                        {"expression": "object.spec.maxRetries < 10"}]}}),
    )
    .await;
    let got = get(addr, &format!("{VAPS}/crd.example.com")).await;
    let w = got["status"]["typeChecking"]["expressionWarnings"]
        .as_array()
        .unwrap();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0]["fieldRef"], "spec.validations[1].expression");
    assert!(
        w[0]["warning"]
            .as_str()
            .unwrap()
            .starts_with("stable.example.com/v1, Kind=CronTab: compilation failed: ERROR: <input>:1:12: undefined field 'maxRetries'"),
        "{w:?}"
    );

    // A change of the spec is checked again (its generation observed).
    let r = send(
        addr,
        "PATCH",
        &format!("{VAPS}/crd.example.com"),
        &json!({"spec": {"validations": [{"expression": "object.spec.replicas > 1"}]}}),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["metadata"]["generation"], 2);
    let got = get(addr, &format!("{VAPS}/crd.example.com")).await;
    assert_eq!(got["status"]["observedGeneration"], 2);
    assert_eq!(got["status"]["typeChecking"], json!({}));
}

#[tokio::test]
async fn the_api_serves_both_kinds_and_the_status_subresource() {
    let (_store, server, _) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let d = get(addr, "/apis/admissionregistration.k8s.io/v1").await;
    let names: Vec<&str> = d["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    for n in [
        "validatingadmissionpolicies",
        "validatingadmissionpolicies/status",
        "validatingadmissionpolicybindings",
    ] {
        assert!(names.contains(&n), "{names:?}");
    }
    created(addr, VAPS, replicas_policy("p.example.com")).await;
    // The status subresource writes the status only; the spec stays.
    let r = send(
        addr,
        "PATCH",
        &format!("{VAPS}/p.example.com/status"),
        &json!({"spec": {"failurePolicy": "Ignore"},
                "status": {"conditions": [{"type": "PatchStatusFailed", "status": "False", "reason": "e2e",
                           "message": "set", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let p = r.json();
    assert_eq!(p["spec"]["failurePolicy"], "Fail");
    assert_eq!(p["status"]["conditions"][0]["type"], "PatchStatusFailed");
    assert_eq!(p["status"]["observedGeneration"], 1);
    // The main resource keeps the status.
    let r = send(
        addr,
        "PATCH",
        &format!("{VAPS}/p.example.com"),
        &json!({"spec": {"failurePolicy": "Ignore"}, "status": null}),
    )
    .await;
    assert_eq!(r.status, 200);
    let p = r.json();
    assert_eq!(p["spec"]["failurePolicy"], "Ignore");
    assert_eq!(p["metadata"]["generation"], 2);
    assert_eq!(p["status"]["conditions"][0]["type"], "PatchStatusFailed");
}

#[tokio::test]
async fn bad_policies_and_bindings_are_refused_with_field_paths() {
    let (_store, server, _) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let causes = |r: &RawResponse| -> Vec<String> {
        r.json()["details"]["causes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                format!(
                    "{}: {}",
                    c["field"].as_str().unwrap_or(""),
                    c["message"].as_str().unwrap_or("")
                )
            })
            .collect()
    };
    let r = send(
        addr,
        "POST",
        VAPS,
        &json!({"metadata": {"name": "bad"}, "spec": {"validations": [
            {"expression": "params.x == 1"},
            {"expression": "object.spec.replicas"},
            {"expression": "object.x ==", "message": "  "}]}}),
    )
    .await;
    assert_eq!(r.status, 422);
    let c = causes(&r);
    assert!(
        c.contains(&"spec.matchConstraints: Required value".to_string()),
        "{c:?}"
    );
    assert!(
        c.iter().any(|m| m.starts_with("spec.validations[0].expression: Invalid value: \"params.x == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container '')")),
        "{c:?}"
    );
    assert!(
        c.contains(&"spec.validations[1].expression: Invalid value: \"object.spec.replicas\": must evaluate to bool but got dyn".to_string()),
        "{c:?}"
    );
    assert!(
        c.iter().any(|m| m.starts_with("spec.validations[2].expression: Invalid value: \"object.x ==\": compilation failed: ERROR: <input>:1:")),
        "{c:?}"
    );
    assert!(
        c.contains(
            &"spec.validations[2].message: Invalid value: \"  \": must be non-empty if specified"
                .to_string()
        ),
        "{c:?}"
    );

    let r = send(
        addr,
        "POST",
        BINDINGS,
        &json!({"metadata": {"name": "bad"}, "spec": {"validationActions": ["Deny", "Warn", "Deny", "Log"],
                "paramRef": {"name": "a", "selector": {}}}}),
    )
    .await;
    assert_eq!(r.status, 422);
    let c = causes(&r);
    for want in [
        "spec.policyName: Required value",
        "spec.paramRef.name: Forbidden: name and selector are mutually exclusive",
        "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive",
        "spec.paramRef.parameterNotFoundAction: Required value",
        "spec.validationActions[2]: Duplicate value: \"Deny\"",
        "spec.validationActions[3]: Unsupported value: \"Log\": supported values: \"Audit\", \"Deny\", \"Warn\"",
        "spec.validationActions: Invalid value: [\"Deny\",\"Warn\",\"Deny\",\"Log\"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
    ] {
        assert!(c.contains(&want.to_string()), "missing {want:?} in {c:?}");
    }
}
