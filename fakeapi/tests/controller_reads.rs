//! What kube-controller-manager's controllers need from the API, over real
//! sockets: metadata-only lists, gets and watches with client-go's metadata
//! client's Accept headers (the garbage collector reads every resource so),
//! and batch/v1 Jobs defaulted and given their selector as the job
//! controller expects them.

mod common;

use common::*;
use fakeapi::StoreConfig;
use serde_json::json;
use tokio::io::AsyncReadExt;

const LIST_META: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const META: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

#[tokio::test]
async fn metadata_only_lists_gets_and_watches() {
    let (store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    store.create_pod(pod("a")).unwrap();
    let r = raw(
        addr,
        "GET",
        "/api/v1/namespaces/default/pods",
        &[("Accept", LIST_META)],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    let l = r.object();
    assert_eq!(l["kind"], "PartialObjectMetadataList");
    assert_eq!(l["apiVersion"], "meta.k8s.io/v1");
    assert!(l["metadata"]["resourceVersion"].is_string());
    // In protobuf (client-go's first clause) the list's items carry no
    // kind: the list's message says what they are.
    assert!(r.body.starts_with(b"k8s\0"));
    let item = &l["items"][0];
    assert_eq!(item["metadata"]["name"], "a");
    assert!(item.get("spec").is_none() && item.get("status").is_none());

    let r = raw(
        addr,
        "GET",
        "/api/v1/namespaces/default/pods/a",
        &[("Accept", META)],
        None,
    )
    .await;
    let one = r.object();
    assert_eq!(one["kind"], "PartialObjectMetadata");
    assert_eq!(one["metadata"]["labels"]["app"], "batch");
    assert!(one.get("spec").is_none());

    // A List form asked for a single object: the next clause (JSON) answers.
    let r = raw(
        addr,
        "GET",
        "/api/v1/namespaces/default/pods/a",
        &[("Accept", LIST_META)],
        None,
    )
    .await;
    assert_eq!(r.json()["kind"], "Pod");
    // Nothing acceptable: 406.
    let r = raw(
        addr,
        "GET",
        "/api/v1/namespaces/default/pods",
        &[(
            "Accept",
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        )],
        None,
    )
    .await;
    assert_eq!(r.status, 406);

    // A watch: each event's object, and bookmarks, as PartialObjectMetadata.
    let rv = l["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut s = send_raw(
        addr,
        "GET",
        &format!("/api/v1/namespaces/default/pods?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=1"),
        // Its JSON clauses (with the protobuf one first, the watch is in
        // protobuf: tests/protobuf.rs).
        &[("Accept", META.split_once(',').unwrap().1)],
        None,
    )
    .await;
    store.create_pod(pod("b")).unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(PATIENCE, s.read_to_end(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&buf);
    let event = text
        .lines()
        .find(|l| l.contains("\"ADDED\""))
        .expect("an ADDED event");
    let e: serde_json::Value = serde_json::from_str(event).unwrap();
    assert_eq!(e["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(e["object"]["metadata"]["name"], "b");
    assert!(e["object"].get("spec").is_none());
}

#[tokio::test]
async fn jobs_get_their_defaults_selector_and_status_as_kube_apiserver_gives_them() {
    let (store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}},
        "status": {"succeeded": 5}});
    let r = raw(
        addr,
        "POST",
        "/apis/batch/v1/namespaces/default/jobs",
        &[("Content-Type", "application/json")],
        Some(job.to_string().as_bytes()),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let j = r.json();
    let uid = j["metadata"]["uid"].as_str().unwrap();
    assert_eq!(
        j["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
        uid
    );
    assert_eq!(
        j["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"],
        "pi"
    );
    assert_eq!(
        (
            j["spec"]["completions"].clone(),
            j["spec"]["parallelism"].clone()
        ),
        (json!(1), json!(1))
    );
    assert_eq!(j["spec"]["backoffLimit"], 6);
    assert_eq!(j["status"], json!({}), "a create sets no status");
    assert_eq!(j["metadata"]["generation"], 1);

    // Status through its subresource only; spec changes bump the generation.
    let r = raw(
        addr,
        "PATCH",
        "/apis/batch/v1/namespaces/default/jobs/pi/status",
        &[("Content-Type", "application/merge-patch+json")],
        Some(br#"{"status":{"active":1}}"#),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"]["active"], 1);
    assert_eq!(r.json()["metadata"]["generation"], 1);
    let r = raw(
        addr,
        "PATCH",
        "/apis/batch/v1/namespaces/default/jobs/pi",
        &[("Content-Type", "application/merge-patch+json")],
        Some(br#"{"spec":{"parallelism":0}}"#),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["metadata"]["generation"], 2);
    // A running job's template is immutable.
    let r = raw(
        addr,
        "PATCH",
        "/apis/batch/v1/namespaces/default/jobs/pi",
        &[("Content-Type", "application/merge-patch+json")],
        Some(br#"{"spec":{"template":{"spec":{"nodeSelector":{"a":"b"}}}}}"#),
    )
    .await;
    assert_eq!(r.status, 422);
    assert!(
        r.json()["message"]
            .as_str()
            .unwrap()
            .contains("spec.template: Invalid value"),
        "{}",
        r.json()
    );
    // A template that cannot make a job's pods is refused.
    let mut bad = job.clone();
    bad["metadata"]["name"] = json!("always");
    bad["spec"]["template"]["spec"]
        .as_object_mut()
        .unwrap()
        .remove("restartPolicy");
    let r = raw(
        addr,
        "POST",
        "/apis/batch/v1/namespaces/default/jobs",
        &[("Content-Type", "application/json")],
        Some(bad.to_string().as_bytes()),
    )
    .await;
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json()["message"],
        r#"Job.batch "always" is invalid: spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never""#
    );
    assert!(store.get("jobs.batch", Some("default"), "always").is_err());
}
