//! A policy's `status.typeChecking`, as kube-apiserver's
//! ValidatingAdmissionPolicy status controller writes it after each change
//! of a policy's spec: each validation's `expression` and
//! `messageExpression` compiled against each kind its `resourceRules` name
//! (no wildcard; at most 10 kinds), `object` and `oldObject` typed by the
//! kind's schema (a built-in kind's OpenAPI schema, a custom resource's
//! structural schema), `params` by the `paramKind`'s; what does not compile
//! is an `expressionWarnings` entry (`fieldRef`
//! `spec.validations[0].expression`, the warning `apps/v1,
//! Kind=Deployment: compilation failed: ERROR: <input>:1:21: found no
//! matching overload for '_>_' applied to '(int, string)'` with cel-go's
//! snippet), and `observedGeneration` the generation checked.

use super::expr::{self, Env, Returns};
use crate::schema::cel::check::Ty;
use crate::schema::Schema;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::Arc;

/// At most this many kinds are checked (`maxTypesToCheck`).
const MAX_TYPES: usize = 10;

/// A kind's schema: (group, version, kind) and its schema.
pub(crate) type Resolved = ((String, String, String), Arc<Schema>);

/// The status the controller writes for `policy` (its spec and
/// generation): `resolve(group, version, resource)` finds a served
/// resource's kind and schema, `param_schema` is the `paramKind`'s.
pub(crate) fn status(
    policy: &Value,
    resolve: &dyn Fn(&str, &str, &str) -> Option<Resolved>,
    param_schema: Option<Arc<Schema>>,
) -> Value {
    let spec = &policy["spec"];
    let mut warnings = Vec::new();
    let kinds = kinds_to_check(spec, resolve);
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let validations = spec
        .get("validations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, v) in validations.iter().enumerate() {
        let mut check = |field: &str, source: &str| {
            let w = check_expression(spec, source, &kinds, param_schema.as_deref());
            if !w.is_empty() {
                warnings.push(json!({
                    "fieldRef": format!("spec.validations[{i}].{field}"),
                    "warning": w,
                }));
            }
        };
        check("expression", &text(v, "expression"));
        let me = text(v, "messageExpression");
        if !me.is_empty() {
            check("messageExpression", &me);
        }
    }
    let mut type_checking = json!({});
    if !warnings.is_empty() {
        type_checking["expressionWarnings"] = Value::Array(warnings);
    }
    let mut status = policy.get("status").cloned().unwrap_or_else(|| json!({}));
    if !status.is_object() {
        status = json!({});
    }
    status["observedGeneration"] = policy
        .pointer("/metadata/generation")
        .cloned()
        .unwrap_or(json!(1));
    status["typeChecking"] = type_checking;
    status
}

/// The kinds the rules name, sorted by group, version, kind.
fn kinds_to_check(
    spec: &Value,
    resolve: &dyn Fn(&str, &str, &str) -> Option<Resolved>,
) -> Vec<Resolved> {
    let mut seen = BTreeSet::new();
    let mut out: Vec<Resolved> = Vec::new();
    let Some(rules) = spec
        .pointer("/matchConstraints/resourceRules")
        .and_then(Value::as_array)
    else {
        return out;
    };
    let list = |r: &Value, k: &str| -> Vec<String> { super::strings(r.get(k)) };
    for r in rules {
        let groups = list(r, "apiGroups");
        let versions = list(r, "apiVersions");
        if groups.iter().any(|g| g.contains('*')) || versions.iter().any(|v| v.contains('*')) {
            continue;
        }
        let mut resources: Vec<String> = list(r, "resources")
            .into_iter()
            .filter(|x| !x.contains(['*', '/']))
            .collect();
        let (mut groups, mut versions) = (groups, versions);
        groups.sort();
        versions.sort();
        resources.sort();
        for g in &groups {
            for v in &versions {
                for res in &resources {
                    let Some(found) = resolve(g, v, res) else {
                        continue;
                    };
                    if seen.insert(found.0.clone()) {
                        out.push(found);
                        if out.len() == MAX_TYPES {
                            out.sort_by(|a, b| a.0.cmp(&b.0));
                            return out;
                        }
                    }
                }
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// `group/version, Kind=Kind`, as apimachinery prints a GroupVersionKind.
fn gvk_string((g, v, k): &(String, String, String)) -> String {
    if g.is_empty() {
        format!("/{v}, Kind={k}")
    } else {
        format!("{g}/{v}, Kind={k}")
    }
}

/// The warning of one expression: each kind's compile error, joined.
fn check_expression(
    spec: &Value,
    source: &str,
    kinds: &[Resolved],
    params: Option<&Schema>,
) -> String {
    let mut messages = Vec::new();
    for (gvk, schema) in kinds {
        let mut env = Env {
            object: Ty::Object(schema, true),
            params: params.map(|p| Ty::Object(p, true)),
            authorizer: true,
            variables: Some(Vec::new()),
        };
        for v in spec
            .get("variables")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = v.get("name").and_then(Value::as_str).unwrap_or("");
            let e = v.get("expression").and_then(Value::as_str).unwrap_or("");
            let ty = expr::compile(e, &env, Returns::Any)
                .map(|c| c.ty)
                .unwrap_or(Ty::Dyn);
            env.declare(name, ty);
        }
        if let Err(detail) = expr::compile(source, &env, Returns::Any) {
            messages.push(format!("{}: {detail}\n", gvk_string(gvk)));
        }
    }
    messages.join("\n")
}
