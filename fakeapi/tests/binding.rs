//! The binding subresource refuses what kube-apiserver 1.35 refuses, with
//! its status code, reason, message and details (each expected body below
//! is what a real kube-apiserver v1.35.8 answered to the same request), and
//! accepts a binding the way it does. Over real sockets.

mod common;

use common::*;
use fakeapi::StoreConfig;
use serde_json::{json, Value};
use std::net::SocketAddr;

async fn post(addr: SocketAddr, path: &str, body: Value) -> (u16, Value) {
    let body = serde_json::to_vec(&body).unwrap();
    let r = raw(
        addr,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        Some(&body),
    )
    .await;
    (r.status, r.json())
}

async fn get(addr: SocketAddr, path: &str) -> Value {
    let r = raw(addr, "GET", path, &[], None).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    r.json()
}

fn failure(code: u16, reason: Option<&str>, message: &str, details: Option<Value>) -> Value {
    let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "code": code});
    if let Some(r) = reason {
        s["reason"] = json!(r);
    }
    if let Some(d) = details {
        s["details"] = d;
    }
    s
}

fn binding(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
        "target": {"kind": "Node", "name": node}})
}

const PODS: &str = "/api/v1/namespaces/default/pods";

#[tokio::test]
async fn every_refusal_as_kube_apiserver_words_it() {
    let (store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    store.create_node(node("n1")).unwrap();
    let mut gated = pod("gated");
    gated.spec.as_mut().unwrap().scheduling_gates = Some(vec![serde_json::from_value(
        json!({"name": "kueue.x-k8s.io/admission"}),
    )
    .unwrap()]);
    let gated = store.create_pod(gated).unwrap();
    let uid = gated.metadata.uid.clone().unwrap();
    let rv = gated.metadata.resource_version.clone().unwrap();
    let conflict = |resource: &str, name: &str, message: String| {
        failure(
            409,
            Some("Conflict"),
            &message,
            Some(json!({"name": name, "kind": resource})),
        )
    };
    let cases: Vec<(String, Value, u16, Value)> = vec![
        (
            format!("{PODS}/gated/binding"),
            binding("gated", "n1"),
            409,
            conflict(
                "pods/binding",
                "gated",
                "Operation cannot be fulfilled on pods/binding \"gated\": pod gated has non-empty .spec.schedulingGates".into(),
            ),
        ),
        (
            // The older path: the pod is the Binding's name.
            "/api/v1/namespaces/default/bindings".into(),
            binding("gated", "n1"),
            409,
            conflict(
                "pods/binding",
                "gated",
                "Operation cannot be fulfilled on pods/binding \"gated\": pod gated has non-empty .spec.schedulingGates".into(),
            ),
        ),
        (
            format!("{PODS}/missing/binding"),
            binding("missing", "n1"),
            404,
            failure(
                404,
                Some("NotFound"),
                "pods \"missing\" not found",
                Some(json!({"name": "missing", "kind": "pods"})),
            ),
        ),
        (
            format!("{PODS}/gated/binding"),
            binding("other", "n1"),
            400,
            failure(
                400,
                Some("BadRequest"),
                "name in URL does not match name in Binding object",
                None,
            ),
        ),
        (
            format!("{PODS}/gated/binding"),
            json!({"target": {"kind": "Node", "name": "n1"}}),
            400,
            failure(
                400,
                Some("BadRequest"),
                "name in URL does not match name in Binding object",
                None,
            ),
        ),
        (
            format!("{PODS}/gated/binding"),
            json!({"metadata": {"name": "gated", "namespace": "elsewhere"},
                "target": {"kind": "Node", "name": "n1"}}),
            400,
            failure(
                400,
                Some("BadRequest"),
                "the namespace of the provided object does not match the namespace sent on the request",
                None,
            ),
        ),
        (
            // Validation errors are not a Status in kube-apiserver: a 500
            // without a reason.
            format!("{PODS}/gated/binding"),
            json!({"metadata": {"name": "gated"}, "target": {"kind": "Pod"}}),
            500,
            failure(
                500,
                None,
                "[target.kind: Unsupported value: \"Pod\": supported values: \"Node\", \"<empty>\", target.name: Required value]",
                None,
            ),
        ),
        (
            format!("{PODS}/gated/binding"),
            json!({"metadata": {"name": "gated"}, "target": {"kind": "Node"}}),
            500,
            failure(500, None, "target.name: Required value", None),
        ),
        (
            format!("{PODS}/gated/binding"),
            json!({"metadata": {"name": "gated", "uid": "nope"}, "target": {"kind": "Node", "name": "n1"}}),
            409,
            conflict(
                "pods",
                "gated",
                format!("Operation cannot be fulfilled on pods \"gated\": StorageError: invalid object, Code: 4, Key: /registry/pods/default/gated, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: nope, UID in object meta: {uid}"),
            ),
        ),
        (
            format!("{PODS}/gated/binding"),
            json!({"metadata": {"name": "gated", "resourceVersion": "1"}, "target": {"kind": "Node", "name": "n1"}}),
            409,
            conflict(
                "pods",
                "gated",
                format!("Operation cannot be fulfilled on pods \"gated\": StorageError: invalid object, Code: 4, Key: /registry/pods/default/gated, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: ResourceVersion in precondition: 1, ResourceVersion in object meta: {rv}"),
            ),
        ),
        (
            "/api/v1/namespaces/default/bindings".into(),
            json!({"target": {"kind": "Node", "name": "n1"}}),
            400,
            failure(400, Some("BadRequest"), "Name parameter required.", None),
        ),
        (
            "/api/v1/namespaces/default/bindings".into(),
            binding("a%b", "n1"),
            400,
            failure(
                400,
                Some("BadRequest"),
                "Name parameter invalid: \"a%b\": may not contain '%'",
                None,
            ),
        ),
        (
            format!("{PODS}/gated/binding?dryRun=Foo"),
            binding("gated", "n1"),
            422,
            failure(
                422,
                Some("Invalid"),
                "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Foo\"]: supported values: \"All\"",
                Some(json!({"group": "meta.k8s.io", "kind": "CreateOptions", "causes": [{
                    "reason": "FieldValueNotSupported",
                    "message": "Unsupported value: [\"Foo\"]: supported values: \"All\"",
                    "field": "dryRun"}]})),
            ),
        ),
    ];
    for (path, body, code, want) in cases {
        let (got_code, got) = post(a, &path, body.clone()).await;
        assert_eq!((got_code, &got), (code, &want), "POST {path} {body}");
    }
    // Nothing of that bound it.
    let p = get(a, &format!("{PODS}/gated")).await;
    assert_eq!(p["spec"].get("nodeName"), None);
    assert_eq!(p["metadata"]["resourceVersion"], json!(rv));

    // A pod being deleted (a finalizer keeps it), then one already bound.
    let mut dying = pod("dying");
    dying.metadata.finalizers = Some(vec!["example.com/keep".into()]);
    store.create_pod(dying).unwrap();
    let r = raw(a, "DELETE", &format!("{PODS}/dying"), &[], None).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        post(a, &format!("{PODS}/dying/binding"), binding("dying", "n1")).await,
        (
            409,
            conflict(
                "pods/binding",
                "dying",
                "Operation cannot be fulfilled on pods/binding \"dying\": pod dying is being deleted, cannot be assigned to a host".into()
            )
        )
    );
    store.create_pod(pod("bound")).unwrap();
    store.bind_pod("default", "bound", "n1").unwrap();
    assert_eq!(
        post(a, &format!("{PODS}/bound/binding"), binding("bound", "n2")).await,
        (
            409,
            conflict(
                "pods/binding",
                "bound",
                "Operation cannot be fulfilled on pods/binding \"bound\": pod bound is already assigned to node \"n1\"".into()
            )
        )
    );
}

#[tokio::test]
async fn a_gated_pod_binds_once_its_gates_are_gone() {
    let (store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    store.create_node(node("n1")).unwrap();
    let mut gated = pod("gated");
    gated.spec.as_mut().unwrap().scheduling_gates = Some(vec![serde_json::from_value(
        json!({"name": "kueue.x-k8s.io/admission"}),
    )
    .unwrap()]);
    store.create_pod(gated).unwrap();
    let (code, _) = post(a, &format!("{PODS}/gated/binding"), binding("gated", "n1")).await;
    assert_eq!(code, 409);
    // As Kueue admits a workload: the gate goes by a patch.
    let patch = serde_json::to_vec(&json!({"spec": {"schedulingGates": null}})).unwrap();
    let r = raw(
        a,
        "PATCH",
        &format!("{PODS}/gated"),
        &[("Content-Type", "application/merge-patch+json")],
        Some(&patch),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let (code, st) = post(a, &format!("{PODS}/gated/binding"), binding("gated", "n1")).await;
    assert_eq!((code, st["status"].as_str()), (201, Some("Success")));
    let p = get(a, &format!("{PODS}/gated")).await;
    assert_eq!(p["spec"]["nodeName"], "n1");
}

#[tokio::test]
async fn an_accepted_binding_changes_the_pod_as_kube_apiserver_does() {
    let (store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let mut n1 = node("n1");
    n1.metadata.labels = Some(
        [
            ("topology.kubernetes.io/zone", "z1"),
            ("topology.kubernetes.io/region", "r1"),
            ("kubernetes.io/hostname", "n1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    store.create_node(n1).unwrap();
    store.create_pod(pod("p")).unwrap();
    // A nomination from an earlier preemption, and a failed attempt.
    let status = serde_json::to_vec(&json!({"status": {"nominatedNodeName": "n1",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/1 nodes are available", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}}))
    .unwrap();
    let r = raw(
        a,
        "PATCH",
        &format!("{PODS}/p/status"),
        &[("Content-Type", "application/merge-patch+json")],
        Some(&status),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));

    // dryRun checks and changes nothing.
    let before = get(a, &format!("{PODS}/p")).await;
    let (code, st) = post(
        a,
        &format!("{PODS}/p/binding?dryRun=All"),
        binding("p", "n1"),
    )
    .await;
    assert_eq!((code, st["status"].as_str()), (201, Some("Success")));
    assert_eq!(get(a, &format!("{PODS}/p")).await, before);

    let mut b = binding("p", "n1");
    b["metadata"]["labels"] = json!({"app": "other", "extra": "1"});
    b["metadata"]["annotations"] = json!({"scheduler.example/decision": "n1"});
    let (code, st) = post(a, &format!("{PODS}/p/binding"), b).await;
    assert_eq!(
        (code, st),
        (
            201,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
        )
    );
    let p = get(a, &format!("{PODS}/p")).await;
    assert_eq!(p["spec"]["nodeName"], "n1");
    // The Binding's labels over the pod's, the node's topology labels over both.
    assert_eq!(
        p["metadata"]["labels"],
        json!({"app": "other", "extra": "1", "topology.kubernetes.io/zone": "z1",
            "topology.kubernetes.io/region": "r1"})
    );
    assert_eq!(
        p["metadata"]["annotations"],
        json!({"scheduler.example/decision": "n1"})
    );
    assert_eq!(p["status"].get("nominatedNodeName"), None);
    let conds = p["status"]["conditions"].as_array().unwrap();
    assert_eq!(conds.len(), 1);
    assert_eq!(conds[0]["type"], "PodScheduled");
    assert_eq!(conds[0]["status"], "True");
    assert_eq!(conds[0].get("reason"), None);
    assert_eq!(conds[0]["lastProbeTime"], Value::Null);
    assert_ne!(conds[0]["lastTransitionTime"], "2020-01-01T00:00:00Z");

    // A target without a kind: no topology labels (the admission plugin
    // looks at Node targets only).
    store.create_pod(pod("q")).unwrap();
    let (code, _) = post(
        a,
        &format!("{PODS}/q/binding"),
        json!({"metadata": {"name": "q"}, "target": {"name": "n1"}}),
    )
    .await;
    assert_eq!(code, 201);
    let q = get(a, &format!("{PODS}/q")).await;
    assert_eq!(q["metadata"]["labels"], json!({"app": "batch"}));
}
