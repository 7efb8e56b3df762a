//! Running a compiled rule: an object's JSON as the CEL values its schema
//! declares, Kubernetes' CEL library, and the runtime cost a rule pays
//! against kube-apiserver's per-call limit.
//!
//! The cost is counted by calls the compiled program carries: every
//! comprehension's loop (the `all`, `exists`, `map`, `filter` macros) adds,
//! per iteration, the cost of its condition and step, so that a rule that
//! loops over a large list is stopped, as cel-go stops it, with
//! `operation cancelled: actual cost limit exceeded`.

use super::super::{Additional, Schema};
use super::check::declares_object_meta;
use super::escape;
use crate::quantity::Quantity;
use cel::common::ast::{CallExpr, ComprehensionExpr, Expr, IdedExpr, ListExpr, LiteralValue};
use cel::extractors::{Arguments, This};
use cel::objects::{Key, Map, Opaque, OptionalValue};
use cel::{Context, ExecutionError, Value};
use serde_json::Value as Json;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;

/// The name of the function the cost is counted by; `@` keeps rules from
/// calling it.
const COST: &str = "@cost";

/// kube-apiserver's limit of one rule's evaluation (`PerCallLimit`).
pub(crate) const PER_CALL_LIMIT: u64 = 1_000_000;

/// What one request's rules may spend together (`RuntimeCELCostBudget`).
pub(crate) const REQUEST_BUDGET: u64 = 10_000_000;

thread_local! {
    /// The cost spent by the evaluation running on this thread, and whether
    /// it went over its limit.
    static SPENT: Cell<(u64, u64, bool)> = const { Cell::new((0, PER_CALL_LIMIT, false)) };
}

/// Adds `args[0]` to the cost spent; over the limit, the loop it guards
/// stops (`false`), and the evaluation is reported as cancelled.
fn cost(Arguments(args): Arguments) -> Result<Value, ExecutionError> {
    let n = match args.first() {
        Some(Value::Int(n)) => *n as u64,
        _ => 1,
    };
    let over = SPENT.with(|c| {
        let (spent, limit, over) = c.get();
        let spent = spent.saturating_add(n);
        let over = over || spent > limit;
        c.set((spent, limit, over));
        over
    });
    if over {
        return Ok(Value::Bool(false));
    }
    Ok(args.get(1).cloned().unwrap_or(Value::Null))
}

/// How an evaluation ended.
pub(crate) enum Outcome {
    Value(Value),
    Error(String),
    /// Over the per-call limit.
    Cancelled,
}

/// Evaluates `program` with `self` (and `oldSelf`) bound, counting its cost
/// against `limit`; returns the outcome and the cost spent.
pub(crate) fn eval(
    root: &Context<'static, 'static>,
    program: &IdedExpr,
    base_cost: u64,
    this: Value,
    old: Option<Value>,
    limit: u64,
) -> (Outcome, u64) {
    SPENT.with(|c| c.set((base_cost, limit, base_cost > limit)));
    let mut ctx = root.new_inner_scope();
    ctx.add_variable_from_value("self", this);
    if let Some(old) = old {
        ctx.add_variable_from_value("oldSelf", old);
    }
    let result = Value::resolve(program, &ctx);
    let (spent, _, over) = SPENT.with(Cell::get);
    let outcome = if over {
        Outcome::Cancelled
    } else {
        match result {
            Ok(v) => Outcome::Value(v),
            Err(e) => Outcome::Error(go_error(&e)),
        }
    };
    (outcome, spent)
}

/// Evaluates `program` with `vars` bound (an admission policy's `object`,
/// `oldObject`, `params`, `request`, `variables`, ...), counting its cost
/// against `limit`; returns the outcome and the cost spent.
pub(crate) fn eval_with(
    root: &Context<'static, 'static>,
    program: &IdedExpr,
    base_cost: u64,
    vars: &[(&str, Value)],
    limit: u64,
) -> (Outcome, u64) {
    SPENT.with(|c| c.set((base_cost, limit, base_cost > limit)));
    let mut ctx = root.new_inner_scope();
    for (name, v) in vars {
        ctx.add_variable_from_value(*name, v.clone());
    }
    let result = Value::resolve(program, &ctx);
    let (spent, _, over) = SPENT.with(Cell::get);
    let outcome = if over {
        Outcome::Cancelled
    } else {
        match result {
            Ok(v) => Outcome::Value(v),
            Err(e) => Outcome::Error(go_error(&e)),
        }
    };
    (outcome, spent)
}

/// An evaluation error as cel-go words it (kube-apiserver prints it).
fn go_error(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::IndexOutOfBounds(i) => format!("index out of bounds: {}", show(i)),
        ExecutionError::DivisionByZero(_) => "division by zero".into(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
        ExecutionError::Overflow(..) => "integer overflow".into(),
        ExecutionError::NoSuchOverload(_)
        | ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::ValuesNotComparable(..)
        | ExecutionError::UnexpectedType { .. } => "no such overload".into(),
        ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::UInt(u) => u.to_string(),
        Value::String(s) => s.to_string(),
        other => format!("{other:?}"),
    }
}

/// The program with its cost counted: each comprehension's loop pays its
/// condition and step per iteration. Returns the cost of what runs once.
pub(crate) fn instrument(e: &mut IdedExpr) -> u64 {
    let mut once = 0;
    match &mut e.expr {
        Expr::Comprehension(c) => {
            once += instrument(&mut c.iter_range) + instrument(&mut c.accu_init);
            once += instrument(&mut c.result);
            let per = 1 + instrument(&mut c.loop_cond) + instrument(&mut c.loop_step);
            count_loop(c, per);
        }
        Expr::Call(call) => {
            once += 1;
            if let Some(t) = call.target.as_deref_mut() {
                once += instrument(t);
            }
            for a in &mut call.args {
                once += instrument(a);
            }
        }
        Expr::Select(s) => once += 1 + instrument(&mut s.operand),
        Expr::Ident(_) => once += 1,
        Expr::List(l) => {
            once += 10;
            for x in &mut l.elements {
                once += instrument(x);
            }
        }
        Expr::Map(m) => {
            once += 30;
            for entry in &mut m.entries {
                if let cel::common::ast::EntryExpr::MapEntry(me) = &mut entry.expr {
                    once += instrument(&mut me.key) + instrument(&mut me.value);
                }
            }
        }
        _ => {}
    }
    once
}

/// Wraps `x` as `@cost(per, x)`.
fn counted(x: &mut IdedExpr, per: u64) {
    let inner = std::mem::take(x);
    *x = IdedExpr {
        id: inner.id,
        expr: Expr::Call(CallExpr {
            func_name: COST.into(),
            target: None,
            args: vec![
                IdedExpr {
                    id: 0,
                    expr: Expr::Literal(LiteralValue::Int((per as i64).into())),
                },
                inner,
            ],
        }),
    };
}

/// Puts the count where the loop evaluates it once per element, keeping the
/// shape of `map` and `filter` (`accu + [x]`, `guard ? accu + [x] : accu`)
/// that the interpreter builds lists from in one pass.
fn count_loop(c: &mut ComprehensionExpr, per: u64) {
    let accu = c.accu_var.clone();
    let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(n) if *n == accu);
    let appends = |e: &IdedExpr| match &e.expr {
        Expr::Call(call) if call.func_name == "_+_" => {
            matches!(call.args.as_slice(), [a, b] if is_accu(a) && matches!(b.expr, Expr::List(_)))
        }
        _ => false,
    };
    if matches!(c.loop_cond.expr, Expr::Literal(_)) && is_accu(&c.result) {
        if let Expr::Call(call) = &mut c.loop_step.expr {
            if call.func_name == "_?_:_" && call.args.len() == 3 && appends(&call.args[1]) {
                counted(&mut call.args[0], per);
                return;
            }
        }
        if appends(&c.loop_step) {
            if let Expr::Call(call) = &mut c.loop_step.expr {
                if let Expr::List(ListExpr { elements, .. }) = &mut call.args[1].expr {
                    if let Some(x) = elements.first_mut() {
                        counted(x, per);
                        return;
                    }
                }
            }
        }
    }
    counted(&mut c.loop_cond, per);
}

/// A context with Kubernetes' library (functions the cel crate lacks):
/// made once per object checked, each rule's variables in a scope of it.
pub(crate) fn root_context() -> Context<'static, 'static> {
    let mut ctx = Context::with_env(super::env());
    let add = |name: &str, r: Result<(), cel::DeclarationError>| {
        debug_assert!(r.is_ok(), "{name}: {r:?}");
    };
    add(COST, ctx.add_function(COST, cost));
    add("isSorted", ctx.add_function("isSorted", is_sorted));
    add("sum", ctx.add_function("sum", sum));
    add("min", ctx.add_function("min", list_min));
    add("max", ctx.add_function("max", list_max));
    add("indexOf", ctx.add_function("indexOf", index_of));
    add(
        "lastIndexOf",
        ctx.add_function("lastIndexOf", last_index_of),
    );
    add("find", ctx.add_function("find", find));
    add("findAll", ctx.add_function("findAll", find_all));
    add("quantity", ctx.add_function("quantity", quantity));
    add("isQuantity", ctx.add_function("isQuantity", is_quantity));
    add("isLessThan", ctx.add_function("isLessThan", q_less));
    add(
        "isGreaterThan",
        ctx.add_function("isGreaterThan", q_greater),
    );
    add("compareTo", ctx.add_function("compareTo", q_compare));
    add("add", ctx.add_function("add", q_add));
    add("sub", ctx.add_function("sub", q_sub));
    add("asInteger", ctx.add_function("asInteger", q_as_integer));
    add(
        "asApproximateFloat",
        ctx.add_function("asApproximateFloat", q_as_float),
    );
    add("sign", ctx.add_function("sign", q_sign));
    add("isInteger", ctx.add_function("isInteger", q_is_integer));
    add("url", ctx.add_function("url", url));
    add("isURL", ctx.add_function("isURL", is_url));
    for (name, part) in [
        ("getScheme", UrlPart::Scheme),
        ("getHost", UrlPart::Host),
        ("getHostname", UrlPart::Hostname),
        ("getPort", UrlPart::Port),
        ("getEscapedPath", UrlPart::Path),
    ] {
        add(
            name,
            ctx.add_function(name, move |This(this): This<Value>| url_part(&this, part)),
        );
    }
    ctx
}

type Res = Result<Value, ExecutionError>;

fn fail(what: &str) -> ExecutionError {
    ExecutionError::FunctionError {
        function: String::new(),
        message: what.to_string(),
    }
}

fn list(v: &Value) -> Result<&[Value], ExecutionError> {
    match v {
        Value::List(l) => Ok(l),
        _ => Err(ExecutionError::no_such_overload("list", vec![])),
    }
}

fn compare(a: &Value, b: &Value) -> Result<std::cmp::Ordering, ExecutionError> {
    a.partial_cmp(b)
        .ok_or_else(|| ExecutionError::no_such_overload("compare", vec![]))
}

fn is_sorted(This(this): This<Value>) -> Res {
    let l = list(&this)?;
    for w in l.windows(2) {
        if compare(&w[0], &w[1])? == std::cmp::Ordering::Greater {
            return Ok(Value::Bool(false));
        }
    }
    Ok(Value::Bool(true))
}

fn sum(This(this): This<Value>) -> Res {
    let l = list(&this)?;
    let mut acc: Option<Value> = None;
    for x in l {
        acc = Some(match (acc, x) {
            (None, x) => x.clone(),
            (Some(Value::Int(a)), Value::Int(b)) => {
                Value::Int(a.checked_add(*b).ok_or_else(|| fail("integer overflow"))?)
            }
            (Some(Value::UInt(a)), Value::UInt(b)) => Value::UInt(
                a.checked_add(*b)
                    .ok_or_else(|| fail("unsigned integer overflow"))?,
            ),
            (Some(Value::Float(a)), Value::Float(b)) => Value::Float(a + b),
            (Some(Value::Duration(a)), Value::Duration(b)) => Value::Duration(a + *b),
            _ => return Err(ExecutionError::no_such_overload("sum", vec![])),
        });
    }
    Ok(acc.unwrap_or(Value::Int(0)))
}

/// `list.min()` (Kubernetes' library) or `min(a, b, ...)`.
fn extreme(this: Option<Value>, args: &[Value], want: std::cmp::Ordering) -> Res {
    let items: Vec<Value> = match (this, args) {
        (Some(t), _) => list(&t)?.to_vec(),
        (None, [Value::List(l)]) => l.to_vec(),
        (None, a) => a.to_vec(),
    };
    let mut best: Option<Value> = None;
    for x in items {
        best = Some(match best {
            None => x,
            Some(b) => {
                if compare(&x, &b)? == want {
                    x
                } else {
                    b
                }
            }
        });
    }
    best.ok_or_else(|| fail("min called on empty list"))
}

fn list_min(ftx: &cel::FunctionContext, Arguments(args): Arguments) -> Res {
    let this = ftx
        .this
        .as_ref()
        .map(|t| Value::try_from(&**t))
        .transpose()?;
    extreme(this, &args, std::cmp::Ordering::Less)
}

fn list_max(ftx: &cel::FunctionContext, Arguments(args): Arguments) -> Res {
    let this = ftx
        .this
        .as_ref()
        .map(|t| Value::try_from(&**t))
        .transpose()?;
    extreme(this, &args, std::cmp::Ordering::Greater)
}

/// `indexOf` of a list (Kubernetes) or of a string (the strings extension).
fn index_of(
    ftx: &cel::FunctionContext,
    This(this): This<Value>,
    Arguments(args): Arguments,
) -> Res {
    match &this {
        Value::List(l) => {
            let x = args.first().cloned().unwrap_or(Value::Null);
            Ok(Value::Int(
                l.iter().position(|v| *v == x).map_or(-1, |i| i as i64),
            ))
        }
        Value::String(s) => string_index(s, &args, false).map_err(|e| ftx.error(e)),
        _ => Err(ExecutionError::no_such_overload("indexOf", vec![])),
    }
}

fn last_index_of(
    ftx: &cel::FunctionContext,
    This(this): This<Value>,
    Arguments(args): Arguments,
) -> Res {
    match &this {
        Value::List(l) => {
            let x = args.first().cloned().unwrap_or(Value::Null);
            Ok(Value::Int(
                l.iter().rposition(|v| *v == x).map_or(-1, |i| i as i64),
            ))
        }
        Value::String(s) => string_index(s, &args, true).map_err(|e| ftx.error(e)),
        _ => Err(ExecutionError::no_such_overload("lastIndexOf", vec![])),
    }
}

/// The strings extension's `indexOf`/`lastIndexOf`, in code points.
fn string_index(s: &str, args: &[Value], last: bool) -> Result<Value, String> {
    let Some(Value::String(sub)) = args.first() else {
        return Err("no such overload".into());
    };
    let chars: Vec<char> = s.chars().collect();
    let needle: Vec<char> = sub.chars().collect();
    let n = chars.len() as i64;
    let offset = match args.get(1) {
        Some(Value::Int(o)) => *o,
        None if last => n,
        None => 0,
        _ => return Err("no such overload".into()),
    };
    if offset < 0 || offset > n {
        return Err(format!("index out of range: {offset}"));
    }
    let fits = |i: usize| chars.get(i..i + needle.len()) == Some(&needle[..]);
    let found = if last {
        let top = (offset as usize).min(chars.len().saturating_sub(needle.len()));
        (0..=top).rev().find(|&i| fits(i))
    } else {
        (offset as usize..=chars.len()).find(|&i| fits(i))
    };
    Ok(Value::Int(found.map_or(-1, |i| i as i64)))
}

fn regex_of(re: &str) -> Result<regex::Regex, ExecutionError> {
    regex::Regex::new(re).map_err(|e| fail(&format!("invalid regex: {e}")))
}

fn find(This(this): This<Arc<String>>, re: Arc<String>) -> Res {
    let re = regex_of(&re)?;
    Ok(Value::String(Arc::new(
        re.find(&this)
            .map_or(String::new(), |m| m.as_str().to_string()),
    )))
}

fn find_all(This(this): This<Arc<String>>, Arguments(args): Arguments) -> Res {
    let Some(Value::String(re)) = args.first() else {
        return Err(ExecutionError::no_such_overload("findAll", vec![]));
    };
    let re = regex_of(re)?;
    let limit = match args.get(1) {
        Some(Value::Int(n)) if *n >= 0 => *n as usize,
        _ => usize::MAX,
    };
    Ok(Value::List(Arc::new(
        re.find_iter(&this)
            .take(limit)
            .map(|m| Value::String(Arc::new(m.as_str().to_string())))
            .collect(),
    )))
}

/// Kubernetes' `quantity` type.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Qty(Quantity);

impl Opaque for Qty {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

fn qty(v: &Value) -> Result<Quantity, ExecutionError> {
    if let Value::Opaque(o) = v {
        if let Some(q) = o.downcast_ref::<Qty>() {
            return Ok(q.0);
        }
    }
    Err(ExecutionError::no_such_overload("quantity", vec![]))
}

fn quantity(s: Arc<String>) -> Res {
    Quantity::parse(&s)
        .map(|q| Value::Opaque(Arc::new(Qty(q))))
        .ok_or_else(|| fail("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"))
}

fn is_quantity(s: Arc<String>) -> Res {
    Ok(Value::Bool(Quantity::parse(&s).is_some()))
}

fn q_pair(this: &Value, other: &Value) -> Result<(Quantity, Quantity), ExecutionError> {
    let b = match other {
        Value::Int(i) => Quantity::count(*i),
        other => qty(other)?,
    };
    Ok((qty(this)?, b))
}

fn q_less(This(this): This<Value>, other: Value) -> Res {
    let (a, b) = q_pair(&this, &other)?;
    Ok(Value::Bool(a < b))
}

fn q_greater(This(this): This<Value>, other: Value) -> Res {
    let (a, b) = q_pair(&this, &other)?;
    Ok(Value::Bool(a > b))
}

fn q_compare(This(this): This<Value>, other: Value) -> Res {
    let (a, b) = q_pair(&this, &other)?;
    Ok(Value::Int(a.cmp(&b) as i64))
}

fn q_add(This(this): This<Value>, other: Value) -> Res {
    let (a, b) = q_pair(&this, &other)?;
    Ok(Value::Opaque(Arc::new(Qty(a.add(b)))))
}

fn q_sub(This(this): This<Value>, other: Value) -> Res {
    let (a, b) = q_pair(&this, &other)?;
    Ok(Value::Opaque(Arc::new(Qty(a.sub(b)))))
}

fn q_as_integer(This(this): This<Value>) -> Res {
    let q = qty(&this)?;
    let rounded = q.round_up_to_units();
    if rounded != q {
        return Err(fail("cannot convert value to integer"));
    }
    let units = q.to_string();
    Quantity::parse(&units)
        .and_then(|_| nanos_to_int(q))
        .map(Value::Int)
        .ok_or_else(|| fail("cannot convert value to integer"))
}

fn nanos_to_int(q: Quantity) -> Option<i64> {
    let f = q.as_f64();
    (f.fract() == 0.0 && f.abs() < 9.2e18).then_some(f as i64)
}

fn q_as_float(This(this): This<Value>) -> Res {
    Ok(Value::Float(qty(&this)?.as_f64()))
}

fn q_sign(This(this): This<Value>) -> Res {
    let q = qty(&this)?;
    Ok(Value::Int(if q.is_zero() {
        0
    } else if q.is_negative() {
        -1
    } else {
        1
    }))
}

fn q_is_integer(This(this): This<Value>) -> Res {
    let q = qty(&this)?;
    Ok(Value::Bool(
        q.round_up_to_units() == q && nanos_to_int(q).is_some(),
    ))
}

/// Kubernetes' `URL` type: an absolute URI or an absolute path.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Url {
    scheme: String,
    host: String,
    path: String,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.URL"
    }
}

fn parse_url(s: &str) -> Option<Url> {
    if s.starts_with('/') {
        return Some(Url {
            scheme: String::new(),
            host: String::new(),
            path: s.split(['?', '#']).next().unwrap_or("").to_string(),
        });
    }
    let (scheme, rest) = s.split_once("://")?;
    let scheme_ok = scheme
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok || s.contains(char::is_whitespace) {
        return None;
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let host = &rest[..end];
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    let path = rest[end..].split(['?', '#']).next().unwrap_or("");
    Some(Url {
        scheme: scheme.to_string(),
        host: host.to_string(),
        path: path.to_string(),
    })
}

fn url(s: Arc<String>) -> Res {
    parse_url(&s)
        .map(|u| Value::Opaque(Arc::new(u)))
        .ok_or_else(|| {
            fail(&format!(
                "URL parse error during conversion from string: {s}"
            ))
        })
}

fn is_url(s: Arc<String>) -> Res {
    Ok(Value::Bool(parse_url(&s).is_some()))
}

#[derive(Clone, Copy)]
enum UrlPart {
    Scheme,
    Host,
    Hostname,
    Port,
    Path,
}

fn url_part(v: &Value, part: UrlPart) -> Res {
    let Value::Opaque(o) = v else {
        return Err(ExecutionError::no_such_overload("url", vec![]));
    };
    let u = o
        .downcast_ref::<Url>()
        .ok_or_else(|| ExecutionError::no_such_overload("url", vec![]))?;
    let (hostname, port) = if let Some(rest) = u.host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((h, p)) => (h.to_string(), p.trim_start_matches(':').to_string()),
            None => (rest.to_string(), String::new()),
        }
    } else {
        match u.host.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.to_string()),
            None => (u.host.clone(), String::new()),
        }
    };
    let s = match part {
        UrlPart::Scheme => u.scheme.clone(),
        UrlPart::Host => u.host.clone(),
        UrlPart::Hostname => hostname,
        UrlPart::Port => port,
        UrlPart::Path => u.path.clone(),
    };
    Ok(Value::String(Arc::new(s)))
}

/// A JSON value as the CEL value its schema declares (the types of
/// `check.rs`): integers of `number` fields as doubles, `date-time`
/// strings as timestamps, objects as maps of their escaped field names.
pub(crate) fn to_cel(v: &Json, s: Option<&Schema>, root: bool) -> Value {
    let Some(s) = s else { return untyped(v) };
    if s.int_or_string {
        return untyped(v);
    }
    match (v, s.ty.as_deref()) {
        (Json::Null, _) => Value::Null,
        (Json::Array(a), _) => {
            let items = s.items.as_deref();
            let embedded = items.is_some_and(|i| i.embedded);
            Value::List(Arc::new(
                a.iter().map(|x| to_cel(x, items, embedded)).collect(),
            ))
        }
        (Json::Object(m), _) => {
            let mut out: HashMap<Key, Value> = HashMap::with_capacity(m.len());
            if let Some(Additional::Schema(a)) = &s.additional {
                for (k, x) in m {
                    out.insert(Key::from(k.clone()), to_cel(x, Some(a), a.embedded));
                }
            } else {
                for (k, x) in m {
                    if let Some(p) = s.properties.get(k) {
                        if p.ty.is_none() && !p.int_or_string {
                            continue;
                        }
                        if let Some(name) = escape(k) {
                            let value = to_cel(x, Some(p), p.embedded);
                            if super::reserved(k) {
                                out.insert(Key::from(k.clone()), value.clone());
                            }
                            out.insert(Key::from(name), value);
                        }
                    }
                }
                if root && !declares_object_meta(s) {
                    for k in ["apiVersion", "kind"] {
                        if let Some(Json::String(x)) = m.get(k) {
                            out.insert(
                                Key::from(k.to_string()),
                                Value::String(Arc::new(x.clone())),
                            );
                        }
                    }
                    let mut md: HashMap<Key, Value> = HashMap::new();
                    for k in ["name", "generateName"] {
                        if let Some(Json::String(x)) = m.get("metadata").and_then(|md| md.get(k)) {
                            md.insert(Key::from(k.to_string()), Value::String(Arc::new(x.clone())));
                        }
                    }
                    out.insert(Key::from("metadata".to_string()), Value::Map(Map::from(md)));
                }
            }
            Value::Map(Map::from(out))
        }
        (Json::Number(n), Some("number")) => Value::Float(n.as_f64().unwrap_or(0.0)),
        (Json::Number(n), Some("integer")) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => n
                .as_f64()
                .filter(|f| f.fract() == 0.0)
                .map_or(Value::Float(n.as_f64().unwrap_or(0.0)), |f| {
                    Value::Int(f as i64)
                }),
        },
        (Json::String(x), Some("string")) => match s.format.as_deref() {
            Some("date-time") => chrono::DateTime::parse_from_rfc3339(x)
                .map(Value::Timestamp)
                .unwrap_or_else(|_| Value::String(Arc::new(x.clone()))),
            Some("date") => chrono::NaiveDate::parse_from_str(x, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|d| Value::Timestamp(d.and_utc().fixed_offset()))
                .unwrap_or_else(|| Value::String(Arc::new(x.clone()))),
            Some("duration") => go_duration(x)
                .map(Value::Duration)
                .unwrap_or_else(|| Value::String(Arc::new(x.clone()))),
            Some("byte") => {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD
                    .decode(x)
                    .map(|b| Value::Bytes(Arc::new(b)))
                    .unwrap_or_else(|_| Value::String(Arc::new(x.clone())))
            }
            _ => Value::String(Arc::new(x.clone())),
        },
        _ => untyped(v),
    }
}

/// A JSON value with no schema to say more (int-or-string, dyn).
pub(crate) fn untyped(v: &Json) -> Value {
    match v {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => match n.as_u64() {
                Some(u) => Value::UInt(u),
                None => Value::Float(n.as_f64().unwrap_or(0.0)),
            },
        },
        Json::String(s) => Value::String(Arc::new(s.clone())),
        Json::Array(a) => Value::List(Arc::new(a.iter().map(untyped).collect())),
        Json::Object(m) => Value::Map(Map::from(
            m.iter()
                .map(|(k, x)| (Key::from(k.clone()), untyped(x)))
                .collect::<HashMap<Key, Value>>(),
        )),
    }
}

/// Go's `time.ParseDuration` (`1h30m`, `-1.5s`, `300ms`).
fn go_duration(s: &str) -> Option<chrono::Duration> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(chrono::Duration::zero());
    }
    if rest.is_empty() {
        return None;
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let n: f64 = rest[..end].parse().ok()?;
        rest = &rest[end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_end..];
        nanos += n * scale;
    }
    let d = chrono::Duration::nanoseconds(nanos as i64);
    Some(if neg { -d } else { d })
}

/// `optional.of(v)` or `optional.none()`, as `oldSelf` of an
/// `optionalOldSelf` rule.
pub(crate) fn optional(v: Option<Value>) -> Value {
    Value::Opaque(Arc::new(match v {
        Some(v) => OptionalValue::of(v),
        None => OptionalValue::none(),
    }))
}
