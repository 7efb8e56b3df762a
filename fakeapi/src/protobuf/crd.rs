//! `apiextensions.k8s.io/v1` CustomResourceDefinition in protobuf (client-go's
//! apiextensions clientset writes it so by default), moved into the JSON a
//! JSON client would have sent: Go's field names, and what Go's JSON leaves
//! out (`omitempty`) left out. Pointer fields of the Go types (`maximum`,
//! `maxLength`, `x-kubernetes-preserve-unknown-fields`, ...) are written
//! whenever the message has them, zero or not; plain ones only when they
//! are not their zero value, except those Go always writes (`served`,
//! `storage`, `strategy`, a column's `name`, `type` and `jsonPath`).

use super::{json, Conv};
use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as pb;
use serde_json::{json, Map, Value};

/// A field Go writes only when it is not empty (`string` with `omitempty`).
fn put_text(o: &mut Map<String, Value>, key: &str, v: Option<String>) {
    if let Some(s) = v.filter(|s| !s.is_empty()) {
        o.insert(key.into(), Value::String(s));
    }
}

/// A field Go always writes (`string` without `omitempty`).
fn put_always(o: &mut Map<String, Value>, key: &str, v: Option<String>) {
    o.insert(key.into(), Value::String(v.unwrap_or_default()));
}

/// A pointer field (`*T` with `omitempty`): written when set.
fn put_some<T: Into<Value>>(o: &mut Map<String, Value>, key: &str, v: Option<T>) {
    if let Some(v) = v {
        o.insert(key.into(), v.into());
    }
}

/// A `bool` with `omitempty`: written when true.
fn put_true(o: &mut Map<String, Value>, key: &str, v: Option<bool>) {
    if v == Some(true) {
        o.insert(key.into(), Value::Bool(true));
    }
}

fn put_strings(o: &mut Map<String, Value>, key: &str, v: Vec<String>) {
    if !v.is_empty() {
        o.insert(key.into(), json!(v));
    }
}

/// A `JSON` field (`default`, `example`, `enum` items): its raw bytes.
fn raw_json(j: pb::Json) -> Value {
    j.raw
        .and_then(|raw| serde_json::from_slice(&raw).ok())
        .unwrap_or(Value::Null)
}

fn float(f: f64) -> Value {
    serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
}

pub(super) fn definition(crd: pb::CustomResourceDefinition) -> Value {
    let mut o = Map::new();
    o.insert("apiVersion".into(), json!("apiextensions.k8s.io/v1"));
    o.insert("kind".into(), json!("CustomResourceDefinition"));
    o.insert(
        "metadata".into(),
        json(crd.metadata.conv().unwrap_or_default()),
    );
    o.insert("spec".into(), spec(crd.spec.unwrap_or_default()));
    if let Some(st) = crd.status {
        o.insert("status".into(), status(st));
    }
    Value::Object(o)
}

fn spec(s: pb::CustomResourceDefinitionSpec) -> Value {
    let mut o = Map::new();
    put_always(&mut o, "group", s.group);
    o.insert("names".into(), names(s.names.unwrap_or_default()));
    put_always(&mut o, "scope", s.scope);
    o.insert(
        "versions".into(),
        Value::Array(s.versions.into_iter().map(version).collect()),
    );
    if let Some(c) = s.conversion {
        let mut conv = Map::new();
        put_always(&mut conv, "strategy", c.strategy);
        if let Some(w) = c.webhook {
            let mut wo = Map::new();
            if let Some(cc) = w.client_config {
                let mut cco = Map::new();
                put_some(&mut cco, "url", cc.url);
                if let Some(svc) = cc.service {
                    let mut so = Map::new();
                    put_always(&mut so, "namespace", svc.namespace);
                    put_always(&mut so, "name", svc.name);
                    put_some(&mut so, "path", svc.path);
                    put_some(&mut so, "port", svc.port);
                    cco.insert("service".into(), Value::Object(so));
                }
                if let Some(ca) = cc.ca_bundle.filter(|b| !b.is_empty()) {
                    use base64::Engine;
                    cco.insert(
                        "caBundle".into(),
                        json!(base64::engine::general_purpose::STANDARD.encode(ca)),
                    );
                }
                wo.insert("clientConfig".into(), Value::Object(cco));
            }
            wo.insert(
                "conversionReviewVersions".into(),
                json!(w.conversion_review_versions),
            );
            conv.insert("webhook".into(), Value::Object(wo));
        }
        o.insert("conversion".into(), Value::Object(conv));
    }
    put_true(&mut o, "preserveUnknownFields", s.preserve_unknown_fields);
    Value::Object(o)
}

fn names(n: pb::CustomResourceDefinitionNames) -> Value {
    let mut o = Map::new();
    put_always(&mut o, "plural", n.plural);
    put_text(&mut o, "singular", n.singular);
    put_strings(&mut o, "shortNames", n.short_names);
    put_always(&mut o, "kind", n.kind);
    put_text(&mut o, "listKind", n.list_kind);
    put_strings(&mut o, "categories", n.categories);
    Value::Object(o)
}

fn version(v: pb::CustomResourceDefinitionVersion) -> Value {
    let mut o = Map::new();
    put_always(&mut o, "name", v.name);
    o.insert("served".into(), json!(v.served.unwrap_or(false)));
    o.insert("storage".into(), json!(v.storage.unwrap_or(false)));
    put_true(&mut o, "deprecated", v.deprecated);
    put_some(&mut o, "deprecationWarning", v.deprecation_warning);
    if let Some(s) = v.schema {
        let mut so = Map::new();
        if let Some(p) = s.open_apiv3_schema {
            so.insert("openAPIV3Schema".into(), schema(p));
        }
        o.insert("schema".into(), Value::Object(so));
    }
    if let Some(sub) = v.subresources {
        let mut so = Map::new();
        if sub.status.is_some() {
            so.insert("status".into(), json!({}));
        }
        if let Some(sc) = sub.scale {
            let mut sco = Map::new();
            put_always(&mut sco, "specReplicasPath", sc.spec_replicas_path);
            put_always(&mut sco, "statusReplicasPath", sc.status_replicas_path);
            put_some(&mut sco, "labelSelectorPath", sc.label_selector_path);
            so.insert("scale".into(), Value::Object(sco));
        }
        o.insert("subresources".into(), Value::Object(so));
    }
    if !v.additional_printer_columns.is_empty() {
        let cols = v
            .additional_printer_columns
            .into_iter()
            .map(|c| {
                let mut co = Map::new();
                put_always(&mut co, "name", c.name);
                put_always(&mut co, "type", c.r#type);
                put_text(&mut co, "format", c.format);
                put_text(&mut co, "description", c.description);
                if let Some(p) = c.priority.filter(|p| *p != 0) {
                    co.insert("priority".into(), json!(p));
                }
                put_always(&mut co, "jsonPath", c.json_path);
                Value::Object(co)
            })
            .collect();
        o.insert("additionalPrinterColumns".into(), Value::Array(cols));
    }
    if !v.selectable_fields.is_empty() {
        let fields = v
            .selectable_fields
            .into_iter()
            .map(|f| json!({"jsonPath": f.json_path.unwrap_or_default()}))
            .collect();
        o.insert("selectableFields".into(), Value::Array(fields));
    }
    Value::Object(o)
}

fn schemas(v: Vec<pb::JsonSchemaProps>) -> Value {
    Value::Array(v.into_iter().map(schema).collect())
}

fn schema_map(m: std::collections::BTreeMap<String, pb::JsonSchemaProps>) -> Value {
    Value::Object(m.into_iter().map(|(k, v)| (k, schema(v))).collect())
}

/// `JSONSchemaPropsOrBool`: the schema when there is one, else the bool.
fn schema_or_bool(v: pb::JsonSchemaPropsOrBool) -> Value {
    match v.schema {
        Some(s) => schema(*s),
        None => json!(v.allows.unwrap_or(false)),
    }
}

/// A JSON schema (`JSONSchemaProps`), recursively.
fn schema(p: pb::JsonSchemaProps) -> Value {
    let mut o = Map::new();
    put_text(&mut o, "id", p.id);
    put_text(&mut o, "$schema", p.schema);
    put_text(&mut o, "$ref", p.r#ref);
    put_text(&mut o, "description", p.description);
    put_text(&mut o, "type", p.r#type);
    put_text(&mut o, "format", p.format);
    put_text(&mut o, "title", p.title);
    if let Some(d) = p.default {
        o.insert("default".into(), raw_json(d));
    }
    put_some(&mut o, "maximum", p.maximum.map(float));
    put_true(&mut o, "exclusiveMaximum", p.exclusive_maximum);
    put_some(&mut o, "minimum", p.minimum.map(float));
    put_true(&mut o, "exclusiveMinimum", p.exclusive_minimum);
    put_some(&mut o, "maxLength", p.max_length);
    put_some(&mut o, "minLength", p.min_length);
    put_text(&mut o, "pattern", p.pattern);
    put_some(&mut o, "maxItems", p.max_items);
    put_some(&mut o, "minItems", p.min_items);
    put_true(&mut o, "uniqueItems", p.unique_items);
    put_some(&mut o, "multipleOf", p.multiple_of.map(float));
    if !p.r#enum.is_empty() {
        o.insert(
            "enum".into(),
            Value::Array(p.r#enum.into_iter().map(raw_json).collect()),
        );
    }
    put_some(&mut o, "maxProperties", p.max_properties);
    put_some(&mut o, "minProperties", p.min_properties);
    put_strings(&mut o, "required", p.required);
    if let Some(items) = p.items {
        let items = *items;
        let v = match items.schema {
            Some(s) => schema(*s),
            None => schemas(items.j_son_schemas),
        };
        o.insert("items".into(), v);
    }
    if !p.all_of.is_empty() {
        o.insert("allOf".into(), schemas(p.all_of));
    }
    if !p.one_of.is_empty() {
        o.insert("oneOf".into(), schemas(p.one_of));
    }
    if !p.any_of.is_empty() {
        o.insert("anyOf".into(), schemas(p.any_of));
    }
    if let Some(not) = p.not {
        o.insert("not".into(), schema(*not));
    }
    if !p.properties.is_empty() {
        o.insert("properties".into(), schema_map(p.properties));
    }
    if let Some(a) = p.additional_properties {
        o.insert("additionalProperties".into(), schema_or_bool(*a));
    }
    if !p.pattern_properties.is_empty() {
        o.insert("patternProperties".into(), schema_map(p.pattern_properties));
    }
    if !p.dependencies.is_empty() {
        let deps = p
            .dependencies
            .into_iter()
            .map(|(k, d)| {
                let v = match d.schema {
                    Some(s) => schema(s),
                    None => json!(d.property),
                };
                (k, v)
            })
            .collect();
        o.insert("dependencies".into(), Value::Object(deps));
    }
    if let Some(a) = p.additional_items {
        o.insert("additionalItems".into(), schema_or_bool(*a));
    }
    if !p.definitions.is_empty() {
        o.insert("definitions".into(), schema_map(p.definitions));
    }
    if let Some(d) = p.external_docs {
        let mut d_o = Map::new();
        put_text(&mut d_o, "description", d.description);
        put_text(&mut d_o, "url", d.url);
        o.insert("externalDocs".into(), Value::Object(d_o));
    }
    if let Some(e) = p.example {
        o.insert("example".into(), raw_json(e));
    }
    put_true(&mut o, "nullable", p.nullable);
    put_some(
        &mut o,
        "x-kubernetes-preserve-unknown-fields",
        p.x_kubernetes_preserve_unknown_fields,
    );
    put_true(
        &mut o,
        "x-kubernetes-embedded-resource",
        p.x_kubernetes_embedded_resource,
    );
    put_true(
        &mut o,
        "x-kubernetes-int-or-string",
        p.x_kubernetes_int_or_string,
    );
    put_strings(
        &mut o,
        "x-kubernetes-list-map-keys",
        p.x_kubernetes_list_map_keys,
    );
    put_some(&mut o, "x-kubernetes-list-type", p.x_kubernetes_list_type);
    put_some(&mut o, "x-kubernetes-map-type", p.x_kubernetes_map_type);
    if !p.x_kubernetes_validations.is_empty() {
        let rules = p
            .x_kubernetes_validations
            .into_iter()
            .map(|r| {
                let mut ro = Map::new();
                put_always(&mut ro, "rule", r.rule);
                put_text(&mut ro, "message", r.message);
                put_text(&mut ro, "messageExpression", r.message_expression);
                put_some(&mut ro, "reason", r.reason);
                put_text(&mut ro, "fieldPath", r.field_path);
                put_some(&mut ro, "optionalOldSelf", r.optional_old_self);
                Value::Object(ro)
            })
            .collect();
        o.insert("x-kubernetes-validations".into(), Value::Array(rules));
    }
    Value::Object(o)
}

fn status(s: pb::CustomResourceDefinitionStatus) -> Value {
    let mut o = Map::new();
    if !s.conditions.is_empty() {
        let conds = s
            .conditions
            .into_iter()
            .map(|c| {
                let mut co = Map::new();
                put_always(&mut co, "type", c.r#type);
                put_always(&mut co, "status", c.status);
                put_some(
                    &mut co,
                    "observedGeneration",
                    c.observed_generation.filter(|g| *g != 0),
                );
                if let Some(t) = super::time(c.last_transition_time) {
                    co.insert("lastTransitionTime".into(), json(t));
                }
                put_text(&mut co, "reason", c.reason);
                put_text(&mut co, "message", c.message);
                Value::Object(co)
            })
            .collect();
        o.insert("conditions".into(), Value::Array(conds));
    }
    o.insert(
        "acceptedNames".into(),
        names(s.accepted_names.unwrap_or_default()),
    );
    o.insert("storedVersions".into(), json!(s.stored_versions));
    put_some(
        &mut o,
        "observedGeneration",
        s.observed_generation.filter(|g| *g != 0),
    );
    Value::Object(o)
}
