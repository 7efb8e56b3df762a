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

/// Pods that own each other in a circle, every reference blocking, all go
/// when one is deleted in the foreground (the suite's "Garbage collector
/// should not be blocked by dependency circle", over HTTP as it does it).
#[tokio::test]
async fn a_circle_of_owners_deleted_in_the_foreground_all_goes() {
    let (store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let mut uids = Vec::new();
    for n in ["pod1", "pod2", "pod3"] {
        let p = serde_json::to_vec(&pod(n)).unwrap();
        let r = raw(
            a,
            "POST",
            "/api/v1/namespaces/default/pods",
            &[("Content-Type", "application/json")],
            Some(&p),
        )
        .await;
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        uids.push(r.json()["metadata"]["uid"].as_str().unwrap().to_string());
    }
    for (i, owner) in [(0, 2), (1, 0), (2, 1)] {
        let patch = json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Pod",
            "name": format!("pod{}", owner + 1), "uid": uids[owner],
            "controller": true, "blockOwnerDeletion": true}]}});
        let r = raw(
            a,
            "PATCH",
            &format!("/api/v1/namespaces/default/pods/pod{}", i + 1),
            &[("Content-Type", "application/strategic-merge-patch+json")],
            Some(patch.to_string().as_bytes()),
        )
        .await;
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    let opts = json!({"propagationPolicy": "Foreground", "preconditions": {"uid": uids[0]}});
    let r = raw(
        a,
        "DELETE",
        "/api/v1/namespaces/default/pods/pod1",
        &[("Content-Type", "application/json")],
        Some(opts.to_string().as_bytes()),
    )
    .await;
    assert!(r.status == 200 || r.status == 202, "{}", r.status);
    let left: Vec<String> = store
        .list_pods(None)
        .unwrap()
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert!(left.is_empty(), "left: {left:?}");
}
