//! The OpenAPI schemas of built-in kinds, as structural [`Schema`]s: what
//! kube-apiserver's type checker reads a ValidatingAdmissionPolicy's
//! expressions against (`object.spec.replicas` is an `int` of a
//! Deployment). They come from k8s-openapi's generated `JsonSchema`
//! implementations (the same OpenAPI documents kube-apiserver publishes),
//! their references inlined; a type that contains itself (a CRD's
//! `JSONSchemaProps`) stops at the repetition, which types as `dyn`.
//! Each is made once, on first use.

use crate::schema::Schema;
use k8s_openapi::schemars::generate::{SchemaGenerator, SchemaSettings};
use k8s_openapi::schemars::JsonSchema;
use parking_lot::Mutex;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// The schema of built-in `group/version` `kind`, if fakeapi serves it.
pub(crate) fn schema(group: &str, version: &str, kind: &str) -> Option<Arc<Schema>> {
    type Cache = Mutex<HashMap<(String, String, String), Option<Arc<Schema>>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = (group.to_string(), version.to_string(), kind.to_string());
    let cache = CACHE.get_or_init(Default::default);
    if let Some(s) = cache.lock().get(&key) {
        return s.clone();
    }
    let made = json_schema(group, version, kind).map(|v| Arc::new(Schema::parse_types(&v)));
    cache.lock().insert(key, made.clone());
    made
}

fn of<T: JsonSchema>() -> Value {
    let mut g = SchemaGenerator::new(SchemaSettings::draft2020_12());
    let root = g.root_schema_for::<T>().to_value();
    let defs = g.take_definitions(true);
    let mut stack = Vec::new();
    inline(&root, &defs, &mut stack)
}

/// `v` with every `$ref` replaced by its definition (a reference within its
/// own definition becomes an untyped schema).
fn inline(v: &Value, defs: &Map<String, Value>, stack: &mut Vec<String>) -> Value {
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                let name = r.rsplit('/').next().unwrap_or(r).to_string();
                if stack.contains(&name) {
                    return Value::Object(Map::new());
                }
                let Some(def) = defs.get(&name) else {
                    return Value::Object(Map::new());
                };
                stack.push(name);
                let mut out = inline(def, defs, stack);
                stack.pop();
                if let Value::Object(o) = &mut out {
                    for (k, x) in m {
                        if k != "$ref" {
                            o.insert(k.clone(), inline(x, defs, stack));
                        }
                    }
                }
                return out;
            }
            Value::Object(
                m.iter()
                    .filter(|(k, _)| k.as_str() != "$defs" && k.as_str() != "$schema")
                    .map(|(k, x)| (k.clone(), inline(x, defs, stack)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| inline(x, defs, stack)).collect()),
        other => other.clone(),
    }
}

fn json_schema(group: &str, version: &str, kind: &str) -> Option<Value> {
    use k8s_openapi::api::{
        admissionregistration::v1 as adm, apps::v1 as apps, batch::v1 as batch,
        coordination::v1 as coord, core::v1 as core, discovery::v1 as disc, events::v1 as events,
        node::v1 as node, policy::v1 as policy, resource::v1 as res, scheduling::v1 as sched,
        storage::v1 as storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    if version != "v1" {
        return None;
    }
    Some(match (group, kind) {
        ("", "Pod") => of::<core::Pod>(),
        ("", "Node") => of::<core::Node>(),
        ("", "Namespace") => of::<core::Namespace>(),
        ("", "Binding") => of::<core::Binding>(),
        ("", "Event") => of::<core::Event>(),
        ("", "Service") => of::<core::Service>(),
        ("", "ReplicationController") => of::<core::ReplicationController>(),
        ("", "PersistentVolume") => of::<core::PersistentVolume>(),
        ("", "PersistentVolumeClaim") => of::<core::PersistentVolumeClaim>(),
        ("", "ConfigMap") => of::<core::ConfigMap>(),
        ("", "Secret") => of::<core::Secret>(),
        ("", "PodTemplate") => of::<core::PodTemplate>(),
        ("", "ServiceAccount") => of::<core::ServiceAccount>(),
        ("", "Endpoints") => of::<core::Endpoints>(),
        ("", "ResourceQuota") => of::<core::ResourceQuota>(),
        ("", "LimitRange") => of::<core::LimitRange>(),
        ("apps", "ReplicaSet") => of::<apps::ReplicaSet>(),
        ("apps", "StatefulSet") => of::<apps::StatefulSet>(),
        ("apps", "Deployment") => of::<apps::Deployment>(),
        ("apps", "DaemonSet") => of::<apps::DaemonSet>(),
        ("batch", "Job") => of::<batch::Job>(),
        ("policy", "PodDisruptionBudget") => of::<policy::PodDisruptionBudget>(),
        ("events.k8s.io", "Event") => of::<events::Event>(),
        ("coordination.k8s.io", "Lease") => of::<coord::Lease>(),
        ("scheduling.k8s.io", "PriorityClass") => of::<sched::PriorityClass>(),
        ("node.k8s.io", "RuntimeClass") => of::<node::RuntimeClass>(),
        ("storage.k8s.io", "StorageClass") => of::<storage::StorageClass>(),
        ("storage.k8s.io", "CSINode") => of::<storage::CSINode>(),
        ("storage.k8s.io", "CSIDriver") => of::<storage::CSIDriver>(),
        ("storage.k8s.io", "CSIStorageCapacity") => of::<storage::CSIStorageCapacity>(),
        ("storage.k8s.io", "VolumeAttachment") => of::<storage::VolumeAttachment>(),
        ("resource.k8s.io", "ResourceClaim") => of::<res::ResourceClaim>(),
        ("resource.k8s.io", "ResourceClaimTemplate") => of::<res::ResourceClaimTemplate>(),
        ("resource.k8s.io", "ResourceSlice") => of::<res::ResourceSlice>(),
        ("resource.k8s.io", "DeviceClass") => of::<res::DeviceClass>(),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            of::<adm::MutatingWebhookConfiguration>()
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            of::<adm::ValidatingWebhookConfiguration>()
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            of::<adm::ValidatingAdmissionPolicy>()
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            of::<adm::ValidatingAdmissionPolicyBinding>()
        }
        ("discovery.k8s.io", "EndpointSlice") => of::<disc::EndpointSlice>(),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            of::<ext::CustomResourceDefinition>()
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_row_has_a_schema() {
        for r in crate::resources::RESOURCES {
            assert!(
                schema(r.group, r.version, r.kind).is_some(),
                "{}/{} {}",
                r.group,
                r.version,
                r.kind
            );
        }
        let d = schema("apps", "v1", "Deployment").unwrap();
        let replicas = d.field("spec").and_then(|s| s.field("replicas")).unwrap();
        use crate::schema::cel::check::{ty_of, Ty};
        assert!(matches!(ty_of(replicas, false), Some(Ty::Int)));
    }
}
