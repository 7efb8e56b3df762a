//! CEL validation rules of CustomResourceDefinitions
//! (`x-kubernetes-validations`), as apiextensions-apiserver runs them.
//!
//! At CRD creation (and update) each rule is parsed by the `cel` crate,
//! checked against the types the structural schema declares (`check.rs`)
//! and its cost estimated, times the number of times the schema lets it run
//! (the product of its enclosing lists' and maps' largest sizes); a rule
//! that does not compile, or whose estimate passes kube-apiserver's limit,
//! refuses the CRD with kube-apiserver's field path and message. A compiled
//! rule is kept on its schema node, so a CRD without rules pays nothing per
//! request, and one with rules compiles them once per version.
//!
//! On every write of a custom object (create, update, patch, apply, status),
//! after the schema's own validation, the rules run where the object has a
//! value (`self`), with the correlated old value (`oldSelf`: the same field,
//! the same map key, the same `x-kubernetes-list-type: map` entry by its
//! keys; never inside atomic or set lists) for transition rules, which run
//! on updates only (or with `oldSelf` an optional under `optionalOldSelf`).
//! A rule without `oldSelf` whose value did not change from the correlated
//! old one is ratcheted (its failure let through, as
//! `CRDValidationRatcheting` does). Failures are 422 causes worded as
//! kube-apiserver words them (`message`, `messageExpression`, `reason`,
//! `fieldPath`), and a rule that passes the per-call cost limit stops the
//! rules after it.
//!
//! Kubernetes' CEL library beyond the crate's standard library and its
//! strings and lists extensions (`runtime.rs`): `isSorted`, `sum`, `min`,
//! `max`, `indexOf`, `lastIndexOf` of lists, `find`, `findAll`,
//! `quantity` and its methods, `url` and its getters. Not done: `ip`,
//! `cidr`, `semver`, `format` of the ext library, the per-CRD total of
//! estimated costs (100 times one rule's limit), ratcheting of schema
//! (non-CEL) errors.

pub(crate) mod check;
pub(crate) mod runtime;

use super::Schema;
use crate::error::{go_quote, FieldError, FieldErrorKind};
use cel::common::ast::IdedExpr;
use cel::{Env, Value as CelValue};
use check::{ty_of, Checker, Ty};
use serde_json::Value;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};

/// A rule's estimated cost, times its cardinality, may not pass this
/// (`StaticEstimatedCostLimit`).
const STATIC_COST_LIMIT: f64 = 10_000_000.0;

/// The CEL environment every rule compiles and runs in: the standard
/// library with the strings and lists extensions.
pub(crate) fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        env.add_extension(cel::extensions::strings)
            .expect("the strings extension registers");
        env.add_extension(cel::extensions::lists)
            .expect("the lists extension registers");
        Arc::new(env)
    })
    .clone()
}

/// CEL's reserved words: a property so named is `__name__` in a rule.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// Whether `name` is one of CEL's reserved words.
pub(crate) fn reserved(name: &str) -> bool {
    RESERVED.contains(&name)
}

/// A property's name as a rule writes it (apiserver's `Escape`): `-` as
/// `__dash__`, `.` as `__dot__`, `/` as `__slash__`, `__` as
/// `__underscores__`, a reserved word as `__word__`; `None` for a name no
/// rule can write.
pub(super) fn escape(name: &str) -> Option<String> {
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut chars = name.chars();
    let first = chars.next()?;
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/');
    if !(first.is_ascii_alphabetic() || matches!(first, '_' | '.' | '-' | '/')) || !chars.all(ok) {
        return None;
    }
    if !name.contains(['_', '.', '-', '/']) {
        return Some(name.to_string());
    }
    Some(
        name.replace("__", "__underscores__")
            .replace('.', "__dot__")
            .replace('-', "__dash__")
            .replace('/', "__slash__"),
    )
}

/// One compiled rule.
#[derive(Debug)]
struct Rule {
    /// The rule as written (trimmed), and its spec as kube-apiserver
    /// prints it in a compile error.
    source: String,
    message: String,
    message_expression: Option<(String, IdedExpr, u64)>,
    reason: Option<String>,
    field_path: Option<String>,
    optional_old_self: bool,
    program: IdedExpr,
    base_cost: u64,
    uses_old_self: bool,
}

/// The rules of one schema node.
#[derive(Debug)]
pub(crate) struct Rules {
    rules: Vec<Rule>,
}

/// Where a node is in its schema, for compiling its rules.
#[derive(Clone, Debug)]
pub(super) struct Place {
    /// How many times the node's rules may run in one object.
    pub(super) cardinality: f64,
    /// The first atomic or set list above the node, if any: `oldSelf`
    /// cannot be correlated below it.
    pub(super) uncorrelatable: Option<String>,
    /// The estimated costs of the whole schema's rules.
    pub(super) total: Rc<RefCell<TotalCost>>,
}

impl Place {
    pub(super) fn root() -> Place {
        Place {
            cardinality: 1.0,
            uncorrelatable: None,
            total: Rc::default(),
        }
    }
}

/// The rules of a whole schema may not cost more than this together
/// (`StaticEstimatedCRDCostLimit`).
const CRD_COST_LIMIT: f64 = 100_000_000.0;

/// The sum of a schema's estimated rule costs, and its most expensive
/// rules (apiextensions' `TotalCost`).
#[derive(Debug, Default)]
pub(super) struct TotalCost {
    total: f64,
    most_expensive: Vec<(String, f64)>,
}

impl TotalCost {
    fn observe(&mut self, path: String, cost: f64) {
        self.total += cost;
        if cost < CRD_COST_LIMIT / 100.0 {
            return;
        }
        self.most_expensive.push((path, cost));
        self.most_expensive
            .sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal));
        self.most_expensive.truncate(4);
    }

    /// The errors of a schema whose rules cost too much together; `path`
    /// is the schema's root.
    pub(super) fn errors(&self, path: &str) -> Vec<FieldError> {
        if self.total <= CRD_COST_LIMIT {
            return Vec::new();
        }
        let mut errs: Vec<FieldError> = self
            .most_expensive
            .iter()
            .map(|(p, _)| {
                FieldError::forbidden(
                    p.clone(),
                    "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
                )
            })
            .collect();
        errs.push(FieldError::forbidden(
            path,
            cost_error(
                "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                self.total,
                CRD_COST_LIMIT,
            ),
        ));
        errs
    }
}

/// The reasons a rule may give (`reason`).
const REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// kube-apiserver's `getCostErrorMessage`.
fn cost_error(what: &str, cost: f64, limit: f64) -> String {
    let factor = cost / limit;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!("{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)")
}

/// The spec of a rule as kube-apiserver prints it as the bad value of a
/// compile error (its internal type, marshalled).
fn rule_value(raw: &Value) -> String {
    let s = |k: &str| Value::String(raw.get(k).and_then(Value::as_str).unwrap_or("").into());
    let opt = |k: &str| {
        raw.get(k)
            .filter(|v| !v.is_null())
            .cloned()
            .unwrap_or(Value::Null)
    };
    // Go marshals a struct's fields in their order.
    format!(
        "{{\"Rule\":{},\"Message\":{},\"MessageExpression\":{},\"Reason\":{},\"FieldPath\":{},\"OptionalOldSelf\":{}}}",
        s("rule"),
        s("message"),
        s("messageExpression"),
        opt("reason"),
        s("fieldPath"),
        opt("optionalOldSelf"),
    )
}

pub(crate) fn parse(source: &str) -> Result<cel::Program, String> {
    env().compile(source).map_err(|e| {
        // cel-go puts a space before each snippet line's bar.
        e.to_string().replace("\n| ", "\n | ")
    })
}

impl Rules {
    /// Compiles the `x-kubernetes-validations` of node `s` (at `path`);
    /// errors go to `errs` as kube-apiserver reports them.
    pub(super) fn compile(
        raw: &Value,
        s: &Schema,
        root: bool,
        path: &str,
        place: &Place,
        errs: &mut Vec<FieldError>,
    ) -> Option<Rules> {
        let list = raw.as_array()?;
        let at = |i: usize, k: &str| format!("{path}.x-kubernetes-validations[{i}].{k}");
        let self_ty = ty_of(s, root).unwrap_or(Ty::Dyn);
        let mut rules = Vec::new();
        let before = errs.len();
        for (i, r) in list.iter().enumerate() {
            let text = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
            let rule = text("rule").trim().to_string();
            let message = text("message");
            let message_expression = text("messageExpression");
            let field_path = text("fieldPath");
            if rule.is_empty() {
                errs.push(FieldError::required(at(i, "rule"), "rule is not specified"));
            } else if !message.is_empty() && message.trim().is_empty() {
                errs.push(FieldError::invalid(
                    at(i, "message"),
                    &Value::String(message.into()),
                    "must be non-empty if specified",
                ));
            } else if message.trim().contains(['\n', '\r']) {
                errs.push(FieldError::invalid(
                    at(i, "message"),
                    &Value::String(message.into()),
                    "must not contain line breaks",
                ));
            } else if rule.contains(['\n', '\r']) && message.trim().is_empty() {
                errs.push(FieldError::required(
                    at(i, "message"),
                    "message must be specified if rule contains line breaks",
                ));
            }
            if !message_expression.is_empty() && message_expression.trim().is_empty() {
                errs.push(FieldError::required(
                    at(i, "messageExpression"),
                    "messageExpression must be non-empty if specified",
                ));
            }
            let reason = r.get("reason").and_then(Value::as_str).map(str::to_string);
            if let Some(reason) = reason.as_deref().filter(|x| !REASONS.contains(x)) {
                let supported: Vec<String> = REASONS.iter().map(|x| x.to_string()).collect();
                errs.push(FieldError::not_supported(
                    at(i, "reason"),
                    &Value::String(reason.into()),
                    &supported,
                ));
            }
            if !field_path.is_empty() && !field_path_valid(s, field_path) {
                errs.push(FieldError::invalid(
                    at(i, "fieldPath"),
                    &Value::String(field_path.into()),
                    "must be a valid path",
                ));
            }
        }
        // As kube-apiserver: no rule compiles while the specs have errors.
        if errs.len() > before {
            return None;
        }
        for (i, r) in list.iter().enumerate() {
            let text = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
            let rule = text("rule").trim().to_string();
            let message = text("message");
            let message_expression = text("messageExpression");
            let field_path = text("fieldPath");
            let reason = r.get("reason").and_then(Value::as_str).map(str::to_string);
            if rule.is_empty() {
                continue;
            }
            let invalid = |detail: String| {
                FieldError::new(
                    FieldErrorKind::Invalid,
                    at(i, "rule"),
                    Some(rule_value(r)),
                    detail,
                )
            };
            let program = match parse(&rule) {
                Ok(p) => p,
                Err(e) => {
                    errs.push(invalid(format!("compilation failed: {e}")));
                    continue;
                }
            };
            let vars = vec![
                ("self", self_ty.clone()),
                (
                    "oldSelf",
                    if r.get("optionalOldSelf").and_then(Value::as_bool) == Some(true) {
                        Ty::Optional(Box::new(self_ty.clone()))
                    } else {
                        self_ty.clone()
                    },
                ),
            ];
            let mut checker = Checker::new(&rule, program.source_info(), vars);
            let (out, cost) = checker.check(program.expression());
            if !checker.errors.is_empty() {
                errs.push(invalid(format!(
                    "compilation failed: {}",
                    checker.errors.join("\n")
                )));
                continue;
            }
            if !matches!(out, Ty::Bool | Ty::Dyn) {
                errs.push(invalid("cel expression must evaluate to a bool".into()));
                continue;
            }
            let total = cost * place.cardinality;
            if total > STATIC_COST_LIMIT {
                errs.push(FieldError::forbidden(
                    at(i, "rule"),
                    cost_error("estimated rule cost", total, STATIC_COST_LIMIT),
                ));
            }
            place.total.borrow_mut().observe(at(i, "rule"), total);
            let uses_old_self = checker.uses_old_self;
            if uses_old_self {
                if let Some(u) = &place.uncorrelatable {
                    errs.push(FieldError::invalid(
                        at(i, "rule"),
                        &Value::String(rule.clone()),
                        format!(
                            "oldSelf cannot be used on the uncorrelatable portion of the schema within {u}"
                        ),
                    ));
                }
            } else if let Some(b) = r.get("optionalOldSelf").and_then(Value::as_bool) {
                errs.push(FieldError::invalid(
                    at(i, "optionalOldSelf"),
                    &Value::Bool(b),
                    "may not be set if oldSelf is not used in rule",
                ));
            }
            let mut message_program = None;
            if !message_expression.trim().is_empty() {
                let bad = |detail: String| {
                    FieldError::new(
                        FieldErrorKind::Invalid,
                        at(i, "messageExpression"),
                        Some(rule_value(r)),
                        detail,
                    )
                };
                match parse(message_expression) {
                    Err(e) => errs.push(bad(format!("messageExpression compilation failed: {e}"))),
                    Ok(p) => {
                        let vars = vec![("self", self_ty.clone()), ("oldSelf", self_ty.clone())];
                        let mut checker = Checker::new(message_expression, p.source_info(), vars);
                        let (out, cost) = checker.check(p.expression());
                        if !checker.errors.is_empty() {
                            errs.push(bad(format!(
                                "messageExpression compilation failed: {}",
                                checker.errors.join("\n")
                            )));
                        } else if !matches!(out, Ty::Str(_) | Ty::Dyn) {
                            errs.push(bad("messageExpression must evaluate to a string".into()));
                        } else {
                            // Not times the cardinality: kube-apiserver's
                            // estimate of a message is of one evaluation.
                            if cost > STATIC_COST_LIMIT {
                                errs.push(FieldError::forbidden(
                                    at(i, "messageExpression"),
                                    cost_error(
                                        "estimated messageExpression cost",
                                        cost,
                                        STATIC_COST_LIMIT,
                                    ),
                                ));
                            }
                            place
                                .total
                                .borrow_mut()
                                .observe(at(i, "messageExpression"), cost);
                            let mut e = p.expression().clone();
                            let base = runtime::instrument(&mut e);
                            message_program = Some((message_expression.to_string(), e, base));
                        }
                    }
                }
            }
            let mut expr = program.expression().clone();
            let base_cost = runtime::instrument(&mut expr);
            rules.push(Rule {
                source: rule,
                message: message.trim().to_string(),
                message_expression: message_program,
                reason,
                field_path: (!field_path.trim().is_empty())
                    .then(|| field_path.trim().trim_start_matches('.').to_string()),
                optional_old_self: r.get("optionalOldSelf").and_then(Value::as_bool) == Some(true),
                program: expr,
                base_cost,
                uses_old_self,
            });
        }
        (errs.len() == before && !rules.is_empty()).then_some(Rules { rules })
    }

    /// Runs the rules on `new` (with `old`, its correlated old value, on an
    /// update), at `path`.
    pub(super) fn run(
        &self,
        s: &Schema,
        root: bool,
        new: &Value,
        old: Option<&Value>,
        path: &str,
        walk: &mut Walk,
    ) {
        if walk.stopped {
            return;
        }
        let shown = if path.is_empty() { "<nil>" } else { path };
        let type_name = s.ty.clone().unwrap_or_default();
        let mut this: Option<CelValue> = None;
        let mut old_value: Option<Option<CelValue>> = None;
        for rule in &self.rules {
            if rule.uses_old_self && old.is_none() && !rule.optional_old_self {
                continue;
            }
            let this = this
                .get_or_insert_with(|| runtime::to_cel(new, Some(s), root))
                .clone();
            let old_v = old_value
                .get_or_insert_with(|| old.map(|o| runtime::to_cel(o, Some(s), root)))
                .clone();
            let old_arg = if rule.optional_old_self {
                Some(runtime::optional(old_v))
            } else {
                old_v
            };
            let limit = runtime::PER_CALL_LIMIT.min(walk.budget);
            let root = walk.context.get_or_insert_with(runtime::root_context);
            let (outcome, spent) = runtime::eval(
                root,
                &rule.program,
                rule.base_cost,
                this.clone(),
                if rule.uses_old_self {
                    old_arg.clone()
                } else {
                    None
                },
                limit,
            );
            let invalid = |detail: String| {
                FieldError::new(
                    FieldErrorKind::Invalid,
                    shown,
                    Some(go_quote(&type_name)),
                    detail,
                )
            };
            let shown_rule = if rule.message.is_empty() {
                &rule.source
            } else {
                &rule.message
            };
            let result = match outcome {
                runtime::Outcome::Cancelled => {
                    if limit < runtime::PER_CALL_LIMIT {
                        walk.errs.push(invalid("validation failed due to running out of cost budget, no further validation rules will be run".into()));
                    } else {
                        walk.errs.push(invalid(format!("'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {shown_rule}")));
                    }
                    walk.stopped = true;
                    return;
                }
                runtime::Outcome::Error(e) if e.starts_with("no such overload") => {
                    walk.errs.push(invalid(format!("'{e}': call arguments did not match a supported operator, function or macro signature for rule: {shown_rule}")));
                    walk.budget = walk.budget.saturating_sub(spent);
                    continue;
                }
                runtime::Outcome::Error(e) => {
                    walk.errs
                        .push(invalid(format!("{e} evaluating rule: {shown_rule}")));
                    walk.budget = walk.budget.saturating_sub(spent);
                    continue;
                }
                runtime::Outcome::Value(v) => v,
            };
            walk.budget = walk.budget.saturating_sub(spent);
            if result == CelValue::Bool(true) {
                continue;
            }
            // Ratcheting: a value left as it was may stay invalid, unless
            // the rule is about the transition.
            if !rule.uses_old_self && old.is_some_and(|o| o == new) {
                continue;
            }
            let mut detail = None;
            if let Some((_, expr, base)) = &rule.message_expression {
                let root = walk.context.get_or_insert_with(runtime::root_context);
                let (outcome, spent) = runtime::eval(
                    root,
                    expr,
                    *base,
                    this.clone(),
                    if rule.uses_old_self {
                        old_arg.clone()
                    } else {
                        None
                    },
                    runtime::PER_CALL_LIMIT.min(walk.budget),
                );
                walk.budget = walk.budget.saturating_sub(spent);
                if let runtime::Outcome::Value(CelValue::String(m)) = outcome {
                    let m = m.trim();
                    if !m.is_empty() && !m.contains(['\n', '\r']) {
                        detail = Some(m.to_string());
                    }
                }
            }
            let detail = detail.unwrap_or_else(|| {
                if rule.message.is_empty() {
                    format!("failed rule: {}", rule.source)
                } else {
                    rule.message.clone()
                }
            });
            let at = match &rule.field_path {
                Some(f) if path.is_empty() => f.clone(),
                Some(f) => format!("{path}.{f}"),
                None => shown.to_string(),
            };
            let value = match new {
                Value::Object(_) | Value::Array(_) => None,
                v => Some(crate::error::go_value(v)),
            };
            walk.errs.push(match rule.reason.as_deref() {
                Some("FieldValueForbidden") => FieldError::forbidden(at, detail),
                Some("FieldValueRequired") => FieldError::required(at, detail),
                Some("FieldValueDuplicate") => {
                    FieldError::new(FieldErrorKind::Duplicate, at, value, String::new())
                }
                _ => FieldError::new(FieldErrorKind::Invalid, at, value, detail),
            });
        }
    }
}

/// The state of one object's walk through its rules.
pub(super) struct Walk {
    pub(super) errs: Vec<FieldError>,
    /// What the request's rules may still spend.
    budget: u64,
    /// A rule went over its cost limit: no more rules run.
    stopped: bool,
    /// The CEL context with Kubernetes' library, made at the first rule.
    context: Option<cel::Context<'static, 'static>>,
}

impl Walk {
    pub(super) fn new() -> Walk {
        Walk {
            errs: Vec::new(),
            budget: runtime::REQUEST_BUDGET,
            stopped: false,
            context: None,
        }
    }
}

/// Whether `path` (`.spec.x`, `.a['b-c']`) names a field of `s`.
fn field_path_valid(s: &Schema, path: &str) -> bool {
    let mut rest = path.trim();
    let mut node = s;
    while !rest.is_empty() {
        let key;
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            key = r[..end].to_string();
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['") {
            let Some(end) = r.find("']") else {
                return false;
            };
            key = r[..end].to_string();
            rest = &r[end + 2..];
        } else {
            return false;
        }
        if key.is_empty() {
            return false;
        }
        node = match node.field(&key) {
            Some(n) => n,
            None => return false,
        };
    }
    true
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn names_escape_as_apiserver_escapes_them() {
        assert_eq!(escape("minCount").as_deref(), Some("minCount"));
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("foo-bar").as_deref(), Some("foo__dash__bar"));
        assert_eq!(escape("a.b/c").as_deref(), Some("a__dot__b__slash__c"));
        assert_eq!(escape("a__b").as_deref(), Some("a__underscores__b"));
        assert_eq!(escape("1x"), None);
        assert_eq!(escape("a b"), None);
    }
}
