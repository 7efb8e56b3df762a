//! client-go's default wire format over real HTTP: protobuf bodies
//! (`k8s\0` + `runtime.Unknown`) for the writes the upstream kube-scheduler
//! makes with only `--kubeconfig` (its leader-election lease, bindings,
//! events, the DeleteOptions of a preemption) and the pods a scheduler
//! makes or fails itself (YuniKorn's), with client-go's Accept header;
//! answers in protobuf for that header (objects, lists, watch streams,
//! `Status` errors), read back here and by client-go itself
//! (`clients/informer` with `CONTENT=protobuf`).

mod common;

use common::*;
use fakeapi::StoreConfig;
use k8s_pb::api::coordination::v1 as pb_coord;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use prost::Message;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The answers below need the message tables, which a build without Go's
/// module cache does not have (it answers JSON): fail, and say how to get
/// them, rather than skip.
#[test]
fn this_build_answers_protobuf() {
    if let Some(why) = fakeapi::protobuf::unavailable() {
        panic!("fakeapi was built without protobuf answers: {why}");
    }
}
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
        .contains("content-type: application/vnd.kubernetes.protobuf"));
    let created = r.object();
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
    assert_eq!(
        r.object()["spec"]["renewTime"],
        "1970-01-01T00:00:02.000000Z"
    );
    // A write from the version before that renewal is a conflict, as on a real server.
    let stale = envelope(
        "coordination.k8s.io/v1",
        "Lease",
        &lease(Some(rv), "sched_2", 3),
    );
    let r = raw(a, "PUT", &path, &headers, Some(&stale)).await;
    assert_eq!(r.status, 409, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.object()["reason"], "Conflict");
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
        r.object()["note"],
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
        "/apis/apps/v1/namespaces/default/deployments",
        &headers,
        Some(&envelope(
            "apps/v1",
            "Deployment",
            &pb_meta::Status::default(),
        )),
    )
    .await;
    assert_eq!(r.status, 415);
    assert!(r.object()["message"]
        .as_str()
        .unwrap()
        .contains("Deployment"));
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
    // A client that reads only protobuf tables is told, not sent JSON.
    let r = raw(
        a,
        "GET",
        "/api/v1/nodes",
        &[(
            "Accept",
            "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
        )],
        None,
    )
    .await;
    assert_eq!(r.status, 406);
    assert_eq!(r.object()["reason"], "NotAcceptable");
}

/// A scheduler that makes pods of its own (YuniKorn's gang placeholders)
/// creates them, and writes pod statuses (YuniKorn fails the pods of an
/// application it rejects), as whole protobuf Pods.
#[tokio::test]
async fn pods_created_and_failed_in_protobuf() {
    use k8s_pb::api::core::v1 as pb;
    let (store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let headers = [("Content-Type", PROTOBUF), ("Accept", ACCEPT)];
    let cpu = k8s_pb::apimachinery::pkg::api::resource::Quantity {
        string: Some("1".into()),
    };
    let mut pod = pb::Pod {
        metadata: Some(pb_meta::ObjectMeta {
            name: Some("tg-app-1-gang-abc".into()),
            namespace: Some("default".into()),
            labels: [(
                "yunikorn.apache.org/app-id".to_string(),
                "app-1".to_string(),
            )]
            .into(),
            ..Default::default()
        }),
        spec: Some(pb::PodSpec {
            scheduler_name: Some("yunikorn".into()),
            restart_policy: Some("Never".into()),
            containers: vec![pb::Container {
                name: Some("pause".into()),
                image: Some("registry.k8s.io/pause:3.7".into()),
                resources: Some(pb::ResourceRequirements {
                    requests: [("cpu".to_string(), cpu.clone())].into(),
                    limits: [("cpu".to_string(), cpu)].into(),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    };
    let r = raw(
        a,
        "POST",
        "/api/v1/namespaces/default/pods",
        &headers,
        Some(&envelope("v1", "Pod", &pod)),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let created = store.get_pod("default", "tg-app-1-gang-abc").unwrap();
    let spec = created.spec.as_ref().unwrap();
    assert_eq!(spec.scheduler_name.as_deref(), Some("yunikorn"));
    let resources = spec.containers[0].resources.as_ref().unwrap();
    assert_eq!(resources.requests.as_ref().unwrap()["cpu"].0, "1");
    assert_eq!(resources.limits.as_ref().unwrap()["cpu"].0, "1");
    // Its status written whole, with the resourceVersion it was read at.
    let rv = created.metadata.resource_version.clone();
    pod.metadata.as_mut().unwrap().resource_version = rv;
    pod.status = Some(pb::PodStatus {
        phase: Some("Failed".into()),
        reason: Some("ApplicationRejected".into()),
        message: Some(" failed to place application app-1".into()),
        ..Default::default()
    });
    let r = raw(
        a,
        "PUT",
        "/api/v1/namespaces/default/pods/tg-app-1-gang-abc/status",
        &headers,
        Some(&envelope("v1", "Pod", &pod)),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let failed = store.get_pod("default", "tg-app-1-gang-abc").unwrap();
    let status = failed.status.unwrap();
    assert_eq!(status.phase.as_deref(), Some("Failed"));
    assert_eq!(status.reason.as_deref(), Some("ApplicationRejected"));
}

/// `kubectl create configmap` and `create secret` send protobuf; Go's
/// generated messages carry every string of ObjectMeta even when empty,
/// which the stored object leaves out, as Go's JSON does.
#[tokio::test]
async fn configmaps_and_secrets_in_protobuf_as_kubectl_creates_them() {
    use k8s_pb::api::core::v1 as pb_core;
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let headers = [("Content-Type", PROTOBUF), ("Accept", ACCEPT)];
    let meta = |name: &str| pb_meta::ObjectMeta {
        name: Some(name.into()),
        generate_name: Some(String::new()),
        namespace: Some(String::new()),
        self_link: Some(String::new()),
        uid: Some(String::new()),
        resource_version: Some(String::new()),
        generation: Some(0),
        ..Default::default()
    };
    let cm = pb_core::ConfigMap {
        metadata: Some(meta("plain")),
        data: [("a".to_string(), "1".to_string())].into(),
        ..Default::default()
    };
    let r = raw(
        a,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        &headers,
        Some(&envelope("v1", "ConfigMap", &cm)),
    )
    .await;
    assert_eq!(r.status, 201, "{:?}", r.object());
    let v = r.object();
    assert_eq!(v["data"]["a"], "1");
    let m = v["metadata"].as_object().unwrap();
    for absent in ["generateName", "selfLink", "generation"] {
        assert!(!m.contains_key(absent), "{absent} in {m:?}");
    }
    assert!(v.get("binaryData").is_none(), "{v}");
    assert_eq!(m["namespace"], "default");
    let secret = pb_core::Secret {
        metadata: Some(meta("token")),
        data: [("k".to_string(), b"secret".to_vec())].into(),
        r#type: Some("Opaque".into()),
        ..Default::default()
    };
    let r = raw(
        a,
        "POST",
        "/api/v1/namespaces/default/secrets",
        &headers,
        Some(&envelope("v1", "Secret", &secret)),
    )
    .await;
    assert_eq!(r.status, 201, "{:?}", r.object());
    assert_eq!(r.object()["data"]["k"], "c2VjcmV0");
    assert_eq!(r.object()["type"], "Opaque");
}

/// What JobSet's controller (controller-runtime, protobuf for built-in
/// kinds) creates for a JobSet: its headless Service and its Job, which
/// the API then defaults and validates as any Job (generated selector,
/// its labels on the template).
#[tokio::test]
async fn jobs_and_services_in_protobuf_as_jobsets_controller_creates_them() {
    use k8s_pb::api::batch::v1 as pb_batch;
    use k8s_pb::api::core::v1 as pb_core;
    let (store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let headers = [("Content-Type", PROTOBUF), ("Accept", ACCEPT)];
    let meta = |name: &str| pb_meta::ObjectMeta {
        name: Some(name.into()),
        namespace: Some("default".into()),
        labels: [(
            "jobset.sigs.k8s.io/jobset-name".to_string(),
            "js".to_string(),
        )]
        .into(),
        ..Default::default()
    };
    let svc = pb_core::Service {
        metadata: Some(meta("js")),
        spec: Some(pb_core::ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: [(
                "jobset.sigs.k8s.io/jobset-name".to_string(),
                "js".to_string(),
            )]
            .into(),
            publish_not_ready_addresses: Some(true),
            ..Default::default()
        }),
        status: None,
    };
    let r = raw(
        a,
        "POST",
        "/api/v1/namespaces/default/services",
        &headers,
        Some(&envelope("v1", "Service", &svc)),
    )
    .await;
    assert_eq!(r.status, 201, "{:?}", r.object());
    assert_eq!(r.object()["spec"]["clusterIP"], "None");
    let job = pb_batch::Job {
        metadata: Some(meta("js-main-0")),
        spec: Some(pb_batch::JobSpec {
            parallelism: Some(2),
            completions: Some(2),
            backoff_limit: Some(0),
            completion_mode: Some("Indexed".into()),
            template: Some(pb_core::PodTemplateSpec {
                metadata: Some(pb_meta::ObjectMeta {
                    labels: [(
                        "jobset.sigs.k8s.io/jobset-name".to_string(),
                        "js".to_string(),
                    )]
                    .into(),
                    ..Default::default()
                }),
                spec: Some(pb_core::PodSpec {
                    restart_policy: Some("Never".into()),
                    subdomain: Some("js".into()),
                    containers: vec![pb_core::Container {
                        name: Some("c".into()),
                        image: Some("busybox".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        status: None,
    };
    let r = raw(
        a,
        "POST",
        "/apis/batch/v1/namespaces/default/jobs",
        &headers,
        Some(&envelope("batch/v1", "Job", &job)),
    )
    .await;
    assert_eq!(r.status, 201, "{:?}", r.object());
    let stored = store
        .get("jobs.batch", Some("default"), "js-main-0")
        .unwrap();
    assert_eq!(stored["spec"]["completions"], 2);
    assert_eq!(stored["spec"]["completionMode"], "Indexed");
    assert_eq!(stored["spec"]["template"]["spec"]["subdomain"], "js");
    // The server's own defaults, as for a JSON Job.
    assert!(
        stored["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"].is_string(),
        "{stored}"
    );
}

/// A CustomResourceDefinition in protobuf, as client-go's apiextensions
/// clientset writes it by default (the e2e suite's CRD tests do): read into
/// the JSON a JSON client would have sent (Go's field names; what Go's JSON
/// leaves out left out; a pointer set to zero kept), established, its kind
/// served with the schema's default.
#[tokio::test]
async fn custom_resource_definitions_in_protobuf() {
    use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as pb;
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let raw_json = |v: serde_json::Value| pb::Json {
        raw: Some(serde_json::to_vec(&v).unwrap()),
    };
    let string = || pb::JsonSchemaProps {
        r#type: Some("string".into()),
        ..Default::default()
    };
    let spec = pb::JsonSchemaProps {
        r#type: Some("object".into()),
        properties: [
            (
                "size".to_string(),
                pb::JsonSchemaProps {
                    r#type: Some("integer".into()),
                    minimum: Some(0.0),
                    maximum: Some(10.0),
                    default: Some(raw_json(serde_json::json!(3))),
                    ..Default::default()
                },
            ),
            (
                "colour".to_string(),
                pb::JsonSchemaProps {
                    // A pointer set to zero: written, as Go writes it.
                    min_length: Some(0),
                    r#enum: vec![
                        raw_json(serde_json::json!("red")),
                        raw_json(serde_json::json!("blue")),
                    ],
                    ..string()
                },
            ),
            (
                "tags".to_string(),
                pb::JsonSchemaProps {
                    r#type: Some("array".into()),
                    items: Some(Box::new(pb::JsonSchemaPropsOrArray {
                        schema: Some(Box::new(string())),
                        j_son_schemas: vec![],
                    })),
                    x_kubernetes_list_type: Some("set".into()),
                    ..Default::default()
                },
            ),
        ]
        .into(),
        ..Default::default()
    };
    let root = pb::JsonSchemaProps {
        r#type: Some("object".into()),
        properties: [("spec".to_string(), spec)].into(),
        // A plain bool at its zero value: left out, as Go leaves it out.
        nullable: Some(false),
        ..Default::default()
    };
    let crd = pb::CustomResourceDefinition {
        metadata: Some(pb_meta::ObjectMeta {
            name: Some("widgets.example.com".into()),
            ..Default::default()
        }),
        spec: Some(pb::CustomResourceDefinitionSpec {
            group: Some("example.com".into()),
            names: Some(pb::CustomResourceDefinitionNames {
                plural: Some("widgets".into()),
                singular: Some("widget".into()),
                kind: Some("Widget".into()),
                list_kind: Some("WidgetList".into()),
                short_names: vec!["wd".into()],
                ..Default::default()
            }),
            scope: Some("Namespaced".into()),
            versions: vec![pb::CustomResourceDefinitionVersion {
                name: Some("v1".into()),
                served: Some(true),
                storage: Some(true),
                deprecated: Some(false),
                schema: Some(pb::CustomResourceValidation {
                    open_apiv3_schema: Some(root),
                }),
                subresources: Some(pb::CustomResourceSubresources {
                    status: Some(pb::CustomResourceSubresourceStatus {}),
                    scale: None,
                }),
                additional_printer_columns: vec![pb::CustomResourceColumnDefinition {
                    name: Some("Size".into()),
                    r#type: Some("integer".into()),
                    json_path: Some(".spec.size".into()),
                    priority: Some(0),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            conversion: Some(pb::CustomResourceConversion {
                strategy: Some("None".into()),
                webhook: None,
            }),
            preserve_unknown_fields: Some(false),
        }),
        status: None,
    };
    let headers = [("Content-Type", PROTOBUF), ("Accept", ACCEPT)];
    let r = raw(
        a,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &headers,
        Some(&envelope(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            &crd,
        )),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let got = r.object();
    let version = &got["spec"]["versions"][0];
    assert_eq!(
        version["schema"]["openAPIV3Schema"],
        serde_json::json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "size": {"type": "integer", "minimum": 0.0, "maximum": 10.0, "default": 3},
                "colour": {"type": "string", "minLength": 0, "enum": ["red", "blue"]},
                "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}
            }}}
        })
    );
    assert_eq!(version["served"], true);
    assert_eq!(version["storage"], true);
    assert!(version.get("deprecated").is_none(), "{version}");
    assert_eq!(version["subresources"], serde_json::json!({"status": {}}));
    assert_eq!(
        version["additionalPrinterColumns"],
        serde_json::json!([{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}])
    );
    assert_eq!(
        got["spec"]["names"]["shortNames"],
        serde_json::json!(["wd"])
    );
    assert_eq!(
        got["spec"]["conversion"],
        serde_json::json!({"strategy": "None"})
    );
    assert!(got["spec"].get("preserveUnknownFields").is_none());
    // Established at once; its kind served with the default.
    let r = raw(
        a,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        &[("Content-Type", "application/json")],
        Some(br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"colour":"red"}}"#),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.object()["spec"]["size"], 3);
    // A custom object has no protobuf form: client-go's Accept gets JSON,
    // protobuf alone a 406, as from kube-apiserver; its metadata comes in
    // protobuf, and so does an error's Status.
    let w = "/apis/example.com/v1/namespaces/default/widgets";
    let r = raw(a, "GET", &format!("{w}/w"), &[("Accept", ACCEPT)], None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["spec"]["colour"], "red");
    let r = raw(a, "GET", &format!("{w}/w"), &[("Accept", PROTOBUF)], None).await;
    assert_eq!(r.status, 406);
    let r = raw(a, "GET", &format!("{w}/nope"), &[("Accept", ACCEPT)], None).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.object()["reason"], "NotFound");
    assert!(r.body.starts_with(b"k8s\0"));
    let meta = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    let r = raw(a, "GET", w, &[("Accept", meta)], None).await;
    assert_eq!(r.status, 200);
    let l = r.object();
    assert_eq!(l["kind"], "PartialObjectMetadataList");
    assert_eq!(l["items"][0]["metadata"]["name"], "w");
}

/// What kube-scheduler reads, in protobuf: a get, a list and a watch of
/// pods and nodes, each read back into the JSON a JSON client gets; errors
/// as protobuf `Status`; custom resources and tables stay JSON.
#[tokio::test]
async fn answers_in_protobuf_read_back_as_the_json_answers() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let a = server.addr();
    let json = [("Accept", "application/json")];
    let proto = [("Accept", ACCEPT)];
    let node = serde_json::json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "labels": {"zone": "a"}},
        "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True",
                "lastHeartbeatTime": "2024-01-01T00:00:00Z"}]}});
    let body = serde_json::to_vec(&node).unwrap();
    let r = raw(
        a,
        "POST",
        "/api/v1/nodes",
        &[("Content-Type", "application/json"), ("Accept", ACCEPT)],
        Some(&body),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert!(r.body.starts_with(b"k8s\0"));
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": {"app": "x"},
            "annotations": {"a": "b"}},
        "spec": {"schedulerName": "default-scheduler",
            "containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}},
                "ports": [{"containerPort": 80}],
                "livenessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 3},
                "env": [{"name": "E", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}]}],
            "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Gi"}}],
            "tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 30}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}}});
    let body = serde_json::to_vec(&pod).unwrap();
    let r = raw(
        a,
        "POST",
        "/api/v1/namespaces/default/pods",
        &[("Content-Type", "application/json"), ("Accept", ACCEPT)],
        Some(&body),
    )
    .await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    for path in [
        "/api/v1/namespaces/default/pods/p",
        "/api/v1/nodes/n1",
        "/api/v1/pods",
        "/api/v1/nodes",
    ] {
        let j = raw(a, "GET", path, &json, None).await;
        let p = raw(a, "GET", path, &proto, None).await;
        assert_eq!(p.status, 200);
        assert!(
            p.headers
                .to_ascii_lowercase()
                .contains("content-type: application/vnd.kubernetes.protobuf"),
            "{path}"
        );
        assert!(p.body.len() < j.body.len(), "{path}: protobuf is smaller");
        // A list's items have no kind in protobuf (the list's message
        // says it), as in kube-apiserver's JSON lists.
        let mut j = j.json();
        if let Some(items) = j.get_mut("items").and_then(|i| i.as_array_mut()) {
            for i in items {
                let m = i.as_object_mut().unwrap();
                m.remove("kind");
                m.remove("apiVersion");
            }
        }
        assert_same(&j, &p.object(), path);
        // The objects carry their managers' managedFields (fieldsV1 is raw
        // JSON in protobuf): compared above, not absent on both sides.
        let managed = j
            .pointer("/metadata/managedFields")
            .or_else(|| j.pointer("/items/0/metadata/managedFields"))
            .and_then(|m| m.as_array());
        assert!(
            managed.is_some_and(|m| m.iter().any(|e| e["fieldsV1"].is_object())),
            "{path}: managedFields with fieldsV1: {j}"
        );
    }
    // A watch from the list's version: a bookmark-free stream of frames.
    let list = raw(a, "GET", "/api/v1/pods", &json, None).await.json();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut w = send_raw(
        a,
        "GET",
        &format!("/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=1"),
        &proto,
        None,
    )
    .await;
    let mut wj = send_raw(
        a,
        "GET",
        &format!("/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=1"),
        &json,
        None,
    )
    .await;
    let patch = br#"{"metadata":{"labels":{"new":"1"}}}"#;
    let r = raw(
        a,
        "PATCH",
        "/api/v1/namespaces/default/pods/p",
        &[
            ("Content-Type", "application/merge-patch+json"),
            ("Accept", ACCEPT),
        ],
        Some(patch),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.object()["metadata"]["labels"]["new"], "1");
    let r = raw(
        a,
        "DELETE",
        "/api/v1/namespaces/default/pods/p",
        &proto,
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    let pw = read_raw(std::mem::replace(
        &mut w,
        send_raw(a, "GET", "/version", &[], None).await,
    ))
    .await;
    let jw = read_raw(std::mem::replace(
        &mut wj,
        send_raw(a, "GET", "/version", &[], None).await,
    ))
    .await;
    assert!(pw
        .headers
        .to_ascii_lowercase()
        .contains("application/vnd.kubernetes.protobuf;stream=watch"));
    let (events, rest) = fakeapi::protobuf::decode_watch(&pw.body).unwrap();
    assert!(rest.is_empty());
    let jevents = jw.lines();
    assert_eq!(events.len(), jevents.len());
    assert!(events.len() >= 2, "{events:?}");
    for (p, j) in events.iter().zip(&jevents) {
        assert_eq!(p["type"], j["type"]);
        assert_same(&j["object"], &p["object"], "watch event");
    }
    // An error is a protobuf Status.
    let r = raw(
        a,
        "GET",
        "/api/v1/namespaces/default/pods/nope",
        &proto,
        None,
    )
    .await;
    assert_eq!(r.status, 404);
    assert!(r.body.starts_with(b"k8s\0"));
    let st = r.object();
    assert_eq!(
        (
            st["kind"].as_str(),
            st["reason"].as_str(),
            st["code"].as_i64()
        ),
        (Some("Status"), Some("NotFound"), Some(404))
    );
    // Metadata in protobuf, as client-go's metadata client asks.
    let meta = [("Accept", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json")];
    let r = raw(a, "GET", "/api/v1/nodes", &meta, None).await;
    let l = r.object();
    assert_eq!(l["kind"], "PartialObjectMetadataList");
    assert_eq!(l["items"][0]["metadata"]["labels"]["zone"], "a");
    assert!(l["items"][0].get("status").is_none());
    // A metadata watch in protobuf, bookmarks included.
    let rv = l["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let watch_meta = [("Accept", "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json")];
    let w = send_raw(
        a,
        "GET",
        &format!(
            "/api/v1/nodes?watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=1"
        ),
        &watch_meta,
        None,
    )
    .await;
    let mut n2 = node.clone();
    n2["metadata"]["name"] = serde_json::json!("n2");
    let body = serde_json::to_vec(&n2).unwrap();
    let r = raw(
        a,
        "POST",
        "/api/v1/nodes",
        &[("Content-Type", "application/json")],
        Some(&body),
    )
    .await;
    assert_eq!(r.status, 201);
    let (events, _) = fakeapi::protobuf::decode_watch(&read_raw(w).await.body).unwrap();
    let added = events
        .iter()
        .find(|e| e["type"] == "ADDED")
        .expect("an ADDED event");
    assert_eq!(added["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(added["object"]["metadata"]["name"], "n2");
    assert!(added["object"].get("status").is_none());
}

/// Both answers hold the same values: what protobuf writes and JSON leaves
/// out are Go's zero values (empty strings, 0, false, empty objects).
fn assert_same(json: &serde_json::Value, proto: &serde_json::Value, what: &str) {
    fn strip(v: &serde_json::Value) -> Option<serde_json::Value> {
        use serde_json::Value;
        match v {
            Value::Null => None,
            Value::String(s) if s.is_empty() => None,
            Value::Bool(false) => None,
            Value::Number(n) if n.as_f64() == Some(0.0) => None,
            Value::Object(m) => {
                let m: serde_json::Map<_, _> = m
                    .iter()
                    .filter_map(|(k, v)| strip(v).map(|v| (k.clone(), v)))
                    .collect();
                (!m.is_empty()).then_some(Value::Object(m))
            }
            Value::Array(a) => Some(Value::Array(
                a.iter().map(|x| strip(x).unwrap_or(Value::Null)).collect(),
            )),
            other => Some(other.clone()),
        }
    }
    assert_eq!(strip(json), strip(proto), "{what}");
}

/// client-go itself with its defaults (protobuf for built-in kinds): an
/// informer's streaming list and watch, a reflector's list and watch from
/// an old version, creates, updates and deletes, all read and written in
/// protobuf.
#[tokio::test]
async fn client_go_informers_in_protobuf() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    // Built as the differential harness builds it (schedulers/build-go.sh,
    // into target/go).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let go_dir = root.join("target/go");
    let st = std::process::Command::new("bash")
        .arg(root.join("schedulers/build-go.sh"))
        .arg(&go_dir)
        .arg("apidiff-informer")
        .status()
        .expect("running schedulers/build-go.sh");
    assert!(st.success(), "building apidiff-informer failed: see above");
    let go = go_dir.join("apidiff-informer");
    let dir = std::env::temp_dir().join(format!("fakeapi-pb-informer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, fakeapi::kubeconfig_yaml(server.addr())).unwrap();
    let out = tokio::process::Command::new(&go)
        .env("KUBECONFIG", &kubeconfig)
        .env("NS", "default")
        .env("CONTENT", "protobuf")
        .output()
        .await
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "apidiff-informer in protobuf failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
