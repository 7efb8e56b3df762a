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
        let t = create_template(a, &format!("template-{i:04}")).await.json();
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

/// A namespace's `finalize` subresource changes its finalizers (and not
/// its status); an update of the namespace itself keeps them, as
/// kube-apiserver's namespace strategies do ("Namespaces should apply a
/// finalizer to a Namespace").
#[tokio::test]
async fn a_namespaces_finalizers_change_through_finalize() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let put = |path: &'static str, body: serde_json::Value| async move {
        let b = serde_json::to_vec(&body).unwrap();
        raw(
            a,
            "PUT",
            path,
            &[("Content-Type", "application/json")],
            Some(&b),
        )
        .await
    };
    let r = raw(
        a,
        "POST",
        "/api/v1/namespaces",
        &[("Content-Type", "application/json")],
        Some(br#"{"metadata":{"name":"e2e-ns"}}"#),
    )
    .await;
    assert_eq!(r.status, 201);
    let mut ns = r.json();
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));

    // An update of the namespace itself cannot change them.
    ns["spec"]["finalizers"] = json!(["kubernetes", "e2e.example.com/fakeFinalizer"]);
    let r = put("/api/v1/namespaces/e2e-ns", ns.clone()).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["spec"]["finalizers"], json!(["kubernetes"]));

    ns["status"]["phase"] = json!("Terminating");
    let r = put("/api/v1/namespaces/e2e-ns/finalize", ns.clone()).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let got = r.json();
    assert_eq!(
        got["spec"]["finalizers"],
        json!(["kubernetes", "e2e.example.com/fakeFinalizer"])
    );
    assert_eq!(
        got["status"]["phase"], "Active",
        "finalize keeps the status"
    );

    let mut ns = got;
    ns["spec"]["finalizers"] = json!(["kubernetes"]);
    let r = put("/api/v1/namespaces/e2e-ns/finalize", ns).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["spec"]["finalizers"], json!(["kubernetes"]));

    // Discovery names the subresource, with kube-apiserver's one verb.
    let list = raw(a, "GET", "/api/v1", &[], None).await.json();
    let fin = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "namespaces/finalize")
        .cloned()
        .expect("namespaces/finalize in discovery");
    assert_eq!(fin["verbs"], json!(["update"]));
}

/// A namespace's status subresource keeps the stored spec and takes the
/// rest, metadata included ("Namespaces should apply changes to a
/// namespace status": a merge patch of an annotation and a condition).
#[tokio::test]
async fn a_namespace_status_patch_keeps_its_metadata() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let r = raw(
        a,
        "POST",
        "/api/v1/namespaces",
        &[("Content-Type", "application/json")],
        Some(br#"{"metadata":{"name":"e2e-status"}}"#),
    )
    .await;
    assert_eq!(r.status, 201);
    let r = raw(
        a,
        "PATCH",
        "/api/v1/namespaces/e2e-status/status",
        &[("Content-Type", "application/merge-patch+json")],
        Some(
            br#"{"metadata":{"annotations":{"e2e-patched-ns-status":"e2e-status"}},
                 "spec":{"finalizers":[]},
                 "status":{"conditions":[{"type":"StatusPatch","status":"True","reason":"E2E","message":"Patched by an e2e test"}]}}"#,
        ),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let ns = r.json();
    assert_eq!(
        ns["metadata"]["annotations"]["e2e-patched-ns-status"],
        "e2e-status"
    );
    assert_eq!(ns["status"]["conditions"][0]["reason"], "E2E");
    assert_eq!(ns["status"]["phase"], "Active");
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]), "spec kept");
}

/// `fieldValidation=Strict` refuses unknown and duplicated fields of a
/// built-in kind, as Go's strict decoding of its type does ("FieldValidation
/// should detect unknown and duplicate fields of a typed object", "... unknown
/// metadata fields of a typed object"); without it they are dropped or the
/// last kept, and a known object passes.
#[tokio::test]
async fn strict_field_validation_of_built_in_kinds() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let post = |query: &'static str, body: &'static str| async move {
        raw(
            a,
            "POST",
            &format!("/apis/apps/v1/namespaces/default/deployments?fieldManager=m{query}"),
            &[("Content-Type", "application/json")],
            Some(body.as_bytes()),
        )
        .await
    };
    const DUPLICATE: &str = r#"{"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "my-dep", "labels": {"app": "nginx"}},
        "spec": {"unknownField": "foo", "replicas": 2, "replicas": 3,
            "selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:latest"}]}}}}"#;
    let r = post("&fieldValidation=Strict", DUPLICATE).await;
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    let msg = r.json()["message"].as_str().unwrap().to_string();
    assert!(
        msg.contains(r#"strict decoding error: unknown field "spec.unknownField", duplicate field "spec.replicas""#),
        "{msg}"
    );
    const META: &str = r#"{"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "my-dep", "unknownMeta": "foo", "labels": {"app": "nginx"}},
        "spec": {"selector": {"matchLabels": {"app": "nginx"}},
            "template": {"metadata": {"labels": {"app": "nginx"}, "unknownToo": 1},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:latest", "bogus": true}]}}}}"#;
    let r = post("&fieldValidation=Strict", META).await;
    assert_eq!(r.status, 400);
    let msg = r.json()["message"].as_str().unwrap().to_string();
    assert!(
        msg.contains(r#"unknown field "metadata.unknownMeta""#)
            && msg.contains(r#"unknown field "spec.template.metadata.unknownToo""#)
            && msg.contains(r#"unknown field "spec.template.spec.containers[0].bogus""#),
        "{msg}"
    );
    // Without Strict, the object is written.
    let r = post("", DUPLICATE).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["spec"]["replicas"], 3);
    // A known object passes Strict, opaque fields (managedFields' fieldsV1) included.
    let r = post(
        "&fieldValidation=Strict",
        r#"{"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "ok-dep", "annotations": {"a": "b"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "x"}},
            "template": {"metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "i",
                    "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 80}]}]}}}}"#,
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
}

/// The kinds the suite's discovery tests look for in every group (Discovery
/// "should locate the groupVersion and a resource within each APIGroup",
/// AggregatedDiscovery's two): each group version's resource list names
/// them, with kube-apiserver 1.35's short names, categories, verbs and
/// subresources, and aggregated discovery lists both autoscaling versions,
/// v2 preferred.
#[tokio::test]
async fn discovery_lists_the_kinds_every_cluster_serves() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let list = |gv: &'static str| {
        let addr = server.addr();
        async move {
            let r = raw(addr, "GET", &format!("/apis/{gv}"), &[], None).await;
            assert_eq!(r.status, 200, "{gv}: {}", String::from_utf8_lossy(&r.body));
            let l = r.json();
            assert_eq!(l["groupVersion"], gv);
            l["resources"].as_array().unwrap().clone()
        }
    };
    let find = |rs: &[serde_json::Value], name: &str| {
        rs.iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {rs:?}"))
            .clone()
    };
    let create = json!(["create"]);
    let all_verbs = json!([
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch"
    ]);

    let rs = list("apiregistration.k8s.io/v1").await;
    let s = find(&rs, "apiservices");
    assert_eq!(
        (&s["namespaced"], &s["kind"]),
        (&json!(false), &json!("APIService"))
    );
    assert_eq!(s["categories"], json!(["api-extensions"]));
    assert_eq!(s["verbs"], all_verbs);
    find(&rs, "apiservices/status");

    let rs = list("authentication.k8s.io/v1").await;
    for name in ["tokenreviews", "selfsubjectreviews"] {
        let r = find(&rs, name);
        assert_eq!(
            (&r["verbs"], &r["namespaced"]),
            (&create, &json!(false)),
            "{r}"
        );
    }
    let rs = list("authorization.k8s.io/v1").await;
    for (name, ns) in [
        ("selfsubjectaccessreviews", false),
        ("subjectaccessreviews", false),
        ("localsubjectaccessreviews", true),
        ("selfsubjectrulesreviews", false),
    ] {
        let r = find(&rs, name);
        assert_eq!(
            (&r["verbs"], &r["namespaced"]),
            (&create, &json!(ns)),
            "{r}"
        );
    }
    for gv in ["autoscaling/v1", "autoscaling/v2"] {
        let rs = list(gv).await;
        let h = find(&rs, "horizontalpodautoscalers");
        assert_eq!(
            (&h["shortNames"], &h["categories"]),
            (&json!(["hpa"]), &json!(["all"]))
        );
        find(&rs, "horizontalpodautoscalers/status");
    }
    let rs = list("batch/v1").await;
    let cj = find(&rs, "cronjobs");
    assert_eq!(
        (&cj["shortNames"], &cj["categories"]),
        (&json!(["cj"]), &json!(["all"]))
    );
    let rs = list("certificates.k8s.io/v1").await;
    assert_eq!(
        find(&rs, "certificatesigningrequests")["shortNames"],
        json!(["csr"])
    );
    assert_eq!(
        find(&rs, "certificatesigningrequests/approval")["verbs"],
        json!(["get", "patch", "update"])
    );
    let rs = list("networking.k8s.io/v1").await;
    assert_eq!(find(&rs, "ingresses")["shortNames"], json!(["ing"]));
    assert_eq!(find(&rs, "ingressclasses")["namespaced"], json!(false));

    // The group of two versions, v2 first, as kube-apiserver's priorities.
    let g = raw(server.addr(), "GET", "/apis/autoscaling", &[], None)
        .await
        .json();
    assert_eq!(g["preferredVersion"]["version"], "v2");
    assert_eq!(g["versions"][1]["version"], "v1");
    let agg = raw(
        server.addr(),
        "GET",
        "/apis",
        &[(
            "Accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
        )],
        None,
    )
    .await
    .json();
    let autoscaling = agg["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "autoscaling")
        .expect("autoscaling in aggregated discovery");
    let versions: Vec<&str> = autoscaling["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["v2", "v1"]);
}

/// The new stored kinds are stored: a CronJob through the generated
/// clientset's create, watch and delete, a CertificateSigningRequest
/// approved through `approval` (which changes its conditions only).
#[tokio::test]
async fn cronjobs_and_certificate_signing_requests_are_stored() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let body = json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly"},
        "spec": {"schedule": "0 0 * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}});
    let r = raw(
        addr,
        "POST",
        "/apis/batch/v1/namespaces/default/cronjobs",
        &[("Content-Type", "application/json")],
        Some(body.to_string().as_bytes()),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let got = raw(
        addr,
        "GET",
        "/apis/batch/v1/namespaces/default/cronjobs/nightly",
        &[],
        None,
    )
    .await;
    assert_eq!(got.status, 200);
    assert_eq!(got.json()["spec"]["schedule"], "0 0 * * *");

    let csr = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": "node-csr"},
        "spec": {"request": "LS0tLQ==", "signerName": "example.com/signer", "usages": ["client auth"]}});
    let r = raw(
        addr,
        "POST",
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
        &[("Content-Type", "application/json")],
        Some(csr.to_string().as_bytes()),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let mut approved = r.json();
    approved["status"] = json!({"conditions": [{"type": "Approved", "status": "True",
        "reason": "Test", "message": "approved by the test"}]});
    approved["spec"]["signerName"] = json!("example.com/other");
    let r = raw(
        addr,
        "PUT",
        "/apis/certificates.k8s.io/v1/certificatesigningrequests/node-csr/approval",
        &[("Content-Type", "application/json")],
        Some(approved.to_string().as_bytes()),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let after = r.json();
    assert_eq!(after["status"]["conditions"][0]["type"], "Approved");
    assert_eq!(
        after["spec"]["signerName"], "example.com/signer",
        "approval keeps the spec"
    );
}

/// The reviews are answered, not stored: a TokenReview of the token any
/// client sends authenticates (fakeapi accepts every request as
/// `system:admin`), every access review allows, a review cannot be read
/// back, and one asked for as a Table is a 406 (Table "should return a 406
/// for a backend which does not implement metadata").
#[tokio::test]
async fn reviews_are_answered_and_kept_nowhere() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let post = |path: &'static str, body: serde_json::Value, accept: &'static str| async move {
        let mut h = vec![("Content-Type", "application/json")];
        if !accept.is_empty() {
            h.push(("Accept", accept));
        }
        raw(addr, "POST", path, &h, Some(body.to_string().as_bytes())).await
    };
    let r = post(
        "/apis/authentication.k8s.io/v1/tokenreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": "anything", "audiences": ["api"]}}),
        "",
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let tr = r.json();
    assert_eq!(tr["status"]["authenticated"], true);
    assert_eq!(tr["status"]["user"]["username"], "system:admin");
    assert_eq!(tr["status"]["audiences"], json!(["api"]));
    let r = post(
        "/apis/authentication.k8s.io/v1/tokenreviews",
        json!({"spec": {}}),
        "",
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["message"],
        "token is required for TokenReview in authentication"
    );

    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"nonResourceAttributes": {"path": "/", "verb": "get"}}});
    let r = post(
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        sar.clone(),
        "",
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["status"], json!({"allowed": true}));
    let r = post(
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        sar,
        "application/json;as=Table;v=v1;g=meta.k8s.io",
    )
    .await;
    assert_eq!(r.status, 406, "{}", String::from_utf8_lossy(&r.body));
    let r = post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        json!({"spec": {"resourceAttributes": {"verb": "list", "resource": "pods"}}}),
        "",
    )
    .await;
    assert_eq!(
        r.status,
        422,
        "no user nor group: {}",
        String::from_utf8_lossy(&r.body)
    );
    let r = post(
        "/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews",
        json!({"spec": {"user": "u", "resourceAttributes": {"namespace": "default", "verb": "list", "resource": "pods"}}}),
        "",
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["status"]["allowed"], true);
    let r = post(
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        json!({"spec": {"namespace": "default"}}),
        "",
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.json()["status"]["resourceRules"][0]["verbs"],
        json!(["*"])
    );

    let r = raw(
        addr,
        "GET",
        "/apis/authentication.k8s.io/v1/tokenreviews",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 405, "{}", String::from_utf8_lossy(&r.body));
}

/// A cluster-scoped CRD `noxus.fv.example.com` of the FieldValidation
/// tests' schema: `spec` preserving unknown fields, with an embedded
/// object `template` and a declared `foo`.
async fn install_noxus(addr: std::net::SocketAddr) {
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "noxus.fv.example.com"},
        "spec": {"group": "fv.example.com", "scope": "Cluster",
            "names": {"plural": "noxus", "singular": "noxu", "kind": "Noxu", "listKind": "NoxuList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object", "properties": {"spec": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"foo": {"type": "string"},
                        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                            "properties": {"metadata": {"type": "object",
                                "properties": {"name": {"type": "string"}}},
                                "spec": {"type": "object"}}}}}}}}}]}});
    let r = raw(
        addr,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &[("Content-Type", "application/json")],
        Some(crd.to_string().as_bytes()),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
}

async fn apply_noxu(addr: std::net::SocketAddr, yaml: &str) -> RawResponse {
    raw(
        addr,
        "PATCH",
        "/apis/fv.example.com/v1/noxus/mytest?fieldManager=field_validation_mgr&fieldValidation=Strict",
        &[("Content-Type", "application/apply-patch+yaml")],
        Some(yaml.as_bytes()),
    )
    .await
}

/// FieldValidation's three tests of custom resources, each a server-side
/// apply (YAML) under `fieldValidation=Strict`, answered in
/// kube-apiserver's words: an undeclared field, at the root, in
/// `metadata` or in an embedded object's `metadata`, as its field
/// manager's typed reading refuses it (a 500 with no reason, not pruned);
/// a key repeated in a mapping, by its line.
#[tokio::test]
async fn strict_server_side_apply_of_a_custom_resource() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    install_noxus(addr).await;

    let r = apply_noxu(
        addr,
        "\napiVersion: fv.example.com/v1\nkind: Noxu\nmetadata:\n  name: mytest\nunknownField: unknown\nspec:\n  foo: foo1\n",
    )
    .await;
    assert_eq!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
    let status = r.json();
    assert!(status.get("reason").is_none(), "{status}");
    assert_eq!(
        status["message"],
        "failed to create typed patch object (/mytest; fv.example.com/v1, Kind=Noxu): .unknownField: field not declared in schema"
    );

    let r = apply_noxu(
        addr,
        "\napiVersion: fv.example.com/v1\nkind: Noxu\nmetadata:\n  name: mytest\n  unknownMeta: unknown\nspec:\n  template:\n    apiVersion: foo/v1\n    kind: Sub\n    metadata:\n        unknownSubMeta: unknown\n        name: subobject\n  foo: foo1\n",
    )
    .await;
    assert_eq!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
    let message = r.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("\n  .metadata.unknownMeta: field not declared in schema")
            && message.contains(
                "\n  .spec.template.metadata.unknownSubMeta: field not declared in schema"
            ),
        "{message}"
    );

    let r = apply_noxu(
        addr,
        "\napiVersion: fv.example.com/v1\nkind: Noxu\nmetadata:\n  name: mytest\nspec:\n  unknown: uk1\n  foo: foo1\n  foo: foo2\n",
    )
    .await;
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.json()["message"],
        "error strict decoding YAML: error converting YAML to JSON: yaml: unmarshal errors:\n  line 9: key \"foo\" already set in map"
    );
    // Nothing was written by the refusals; without them, the apply creates.
    let r = raw(
        addr,
        "GET",
        "/apis/fv.example.com/v1/noxus/mytest",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 404);
    let r = apply_noxu(
        addr,
        "\napiVersion: fv.example.com/v1\nkind: Noxu\nmetadata:\n  name: mytest\nspec:\n  unknown: uk1\n  foo: foo1\n",
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
}

/// CustomResourceDefinition "getting/updating/patching custom resource
/// definition status sub-resource works": the conditions a client writes
/// through a CRD's `/status` are kept beside those of the naming and
/// establishing controllers (which fakeapi writes at once), as
/// kube-apiserver's controllers keep them.
#[tokio::test]
async fn conditions_written_through_a_crds_status_are_kept() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    install_noxus(addr).await;
    let path =
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/noxus.fv.example.com/status";
    let mut crd = raw(addr, "GET", path, &[], None).await.json();
    crd["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"message": "updated"}));
    let r = raw(
        addr,
        "PUT",
        path,
        &[("Content-Type", "application/json")],
        Some(crd.to_string().as_bytes()),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let conditions = r.json()["status"]["conditions"].clone();
    let types: Vec<&str> = conditions
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(types, ["NamesAccepted", "Established", ""], "{conditions}");
    assert_eq!(conditions[2], json!({"message": "updated"}));

    let r = raw(
        addr,
        "PATCH",
        path,
        &[("Content-Type", "application/json-patch+json")],
        Some(
            br#"[{"op": "add", "path": "/status/conditions", "value": [{"message": "patched"}]}]"#,
        ),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let patched = r.json();
    assert_eq!(
        patched["status"]["conditions"][0],
        json!({"message": "patched"})
    );
    assert!(
        patched["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True"),
        "{patched}"
    );
}

/// "health handlers should contain necessary checks": `?verbose` lists
/// kube-apiserver's named checks on each endpoint, and each can be asked
/// for alone.
#[tokio::test]
async fn health_endpoints_list_their_checks() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    for endpoint in ["healthz", "livez", "readyz"] {
        let r = raw(addr, "GET", &format!("/{endpoint}?verbose"), &[], None).await;
        assert_eq!(r.status, 200);
        let body = String::from_utf8(r.body).unwrap();
        let lines: Vec<&str> = body.lines().collect();
        for check in [
            "[+]ping ok",
            "[+]etcd ok",
            "[+]poststarthook/start-apiextensions-controllers ok",
            "[+]poststarthook/scheduling/bootstrap-system-priority-classes ok",
            "[+]autoregister-completion ok",
            "[+]poststarthook/apiservice-openapi-controller ok",
        ] {
            assert!(lines.contains(&check), "{endpoint}: {check} in {body}");
        }
        assert_eq!(
            lines.contains(&"[+]informer-sync ok"),
            endpoint == "readyz",
            "{body}"
        );
        assert_eq!(
            lines.last(),
            Some(&format!("{endpoint} check passed").as_str())
        );
        let r = raw(addr, "GET", &format!("/{endpoint}"), &[], None).await;
        assert_eq!(r.body, b"ok");
    }
    let r = raw(
        addr,
        "GET",
        "/healthz/poststarthook/bootstrap-controller",
        &[],
        None,
    )
    .await;
    assert_eq!((r.status, r.body.as_slice()), (200, b"ok".as_slice()));
    let r = raw(addr, "GET", "/healthz/no-such-check", &[], None).await;
    assert_eq!(r.status, 404);
}

/// Namespaces "should ensure that all services are removed when a
/// namespace is deleted" waits for the `default` ServiceAccount of the
/// namespace it makes, which kube-controller-manager's service-account
/// controller writes: fakeapi writes it with every namespace (those it
/// starts with included), again if it is deleted, but not in a namespace
/// being deleted.
#[tokio::test]
async fn every_namespace_gets_its_default_service_account() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let sa = |ns: &'static str| async move {
        raw(
            addr,
            "GET",
            &format!("/api/v1/namespaces/{ns}/serviceaccounts/default"),
            &[],
            None,
        )
        .await
    };
    assert_eq!(sa("kube-system").await.status, 200);
    let r = raw(
        addr,
        "POST",
        "/api/v1/namespaces",
        &[("Content-Type", "application/json")],
        Some(br#"{"metadata": {"name": "nsdeletetest"}}"#),
    )
    .await;
    assert_eq!(r.status, 201);
    let first = sa("nsdeletetest").await;
    assert_eq!(
        first.status,
        200,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    let first = first.json();
    assert_eq!(
        (
            first["kind"].as_str(),
            first["metadata"]["namespace"].as_str()
        ),
        (Some("ServiceAccount"), Some("nsdeletetest"))
    );

    let r = raw(
        addr,
        "DELETE",
        "/api/v1/namespaces/nsdeletetest/serviceaccounts/default",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    let again = sa("nsdeletetest").await;
    assert_eq!(again.status, 200, "written again");
    assert_ne!(again.json()["metadata"]["uid"], first["metadata"]["uid"]);

    // A namespace being deleted (a finalizer holds it) gets no new one.
    let r = raw(
        addr,
        "PATCH",
        "/api/v1/namespaces/nsdeletetest",
        &[("Content-Type", "application/merge-patch+json")],
        Some(br#"{"metadata": {"finalizers": ["example.com/hold"]}}"#),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let r = raw(addr, "DELETE", "/api/v1/namespaces/nsdeletetest", &[], None).await;
    assert!(r.status == 200 || r.status == 202, "{}", r.status);
    let r = raw(addr, "GET", "/api/v1/namespaces/nsdeletetest", &[], None).await;
    assert!(
        !r.json()["metadata"]["deletionTimestamp"].is_null(),
        "terminating"
    );
    let r = raw(
        addr,
        "DELETE",
        "/api/v1/namespaces/nsdeletetest/serviceaccounts/default",
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(sa("nsdeletetest").await.status, 404, "not written again");
}

/// A streaming list (`sendInitialEvents`) asked as Tables, as the suite's
/// WatchList Table tests ask it: each event a Table of its object, the
/// column definitions in the first alone (`null` after, as kube-apiserver
/// leaves them), and the end of the initial events a BOOKMARK that is a
/// Table too, its one row's object the bookmark's metadata with the
/// `k8s.io/initial-events-end` annotation (a reflector, looking for it on
/// the event's object, never syncs).
#[tokio::test]
async fn a_streaming_list_of_tables_ends_with_a_table_bookmark() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    for i in 0..2 {
        let body = format!(r#"{{"metadata":{{"name":"s{i}","labels":{{"watchlist":"true"}}}}}}"#);
        let r = raw(
            a,
            "POST",
            "/api/v1/namespaces/default/secrets",
            &[("Content-Type", "application/json")],
            Some(body.as_bytes()),
        )
        .await;
        assert_eq!(r.status, 201);
    }
    let r = raw(
        a,
        "GET",
        "/api/v1/namespaces/default/secrets?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&labelSelector=watchlist%3Dtrue&timeoutSeconds=1",
        &[("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    let events = r.lines();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "ADDED", "BOOKMARK"]);
    for e in &events {
        assert_eq!(e["object"]["kind"], "Table", "{e}");
    }
    assert!(events[0]["object"]["columnDefinitions"].is_array());
    for e in &events[1..] {
        assert!(e["object"]["columnDefinitions"].is_null(), "{e}");
    }
    let get = raw(
        a,
        "GET",
        "/api/v1/namespaces/default/secrets/s1",
        &[("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")],
        None,
    )
    .await
    .json();
    // Age aside (the clock moved), as the suite compares them.
    let mut get = get;
    get["rows"][0]["cells"][1] = json!("");
    let mut watched = events[1]["object"].clone();
    watched["columnDefinitions"] = get["columnDefinitions"].clone();
    watched["rows"][0]["cells"][1] = json!("");
    assert_eq!(watched, get, "the event's Table is the get's");
    let bookmark = &events[2]["object"];
    let rows = bookmark["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(
        rows[0]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(
        bookmark["metadata"]["resourceVersion"],
        rows[0]["object"]["metadata"]["resourceVersion"]
    );
}

/// A store on a simulated clock the test moves (`WatchTimers::Simulated`,
/// as `batkube run` has it), compacting every 5 minutes.
fn compacting_on_simulated_time() -> (StoreConfig, impl Fn(i64)) {
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::Arc;
    // 2026-01-01T00:00:00Z.
    const T0_NS: i64 = 1_767_225_600_000_000_000;
    let now = Arc::new(AtomicI64::new(T0_NS));
    let n = now.clone();
    let config = StoreConfig {
        clock: Arc::new(move || chrono::DateTime::from_timestamp_nanos(n.load(Ordering::SeqCst))),
        watch_timers: fakeapi::WatchTimers::Simulated(Default::default()),
        compaction_interval: Some(std::time::Duration::from_secs(300)),
        ..Default::default()
    };
    (config, move |secs: i64| {
        now.store(T0_NS + secs * 1_000_000_000, Ordering::SeqCst)
    })
}

/// Creates a PodTemplate as the chunking tests do; the answer, a 201.
async fn create_template(a: std::net::SocketAddr, name: &str) -> RawResponse {
    let body = format!(
        r#"{{"metadata":{{"name":"{name}"}},"template":{{"spec":{{"containers":[{{"name":"test","image":"test2"}}]}}}}}}"#
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
    r
}

async fn get_json(a: std::net::SocketAddr, path: &str) -> RawResponse {
    raw(a, "GET", path, &[], None).await
}

/// The chunking test "should support continue listing from the last key if
/// the original version has been compacted away": the store compacts as
/// kube-apiserver has etcd compacted (every 5 minutes, each round taking a
/// version and compacting to the one the round before took), so a continue
/// token lives one to two rounds; then it is a 410 `Expired` whose Status
/// carries a token that continues from the same key at the latest version,
/// the rest of the list paged at that version. A list at exactly a
/// compacted version is a 410 too; a watch from one is not (kube-apiserver
/// serves it from its watch cache, which compaction does not touch).
#[tokio::test]
async fn a_continue_token_expires_when_its_version_is_compacted() {
    let (config, set_clock) = compacting_on_simulated_time();
    let (_store, server, client) = start(config).await;
    let a = server.addr();
    for i in 0..4 {
        create_template(a, &format!("template-{i:04}")).await;
    }
    let list = "/api/v1/namespaces/default/podtemplates?limit=1";
    let first = get_json(a, list).await.json();
    let first_rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    let with_token = format!("{list}&continue={token}");
    // A change after the first page, which a watch from its version sees.
    create_template(a, "template-0004").await;
    // The first round (5 min) takes a version and compacts nothing: the
    // token still serves.
    set_clock(300);
    let r = get_json(a, &with_token).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["metadata"]["resourceVersion"], first_rv.as_str());
    let now: u64 = get_json(a, "/api/v1/namespaces/default/podtemplates")
        .await
        .json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        now,
        first_rv.parse::<u64>().unwrap() + 2,
        "the change and the round's own version"
    );
    // Just before the second round, still there.
    set_clock(599);
    assert_eq!(get_json(a, &with_token).await.status, 200);
    // The second round compacts to the first's version: the token is gone.
    set_clock(600);
    let r = get_json(a, &with_token).await;
    assert_eq!(r.status, 410, "{}", String::from_utf8_lossy(&r.body));
    let status = r.json();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Expired");
    assert_eq!(status["code"], 410);
    assert_eq!(
        status["message"],
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
    );
    let inconsistent = status["metadata"]["continue"].as_str().unwrap().to_string();
    assert!(!inconsistent.is_empty());
    // It goes on from the same key, at the latest version, and the pages
    // after it keep that version.
    let page = get_json(a, &format!("{list}&continue={inconsistent}")).await;
    assert_eq!(page.status, 200, "{}", String::from_utf8_lossy(&page.body));
    let page = page.json();
    let rv = page["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(rv, first_rv);
    assert_eq!(page["items"][0]["metadata"]["name"], "template-0001");
    assert_eq!(page["metadata"]["remainingItemCount"], 3);
    let mut names = vec![page["items"][0]["metadata"]["name"].clone()];
    let mut next = page["metadata"]["continue"].as_str().unwrap().to_string();
    while !next.is_empty() {
        let p = get_json(a, &format!("{list}&continue={next}")).await.json();
        assert_eq!(p["metadata"]["resourceVersion"], rv.as_str());
        names.push(p["items"][0]["metadata"]["name"].clone());
        next = p["metadata"]["continue"].as_str().unwrap_or("").to_string();
    }
    assert_eq!(
        names,
        [
            "template-0001",
            "template-0002",
            "template-0003",
            "template-0004"
        ]
    );
    // A list at exactly the compacted version: 410, as etcd answers.
    let r = get_json(
        a,
        &format!("/api/v1/namespaces/default/podtemplates?resourceVersion={first_rv}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!(r.status, 410);
    assert_eq!(r.json()["reason"], "Expired");
    assert_eq!(
        r.json()["message"],
        "The resourceVersion for the provided list is too old."
    );
    // At one not compacted, served.
    let r = get_json(
        a,
        &format!("/api/v1/namespaces/default/podtemplates?resourceVersion={rv}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    // A watch from the compacted version is served from the history.
    use futures_util::{StreamExt, TryStreamExt};
    let templates: kube::Api<k8s_openapi::api::core::v1::PodTemplate> =
        kube::Api::namespaced(client, "default");
    let mut events = templates
        .watch(&kube::api::WatchParams::default(), &first_rv)
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(PATIENCE, events.try_next())
        .await
        .unwrap()
        .unwrap()
    {
        Some(kube::api::WatchEvent::Added(t)) => {
            assert_eq!(t.metadata.name.as_deref(), Some("template-0004"))
        }
        other => panic!("expected template-0004 ADDED, got {other:?}"),
    }
}

/// Without compaction (`compaction_interval: None`) a token never expires,
/// however far the clock goes, and the history's bound does not expire it
/// either (it bounds watches, as kube-apiserver's watch cache).
#[tokio::test]
async fn without_compaction_a_continue_token_lasts() {
    let (config, set_clock) = compacting_on_simulated_time();
    let (store, server, _client) = start(StoreConfig {
        compaction_interval: None,
        watch_history: 2,
        ..config
    })
    .await;
    let a = server.addr();
    for i in 0..4 {
        create_template(a, &format!("template-{i:04}")).await;
    }
    let list = "/api/v1/namespaces/default/podtemplates?limit=1";
    let token = get_json(a, list).await.json()["metadata"]["continue"]
        .as_str()
        .unwrap()
        .to_string();
    let rv = store.resource_version();
    for i in 4..10 {
        create_template(a, &format!("template-{i:04}")).await;
    }
    set_clock(86_400);
    let r = get_json(a, &format!("{list}&continue={token}")).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(store.resource_version(), rv + 6, "no round took a version");
}

/// client-go's typed List compares equal to the objects it created (the
/// WatchList test "should NOT be requested by client-go's List method"):
/// a built-in kind's list items carry no `apiVersion` and `kind`, as
/// kube-apiserver writes them (a typed Go client keeps what an item says,
/// and clears it from an object read alone), while a custom resource's
/// list, unstructured, keeps them.
#[tokio::test]
async fn a_built_in_lists_items_carry_no_kind() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let r = raw(
        a,
        "POST",
        "/api/v1/namespaces/default/secrets",
        &[("Content-Type", "application/json")],
        Some(br#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"secret-1","labels":{"watchlist":"true"}},"data":{"a":"Yg=="}}"#),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let mut created = r.json();
    let r = get_json(
        a,
        "/api/v1/namespaces/default/secrets?labelSelector=watchlist%3Dtrue",
    )
    .await;
    assert_eq!(r.status, 200);
    let list = r.json();
    assert_eq!(list["kind"], "SecretList");
    assert_eq!(list["apiVersion"], "v1");
    let item = &list["items"][0];
    assert!(
        item.get("kind").is_none() && item.get("apiVersion").is_none(),
        "{item}"
    );
    let o = created.as_object_mut().unwrap();
    o.remove("kind");
    o.remove("apiVersion");
    assert_eq!(item, &created);
    // Paged too; a get keeps them.
    let r = get_json(a, "/api/v1/namespaces/default/secrets?limit=1")
        .await
        .json();
    assert!(r["items"][0].get("kind").is_none());
    let r = get_json(a, "/api/v1/namespaces/default/secrets/secret-1")
        .await
        .json();
    assert_eq!(r["kind"], "Secret");
    // A custom resource's items keep them.
    install_noxus(a).await;
    let r = raw(
        a,
        "POST",
        "/apis/fv.example.com/v1/noxus",
        &[("Content-Type", "application/json")],
        Some(br#"{"apiVersion":"fv.example.com/v1","kind":"Noxu","metadata":{"name":"n"}}"#),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let r = get_json(a, "/apis/fv.example.com/v1/noxus").await.json();
    assert_eq!(r["items"][0]["kind"], "Noxu");
    assert_eq!(r["items"][0]["apiVersion"], "fv.example.com/v1");
}
