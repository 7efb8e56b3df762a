//! Kubernetes' protobuf messages as tables: every message of the built-in
//! API groups with its fields (number, name, label, type), generated at
//! build time from the `.proto` files of the Go modules `k8s.io/api`,
//! `k8s.io/apimachinery` and `k8s.io/apiextensions-apiserver` (see
//! `fakeapi/build.rs`). The encoder and decoder beside this module walk
//! them; no kind has code of its own.

use std::sync::OnceLock;

/// One message.
pub(crate) struct MessageDesc {
    /// Fully qualified: `k8s.io.api.core.v1.Pod`.
    pub name: &'static str,
    /// In field number order (the order Go writes them).
    pub fields: &'static [FieldDesc],
}

pub(crate) struct FieldDesc {
    /// The `.proto` name.
    pub name: &'static str,
    /// The JSON name, from the Go struct's `json` tag: mostly `name`, but
    /// not always (`expression` for `Expression`, `$ref` for `ref`).
    pub json: &'static str,
    pub number: u32,
    pub label: Label,
    pub ty: Ty,
    /// A struct Go embeds (`json:",inline"`): its fields are the parent's
    /// in JSON.
    pub inline: bool,
}

// Only the generated tables make some variants: a build without them
// (no `.proto` files found) has none.
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Label {
    Optional,
    Repeated,
    /// `map<string, ty>`.
    Map,
}

// Only the generated tables make some variants: a build without them
// (no `.proto` files found) has none.
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    String,
    Bytes,
    Int32,
    Int64,
    Bool,
    Double,
    /// An index into [`MESSAGES`].
    Message(usize),
}

// `MESSAGES`, and `UNAVAILABLE`: why a build has no tables (Go's module
// cache did not hold the modules), `None` when it has them.
include!(concat!(env!("OUT_DIR"), "/k8s_proto.rs"));

/// Why this build answers no protobuf, or `None` when it does.
pub(crate) fn unavailable() -> Option<&'static str> {
    UNAVAILABLE
}

/// Messages whose JSON form is not an object of their fields (Go types
/// with a JSON marshaller of their own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Special {
    None,
    /// `resource.Quantity`: `"100m"` in JSON, `{string: "100m"}`.
    Quantity,
    /// `metav1.Time`: RFC 3339 seconds; protobuf keeps seconds only.
    Time,
    /// `metav1.MicroTime`: RFC 3339 with microseconds.
    MicroTime,
    /// `metav1.Duration`: Go's `1h2m3s`, nanoseconds in protobuf.
    Duration,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// `runtime.RawExtension`, `metav1.FieldsV1`, apiextensions' `JSON`:
    /// any JSON, kept as its bytes.
    RawJson,
    /// A message of one `repeated string items` (`metav1.Verbs`,
    /// `ExtraValue`): a JSON array.
    Items,
    /// apiextensions' `JSONSchemaPropsOrBool`: a bool or a schema.
    SchemaOrBool,
    /// `JSONSchemaPropsOrArray`: a schema or an array of them.
    SchemaOrArray,
    /// `JSONSchemaPropsOrStringArray`: a schema or an array of strings.
    SchemaOrStringArray,
}

const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.";
const APIEXT: &str = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.";

fn special_of(name: &str) -> Special {
    let short = name.rsplit('.').next().unwrap_or(name);
    match name {
        "k8s.io.apimachinery.pkg.api.resource.Quantity"
        | "k8s.io.apimachinery.pkg.api.resource.QuantityValue" => Special::Quantity,
        "k8s.io.apimachinery.pkg.util.intstr.IntOrString" => Special::IntOrString,
        "k8s.io.apimachinery.pkg.runtime.RawExtension" => Special::RawJson,
        _ if name.starts_with(META) => match short {
            "Time" => Special::Time,
            "MicroTime" => Special::MicroTime,
            "Duration" => Special::Duration,
            "FieldsV1" => Special::RawJson,
            "Verbs" => Special::Items,
            _ => Special::None,
        },
        _ if name.starts_with(APIEXT) => match short {
            "JSON" => Special::RawJson,
            "JSONSchemaPropsOrBool" => Special::SchemaOrBool,
            "JSONSchemaPropsOrArray" => Special::SchemaOrArray,
            "JSONSchemaPropsOrStringArray" => Special::SchemaOrStringArray,
            _ => Special::None,
        },
        _ if short == "ExtraValue" => Special::Items,
        _ => Special::None,
    }
}

/// The [`Special`] of message `i`.
pub(crate) fn special(i: usize) -> Special {
    static SPECIALS: OnceLock<Vec<Special>> = OnceLock::new();
    SPECIALS.get_or_init(|| MESSAGES.iter().map(|m| special_of(m.name)).collect())[i]
}

/// The index of a message by its fully qualified name.
pub(crate) fn message(name: &str) -> Option<usize> {
    MESSAGES.binary_search_by(|m| m.name.cmp(name)).ok()
}

/// The proto package of a built-in group version: `apps/v1` is
/// `k8s.io.api.apps.v1`. Only for Kubernetes' own groups (the caller
/// knows a custom resource from a built-in one).
fn package(api_version: &str) -> String {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    match group {
        "" => format!("k8s.io.api.core.{version}"),
        "meta.k8s.io" => format!("k8s.io.apimachinery.pkg.apis.meta.{version}"),
        "apiextensions.k8s.io" => format!("{APIEXT}{version}"),
        "apiregistration.k8s.io" => {
            format!("k8s.io.kube_aggregator.pkg.apis.apiregistration.{version}")
        }
        "internal.apiserver.k8s.io" => format!("k8s.io.api.apiserverinternal.{version}"),
        g => format!("k8s.io.api.{}.{version}", g.split('.').next().unwrap_or(g)),
    }
}

/// The message of a built-in kind (`apps/v1`, `Deployment`), if Kubernetes
/// has one.
pub(crate) fn kind_message(api_version: &str, kind: &str) -> Option<usize> {
    message(&format!("{}.{kind}", package(api_version)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::RESOURCES;

    #[test]
    fn every_built_in_kind_and_its_list_has_a_message() {
        for r in RESOURCES {
            let v = r.api_version();
            assert!(kind_message(&v, r.kind).is_some(), "{v} {}", r.kind);
        }
        for (v, k) in [
            ("v1", "PodList"),
            ("apps/v1", "DeploymentList"),
            ("meta.k8s.io/v1", "PartialObjectMetadataList"),
            ("v1", "Status"),
        ] {
            let found = kind_message(v, k).or_else(|| message(&format!("{META}{k}")));
            assert!(found.is_some(), "{v} {k}");
        }
    }

    #[test]
    fn the_tables_know_go_s_embedded_structs() {
        let probe = &MESSAGES[message("k8s.io.api.core.v1.Probe").unwrap()];
        assert!(probe.fields.iter().any(|f| f.name == "handler" && f.inline));
        let sel = &MESSAGES[message("k8s.io.api.core.v1.ConfigMapKeySelector").unwrap()];
        assert!(sel
            .fields
            .iter()
            .any(|f| f.name == "localObjectReference" && f.inline));
        let pod = &MESSAGES[message("k8s.io.api.core.v1.PodSpec").unwrap()];
        assert!(pod.fields.iter().all(|f| !f.inline));
    }

    fn json_of(msg: &str, field: &str) -> &'static str {
        let m = &MESSAGES[message(msg).unwrap_or_else(|| panic!("{msg}"))];
        m.fields
            .iter()
            .find(|f| f.name == field)
            .unwrap_or_else(|| panic!("{msg}.{field}"))
            .json
    }

    #[test]
    fn the_tables_have_go_s_json_names() {
        // Where the proto name is not the JSON name.
        let props = format!("{APIEXT}v1.JSONSchemaProps");
        assert_eq!(json_of(&props, "ref"), "$ref");
        assert_eq!(
            json_of(&props, "xKubernetesListType"),
            "x-kubernetes-list-type"
        );
        let props = &MESSAGES[message(&props).unwrap()];
        for f in props.fields {
            assert!(
                !f.json.starts_with("xKubernetes") && f.json != "ref" && f.json != "schema",
                "{}",
                f.json
            );
        }
        let adm = "k8s.io.api.admissionregistration.v1.";
        assert_eq!(
            json_of(&format!("{adm}Validation"), "Expression"),
            "expression"
        );
        assert_eq!(json_of(&format!("{adm}Variable"), "Name"), "name");
        assert_eq!(
            json_of(&format!("{adm}ValidatingWebhookConfiguration"), "Webhooks"),
            "webhooks"
        );
        assert_eq!(json_of("k8s.io.api.core.v1.DaemonEndpoint", "Port"), "Port");
        assert_eq!(
            json_of("k8s.io.api.core.v1.PodSpec", "nodeName"),
            "nodeName"
        );
    }
}
