//! Structural schemas of CustomResourceDefinitions: what the API server does
//! with a custom object's JSON before storing it.
//!
//! Mirrors apiextensions-apiserver: unknown fields are pruned (except under
//! `x-kubernetes-preserve-unknown-fields: true`; `apiVersion`, `kind` and
//! `metadata` always stay at the root and in `x-kubernetes-embedded-resource`
//! objects), non-nullable nulls without a default are dropped, defaults are
//! filled in, then the object is validated. Errors are worded as kube-openapi
//! words them and carry the field path the real server reports (`spec.minMember`,
//! `spec.items[0].name`), so clients see the same 422.
//!
//! Server-side apply reads the schema's list and map types
//! (`x-kubernetes-list-type`, `-list-map-keys`, `x-kubernetes-map-type`)
//! to merge and own fields (`store/fields.rs`).
//!
//! CEL rules (`x-kubernetes-validations`) are compiled with the schema and
//! run after its validation ([`Schema::validate_rules`], `cel.rs`).
//!
//! On updates, errors at values unchanged from their correlated old ones
//! are ratcheted ([`Schema::ratchet`]).

pub(crate) mod cel;

use crate::error::{go_float, go_quote, go_value, FieldError, FieldErrorKind};
use regex::Regex;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// One node of a structural schema.
#[derive(Debug, Clone, Default)]
pub(crate) struct Schema {
    ty: Option<String>,
    nullable: bool,
    format: Option<String>,
    properties: BTreeMap<String, Schema>,
    additional: Option<Additional>,
    items: Option<Box<Schema>>,
    required: Vec<String>,
    enumeration: Option<Vec<Value>>,
    minimum: Option<f64>,
    exclusive_minimum: bool,
    maximum: Option<f64>,
    exclusive_maximum: bool,
    multiple_of: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    pattern: Option<(String, Regex)>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    default: Option<Value>,
    preserve_unknown: bool,
    embedded: bool,
    int_or_string: bool,
    all_of: Vec<Schema>,
    any_of: Vec<Schema>,
    one_of: Vec<Schema>,
    not: Option<Box<Schema>>,
    /// `x-kubernetes-list-map-keys` of a `x-kubernetes-list-type: map` list.
    map_keys: Option<Vec<String>>,
    /// `x-kubernetes-list-type: set`.
    set_list: bool,
    /// `x-kubernetes-map-type: atomic` (or an atomic list: a list with no
    /// `x-kubernetes-list-type`, or `atomic`, is owned as a whole).
    atomic_map: bool,
    /// The compiled `x-kubernetes-validations` of this node.
    rules: Option<std::sync::Arc<cel::Rules>>,
    /// Whether this node or one below has rules: the walk that runs them
    /// skips the rest, so objects of a CRD without rules pay nothing.
    rules_below: bool,
}

/// `additionalProperties`: a schema for every other key, or a boolean.
#[derive(Debug, Clone)]
enum Additional {
    Schema(Box<Schema>),
    Bool(bool),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Field,
    Item,
    /// Inside allOf/anyOf/oneOf/not: value validation only.
    Junctor,
}

const TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];

/// The metadata fields a Kubernetes object may carry (`ObjectMeta`); the
/// server drops any other key of `metadata`.
const OBJECT_META: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl Schema {
    /// Reads an `openAPIV3Schema` and checks it is structural, reporting
    /// errors under `path` (`spec.versions[0].schema.openAPIV3Schema`).
    pub(crate) fn parse(v: &Value, path: &str) -> Result<Schema, Vec<FieldError>> {
        let mut errs = Vec::new();
        let place = cel::Place::root();
        let s = parse_node(v, path, Level::Root, &place, &mut errs);
        errs.sort_by_key(|e| e.to_string());
        errs.dedup();
        // After the nodes' errors, as kube-apiserver adds them.
        errs.extend(place.total.borrow().errors(path));
        if errs.is_empty() {
            Ok(s)
        } else {
            Err(errs)
        }
    }

    /// Reads a built-in kind's OpenAPI schema (not held to the rules of a
    /// CRD's structural schema: its `metadata` is all of ObjectMeta), for
    /// its types only.
    pub(crate) fn parse_types(v: &Value) -> Schema {
        let mut errs = Vec::new();
        let place = cel::Place::root();
        parse_node(v, "", Level::Field, &place, &mut errs)
    }

    /// Prunes, drops non-nullable nulls, then fills defaults: what the
    /// server does to a custom object on decoding (a request body, or the
    /// stored object when the schema changed). Returns the unknown fields
    /// pruned, as paths.
    pub(crate) fn coerce(&self, obj: &mut Value) -> Vec<String> {
        let mut unknown = Vec::new();
        prune(obj, Some(self), true, "", &mut unknown);
        prune_nulls(obj, Some(self));
        default(obj, Some(self));
        unknown.sort();
        unknown
    }

    /// The unknown fields of `obj` (what `fieldValidation=Strict` refuses),
    /// without changing it.
    pub(crate) fn unknown_fields(&self, obj: &Value) -> Vec<String> {
        let mut copy = obj.clone();
        let mut unknown = Vec::new();
        prune(&mut copy, Some(self), true, "", &mut unknown);
        unknown.sort();
        unknown
    }

    /// The unknown fields of a built-in object, against its kind's schema
    /// (what Go's strict decoding of the kind's type finds): an object
    /// whose schema names neither properties nor additional properties
    /// (`RawExtension`, `FieldsV1`, a recursion cut short) takes any.
    pub(crate) fn unknown_typed_fields(&self, obj: &Value) -> Vec<String> {
        fn walk(x: &Value, s: &Schema, path: &str, out: &mut Vec<String>) {
            match x {
                Value::Object(m) => {
                    if s.properties.is_empty() && s.additional.is_none() {
                        return;
                    }
                    for (k, v) in m {
                        if let Some(p) = s.properties.get(k) {
                            walk(v, p, &child(path, k), out);
                        } else {
                            match &s.additional {
                                Some(Additional::Schema(a)) => walk(v, a, &child(path, k), out),
                                Some(Additional::Bool(true)) => {}
                                _ => out.push(child(path, k)),
                            }
                        }
                    }
                }
                Value::Array(a) => {
                    if let Some(items) = s.items.as_deref() {
                        for (i, v) in a.iter().enumerate() {
                            walk(v, items, &format!("{path}[{i}]"), out);
                        }
                    }
                }
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(obj, self, "", &mut out);
        out
    }

    /// The schema of field `k` of an object (a property, or the schema of
    /// `additionalProperties`).
    pub(crate) fn field(&self, k: &str) -> Option<&Schema> {
        field_schema(Some(self), k)
    }

    /// The keys of an `x-kubernetes-list-type: map` list.
    pub(crate) fn list_map_keys(&self) -> Option<&[String]> {
        self.map_keys.as_deref()
    }

    /// Whether a list is `x-kubernetes-list-type: set`.
    pub(crate) fn is_set_list(&self) -> bool {
        self.set_list
    }

    /// Whether an object is `x-kubernetes-map-type: atomic`.
    pub(crate) fn is_atomic_map(&self) -> bool {
        self.atomic_map
    }

    /// Whether `k` is one of an object's declared `properties` (not a key
    /// of `additionalProperties` or of preserved unknown fields).
    pub(crate) fn declares(&self, k: &str) -> bool {
        self.properties.contains_key(k)
    }

    /// The schema of a list's items.
    pub(crate) fn item(&self) -> Option<&Schema> {
        self.items.as_deref()
    }

    /// Validates `obj` against the schema; an empty list when it is valid.
    pub(crate) fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut errs = Vec::new();
        validate(obj, self, "", &mut errs);
        errs
    }

    /// Ratcheting (`CRDValidationRatcheting`, on by default): on an
    /// update, a schema error at a value that did not change from its
    /// correlated old value (the same field, the same map key, the same
    /// map-list entry by its keys; nothing inside atomic or set lists) is
    /// let through.
    pub(crate) fn ratchet(&self, errs: &mut Vec<FieldError>, obj: &Value, old: &Value) {
        errs.retain(|e| {
            !matches!(
                correlated(self, obj, old, &e.field),
                Some((n, o)) if n == o
            )
        });
    }

    /// Whether any node of the schema has CEL rules.
    pub(crate) fn has_rules(&self) -> bool {
        self.rules_below
    }

    /// Runs the CEL rules (`x-kubernetes-validations`) on `obj`, with `old`
    /// the stored object of an update; an empty list when all pass.
    pub(crate) fn validate_rules(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        if !self.rules_below {
            return Vec::new();
        }
        let mut walk = cel::Walk::new();
        run_rules(self, true, obj, old, "", &mut walk);
        walk.errs
    }
}

/// The values at field path `path` (`spec.list[0].field`, `spec.map.k`) in
/// `new` and, correlated, in `old`; `None` where either has none or the
/// path goes through an uncorrelatable list.
fn correlated<'v>(
    s: &Schema,
    new: &'v Value,
    old: &'v Value,
    path: &str,
) -> Option<(&'v Value, &'v Value)> {
    let (mut s, mut n, mut o) = (s, new, old);
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let i: usize = r[..end].parse().ok()?;
            rest = &r[end + 1..];
            let keys = s.map_keys.as_ref()?;
            s = s.items.as_deref()?;
            n = n.as_array()?.get(i)?;
            let key = |y: &Value| -> Vec<Value> {
                keys.iter()
                    .map(|k| y.get(k).cloned().unwrap_or(Value::Null))
                    .collect()
            };
            let want = key(n);
            o = o.as_array()?.iter().find(|y| key(y) == want)?;
        } else {
            let r = rest.strip_prefix('.').unwrap_or(rest);
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let k = &r[..end];
            rest = &r[end..];
            s = s.field(k)?;
            n = n.get(k)?;
            o = o.get(k)?;
        }
    }
    Some((n, o))
}

/// Runs the rules of `s` and of the nodes below it where `v` has values;
/// `old` is the correlated old value (none inside atomic and set lists).
fn run_rules(
    s: &Schema,
    root: bool,
    v: &Value,
    old: Option<&Value>,
    path: &str,
    walk: &mut cel::Walk,
) {
    if !s.rules_below || v.is_null() {
        return;
    }
    if let Some(rules) = &s.rules {
        rules.run(s, root, v, old, path, walk);
    }
    match v {
        Value::Object(m) => {
            if let Some(Additional::Schema(a)) = &s.additional {
                for (k, x) in m {
                    let o = old.and_then(|o| o.get(k));
                    run_rules(a, a.embedded, x, o, &format!("{path}[{k}]"), walk);
                }
            } else {
                for (k, p) in &s.properties {
                    if let Some(x) = m.get(k) {
                        let o = old.and_then(|o| o.get(k));
                        run_rules(p, p.embedded, x, o, &child(path, k), walk);
                    }
                }
            }
        }
        Value::Array(a) => {
            let Some(items) = s.items.as_deref() else {
                return;
            };
            let olds = old.and_then(Value::as_array);
            for (i, x) in a.iter().enumerate() {
                let o = match (&s.map_keys, olds) {
                    (Some(keys), Some(olds)) => {
                        let key = |y: &Value| -> Vec<Value> {
                            keys.iter()
                                .map(|k| y.get(k).cloned().unwrap_or(Value::Null))
                                .collect()
                        };
                        let want = key(x);
                        olds.iter().find(|y| key(y) == want)
                    }
                    _ => None,
                };
                run_rules(items, items.embedded, x, o, &format!("{path}[{i}]"), walk);
            }
        }
        _ => {}
    }
}

fn parse_node(
    v: &Value,
    path: &str,
    level: Level,
    place: &cel::Place,
    errs: &mut Vec<FieldError>,
) -> Schema {
    let errs_before = errs.len();
    let mut s = Schema::default();
    let Some(m) = v.as_object() else {
        errs.push(FieldError::invalid(path, v, "must be a schema object"));
        return s;
    };
    let at = |k: &str| format!("{path}.{k}");
    for (k, what) in [
        ("id", "id is not supported"),
        ("additionalItems", "additionalItems is not supported"),
        ("patternProperties", "patternProperties is not supported"),
        ("definitions", "definitions is not supported"),
        ("dependencies", "dependencies is not supported"),
        ("$ref", "$ref is not supported"),
    ] {
        if m.contains_key(k) {
            errs.push(FieldError::forbidden(at(k), what));
        }
    }
    let flag = |k: &str, errs: &mut Vec<FieldError>| match m.get(k) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            errs.push(FieldError::invalid(at(k), other, "must be a boolean"));
            false
        }
    };
    let uint = |k: &str, errs: &mut Vec<FieldError>| match m.get(k) {
        None | Some(Value::Null) => None,
        Some(x) => match x.as_u64() {
            Some(n) => Some(n),
            None => {
                errs.push(FieldError::invalid(
                    at(k),
                    x,
                    "must be a non-negative integer",
                ));
                None
            }
        },
    };
    let num = |k: &str, errs: &mut Vec<FieldError>| match m.get(k) {
        None | Some(Value::Null) => None,
        Some(x) => match x.as_f64() {
            Some(n) => Some(n),
            None => {
                errs.push(FieldError::invalid(at(k), x, "must be a number"));
                None
            }
        },
    };
    match m.get("type") {
        None | Some(Value::Null) => {}
        Some(Value::String(t)) if t.is_empty() => {}
        Some(Value::String(t)) if t == "null" => errs.push(FieldError::forbidden(
            at("type"),
            "type cannot be set to null, use nullable as an alternative",
        )),
        Some(Value::String(t)) if TYPES.contains(&t.as_str()) => s.ty = Some(t.clone()),
        Some(other) => {
            let supported: Vec<String> = TYPES.iter().map(|t| t.to_string()).collect();
            errs.push(FieldError::not_supported(at("type"), other, &supported));
        }
    }
    s.nullable = flag("nullable", errs);
    s.preserve_unknown = flag("x-kubernetes-preserve-unknown-fields", errs);
    if m.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errs.push(FieldError::invalid(
            at("x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(false),
            "must be true or undefined",
        ));
    }
    s.embedded = flag("x-kubernetes-embedded-resource", errs);
    s.int_or_string = flag("x-kubernetes-int-or-string", errs);
    s.set_list = m.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("set");
    s.atomic_map = m.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic");
    if m.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map") {
        s.map_keys = m
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|ks| {
                ks.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .filter(|ks: &Vec<String>| !ks.is_empty());
    }
    if flag("uniqueItems", errs) {
        errs.push(FieldError::forbidden(
            at("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    s.format = m.get("format").and_then(Value::as_str).map(str::to_string);
    s.minimum = num("minimum", errs);
    s.maximum = num("maximum", errs);
    s.exclusive_minimum = flag("exclusiveMinimum", errs);
    s.exclusive_maximum = flag("exclusiveMaximum", errs);
    s.multiple_of = num("multipleOf", errs);
    if s.multiple_of.is_some_and(|f| f <= 0.0) {
        errs.push(FieldError::invalid(
            at("multipleOf"),
            &m["multipleOf"],
            "must be greater than zero",
        ));
    }
    s.min_length = uint("minLength", errs);
    s.max_length = uint("maxLength", errs);
    s.min_items = uint("minItems", errs);
    s.max_items = uint("maxItems", errs);
    s.min_properties = uint("minProperties", errs);
    s.max_properties = uint("maxProperties", errs);
    if let Some(p) = m.get("pattern").filter(|p| !p.is_null()) {
        match p.as_str().map(|p| (p, Regex::new(p))) {
            Some((p, Ok(re))) => s.pattern = Some((p.to_string(), re)),
            Some((_, Err(e))) => errs.push(FieldError::invalid(
                at("pattern"),
                p,
                format!("must be a valid regular expression, but isn't: {e}"),
            )),
            None => errs.push(FieldError::invalid(at("pattern"), p, "must be a string")),
        }
    }
    match m.get("enum") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) => s.enumeration = Some(a.clone()),
        Some(other) => errs.push(FieldError::invalid(at("enum"), other, "must be a list")),
    }
    match m.get("required") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {
            s.required = a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        }
        Some(other) => errs.push(FieldError::invalid(
            at("required"),
            other,
            "must be a list of property names",
        )),
    }
    s.default = m.get("default").filter(|d| !d.is_null()).cloned();
    if let Some(props) = m.get("properties").filter(|p| !p.is_null()) {
        match props.as_object() {
            Some(props) => {
                for (k, pv) in props {
                    let p = parse_node(
                        pv,
                        &format!("{path}.properties[{k}]"),
                        Level::Field,
                        place,
                        errs,
                    );
                    s.properties.insert(k.clone(), p);
                }
            }
            None => errs.push(FieldError::invalid(
                at("properties"),
                props,
                "must be a map",
            )),
        }
    }
    match m.get("additionalProperties") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => s.additional = Some(Additional::Bool(*b)),
        Some(a) => {
            let below = cel::Place {
                cardinality: place.cardinality * most_entries(m, "maxProperties", a, 5),
                uncorrelatable: place.uncorrelatable.clone(),
                total: place.total.clone(),
            };
            let ap = parse_node(a, &at("additionalProperties"), Level::Field, &below, errs);
            s.additional = Some(Additional::Schema(Box::new(ap)));
        }
    }
    if s.additional.is_some() && !s.properties.is_empty() {
        errs.push(FieldError::forbidden(
            at("additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    match m.get("items") {
        None | Some(Value::Null) => {}
        Some(Value::Array(_)) => errs.push(FieldError::forbidden(
            at("items"),
            "items must be a schema object and not an array",
        )),
        Some(i) => {
            let correlatable =
                m.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map");
            let below = cel::Place {
                cardinality: place.cardinality * most_entries(m, "maxItems", i, 1),
                uncorrelatable: match &place.uncorrelatable {
                    None if !correlatable => Some(at("items")),
                    u => u.clone(),
                },
                total: place.total.clone(),
            };
            s.items = Some(Box::new(parse_node(
                i,
                &at("items"),
                Level::Item,
                &below,
                errs,
            )))
        }
    }
    for (k, list) in [
        ("allOf", &mut s.all_of),
        ("anyOf", &mut s.any_of),
        ("oneOf", &mut s.one_of),
    ] {
        if let Some(v) = m.get(k).filter(|v| !v.is_null()) {
            match v.as_array() {
                Some(a) => {
                    for (i, x) in a.iter().enumerate() {
                        list.push(parse_node(
                            x,
                            &format!("{path}.{k}[{i}]"),
                            Level::Junctor,
                            place,
                            errs,
                        ));
                    }
                }
                None => errs.push(FieldError::invalid(at(k), v, "must be a list of schemas")),
            }
        }
    }
    if let Some(n) = m.get("not").filter(|v| !v.is_null()) {
        s.not = Some(Box::new(parse_node(
            n,
            &at("not"),
            Level::Junctor,
            place,
            errs,
        )));
    }

    // The structural invariants.
    if level == Level::Junctor {
        return s;
    }
    if s.ty.as_deref() == Some("array") && s.items.is_none() {
        errs.push(FieldError::required(at("items"), "must be specified"));
    }
    if level == Level::Root && s.additional.is_some() {
        errs.push(FieldError::forbidden(
            at("additionalProperties"),
            "must not be used at the root",
        ));
    }
    if s.embedded && s.ty.as_deref() != Some("object") {
        match &s.ty {
            None => errs.push(FieldError::required(
                at("type"),
                "must be object if x-kubernetes-embedded-resource is true",
            )),
            Some(t) => errs.push(FieldError::invalid(
                at("type"),
                &Value::String(t.clone()),
                "must be object if x-kubernetes-embedded-resource is true",
            )),
        }
    } else if s.ty.is_none() && !s.int_or_string && !s.preserve_unknown {
        let what = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            _ => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(at("type"), what));
    }
    if s.embedded && s.additional.is_some() {
        errs.push(FieldError::forbidden(
            at("additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if level == Level::Root {
        if let Some(t) = s.ty.as_deref().filter(|t| *t != "object") {
            errs.push(FieldError::invalid(
                at("type"),
                &Value::String(t.into()),
                "must be object at the root",
            ));
        }
        if let Some(md) = m.get("properties").and_then(|p| p.get("metadata")) {
            let allowed = md.as_object().is_some_and(|md| {
                md.iter().all(|(k, v)| match k.as_str() {
                    "type" => v == "object",
                    "properties" => v
                        .as_object()
                        .is_some_and(|p| p.keys().all(|k| k == "name" || k == "generateName")),
                    _ => false,
                })
            });
            if !allowed {
                errs.push(FieldError::forbidden(
                    format!("{path}.properties[metadata]"),
                    "must not specify anything other than name and generateName, but metadata is implicitly specified",
                ));
            }
        }
    }
    if s.int_or_string && s.preserve_unknown {
        errs.push(FieldError::invalid(
            at("x-kubernetes-preserve-unknown-fields"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if s.int_or_string && s.embedded {
        errs.push(FieldError::invalid(
            at("x-kubernetes-embedded-resource"),
            &Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if s.embedded && !s.preserve_unknown && s.properties.is_empty() {
        errs.push(FieldError::required(
            at("properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
    // Rules compile only on a sound schema, as kube-apiserver's do (its
    // types would say little otherwise).
    if let Some(raw) = m.get("x-kubernetes-validations").filter(|r| !r.is_null()) {
        if errs.len() == errs_before {
            let root = level == Level::Root || s.embedded;
            s.rules =
                cel::Rules::compile(raw, &s, root, path, place, errs).map(std::sync::Arc::new);
        }
    }
    s.rules_below = s.rules.is_some()
        || s.properties.values().any(|p| p.rules_below)
        || s.items.as_ref().is_some_and(|i| i.rules_below)
        || matches!(&s.additional, Some(Additional::Schema(a)) if a.rules_below);
    s
}

/// How many entries a list (`maxItems`) or map (`maxProperties`) may hold:
/// its bound, else as many of the smallest entries of its item schema as
/// the largest request holds (apiserver's estimate). `overhead` is what
/// each entry adds beside its value (a comma; a key, quotes and a colon).
fn most_entries(m: &Map<String, Value>, bound: &str, item: &Value, overhead: u64) -> f64 {
    if let Some(n) = m.get(bound).and_then(Value::as_u64) {
        return n as f64;
    }
    let min = match item.get("type").and_then(Value::as_str) {
        Some("string") => 2,
        Some("boolean") => 4,
        Some("object" | "array") => 2,
        _ => 1,
    };
    ((3 * 1024 * 1024 - 2) / (min + overhead)) as f64
}

/// Keeps only `ObjectMeta`'s fields in a `metadata` object.
fn coerce_metadata(obj: &mut Map<String, Value>, path: &str, unknown: &mut Vec<String>) {
    if let Some(Value::Object(md)) = obj.get_mut("metadata") {
        md.retain(|k, _| {
            let keep = OBJECT_META.contains(&k.as_str());
            if !keep {
                unknown.push(child(&child(path, "metadata"), k));
            }
            keep
        });
    }
}

/// apiextensions' pruning: a field not in the schema goes, unless a
/// `x-kubernetes-preserve-unknown-fields` node says otherwise.
fn prune(x: &mut Value, s: Option<&Schema>, resource: bool, path: &str, unknown: &mut Vec<String>) {
    if let Some(s) = s.filter(|s| s.preserve_unknown) {
        return skip_prune(x, s, path, unknown);
    }
    match x {
        Value::Object(m) => {
            let Some(s) = s else {
                for k in m.keys() {
                    unknown.push(child(path, k));
                }
                m.clear();
                return;
            };
            let meta = resource || s.embedded;
            if meta {
                coerce_metadata(m, path, unknown);
            }
            m.retain(|k, v| {
                if meta && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    return true;
                }
                if let Some(p) = s.properties.get(k) {
                    prune(v, Some(p), false, &child(path, k), unknown);
                    true
                } else if let Some(a) = &s.additional {
                    let sub = match a {
                        Additional::Schema(a) => Some(&**a),
                        Additional::Bool(_) => None,
                    };
                    prune(v, sub, false, &child(path, k), unknown);
                    true
                } else {
                    unknown.push(child(path, k));
                    false
                }
            });
        }
        Value::Array(a) => {
            let items = s.and_then(|s| s.items.as_deref());
            for (i, v) in a.iter_mut().enumerate() {
                prune(v, items, false, &format!("{path}[{i}]"), unknown);
            }
        }
        _ => {}
    }
}

fn skip_prune(x: &mut Value, s: &Schema, path: &str, unknown: &mut Vec<String>) {
    match x {
        Value::Object(m) => {
            if s.embedded {
                coerce_metadata(m, path, unknown);
            }
            for (k, v) in m.iter_mut() {
                if s.embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                if let Some(p) = s.properties.get(k) {
                    prune(v, Some(p), false, &child(path, k), unknown);
                } else if let Some(Additional::Schema(a)) = &s.additional {
                    prune(v, Some(a), false, &child(path, k), unknown);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = s.items.as_deref() {
                for (i, v) in a.iter_mut().enumerate() {
                    skip_prune(v, items, &format!("{path}[{i}]"), unknown);
                }
            }
        }
        _ => {}
    }
}

fn field_schema<'a>(s: Option<&'a Schema>, k: &str) -> Option<&'a Schema> {
    let s = s?;
    s.properties.get(k).or(match &s.additional {
        Some(Additional::Schema(a)) => Some(a),
        _ => None,
    })
}

/// Removes nulls of non-nullable fields that have no default (those with
/// one get it below).
fn prune_nulls(x: &mut Value, s: Option<&Schema>) {
    match x {
        Value::Object(m) => m.retain(|k, v| {
            let fs = field_schema(s, k);
            if v.is_null() && fs.is_some_and(|fs| !fs.nullable && fs.default.is_none()) {
                return false;
            }
            prune_nulls(v, fs);
            true
        }),
        Value::Array(a) => {
            let items = s.and_then(|s| s.items.as_deref());
            for v in a {
                prune_nulls(v, items);
            }
        }
        _ => {}
    }
}

fn default(x: &mut Value, s: Option<&Schema>) {
    let Some(s) = s else { return };
    match x {
        Value::Object(m) => {
            for (k, p) in &s.properties {
                if let Some(d) = &p.default {
                    match m.get(k) {
                        None => {
                            m.insert(k.clone(), d.clone());
                        }
                        Some(Value::Null) if !p.nullable => {
                            m.insert(k.clone(), d.clone());
                        }
                        _ => {}
                    }
                }
            }
            for (k, v) in m.iter_mut() {
                if let Some(p) = s.properties.get(k) {
                    default(v, Some(p));
                } else if let Some(Additional::Schema(a)) = &s.additional {
                    if v.is_null() && !a.nullable {
                        if let Some(d) = &a.default {
                            *v = d.clone();
                        }
                    }
                    default(v, Some(a));
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = s.items.as_deref() {
                for v in a {
                    if v.is_null() && !items.nullable {
                        if let Some(d) = &items.default {
                            *v = d.clone();
                        }
                    }
                    default(v, Some(items));
                }
            }
        }
        _ => {}
    }
}

/// The JSON type name of a value as go-openapi infers it.
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::String(_) => "string",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integral(v: &Value) -> bool {
    v.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// `{path} in body {what}` with the path kube-openapi prints (`.` at the root).
fn in_body(path: &str, what: &str) -> String {
    let p = if path.is_empty() { "." } else { path };
    format!("{p} in body {what}")
}

fn push(
    errs: &mut Vec<FieldError>,
    kind: FieldErrorKind,
    path: &str,
    value: Option<String>,
    detail: String,
) {
    errs.push(FieldError::new(kind, path, value, detail));
}

fn validate(v: &Value, s: &Schema, path: &str, errs: &mut Vec<FieldError>) {
    if v.is_null() {
        let types = expected_types(s);
        if !types.is_empty() && !s.nullable {
            let d = in_body(
                path,
                &format!("must be of type {}: \"null\"", types.join(",")),
            );
            push(
                errs,
                FieldErrorKind::TypeInvalid,
                path,
                Some(go_quote("null")),
                d,
            );
        }
        return;
    }
    let actual = type_of(v);
    let types = expected_types(s);
    if !types.is_empty() {
        let ok = types.contains(&actual)
            || (actual == "number" && is_integral(v) && types.contains(&"integer"))
            || (actual == "integer" && types.contains(&"number"));
        if !ok {
            let d = in_body(
                path,
                &format!("must be of type {}: {}", types.join(","), go_quote(actual)),
            );
            push(
                errs,
                FieldErrorKind::TypeInvalid,
                path,
                Some(go_quote(actual)),
                d,
            );
            return;
        }
    }
    if let Some(values) = &s.enumeration {
        if !values.iter().any(|e| e == v) {
            let allowed: Vec<String> = values
                .iter()
                .map(|a| match a {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            errs.push(FieldError::not_supported(path, v, &allowed));
        }
    }
    match v {
        Value::String(text) => validate_string(text, v, s, path, errs),
        Value::Number(_) => validate_number(v, s, path, errs),
        Value::Array(a) => {
            let n = a.len() as u64;
            if let Some(max) = s.max_items.filter(|m| n > *m) {
                let d = format!(
                    "must have at most {max} {}",
                    if max == 1 { "item" } else { "items" }
                );
                push(errs, FieldErrorKind::TooMany, path, Some(n.to_string()), d);
            }
            if let Some(min) = s.min_items.filter(|m| n < *m) {
                let d = in_body(path, &format!("should have at least {min} items"));
                push(errs, FieldErrorKind::Invalid, path, Some(n.to_string()), d);
            }
            if let Some(items) = s.items.as_deref() {
                for (i, x) in a.iter().enumerate() {
                    validate(x, items, &format!("{path}[{i}]"), errs);
                }
            }
        }
        Value::Object(m) => {
            let n = m.len() as u64;
            if let Some(max) = s.max_properties.filter(|x| n > *x) {
                let d = format!(
                    "must have at most {max} {}",
                    if max == 1 { "item" } else { "items" }
                );
                push(errs, FieldErrorKind::TooMany, path, Some(n.to_string()), d);
            }
            if let Some(min) = s.min_properties.filter(|x| n < *x) {
                let d = in_body(path, &format!("should have at least {min} properties"));
                push(errs, FieldErrorKind::Invalid, path, Some(n.to_string()), d);
            }
            if let Some(Additional::Bool(false)) = s.additional {
                for k in m.keys().filter(|k| !s.properties.contains_key(*k)) {
                    let p = if path.is_empty() { "." } else { path };
                    let d = format!("{p}.{k} in body is a forbidden property");
                    push(errs, FieldErrorKind::Invalid, path, Some(go_quote(k)), d);
                }
            }
            for (k, p) in &s.properties {
                if let Some(x) = m.get(k) {
                    validate(x, p, &child(path, k), errs);
                }
            }
            for k in &s.required {
                if !m.contains_key(k) {
                    push(
                        errs,
                        FieldErrorKind::Required,
                        &child(path, k),
                        None,
                        String::new(),
                    );
                }
            }
            if let Some(Additional::Schema(a)) = &s.additional {
                for (k, x) in m {
                    validate(x, a, &child(path, k), errs);
                }
            }
        }
        _ => {}
    }
    validate_junctors(v, s, path, errs);
}

fn expected_types(s: &Schema) -> Vec<&str> {
    if s.int_or_string {
        vec!["integer", "string"]
    } else {
        s.ty.as_deref().into_iter().collect()
    }
}

fn validate_string(text: &str, v: &Value, s: &Schema, path: &str, errs: &mut Vec<FieldError>) {
    let chars = text.chars().count() as u64;
    if let Some(max) = s.max_length.filter(|m| chars > *m) {
        let d = format!(
            "may not be more than {max} {}",
            if max == 1 { "byte" } else { "bytes" }
        );
        push(errs, FieldErrorKind::TooLong, path, None, d);
    }
    if let Some(min) = s.min_length.filter(|m| chars < *m) {
        let d = in_body(path, &format!("should be at least {min} chars long"));
        push(errs, FieldErrorKind::Invalid, path, Some(go_value(v)), d);
    }
    if let Some((p, re)) = &s.pattern {
        if !re.is_match(text) {
            let d = in_body(path, &format!("should match '{p}'"));
            push(errs, FieldErrorKind::Invalid, path, Some(go_value(v)), d);
        }
    }
    if let Some(f) = s.format.as_deref() {
        if !format_ok(f, text) {
            let d = in_body(path, &format!("must be of type {f}: {}", go_quote(text)));
            push(
                errs,
                FieldErrorKind::TypeInvalid,
                path,
                Some(go_quote(text)),
                d,
            );
        }
    }
}

fn validate_number(v: &Value, s: &Schema, path: &str, errs: &mut Vec<FieldError>) {
    let x = v.as_f64().unwrap_or(0.0);
    // An integer value prints its bound as an integer, a float as Go's %v.
    let bound = |b: f64| {
        if type_of(v) == "integer" {
            (b as i64).to_string()
        } else {
            go_float(b)
        }
    };
    if let Some(max) = s.maximum {
        let bad = if s.exclusive_maximum {
            x >= max
        } else {
            x > max
        };
        if bad {
            let what = if s.exclusive_maximum {
                "should be less than"
            } else {
                "should be less than or equal to"
            };
            let d = in_body(path, &format!("{what} {}", bound(max)));
            push(errs, FieldErrorKind::Invalid, path, Some(go_value(v)), d);
        }
    }
    if let Some(min) = s.minimum {
        let bad = if s.exclusive_minimum {
            x <= min
        } else {
            x < min
        };
        if bad {
            let what = if s.exclusive_minimum {
                "should be greater than"
            } else {
                "should be greater than or equal to"
            };
            let d = in_body(path, &format!("{what} {}", bound(min)));
            push(errs, FieldErrorKind::Invalid, path, Some(go_value(v)), d);
        }
    }
    if let Some(m) = s.multiple_of {
        let q = x / m;
        if (q - q.round()).abs() > 1e-9 {
            let d = in_body(path, &format!("should be a multiple of {}", go_float(m)));
            push(errs, FieldErrorKind::Invalid, path, Some(go_value(v)), d);
        }
    }
}

fn validate_junctors(v: &Value, s: &Schema, path: &str, errs: &mut Vec<FieldError>) {
    let passes = |sub: &Schema| {
        let mut e = Vec::new();
        validate(v, sub, path, &mut e);
        e.is_empty()
    };
    let p = if path.is_empty() { "." } else { path };
    for sub in &s.all_of {
        validate(v, sub, path, errs);
    }
    if !s.any_of.is_empty() && !s.any_of.iter().any(passes) {
        let d = format!("{p} must validate at least one schema (anyOf)");
        push(errs, FieldErrorKind::Invalid, path, Some(go_quote("")), d);
    }
    if !s.one_of.is_empty() && s.one_of.iter().filter(|x| passes(x)).count() != 1 {
        let d = format!("{p} must validate one and only one schema (oneOf)");
        push(errs, FieldErrorKind::Invalid, path, Some(go_quote("")), d);
    }
    if let Some(n) = &s.not {
        if passes(n) {
            let d = format!("{p} must not validate the schema (not)");
            push(errs, FieldErrorKind::Invalid, path, Some(go_quote("")), d);
        }
    }
}

/// The string formats the API server checks, where the check is cheap;
/// any other format is accepted, as the server does for unknown ones.
fn format_ok(format: &str, s: &str) -> bool {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    fn re(p: &str) -> Regex {
        Regex::new(p).expect("a valid built-in pattern")
    }
    match format.replace('-', "").as_str() {
        "datetime" => chrono::DateTime::parse_from_rfc3339(s).is_ok(),
        "date" => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok(),
        "uuid" => re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
            .is_match(s),
        "uuid3" => re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
            .is_match(s),
        "uuid4" => {
            re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
                .is_match(s)
        }
        "uuid5" => {
            re(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
                .is_match(s)
        }
        "byte" => s.len().is_multiple_of(4) && re(r"^[A-Za-z0-9+/]*={0,2}$").is_match(s),
        "ipv4" => s.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<Ipv6Addr>().is_ok(),
        "cidr" => s.split_once('/').is_some_and(|(ip, bits)| {
            let max = match ip.parse::<IpAddr>() {
                Ok(IpAddr::V4(_)) => 32,
                Ok(IpAddr::V6(_)) => 128,
                Err(_) => return false,
            };
            bits.parse::<u8>().is_ok_and(|b| b <= max)
        }),
        "mac" => re(r"^([0-9A-Fa-f]{2}[:-]){5}([0-9A-Fa-f]{2})$").is_match(s),
        "hostname" => {
            s.len() <= 255
                && s.split('.').all(|l| {
                    !l.is_empty()
                        && l.len() <= 63
                        && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                        && !l.starts_with('-')
                        && !l.ends_with('-')
                })
        }
        "duration" => re(r"^[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+$").is_match(s) || s == "0",
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> Schema {
        Schema::parse(&v, "s").unwrap()
    }

    #[test]
    fn structural_errors_name_their_fields() {
        let errs = Schema::parse(
            &json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "array"}}}}}),
            "spec.versions[0].schema.openAPIV3Schema",
        )
        .unwrap_err();
        let msgs: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            msgs,
            vec![
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[a].items: Required value: must be specified",
                "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
            ]
        );
    }

    #[test]
    fn prune_default_and_keep_meta() {
        let s = schema(json!({"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "n": {"type": "integer", "default": 1},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "q": {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": true}},
            "tmpl": {"type": "object", "x-kubernetes-embedded-resource": true,
                     "properties": {"spec": {"type": "object"}}},
        }}}}));
        let mut o = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x", "bogus": 1},
            "spec": {"junk": 1, "free": {"a": {"b": 1}}, "q": {"cpu": "1", "mem": 2},
                     "tmpl": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}, "other": 1}},
            "status": {"x": 1}});
        let unknown = s.coerce(&mut o);
        assert_eq!(
            unknown,
            vec!["metadata.bogus", "spec.junk", "spec.tmpl.other", "status"]
        );
        assert_eq!(
            o,
            json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x"},
                "spec": {"n": 1, "free": {"a": {"b": 1}}, "q": {"cpu": "1", "mem": 2},
                         "tmpl": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}}})
        );
        assert!(s.validate(&o).is_empty());
    }

    #[test]
    fn validation_messages_are_the_real_ones() {
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object",
            "required": ["name"],
            "properties": {
                "minMember": {"type": "integer", "format": "int32", "minimum": 1},
                "phase": {"type": "string", "enum": ["A", "B"]},
                "name": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"},
                "items": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
                "ratio": {"type": "number", "maximum": 1.5, "exclusiveMaximum": true},
                "at": {"type": "string", "format": "date-time"},
            }}}}),
        );
        let msgs =
            |o: Value| -> Vec<String> { s.validate(&o).iter().map(ToString::to_string).collect() };
        assert_eq!(
            msgs(json!({"spec": {"minMember": "string", "name": "ab"}})),
            vec![
                r#"spec.minMember: Invalid value: "string": spec.minMember in body must be of type integer: "string""#
            ]
        );
        assert_eq!(
            msgs(json!({"spec": {"minMember": 0}})),
            vec![
                "spec.minMember: Invalid value: 0: spec.minMember in body should be greater than or equal to 1",
                "spec.name: Required value",
            ]
        );
        assert_eq!(
            msgs(
                json!({"spec": {"name": "ABCD", "phase": "C", "items": ["a", 1], "ratio": 1.5, "at": "yesterday"}})
            ),
            vec![
                r#"spec.at: Invalid value: "yesterday": spec.at in body must be of type date-time: "yesterday""#,
                "spec.items: Too many: 2: must have at most 1 item",
                r#"spec.items[1]: Invalid value: "integer": spec.items[1] in body must be of type string: "integer""#,
                "spec.name: Too long: may not be more than 3 bytes",
                r#"spec.name: Invalid value: "ABCD": spec.name in body should match '^[a-z]+$'"#,
                r#"spec.phase: Unsupported value: "C": supported values: "A", "B""#,
                "spec.ratio: Invalid value: 1.5: spec.ratio in body should be less than 1.5",
            ]
        );
        assert!(msgs(json!({"spec": {"name": "ab", "minMember": 2.0}})).is_empty());
    }

    #[test]
    fn nulls_go_or_get_their_default() {
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "a": {"type": "string"}, "b": {"type": "string", "default": "x"},
            "c": {"type": "string", "nullable": true}}}}}),
        );
        let mut o = json!({"spec": {"a": null, "b": null, "c": null}});
        s.coerce(&mut o);
        assert_eq!(o, json!({"spec": {"b": "x", "c": null}}));
        assert!(s.validate(&o).is_empty());
    }
}
