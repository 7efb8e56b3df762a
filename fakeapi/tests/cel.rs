//! CRDs' CEL validation rules (`x-kubernetes-validations`) over real HTTP:
//! the cases of Kubernetes' e2e suite (`CustomResourceValidationRules`,
//! `CRDValidationRatcheting`) and the shapes of rules real CRDs (Kueue's,
//! JobSet's) carry, with kube-apiserver v1.35.8's answers.

mod common;

use common::*;
use fakeapi::StoreConfig;
use serde_json::{json, Value};
use std::net::SocketAddr;

async fn send(addr: SocketAddr, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let bytes = serde_json::to_vec(body).unwrap();
    let ct = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    let r = raw(addr, method, path, &[("Content-Type", ct)], Some(&bytes)).await;
    let v = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    (r.status, v)
}

/// A namespaced CRD `widgets.cel.example.com` with `schema` at its root
/// and a status subresource.
fn crd(schema: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.cel.example.com"},
        "spec": {
            "group": "cel.example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "subresources": {"status": {}},
                          "schema": {"openAPIV3Schema": schema}}]
        }
    })
}

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/cel.example.com/v1/namespaces/default/widgets";

async fn get_crd(addr: SocketAddr) -> Value {
    let r = raw(
        addr,
        "GET",
        &format!("{CRDS}/widgets.cel.example.com"),
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    r.json()
}

fn widget(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "cel.example.com/v1", "kind": "Widget",
           "metadata": {"name": name}, "spec": spec})
}

fn messages(status: &Value) -> Vec<String> {
    status["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// The e2e suite's schema: rules on spec (arithmetic, `isSorted`, `sum`, a
/// nested `all` over a list of at most 725 items) and on status.
fn e2e_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": [
                    {"rule": "self.x + self.y > 0"},
                    {"rule": "self.firstArray.isSorted() && self.secondArray.isSorted() && ((self.firstArray.sum() + self.secondArray.sum()) % 2 == 0)"},
                    {"rule": "self.largeArray.all(x, self.largeArray.all(y, y == x))"}
                ],
                "properties": {
                    "x": {"type": "integer"},
                    "y": {"type": "integer"},
                    "firstArray": {"type": "array", "maxItems": 1000, "items": {"type": "integer"}},
                    "secondArray": {"type": "array", "maxItems": 1000, "items": {"type": "integer"}},
                    "largeArray": {"type": "array", "maxItems": 725, "items": {"type": "integer"}}
                }
            },
            "status": {
                "type": "object",
                "x-kubernetes-validations": [{"rule": "self.health == 'ok' || self.health == 'unhealthy'"}],
                "properties": {"health": {"type": "string"}}
            }
        }
    })
}

#[tokio::test]
async fn objects_that_fail_a_rule_are_refused_with_the_rule() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let (code, body) = send(addr, "POST", CRDS, &crd(e2e_schema())).await;
    assert_eq!(code, 201, "{body}");
    // Satisfies every rule.
    let ok = widget(
        "ok",
        json!({"x": 1, "y": 0, "firstArray": [3, 4], "secondArray": [5, 10], "largeArray": [2, 2]}),
    );
    let (code, body) = send(addr, "POST", WIDGETS, &ok).await;
    assert_eq!(code, 201, "{body}");
    // Fails the first rule; the others have no fields to read.
    let (code, body) = send(
        addr,
        "POST",
        WIDGETS,
        &widget("bad", json!({"x": 0, "y": 0})),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(body["reason"], "Invalid");
    let msgs = messages(&body);
    assert_eq!(
        msgs,
        vec![
            "spec: Invalid value: failed rule: self.x + self.y > 0",
            "spec: Invalid value: \"object\": no such key: firstArray evaluating rule: self.firstArray.isSorted() && self.secondArray.isSorted() && ((self.firstArray.sum() + self.secondArray.sum()) % 2 == 0)",
            "spec: Invalid value: \"object\": no such key: largeArray evaluating rule: self.largeArray.all(x, self.largeArray.all(y, y == x))",
        ],
        "{body}"
    );
    assert!(body["message"].as_str().unwrap().contains("failed rule"));
    // A status written through /status is held to status's rule.
    let (code, body) = send(
        addr,
        "PATCH",
        &format!("{WIDGETS}/ok/status"),
        &json!({"status": {"health": "sick"}}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        messages(&body),
        vec![
            "status: Invalid value: failed rule: self.health == 'ok' || self.health == 'unhealthy'"
        ]
    );
    let (code, body) = send(
        addr,
        "PATCH",
        &format!("{WIDGETS}/ok/status"),
        &json!({"status": {"health": "ok"}}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
}

#[tokio::test]
async fn a_rule_that_loops_too_long_is_stopped_at_the_call_limit() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let (code, body) = send(addr, "POST", CRDS, &crd(e2e_schema())).await;
    assert_eq!(code, 201, "{body}");
    let large = vec![20; 725];
    let (code, body) = send(
        addr,
        "POST",
        WIDGETS,
        &widget("large", json!({"largeArray": large})),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    let msgs = messages(&body);
    assert!(
        msgs.iter().any(|m| m.contains("call cost exceeds limit")),
        "{msgs:?}"
    );
    // A smaller list passes the same rule.
    let (code, body) = send(
        addr,
        "POST",
        WIDGETS,
        &widget("small", json!({"x": 1, "y": 1, "firstArray": [], "secondArray": [], "largeArray": vec![20; 100]})),
    )
    .await;
    assert_eq!(code, 201, "{body}");
}

/// Rules that cannot compile refuse their CRD, as kube-apiserver refuses
/// it: a field the schema does not have, a syntax error, an estimated cost
/// over the limit, a result that is not a bool.
#[tokio::test]
async fn rules_that_do_not_compile_refuse_the_crd() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let refused = |schema: Value| async move {
        let (code, body) = send(addr, "POST", CRDS, &crd(schema)).await;
        assert_eq!(code, 422, "{body}");
        messages(&body)
    };
    let msgs = refused(json!({"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-validations": [{"rule": "self.z == 100"}],
        "properties": {"x": {"type": "integer"}}}}}))
    .await;
    assert_eq!(
        msgs,
        vec![concat!(
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: ",
            "Invalid value: {\"Rule\":\"self.z == 100\",\"Message\":\"\",\"MessageExpression\":\"\",\"Reason\":null,\"FieldPath\":\"\",\"OptionalOldSelf\":null}: ",
            "compilation failed: ERROR: <input>:1:5: undefined field 'z'\n | self.z == 100\n | ....^"
        )]
    );
    let msgs = refused(json!({"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-validations": [{"rule": "self = 42"}]}}}))
    .await;
    assert_eq!(msgs.len(), 1);
    assert!(
        msgs[0].contains("compilation failed: ERROR: <input>:1:6: Syntax error:"),
        "{msgs:?}"
    );
    let msgs = refused(json!({"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"x": {"type": "array", "items": {
            "type": "array", "items": {"type": "string"},
            "x-kubernetes-validations": [{"rule": "self.all(s, s == 'string constant')"}]}}}}}}))
    .await;
    let advice = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
    let rule = "spec.validation.openAPIV3Schema.properties[spec].properties[x].items.x-kubernetes-validations[0].rule";
    assert_eq!(
        msgs,
        vec![
            format!("{rule}: Forbidden: estimated rule cost exceeds budget by factor of more than 100x {advice}"),
            format!("{rule}: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"),
            format!("spec.validation.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x {advice}"),
        ]
    );
    // A message whose size cel-go cannot bound costs too much too.
    let msgs = refused(json!({"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-validations": [{"rule": "!has(self.a) || !has(self.b)",
            "messageExpression": "'got ' + string(size([has(self.a), has(self.b)].filter(x, x)))"}],
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}}}))
    .await;
    assert!(msgs[0].ends_with(&format!("messageExpression: Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x {advice}")), "{msgs:?}");
    let msgs = refused(json!({"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-validations": [{"rule": "self.n + 1"}],
        "properties": {"n": {"type": "integer"}}}}}))
    .await;
    assert!(
        msgs[0].ends_with("cel expression must evaluate to a bool"),
        "{msgs:?}"
    );
    let msgs = refused(json!({"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-validations": [{"rule": "self.n + 'a' == 'b'"}],
        "properties": {"n": {"type": "integer"}}}}}))
    .await;
    assert!(
        msgs[0].contains("found no matching overload for '_+_' applied to '(int, string)'"),
        "{msgs:?}"
    );
    // The same CRD with the field the rule names is accepted.
    let (code, body) = send(
        addr,
        "POST",
        CRDS,
        &crd(json!({"type": "object", "properties": {"spec": {
            "type": "object", "x-kubernetes-validations": [{"rule": "self.z == 100"}],
            "properties": {"z": {"type": "integer"}}}}})),
    )
    .await;
    assert_eq!(code, 201, "{body}");
}

#[tokio::test]
async fn transition_rules_run_on_updates_only() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "num": {"type": "integer", "x-kubernetes-validations": [{"rule": "self > oldSelf"}]}}}}});
    let (code, body) = send(addr, "POST", CRDS, &crd(schema)).await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = send(addr, "POST", WIDGETS, &widget("w", json!({"num": 10}))).await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = send(
        addr,
        "PATCH",
        &format!("{WIDGETS}/w"),
        &json!({"spec": {"num": 9}}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        messages(&body),
        vec!["spec.num: Invalid value: 9: failed rule: self > oldSelf"]
    );
    let (code, body) = send(
        addr,
        "PATCH",
        &format!("{WIDGETS}/w"),
        &json!({"spec": {"num": 11}}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
}

/// The ratcheting suite's schema: a rule on a field, on a struct's field,
/// on a map-list entry's field (correlated by key), on a map value's field;
/// and on items of an atomic and a set list (never correlated).
fn ratcheting_schema(rule: Value) -> Value {
    let field = json!({"type": "string", "maxLength": 5, "x-kubernetes-validations": [rule]});
    json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "field": field,
        "struct": {"type": "object", "properties": {"field": field, "other": {"type": "string"}}},
        "list": {"type": "array", "maxItems": 5, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["key"],
                 "items": {"type": "object", "required": ["key"], "properties": {"key": {"type": "string"}, "field": field}}},
        "map": {"type": "object", "maxProperties": 5, "additionalProperties": {"type": "object", "properties": {"field": field}}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}}
    }}}})
}

fn every(v: &str) -> Value {
    json!({"field": v, "struct": {"field": v},
           "list": [{"key": "foo", "field": v}, {"key": "bar", "field": v}],
           "map": {"foo": {"field": v}, "bar": {"field": v}}})
}

const PATHS: [&str; 6] = [
    "spec.field",
    "spec.struct.field",
    "spec.list[0].field",
    "spec.list[1].field",
    "spec.map[foo].field",
    "spec.map[bar].field",
];

#[tokio::test]
async fn unchanged_invalid_values_are_ratcheted_changed_ones_are_not() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    // The object is written before the rule exists (as the suite does by
    // changing the CRD's schema).
    let (code, body) = send(
        addr,
        "POST",
        CRDS,
        &crd(ratcheting_schema(json!({"rule": "true"}))),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = send(addr, "POST", WIDGETS, &widget("w", every("bad"))).await;
    assert_eq!(code, 201, "{body}");
    let mut def = get_crd(addr).await;
    def["spec"]["versions"][0]["schema"]["openAPIV3Schema"] =
        ratcheting_schema(json!({"rule": "self == 'foo'"}));
    let (code, body) = send(
        addr,
        "PUT",
        &format!("{CRDS}/widgets.cel.example.com"),
        &def,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    // Untouched invalid values, a new valid entry beside them: accepted.
    let mut spec = every("bad");
    spec["struct"]["other"] = json!("x");
    spec["list"]
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "baz", "field": "foo"}));
    let (code, body) = send(
        addr,
        "PATCH",
        &format!("{WIDGETS}/w"),
        &json!({"spec": spec}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    // A new invalid value is refused, every one at its path.
    let (code, body) = send(
        addr,
        "PATCH",
        &format!("{WIDGETS}/w"),
        &json!({"spec": every("other")}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    let msgs = messages(&body);
    for p in PATHS {
        assert!(
            msgs.iter().any(|m| m.starts_with(&format!(
                "{p}: Invalid value: \"other\": failed rule: self == 'foo'"
            ))),
            "{p}: {msgs:?}"
        );
    }
}

#[tokio::test]
async fn items_of_atomic_and_set_lists_are_not_ratcheted() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let schema = |rule: Value| {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "atomicArray": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [rule.clone()]}},
            "setArray": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string", "x-kubernetes-validations": [rule]}}
        }}}})
    };
    let (code, body) = send(addr, "POST", CRDS, &crd(schema(json!({"rule": "true"})))).await;
    assert_eq!(code, 201, "{body}");
    let lists = |extra: bool| {
        let mut l = vec!["foo", "bar", "baz"];
        if extra {
            l.push("notfoo");
        }
        json!({"atomicArray": l, "setArray": l})
    };
    let (code, body) = send(addr, "POST", WIDGETS, &widget("w", lists(false))).await;
    assert_eq!(code, 201, "{body}");
    let mut def = get_crd(addr).await;
    def["spec"]["versions"][0]["schema"]["openAPIV3Schema"] =
        schema(json!({"rule": "self != 'foo'"}));
    let (code, body) = send(
        addr,
        "PUT",
        &format!("{CRDS}/widgets.cel.example.com"),
        &def,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = send(
        addr,
        "PATCH",
        &format!("{WIDGETS}/w"),
        &json!({"spec": lists(true)}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        messages(&body),
        vec![
            "spec.atomicArray[0]: Invalid value: \"foo\": failed rule: self != 'foo'",
            "spec.setArray[0]: Invalid value: \"foo\": failed rule: self != 'foo'",
        ]
    );
    // oldSelf cannot be used there: the CRD is refused.
    def = get_crd(addr).await;
    def["spec"]["versions"][0]["schema"]["openAPIV3Schema"] =
        schema(json!({"rule": "self == oldSelf"}));
    let (code, body) = send(
        addr,
        "PUT",
        &format!("{CRDS}/widgets.cel.example.com"),
        &def,
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert!(
        messages(&body)
            .iter()
            .any(|m| m
                .contains("oldSelf cannot be used on the uncorrelatable portion of the schema")),
        "{body}"
    );
}

#[tokio::test]
async fn transition_rules_are_not_ratcheted_and_optional_old_self_sees_new_values() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let (code, body) = send(
        addr,
        "POST",
        CRDS,
        &crd(ratcheting_schema(json!({"rule": "self != oldSelf"}))),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = send(addr, "POST", WIDGETS, &widget("w", every("foo"))).await;
    assert_eq!(code, 201, "{body}");
    // Unchanged values fail `self != oldSelf`: not let through.
    let (code, body) = send(
        addr,
        "PATCH",
        &format!("{WIDGETS}/w"),
        &json!({"metadata": {"labels": {"foo": "bar"}}}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    let msgs = messages(&body);
    for p in PATHS {
        assert!(
            msgs.iter().any(|m| m.starts_with(&format!("{p}: "))),
            "{p}: {msgs:?}"
        );
    }
    // optionalOldSelf: on a create, oldSelf is none.
    let mut def = get_crd(addr).await;
    def["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = ratcheting_schema(json!({
        "rule": "!oldSelf.hasValue() || self != oldSelf.value()", "optionalOldSelf": true}));
    let (code, body) = send(
        addr,
        "PUT",
        &format!("{CRDS}/widgets.cel.example.com"),
        &def,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = send(addr, "POST", WIDGETS, &widget("v", every("foo"))).await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = send(
        addr,
        "PATCH",
        &format!("{WIDGETS}/v"),
        &json!({"metadata": {"labels": {"foo": "bar"}}}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(messages(&body).len(), 6, "{body}");
    let (code, body) = send(
        addr,
        "PATCH",
        &format!("{WIDGETS}/v"),
        &json!({"spec": every("new")}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
}

/// The shapes of Kueue's and JobSet's rules: `has()`, `in` lists,
/// `filter(...).size()`, `exists`, conditionals, quantities, messages,
/// reasons and field paths.
#[tokio::test]
async fn rules_as_real_crds_write_them() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let schema = json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "has(self.minCount) ? self.minCount <= self.count : true", "message": "minCount must not exceed count"},
            {"rule": "[has(self.universal), has(self.individual)].filter(x, x == true).size() <= 1",
             "messageExpression": "'universal ' + self.universal + ' and individual ' + self.individual + ' are both set'",
             "reason": "FieldValueForbidden", "fieldPath": ".universal"},
            {"rule": "!has(self.limit) || quantity(self.limit).isLessThan(quantity('10'))"}
        ],
        "properties": {
            "count": {"type": "integer"},
            "minCount": {"type": "integer"},
            "universal": {"type": "string"},
            "individual": {"type": "string"},
            "limit": {"type": "string"},
            "tolerations": {"type": "array", "maxItems": 8, "items": {"type": "object", "properties": {
                "operator": {"type": "string"}, "effect": {"type": "string"}, "key": {"type": "string"}}},
                "x-kubernetes-validations": [
                    {"rule": "self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])"},
                    {"rule": "self.all(x, !has(x.key) ? x.operator == 'Exists' : true)"}
                ]},
            "my-name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.startsWith('a')"}]}
        },
    }}});
    let (code, body) = send(addr, "POST", CRDS, &crd(schema)).await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = send(
        addr,
        "POST",
        WIDGETS,
        &widget("ok", json!({"count": 2, "minCount": 1, "universal": "u", "limit": "500m",
            "tolerations": [{"operator": "Exists"}, {"key": "k", "operator": "Equal"}], "my-name": "abc"})),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    let (code, body) = send(
        addr,
        "POST",
        WIDGETS,
        &widget(
            "bad",
            json!({"count": 1, "minCount": 2, "universal": "u", "individual": "i", "limit": "20",
            "tolerations": [{"operator": "Maybe", "key": "k"}], "my-name": "b"}),
        ),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        messages(&body),
        vec![
            "spec: Invalid value: minCount must not exceed count",
            "spec.universal: Forbidden: universal u and individual i are both set",
            "spec: Invalid value: failed rule: !has(self.limit) || quantity(self.limit).isLessThan(quantity('10'))",
            "spec.my-name: Invalid value: \"b\": failed rule: self.startsWith('a')",
            "spec.tolerations: Invalid value: failed rule: self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])",
        ]
    );
}

/// Schema errors are ratcheted too: a value made invalid by a schema change
/// may stay while it does not change (the suite's JSONSchema case).
#[tokio::test]
async fn unchanged_values_invalid_under_a_new_schema_are_ratcheted() {
    let (_store, server, _client) = start(StoreConfig::default()).await;
    let addr = server.addr();
    let schema = |allowed: &str| {
        let field = json!({"type": "string", "enum": [allowed]});
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "field": field,
            "struct": {"type": "object", "properties": {"field": field}},
            "list": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["key"],
                     "items": {"type": "object", "required": ["key"], "properties": {"key": {"type": "string"}, "field": field}}},
            "atomic": {"type": "array", "items": {"type": "object", "properties": {"field": field}}},
            "map": {"type": "object", "additionalProperties": {"type": "object", "properties": {"field": field}}}
        }}}})
    };
    let (code, body) = send(addr, "POST", CRDS, &crd(schema("foo"))).await;
    assert_eq!(code, 201, "{body}");
    let spec = json!({"field": "foo", "struct": {"field": "foo"}, "list": [{"key": "first", "field": "foo"}],
                      "map": {"foo": {"field": "foo"}}});
    let (code, body) = send(addr, "POST", WIDGETS, &widget("w", spec)).await;
    assert_eq!(code, 201, "{body}");
    let mut def = get_crd(addr).await;
    def["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = schema("notfoo");
    let (code, body) = send(
        addr,
        "PUT",
        &format!("{CRDS}/widgets.cel.example.com"),
        &def,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = send(
        addr,
        "PATCH",
        &format!("{WIDGETS}/w"),
        &json!({"metadata": {"labels": {"foo": "bar"}}}),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    // A changed value is held to the new schema; an atomic list's items
    // are not correlated, so never ratcheted.
    let (code, body) = send(
        addr,
        "PATCH",
        &format!("{WIDGETS}/w"),
        &json!({"spec": {"struct": {"field": "bar"}, "atomic": [{"field": "foo"}]}}),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    let fields: Vec<&str> = body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        vec!["spec.atomic[0].field", "spec.struct.field"],
        "{body}"
    );
}
