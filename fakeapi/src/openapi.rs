//! The OpenAPI documents: `/openapi/v2` (one Swagger 2.0 document) and
//! `/openapi/v3/...` (one OpenAPI 3.0 document per group/version), as
//! kube-apiserver publishes them.
//!
//! Built-in kinds' schemas come from k8s-openapi's generated `JsonSchema`
//! implementations (kube-apiserver's own OpenAPI definitions, with their
//! descriptions), named as kube-apiserver names them
//! (`io.k8s.api.core.v1.Pod`). Each served version of a CRD publishes its
//! schema as apiextensions-apiserver's CRD OpenAPI controllers do
//! (`pkg/controller/openapi/builder`): the structural schema with
//! `x-kubernetes-int-or-string` unfolded, `apiVersion`, `kind` and a
//! reference to `ObjectMeta` added (and to embedded resources), for v2
//! without what Swagger 2.0 and kubectl cannot read (junctors, nullable
//! types, properties of objects that keep unknown fields), under the model
//! name `<reversed group>.<version>.<Kind>` with its list kind beside it.
//! A version that stops being served, or is renamed, leaves the documents
//! with it: they are made from the registry at each request.
//!
//! Not as kube-apiserver: built-in kinds' schemas carry no
//! `x-kubernetes-patch-merge-key`, `x-kubernetes-list-type` and the like
//! (k8s-openapi's schemas do not have them), so their PATCH operations do
//! not offer strategic merge patch in the v3 documents: kubectl then takes
//! a strategic merge patch's list keys from its compiled-in types, which
//! have them.

use crate::registry::CustomVersion;
use crate::resources::{self, ResourceInfo};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const API_VERSION_DOC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DOC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DOC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const LIST_METADATA_DOC: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const EMBEDDED_API_VERSION_DOC: &str = "apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const EMBEDDED_KIND_DOC: &str = "kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const FIELD_VALIDATION_DOC: &str = "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.";

/// Which document: where references point and how a schema is written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Version {
    V2,
    V3,
}

impl Version {
    fn prefix(self) -> &'static str {
        match self {
            Version::V2 => "#/definitions/",
            Version::V3 => "#/components/schemas/",
        }
    }

    fn reference(self, name: &str) -> Value {
        json!({ "$ref": format!("{}{name}", self.prefix()) })
    }
}

/// The built-in definitions and the model name of each built-in row.
struct Builtins {
    defs: Map<String, Value>,
    kinds: Vec<(&'static ResourceInfo, String)>,
}

fn builtins(v: Version) -> &'static Builtins {
    static V2: OnceLock<Builtins> = OnceLock::new();
    static V3: OnceLock<Builtins> = OnceLock::new();
    let make = || {
        let path = match v {
            Version::V2 => "/definitions",
            Version::V3 => "/components/schemas",
        };
        let (defs, kinds) = crate::builtin_schema::definitions(path);
        let mut defs: Map<String, Value> = defs
            .into_iter()
            .map(|(k, d)| {
                let d = match v {
                    Version::V2 => d,
                    Version::V3 => refs_as_all_of(d),
                };
                (k, d)
            })
            .collect();
        for (r, name) in &kinds {
            if let Some(Value::Object(d)) = defs.get_mut(name) {
                let gvk = json!({"group": r.group, "kind": r.kind, "version": r.version});
                match d.get_mut("x-kubernetes-group-version-kind") {
                    Some(Value::Array(a)) if !a.contains(&gvk) => a.push(gvk),
                    Some(_) => {}
                    None => {
                        d.insert("x-kubernetes-group-version-kind".into(), json!([gvk]));
                    }
                }
            }
        }
        Builtins { defs, kinds }
    };
    match v {
        Version::V2 => V2.get_or_init(make),
        Version::V3 => V3.get_or_init(make),
    }
}

/// kube-apiserver's v3 documents write a reference with a description (or
/// a default) beside it as `allOf: [{$ref}]`, which OpenAPI 3.0 requires.
/// `v` is a schema: the keys of its `properties` are field names (a CRD's
/// `JSONSchemaProps` has fields named `$ref` and `allOf`), their values
/// schemas.
fn refs_as_all_of(v: Value) -> Value {
    let Value::Object(mut m) = v else { return v };
    if m.len() > 1 {
        if let Some(r) = m.remove("$ref") {
            m.insert("allOf".into(), json!([{ "$ref": r }]));
        }
    }
    Value::Object(
        m.into_iter()
            .map(|(k, x)| {
                let x = match (k.as_str(), x) {
                    ("properties" | "patternProperties" | "definitions", Value::Object(p)) => {
                        Value::Object(p.into_iter().map(|(n, s)| (n, refs_as_all_of(s))).collect())
                    }
                    ("items" | "additionalProperties" | "not", s @ Value::Object(_)) => {
                        refs_as_all_of(s)
                    }
                    ("items" | "allOf" | "anyOf" | "oneOf", Value::Array(a)) => {
                        Value::Array(a.into_iter().map(refs_as_all_of).collect())
                    }
                    (_, x) => x,
                };
                (k, x)
            })
            .collect(),
    )
}

/// `group/version/Kind`'s model name: `io.k8s.example.v1.Foo` for group
/// `example.k8s.io`.
pub(crate) fn model_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    format!("{}.{version}.{kind}", parts.join("."))
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

/// What a structural schema keeps of a CRD's `openAPIV3Schema`, with
/// `x-kubernetes-int-or-string` unfolded (structuralschema's `Unfold` and
/// `ToKubeOpenAPI`).
fn structural(s: &Value) -> Value {
    let Value::Object(m) = s else {
        return s.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        let v = match k.as_str() {
            "example" | "externalDocs" | "id" | "$schema" => continue,
            "nullable"
            | "x-kubernetes-preserve-unknown-fields"
            | "x-kubernetes-embedded-resource"
            | "x-kubernetes-int-or-string"
            | "uniqueItems"
            | "exclusiveMinimum"
            | "exclusiveMaximum"
                if v == &Value::Bool(false) =>
            {
                continue
            }
            "properties" | "patternProperties" | "definitions" => match v {
                Value::Object(p) => {
                    Value::Object(p.iter().map(|(n, x)| (n.clone(), structural(x))).collect())
                }
                other => other.clone(),
            },
            "items" | "additionalProperties" | "not" => structural(v),
            "allOf" | "anyOf" | "oneOf" => match v {
                Value::Array(a) => Value::Array(a.iter().map(structural).collect()),
                other => other.clone(),
            },
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    if out.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        let int_or_string = json!([{"type": "integer"}, {"type": "string"}]);
        let any_of = out.get("anyOf").and_then(Value::as_array).cloned();
        let already = |a: &[Value]| a == int_or_string.as_array().unwrap().as_slice();
        let all_of_first = out
            .get("allOf")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(|f| f.get("anyOf"))
            .and_then(Value::as_array)
            .is_some_and(|a| already(a));
        match any_of {
            Some(a) if already(&a) => {}
            _ if all_of_first => {}
            None => {
                out.insert("anyOf".into(), int_or_string);
            }
            Some(_) => {
                let mut all = vec![json!({ "anyOf": int_or_string })];
                all.extend(
                    out.get("allOf")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
                out.insert("allOf".into(), Value::Array(all));
            }
        }
    }
    Value::Object(out)
}

/// apiextensions-apiserver's `ToStructuralOpenAPIV2`: what Swagger 2.0 and
/// kubectl's v2 validation cannot read, taken out (a node is changed
/// before its children, as its visitor does).
fn to_v2(s: &mut Value) {
    let Value::Object(m) = s else { return };
    for k in ["allOf", "oneOf", "anyOf", "not"] {
        m.remove(k);
    }
    let is_true = |m: &Map<String, Value>, k: &str| m.get(k) == Some(&Value::Bool(true));
    if is_true(m, "nullable") {
        m.remove("type");
        m.remove("nullable");
        m.remove("items");
        m.remove("properties");
    }
    let preserve = is_true(m, "x-kubernetes-preserve-unknown-fields");
    if preserve {
        m.remove("items");
        m.remove("properties");
    }
    if !m.contains_key("items") && m.get("type").and_then(Value::as_str) == Some("array") {
        m.remove("type");
    }
    if preserve && m.get("type").and_then(Value::as_str) == Some("object") {
        m.remove("type");
    }
    let nullable_props: Vec<String> = m
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .filter(|(_, x)| x.get("nullable") == Some(&Value::Bool(true)))
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default();
    if let Some(Value::Array(req)) = m.get_mut("required") {
        req.retain(|r| {
            !r.as_str()
                .is_some_and(|r| nullable_props.iter().any(|n| n == r))
        });
        if req.is_empty() {
            m.remove("required");
        }
    }
    if m.get("additionalProperties")
        .and_then(|a| a.get("nullable"))
        == Some(&Value::Bool(true))
    {
        m.remove("required");
    }
    if let Some(items) = m.get_mut("items") {
        to_v2(items);
    }
    if let Some(Value::Object(p)) = m.get_mut("properties") {
        for x in p.values_mut() {
            to_v2(x);
        }
    }
    if let Some(a @ Value::Object(_)) = m.get_mut("additionalProperties") {
        to_v2(a);
    }
}

fn set_property(s: &mut Value, name: &str, v: Value) {
    if let Value::Object(m) = s {
        let p = m
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(p) = p {
            p.insert(name.into(), v);
        }
    }
}

fn metadata_ref(v: Version) -> Value {
    let mut r = v.reference(OBJECT_META);
    r["description"] = json!(METADATA_DOC);
    r
}

/// `apiVersion`, `kind` and `metadata` of every embedded resource
/// (`x-kubernetes-embedded-resource`), as `addEmbeddedProperties`.
fn add_embedded(s: &mut Value, v: Version) {
    let Value::Object(m) = s else { return };
    if let Some(Value::Object(p)) = m.get_mut("properties") {
        for x in p.values_mut() {
            add_embedded(x, v);
        }
    }
    if let Some(items) = m.get_mut("items") {
        add_embedded(items, v);
    }
    if let Some(a @ Value::Object(_)) = m.get_mut("additionalProperties") {
        add_embedded(a, v);
    }
    let flag = |m: &Map<String, Value>, k: &str| m.get(k) == Some(&Value::Bool(true));
    if v == Version::V2 && flag(m, "x-kubernetes-preserve-unknown-fields") {
        return;
    }
    if flag(m, "x-kubernetes-embedded-resource") {
        let mut s2 = Value::Object(std::mem::take(m));
        set_property(
            &mut s2,
            "apiVersion",
            json!({"description": EMBEDDED_API_VERSION_DOC, "type": "string"}),
        );
        set_property(
            &mut s2,
            "kind",
            json!({"description": EMBEDDED_KIND_DOC, "type": "string"}),
        );
        set_property(&mut s2, "metadata", metadata_ref(v));
        let Value::Object(m2) = s2 else {
            unreachable!()
        };
        *m = m2;
        let req = m.entry("required").or_insert_with(|| json!([]));
        if let Value::Array(req) = req {
            for k in ["kind", "apiVersion"] {
                if !req.iter().any(|r| r == k) {
                    req.push(json!(k));
                }
            }
        }
    }
}

/// The definition of a CRD's kind in one served version (`buildKubeNative`).
fn crd_schema(cv: &CustomVersion, v: Version) -> Value {
    let info = cv.info;
    let raw = cv.def.openapi.as_deref();
    let preserve_root = raw
        .and_then(|r| r.get("x-kubernetes-preserve-unknown-fields"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut s = match raw {
        None => json!({"type": "object"}),
        Some(_) if v == Version::V2 && preserve_root => json!({"type": "object"}),
        Some(raw) => {
            let mut s = structural(raw);
            if v == Version::V2 {
                to_v2(&mut s);
            }
            set_property(&mut s, "metadata", metadata_ref(v));
            set_property(
                &mut s,
                "apiVersion",
                json!({"description": API_VERSION_DOC, "type": "string"}),
            );
            set_property(
                &mut s,
                "kind",
                json!({"description": KIND_DOC, "type": "string"}),
            );
            add_embedded(&mut s, v);
            s
        }
    };
    s["x-kubernetes-group-version-kind"] = json!([gvk(info.group, info.version, info.kind)]);
    finish_crd_schema(s, cv, v)
}

/// What a CRD's kind and list kind definitions end with: the version's
/// selectable fields, and in v3 the references as `allOf`.
fn finish_crd_schema(mut s: Value, cv: &CustomVersion, v: Version) -> Value {
    if !cv.def.selectable.is_empty() {
        s["x-kubernetes-selectable-fields"] = cv
            .def
            .selectable
            .iter()
            .map(|p| json!({ "fieldPath": p }))
            .collect();
    }
    match v {
        Version::V2 => s,
        // `metadata`'s reference with its description beside it: kubectl
        // explain shows the description of a field given as `allOf` (the
        // field's), and the referred type's for a bare `$ref`.
        Version::V3 => refs_as_all_of(s),
    }
}

/// The definition of a CRD's list kind (`buildListSchema`).
fn crd_list_schema(cv: &CustomVersion, v: Version) -> Value {
    let info = cv.info;
    let items = json!({
        "type": "array",
        "items": v.reference(&model_name(info.group, info.version, info.kind)),
        "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", info.plural),
    });
    let mut meta = v.reference(LIST_META);
    meta["description"] = json!(LIST_METADATA_DOC);
    let s = json!({
        "type": "object",
        "description": format!("{} is a list of {}", cv.list_kind, info.kind),
        "required": ["items"],
        "properties": {
            "items": items,
            "metadata": meta,
            "apiVersion": {"description": API_VERSION_DOC, "type": "string"},
            "kind": {"description": KIND_DOC, "type": "string"},
        },
        "x-kubernetes-group-version-kind": [gvk(info.group, info.version, &cv.list_kind)],
    });
    finish_crd_schema(s, cv, v)
}

/// A resource of a document: its row, its model names, and, if custom, its
/// version of the CRD.
struct Kind<'a> {
    info: &'static ResourceInfo,
    model: String,
    list_model: Option<String>,
    custom: Option<&'a CustomVersion>,
}

fn kinds<'a>(customs: &'a [Arc<CustomVersion>], v: Version) -> Vec<Kind<'a>> {
    let b = builtins(v);
    let mut out: Vec<Kind> = b
        .kinds
        .iter()
        .map(|(info, name)| Kind {
            info,
            model: name.clone(),
            list_model: None,
            custom: None,
        })
        .collect();
    for cv in customs {
        out.push(Kind {
            info: cv.info,
            model: model_name(cv.info.group, cv.info.version, cv.info.kind),
            list_model: Some(model_name(cv.info.group, cv.info.version, &cv.list_kind)),
            custom: Some(cv),
        });
    }
    out
}

fn query(name: &str, v: Version) -> Value {
    let description = match name {
        "fieldValidation" => FIELD_VALIDATION_DOC,
        "dryRun" => "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed",
        "fieldManager" => "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.",
        "pretty" => "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).",
        "force" => "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.",
        _ => "",
    };
    let ty = if name == "force" { "boolean" } else { "string" };
    match v {
        Version::V2 => {
            json!({"name": name, "in": "query", "description": description, "type": ty, "uniqueItems": true})
        }
        Version::V3 => {
            json!({"name": name, "in": "query", "description": description, "schema": {"type": ty, "uniqueItems": true}})
        }
    }
}

/// The operations of one resource, by path (`registerResourceHandlers`,
/// reduced to what clients read: the action, the group-version-kind, the
/// parameters, what is read and written).
fn resource_paths(k: &Kind, v: Version, paths: &mut Map<String, Value>) {
    let r = k.info;
    let prefix = if r.group.is_empty() {
        format!("/api/{}", r.version)
    } else {
        format!("/apis/{}/{}", r.group, r.version)
    };
    let (collection, item) = if r.namespaced {
        (
            format!("{prefix}/namespaces/{{namespace}}/{}", r.plural),
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural),
        )
    } else {
        (
            format!("{prefix}/{}", r.plural),
            format!("{prefix}/{}/{{name}}", r.plural),
        )
    };
    let this_gvk = gvk(r.group, r.version, r.kind);
    let ns = if r.namespaced { "Namespaced" } else { "" };
    let media = |model: &str| -> Value {
        match v {
            Version::V2 => json!({"description": "OK", "schema": v.reference(model)}),
            Version::V3 => {
                let s = v.reference(model);
                json!({"description": "OK", "content": {
                    "application/json": {"schema": s},
                    "application/yaml": {"schema": s},
                }})
            }
        }
    };
    let body = |model: &str, patch: bool| -> Value {
        let s = if patch {
            json!({ "type": "object" })
        } else {
            v.reference(model)
        };
        match v {
            Version::V2 => json!({"name": "body", "in": "body", "required": true, "schema": s}),
            Version::V3 => {
                let types: &[&str] = if patch {
                    &[
                        "application/json-patch+json",
                        "application/merge-patch+json",
                        "application/apply-patch+yaml",
                    ]
                } else {
                    &["*/*"]
                };
                let content: Map<String, Value> = types
                    .iter()
                    .map(|t| (t.to_string(), json!({ "schema": s })))
                    .collect();
                json!({ "content": content })
            }
        }
    };
    let op = |action: &str, verb: &str, sub: &str, returns: &str, reads: Option<bool>| -> Value {
        let mut params: Vec<Value> = vec![query("pretty", v)];
        match action {
            "post" | "put" | "patch" => {
                for p in ["dryRun", "fieldManager", "fieldValidation"] {
                    params.push(query(p, v));
                }
                if action == "patch" {
                    params.push(query("force", v));
                }
            }
            "delete" | "deletecollection" => params.push(query("dryRun", v)),
            _ => {}
        }
        let mut o = json!({
            "description": format!("{verb}{} {}", if sub.is_empty() { String::new() } else { format!(" {sub} of") }, r.kind),
            "operationId": format!("{verb}{ns}{}{}", r.kind, capitalise(sub)),
            "responses": {"200": media(returns), "401": {"description": "Unauthorized"}},
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": this_gvk,
        });
        if let Some(patch) = reads {
            match v {
                Version::V2 => params.push(body(&k.model, patch)),
                Version::V3 => o["requestBody"] = body(&k.model, patch),
            }
        }
        o["parameters"] = Value::Array(params);
        o
    };
    let mut coll = Map::new();
    if let Some(list) = &k.list_model {
        coll.insert("get".into(), op("list", "list", "", list, None));
    }
    coll.insert(
        "post".into(),
        op("post", "create", "", &k.model, Some(false)),
    );
    coll.insert(
        "delete".into(),
        op("deletecollection", "deletecollection", "", STATUS, None),
    );
    paths.insert(collection, Value::Object(coll));
    paths.insert(
        item.clone(),
        json!({
            "get": op("get", "read", "", &k.model, None),
            "put": op("put", "replace", "", &k.model, Some(false)),
            "patch": op("patch", "patch", "", &k.model, Some(true)),
            "delete": op("delete", "delete", "", STATUS, None),
        }),
    );
    if r.has_status() {
        paths.insert(
            format!("{item}/status"),
            json!({
                "get": op("get", "read", "status", &k.model, None),
                "put": op("put", "replace", "status", &k.model, Some(false)),
                "patch": op("patch", "patch", "status", &k.model, Some(true)),
            }),
        );
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The definitions `roots` reference, transitively, from `defs`.
fn reachable(roots: &[&Value], defs: &Map<String, Value>, prefix: &str) -> BTreeSet<String> {
    fn refs(v: &Value, prefix: &str, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    if k == "$ref" {
                        if let Some(name) = x.as_str().and_then(|r| r.strip_prefix(prefix)) {
                            out.push(name.to_string());
                        }
                    } else {
                        refs(x, prefix, out);
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, prefix, out)),
            _ => {}
        }
    }
    let mut seen = BTreeSet::new();
    let mut todo = Vec::new();
    for r in roots {
        refs(r, prefix, &mut todo);
    }
    while let Some(name) = todo.pop() {
        if seen.insert(name.clone()) {
            if let Some(d) = defs.get(&name) {
                refs(d, prefix, &mut todo);
            }
        }
    }
    seen
}

fn server_version() -> String {
    let (major, minor) = crate::discovery::SERVER_VERSION;
    format!("v{major}.{minor}.0")
}

/// `/openapi/v2`: every kind served, built-in and custom, in one document.
pub(crate) fn v2(customs: &[Arc<CustomVersion>]) -> Value {
    let v = Version::V2;
    let b = builtins(v);
    let mut defs = b.defs.clone();
    let mut paths = Map::new();
    for k in kinds(customs, v) {
        if let Some(cv) = k.custom {
            defs.insert(k.model.clone(), crd_schema(cv, v));
            if let Some(list) = &k.list_model {
                defs.insert(list.clone(), crd_list_schema(cv, v));
            }
        }
        resource_paths(&k, v, &mut paths);
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": server_version()},
        "paths": paths,
        "definitions": defs,
    })
}

/// `/openapi/v3/apis/GROUP/VERSION` (`/openapi/v3/api/v1` for the core
/// group): the paths and schemas of the kinds a group/version serves, or
/// `None` when it serves none.
pub(crate) fn v3_group_version(
    rows: &[&'static ResourceInfo],
    customs: &[Arc<CustomVersion>],
    group: &str,
    version: &str,
) -> Option<Value> {
    let v = Version::V3;
    let b = builtins(v);
    let served: Vec<&ResourceInfo> = rows
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .copied()
        .collect();
    let mut own = Map::new();
    let mut paths = Map::new();
    let mut roots = Vec::new();
    for k in kinds(customs, v) {
        if k.info.group != group || k.info.version != version {
            continue;
        }
        if k.custom.is_none() && !served.iter().any(|r| std::ptr::eq(*r, k.info)) {
            continue;
        }
        if let Some(cv) = k.custom {
            own.insert(k.model.clone(), crd_schema(cv, v));
            if let Some(list) = &k.list_model {
                own.insert(list.clone(), crd_list_schema(cv, v));
            }
        } else {
            roots.push(k.model.clone());
        }
        resource_paths(&k, v, &mut paths);
    }
    if paths.is_empty() {
        return None;
    }
    let prefix = v.prefix();
    let root_refs: Vec<Value> = roots.iter().map(|n| v.reference(n)).collect();
    let mut all_roots: Vec<&Value> = root_refs.iter().chain(own.values()).collect();
    let status_ref = v.reference(STATUS);
    all_roots.push(&status_ref);
    let mut schemas = Map::new();
    for name in reachable(&all_roots, &b.defs, prefix) {
        if let Some(d) = b.defs.get(&name) {
            schemas.insert(name, d.clone());
        }
    }
    schemas.extend(own);
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": server_version()},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

/// `/openapi/v3`: one document per group/version, each named with a hash
/// of what it holds, so that a client's cache of it (kubectl's) changes
/// when a CRD does.
pub(crate) fn v3_root(rows: &[&'static ResourceInfo], customs: &[Arc<CustomVersion>]) -> Value {
    let mut paths = Map::new();
    let fold = |h: u64, bytes: &[u8]| {
        bytes
            .iter()
            .fold(h, |h, b| (h ^ *b as u64).wrapping_mul(1_099_511_628_211))
    };
    let mut gvs: Vec<(&str, Vec<&str>)> = vec![("", vec!["v1"])];
    gvs.extend(resources::groups_of(rows));
    for (g, vs) in gvs {
        for ver in vs {
            let mut h = 14_695_981_039_346_656_037u64;
            for r in rows.iter().filter(|r| r.group == g && r.version == ver) {
                h = fold(h, r.plural.as_bytes());
                h = fold(h, r.kind.as_bytes());
            }
            for cv in customs
                .iter()
                .filter(|c| c.info.group == g && c.info.version == ver)
            {
                h = fold(h, cv.crd.as_bytes());
                if let Some(s) = &cv.def.openapi {
                    h = fold(h, s.to_string().as_bytes());
                }
                for f in &cv.def.selectable {
                    h = fold(h, f.as_bytes());
                }
            }
            let key = if g.is_empty() {
                format!("api/{ver}")
            } else {
                format!("apis/{g}/{ver}")
            };
            paths.insert(
                key.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={h:016X}")}),
            );
        }
    }
    json!({ "paths": paths })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_reverse_the_group() {
        assert_eq!(
            model_name("stable.example.com", "v1", "Foo"),
            "com.example.stable.v1.Foo"
        );
    }

    #[test]
    fn v2_drops_what_swagger_cannot_read() {
        let mut s = json!({
            "type": "object",
            "required": ["a", "b"],
            "properties": {
                "a": {"type": "string", "nullable": true},
                "b": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                      "properties": {"c": {"type": "string"}}},
                "d": {"anyOf": [{"type": "integer"}, {"type": "string"}],
                      "x-kubernetes-int-or-string": true},
            },
        });
        to_v2(&mut s);
        assert_eq!(
            s,
            json!({
                "type": "object",
                "required": ["b"],
                "properties": {
                    "a": {},
                    "b": {"x-kubernetes-preserve-unknown-fields": true},
                    "d": {"x-kubernetes-int-or-string": true},
                },
            })
        );
    }

    #[test]
    fn int_or_string_is_unfolded() {
        let s = structural(&json!({"x-kubernetes-int-or-string": true, "nullable": false}));
        assert_eq!(
            s,
            json!({"x-kubernetes-int-or-string": true,
                   "anyOf": [{"type": "integer"}, {"type": "string"}]})
        );
    }
}
