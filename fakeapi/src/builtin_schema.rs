//! The OpenAPI schemas of built-in kinds, as structural [`Schema`]s: what
//! kube-apiserver's type checker reads a ValidatingAdmissionPolicy's
//! expressions against (`object.spec.replicas` is an `int` of a
//! Deployment). They come from k8s-openapi's generated `JsonSchema`
//! implementations (the same OpenAPI documents kube-apiserver publishes),
//! their references inlined; a type that contains itself (a CRD's
//! `JSONSchemaProps`) stops at the repetition, which types as `dyn`.
//! Each is made once, on first use.

use crate::resources::ResourceInfo;
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

fn json_schema(group: &str, version: &str, kind: &str) -> Option<Value> {
    let mut g = SchemaGenerator::new(SchemaSettings::draft2020_12());
    let root = subschema(&mut g, group, version, kind)?;
    let defs = g.take_definitions(true);
    let mut stack = Vec::new();
    Some(inline(&root, &defs, &mut stack))
}

/// The definitions of every built-in kind fakeapi serves and of the types
/// they use, named as kube-apiserver's OpenAPI names them
/// (`io.k8s.api.core.v1.Pod`), their references pointing under
/// `definitions_path` (`/definitions` in OpenAPI v2, `/components/schemas`
/// in v3); with the name of each kind's definition.
pub(crate) fn definitions(
    definitions_path: &str,
) -> (Map<String, Value>, Vec<(&'static ResourceInfo, String)>) {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = definitions_path.to_string().into();
    let mut g = SchemaGenerator::new(settings);
    let mut kinds = Vec::new();
    for r in crate::resources::RESOURCES {
        if let Some(root) = subschema(&mut g, r.group, r.version, r.kind) {
            if let Some(name) = root
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|x| x.rsplit('/').next())
            {
                kinds.push((r, name.to_string()));
            }
        }
    }
    // What lists and deletions answer with, which every document refers to.
    g.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta>();
    g.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>();
    (g.take_definitions(true), kinds)
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

fn subschema(g: &mut SchemaGenerator, group: &str, version: &str, kind: &str) -> Option<Value> {
    use k8s_openapi::api::{
        admissionregistration::v1 as adm, apps::v1 as apps, authentication::v1 as authn,
        authorization::v1 as authz, autoscaling::v1 as hpa1, autoscaling::v2 as hpa2,
        batch::v1 as batch, certificates::v1 as certs, coordination::v1 as coord, core::v1 as core,
        discovery::v1 as disc, events::v1 as events, flowcontrol::v1 as fc, networking::v1 as net,
        node::v1 as node, policy::v1 as policy, resource::v1 as res, scheduling::v1 as sched,
        storage::v1 as storage,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apireg;
    fn sub<T: JsonSchema>(g: &mut SchemaGenerator) -> Value {
        g.subschema_for::<T>().to_value()
    }
    if (group, version, kind) == ("autoscaling", "v2", "HorizontalPodAutoscaler") {
        return Some(sub::<hpa2::HorizontalPodAutoscaler>(g));
    }
    if version != "v1" {
        return None;
    }
    Some(match (group, kind) {
        ("apiregistration.k8s.io", "APIService") => sub::<apireg::APIService>(g),
        ("authentication.k8s.io", "SelfSubjectReview") => sub::<authn::SelfSubjectReview>(g),
        ("authentication.k8s.io", "TokenReview") => sub::<authn::TokenReview>(g),
        ("authorization.k8s.io", "LocalSubjectAccessReview") => {
            sub::<authz::LocalSubjectAccessReview>(g)
        }
        ("authorization.k8s.io", "SelfSubjectAccessReview") => {
            sub::<authz::SelfSubjectAccessReview>(g)
        }
        ("authorization.k8s.io", "SelfSubjectRulesReview") => {
            sub::<authz::SelfSubjectRulesReview>(g)
        }
        ("authorization.k8s.io", "SubjectAccessReview") => sub::<authz::SubjectAccessReview>(g),
        ("autoscaling", "HorizontalPodAutoscaler") => sub::<hpa1::HorizontalPodAutoscaler>(g),
        ("batch", "CronJob") => sub::<batch::CronJob>(g),
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            sub::<certs::CertificateSigningRequest>(g)
        }
        ("networking.k8s.io", "Ingress") => sub::<net::Ingress>(g),
        ("networking.k8s.io", "IngressClass") => sub::<net::IngressClass>(g),
        ("networking.k8s.io", "NetworkPolicy") => sub::<net::NetworkPolicy>(g),
        ("", "Pod") => sub::<core::Pod>(g),
        ("", "Node") => sub::<core::Node>(g),
        ("", "Namespace") => sub::<core::Namespace>(g),
        ("", "Binding") => sub::<core::Binding>(g),
        ("", "Event") => sub::<core::Event>(g),
        ("", "Service") => sub::<core::Service>(g),
        ("", "ReplicationController") => sub::<core::ReplicationController>(g),
        ("", "PersistentVolume") => sub::<core::PersistentVolume>(g),
        ("", "PersistentVolumeClaim") => sub::<core::PersistentVolumeClaim>(g),
        ("", "ConfigMap") => sub::<core::ConfigMap>(g),
        ("", "Secret") => sub::<core::Secret>(g),
        ("", "PodTemplate") => sub::<core::PodTemplate>(g),
        ("", "ServiceAccount") => sub::<core::ServiceAccount>(g),
        ("", "Endpoints") => sub::<core::Endpoints>(g),
        ("", "ResourceQuota") => sub::<core::ResourceQuota>(g),
        ("", "LimitRange") => sub::<core::LimitRange>(g),
        ("apps", "ReplicaSet") => sub::<apps::ReplicaSet>(g),
        ("apps", "StatefulSet") => sub::<apps::StatefulSet>(g),
        ("apps", "Deployment") => sub::<apps::Deployment>(g),
        ("apps", "DaemonSet") => sub::<apps::DaemonSet>(g),
        ("batch", "Job") => sub::<batch::Job>(g),
        ("policy", "PodDisruptionBudget") => sub::<policy::PodDisruptionBudget>(g),
        ("events.k8s.io", "Event") => sub::<events::Event>(g),
        ("coordination.k8s.io", "Lease") => sub::<coord::Lease>(g),
        ("scheduling.k8s.io", "PriorityClass") => sub::<sched::PriorityClass>(g),
        ("node.k8s.io", "RuntimeClass") => sub::<node::RuntimeClass>(g),
        ("storage.k8s.io", "StorageClass") => sub::<storage::StorageClass>(g),
        ("storage.k8s.io", "CSINode") => sub::<storage::CSINode>(g),
        ("storage.k8s.io", "CSIDriver") => sub::<storage::CSIDriver>(g),
        ("storage.k8s.io", "CSIStorageCapacity") => sub::<storage::CSIStorageCapacity>(g),
        ("storage.k8s.io", "VolumeAttachment") => sub::<storage::VolumeAttachment>(g),
        ("resource.k8s.io", "ResourceClaim") => sub::<res::ResourceClaim>(g),
        ("resource.k8s.io", "ResourceClaimTemplate") => sub::<res::ResourceClaimTemplate>(g),
        ("resource.k8s.io", "ResourceSlice") => sub::<res::ResourceSlice>(g),
        ("resource.k8s.io", "DeviceClass") => sub::<res::DeviceClass>(g),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            sub::<adm::MutatingWebhookConfiguration>(g)
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            sub::<adm::ValidatingWebhookConfiguration>(g)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            sub::<adm::ValidatingAdmissionPolicy>(g)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            sub::<adm::ValidatingAdmissionPolicyBinding>(g)
        }
        ("discovery.k8s.io", "EndpointSlice") => sub::<disc::EndpointSlice>(g),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema") => sub::<fc::FlowSchema>(g),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration") => {
            sub::<fc::PriorityLevelConfiguration>(g)
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            sub::<ext::CustomResourceDefinition>(g)
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
