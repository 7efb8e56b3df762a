//! `matchConditions`: the CEL conditions a request must meet for an
//! admission webhook to be called or a ValidatingAdmissionPolicy to apply.
//! One mechanism for both, as kube-apiserver 1.35 has one
//! (`k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions`):
//!
//! - written: at most 64, each named (a qualified name, unique in the list)
//!   with an expression that compiles to a `bool` against `object`,
//!   `oldObject`, `request`, `namespaceObject`, `authorizer` (and `params`
//!   for a policy with a `paramKind`), with kube-apiserver's field paths
//!   and messages ([`validate`]);
//! - evaluated: every condition in order on one budget
//!   (`RuntimeCELCostBudgetMatchConditions`); a condition that is `false`
//!   means no match whatever the others did; else any error (an
//!   evaluation's, the budget exhausted) is the result, and the webhook's
//!   or policy's `failurePolicy` decides; else a match ([`evaluate`]).
//!
//! A webhook's conditions are compiled once per expression (a small cache:
//! the hooks are read from their configurations at each request), a
//! policy's once per change of the policies.

use super::policy::expr::{self, Activation, Env, Program, Ran, Returns};
use crate::error::{go_quote, FieldError, FieldErrorKind};
use crate::validation::is_qualified_name;
use cel::Value as CelValue;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

/// At most this many conditions a webhook or policy.
pub(crate) const MAX: usize = 64;

/// `RuntimeCELCostBudgetMatchConditions`: what the conditions of one
/// webhook or policy may spend on one request, together.
const BUDGET: u64 = 2_500_000;

/// One condition, compiled (or why it does not compile: evaluated, that is
/// an error).
#[derive(Debug, Clone)]
pub(crate) struct Condition {
    pub name: String,
    pub program: Arc<Result<Program, String>>,
}

/// The conditions of a list as written (`[{name, expression}]`), compiled
/// against the environment of a match condition.
pub(crate) fn compile(list: Option<&Value>, has_params: bool) -> Vec<Condition> {
    let env = Env::match_conditions(has_params);
    items(list)
        .map(|(name, expression)| Condition {
            name: name.to_string(),
            program: Arc::new(
                expr::compile(expression.trim(), &env, Returns::Bool).map(|c| c.program),
            ),
        })
        .collect()
}

/// A webhook's conditions, each compiled once per expression (webhooks see
/// no `params`).
pub(crate) fn compile_cached(list: Option<&Value>) -> Vec<Condition> {
    type Compiled = Arc<Result<Program, String>>;
    static CACHE: OnceLock<Mutex<HashMap<String, Compiled>>> = OnceLock::new();
    let env = Env::match_conditions(false);
    let mut cache = CACHE.get_or_init(Default::default).lock();
    items(list)
        .map(|(name, expression)| {
            let program = match cache.get(expression) {
                Some(p) => p.clone(),
                None => {
                    let p = Arc::new(
                        expr::compile(expression.trim(), &env, Returns::Bool).map(|c| c.program),
                    );
                    if cache.len() >= 4096 {
                        cache.clear();
                    }
                    cache.insert(expression.to_string(), p.clone());
                    p
                }
            };
            Condition {
                name: name.to_string(),
                program,
            }
        })
        .collect()
}

fn items(list: Option<&Value>) -> impl Iterator<Item = (&str, &str)> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c.get("name").and_then(Value::as_str).unwrap_or(""),
                c.get("expression").and_then(Value::as_str).unwrap_or(""),
            )
        })
}

/// What the conditions say of a request.
#[derive(Debug, PartialEq)]
pub(crate) enum Outcome {
    Match,
    /// The first condition, in order, that is `false`.
    NoMatch(String),
    /// The errors, as kube-apiserver aggregates them (`[a, b]` for more
    /// than one).
    Error(String),
}

/// The conditions on the request `act` binds (`authorizer` included), on
/// their own budget.
pub(crate) fn evaluate(conditions: &[Condition], act: &mut Activation) -> Outcome {
    if conditions.is_empty() {
        return Outcome::Match;
    }
    let saved = act.budget;
    act.budget = BUDGET;
    act.out_of_budget = false;
    let outcome = run(conditions, act);
    act.budget = saved;
    act.out_of_budget = false;
    outcome
}

fn run(conditions: &[Condition], act: &mut Activation) -> Outcome {
    let mut errors = Vec::new();
    let mut first_false: Option<&str> = None;
    for c in conditions {
        let p = match c.program.as_ref() {
            Ok(p) => p,
            Err(e) => {
                errors.push(format!("compilation error: {e}"));
                continue;
            }
        };
        match act.run(p, true) {
            Ran::Value(CelValue::Bool(false)) => {
                first_false.get_or_insert(&c.name);
            }
            Ran::Value(CelValue::Bool(true)) => {}
            Ran::Value(_) => errors.push(format!(
                "expression '{}' resulted in error: no such overload",
                p.source
            )),
            // The budget spent: nothing after it runs, and the whole
            // evaluation is an error, a `false` before it or not.
            Ran::Error(e) if act.out_of_budget => return Outcome::Error(e),
            Ran::Error(e) => errors.push(e),
        }
    }
    if let Some(name) = first_false {
        return Outcome::NoMatch(name.to_string());
    }
    if !errors.is_empty() {
        return Outcome::Error(aggregate(&errors));
    }
    Outcome::Match
}

/// `utilerrors.NewAggregate(...).Error()`.
pub(crate) fn aggregate(errs: &[String]) -> String {
    if errs.len() == 1 {
        errs[0].clone()
    } else {
        format!("[{}]", errs.join(", "))
    }
}

/// Validation of a `matchConditions` list being written (`at` its field
/// path: `spec.matchConditions`, `webhooks[0].matchConditions`), as
/// `validateMatchConditions`: the count, then each condition's expression
/// and name, then duplicated names.
pub(crate) fn validate(
    list: Option<&Value>,
    at: &str,
    has_params: bool,
    errs: &mut Vec<FieldError>,
) {
    let Some(list) = list.and_then(Value::as_array) else {
        return;
    };
    if list.len() > MAX {
        errs.push(FieldError::new(
            FieldErrorKind::TooMany,
            at,
            Some(list.len().to_string()),
            format!("must have at most {MAX} items"),
        ));
    }
    let env = Env::match_conditions(has_params);
    let mut names = HashSet::new();
    for (i, c) in list.iter().enumerate() {
        let at = format!("{at}[{i}]");
        let text = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
        let e = text("expression").trim();
        if e.is_empty() {
            errs.push(FieldError::required(format!("{at}.expression"), ""));
        } else if let Err(detail) = expr::compile(e, &env, Returns::Bool) {
            errs.push(FieldError::invalid(
                format!("{at}.expression"),
                &json!(e),
                detail,
            ));
        }
        let n = text("name");
        if n.is_empty() {
            errs.push(FieldError::required(format!("{at}.name"), ""));
        } else {
            for m in is_qualified_name(n) {
                errs.push(FieldError::invalid(format!("{at}.name"), &json!(n), m));
            }
            if !names.insert(n.to_string()) {
                errs.push(FieldError::new(
                    FieldErrorKind::Duplicate,
                    format!("{at}.name"),
                    Some(go_quote(n)),
                    "",
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn act(object: Value) -> Activation {
        Activation::new(
            expr::value(Some(&object)),
            CelValue::Null,
            expr::value(Some(&json!({"operation": "CREATE"}))),
            CelValue::Null,
            CelValue::Null,
        )
    }

    fn conditions(list: Value) -> Vec<Condition> {
        compile(Some(&list), false)
    }

    #[test]
    fn a_false_condition_wins_over_errors_and_errors_over_a_match() {
        let obj = json!({"metadata": {"name": "a", "labels": {"x": "1"}}});
        let c = conditions(json!([
            {"name": "errs", "expression": "object.metadata.labels.missing == '1'"},
            {"name": "no", "expression": "request.operation == 'UPDATE'"},
        ]));
        assert_eq!(
            evaluate(&c, &mut act(obj.clone())),
            Outcome::NoMatch("no".into())
        );
        let c = conditions(json!([
            {"name": "errs", "expression": "object.metadata.labels.missing == '1'"},
            {"name": "yes", "expression": "request.operation == 'CREATE'"},
        ]));
        match evaluate(&c, &mut act(obj.clone())) {
            Outcome::Error(e) => assert!(
                e.starts_with(
                    "expression 'object.metadata.labels.missing == '1'' resulted in error: "
                ),
                "{e}"
            ),
            other => panic!("{other:?}"),
        }
        let c = conditions(json!([
            {"name": "yes", "expression": "object.metadata.labels.x == '1'"},
            {"name": "authz", "expression": "authorizer.group('').resource('pods').check('create').allowed()"},
        ]));
        assert_eq!(evaluate(&c, &mut act(obj)), Outcome::Match);
    }

    #[test]
    fn written_conditions_are_validated_with_their_paths() {
        let list = json!([
            {"name": "a", "expression": "object.x == 1"},
            {"name": "a", "expression": "1"},
            {"name": "bad name!", "expression": ""},
            {"name": "p", "expression": "params.x == 1"},
            {"name": "v", "expression": "variables.x == 1"},
        ]);
        let mut errs = Vec::new();
        validate(Some(&list), "webhooks[0].matchConditions", false, &mut errs);
        let text: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        let all = text.join("\n");
        for want in [
            "webhooks[0].matchConditions[1].expression: Invalid value: \"1\": must evaluate to bool but got int",
            "webhooks[0].matchConditions[1].name: Duplicate value: \"a\"",
            "webhooks[0].matchConditions[2].expression: Required value",
            "webhooks[0].matchConditions[2].name: Invalid value: \"bad name!\"",
            "webhooks[0].matchConditions[3].expression: Invalid value: \"params.x == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'params'",
            "webhooks[0].matchConditions[4].expression: Invalid value: \"variables.x == 1\": compilation failed: ERROR: <input>:1:1: undeclared reference to 'variables'",
        ] {
            assert!(all.contains(want), "{want}\nnot in\n{all}");
        }
        assert_eq!(errs.len(), 6, "{all}");
        let many: Vec<Value> = (0..65)
            .map(|i| json!({"name": format!("c{i}"), "expression": "true"}))
            .collect();
        let mut errs = Vec::new();
        validate(Some(&json!(many)), "spec.matchConditions", false, &mut errs);
        assert_eq!(
            errs[0].to_string(),
            "spec.matchConditions: Too many: 65: must have at most 64 items"
        );
    }
}
