//! Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`),
//! read into the JSON the store keeps.
//!
//! client-go writes protobuf by default (the upstream kube-scheduler with
//! only `--kubeconfig` does): a body is the magic `k8s\0` followed by a
//! `runtime.Unknown` whose `typeMeta` names the kind and whose `raw` is the
//! object's message. The messages are decoded with `k8s-pb`'s generated
//! types and moved field by field into `k8s-openapi`'s, whose serde gives
//! the JSON a JSON client would have sent (RFC 3339 times, `MicroTime` in
//! microseconds, `FieldsV1` as its JSON); a CustomResourceDefinition
//! (`crd.rs`) straight into that JSON. Only the kinds clients write are
//! read; any other kind is a 415 naming it, never a guess.
//!
//! Responses are written in protobuf when a client asks for it first
//! (`answer.rs`), by one encoder for every built-in kind driven by
//! Kubernetes' message descriptors (`schema.rs`, generated at build time
//! from the `.proto` files of the Go modules; `write.rs`, and its inverse
//! `read.rs`).

use crate::error::ApiError;
use k8s_openapi::api::{batch, coordination, core, events, policy};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::jiff::Timestamp;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb_meta;
use prost::Message;
use serde_json::Value;
use std::collections::BTreeMap;

mod answer;
mod crd;

mod job;
mod pod;
mod read;
mod schema;
mod service;
mod write;

pub use answer::{decode_any, decode_watch, encode, has_message, DecodeError, WATCH_MEDIA_TYPE};
pub(crate) use answer::{
    encode_json, encode_list, encode_partial, watch_frame, watch_frame_json, Encoded,
};

/// Why this build of fakeapi answers no protobuf (its build found no
/// `.proto` files: Go's module cache did not hold the modules, see
/// `fakeapi/build.rs`), or `None` when it does. Without them every client
/// is answered in JSON, which each accepts after protobuf.
pub fn unavailable() -> Option<&'static str> {
    schema::unavailable()
}

/// The four bytes before every protobuf-encoded Kubernetes object.
pub const MAGIC: &[u8] = b"k8s\0";

/// The media type of Kubernetes protobuf.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The kinds a protobuf body may carry (`apiVersion`, `kind`); any
/// `apiVersion` for `DeleteOptions` (client-go encodes it in the group
/// version of the resource deleted).
pub const KINDS: &[(&str, &str)] = &[
    ("v1", "Binding"),
    ("v1", "Pod"),
    ("v1", "Event"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Service"),
    ("batch/v1", "Job"),
    ("events.k8s.io/v1", "Event"),
    ("coordination.k8s.io/v1", "Lease"),
    ("policy/v1", "Eviction"),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ("*", "DeleteOptions"),
];

/// Decodes a protobuf request body into the object's JSON.
///
/// ```
/// use prost::Message;
/// let lease = k8s_pb::api::coordination::v1::Lease {
///     spec: Some(k8s_pb::api::coordination::v1::LeaseSpec {
///         holder_identity: Some("me".into()),
///         ..Default::default()
///     }),
///     ..Default::default()
/// };
/// let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
///     type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
///         api_version: Some("coordination.k8s.io/v1".into()),
///         kind: Some("Lease".into()),
///     }),
///     raw: Some(lease.encode_to_vec()),
///     ..Default::default()
/// };
/// let mut body = fakeapi::protobuf::MAGIC.to_vec();
/// body.extend(unknown.encode_to_vec());
/// let v = fakeapi::protobuf::decode(&body).unwrap();
/// assert_eq!(v["kind"], "Lease");
/// assert_eq!(v["spec"]["holderIdentity"], "me");
/// ```
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let rest = body.strip_prefix(MAGIC).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "the {MEDIA_TYPE} body does not start with the k8s\\0 magic"
        ))
    })?;
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown::decode(rest)
        .map_err(|e| ApiError::BadRequest(format!("the protobuf envelope is not valid: {e}")))?;
    if let Some(enc) = unknown
        .content_encoding
        .as_deref()
        .filter(|e| !e.is_empty())
    {
        return Err(ApiError::UnsupportedMediaType(format!(
            "protobuf bodies with contentEncoding {enc:?} are not supported"
        )));
    }
    let tm = unknown.type_meta.unwrap_or_default();
    let api_version = tm.api_version.unwrap_or_default();
    let kind = tm.kind.unwrap_or_default();
    let raw = unknown.raw.unwrap_or_default();
    let bad = |e: prost::DecodeError| {
        ApiError::BadRequest(format!(
            "the protobuf body is not a valid {api_version} {kind}: {e}"
        ))
    };
    let value = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Binding") => json(
            k8s_pb::api::core::v1::Binding::decode(&*raw)
                .map_err(bad)?
                .conv(),
        ),
        ("v1", "Pod") => json(pod::To::<core::v1::Pod>::to(
            k8s_pb::api::core::v1::Pod::decode(&*raw).map_err(bad)?,
        )),
        ("v1", "Event") => json(
            k8s_pb::api::core::v1::Event::decode(&*raw)
                .map_err(bad)?
                .conv(),
        ),
        ("v1", "ConfigMap") => json(
            k8s_pb::api::core::v1::ConfigMap::decode(&*raw)
                .map_err(bad)?
                .conv(),
        ),
        ("v1", "Secret") => json(
            k8s_pb::api::core::v1::Secret::decode(&*raw)
                .map_err(bad)?
                .conv(),
        ),
        ("v1", "Service") => json(pod::To::<core::v1::Service>::to(
            k8s_pb::api::core::v1::Service::decode(&*raw).map_err(bad)?,
        )),
        ("batch/v1", "Job") => json(pod::To::<batch::v1::Job>::to(
            k8s_pb::api::batch::v1::Job::decode(&*raw).map_err(bad)?,
        )),
        ("events.k8s.io/v1", "Event") => json(
            k8s_pb::api::events::v1::Event::decode(&*raw)
                .map_err(bad)?
                .conv(),
        ),
        ("coordination.k8s.io/v1", "Lease") => json(
            k8s_pb::api::coordination::v1::Lease::decode(&*raw)
                .map_err(bad)?
                .conv(),
        ),
        ("policy/v1", "Eviction") => json(
            k8s_pb::api::policy::v1::Eviction::decode(&*raw)
                .map_err(bad)?
                .conv(),
        ),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => crd::definition(
            k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition::decode(&*raw)
                .map_err(bad)?,
        ),
        (_, "DeleteOptions") => {
            let mut v = json(pb_meta::DeleteOptions::decode(&*raw).map_err(bad)?.conv());
            v["apiVersion"] = Value::String(api_version.clone());
            v["kind"] = Value::String(kind.clone());
            v
        }
        _ => {
            let known: Vec<String> = KINDS.iter().map(|(g, k)| format!("{g} {k}")).collect();
            return Err(ApiError::UnsupportedMediaType(format!(
                "fakeapi reads protobuf bodies of {} only, not {api_version:?} {kind:?}: send it as application/json",
                known.join(", ")
            )));
        }
    };
    Ok(value)
}

fn json(v: impl serde::Serialize) -> Value {
    serde_json::to_value(v).expect("k8s-openapi types serialize")
}

/// A k8s-pb message moved into its k8s-openapi twin (a local trait: both
/// types are foreign).
trait Conv {
    type Out;
    fn conv(self) -> Self::Out;
}

impl<T: Conv> Conv for Option<T> {
    type Out = Option<T::Out>;
    fn conv(self) -> Self::Out {
        self.map(Conv::conv)
    }
}

/// Repeated fields: empty is absent, as in Kubernetes' JSON (`omitempty`).
fn list<T: Conv>(v: Vec<T>) -> Option<Vec<T::Out>> {
    (!v.is_empty()).then(|| v.into_iter().map(Conv::conv).collect())
}

fn strings(v: Vec<String>) -> Option<Vec<String>> {
    (!v.is_empty()).then_some(v)
}

fn map(m: BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    (!m.is_empty()).then_some(m)
}

fn timestamp(seconds: Option<i64>, nanos: Option<i32>) -> Timestamp {
    // Out of jiff's range (years beyond ±9999) cannot be RFC 3339 either.
    Timestamp::new(seconds.unwrap_or(0), nanos.unwrap_or(0)).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// A `Time` as Go writes it: its zero value (`null` in JSON) is an empty
/// message, which is no time at all, not 1970 (`metav1.Time`'s
/// `Unmarshal` of no bytes).
fn time(t: Option<pb_meta::Time>) -> Option<meta::Time> {
    t.filter(|t| t.seconds.is_some() || t.nanos.is_some())
        .map(Conv::conv)
}

/// As [`time`], for a `MicroTime`.
fn micro_time(t: Option<pb_meta::MicroTime>) -> Option<meta::MicroTime> {
    t.filter(|t| t.seconds.is_some() || t.nanos.is_some())
        .map(Conv::conv)
}

impl Conv for pb_meta::Time {
    type Out = meta::Time;
    fn conv(self) -> meta::Time {
        meta::Time(timestamp(self.seconds, self.nanos))
    }
}

impl Conv for pb_meta::MicroTime {
    type Out = meta::MicroTime;
    fn conv(self) -> meta::MicroTime {
        meta::MicroTime(timestamp(self.seconds, self.nanos))
    }
}

impl Conv for pb_meta::OwnerReference {
    type Out = meta::OwnerReference;
    fn conv(self) -> meta::OwnerReference {
        meta::OwnerReference {
            api_version: self.api_version.unwrap_or_default(),
            kind: self.kind.unwrap_or_default(),
            name: self.name.unwrap_or_default(),
            uid: self.uid.unwrap_or_default(),
            controller: self.controller,
            block_owner_deletion: self.block_owner_deletion,
        }
    }
}

impl Conv for pb_meta::ManagedFieldsEntry {
    type Out = meta::ManagedFieldsEntry;
    fn conv(self) -> meta::ManagedFieldsEntry {
        meta::ManagedFieldsEntry {
            api_version: self.api_version,
            fields_type: self.fields_type,
            // FieldsV1 carries its JSON form as bytes.
            fields_v1: self
                .fields_v1
                .and_then(|f| f.raw)
                .and_then(|raw| serde_json::from_slice(&raw).ok())
                .map(meta::FieldsV1),
            manager: self.manager,
            operation: self.operation,
            subresource: self.subresource,
            time: self.time.conv(),
        }
    }
}

/// A string field of Go's generated protobuf: written even when empty,
/// where Go's JSON (`omitempty`) leaves it out.
fn text(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

impl Conv for pb_meta::ObjectMeta {
    type Out = meta::ObjectMeta;
    fn conv(self) -> meta::ObjectMeta {
        meta::ObjectMeta {
            annotations: map(self.annotations),
            creation_timestamp: time(self.creation_timestamp),
            deletion_grace_period_seconds: self.deletion_grace_period_seconds,
            deletion_timestamp: time(self.deletion_timestamp),
            finalizers: strings(self.finalizers),
            generate_name: text(self.generate_name),
            generation: self.generation.filter(|g| *g != 0),
            labels: map(self.labels),
            managed_fields: list(self.managed_fields),
            name: text(self.name),
            namespace: text(self.namespace),
            owner_references: list(self.owner_references),
            resource_version: text(self.resource_version),
            self_link: text(self.self_link),
            uid: text(self.uid),
        }
    }
}

impl Conv for pb_meta::Preconditions {
    type Out = meta::Preconditions;
    fn conv(self) -> meta::Preconditions {
        meta::Preconditions {
            resource_version: self.resource_version,
            uid: self.uid,
        }
    }
}

impl Conv for pb_meta::DeleteOptions {
    type Out = meta::DeleteOptions;
    fn conv(self) -> meta::DeleteOptions {
        meta::DeleteOptions {
            api_version: None,
            dry_run: strings(self.dry_run),
            grace_period_seconds: self.grace_period_seconds,
            ignore_store_read_error_with_cluster_breaking_potential: self
                .ignore_store_read_error_with_cluster_breaking_potential,
            kind: None,
            orphan_dependents: self.orphan_dependents,
            preconditions: self.preconditions.conv(),
            propagation_policy: self.propagation_policy,
        }
    }
}

impl Conv for k8s_pb::api::core::v1::ObjectReference {
    type Out = core::v1::ObjectReference;
    fn conv(self) -> core::v1::ObjectReference {
        core::v1::ObjectReference {
            api_version: self.api_version,
            field_path: self.field_path,
            kind: self.kind,
            name: self.name,
            namespace: self.namespace,
            resource_version: self.resource_version,
            uid: self.uid,
        }
    }
}

impl Conv for k8s_pb::api::core::v1::Binding {
    type Out = core::v1::Binding;
    fn conv(self) -> core::v1::Binding {
        core::v1::Binding {
            metadata: self.metadata.conv().unwrap_or_default(),
            target: self.target.conv().unwrap_or_default(),
        }
    }
}

impl Conv for k8s_pb::api::core::v1::EventSource {
    type Out = core::v1::EventSource;
    fn conv(self) -> core::v1::EventSource {
        core::v1::EventSource {
            component: self.component,
            host: self.host,
        }
    }
}

impl Conv for k8s_pb::api::core::v1::EventSeries {
    type Out = core::v1::EventSeries;
    fn conv(self) -> core::v1::EventSeries {
        core::v1::EventSeries {
            count: self.count,
            last_observed_time: micro_time(self.last_observed_time),
        }
    }
}

impl Conv for k8s_pb::api::core::v1::Event {
    type Out = core::v1::Event;
    fn conv(self) -> core::v1::Event {
        core::v1::Event {
            action: self.action,
            count: self.count,
            event_time: micro_time(self.event_time),
            first_timestamp: time(self.first_timestamp),
            involved_object: self.involved_object.conv().unwrap_or_default(),
            last_timestamp: time(self.last_timestamp),
            message: self.message,
            metadata: self.metadata.conv().unwrap_or_default(),
            reason: self.reason,
            related: self.related.conv(),
            reporting_component: self.reporting_component,
            reporting_instance: self.reporting_instance,
            series: self.series.conv(),
            source: self.source.conv(),
            type_: self.r#type,
        }
    }
}

impl Conv for k8s_pb::api::events::v1::EventSeries {
    type Out = events::v1::EventSeries;
    fn conv(self) -> events::v1::EventSeries {
        events::v1::EventSeries {
            count: self.count.unwrap_or_default(),
            last_observed_time: self
                .last_observed_time
                .conv()
                .unwrap_or(meta::MicroTime(Timestamp::UNIX_EPOCH)),
        }
    }
}

impl Conv for k8s_pb::api::events::v1::Event {
    type Out = events::v1::Event;
    fn conv(self) -> events::v1::Event {
        events::v1::Event {
            action: self.action,
            deprecated_count: self.deprecated_count,
            deprecated_first_timestamp: time(self.deprecated_first_timestamp),
            deprecated_last_timestamp: time(self.deprecated_last_timestamp),
            deprecated_source: self.deprecated_source.conv(),
            event_time: micro_time(self.event_time),
            metadata: self.metadata.conv().unwrap_or_default(),
            note: self.note,
            reason: self.reason,
            regarding: self.regarding.conv(),
            related: self.related.conv(),
            reporting_controller: self.reporting_controller,
            reporting_instance: self.reporting_instance,
            series: self.series.conv(),
            type_: self.r#type,
        }
    }
}

impl Conv for k8s_pb::api::coordination::v1::LeaseSpec {
    type Out = coordination::v1::LeaseSpec;
    fn conv(self) -> coordination::v1::LeaseSpec {
        coordination::v1::LeaseSpec {
            acquire_time: micro_time(self.acquire_time),
            holder_identity: self.holder_identity,
            lease_duration_seconds: self.lease_duration_seconds,
            lease_transitions: self.lease_transitions,
            preferred_holder: self.preferred_holder,
            renew_time: micro_time(self.renew_time),
            strategy: self.strategy,
        }
    }
}

impl Conv for k8s_pb::api::coordination::v1::Lease {
    type Out = coordination::v1::Lease;
    fn conv(self) -> coordination::v1::Lease {
        coordination::v1::Lease {
            metadata: self.metadata.conv().unwrap_or_default(),
            spec: self.spec.conv(),
        }
    }
}

/// A protobuf map of any values, absent when empty (as Go's JSON leaves it out).
fn map_of<V, W>(m: BTreeMap<String, V>, f: impl Fn(V) -> W) -> Option<BTreeMap<String, W>> {
    (!m.is_empty()).then(|| m.into_iter().map(|(k, v)| (k, f(v))).collect())
}

// kubectl's `create configmap` and `create secret` send these.
impl Conv for k8s_pb::api::core::v1::ConfigMap {
    type Out = core::v1::ConfigMap;
    fn conv(self) -> core::v1::ConfigMap {
        core::v1::ConfigMap {
            metadata: self.metadata.conv().unwrap_or_default(),
            immutable: self.immutable,
            data: map(self.data),
            binary_data: map_of(self.binary_data, k8s_openapi::ByteString),
        }
    }
}

impl Conv for k8s_pb::api::core::v1::Secret {
    type Out = core::v1::Secret;
    fn conv(self) -> core::v1::Secret {
        core::v1::Secret {
            metadata: self.metadata.conv().unwrap_or_default(),
            immutable: self.immutable,
            data: map_of(self.data, k8s_openapi::ByteString),
            string_data: map(self.string_data),
            type_: self.r#type,
        }
    }
}

impl Conv for k8s_pb::api::policy::v1::Eviction {
    type Out = policy::v1::Eviction;
    fn conv(self) -> policy::v1::Eviction {
        policy::v1::Eviction {
            delete_options: self.delete_options.conv(),
            metadata: self.metadata.conv().unwrap_or_default(),
        }
    }
}

/// Whether a client that sent `accept` can read a JSON answer (absent,
/// `*/*`, `application/*`, or any `application/json…`).
pub fn accepts_json(accept: &str) -> bool {
    accept.trim().is_empty()
        || accept.split(',').any(|part| {
            let media = part.split(';').next().unwrap_or("").trim();
            matches!(media, "*/*" | "application/*" | "application/json")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let mut body = MAGIC.to_vec();
        body.extend(
            Unknown {
                type_meta: Some(TypeMeta {
                    api_version: Some(api_version.into()),
                    kind: Some(kind.into()),
                }),
                raw: Some(raw),
                content_encoding: Some(String::new()),
                content_type: Some(String::new()),
            }
            .encode_to_vec(),
        );
        body
    }

    /// Go writes a zero `metav1.Time` as an empty message: no time, not
    /// 1970 (a client's condition without a transition time, as the e2e
    /// suite writes one through a CRD's status).
    #[test]
    fn an_empty_time_is_no_time() {
        use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as pb;
        let condition = |t: Option<pb_meta::Time>| pb::CustomResourceDefinitionCondition {
            message: Some("updated".into()),
            last_transition_time: t,
            ..Default::default()
        };
        let crd = pb::CustomResourceDefinition {
            metadata: Some(pb_meta::ObjectMeta {
                name: Some("a.b.c".into()),
                ..Default::default()
            }),
            status: Some(pb::CustomResourceDefinitionStatus {
                conditions: vec![
                    condition(Some(pb_meta::Time::default())),
                    condition(Some(pb_meta::Time {
                        seconds: Some(1_700_000_000),
                        nanos: Some(0),
                    })),
                ],
                ..Default::default()
            }),
            ..Default::default()
        };
        let v = decode(&envelope(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            crd.encode_to_vec(),
        ))
        .unwrap();
        let cs = &v["status"]["conditions"];
        assert!(cs[0].get("lastTransitionTime").is_none(), "{cs}");
        assert_eq!(cs[1]["lastTransitionTime"], "2023-11-14T22:13:20Z");
    }

    #[test]
    fn binding_reads_as_the_json_a_json_client_sends() {
        let b = k8s_pb::api::core::v1::Binding {
            metadata: Some(pb_meta::ObjectMeta {
                name: Some("job-1".into()),
                namespace: Some("default".into()),
                uid: Some("u-1".into()),
                ..Default::default()
            }),
            target: Some(k8s_pb::api::core::v1::ObjectReference {
                kind: Some("Node".into()),
                name: Some("node-0".into()),
                ..Default::default()
            }),
        };
        let v = decode(&envelope("v1", "Binding", b.encode_to_vec())).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": "job-1", "namespace": "default", "uid": "u-1"},
                "target": {"kind": "Node", "name": "node-0"}
            })
        );
    }

    /// A pod as client-go sends it (YuniKorn's gang placeholder, a pod
    /// whose status a scheduler fails): the JSON a JSON client would have
    /// sent, embedded protobuf messages inlined, empty lists absent.
    #[test]
    fn pods_read_as_the_json_a_json_client_sends() {
        use k8s_pb::api::core::v1 as pb;
        use k8s_pb::apimachinery::pkg::api::resource::Quantity;
        use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
        let q = |s: &str| Quantity {
            string: Some(s.into()),
        };
        let term = pb::PodAffinityTerm {
            label_selector: Some(pb_meta::LabelSelector {
                match_labels: [("gang".to_string(), "g1".to_string())].into(),
                ..Default::default()
            }),
            topology_key: Some("kubernetes.io/hostname".into()),
            ..Default::default()
        };
        let pod = pb::Pod {
            metadata: Some(pb_meta::ObjectMeta {
                name: Some("tg-app-gang-x".into()),
                namespace: Some("default".into()),
                labels: [("queue".to_string(), "root.a".to_string())].into(),
                owner_references: vec![pb_meta::OwnerReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some("app-0".into()),
                    uid: Some("u0".into()),
                    controller: Some(false),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            spec: Some(pb::PodSpec {
                containers: vec![pb::Container {
                    name: Some("pause".into()),
                    image: Some("registry.k8s.io/pause:3.7".into()),
                    resources: Some(pb::ResourceRequirements {
                        requests: [
                            ("cpu".to_string(), q("1")),
                            ("memory".to_string(), q("2Gi")),
                        ]
                        .into(),
                        ..Default::default()
                    }),
                    env: vec![pb::EnvVar {
                        name: Some("A".into()),
                        value_from: Some(pb::EnvVarSource {
                            config_map_key_ref: Some(pb::ConfigMapKeySelector {
                                local_object_reference: Some(pb::LocalObjectReference {
                                    name: Some("cm".into()),
                                }),
                                key: Some("k".into()),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    liveness_probe: Some(pb::Probe {
                        handler: Some(pb::ProbeHandler {
                            http_get: Some(pb::HttpGetAction {
                                path: Some("/healthz".into()),
                                port: Some(IntOrString {
                                    r#type: Some(1),
                                    str_val: Some("http".into()),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                        period_seconds: Some(10),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                volumes: vec![pb::Volume {
                    name: Some("v".into()),
                    volume_source: Some(pb::VolumeSource {
                        empty_dir: Some(pb::EmptyDirVolumeSource::default()),
                        ..Default::default()
                    }),
                }],
                scheduler_name: Some("yunikorn".into()),
                restart_policy: Some("Never".into()),
                termination_grace_period_seconds: Some(0),
                node_selector: [("zone".to_string(), "a".to_string())].into(),
                security_context: Some(pb::PodSecurityContext {
                    run_as_user: Some(1000),
                    ..Default::default()
                }),
                affinity: Some(pb::Affinity {
                    pod_anti_affinity: Some(pb::PodAntiAffinity {
                        required_during_scheduling_ignored_during_execution: vec![term],
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                tolerations: vec![pb::Toleration {
                    key: Some("k".into()),
                    operator: Some("Exists".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(pb::PodStatus {
                phase: Some("Failed".into()),
                reason: Some("ApplicationRejected".into()),
                conditions: vec![pb::PodCondition {
                    r#type: Some("PodScheduled".into()),
                    status: Some("False".into()),
                    last_transition_time: Some(pb_meta::Time {
                        seconds: Some(60),
                        nanos: Some(0),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        };
        let v = decode(&envelope("v1", "Pod", pod.encode_to_vec())).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {
                    "name": "tg-app-gang-x", "namespace": "default",
                    "labels": {"queue": "root.a"},
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "app-0",
                        "uid": "u0", "controller": false}],
                },
                "spec": {
                    "containers": [{
                        "name": "pause", "image": "registry.k8s.io/pause:3.7",
                        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
                        "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}}],
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10},
                    }],
                    "volumes": [{"name": "v", "emptyDir": {}}],
                    "schedulerName": "yunikorn", "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 0,
                    "nodeSelector": {"zone": "a"},
                    "securityContext": {"runAsUser": 1000},
                    "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                        "labelSelector": {"matchLabels": {"gang": "g1"}},
                        "topologyKey": "kubernetes.io/hostname",
                    }]}},
                    "tolerations": [{"key": "k", "operator": "Exists"}],
                },
                "status": {
                    "phase": "Failed", "reason": "ApplicationRejected",
                    "conditions": [{"type": "PodScheduled", "status": "False",
                        "lastTransitionTime": "1970-01-01T00:01:00Z"}],
                },
            })
        );
    }

    #[test]
    fn lease_times_are_rfc3339_microseconds() {
        let l = k8s_pb::api::coordination::v1::Lease {
            metadata: Some(pb_meta::ObjectMeta {
                name: Some("kube-scheduler".into()),
                namespace: Some("kube-system".into()),
                resource_version: Some("42".into()),
                ..Default::default()
            }),
            spec: Some(k8s_pb::api::coordination::v1::LeaseSpec {
                holder_identity: Some("host_1234".into()),
                lease_duration_seconds: Some(15),
                acquire_time: Some(pb_meta::MicroTime {
                    seconds: Some(2),
                    nanos: Some(500_000_000),
                }),
                renew_time: Some(pb_meta::MicroTime {
                    seconds: Some(86_400),
                    nanos: Some(1_000),
                }),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        let v = decode(&envelope(
            "coordination.k8s.io/v1",
            "Lease",
            l.encode_to_vec(),
        ))
        .unwrap();
        assert_eq!(v["metadata"]["resourceVersion"], "42");
        assert_eq!(v["spec"]["acquireTime"], "1970-01-01T00:00:02.500000Z");
        assert_eq!(v["spec"]["renewTime"], "1970-01-02T00:00:00.000001Z");
        assert_eq!(v["spec"]["leaseDurationSeconds"], 15);
        assert_eq!(v["spec"]["leaseTransitions"], 0);
    }

    #[test]
    fn events_keep_type_series_and_managed_fields() {
        let e = k8s_pb::api::events::v1::Event {
            metadata: Some(pb_meta::ObjectMeta {
                generate_name: Some("job-1.".into()),
                creation_timestamp: Some(pb_meta::Time {
                    seconds: Some(61),
                    nanos: Some(0),
                }),
                managed_fields: vec![pb_meta::ManagedFieldsEntry {
                    manager: Some("m".into()),
                    fields_v1: Some(pb_meta::FieldsV1 {
                        raw: Some(br#"{"f:note":{}}"#.to_vec()),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            r#type: Some("Normal".into()),
            reason: Some("Scheduled".into()),
            note: Some("bound".into()),
            series: Some(k8s_pb::api::events::v1::EventSeries {
                count: Some(2),
                last_observed_time: Some(pb_meta::MicroTime {
                    seconds: Some(3),
                    nanos: Some(0),
                }),
            }),
            ..Default::default()
        };
        let v = decode(&envelope("events.k8s.io/v1", "Event", e.encode_to_vec())).unwrap();
        assert_eq!(v["type"], "Normal");
        assert_eq!(v["metadata"]["creationTimestamp"], "1970-01-01T00:01:01Z");
        assert_eq!(
            v["metadata"]["managedFields"][0]["fieldsV1"]["f:note"],
            serde_json::json!({})
        );
        assert_eq!(v["series"]["count"], 2);
        assert!(v["metadata"].get("labels").is_none(), "{v}");
    }

    #[test]
    fn delete_options_keep_their_group_version() {
        let d = pb_meta::DeleteOptions {
            grace_period_seconds: Some(0),
            preconditions: Some(pb_meta::Preconditions {
                uid: Some("u".into()),
                resource_version: None,
            }),
            ..Default::default()
        };
        let v = decode(&envelope("v1", "DeleteOptions", d.encode_to_vec())).unwrap();
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["gracePeriodSeconds"], 0);
        assert_eq!(v["preconditions"]["uid"], "u");
    }

    /// A Job as JobSet's controller creates it (controller-runtime writes
    /// it in protobuf): an Indexed Job with a pod failure policy and its
    /// pod template, as a JSON client would have sent it.
    #[test]
    fn jobs_read_as_the_json_a_json_client_sends() {
        use k8s_pb::api::batch::v1 as pb_batch;
        use k8s_pb::api::core::v1 as pb;
        let job = pb_batch::Job {
            metadata: Some(pb_meta::ObjectMeta {
                name: Some("w0-1-main-0".into()),
                labels: [(
                    "jobset.sigs.k8s.io/jobset-name".to_string(),
                    "w0-1".to_string(),
                )]
                .into(),
                ..Default::default()
            }),
            spec: Some(pb_batch::JobSpec {
                parallelism: Some(3),
                completions: Some(3),
                backoff_limit: Some(0),
                completion_mode: Some("Indexed".into()),
                pod_failure_policy: Some(pb_batch::PodFailurePolicy {
                    rules: vec![pb_batch::PodFailurePolicyRule {
                        action: Some("Ignore".into()),
                        on_pod_conditions: vec![pb_batch::PodFailurePolicyOnPodConditionsPattern {
                            r#type: Some("DisruptionTarget".into()),
                            status: Some("True".into()),
                        }],
                        ..Default::default()
                    }],
                }),
                template: Some(pb::PodTemplateSpec {
                    metadata: Some(pb_meta::ObjectMeta {
                        annotations: [("a".to_string(), "b".to_string())].into(),
                        ..Default::default()
                    }),
                    spec: Some(pb::PodSpec {
                        restart_policy: Some("Never".into()),
                        subdomain: Some("w0-1".into()),
                        containers: vec![pb::Container {
                            name: Some("job".into()),
                            image: Some("busybox".into()),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                }),
                ..Default::default()
            }),
            status: Some(Default::default()),
        };
        let v = decode(&envelope("batch/v1", "Job", job.encode_to_vec())).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "w0-1-main-0",
                    "labels": {"jobset.sigs.k8s.io/jobset-name": "w0-1"}},
                "spec": {
                    "parallelism": 3, "completions": 3, "backoffLimit": 0,
                    "completionMode": "Indexed",
                    "podFailurePolicy": {"rules": [{"action": "Ignore",
                        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]},
                    "template": {
                        "metadata": {"annotations": {"a": "b"}},
                        "spec": {"restartPolicy": "Never", "subdomain": "w0-1",
                            "containers": [{"name": "job", "image": "busybox"}]}
                    }
                },
                "status": {}
            })
        );
    }

    /// The headless Service JobSet's controller makes for a JobSet's pods.
    #[test]
    fn services_read_as_the_json_a_json_client_sends() {
        use k8s_pb::api::core::v1 as pb;
        use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
        let svc = pb::Service {
            metadata: Some(pb_meta::ObjectMeta {
                name: Some("w0-1".into()),
                namespace: Some("default".into()),
                ..Default::default()
            }),
            spec: Some(pb::ServiceSpec {
                cluster_ip: Some("None".into()),
                selector: [(
                    "jobset.sigs.k8s.io/jobset-name".to_string(),
                    "w0-1".to_string(),
                )]
                .into(),
                publish_not_ready_addresses: Some(true),
                ports: vec![pb::ServicePort {
                    port: Some(443),
                    target_port: Some(IntOrString {
                        r#type: Some(1),
                        str_val: Some("https".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(pb::ServiceStatus {
                conditions: vec![pb_meta::Condition {
                    r#type: Some("Ready".into()),
                    status: Some("True".into()),
                    last_transition_time: Some(pb_meta::Time {
                        seconds: Some(1_767_225_600),
                        nanos: Some(0),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        };
        let v = decode(&envelope("v1", "Service", svc.encode_to_vec())).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "w0-1", "namespace": "default"},
                "spec": {"clusterIP": "None", "publishNotReadyAddresses": true,
                    "selector": {"jobset.sigs.k8s.io/jobset-name": "w0-1"},
                    "ports": [{"port": 443, "targetPort": "https"}]},
                "status": {"conditions": [{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2026-01-01T00:00:00Z", "message": "", "reason": ""}]}
            })
        );
    }

    #[test]
    fn other_kinds_and_garbage_are_refused_with_a_reason() {
        let e = decode(&envelope("apps/v1", "Deployment", vec![])).unwrap_err();
        assert_eq!(e.code(), 415);
        assert!(e.to_string().contains("\"Deployment\""), "{e}");
        assert_eq!(decode(b"{}").unwrap_err().code(), 400);
        assert_eq!(decode(b"k8s\0\xff\xff").unwrap_err().code(), 400);
    }

    #[test]
    fn accept_headers_of_real_clients_allow_json() {
        assert!(accepts_json("application/vnd.kubernetes.protobuf, */*"));
        assert!(accepts_json(
            "application/vnd.kubernetes.protobuf,application/json"
        ));
        assert!(accepts_json(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        ));
        assert!(accepts_json(""));
        assert!(!accepts_json("application/vnd.kubernetes.protobuf"));
        assert!(!accepts_json("application/cbor"));
    }
}
