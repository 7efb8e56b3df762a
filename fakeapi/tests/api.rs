//! The API over real HTTP with a kube-rs client and a raw HTTP client.

mod common;

use common::*;
use fakeapi::{EventType, Origin, StoreConfig};
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, Pod, PodStatus};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use serde_json::json;
use std::time::Duration;
use tokio::time::timeout;

fn api_err_code(e: kube::Error) -> u16 {
    match e {
        kube::Error::Api(s) => s.code,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn create_list_with_label_and_field_selectors() {
    let (store, _server, client) = start(StoreConfig::default()).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for i in 0..5 {
        let mut p = pod(&format!("p{i}"));
        if i % 2 == 0 {
            p.metadata
                .labels
                .as_mut()
                .unwrap()
                .insert("even".into(), "yes".into());
        }
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    store.bind_pod("default", "p1", "n1").unwrap();
    let names = |l: kube::core::ObjectList<Pod>| {
        l.items
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect::<Vec<_>>()
    };
    let l = pods
        .list(&ListParams::default().labels("even=yes"))
        .await
        .unwrap();
    assert_eq!(names(l), ["p0", "p2", "p4"]);
    let l = pods
        .list(&ListParams::default().labels("even!=yes,app in (batch)"))
        .await
        .unwrap();
    assert_eq!(names(l), ["p1", "p3"]);
    let l = pods
        .list(&ListParams::default().fields("spec.nodeName=n1"))
        .await
        .unwrap();
    assert_eq!(names(l), ["p1"]);
    let l = pods
        .list(&ListParams::default().fields("spec.nodeName="))
        .await
        .unwrap();
    assert_eq!(names(l).len(), 4);
    let l =
        pods.list(&ListParams::default().fields(
            "metadata.name!=p0,status.phase==Pending,spec.schedulerName=default-scheduler",
        ))
        .await
        .unwrap();
    assert_eq!(names(l).len(), 4);
    // Pagination with limit/continue.
    let first = pods.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let tok = first.metadata.continue_.clone().expect("a continue token");
    let rest = pods
        .list(&ListParams::default().limit(10).continue_token(&tok))
        .await
        .unwrap();
    assert_eq!(names(rest), ["p2", "p3", "p4"]);
    // All namespaces, and generateName.
    let all: Api<Pod> = Api::all(client.clone());
    assert_eq!(
        all.list(&ListParams::default()).await.unwrap().items.len(),
        5
    );
    let mut g = pod("");
    g.metadata.name = None;
    g.metadata.generate_name = Some("gen-".into());
    let created = pods.create(&PostParams::default(), &g).await.unwrap();
    assert!(created.metadata.name.unwrap().starts_with("gen-"));
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
}

#[tokio::test]
async fn update_conflicts_and_patches() {
    let (_store, _server, client) = start(StoreConfig::default()).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let p = pods
        .create(&PostParams::default(), &pod("a"))
        .await
        .unwrap();
    assert_eq!(
        api_err_code(
            pods.create(&PostParams::default(), &pod("a"))
                .await
                .unwrap_err()
        ),
        409
    );
    let mut fresh = p.clone();
    fresh
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("x".into(), "1".into());
    let updated = pods
        .replace("a", &PostParams::default(), &fresh)
        .await
        .unwrap();
    let mut stale = p.clone();
    stale
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("x".into(), "2".into());
    assert_eq!(
        api_err_code(
            pods.replace("a", &PostParams::default(), &stale)
                .await
                .unwrap_err()
        ),
        409
    );
    // Merge patch, with a stale resourceVersion: conflict.
    let stale_rv = p.metadata.resource_version.clone().unwrap();
    let e = pods
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"resourceVersion": stale_rv, "labels": {"y": "1"}}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_err_code(e), 409);
    let m = pods
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"y": "1"}}})),
        )
        .await
        .unwrap();
    assert_eq!(m.metadata.labels.as_ref().unwrap()["y"], "1");
    assert!(
        m.metadata.resource_version.unwrap().parse::<u64>().unwrap()
            > updated
                .metadata
                .resource_version
                .unwrap()
                .parse::<u64>()
                .unwrap()
    );
    // Strategic merge on the status subresource: conditions merged by type.
    let sp = json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}});
    pods.patch_status("a", &PatchParams::default(), &Patch::Strategic(sp))
        .await
        .unwrap();
    let sp = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
    let s = pods
        .patch_status("a", &PatchParams::default(), &Patch::Strategic(sp))
        .await
        .unwrap();
    let conds = s.status.unwrap().conditions.unwrap();
    assert_eq!(conds.len(), 2, "{conds:?}");
    // As apimachinery orders them: the patch's entry (new) before the live one.
    assert_eq!(conds[0].type_, "Ready");
    assert_eq!(conds[1].reason.as_deref(), Some("Unschedulable"));
    // Server-side apply of the DisruptionTarget condition, as kube-scheduler's preemption does.
    let apply = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "default"},
        "status": {"conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]}});
    let s = pods
        .patch_status(
            "a",
            &PatchParams::apply("kube-scheduler").force(),
            &Patch::Apply(apply),
        )
        .await
        .unwrap();
    let types: Vec<_> = s
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| c.type_)
        .collect();
    assert_eq!(types, ["Ready", "PodScheduled", "DisruptionTarget"]);
    // JSON patch; a failing test op is 422.
    let jp: json_patch::Patch = serde_json::from_value(
        json!([{"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}}]),
    )
    .unwrap();
    let j = pods
        .patch("a", &PatchParams::default(), &Patch::Json::<()>(jp))
        .await
        .unwrap();
    assert_eq!(j.metadata.annotations.unwrap()["k"], "v");
    let jp: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/metadata/name", "value": "zzz"}]))
            .unwrap();
    let e = pods
        .patch("a", &PatchParams::default(), &Patch::Json::<()>(jp))
        .await
        .unwrap_err();
    assert_eq!(api_err_code(e), 422);
    // A status change through the main resource is ignored, as in Kubernetes.
    let s = pods
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running"}})),
        )
        .await
        .unwrap();
    assert_eq!(s.status.unwrap().phase.as_deref(), Some("Pending"));
    // Delete sets deletionTimestamp on the returned object, then 404.
    let d = pods.delete("a", &Default::default()).await.unwrap();
    let gone = d.left().expect("the deleted object");
    assert!(gone.metadata.deletion_timestamp.is_some());
    assert_eq!(api_err_code(pods.get("a").await.unwrap_err()), 404);
}

#[tokio::test]
async fn binding_subresource() {
    let (store, server, client) = start(StoreConfig::default()).await;
    let mut changes = store.subscribe();
    store.create_node(node("n1")).unwrap();
    store.create_pod(pod("a")).unwrap();
    store.create_pod(pod("b")).unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "a"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}});
    let st: kube::core::Status = pods
        .create_subresource("binding", "a", &PostParams::default(), &binding)
        .await
        .unwrap();
    assert_eq!(st.code, 201);
    let e = pods
        .create_subresource::<_, kube::core::Status>(
            "binding",
            "a",
            &PostParams::default(),
            &binding,
        )
        .await
        .unwrap_err();
    assert_eq!(api_err_code(e), 409);
    // Trailing slash, as some clients send it.
    let body = serde_json::to_vec(
        &json!({"metadata": {"name": "b"}, "target": {"kind": "Node", "name": "n1"}}),
    )
    .unwrap();
    let r = raw(
        server.addr(),
        "POST",
        "/api/v1/namespaces/default/pods/b/binding/",
        &[("Content-Type", "application/json")],
        Some(&body),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["status"], "Success");
    let a = pods.get("a").await.unwrap();
    assert_eq!(a.spec.unwrap().node_name.as_deref(), Some("n1"));
    let cond = &a.status.unwrap().conditions.unwrap()[0];
    assert_eq!(
        (cond.type_.as_str(), cond.status.as_str()),
        ("PodScheduled", "True")
    );
    // The broker sees the binding, made by an HTTP client.
    let mut bound = Vec::new();
    while bound.len() < 2 {
        let c = timeout(PATIENCE, changes.recv()).await.unwrap().unwrap();
        if c.kind == EventType::Modified && c.origin == Origin::Http {
            bound.push((c.name.clone(), c.object["spec"]["nodeName"].clone()));
        }
    }
    assert_eq!(
        bound,
        [
            ("a".to_string(), json!("n1")),
            ("b".to_string(), json!("n1"))
        ]
    );
    // Client deletions are visible too.
    pods.delete("a", &Default::default()).await.unwrap();
    let c = timeout(PATIENCE, changes.recv()).await.unwrap().unwrap();
    assert_eq!(
        (c.kind, c.origin, c.name.as_str()),
        (EventType::Deleted, Origin::Http, "a")
    );
}

#[tokio::test]
async fn watch_from_version_with_bookmarks() {
    let config = StoreConfig {
        bookmark_interval: Duration::from_millis(20),
        ..Default::default()
    };
    let (store, _server, client) = start(config).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    store.create_pod(pod("before")).unwrap();
    let list = pods.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let mut events = pods
        .watch(
            &WatchParams::default()
                .timeout(290)
                .fields("status.phase!=Succeeded"),
            &rv,
        )
        .await
        .unwrap()
        .boxed();
    store.create_pod(pod("after")).unwrap();
    store
        .update_pod_status(
            "default",
            "after",
            PodStatus {
                phase: Some("Succeeded".into()),
                ..Default::default()
            },
        )
        .unwrap();
    let mut seen = Vec::new();
    let mut bookmark = None;
    while bookmark.is_none() || seen.len() < 2 {
        match timeout(PATIENCE, events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            WatchEvent::Added(p) => seen.push(("ADDED", p.metadata.name.unwrap())),
            // Leaving the field selection is a DELETED for this watcher.
            WatchEvent::Deleted(p) => seen.push(("DELETED", p.metadata.name.unwrap())),
            WatchEvent::Bookmark(b) => bookmark = Some(b.metadata.resource_version),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            ("ADDED", "after".to_string()),
            ("DELETED", "after".to_string())
        ]
    );
    assert_eq!(
        bookmark.unwrap().parse::<u64>().unwrap(),
        store.resource_version()
    );
}

#[tokio::test]
async fn streaming_list_watcher_gets_initial_events_end() {
    let (store, server, client) = start(StoreConfig::default()).await;
    store.create_pod(pod("a")).unwrap();
    store.create_pod(pod("b")).unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut w = watcher(pods, watcher::Config::default().streaming_lists()).boxed();
    let mut init = Vec::new();
    loop {
        match timeout(PATIENCE, w.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::Init => {}
            watcher::Event::InitApply(p) => init.push(p.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(init, ["a", "b"]);
    // The raw stream carries the annotated bookmark.
    let r = raw(
        server.addr(),
        "GET",
        "/api/v1/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1",
        &[],
        None,
    )
    .await;
    let lines = r.lines();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[2]["type"], "BOOKMARK");
    assert_eq!(
        lines[2]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
}

#[tokio::test]
async fn too_old_version_is_410_and_watcher_relists() {
    let config = StoreConfig {
        watch_history: 4,
        ..Default::default()
    };
    let (store, server, client) = start(config).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    store.create_pod(pod("p0")).unwrap();
    let old_rv = store.resource_version().to_string();
    for i in 1..10 {
        store.create_pod(pod(&format!("p{i}"))).unwrap();
    }
    let mut events = pods
        .watch(&WatchParams::default(), &old_rv)
        .await
        .unwrap()
        .boxed();
    match timeout(PATIENCE, events.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        WatchEvent::Error(e) => assert_eq!(e.code, 410),
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    let r = raw(
        server.addr(),
        "GET",
        &format!("/api/v1/pods?watch=1&resourceVersion={old_rv}"),
        &[],
        None,
    )
    .await;
    assert_eq!(r.lines()[0]["object"]["code"], 410);
    // A continue token is not bounded by the watch history: compaction
    // expires it (tests/conformance.rs), as etcd's does kube-apiserver's.
    let r = raw(
        server.addr(),
        "GET",
        &format!("/api/v1/pods?limit=1&continue={old_rv}/default/p0"),
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    // kube-runtime's watcher recovers by relisting.
    let (reader, writer) = kube::runtime::reflector::store::<Pod>();
    let stream = kube::runtime::reflector(writer, watcher(pods, watcher::Config::default()));
    tokio::spawn(stream.for_each(|_| async {}));
    timeout(PATIENCE, reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reader.state().len(), 10);
}

#[tokio::test]
async fn slow_watcher_is_cut_off_without_blocking_the_store() {
    let config = StoreConfig {
        watch_buffer: 16,
        ..Default::default()
    };
    let (store, server, _client) = start(config).await;
    // A watcher that does not read.
    let conn = send_raw(
        server.addr(),
        "GET",
        "/api/v1/pods?watch=true&resourceVersion=1",
        &[],
        None,
    )
    .await;
    // Wait until the watch is registered.
    timeout(PATIENCE, async {
        while store.watcher_count() == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap();
    let big = "x".repeat(64 * 1024);
    for i in 0..200 {
        let mut p = pod(&format!("p{i}"));
        p.metadata.annotations = Some([("pad".to_string(), big.clone())].into());
        store.create_pod(p).unwrap();
    }
    let r = read_raw(conn).await;
    let lines = r.lines();
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "ERROR");
    assert_eq!(last["object"]["code"], 410);
    assert!(lines.len() < 200, "cut off early: {} events", lines.len());
    timeout(PATIENCE, server.activity().wait_idle())
        .await
        .unwrap();
}

#[tokio::test]
async fn errors_are_status_objects() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let r = raw(a, "GET", "/api/v1/namespaces/default/pods/nope", &[], None).await;
    assert_eq!(
        (
            r.status,
            r.json()["kind"].as_str(),
            r.json()["reason"].as_str()
        ),
        (404, Some("Status"), Some("NotFound"))
    );
    let r = raw(a, "GET", "/api/v1/pods?labelSelector=a%20in%20b", &[], None).await;
    assert_eq!(r.status, 400);
    let r = raw(
        a,
        "POST",
        "/api/v1/namespaces/default/pods",
        &[("Content-Type", "application/vnd.kubernetes.protobuf")],
        Some(b"\x00"),
    )
    .await;
    assert_eq!(r.status, 400, "protobuf without the k8s\\0 magic");
    let r = raw(
        a,
        "POST",
        "/api/v1/namespaces/default/pods",
        &[("Content-Type", "application/cbor")],
        Some(b"\xa0"),
    )
    .await;
    assert_eq!(r.status, 415);
    let r = raw(
        a,
        "POST",
        "/api/v1/namespaces/default/pods",
        &[("Content-Type", "application/json")],
        Some(b"{\"metadata\":{}}"),
    )
    .await;
    assert_eq!(
        (r.status, r.json()["reason"].as_str()),
        (422, Some("Invalid"))
    );
    let r = raw(
        a,
        "PATCH",
        "/api/v1/namespaces/default/pods/x",
        &[("Content-Type", "text/plain")],
        Some(b"{}"),
    )
    .await;
    assert_eq!(r.status, 415);
    let r = raw(a, "GET", "/apis/nope.k8s.io/v1/things", &[], None).await;
    assert_eq!(r.status, 404);
    let r = raw(
        a,
        "POST",
        "/api/v1/namespaces/ghost/pods",
        &[("Content-Type", "application/json")],
        Some(b"{\"metadata\":{\"name\":\"x\"}}"),
    )
    .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn discovery_protobuf_fallback_and_metrics() {
    let (store, server, client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let v = client.apiserver_version().await.unwrap();
    assert_eq!(v.major, fakeapi::SERVER_VERSION.0);
    let r = raw(a, "GET", "/api", &[], None).await;
    assert_eq!(r.json()["versions"][0], "v1");
    let r = raw(a, "GET", "/apis", &[], None).await;
    let groups: Vec<_> = r.json()["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap().to_string())
        .collect();
    for g in [
        "apps",
        "policy",
        "storage.k8s.io",
        "events.k8s.io",
        "coordination.k8s.io",
        "resource.k8s.io",
    ] {
        assert!(
            groups.contains(&g.to_string()),
            "{g} missing from {groups:?}"
        );
    }
    let r = raw(a, "GET", "/api/v1", &[], None).await;
    let names: Vec<_> = r.json()["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap().to_string())
        .collect();
    for n in [
        "pods",
        "pods/status",
        "pods/binding",
        "pods/eviction",
        "nodes",
        "namespaces",
        "events",
    ] {
        assert!(names.contains(&n.to_string()), "{n} missing");
    }
    let r = raw(
        a,
        "GET",
        "/apis",
        &[(
            "Accept",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        )],
        None,
    )
    .await;
    assert!(r.headers.contains("as=APIGroupDiscoveryList"));
    assert_eq!(r.json()["kind"], "APIGroupDiscoveryList");
    // A protobuf request gets protobuf (tests/protobuf.rs), discovery JSON.
    store.create_node(node("n1")).unwrap();
    let r = raw(
        a,
        "GET",
        "/api/v1/nodes",
        &[("Accept", "application/vnd.kubernetes.protobuf, */*")],
        None,
    )
    .await;
    assert_eq!(r.object()["kind"], "NodeList");
    assert_eq!(r.object()["items"][0]["metadata"]["name"], "n1");
    let nodes: Api<Node> = Api::all(client);
    nodes.list(&ListParams::default()).await.unwrap();
    server.set_extra_metrics(|| "broker_jobs_total 3\n".to_string());
    let r = raw(a, "GET", "/metrics", &[], None).await;
    let text = String::from_utf8(r.body).unwrap();
    assert!(
        text.contains("fakeapi_requests_total{verb=\"list\",resource=\"nodes\",code=\"200\"}"),
        "{text}"
    );
    assert!(text.contains("broker_jobs_total 3"));
}

#[tokio::test]
async fn activity_goes_idle_once_watch_events_are_written() {
    let (store, server, client) = start(StoreConfig::default()).await;
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let mut events = pods
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    timeout(PATIENCE, server.activity().wait_idle())
        .await
        .unwrap();
    store.create_pod(pod("a")).unwrap();
    // The event is queued to the watcher: not idle until it is written.
    assert_eq!(server.activity().snapshot().watch_events_pending, 1);
    timeout(PATIENCE, server.activity().wait_idle())
        .await
        .unwrap();
    match timeout(PATIENCE, events.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        WatchEvent::Added(p) => assert_eq!(p.metadata.name.as_deref(), Some("a")),
        other => panic!("unexpected {other:?}"),
    }
    let snap = server.activity().snapshot();
    assert!(snap.requests_served >= 1 && snap.watch_events_written >= 1);
    server.shutdown().await;
}

/// Property: replaying a watch's events over the initial list reproduces the
/// store, whatever the sequence of creates, updates, bindings, status writes
/// and deletions (a fixed-seed xorshift drives 3,000 random operations).
#[tokio::test]
async fn watch_replay_reproduces_the_store() {
    let (store, _server, client) = start(StoreConfig::default()).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let list = pods.list(&ListParams::default()).await.unwrap();
    let mut events = pods
        .watch(
            &WatchParams::default(),
            &list.metadata.resource_version.unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..3000 {
        let name = format!("p{}", next() % 40);
        let _ = match next() % 6 {
            0 | 1 => store.create_pod(pod(&name)).map(|_| ()),
            2 => store.bind_pod("default", &name, "n1"),
            3 => store
                .update_pod_status(
                    "default",
                    &name,
                    PodStatus {
                        phase: Some("Running".into()),
                        ..Default::default()
                    },
                )
                .map(|_| ()),
            4 => store
                .patch(
                    "pods",
                    Some("default"),
                    &name,
                    fakeapi::PatchKind::Merge,
                    format!(r#"{{"metadata":{{"labels":{{"n":"{}"}}}}}}"#, next() % 3).as_bytes(),
                )
                .map(|_| ()),
            _ => store.delete_pod("default", &name).map(|_| ()),
        };
    }
    store.create_pod(pod("zz-sentinel")).unwrap();
    let mut replayed: std::collections::BTreeMap<String, Pod> = Default::default();
    loop {
        match timeout(PATIENCE, events.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            WatchEvent::Added(p) | WatchEvent::Modified(p) => {
                let name = p.metadata.name.clone().unwrap();
                replayed.insert(name.clone(), p);
                if name == "zz-sentinel" {
                    break;
                }
            }
            WatchEvent::Deleted(p) => {
                replayed.remove(p.metadata.name.as_ref().unwrap());
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let actual: std::collections::BTreeMap<String, Pod> = store
        .list_pods(Some("default"))
        .unwrap()
        .into_iter()
        .map(|p| (p.metadata.name.clone().unwrap(), p))
        .collect();
    assert_eq!(replayed, actual);
}

#[tokio::test]
async fn events_expire_after_their_ttl_on_the_store_clock() {
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::Arc;
    let now = Arc::new(AtomicI64::new(1_000_000));
    let clock = {
        let now = now.clone();
        Arc::new(move || chrono::DateTime::from_timestamp(now.load(Ordering::SeqCst), 0).unwrap())
    };
    let store = fakeapi::Store::with_config(StoreConfig {
        clock,
        event_ttl: Some(Duration::from_secs(3600)),
        ..Default::default()
    });
    let ev = |name: &str| {
        serde_json::json!({"metadata": {"name": name}, "involvedObject": {"kind": "Pod", "name": "p"},
                           "reason": "Scheduled", "message": "m", "type": "Normal"})
    };
    store.create("events", Some("default"), ev("e1")).unwrap();
    now.fetch_add(1800, Ordering::SeqCst);
    store.create("events", Some("default"), ev("e2")).unwrap();
    // Rewritten at +1800 s: lives until +5400 s.
    let mut e2 = store.get("events", Some("default"), "e2").unwrap();
    e2["message"] = "again".into();
    store.update("events", Some("default"), e2).unwrap();
    now.fetch_add(1800, Ordering::SeqCst); // +3600 s: e1 is due
    let mut changes = store.subscribe();
    assert_eq!(store.expire_events(), 1);
    let c = changes.try_recv().unwrap();
    assert_eq!(
        (c.kind, c.name.as_str()),
        (fakeapi::EventType::Deleted, "e1")
    );
    assert!(store.get("events", Some("default"), "e1").is_err());
    assert!(store.get("events", Some("default"), "e2").is_ok());
    now.fetch_add(1800, Ordering::SeqCst); // +5400 s: e2 is due
    assert_eq!(store.expire_events(), 1);
    assert!(store.list("events", None, None, None).unwrap().is_empty());
}

/// A watch event in a word: `ADDED name`, `begin N`, `end N`, `end N of WATCHES`.
fn describe<K: kube::Resource>(ev: WatchEvent<K>) -> String {
    match ev {
        WatchEvent::Added(o) => format!("ADDED {}", o.meta().name.clone().unwrap()),
        WatchEvent::Bookmark(b) => {
            let a = &b.metadata.annotations;
            match (
                a.get(fakeapi::INSTANT_BEGIN),
                a.get(fakeapi::INSTANT_END),
                a.get(fakeapi::INSTANT_WATCHES),
            ) {
                (Some(n), None, None) => format!("begin {n}"),
                (None, Some(n), None) => format!("end {n}"),
                (None, Some(n), Some(w)) => format!("end {n} of {w}"),
                _ => "bookmark".into(),
            }
        }
        other => format!("{other:?}"),
    }
}

/// A watch that asked for instants (the header, with bookmarks) sees each
/// held batch that changed something between a begin and an end bookmark,
/// numbered; a watch of another resource gets only the ends; a batch that changed nothing sends nothing; a watch that did
/// not ask sees only the changes.
#[tokio::test]
async fn held_batches_are_bracketed_by_instant_bookmarks() {
    let (store, _server, client) = start(StoreConfig::default()).await;
    let open = |path: &str, instants: bool| {
        let mut req = kube::core::Request::new(path)
            .watch(&WatchParams::default(), "0")
            .unwrap();
        if instants {
            req.headers_mut()
                .insert(fakeapi::INSTANTS_HEADER, "true".parse().unwrap());
        }
        req
    };
    store.create_pod(pod("p0")).unwrap();
    store.create_node(node("n0")).unwrap();
    let pods_marked = client
        .request_events::<Pod>(open("/api/v1/namespaces/default/pods", true))
        .await
        .unwrap()
        .boxed();
    let nodes_marked = client
        .request_events::<Node>(open("/api/v1/nodes", true))
        .await
        .unwrap()
        .boxed();
    let plain = client
        .request_events::<Pod>(open("/api/v1/namespaces/default/pods", false))
        .await
        .unwrap()
        .boxed();
    // Each watch's initial ADDED shows it is registered.
    let (mut pods_marked, mut nodes_marked, mut plain) = (pods_marked, nodes_marked, plain);
    async fn next<K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug>(
        s: &mut (impl futures_util::Stream<Item = kube::Result<WatchEvent<K>>> + Unpin),
    ) -> String {
        describe(
            timeout(PATIENCE, s.try_next())
                .await
                .unwrap()
                .unwrap()
                .unwrap(),
        )
    }
    assert_eq!(next(&mut pods_marked).await, "ADDED p0");
    assert_eq!(next(&mut nodes_marked).await, "ADDED n0");
    assert_eq!(next(&mut plain).await, "ADDED p0");
    {
        let _h = store.hold();
        let _inner = store.hold();
        store.create_pod(pod("p1")).unwrap();
        store.create_pod(pod("p2")).unwrap();
    }
    drop(store.hold());
    {
        let _h = store.hold();
        store.create_pod(pod("p3")).unwrap();
    }
    let mut got = Vec::new();
    for _ in 0..7 {
        got.push(next(&mut pods_marked).await);
    }
    assert_eq!(
        got,
        ["begin 1", "ADDED p1", "ADDED p2", "end 1", "begin 2", "ADDED p3", "end 2"]
    );
    let mut got = Vec::new();
    for _ in 0..2 {
        got.push(next(&mut nodes_marked).await);
    }
    assert_eq!(got, ["end 1", "end 2"]);
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(next(&mut plain).await);
    }
    assert_eq!(got, ["ADDED p1", "ADDED p2", "ADDED p3"]);
}

/// A client that asks for named ends (`client=TOKEN; watch=NAME`) gets an
/// instant's end only on its watches that saw a change of it, each naming
/// all of them; its idle watches get no frame. Another client's watches
/// are named apart, and a watch that asked for every end still gets each.
#[tokio::test]
async fn named_ends_go_only_to_the_watches_that_saw_the_instant() {
    let (store, _server, client) = start(StoreConfig::default()).await;
    let open = |path: &str, marks: &str| {
        let mut req = kube::core::Request::new(path)
            .watch(&WatchParams::default(), "0")
            .unwrap();
        req.headers_mut()
            .insert(fakeapi::INSTANTS_HEADER, marks.parse().unwrap());
        req
    };
    store.create_pod(pod("p0")).unwrap();
    store.create_node(node("n0")).unwrap();
    let pods_path = "/api/v1/namespaces/default/pods";
    let mut a_pods = client
        .request_events::<Pod>(open(pods_path, "client=a; watch=pods"))
        .await
        .unwrap()
        .boxed();
    let mut a_nodes = client
        .request_events::<Node>(open("/api/v1/nodes", "client=a; watch=nodes"))
        .await
        .unwrap()
        .boxed();
    let mut b_pods = client
        .request_events::<Pod>(open(pods_path, "client=b, watch=p"))
        .await
        .unwrap()
        .boxed();
    let mut every = client
        .request_events::<Node>(open("/api/v1/nodes", "true"))
        .await
        .unwrap()
        .boxed();
    async fn next<K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug>(
        s: &mut (impl futures_util::Stream<Item = kube::Result<WatchEvent<K>>> + Unpin),
    ) -> String {
        describe(
            timeout(PATIENCE, s.try_next())
                .await
                .unwrap()
                .unwrap()
                .unwrap(),
        )
    }
    assert_eq!(next(&mut a_pods).await, "ADDED p0");
    assert_eq!(next(&mut a_nodes).await, "ADDED n0");
    assert_eq!(next(&mut b_pods).await, "ADDED p0");
    assert_eq!(next(&mut every).await, "ADDED n0");
    // Instant 1 changes a pod only; instant 2 a pod and a node.
    {
        let _h = store.hold();
        store.create_pod(pod("p1")).unwrap();
    }
    {
        let _h = store.hold();
        store.create_pod(pod("p2")).unwrap();
        store.create_node(node("n1")).unwrap();
    }
    let mut got = Vec::new();
    for _ in 0..6 {
        got.push(next(&mut a_pods).await);
    }
    assert_eq!(
        got,
        [
            "begin 1",
            "ADDED p1",
            "end 1 of pods",
            "begin 2",
            "ADDED p2",
            "end 2 of nodes,pods"
        ]
    );
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(next(&mut a_nodes).await);
    }
    assert_eq!(got, ["begin 2", "ADDED n1", "end 2 of nodes,pods"]);
    let mut got = Vec::new();
    for _ in 0..6 {
        got.push(next(&mut b_pods).await);
    }
    assert_eq!(
        got,
        [
            "begin 1",
            "ADDED p1",
            "end 1 of p",
            "begin 2",
            "ADDED p2",
            "end 2 of p"
        ]
    );
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(next(&mut every).await);
    }
    assert_eq!(got, ["end 1", "begin 2", "ADDED n1", "end 2"]);
    // Nothing more was sent to the idle nodes watch of client a: the next
    // thing it reads is instant 3's.
    {
        let _h = store.hold();
        store.create_node(node("n2")).unwrap();
    }
    let mut got = Vec::new();
    for _ in 0..3 {
        got.push(next(&mut a_nodes).await);
    }
    assert_eq!(got, ["begin 3", "ADDED n2", "end 3 of nodes"]);
}

/// A watch that asks for instants when it starts (again, after a timeout)
/// keeps its place: opened between instants, its replay is bracketed as
/// part of the last one (a client reading it has not seen that instant
/// whole before its end), and with nothing to replay it gets only that
/// end; opened inside one, it begins with that instant's begin and gets
/// its end at the release.
#[tokio::test]
async fn a_watch_started_again_keeps_its_place_in_the_instants() {
    let (store, _server, client) = start(StoreConfig::default()).await;
    let open = |rv: String| {
        let mut req = kube::core::Request::new("/api/v1/namespaces/default/pods")
            .watch(&WatchParams::default(), &rv)
            .unwrap();
        req.headers_mut()
            .insert(fakeapi::INSTANTS_HEADER, "true".parse().unwrap());
        req
    };
    // The first `n` items of a watch stream, described.
    async fn first(
        s: impl futures_util::Stream<Item = kube::Result<WatchEvent<Pod>>>,
        n: usize,
    ) -> Vec<String> {
        let got: Vec<_> = timeout(PATIENCE, s.take(n).try_collect())
            .await
            .unwrap()
            .unwrap();
        got.into_iter().map(describe).collect()
    }
    let rv0 = store.resource_version().to_string();
    {
        let _h = store.hold();
        store.create_pod(pod("p1")).unwrap();
    }
    // Between instants: the replay inside instant 1's markers (before the
    // fix, without the begin: a scheduler whose three watches timed out
    // together read one replay and decided before the others came, once
    // in a while under load).
    let s = client
        .request_events::<Pod>(open(rv0.clone()))
        .await
        .unwrap();
    assert_eq!(first(s, 3).await, ["begin 1", "ADDED p1", "end 1"]);
    // Nothing to replay: the end alone.
    let now = store.resource_version().to_string();
    let s = client.request_events::<Pod>(open(now)).await.unwrap();
    assert_eq!(first(s, 1).await, ["end 1"]);
    // Inside instant 2 (the response's head means the watch is
    // registered): its begin, the replay, and its end at the release.
    let h = store.hold();
    store.create_pod(pod("p2")).unwrap();
    let s = client.request_events::<Pod>(open(rv0)).await.unwrap();
    drop(h);
    assert_eq!(
        first(s, 4).await,
        ["begin 2", "ADDED p1", "ADDED p2", "end 2"]
    );
}
