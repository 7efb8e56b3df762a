//! client-go's default wire format over real HTTP: protobuf bodies
//! (`k8s\0` + `runtime.Unknown`) for the writes the upstream kube-scheduler
//! makes with only `--kubeconfig` (its leader-election lease, bindings,
//! events, the DeleteOptions of a preemption), with client-go's Accept
//! header; answers are JSON, which that header allows.

mod common;

use common::*;
use fakeapi::StoreConfig;
use k8s_pb::api::coordination::v1 as pb_coord;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// What client-go sends when its content type is protobuf and no Accept
/// types are configured (kube-scheduler's defaults).
const ACCEPT: &str = "application/vnd.kubernetes.protobuf, */*";

fn envelope(api_version: &str, kind: &str, msg: &impl Message) -> Vec<u8> {
    let mut body = b"k8s\0".to_vec();
    body.extend(
        Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(msg.encode_to_vec()),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        }
        .encode_to_vec(),
    );
    body
}

fn micro(seconds: i64) -> Option<pb_meta::MicroTime> {
    Some(pb_meta::MicroTime {
        seconds: Some(seconds),
        nanos: Some(0),
    })
}

fn lease(rv: Option<String>, holder: &str, renew: i64) -> pb_coord::Lease {
    pb_coord::Lease {
        metadata: Some(pb_meta::ObjectMeta {
            name: Some("kube-scheduler".into()),
            namespace: Some("kube-system".into()),
            resource_version: rv,
            ..Default::default()
        }),
        spec: Some(pb_coord::LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            acquire_time: micro(0),
            renew_time: micro(renew),
            lease_transitions: Some(0),
            ..Default::default()
        }),
    }
}

#[tokio::test]
async fn leader_election_lease_in_protobuf() {
    let (store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let coll = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
    let path = format!("{coll}/kube-scheduler");
    let headers = [("Content-Type", PROTOBUF), ("Accept", ACCEPT)];
    assert_eq!(
        raw(a, "GET", &path, &[("Accept", ACCEPT)], None)
            .await
            .status,
        404
    );
    let body = envelope(
        "coordination.k8s.io/v1",
        "Lease",
        &lease(None, "sched_1", 0),
    );
    let r = raw(a, "POST", coll, &headers, Some(&body)).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert!(r
        .headers
        .to_ascii_lowercase()
        .contains("content-type: application/json"));
    let created = r.json();
    assert_eq!(created["spec"]["holderIdentity"], "sched_1");
    assert_eq!(created["spec"]["renewTime"], "1970-01-01T00:00:00.000000Z");
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    // A second candidate creating it too loses: 409 AlreadyExists.
    let body = envelope(
        "coordination.k8s.io/v1",
        "Lease",
        &lease(None, "sched_2", 0),
    );
    assert_eq!(
        raw(a, "POST", coll, &headers, Some(&body)).await.status,
        409
    );
    // The holder renews with the version it read.
    let renewal = envelope(
        "coordination.k8s.io/v1",
        "Lease",
        &lease(Some(rv.clone()), "sched_1", 2),
    );
    let r = raw(a, "PUT", &path, &headers, Some(&renewal)).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["spec"]["renewTime"], "1970-01-01T00:00:02.000000Z");
    // A write from the version before that renewal is a conflict, as on a real server.
    let stale = envelope(
        "coordination.k8s.io/v1",
        "Lease",
        &lease(Some(rv), "sched_2", 3),
    );
    let r = raw(a, "PUT", &path, &headers, Some(&stale)).await;
    assert_eq!(r.status, 409, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["reason"], "Conflict");
    let stored = store
        .get(
            "leases.coordination.k8s.io",
            Some("kube-system"),
            "kube-scheduler",
        )
        .unwrap();
    assert_eq!(stored["spec"]["holderIdentity"], "sched_1");
}

#[tokio::test]
async fn binding_event_and_delete_options_in_protobuf() {
    use k8s_pb::api::core::v1 as pb_core;
    let (store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    store.create_node(node("node-0")).unwrap();
    store.create_pod(pod("job-1")).unwrap();
    store.create_pod(pod("job-2")).unwrap();
    let headers = [("Content-Type", PROTOBUF), ("Accept", ACCEPT)];
    let binding = pb_core::Binding {
        metadata: Some(pb_meta::ObjectMeta {
            name: Some("job-1".into()),
            namespace: Some("default".into()),
            ..Default::default()
        }),
        target: Some(pb_core::ObjectReference {
            kind: Some("Node".into()),
            name: Some("node-0".into()),
            ..Default::default()
        }),
    };
    let r = raw(
        a,
        "POST",
        "/api/v1/namespaces/default/pods/job-1/binding",
        &headers,
        Some(&envelope("v1", "Binding", &binding)),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let job1 = store.get_pod("default", "job-1").unwrap();
    assert_eq!(job1.spec.unwrap().node_name.as_deref(), Some("node-0"));

    let event = k8s_pb::api::events::v1::Event {
        metadata: Some(pb_meta::ObjectMeta {
            name: Some("job-1.1".into()),
            namespace: Some("default".into()),
            ..Default::default()
        }),
        event_time: micro(0),
        reporting_controller: Some("default-scheduler".into()),
        reporting_instance: Some("default-scheduler-host".into()),
        action: Some("Binding".into()),
        reason: Some("Scheduled".into()),
        regarding: Some(pb_core::ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("default".into()),
            name: Some("job-1".into()),
            ..Default::default()
        }),
        note: Some("Successfully assigned default/job-1 to node-0".into()),
        r#type: Some("Normal".into()),
        ..Default::default()
    };
    let r = raw(
        a,
        "POST",
        "/apis/events.k8s.io/v1/namespaces/default/events",
        &headers,
        Some(&envelope("events.k8s.io/v1", "Event", &event)),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(
        r.json()["note"],
        "Successfully assigned default/job-1 to node-0"
    );

    // A preemption's DELETE carries DeleteOptions; a wrong uid precondition
    // is refused, the right one deletes.
    let uid = store
        .get_pod("default", "job-2")
        .unwrap()
        .metadata
        .uid
        .unwrap();
    let opts = |uid: &str| pb_meta::DeleteOptions {
        grace_period_seconds: Some(0),
        preconditions: Some(pb_meta::Preconditions {
            uid: Some(uid.into()),
            resource_version: None,
        }),
        ..Default::default()
    };
    let path = "/api/v1/namespaces/default/pods/job-2";
    let r = raw(
        a,
        "DELETE",
        path,
        &headers,
        Some(&envelope("v1", "DeleteOptions", &opts("nope"))),
    )
    .await;
    assert_eq!(r.status, 409, "{}", String::from_utf8_lossy(&r.body));
    let r = raw(
        a,
        "DELETE",
        path,
        &headers,
        Some(&envelope("v1", "DeleteOptions", &opts(&uid))),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

#[tokio::test]
async fn unreadable_protobuf_and_protobuf_only_accept_are_refused_clearly() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let headers = [("Content-Type", PROTOBUF), ("Accept", ACCEPT)];
    // A kind fakeapi does not read in protobuf: 415 naming it.
    let r = raw(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &headers,
        Some(&envelope("v1", "ConfigMap", &pb_meta::Status::default())),
    )
    .await;
    assert_eq!(r.status, 415);
    assert!(r.json()["message"].as_str().unwrap().contains("ConfigMap"));
    // Not protobuf at all: 400.
    let r = raw(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &headers,
        Some(b"{}"),
    )
    .await;
    assert_eq!(r.status, 400);
    // A client that reads only protobuf is told, not sent JSON.
    let r = raw(a, "GET", "/api/v1/nodes", &[("Accept", PROTOBUF)], None).await;
    assert_eq!(r.status, 406);
    assert_eq!(r.json()["reason"], "NotAcceptable");
}
