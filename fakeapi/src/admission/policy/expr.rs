//! A policy's CEL expressions: compiled (parsed by the `cel` crate, checked
//! by `schema::cel::check` against the variables a policy sees) and run
//! (`schema::cel::runtime`, with Kubernetes' CEL library, the per-call cost
//! limit and the request's budget, as the CRD rules run).
//!
//! The variables: `object` and `oldObject` (null on a create, resp. a
//! delete), `request` (the admission request's attributes), `params` (the
//! binding's parameter, with a `paramKind`), `namespaceObject` (the
//! namespace of a namespaced object), `variables` (the policy's own, in
//! their order, each seeing those before it) and `authorizer`. fakeapi
//! authorizes every request (it has no RBAC), so every
//! `authorizer...check(verb)` is allowed, as it is for
//! kube-apiserver's `system:masters`.

use crate::schema::cel::check::{Checker, Ty};
use crate::schema::cel::runtime::{self, Outcome};
use cel::common::ast::IdedExpr;
use cel::extractors::{Arguments, This};
use cel::objects::{Key, Map};
use cel::{Context, ExecutionError, Value as CelValue};
use std::collections::HashMap;
use std::sync::Arc;

/// The types of the variables an expression is compiled against.
#[derive(Clone)]
pub(crate) struct Env<'s> {
    /// `object` and `oldObject`.
    pub(crate) object: Ty<'s>,
    /// `params`, when the policy has a `paramKind`.
    pub(crate) params: Option<Ty<'s>>,
    pub(crate) authorizer: bool,
    /// `variables`, those declared so far; `None` where there are none to
    /// declare (a match condition's environment has no `variables`).
    pub(crate) variables: Option<Vec<(String, Ty<'s>)>>,
}

impl<'s> Env<'s> {
    /// What kube-apiserver compiles a policy against when it is written:
    /// every object `dyn`.
    pub(crate) fn untyped(has_params: bool) -> Env<'static> {
        Env {
            object: Ty::Dyn,
            params: has_params.then_some(Ty::Dyn),
            authorizer: true,
            variables: Some(Vec::new()),
        }
    }

    /// What a match condition is compiled against, a webhook's or a
    /// policy's (kube-apiserver's stateless condition compiler): `object`,
    /// `oldObject`, `request`, `namespaceObject`, `authorizer`, and
    /// `params` for a policy with a `paramKind`; no `variables`.
    pub(crate) fn match_conditions(has_params: bool) -> Env<'static> {
        Env {
            variables: None,
            ..Env::untyped(has_params)
        }
    }

    pub(crate) fn declare(&mut self, name: &str, ty: Ty<'s>) {
        let vars = self.variables.get_or_insert_with(Vec::new);
        vars.retain(|(n, _)| n != name);
        vars.push((name.to_string(), ty));
    }

    /// The same without `authorizer` (a message expression's).
    pub(crate) fn without_authorizer(&self) -> Env<'s> {
        Env {
            authorizer: false,
            ..self.clone()
        }
    }

    fn vars(&self) -> Vec<(&str, Ty<'s>)> {
        let mut v = vec![
            ("object", self.object.clone()),
            ("oldObject", self.object.clone()),
            ("request", Ty::Dyn),
            ("namespaceObject", Ty::Dyn),
        ];
        if let Some(vars) = &self.variables {
            v.push(("variables", Ty::Fields(vars.clone())));
        }
        if let Some(p) = &self.params {
            v.push(("params", p.clone()));
        }
        if self.authorizer {
            v.push(("authorizer", Ty::Authz));
        }
        v
    }
}

/// `dyn`, for a variable whose expression did not compile.
pub(crate) fn dyn_ty() -> Ty<'static> {
    Ty::Dyn
}

/// What an expression must evaluate to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Returns {
    Bool,
    String,
    StringOrNull,
    Any,
}

/// A compiled expression, ready to run.
#[derive(Debug, Clone)]
pub(crate) struct Program {
    /// As written.
    pub(crate) source: String,
    expr: IdedExpr,
    base_cost: u64,
    /// The `variables.NAME` it reads (an error of one of them is its own).
    reads: Vec<String>,
}

/// Compiles `source` against `env`: its type, or the detail of the field
/// error kube-apiserver writes (`compilation failed: ERROR: <input>:1:1:
/// ...`, `must evaluate to bool but got int`).
pub(crate) fn compile<'s>(
    source: &str,
    env: &Env<'s>,
    returns: Returns,
) -> Result<Compiled<'s>, String> {
    let parsed =
        crate::schema::cel::parse(source).map_err(|e| format!("compilation failed: {e}"))?;
    let mut checker = Checker::new(source, parsed.source_info(), env.vars());
    let (ty, _cost) = checker.check(parsed.expression());
    if !checker.errors.is_empty() {
        return Err(format!("compilation failed: {}", checker.errors.join("\n")));
    }
    // As cel-go's `IsExactType`: a `dyn` result is not a bool.
    let ok = match returns {
        Returns::Any => true,
        Returns::Bool => matches!(ty, Ty::Bool),
        Returns::String => matches!(ty, Ty::Str(_)),
        Returns::StringOrNull => matches!(ty, Ty::Str(_) | Ty::Null),
    };
    if !ok {
        let want = match returns {
            Returns::Bool => "bool",
            Returns::String => "string",
            _ => "one of [string null_type]",
        };
        return Err(format!("must evaluate to {want} but got {}", ty.name()));
    }
    let mut expr = parsed.expression().clone();
    let base_cost = runtime::instrument(&mut expr);
    let reads = env
        .variables
        .iter()
        .flatten()
        .filter(|(n, _)| reads_variable(source, n))
        .map(|(n, _)| n.clone())
        .collect();
    Ok(Compiled {
        ty,
        program: Program {
            source: source.to_string(),
            expr,
            base_cost,
            reads,
        },
    })
}

/// Whether `source` names `variables.NAME`.
fn reads_variable(source: &str, name: &str) -> bool {
    let needle = format!("variables.{name}");
    source.match_indices(&needle).any(|(i, _)| {
        let after = source[i + needle.len()..].chars().next();
        !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// A compiled expression with its type.
pub(crate) struct Compiled<'s> {
    pub(crate) ty: Ty<'s>,
    pub(crate) program: Program,
}

/// How a run ended.
pub(crate) enum Ran {
    Value(CelValue),
    /// An evaluation error, as kube-apiserver words it
    /// (`expression '...' resulted in error: ...`).
    Error(String),
}

/// The values an evaluation binds, and what the request may still spend.
pub(crate) struct Activation {
    pub(crate) object: CelValue,
    pub(crate) old_object: CelValue,
    pub(crate) request: CelValue,
    pub(crate) params: CelValue,
    pub(crate) namespace: CelValue,
    /// Evaluated variables; a failed one is its error.
    pub(crate) variables: Vec<(String, Result<CelValue, String>)>,
    pub(crate) budget: u64,
    /// Whether a run stopped for want of `budget` (not its own per-call
    /// limit): what kube-apiserver makes an error of the whole evaluation.
    pub(crate) out_of_budget: bool,
    context: Context<'static, 'static>,
}

impl Activation {
    pub(crate) fn new(
        object: CelValue,
        old_object: CelValue,
        request: CelValue,
        params: CelValue,
        namespace: CelValue,
    ) -> Activation {
        Activation {
            object,
            old_object,
            request,
            params,
            namespace,
            variables: Vec::new(),
            budget: runtime::REQUEST_BUDGET,
            out_of_budget: false,
            context: admission_context(),
        }
    }

    /// Runs `p`, with or without `authorizer`.
    pub(crate) fn run(&mut self, p: &Program, authorizer: bool) -> Ran {
        for r in &p.reads {
            if let Some((_, Err(e))) = self.variables.iter().find(|(n, _)| n == r) {
                return Ran::Error(format!("expression '{}' resulted in error: {e}", p.source));
            }
        }
        let vars: HashMap<Key, CelValue> = self
            .variables
            .iter()
            .filter_map(|(n, v)| Some((Key::from(n.clone()), v.as_ref().ok()?.clone())))
            .collect();
        let mut bind: Vec<(&str, CelValue)> = vec![
            ("object", self.object.clone()),
            ("oldObject", self.old_object.clone()),
            ("request", self.request.clone()),
            ("params", self.params.clone()),
            ("namespaceObject", self.namespace.clone()),
            ("variables", CelValue::Map(Map::from(vars))),
        ];
        if authorizer {
            bind.push(("authorizer", authorizer_value()));
        }
        let limit = runtime::PER_CALL_LIMIT.min(self.budget);
        let (outcome, spent) =
            runtime::eval_with(&self.context, &p.expr, p.base_cost, &bind, limit);
        self.budget = self.budget.saturating_sub(spent);
        match outcome {
            Outcome::Value(v) => Ran::Value(v),
            Outcome::Error(e) => Ran::Error(format!(
                "expression '{}' resulted in error: {e}",
                p.source
            )),
            Outcome::Cancelled if limit < runtime::PER_CALL_LIMIT => {
                self.out_of_budget = true;
                Ran::Error(OUT_OF_BUDGET.into())
            }
            Outcome::Cancelled => Ran::Error(format!(
                "expression '{}' resulted in error: operation cancelled: actual cost limit exceeded",
                p.source
            )),
        }
    }

    /// Evaluates the policy's variables, in order.
    pub(crate) fn evaluate_variables(&mut self, vars: &[(String, Program)]) {
        for (name, p) in vars {
            let v = match self.run(p, true) {
                Ran::Value(v) => Ok(v),
                Ran::Error(e) => Err(e
                    .strip_prefix(&format!("expression '{}' resulted in error: ", p.source))
                    .map(str::to_string)
                    .unwrap_or(e)),
            };
            self.variables.push((name.clone(), v));
        }
    }
}

/// kube-apiserver's error when an evaluation's budget runs out.
pub(crate) const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// The root context with Kubernetes' library and the authorizer's.
fn admission_context() -> Context<'static, 'static> {
    let mut ctx = runtime::root_context();
    for name in [
        "group",
        "resource",
        "subresource",
        "namespace",
        "name",
        "path",
    ] {
        let _ = ctx.add_function(name, move |This(this): This<CelValue>, arg: Arc<String>| {
            with_key(this, name, CelValue::String(arg))
        });
    }
    let _ = ctx.add_function(
        "serviceAccount",
        |This(this): This<CelValue>, Arguments(args): Arguments| {
            with_key(this, "serviceAccount", CelValue::List(args))
        },
    );
    let _ = ctx.add_function("check", |This(this): This<CelValue>, _verb: Arc<String>| {
        let _ = this;
        Ok::<CelValue, ExecutionError>(decision())
    });
    let _ = ctx.add_function("allowed", |This(this): This<CelValue>| {
        field(this, "allowed")
    });
    let _ = ctx.add_function("errored", |This(this): This<CelValue>| {
        field(this, "errored")
    });
    let _ = ctx.add_function("reason", |This(this): This<CelValue>| field(this, "reason"));
    let _ = ctx.add_function("error", |This(this): This<CelValue>| field(this, "error"));
    ctx
}

fn with_key(this: CelValue, k: &str, v: CelValue) -> Result<CelValue, ExecutionError> {
    let CelValue::Map(m) = this else {
        return Err(ExecutionError::function_error(k, "no such overload"));
    };
    let mut out: HashMap<Key, CelValue> = (*m.map).clone();
    out.insert(Key::from(k.to_string()), v);
    Ok(CelValue::Map(Map::from(out)))
}

fn field(this: CelValue, k: &str) -> Result<CelValue, ExecutionError> {
    match this {
        CelValue::Map(m) => m
            .map
            .get(&Key::from(k.to_string()))
            .cloned()
            .ok_or_else(|| ExecutionError::function_error(k, "no such overload")),
        _ => Err(ExecutionError::function_error(k, "no such overload")),
    }
}

/// Every check is allowed: fakeapi authorizes every request.
fn decision() -> CelValue {
    let m: HashMap<Key, CelValue> = [
        ("allowed", CelValue::Bool(true)),
        ("errored", CelValue::Bool(false)),
        ("reason", CelValue::String(Arc::new(String::new()))),
        ("error", CelValue::String(Arc::new(String::new()))),
    ]
    .into_iter()
    .map(|(k, v)| (Key::from(k.to_string()), v))
    .collect();
    CelValue::Map(Map::from(m))
}

fn authorizer_value() -> CelValue {
    let base: HashMap<Key, CelValue> = HashMap::new();
    let base = CelValue::Map(Map::from(base));
    let mut m: HashMap<Key, CelValue> = HashMap::new();
    m.insert(Key::from("requestResource".to_string()), base);
    CelValue::Map(Map::from(m))
}

/// A JSON value as CEL sees it in a policy (untyped, as kube-apiserver
/// converts an admission request's objects).
pub(crate) fn value(v: Option<&serde_json::Value>) -> CelValue {
    match v {
        None => CelValue::Null,
        Some(v) => runtime::untyped(v),
    }
}
