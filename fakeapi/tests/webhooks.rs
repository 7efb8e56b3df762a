//! Admission webhooks over real sockets: a webhook server written for the
//! test (HTTPS with a certificate from its own CA, made by rcgen) and the
//! API calling it as kube-apiserver does. Mutation (and reinvocation),
//! denial, failure policies, timeouts on the wall clock and on simulated
//! time, rules, subresources, selectors, equivalent versions, match
//! conditions, warnings and audit annotations of the answers, and the
//! configurations' own validation.

mod common;
#[path = "common/webhook_server.rs"]
mod webhook_server;

use chrono::{DateTime, Utc};
use common::*;
use fakeapi::{SimTimers, StoreConfig, WatchTimers};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use webhook_server::{allow, deny, patch, serve, Reply, WebhookServer};

const MUTATING: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
const VALIDATING: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
const JSON: (&str, &str) = ("Content-Type", "application/json");

async fn post(addr: SocketAddr, path: &str, body: &Value) -> RawResponse {
    raw(
        addr,
        "POST",
        path,
        &[JSON],
        Some(body.to_string().as_bytes()),
    )
    .await
}

async fn created(addr: SocketAddr, path: &str, body: &Value) -> Value {
    let r = post(addr, path, body).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    r.json()
}

/// The webhook reachable as Service `ns/name` port 443 (named `https`):
/// the Service and an EndpointSlice pointing at `target`, as a cluster's
/// endpoint controller would write it.
async fn expose(addr: SocketAddr, ns: &str, name: &str, target: SocketAddr) {
    if ns != "default" {
        let _ = post(
            addr,
            "/api/v1/namespaces",
            &json!({"metadata": {"name": ns}}),
        )
        .await;
    }
    created(
        addr,
        &format!("/api/v1/namespaces/{ns}/services"),
        &json!({"metadata": {"name": name},
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": target.port()}]}}),
    )
    .await;
    created(
        addr,
        &format!("/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices"),
        &json!({"metadata": {"name": format!("{name}-1"), "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4",
            "ports": [{"name": "https", "port": target.port(), "protocol": "TCP"}],
            "endpoints": [{"addresses": [target.ip().to_string()], "conditions": {"ready": true}}]}),
    )
    .await;
}

/// A webhook of a configuration reached through Service `webhooks/hooks`.
fn via_service(name: &str, path: &str, ca: &str, rules: Value) -> Value {
    json!({"name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"namespace": "webhooks", "name": "hooks", "path": path}, "caBundle": ca},
        "rules": rules})
}

fn via_url(name: &str, url: &str, ca: &str, rules: Value) -> Value {
    json!({"name": name, "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "clientConfig": {"url": url, "caBundle": ca}, "rules": rules})
}

fn rule(ops: &[&str], group: &str, resources: &[&str]) -> Value {
    json!([{"operations": ops, "apiGroups": [group], "apiVersions": ["*"], "resources": resources}])
}

async fn register(addr: SocketAddr, path: &str, name: &str, hooks: Vec<Value>) {
    created(
        addr,
        path,
        &json!({"metadata": {"name": name}, "webhooks": hooks}),
    )
    .await;
}

fn pod_body(name: &str) -> Value {
    json!({"metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

async fn hooks_server(
    answer: impl Fn(&str, &Value) -> Reply + Send + Sync + 'static,
) -> WebhookServer {
    serve(&["hooks.webhooks.svc", "127.0.0.1"], answer).await
}

#[tokio::test]
async fn a_mutating_webhook_behind_a_service_patches_what_it_is_sent() {
    let (store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let hooks = hooks_server(|_, _| {
        patch(json!([
            {"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}},
            {"op": "add", "path": "/spec/nodeSelector", "value": {"zone": "a"}},
        ]))
    })
    .await;
    expose(addr, "webhooks", "hooks", hooks.addr).await;
    register(
        addr,
        MUTATING,
        "pods",
        vec![via_service(
            "pods.example.com",
            "/mutate",
            &hooks.ca_bundle(),
            rule(&["CREATE"], "", &["pods"]),
        )],
    )
    .await;

    let mut body = pod_body("");
    body["metadata"] = json!({"generateName": "job-"});
    let pod = created(addr, "/api/v1/namespaces/default/pods", &body).await;
    assert_eq!(pod["metadata"]["labels"]["mutated"], "yes");
    assert_eq!(pod["spec"]["nodeSelector"]["zone"], "a");
    let name = pod["metadata"]["name"].as_str().unwrap();
    let stored = store.get("pods", Some("default"), name).unwrap();
    assert_eq!(stored["metadata"]["labels"]["mutated"], "yes");

    // What kube-apiserver sends: the decoded, defaulted body, before its
    // name is generated, with the request's coordinates.
    let got = hooks.received.lock().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].query, "timeout=10s");
    let review = &got[0].review;
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(review["kind"], "AdmissionReview");
    let req = &review["request"];
    assert_eq!(req["operation"], "CREATE");
    assert_eq!(
        req["kind"],
        json!({"group": "", "version": "v1", "kind": "Pod"})
    );
    assert_eq!(
        req["resource"],
        json!({"group": "", "version": "v1", "resource": "pods"})
    );
    assert_eq!(req["requestKind"], req["kind"]);
    assert_eq!(req["namespace"], "default");
    assert_eq!(req["name"], "");
    assert_eq!(req["dryRun"], false);
    assert_eq!(req["options"]["kind"], "CreateOptions");
    assert!(req["oldObject"].is_null());
    assert_eq!(req["object"]["metadata"]["generateName"], "job-");
    assert_eq!(req["object"]["spec"]["schedulerName"], "default-scheduler");
    assert!(req["object"]["metadata"].get("uid").is_none());
    assert!(req["uid"].as_str().is_some_and(|u| u.len() == 36));
    assert_eq!(req["userInfo"]["username"], "system:admin");

    // Only CREATE: an update is not sent.
    let r = raw(
        addr,
        "PATCH",
        &format!("/api/v1/namespaces/default/pods/{name}"),
        &[("Content-Type", "application/merge-patch+json")],
        Some(br#"{"metadata":{"annotations":{"a":"b"}}}"#),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(hooks.received.lock().len(), 1);
    let calls = store.webhook_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!((calls[0].2.allowed, calls[0].2.patched), (1, 1));
}

#[tokio::test]
async fn a_webhook_that_asks_is_called_again_after_a_later_one_changed_the_object() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let hooks = hooks_server(|path, _req| match path {
        "/a" => {
            patch(json!([{"op": "add", "path": "/metadata/annotations", "value": {"a": "seen"}}]))
        }
        _ => patch(json!([{"op": "add", "path": "/metadata/labels", "value": {"b": "1"}}])),
    })
    .await;
    expose(addr, "webhooks", "hooks", hooks.addr).await;
    let mut a = via_service(
        "a.example.com",
        "/a",
        &hooks.ca_bundle(),
        rule(&["CREATE"], "", &["configmaps"]),
    );
    a["reinvocationPolicy"] = json!("IfNeeded");
    register(addr, MUTATING, "1-a", vec![a]).await;
    let b = via_service(
        "b.example.com",
        "/b",
        &hooks.ca_bundle(),
        rule(&["CREATE"], "", &["configmaps"]),
    );
    register(addr, MUTATING, "2-b", vec![b]).await;
    let cm = created(
        addr,
        "/api/v1/namespaces/default/configmaps",
        &json!({"metadata": {"name": "x"}}),
    )
    .await;
    assert_eq!(cm["metadata"]["labels"]["b"], "1");
    assert_eq!(cm["metadata"]["annotations"]["a"], "seen");
    let a_calls = hooks.on("/a");
    assert_eq!(a_calls.len(), 2, "called, then again after b's change");
    assert!(a_calls[0]["request"]["object"]["metadata"]
        .get("labels")
        .is_none());
    assert_eq!(
        a_calls[1]["request"]["object"]["metadata"]["labels"]["b"],
        "1"
    );
    assert_eq!(hooks.on("/b").len(), 1, "reinvocationPolicy: Never");
}

#[tokio::test]
async fn a_denial_reaches_the_client_with_the_webhooks_code_and_message() {
    let (store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let hooks = hooks_server(|_, _| deny(403, "guarded objects are read-only")).await;
    expose(addr, "webhooks", "hooks", hooks.addr).await;
    let mut guard = via_service(
        "guard.example.com",
        "/guard",
        &hooks.ca_bundle(),
        rule(&["CREATE", "UPDATE", "DELETE"], "", &["configmaps"]),
    );
    guard["objectSelector"] = json!({"matchLabels": {"guarded": "true"}});
    register(addr, VALIDATING, "guard", vec![guard]).await;
    let cms = "/api/v1/namespaces/default/configmaps";

    // Not selected: not sent.
    created(addr, cms, &json!({"metadata": {"name": "free"}})).await;
    assert!(hooks.received.lock().is_empty());

    let r = post(
        addr,
        cms,
        &json!({"metadata": {"name": "g", "labels": {"guarded": "true"}}}),
    )
    .await;
    assert_eq!(r.status, 403);
    let s = r.json();
    assert_eq!(
        s["message"],
        r#"admission webhook "guard.example.com" denied the request: guarded objects are read-only"#
    );
    assert_eq!(s["reason"], "Forbidden");
    assert_eq!(s["code"], 403);
    assert!(
        store.get("configmaps", Some("default"), "g").is_err(),
        "nothing written"
    );

    // An update that makes it selected is sent (the new object matches).
    let r = raw(
        addr,
        "PATCH",
        &format!("{cms}/free"),
        &[("Content-Type", "application/merge-patch+json")],
        Some(br#"{"metadata":{"labels":{"guarded":"true"}}}"#),
    )
    .await;
    assert_eq!(r.status, 403, "{}", String::from_utf8_lossy(&r.body));
    let last = hooks.received.lock().last().unwrap().review["request"].clone();
    assert_eq!(last["operation"], "UPDATE");
    assert_eq!(last["options"]["kind"], "PatchOptions");
    assert!(last["oldObject"]["metadata"].get("labels").is_none());

    // A delete: the stored object as oldObject, no object.
    store
        .create(
            "configmaps",
            Some("default"),
            json!({"metadata": {"name": "old", "labels": {"guarded": "true"}}}),
        )
        .unwrap();
    let r = raw(addr, "DELETE", &format!("{cms}/old"), &[], None).await;
    assert_eq!(r.status, 403);
    let last = hooks.received.lock().last().unwrap().review["request"].clone();
    assert_eq!(last["operation"], "DELETE");
    assert!(last["object"].is_null());
    assert_eq!(last["oldObject"]["metadata"]["name"], "old");
    assert_eq!(last["options"]["kind"], "DeleteOptions");
    assert!(store.get("configmaps", Some("default"), "old").is_ok());
    assert_eq!(store.webhook_calls()[0].2.denied, 3);
}

/// A port nothing listens on.
async fn closed_port() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test]
async fn failure_policies_decide_what_an_unreachable_webhook_does() {
    let (store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let port = closed_port().await;
    let url = format!("https://127.0.0.1:{port}/check");
    let cms = "/api/v1/namespaces/default/configmaps";
    let mut ignore = via_url(
        "lenient.example.com",
        &url,
        "",
        rule(&["CREATE"], "", &["configmaps"]),
    );
    ignore["failurePolicy"] = json!("Ignore");
    register(addr, VALIDATING, "lenient", vec![ignore]).await;
    created(addr, cms, &json!({"metadata": {"name": "a"}})).await;
    let calls = store.webhook_calls();
    assert_eq!(calls[0].2.failed_open, 1, "{calls:?}");

    register(
        addr,
        VALIDATING,
        "strict",
        vec![via_url(
            "strict.example.com",
            &url,
            "",
            rule(&["CREATE"], "", &["configmaps"]),
        )],
    )
    .await;
    let r = post(addr, cms, &json!({"metadata": {"name": "b"}})).await;
    assert_eq!(r.status, 500);
    let s = r.json();
    assert_eq!(s["reason"], "InternalError");
    assert_eq!(
        s["message"],
        format!(
            r#"Internal error occurred: failed calling webhook "strict.example.com": failed to call webhook: Post "https://127.0.0.1:{port}/check?timeout=10s": dial tcp 127.0.0.1:{port}: connect: connection refused"#
        )
    );
    assert!(store.get("configmaps", Some("default"), "b").is_err());
}

#[tokio::test]
async fn a_certificate_that_does_not_chain_to_the_ca_bundle_is_refused() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let hooks = hooks_server(|_, _| allow()).await;
    let (other_ca, _, _) = webhook_server::certificates(&["x"]);
    let other = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, other_ca);
    expose(addr, "webhooks", "hooks", hooks.addr).await;
    register(
        addr,
        VALIDATING,
        "wrong-ca",
        vec![via_service(
            "ca.example.com",
            "/",
            &other,
            rule(&["CREATE"], "", &["configmaps"]),
        )],
    )
    .await;
    let r = post(
        addr,
        "/api/v1/namespaces/default/configmaps",
        &json!({"metadata": {"name": "a"}}),
    )
    .await;
    assert_eq!(r.status, 500);
    let m = r.json()["message"].as_str().unwrap().to_string();
    assert!(
        m.contains(r#"Post "https://hooks.webhooks.svc:443/?timeout=10s": tls: failed to verify certificate: x509: certificate signed by unknown authority"#),
        "{m}"
    );
    // A service with no endpoints.
    created(
        addr,
        "/api/v1/namespaces/webhooks/services",
        &json!({"metadata": {"name": "empty"}, "spec": {"ports": [{"port": 443}]}}),
    )
    .await;
    let mut h = via_service(
        "empty.example.com",
        "/",
        &hooks.ca_bundle(),
        rule(&["CREATE"], "", &["secrets"]),
    );
    h["clientConfig"]["service"]["name"] = json!("empty");
    register(addr, VALIDATING, "empty", vec![h]).await;
    let r = post(
        addr,
        "/api/v1/namespaces/default/secrets",
        &json!({"metadata": {"name": "s"}}),
    )
    .await;
    assert_eq!(r.status, 500);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .ends_with(r#"Post "https://empty.webhooks.svc:443/?timeout=10s": no endpoints available for service "empty""#),
        "{}",
        r.json()
    );
}

#[tokio::test]
async fn a_webhook_that_does_not_answer_in_time_fails_on_the_wall_clock() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let hooks =
        hooks_server(|_, _| Reply::Late(Duration::from_secs(5), json!({"allowed": true}))).await;
    expose(addr, "webhooks", "hooks", hooks.addr).await;
    let mut slow = via_service(
        "slow.example.com",
        "/slow",
        &hooks.ca_bundle(),
        rule(&["CREATE"], "", &["configmaps"]),
    );
    slow["timeoutSeconds"] = json!(1);
    register(addr, MUTATING, "slow", vec![slow]).await;
    let r = post(
        addr,
        "/api/v1/namespaces/default/configmaps",
        &json!({"metadata": {"name": "a"}}),
    )
    .await;
    assert_eq!(r.status, 500);
    assert!(
        r.json()["message"].as_str().unwrap().ends_with(
            r#"Post "https://hooks.webhooks.svc:443/slow?timeout=1s": context deadline exceeded"#
        ),
        "{}",
        r.json()
    );
    assert_eq!(hooks.received.lock()[0].query, "timeout=1s");
}

/// 2026-01-01T00:00:00Z.
const T0_NS: i64 = 1_767_225_600_000_000_000;

#[tokio::test]
async fn on_simulated_time_a_silent_webhook_times_out_when_the_clock_passes_its_deadline() {
    let now = Arc::new(AtomicI64::new(T0_NS));
    let n = now.clone();
    let timers = SimTimers::default();
    let config = StoreConfig {
        clock: Arc::new(move || DateTime::<Utc>::from_timestamp_nanos(n.load(Ordering::SeqCst))),
        watch_timers: WatchTimers::Simulated(timers.clone()),
        ..Default::default()
    };
    let (store, server, _client) = start(config).await;
    let addr = server.addr();
    // Wall time never runs out here: only the simulated deadline can end it.
    let hooks =
        hooks_server(|_, _| Reply::Late(Duration::from_secs(3600), json!({"allowed": true}))).await;
    expose(addr, "webhooks", "hooks", hooks.addr).await;
    let mut silent = via_service(
        "silent.example.com",
        "/",
        &hooks.ca_bundle(),
        rule(&["CREATE"], "", &["configmaps"]),
    );
    silent["timeoutSeconds"] = json!(2);
    silent["failurePolicy"] = json!("Ignore");
    register(addr, VALIDATING, "silent", vec![silent]).await;
    let arrived = hooks.arrived.notified();
    let request = tokio::spawn(async move {
        let body = json!({"metadata": {"name": "a"}});
        post(addr, "/api/v1/namespaces/default/configmaps", &body).await
    });
    arrived.await;
    // The call is work in flight, and its deadline a timer of the clock's owner.
    let activity = store.activity();
    assert_eq!(activity.webhook_calls_waiting(), 1);
    assert!(activity.snapshot().requests_in_flight >= 1);
    let deadline = DateTime::<Utc>::from_timestamp_nanos(T0_NS + 2_000_000_000);
    assert_eq!(timers.earliest_deadline(), Some(deadline));
    // A second of simulated time: nothing due.
    now.store(T0_NS + 1_000_000_000, Ordering::SeqCst);
    assert_eq!(
        timers.fire_until(DateTime::from_timestamp_nanos(T0_NS + 1_000_000_000)),
        0
    );
    assert_eq!(activity.webhook_calls_waiting(), 1);
    // Past the deadline: the call fails open and the create goes through.
    now.store(T0_NS + 2_000_000_000, Ordering::SeqCst);
    assert_eq!(timers.fire_until(deadline), 1);
    let r = request.await.unwrap();
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(store.webhook_calls()[0].2.failed_open, 1);
    tokio::time::timeout(PATIENCE, activity.wait_idle())
        .await
        .unwrap();
    assert_eq!(activity.webhook_calls_waiting(), 0);
    assert!(activity.violation().is_none());
}

#[tokio::test]
async fn rules_select_subresources_scopes_and_namespaces() {
    let (store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let hooks = hooks_server(|_, _| allow()).await;
    expose(addr, "webhooks", "hooks", hooks.addr).await;
    let ca = hooks.ca_bundle();
    let mut team = via_service(
        "team.example.com",
        "/team",
        &ca,
        rule(&["CREATE"], "", &["configmaps"]),
    );
    team["namespaceSelector"] =
        json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]});
    let status = via_service(
        "status.example.com",
        "/status",
        &ca,
        rule(&["UPDATE"], "", &["pods/status"]),
    );
    let binding = via_service(
        "binding.example.com",
        "/binding",
        &ca,
        rule(&["CREATE"], "", &["pods/binding"]),
    );
    let mut cluster = via_service(
        "cluster.example.com",
        "/cluster",
        &ca,
        rule(&["CREATE"], "", &["*"]),
    );
    cluster["rules"][0]["scope"] = json!("Cluster");
    register(
        addr,
        VALIDATING,
        "rules",
        vec![team, status, binding, cluster],
    )
    .await;

    for (ns, labels) in [
        ("team-a", json!({"team": "a"})),
        ("team-b", json!({"team": "b"})),
    ] {
        created(
            addr,
            "/api/v1/namespaces",
            &json!({"metadata": {"name": ns, "labels": labels}}),
        )
        .await;
    }
    assert_eq!(
        hooks.on("/cluster").len(),
        2,
        "namespaces are cluster-scoped"
    );
    created(
        addr,
        "/api/v1/namespaces/team-b/configmaps",
        &json!({"metadata": {"name": "x"}}),
    )
    .await;
    assert!(hooks.on("/team").is_empty());
    created(
        addr,
        "/api/v1/namespaces/team-a/configmaps",
        &json!({"metadata": {"name": "x"}}),
    )
    .await;
    assert_eq!(hooks.on("/team").len(), 1);
    assert_eq!(hooks.on("/cluster").len(), 2, "a configmap is namespaced");

    let pod = created(addr, "/api/v1/namespaces/default/pods", &pod_body("p")).await;
    assert!(hooks.on("/status").is_empty() && hooks.on("/binding").is_empty());
    let mut with_status = pod.clone();
    with_status["status"]["phase"] = json!("Running");
    let r = raw(
        addr,
        "PUT",
        "/api/v1/namespaces/default/pods/p/status",
        &[JSON],
        Some(with_status.to_string().as_bytes()),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let s = hooks.on("/status");
    assert_eq!(s.len(), 1);
    assert_eq!(s[0]["request"]["subResource"], "status");
    assert_eq!(s[0]["request"]["kind"]["kind"], "Pod");
    assert_eq!(s[0]["request"]["oldObject"]["status"]["phase"], "Pending");
    store
        .create_node(serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap())
        .unwrap();
    let r = post(
        addr,
        "/api/v1/namespaces/default/pods/p/binding",
        &json!({"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}}),
    )
    .await;
    assert_eq!(r.status, 201);
    let b = hooks.on("/binding");
    assert_eq!(b.len(), 1);
    assert_eq!(
        b[0]["request"]["kind"],
        json!({"group": "", "version": "v1", "kind": "Binding"})
    );
    assert_eq!(b[0]["request"]["resource"]["resource"], "pods");
    assert_eq!(b[0]["request"]["subResource"], "binding");
    assert_eq!(b[0]["request"]["object"]["target"]["name"], "n1");
    assert_eq!(
        store.get("pods", Some("default"), "p").unwrap()["spec"]["nodeName"],
        "n1"
    );
}

#[tokio::test]
async fn an_equivalent_version_is_matched_and_sent_in_the_rules_version() {
    let (store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    created(
        addr,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &json!({"metadata": {"name": "widgets.example.com"}, "spec": {"group": "example.com",
            "scope": "Namespaced", "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": schema},
                         {"name": "v1beta1", "served": true, "storage": false, "schema": schema}]}}),
    )
    .await;
    let hooks =
        hooks_server(|_, _| patch(json!([{"op": "add", "path": "/spec", "value": {"size": 3}}])))
            .await;
    expose(addr, "webhooks", "hooks", hooks.addr).await;
    let ca = hooks.ca_bundle();
    let mut beta = rule(&["CREATE"], "example.com", &["widgets"]);
    beta[0]["apiVersions"] = json!(["v1beta1"]);
    let mut exact = via_service("exact.example.com", "/exact", &ca, beta.clone());
    exact["matchPolicy"] = json!("Exact");
    let equivalent = via_service("equivalent.example.com", "/equivalent", &ca, beta);
    register(addr, MUTATING, "widgets", vec![exact, equivalent]).await;
    let w = created(
        addr,
        "/apis/example.com/v1/namespaces/default/widgets",
        &json!({"metadata": {"name": "w"}}),
    )
    .await;
    assert_eq!(w["apiVersion"], "example.com/v1");
    assert_eq!(w["spec"]["size"], 3);
    assert!(hooks.on("/exact").is_empty());
    let e = hooks.on("/equivalent");
    assert_eq!(e.len(), 1);
    let req = &e[0]["request"];
    assert_eq!(
        req["resource"],
        json!({"group": "example.com", "version": "v1beta1", "resource": "widgets"})
    );
    assert_eq!(req["requestResource"]["version"], "v1");
    assert_eq!(req["kind"]["version"], "v1beta1");
    assert_eq!(req["requestKind"]["version"], "v1");
    assert_eq!(req["object"]["apiVersion"], "example.com/v1beta1");
    assert_eq!(
        store
            .get("widgets.example.com", Some("default"), "w")
            .unwrap()["spec"]["size"],
        3
    );
}

#[tokio::test]
async fn configurations_are_defaulted_and_bad_ones_refused_with_their_fields() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let c = created(
        addr,
        MUTATING,
        &json!({"metadata": {"name": "ok"}, "webhooks": [via_url("a.b.c", "https://127.0.0.1:1/", "", rule(&["CREATE"], "", &["pods"]))]}),
    )
    .await;
    let h = &c["webhooks"][0];
    assert_eq!(h["failurePolicy"], "Fail");
    assert_eq!(h["timeoutSeconds"], 10);
    assert_eq!(h["reinvocationPolicy"], "Never");
    assert_eq!(h["namespaceSelector"], json!({}));
    assert_eq!(c["metadata"]["generation"], 1);

    let mut bad = via_url(
        "nodots",
        "http://127.0.0.1/",
        "",
        rule(&["GET"], "", &["pods"]),
    );
    bad.as_object_mut().unwrap().remove("sideEffects");
    bad["matchConditions"] = json!([{"name": "x", "expression": "object.x"}]);
    let r = post(
        addr,
        VALIDATING,
        &json!({"metadata": {"name": "bad"}, "webhooks": [bad]}),
    )
    .await;
    assert_eq!(r.status, 422);
    let s = r.json();
    let fields: Vec<&str> = s["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    for f in [
        "webhooks[0].name",
        "webhooks[0].rules[0].operations[0]",
        "webhooks[0].sideEffects",
        "webhooks[0].matchConditions[0].expression",
        "webhooks[0].clientConfig.url",
    ] {
        assert!(fields.contains(&f), "{f} not in {fields:?}");
    }
    assert_eq!(s["details"]["kind"], "ValidatingWebhookConfiguration");
    // A configuration's own writes are never sent to webhooks (a webhook
    // that fails closed on everything cannot lock itself in).
    let port = closed_port().await;
    register(
        addr,
        VALIDATING,
        "everything",
        vec![via_url(
            "all.example.com",
            &format!("https://127.0.0.1:{port}/"),
            "",
            rule(&["*"], "*", &["*"]),
        )],
    )
    .await;
    let r = raw(
        addr,
        "DELETE",
        &format!("{VALIDATING}/everything"),
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
}

/// A server-side apply of ConfigMap `name` by manager `m` setting `data`;
/// `query` adds to the URL (`&dryRun=All`).
async fn apply_data(addr: SocketAddr, name: &str, data: Value, query: &str) -> RawResponse {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name}, "data": data});
    raw(
        addr,
        "PATCH",
        &format!("/api/v1/namespaces/default/configmaps/{name}?fieldManager=m&force=true{query}"),
        &[("Content-Type", "application/apply-patch+yaml")],
        Some(body.to_string().as_bytes()),
    )
    .await
}

/// What a manager owns through server-side apply changes only when its
/// apply is written: one that validation refuses, a webhook denies, or that
/// is a dry run leaves it as it was, so its next apply still removes what
/// it applied before and no longer applies. With and without webhooks
/// registered (the two ways a patch is written); a dry run answers what
/// the apply would write, removals included.
#[tokio::test]
async fn only_a_written_apply_changes_what_its_manager_owns() {
    let (store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let data = |name: &str| store.get("configmaps", Some("default"), name).unwrap()["data"].clone();
    let ok = |r: RawResponse| {
        assert!(
            [200, 201].contains(&r.status),
            "{}: {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        );
        r.json()
    };

    // No webhook. The apply that creates the object is the manager's too.
    ok(apply_data(addr, "plain", json!({"a": "1", "b": "2"}), "").await);
    let r = apply_data(addr, "plain", json!({"a": "1", "bad key!": "x"}), "").await;
    assert_eq!(r.status, 422, "{}", String::from_utf8_lossy(&r.body));
    let dry = ok(apply_data(addr, "plain", json!({"a": "1"}), "&dryRun=All").await);
    assert_eq!(dry["data"], json!({"a": "1"}), "what the apply would write");
    assert_eq!(
        data("plain"),
        json!({"a": "1", "b": "2"}),
        "nothing written"
    );
    let after = ok(apply_data(addr, "plain", json!({"a": "1", "c": "3"}), "").await);
    assert_eq!(
        after["data"],
        json!({"a": "1", "c": "3"}),
        "b was the manager's alone"
    );

    // A validating webhook that denies ConfigMaps carrying `denied`.
    let hooks = hooks_server(|_, req| {
        if req["object"]["data"].get("denied").is_some() {
            deny(403, "no denied keys")
        } else {
            allow()
        }
    })
    .await;
    expose(addr, "webhooks", "hooks", hooks.addr).await;
    register(
        addr,
        VALIDATING,
        "guard",
        vec![via_service(
            "guard.example.com",
            "/guard",
            &hooks.ca_bundle(),
            rule(&["CREATE", "UPDATE"], "", &["configmaps"]),
        )],
    )
    .await;
    ok(apply_data(addr, "guarded", json!({"a": "1", "b": "2"}), "").await);
    let r = apply_data(addr, "guarded", json!({"a": "1", "denied": "y"}), "").await;
    assert_eq!(r.status, 403, "{}", String::from_utf8_lossy(&r.body));
    let after = ok(apply_data(addr, "guarded", json!({"a": "1", "c": "3"}), "").await);
    assert_eq!(after["data"], json!({"a": "1", "c": "3"}), "after a denial");
    let dry = ok(apply_data(addr, "guarded", json!({"a": "1"}), "&dryRun=All").await);
    assert_eq!(dry["data"], json!({"a": "1"}), "what the apply would write");
    assert_eq!(
        data("guarded"),
        json!({"a": "1", "c": "3"}),
        "nothing written"
    );
    let after = ok(apply_data(addr, "guarded", json!({"a": "1", "d": "4"}), "").await);
    assert_eq!(
        after["data"],
        json!({"a": "1", "d": "4"}),
        "after a dry run"
    );
    // Every write above went through the webhook (the denial included).
    assert!(hooks.received.lock().len() >= 5);
}

/// Warning headers of a response, as sent.
fn warnings(r: &RawResponse) -> Vec<String> {
    r.headers
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("warning")
                .then(|| v.trim().to_string())
        })
        .collect()
}

#[tokio::test]
async fn match_conditions_decide_which_webhooks_are_called() {
    let (store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let hooks = hooks_server(|path, _| match path {
        "/label" => patch(json!([{"op": "add", "path": "/metadata/labels/changed", "value": "x"}])),
        _ => deny(403, "checked and refused"),
    })
    .await;
    expose(addr, "webhooks", "hooks", hooks.addr).await;
    let ca = hooks.ca_bundle();
    let cms = "/api/v1/namespaces/default/configmaps";

    // A validating webhook for labelled ConfigMaps only: every condition
    // must be true (the authorizer allows everything here).
    let mut check = via_service(
        "check.example.com",
        "/check",
        &ca,
        rule(&["CREATE", "UPDATE"], "", &["configmaps"]),
    );
    check["matchConditions"] = json!([
        {"name": "labelled", "expression": "has(object.metadata.labels) && 'check' in object.metadata.labels"},
        {"name": "not-system", "expression": "!request.namespace.startsWith('kube-')"},
        {"name": "allowed", "expression": "authorizer.group('').resource('configmaps').namespace(request.namespace).check('create').allowed()"},
    ]);
    // A mutating one for updates that change `data.x`, on `oldObject`.
    let mut label = via_service(
        "label.example.com",
        "/label",
        &ca,
        rule(&["CREATE", "UPDATE"], "", &["configmaps"]),
    );
    label["matchConditions"] = json!([
        {"name": "update", "expression": "request.operation == 'UPDATE'"},
        {"name": "x-changed", "expression": "oldObject.data.x != object.data.x"},
    ]);
    register(addr, VALIDATING, "check", vec![check]).await;
    register(addr, MUTATING, "label", vec![label]).await;

    let cm = created(
        addr,
        cms,
        &json!({"metadata": {"name": "plain", "labels": {"a": "b"}}, "data": {"x": "1"}}),
    )
    .await;
    assert!(cm["metadata"]["labels"].get("changed").is_none());
    assert!(hooks.received.lock().is_empty(), "no condition held");

    let r = post(
        addr,
        cms,
        &json!({"metadata": {"name": "checked", "labels": {"check": ""}}}),
    )
    .await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json()["message"],
        r#"admission webhook "check.example.com" denied the request: checked and refused"#
    );
    assert_eq!(hooks.on("/check").len(), 1);

    let merge = |name: &str, body: &'static str| {
        let path = format!("{cms}/{name}");
        async move {
            raw(
                addr,
                "PATCH",
                &path,
                &[("Content-Type", "application/merge-patch+json")],
                Some(body.as_bytes()),
            )
            .await
        }
    };
    // data.x unchanged: not called; changed: called, and its patch applied.
    let r = merge("plain", r#"{"data":{"y":"2"}}"#).await;
    assert_eq!(r.status, 200);
    assert!(hooks.on("/label").is_empty());
    let r = merge("plain", r#"{"data":{"x":"3"}}"#).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["metadata"]["labels"]["changed"], "x");
    let sent = hooks.on("/label");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["request"]["oldObject"]["data"]["x"], "1");
    assert_eq!(hooks.on("/check").len(), 1, "still unlabelled for check");
    let calls = store.webhook_calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
}

#[tokio::test]
async fn a_match_condition_that_errors_follows_the_failure_policy() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let hooks = hooks_server(|_, _| allow()).await;
    let url = format!("https://127.0.0.1:{}/check", hooks.addr.port());
    let ca = hooks.ca_bundle();
    let cms = "/api/v1/namespaces/default/configmaps";
    let errs = json!({"name": "errs", "expression": "object.data.missing == 'x'"});
    let falls = json!({"name": "false", "expression": "object.metadata.name == 'nobody'"});
    let mut fail = via_url(
        "fail.example.com",
        &url,
        &ca,
        rule(&["CREATE"], "", &["configmaps"]),
    );
    fail["matchConditions"] = json!([errs]);
    fail["objectSelector"] = json!({"matchLabels": {"policy": "fail"}});
    let mut ignore = fail.clone();
    ignore["name"] = json!("ignore.example.com");
    ignore["failurePolicy"] = json!("Ignore");
    ignore["objectSelector"] = json!({"matchLabels": {"policy": "ignore"}});
    // An error and a false: a false wins, whatever the failure policy.
    let mut mixed = fail.clone();
    mixed["name"] = json!("mixed.example.com");
    mixed["matchConditions"] = json!([errs, falls]);
    mixed["objectSelector"] = json!({"matchLabels": {"policy": "mixed"}});
    register(addr, VALIDATING, "conditions", vec![fail, ignore, mixed]).await;

    let cm = |name: &str, policy: &str| json!({"metadata": {"name": name, "labels": {"policy": policy}}, "data": {"a": "b"}});
    let r = post(addr, cms, &cm("f", "fail")).await;
    assert_eq!(r.status, 403, "{}", String::from_utf8_lossy(&r.body));
    let s = r.json();
    assert_eq!(s["reason"], "Forbidden");
    let message = s["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            r#"configmaps "f" is forbidden: expression 'object.data.missing == 'x'' resulted in error: "#
        ),
        "{message}"
    );
    assert_eq!(s["details"]["name"], "f");
    assert_eq!(s["details"]["kind"], "configmaps");
    assert!(hooks.received.lock().is_empty());

    created(addr, cms, &cm("i", "ignore")).await;
    created(addr, cms, &cm("m", "mixed")).await;
    assert!(hooks.received.lock().is_empty(), "no webhook was called");
}

#[tokio::test]
async fn warnings_of_the_answers_reach_the_client_and_audit_annotations_are_taken() {
    let (store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let hooks = hooks_server(|path, _| match path {
        "/mutate" => Reply::Response(
            json!({"allowed": true, "warnings": ["from the mutating one", "twice"],
            "auditAnnotations": {"mutated": "no"}}),
        ),
        "/validate" => Reply::Response(
            json!({"allowed": true, "warnings": ["twice", "with \"quotes\""],
            "auditAnnotations": {"checked": "yes"}}),
        ),
        "/deny" => Reply::Response(json!({"allowed": false, "warnings": ["denied, and warned"],
            "status": {"code": 403, "message": "no"}})),
        _ => Reply::Response(json!({"allowed": true, "warnings": "not a list"})),
    })
    .await;
    // Each webhook for the ConfigMaps labelled `to: LABEL`.
    let hook = |name: &str, path: &str, label: &str| {
        let url = format!("https://127.0.0.1:{}{path}", hooks.addr.port());
        let mut h = via_url(
            name,
            &url,
            &hooks.ca_bundle(),
            rule(&["CREATE"], "", &["configmaps"]),
        );
        h["objectSelector"] = json!({"matchLabels": {"to": label}});
        h
    };
    let m = hook("mutate.example.com", "/mutate", "all");
    let v = hook("validate.example.com", "/validate", "all");
    let d = hook("deny.example.com", "/deny", "deny");
    let b = hook("bad.example.com", "/bad", "bad");
    register(addr, MUTATING, "m", vec![m]).await;
    register(addr, VALIDATING, "v", vec![v, d, b]).await;
    let cms = "/api/v1/namespaces/default/configmaps";
    let cm = |name: &str, to: &str| json!({"metadata": {"name": name, "labels": {"to": to}}});

    let r = post(addr, cms, &cm("a", "all")).await;
    assert_eq!(r.status, 201);
    assert_eq!(
        warnings(&r),
        [
            r#"299 - "from the mutating one""#,
            r#"299 - "twice""#,
            r#"299 - "with \"quotes\"""#,
        ]
    );
    // A refusal carries its webhook's warnings too.
    let r = post(addr, cms, &cm("d", "deny")).await;
    assert_eq!(r.status, 403);
    assert_eq!(warnings(&r), [r#"299 - "denied, and warned""#]);
    // Warnings that are no list of strings: the call failed.
    let r = post(addr, cms, &cm("b", "bad")).await;
    assert_eq!(r.status, 500);
    assert_eq!(
        r.json()["message"],
        r#"Internal error occurred: failed calling webhook "bad.example.com": failed to call webhook: json: cannot unmarshal string into Go struct field AdmissionResponse.response.warnings of type []string"#
    );
    let calls = store.webhook_calls();
    let bad = calls.iter().find(|c| c.1 == "bad.example.com").unwrap();
    assert_eq!(bad.2.failed_closed, 1);
}
