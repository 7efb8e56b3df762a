//! What Kubernetes' own e2e suite found fakeapi doing otherwise than
//! kube-apiserver (`fakeapi/conformance/`, whose results are in
//! `fakeapi/CONFORMANCE.md`), each fix held here without the suite: over
//! real HTTP, with the answers kube-apiserver v1.35.8 gave.

mod common;

use common::*;
use fakeapi::StoreConfig;
use serde_json::json;

/// The Service `default/kubernetes` exists from the start, as
/// kube-apiserver's bootstrap controller writes it (the suite reads the
/// cluster's IP family from it before any test).
#[tokio::test]
async fn the_kubernetes_service_is_there_from_the_start() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let r = raw(
        server.addr(),
        "GET",
        "/api/v1/namespaces/default/services/kubernetes",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let svc = r.json();
    assert_eq!(
        svc["metadata"]["labels"],
        json!({"component": "apiserver", "provider": "kubernetes"})
    );
    let spec = &svc["spec"];
    assert_eq!(spec["clusterIP"], "10.96.0.1");
    assert_eq!(spec["clusterIPs"], json!(["10.96.0.1"]));
    assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
    assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
    assert_eq!(spec["type"], "ClusterIP");
    assert_eq!(spec["ports"][0]["name"], "https");
    assert_eq!(spec["ports"][0]["port"], 443);
    assert_eq!(spec["ports"][0]["protocol"], "TCP");
    // Its address is not handed to the next Service.
    let r = raw(
        server.addr(),
        "POST",
        "/api/v1/namespaces/default/services",
        &[("Content-Type", "application/json")],
        Some(br#"{"metadata":{"name":"web"},"spec":{"ports":[{"port":80}]}}"#),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_ne!(r.json()["spec"]["clusterIP"], "10.96.0.1");
}

/// A store without a `default` namespace has no such Service (and starts).
#[tokio::test]
async fn no_default_namespace_no_kubernetes_service() {
    let store = fakeapi::Store::with_config(StoreConfig {
        namespaces: vec!["kube-system".into()],
        ..Default::default()
    });
    assert!(store
        .get("services", Some("default"), "kubernetes")
        .is_err());
}

/// `timeout` is read on every request, as kube-apiserver reads it: one that
/// is not a Go duration is a 400 with Go's reason; a valid one, however
/// long or zero, serves the request.
#[tokio::test]
async fn a_timeout_that_is_not_a_duration_is_a_400() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    for path in [
        "/version?timeout=invalid",
        "/api/v1/namespaces/default/configmaps?timeout=invalid",
    ] {
        let r = raw(server.addr(), "GET", path, &[], None).await;
        assert_eq!(r.status, 400, "{path}");
        let body = r.json();
        assert_eq!(body["kind"], "Status");
        assert_eq!(body["reason"], "BadRequest");
        assert_eq!(
            body["message"],
            "invalid timeout specified in the request URL - time: invalid duration \"invalid\""
        );
    }
    let r = raw(server.addr(), "GET", "/version?timeout=10", &[], None).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["message"],
        "invalid timeout specified in the request URL - time: missing unit in duration \"10\""
    );
    for t in ["3m", "0s", "-1s"] {
        let r = raw(
            server.addr(),
            "GET",
            &format!("/api/v1/namespaces/default/configmaps?timeout={t}"),
            &[],
            None,
        )
        .await;
        assert_eq!(r.status, 200, "timeout={t}");
    }
}

/// PodTemplates are served (the suite's chunking and table tests page
/// through 400 of them; a create that fails there kills the suite's
/// process): created with their template's pod defaults, listed in pages.
#[tokio::test]
async fn pod_templates_are_served_and_paged() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    for i in 0..3 {
        let body = format!(
            r#"{{"metadata":{{"name":"template-{i:04}"}},"template":{{"spec":{{"containers":[{{"name":"test","image":"test2"}}]}}}}}}"#
        );
        let r = raw(
            a,
            "POST",
            "/api/v1/namespaces/default/podtemplates",
            &[("Content-Type", "application/json")],
            Some(body.as_bytes()),
        )
        .await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        let t = r.json();
        assert_eq!(t["kind"], "PodTemplate");
        assert_eq!(t["template"]["spec"]["restartPolicy"], "Always");
        assert_eq!(t["template"]["spec"]["dnsPolicy"], "ClusterFirst");
    }
    let r = raw(
        a,
        "GET",
        "/api/v1/namespaces/default/podtemplates?limit=2",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    let page = r.json();
    assert_eq!(page["kind"], "PodTemplateList");
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    assert_eq!(page["metadata"]["remainingItemCount"], 1);
    let next = page["metadata"]["continue"].as_str().unwrap();
    let r = raw(
        a,
        "GET",
        &format!("/api/v1/namespaces/default/podtemplates?limit=2&continue={next}"),
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["items"][0]["metadata"]["name"], "template-0002");
    // Discovery lists them.
    let r = raw(a, "GET", "/api/v1", &[], None).await;
    assert!(r.json()["resources"]
        .as_array()
        .unwrap()
        .iter()
        .any(|x| x["name"] == "podtemplates" && x["kind"] == "PodTemplate"));
}
