//! ResourceQuota as kube-apiserver and kube-controller-manager keep it,
//! over real HTTP: `status.used` kept current by the store's quota
//! controller, and the `ResourceQuota` admission plugin's refusals with
//! kube-apiserver's messages (`fakeapi/src/store/quota.rs`).

mod common;

use common::*;
use fakeapi::StoreConfig;
use serde_json::{json, Value};
use std::net::SocketAddr;

async fn call(addr: SocketAddr, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let ct = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let bytes = body.map(|b| serde_json::to_vec(&b).unwrap());
    let r = raw(
        addr,
        method,
        path,
        &[("Content-Type", ct)],
        bytes.as_deref(),
    )
    .await;
    (r.status, r.json())
}

async fn create(addr: SocketAddr, resource: &str, body: Value) -> (u16, Value) {
    call(
        addr,
        "POST",
        &format!("/api/v1/namespaces/default/{resource}"),
        Some(body),
    )
    .await
}

async fn used(addr: SocketAddr, name: &str) -> Value {
    let (code, q) = call(
        addr,
        "GET",
        &format!("/api/v1/namespaces/default/resourcequotas/{name}"),
        None,
    )
    .await;
    assert_eq!(code, 200, "{q}");
    q["status"]["used"].clone()
}

fn quota(name: &str, hard: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": {"hard": hard}})
}

fn pod_with(name: &str, resources: Value) -> Value {
    json!({"metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": resources}]}})
}

/// A quota's status is its hard limits and what the namespace holds,
/// computed when it is created and moved by every create and delete.
#[tokio::test]
async fn status_used_follows_the_namespace() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let (code, _) = create(a, "configmaps", json!({"metadata": {"name": "before"}})).await;
    assert_eq!(code, 201);
    // The `kubernetes` Service of `default` counts too.
    let (code, q) = create(
        a,
        "resourcequotas",
        quota(
            "q",
            json!({"pods": "10", "configmaps": "5", "count/secrets": "4", "services": "3",
                "requests.cpu": "2", "requests.memory": "1Gi", "limits.cpu": "4",
                "resourcequotas": "1", "services.nodeports": "2"}),
        ),
    )
    .await;
    assert_eq!(code, 201, "{q}");
    assert_eq!(
        used(a, "q").await,
        json!({"pods": "0", "configmaps": "1", "count/secrets": "0", "services": "1",
            "requests.cpu": "0", "requests.memory": "0", "limits.cpu": "0",
            "resourcequotas": "1", "services.nodeports": "0"})
    );
    let (code, q) = call(
        a,
        "GET",
        "/api/v1/namespaces/default/resourcequotas/q",
        None,
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(q["status"]["hard"]["requests.memory"], "1Gi");

    for (name, cpu, mem) in [("a", "250m", "256Mi"), ("b", "0.5", "512Mi")] {
        let (code, p) = create(
            a,
            "pods",
            pod_with(
                name,
                json!({"requests": {"cpu": cpu, "memory": mem}, "limits": {"cpu": "1"}}),
            ),
        )
        .await;
        assert_eq!(code, 201, "{p}");
    }
    create(a, "secrets", json!({"metadata": {"name": "s"}})).await;
    create(
        a,
        "services",
        json!({"metadata": {"name": "np"}, "spec": {"type": "NodePort",
            "ports": [{"port": 80}, {"port": 81}]}}),
    )
    .await;
    let u = used(a, "q").await;
    assert_eq!(u["pods"], "2");
    assert_eq!(u["requests.cpu"], "750m");
    assert_eq!(u["requests.memory"], "768Mi");
    assert_eq!(u["limits.cpu"], "2");
    assert_eq!(u["count/secrets"], "1");
    assert_eq!(u["services"], "2");
    assert_eq!(u["services.nodeports"], "2");

    // A pod that ends stops counting its compute (it is still an object);
    // a deleted one stops counting at all.
    let (code, _) = call(
        a,
        "PATCH",
        "/api/v1/namespaces/default/pods/a/status",
        Some(json!({"status": {"phase": "Succeeded"}})),
    )
    .await;
    assert_eq!(code, 200);
    let u = used(a, "q").await;
    assert_eq!(u["pods"], "1");
    assert_eq!(u["requests.cpu"], "500m");
    let (code, _) = call(
        a,
        "DELETE",
        "/api/v1/namespaces/default/pods/b?gracePeriodSeconds=0",
        None,
    )
    .await;
    assert_eq!(code, 200);
    let u = used(a, "q").await;
    assert_eq!(u["pods"], "0");
    assert_eq!(u["requests.cpu"], "0");
    assert_eq!(u["requests.memory"], "0");
}

/// A create past a hard limit is refused 403 in kube-apiserver's words,
/// and so is a pod that does not request what a quota limits.
#[tokio::test]
async fn creates_past_a_limit_are_forbidden() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    create(
        a,
        "resourcequotas",
        quota(
            "q",
            json!({"pods": "1", "requests.cpu": "1", "configmaps": "1"}),
        ),
    )
    .await;
    let (code, p) = create(a, "pods", pod_with("nothing", json!({}))).await;
    assert_eq!(code, 403, "{p}");
    assert_eq!(p["reason"], "Forbidden");
    assert_eq!(
        p["message"],
        "pods \"nothing\" is forbidden: failed quota: q: must specify requests.cpu for: c"
    );
    let (code, p) = create(
        a,
        "pods",
        pod_with("big", json!({"requests": {"cpu": "2"}})),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        p["message"],
        "pods \"big\" is forbidden: exceeded quota: q, requested: requests.cpu=2, used: requests.cpu=0, limited: requests.cpu=1"
    );
    assert_eq!(p["details"]["name"], "big");
    assert_eq!(p["details"]["kind"], "pods");
    let (code, _) = create(
        a,
        "pods",
        pod_with("fits", json!({"requests": {"cpu": "600m"}})),
    )
    .await;
    assert_eq!(code, 201);
    let (code, p) = create(
        a,
        "pods",
        pod_with("more", json!({"requests": {"cpu": "100m"}})),
    )
    .await;
    assert_eq!(code, 403);
    assert_eq!(
        p["message"],
        "pods \"more\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1"
    );
    // A dry run is checked too, and counts nothing.
    let (code, _) = call(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps?dryRun=All",
        Some(json!({"metadata": {"name": "dry"}})),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(used(a, "q").await["configmaps"], "0");
    create(a, "configmaps", json!({"metadata": {"name": "one"}})).await;
    let (code, c) = create(a, "configmaps", json!({"metadata": {"name": "two"}})).await;
    assert_eq!(code, 403);
    assert_eq!(
        c["message"],
        "configmaps \"two\" is forbidden: exceeded quota: q, requested: configmaps=1, used: configmaps=1, limited: configmaps=1"
    );
    // Another namespace has no quota.
    let (code, _) = call(
        a,
        "POST",
        "/api/v1/namespaces",
        Some(json!({"metadata": {"name": "free"}})),
    )
    .await;
    assert_eq!(code, 201);
    for n in ["one", "two"] {
        let (code, _) = call(
            a,
            "POST",
            "/api/v1/namespaces/free/configmaps",
            Some(json!({"metadata": {"name": n}})),
        )
        .await;
        assert_eq!(code, 201);
    }
}

/// Scopes: a BestEffort quota counts only pods without requests; a
/// PriorityClass selector only the pods of the classes it names; a
/// Terminating one only pods with an active deadline.
#[tokio::test]
async fn scopes_choose_the_pods_a_quota_counts() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let (code, pc) = call(
        a,
        "POST",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        Some(json!({"metadata": {"name": "high"}, "value": 1000})),
    )
    .await;
    assert_eq!(code, 201, "{pc}");
    create(
        a,
        "resourcequotas",
        json!({"metadata": {"name": "be"}, "spec": {"hard": {"pods": "1"}, "scopes": ["BestEffort"]}}),
    )
    .await;
    create(
        a,
        "resourcequotas",
        json!({"metadata": {"name": "high"}, "spec": {"hard": {"pods": "5", "requests.cpu": "1"},
            "scopeSelector": {"matchExpressions": [
                {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}}),
    )
    .await;
    create(
        a,
        "resourcequotas",
        json!({"metadata": {"name": "term"}, "spec": {"hard": {"pods": "5"}, "scopes": ["Terminating"]}}),
    )
    .await;
    let (code, p) = create(a, "pods", pod_with("be1", json!({}))).await;
    assert_eq!(code, 201, "{p}");
    let (code, p) = create(a, "pods", pod_with("be2", json!({}))).await;
    assert_eq!(code, 403, "{p}");
    assert!(
        p["message"]
            .as_str()
            .unwrap()
            .contains("exceeded quota: be"),
        "{p}"
    );
    // Not best effort: the BestEffort quota does not see it.
    let (code, _) = create(
        a,
        "pods",
        pod_with("burst", json!({"requests": {"cpu": "1"}})),
    )
    .await;
    assert_eq!(code, 201);
    let mut high = pod_with("high", json!({"requests": {"cpu": "300m"}}));
    high["spec"]["priorityClassName"] = json!("high");
    high["spec"]["activeDeadlineSeconds"] = json!(60);
    let (code, p) = create(a, "pods", high).await;
    assert_eq!(code, 201, "{p}");
    assert_eq!(used(a, "be").await, json!({"pods": "1"}));
    assert_eq!(
        used(a, "high").await,
        json!({"pods": "1", "requests.cpu": "300m"})
    );
    assert_eq!(used(a, "term").await, json!({"pods": "1"}));
}

/// A status a client writes stands in its answer and its watch event, then
/// the controller puts the quota's own back (as kube-controller-manager's
/// resync does); a spec change is counted at once.
#[tokio::test]
async fn the_controller_puts_a_written_status_back() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    create(
        a,
        "resourcequotas",
        quota("q", json!({"cpu": "1", "memory": "1Gi"})),
    )
    .await;
    let path = "/api/v1/namespaces/default/resourcequotas/q";
    let (code, q) = call(
        a,
        "PATCH",
        &format!("{path}/status"),
        Some(json!({"status": {"hard": {"cpu": "2", "memory": "2Gi"}}})),
    )
    .await;
    assert_eq!(code, 200, "{q}");
    assert_eq!(q["status"]["hard"]["cpu"], "2");
    let (_, q) = call(a, "GET", path, None).await;
    assert_eq!(
        q["status"],
        json!({"hard": {"cpu": "1", "memory": "1Gi"}, "used": {"cpu": "0", "memory": "0"}})
    );
    let (code, q) = call(
        a,
        "PATCH",
        path,
        Some(json!({"spec": {"hard": {"cpu": "1500m", "pods": "3"}}})),
    )
    .await;
    assert_eq!(code, 200, "{q}");
    let (_, q) = call(a, "GET", path, None).await;
    assert_eq!(
        q["status"],
        json!({"hard": {"cpu": "1500m", "memory": "1Gi", "pods": "3"},
            "used": {"cpu": "0", "memory": "0", "pods": "0"}})
    );
}

/// A Service's change of type is an update the quota admits or refuses.
#[tokio::test]
async fn a_service_update_that_takes_a_node_port_past_the_quota_is_refused() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    create(
        a,
        "resourcequotas",
        quota(
            "q",
            json!({"services.nodeports": "1", "services.loadbalancers": "0"}),
        ),
    )
    .await;
    let (code, _) = create(
        a,
        "services",
        json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}, {"port": 81}]}}),
    )
    .await;
    assert_eq!(code, 201);
    let (code, s) = call(
        a,
        "PATCH",
        "/api/v1/namespaces/default/services/s",
        Some(json!({"spec": {"type": "NodePort"}})),
    )
    .await;
    assert_eq!(code, 403, "{s}");
    assert_eq!(
        s["message"],
        "services \"s\" is forbidden: exceeded quota: q, requested: services.nodeports=2, used: services.nodeports=0, limited: services.nodeports=1"
    );
}
