//! Field managers over HTTP, as kube-apiserver keeps them: `managedFields`
//! per manager and operation, conflicts between appliers, `force`, updates
//! taking the fields they change, and a field a manager stops applying
//! removed only when nobody else owns it (`store/fields.rs`). The same
//! behaviours are held to a recorded kube-apiserver by the differential
//! harness (`tests/differential/cases/apply.yaml`, `custom.yaml`).

mod common;

use common::*;
use fakeapi::StoreConfig;
use serde_json::{json, Value};
use std::net::SocketAddr;

const CM: &str = "/api/v1/namespaces/default/configmaps";

async fn apply(addr: SocketAddr, path: &str, query: &str, body: &Value) -> RawResponse {
    raw(
        addr,
        "PATCH",
        &format!("{path}?{query}"),
        &[("Content-Type", "application/apply-patch+yaml")],
        Some(body.to_string().as_bytes()),
    )
    .await
}

fn ok(r: RawResponse) -> Value {
    assert!(
        [200, 201].contains(&r.status),
        "{}: {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    r.json()
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": data})
}

/// The entry of `manager` with `operation` in `obj`'s managedFields.
fn entry<'a>(obj: &'a Value, manager: &str, operation: &str) -> Option<&'a Value> {
    obj["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
}

/// An apply that conflicts is a 409 naming every field and its owner, and
/// writes nothing; an apply that changes nothing writes nothing either (the
/// resourceVersion stays). This is what the differential harness caught
/// when ownership was first recorded without conflicts: fakeapi wrote once
/// more than kube-apiserver.
#[tokio::test]
async fn a_conflicting_or_unchanged_apply_writes_nothing() {
    let (store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let path = format!("{CM}/cfg");
    let first = ok(apply(
        addr,
        &path,
        "fieldManager=alice",
        &cm(json!({"a": "1", "b": "2"})),
    )
    .await);
    let rv = first["metadata"]["resourceVersion"].clone();
    let store_rv = store.resource_version();

    let r = apply(
        addr,
        &path,
        "fieldManager=bob",
        &cm(json!({"a": "x", "b": "y"})),
    )
    .await;
    assert_eq!(r.status, 409, "{}", String::from_utf8_lossy(&r.body));
    let status = r.json();
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["message"],
        "Apply failed with 2 conflicts: conflicts with \"alice\":\n- .data.a\n- .data.b"
    );
    assert_eq!(
        status["details"]["causes"],
        json!([
            {"reason": "FieldManagerConflict", "message": "conflict with \"alice\"", "field": ".data.a"},
            {"reason": "FieldManagerConflict", "message": "conflict with \"alice\"", "field": ".data.b"}
        ])
    );
    // The same configuration again, and another manager applying the
    // value already there: nothing written.
    let again = ok(apply(
        addr,
        &path,
        "fieldManager=alice",
        &cm(json!({"a": "1", "b": "2"})),
    )
    .await);
    assert_eq!(again["metadata"]["resourceVersion"], rv);
    assert_eq!(store.resource_version(), store_rv, "no write");
    // Shared: bob now owns a with alice (managedFields change, so it is a
    // write, but no value does).
    let shared = ok(apply(addr, &path, "fieldManager=bob", &cm(json!({"a": "1"}))).await);
    assert_eq!(shared["data"], json!({"a": "1", "b": "2"}));
    assert_eq!(
        entry(&shared, "bob", "Apply").unwrap()["fieldsV1"],
        json!({"f:data": {"f:a": {}}})
    );
    let shared_rv = shared["metadata"]["resourceVersion"].clone();
    let same = ok(apply(addr, &path, "fieldManager=bob", &cm(json!({"a": "1"}))).await);
    assert_eq!(same["metadata"]["resourceVersion"], shared_rv);
}

/// managedFields as clients read them: an Update entry for a create and
/// for each update (by `fieldManager`, else the User-Agent's program), an
/// Apply entry per applier, the status subresource apart; an update takes
/// the fields it changes from their appliers, whose next apply then
/// conflicts with it (`using v1`); `force` takes them back.
#[tokio::test]
async fn managers_and_operations_are_recorded_as_kube_apiserver_records_them() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let path = format!("{CM}/cfg");
    let created = raw(
        addr,
        "POST",
        CM,
        &[
            ("Content-Type", "application/json"),
            ("User-Agent", "maker/v1.2.3 (linux/amd64) kubernetes/abc"),
        ],
        Some(cm(json!({"a": "1"})).to_string().as_bytes()),
    )
    .await;
    let created = ok(created);
    let e = entry(&created, "maker", "Update").expect("the creator's entry");
    assert_eq!(e["apiVersion"], "v1");
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert_eq!(e["fieldsV1"], json!({"f:data": {".": {}, "f:a": {}}}));
    assert!(e["time"].is_string());
    assert!(e.get("subresource").is_none());

    let applied = ok(apply(addr, &path, "fieldManager=alice", &cm(json!({"b": "2"}))).await);
    assert_eq!(
        entry(&applied, "alice", "Apply").unwrap()["fieldsV1"],
        json!({"f:data": {"f:b": {}}})
    );
    // An update (merge patch) by carol changes b: hers now.
    let patched = raw(
        addr,
        "PATCH",
        &format!("{path}?fieldManager=carol"),
        &[("Content-Type", "application/merge-patch+json")],
        Some(br#"{"data": {"b": "3"}}"#),
    )
    .await;
    let patched = ok(patched);
    assert!(
        entry(&patched, "alice", "Apply").is_none(),
        "alice owns nothing"
    );
    assert_eq!(
        entry(&patched, "carol", "Update").unwrap()["fieldsV1"],
        json!({"f:data": {"f:b": {}}})
    );
    let r = apply(addr, &path, "fieldManager=alice", &cm(json!({"b": "2"}))).await;
    assert_eq!(r.status, 409);
    assert_eq!(
        r.json()["message"],
        "Apply failed with 1 conflict: conflict with \"carol\" using v1: .data.b"
    );
    let forced = ok(apply(
        addr,
        &path,
        "fieldManager=alice&force=true",
        &cm(json!({"b": "2"})),
    )
    .await);
    assert_eq!(forced["data"], json!({"a": "1", "b": "2"}));
    assert!(entry(&forced, "carol", "Update").is_none(), "carol lost b");

    // A pod's status written through its subresource is an entry apart.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}});
    ok(raw(
        addr,
        "POST",
        "/api/v1/namespaces/default/pods?fieldManager=maker",
        &[("Content-Type", "application/json")],
        Some(pod.to_string().as_bytes()),
    )
    .await);
    let status = ok(raw(
        addr,
        "PATCH",
        "/api/v1/namespaces/default/pods/p/status?fieldManager=kubelet",
        &[("Content-Type", "application/strategic-merge-patch+json")],
        Some(br#"{"status": {"phase": "Running"}}"#),
    )
    .await);
    let e = entry(&status, "kubelet", "Update").expect("the status writer's entry");
    assert_eq!(e["subresource"], "status");
    assert_eq!(e["fieldsV1"]["f:status"]["f:phase"], json!({}));
}

/// A field a manager stops applying goes only when no other manager owns
/// it: items of keyed lists (a Deployment's containers by name) included.
#[tokio::test]
async fn a_field_its_applier_drops_goes_only_when_nobody_else_owns_it() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let path = "/apis/apps/v1/namespaces/default/deployments/web";
    let deploy = |containers: Value, replicas: Option<i64>| {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": containers}}}});
        if let Some(r) = replicas {
            d["spec"]["replicas"] = json!(r);
        }
        d
    };
    let names = |d: &Value| -> Vec<String> {
        d["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    };
    ok(apply(
        addr,
        path,
        "fieldManager=alice",
        &deploy(
            json!([{"name": "main", "image": "nginx"}, {"name": "side", "image": "busybox"}]),
            Some(2),
        ),
    )
    .await);
    // bob applies the same side container: shared.
    ok(apply(
        addr,
        path,
        "fieldManager=bob",
        &deploy(json!([{"name": "side", "image": "busybox"}]), None),
    )
    .await);
    // alice drops side and replicas: side stays (bob's too), replicas goes.
    let d = ok(apply(
        addr,
        path,
        "fieldManager=alice",
        &deploy(json!([{"name": "main", "image": "nginx"}]), None),
    )
    .await);
    assert_eq!(names(&d), ["main", "side"]);
    assert_eq!(
        d["spec"]["replicas"], 1,
        "replicas dropped, defaulted again"
    );
    // bob drops it too: gone.
    let d = ok(apply(
        addr,
        path,
        "fieldManager=bob",
        &deploy(json!([{"name": "main", "image": "nginx"}]), None),
    )
    .await);
    assert_eq!(names(&d), ["main"]);
}
