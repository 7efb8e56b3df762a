//! What kube-apiserver's CEL compiler finds in a rule before any object is
//! seen: each name and field against the types the structural schema
//! declares (`undefined field 'z'`, `undeclared reference to 'f'`), operands
//! of arithmetic that no overload takes, a result that is not a bool (or a
//! string, for a messageExpression), and the rule's estimated cost.
//!
//! The types are apiserver's `SchemaDeclType`: objects with properties are
//! objects whose fields are the properties' escaped names (at a resource's
//! root also `apiVersion`, `kind` and `metadata.name`/`generateName`),
//! `additionalProperties` maps, arrays lists, string formats `byte`,
//! `duration`, `date`/`date-time` bytes, durations and timestamps,
//! `x-kubernetes-int-or-string` dyn. Sizes (for the cost) come from
//! maxItems/maxProperties/maxLength, else from the largest request the
//! server takes (3 MiB) divided by an element's smallest serialised size,
//! as apiserver estimates them.
//!
//! The cost follows cel-go's estimator in its large terms (a comprehension
//! costs its range's size times its step, string and list functions cost
//! their operands' sizes); it is an estimate of the same order, not cel-go's
//! figure to the unit.

use super::super::{Additional, Schema};
use cel::common::ast::{Expr, IdedExpr, LiteralValue};

/// The largest request body kube-apiserver reads (3 MiB).
pub(crate) const MAX_REQUEST_BYTES: u64 = 3 * 1024 * 1024;

/// A CEL type, as far as the checker follows it.
#[derive(Clone, Debug)]
pub(crate) enum Ty<'s> {
    Dyn,
    Bool,
    Int,
    Uint,
    Double,
    /// A string of at most this many bytes.
    Str(u64),
    Bytes(u64),
    Duration,
    Timestamp,
    Null,
    Type,
    /// A list of at most this many elements.
    List(Box<Ty<'s>>, u64),
    /// A map (string keys) of at most this many entries.
    Map(Box<Ty<'s>>, u64),
    /// An object of a schema; `true` at a resource's root.
    Object(&'s Schema, bool),
    /// `metadata` at a resource's root: `name` and `generateName`.
    Meta,
    Optional(Box<Ty<'s>>),
    Quantity,
    Url,
    /// An object with these fields only (a policy's `variables`).
    Fields(Vec<(String, Ty<'s>)>),
    /// A ValidatingAdmissionPolicy's `authorizer` and what its builder
    /// methods (`group`, `resource`, ...) return.
    Authz,
    /// What `authorizer...check(verb)` returns.
    AuthzDecision,
}

impl Ty<'_> {
    pub(crate) fn name(&self) -> String {
        match self {
            Ty::Dyn => "dyn".into(),
            Ty::Bool => "bool".into(),
            Ty::Int => "int".into(),
            Ty::Uint => "uint".into(),
            Ty::Double => "double".into(),
            Ty::Str(_) => "string".into(),
            Ty::Bytes(_) => "bytes".into(),
            Ty::Duration => "google.protobuf.Duration".into(),
            Ty::Timestamp => "google.protobuf.Timestamp".into(),
            Ty::Null => "null_type".into(),
            Ty::Type => "type".into(),
            Ty::List(e, _) => format!("list({})", e.name()),
            Ty::Map(v, _) => format!("map(string, {})", v.name()),
            Ty::Object(..) | Ty::Meta => "object".into(),
            Ty::Optional(t) => format!("optional_type({})", t.name()),
            Ty::Quantity => "kubernetes.Quantity".into(),
            Ty::Url => "kubernetes.URL".into(),
            Ty::Fields(_) => "kubernetes.variables".into(),
            Ty::Authz => "kubernetes.authorization.Authorizer".into(),
            Ty::AuthzDecision => "kubernetes.authorization.Decision".into(),
        }
    }

    fn is_dyn(&self) -> bool {
        matches!(self, Ty::Dyn)
    }

    /// The most elements (or bytes) a value of this type holds.
    fn size(&self) -> u64 {
        match self {
            Ty::Str(n) | Ty::Bytes(n) | Ty::List(_, n) | Ty::Map(_, n) => *n,
            _ => MAX_REQUEST_BYTES,
        }
    }
}

/// The smallest a value of the type serialises to in JSON (apiserver's
/// `MinSerializedSize`).
fn min_size(t: &Ty) -> u64 {
    match t {
        Ty::Str(_) | Ty::Bytes(_) => 2,
        Ty::Bool => 4,
        Ty::Duration => 4,
        Ty::Timestamp => 22,
        Ty::List(..) | Ty::Map(..) | Ty::Meta => 2,
        Ty::Object(s, _) => {
            2 + s
                .required
                .iter()
                .filter_map(|k| {
                    let p = s.properties.get(k)?;
                    if p.default.is_some() {
                        return None;
                    }
                    Some(k.len() as u64 + ty_of(p, p.embedded).map_or(1, |t| min_size(&t)) + 4)
                })
                .sum::<u64>()
        }
        _ => 1,
    }
}

/// The CEL type of values of `s`; `None` where apiserver declares none (a
/// schema without a type: such a field cannot be named in a rule).
pub(crate) fn ty_of(s: &Schema, root: bool) -> Option<Ty<'_>> {
    if s.int_or_string {
        return Some(Ty::Dyn);
    }
    Some(match s.ty.as_deref()? {
        "array" => {
            let items = s.items.as_deref()?;
            let e = ty_of(items, items.embedded)?;
            let max = s
                .max_items
                .unwrap_or_else(|| (MAX_REQUEST_BYTES - 2) / (min_size(&e) + 1));
            Ty::List(Box::new(e), max)
        }
        "object" => match &s.additional {
            Some(Additional::Schema(a)) => {
                let v = ty_of(a, a.embedded)?;
                let max = s
                    .max_properties
                    .unwrap_or_else(|| (MAX_REQUEST_BYTES - 2) / (min_size(&v) + 4 + 1));
                Ty::Map(Box::new(v), max)
            }
            _ => Ty::Object(s, root),
        },
        "string" => {
            let max = s
                .max_length
                .map(|n| n * 4)
                .unwrap_or_else(|| match &s.enumeration {
                    Some(vs) if !vs.is_empty() => vs
                        .iter()
                        .filter_map(|v| v.as_str())
                        .map(|v| v.len() as u64)
                        .max()
                        .unwrap_or(0),
                    _ => MAX_REQUEST_BYTES - 2,
                });
            match s.format.as_deref() {
                Some("byte") => Ty::Bytes(max),
                Some("duration") => Ty::Duration,
                Some("date" | "date-time") => Ty::Timestamp,
                _ => Ty::Str(max),
            }
        }
        "boolean" => Ty::Bool,
        "number" => Ty::Double,
        "integer" => Ty::Int,
        _ => return None,
    })
}

/// Whether a resource root's schema declares `kind`, `apiVersion` and
/// `metadata.name`/`generateName` itself (then it is taken as it is).
pub(crate) fn declares_object_meta(s: &Schema) -> bool {
    let is_str = |p: Option<&Schema>| p.is_some_and(|p| p.ty.as_deref() == Some("string"));
    let md = s.properties.get("metadata");
    is_str(s.properties.get("kind"))
        && is_str(s.properties.get("apiVersion"))
        && md.is_some_and(|m| {
            m.ty.as_deref() == Some("object")
                && is_str(m.properties.get("name"))
                && is_str(m.properties.get("generateName"))
        })
}

/// The type of field `name` (escaped, as a rule writes it) of an object.
pub(crate) fn field_ty<'s>(s: &'s Schema, root: bool, name: &str) -> Option<Ty<'s>> {
    if root && !declares_object_meta(s) {
        match name {
            "kind" | "apiVersion" => return Some(Ty::Str(MAX_REQUEST_BYTES - 2)),
            "metadata" => return Some(Ty::Meta),
            _ => {}
        }
    }
    // A reserved word names its field as it is, too (`self.namespace`
    // for `__namespace__`, as apiserver's `recognizeKeywordAsFieldName`).
    s.properties
        .iter()
        .find(|(k, _)| {
            super::escape(k).as_deref() == Some(name) || super::reserved(k) && *k == name
        })
        .and_then(|(_, p)| ty_of(p, p.embedded))
}

/// One variable in scope.
struct Var<'s> {
    name: String,
    ty: Ty<'s>,
}

/// Checks an expression; collects errors as cel-go words them.
pub(crate) struct Checker<'a, 's> {
    source: &'a str,
    info: &'a cel::common::ast::SourceInfo,
    scope: Vec<Var<'s>>,
    pub(crate) errors: Vec<String>,
    pub(crate) uses_old_self: bool,
}

/// Names the CEL standard library, its extensions and Kubernetes' library
/// define, with the type they return (given the receiver's type).
fn returns<'s>(name: &str, target: Option<&Ty<'s>>, args: &[Ty<'s>]) -> Option<Ty<'s>> {
    let elem = |t: Option<&Ty<'s>>| match t {
        Some(Ty::List(e, _)) => (**e).clone(),
        _ => Ty::Dyn,
    };
    let string = Ty::Str(MAX_REQUEST_BYTES);
    Some(match name {
        "size" | "int" | "indexOf" | "lastIndexOf" | "compareTo" | "asInteger" | "sign"
        | "getDate" | "getDayOfMonth" | "getDayOfWeek" | "getDayOfYear" | "getFullYear"
        | "getHours" | "getMilliseconds" | "getMinutes" | "getMonth" | "getSeconds" => Ty::Int,
        "uint" => Ty::Uint,
        "double" | "asApproximateFloat" => Ty::Double,
        "bool"
        | "contains"
        | "startsWith"
        | "endsWith"
        | "matches"
        | "isSorted"
        | "isQuantity"
        | "isLessThan"
        | "isGreaterThan"
        | "isInteger"
        | "isURL"
        | "hasValue"
        | "@not_strictly_false"
        | "@in"
        | "!_"
        | "_&&_"
        | "_||_"
        | "_==_"
        | "_!=_"
        | "_<_"
        | "_<=_"
        | "_>_"
        | "_>=_" => Ty::Bool,
        // cel-go knows no bound of a conversion's result: its size is
        // unbounded, which makes a concatenation with it cost too much.
        "string" if !matches!(args.first(), Some(Ty::Str(_))) && target.is_none() => {
            Ty::Str(u64::MAX / 2)
        }
        "string" | "charAt" | "lowerAscii" | "upperAscii" | "replace" | "substring" | "trim"
        | "join" | "format" | "quote" | "find" | "getScheme" | "getHost" | "getHostname"
        | "getPort" | "getEscapedPath" | "base64.encode" | "strings.quote" => match target {
            Some(Ty::Str(n)) if name != "join" && name != "format" => Ty::Str(*n),
            _ => string,
        },
        "split" | "findAll" => Ty::List(Box::new(string), MAX_REQUEST_BYTES),
        "bytes" | "base64.decode" => Ty::Bytes(MAX_REQUEST_BYTES),
        "duration" => Ty::Duration,
        "timestamp" => Ty::Timestamp,
        "type" => Ty::Type,
        "dyn" => Ty::Dyn,
        "sum" | "min" | "max" if target.is_some() => elem(target),
        "min" | "max" => args.first().cloned().unwrap_or(Ty::Dyn),
        "slice" | "distinct" | "reverse" | "sort" | "@sortByAssociatedKeys" => match target {
            Some(t @ Ty::List(..)) => t.clone(),
            Some(Ty::Str(n)) => Ty::Str(*n),
            _ => Ty::Dyn,
        },
        "flatten" => Ty::List(Box::new(Ty::Dyn), MAX_REQUEST_BYTES),
        "lists.range" => Ty::List(Box::new(Ty::Int), MAX_REQUEST_BYTES),
        "quantity" | "add" | "sub" => Ty::Quantity,
        "url" => Ty::Url,
        "getQuery" => Ty::Map(
            Box::new(Ty::List(Box::new(string.clone()), MAX_REQUEST_BYTES)),
            MAX_REQUEST_BYTES,
        ),
        "optional.of" | "optional.ofNonZeroValue" => {
            Ty::Optional(Box::new(args.first().cloned().unwrap_or(Ty::Dyn)))
        }
        "optional.none" => Ty::Optional(Box::new(Ty::Dyn)),
        "value" | "orValue" => match target {
            Some(Ty::Optional(t)) => (**t).clone(),
            _ => Ty::Dyn,
        },
        "or" => target.cloned().unwrap_or(Ty::Dyn),
        "math.greatest" | "math.least" | "math.abs" | "math.ceil" | "math.floor" | "math.round"
        | "math.trunc" | "math.sign" | "math.isInf" | "math.isNaN" | "math.isFinite"
        | "math.bitAnd" | "math.bitOr" | "math.bitXor" | "math.bitNot" | "math.bitShiftLeft"
        | "math.bitShiftRight" | "math.sqrt" => Ty::Dyn,
        _ => return None,
    })
}

/// Namespaces of global functions written as `ns.f(...)`.
const NAMESPACES: &[&str] = &["optional", "math", "strings", "lists", "base64"];

/// Type identifiers (`type(x) == string`).
const TYPE_NAMES: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "google.protobuf.Duration",
    "google.protobuf.Timestamp",
];

fn is_arith(f: &str) -> bool {
    matches!(f, "_+_" | "_-_" | "_*_" | "_/_" | "_%_")
}

fn is_order(f: &str) -> bool {
    matches!(f, "_<_" | "_<=_" | "_>_" | "_>=_")
}

impl<'a, 's> Checker<'a, 's> {
    pub(crate) fn new(
        source: &'a str,
        info: &'a cel::common::ast::SourceInfo,
        vars: Vec<(&str, Ty<'s>)>,
    ) -> Self {
        Checker {
            source,
            info,
            scope: vars
                .into_iter()
                .map(|(n, ty)| Var {
                    name: n.to_string(),
                    ty,
                })
                .collect(),
            errors: Vec::new(),
            uses_old_self: false,
        }
    }

    fn error(&mut self, id: u64, msg: String) {
        self.errors.push(located(self.source, self.info, id, &msg));
    }

    fn lookup(&self, name: &str) -> Option<Ty<'s>> {
        self.scope
            .iter()
            .rev()
            .find(|v| v.name == name)
            .map(|v| v.ty.clone())
    }

    /// The type of `e` and its estimated cost.
    pub(crate) fn check(&mut self, e: &IdedExpr) -> (Ty<'s>, f64) {
        match &e.expr {
            Expr::Literal(l) => (
                match l {
                    LiteralValue::Boolean(_) => Ty::Bool,
                    LiteralValue::Bytes(b) => Ty::Bytes(b.inner().len() as u64),
                    LiteralValue::Double(_) => Ty::Double,
                    LiteralValue::Int(_) => Ty::Int,
                    LiteralValue::Null => Ty::Null,
                    LiteralValue::String(s) => Ty::Str(s.inner().len() as u64),
                    LiteralValue::UInt(_) => Ty::Uint,
                },
                0.0,
            ),
            Expr::Ident(name) => {
                if name == "oldSelf" {
                    self.uses_old_self = true;
                }
                match self.lookup(name) {
                    Some(t) => (t, 1.0),
                    None if TYPE_NAMES.contains(&name.as_str()) => (Ty::Type, 1.0),
                    None => {
                        self.error(
                            e.id,
                            format!("undeclared reference to '{name}' (in container '')"),
                        );
                        (Ty::Dyn, 1.0)
                    }
                }
            }
            Expr::Select(sel) => {
                let (t, c) = self.check(&sel.operand);
                let ft = self.select(e.id, &t, &sel.field);
                (if sel.test { Ty::Bool } else { ft }, c + 1.0)
            }
            Expr::Call(call) => {
                self.call(e.id, &call.func_name, call.target.as_deref(), &call.args)
            }
            Expr::List(l) => {
                let mut cost = 10.0;
                let mut elem: Option<Ty> = None;
                for x in &l.elements {
                    let (t, c) = self.check(x);
                    cost += c;
                    elem = Some(match elem {
                        None => t,
                        Some(prev) if prev.name() == t.name() => prev,
                        Some(_) => Ty::Dyn,
                    });
                }
                let n = l.elements.len() as u64;
                (Ty::List(Box::new(elem.unwrap_or(Ty::Dyn)), n), cost)
            }
            Expr::Map(m) => {
                let mut cost = 30.0;
                for entry in &m.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(me) = &entry.expr {
                        cost += self.check(&me.key).1 + self.check(&me.value).1;
                    }
                }
                (Ty::Map(Box::new(Ty::Dyn), m.entries.len() as u64), cost)
            }
            Expr::Struct(_) => (Ty::Dyn, 40.0),
            Expr::Comprehension(c) => {
                let (range, rc) = self.check(&c.iter_range);
                let (accu, ac) = self.check(&c.accu_init);
                let (var1, var2) = match &range {
                    Ty::List(el, _) => {
                        if c.iter_var2.is_some() {
                            (Ty::Int, (**el).clone())
                        } else {
                            ((**el).clone(), Ty::Dyn)
                        }
                    }
                    Ty::Map(v, _) => (Ty::Str(MAX_REQUEST_BYTES), (**v).clone()),
                    _ => (Ty::Dyn, Ty::Dyn),
                };
                let n = range.size() as f64;
                let depth = self.scope.len();
                self.scope.push(Var {
                    name: c.accu_var.clone(),
                    ty: accu.clone(),
                });
                self.scope.push(Var {
                    name: c.iter_var.clone(),
                    ty: var1,
                });
                if let Some(v2) = &c.iter_var2 {
                    self.scope.push(Var {
                        name: v2.clone(),
                        ty: var2,
                    });
                }
                let (_, cc) = self.check(&c.loop_cond);
                let (step, sc) = self.check(&c.loop_step);
                self.scope.truncate(depth + 1);
                let (result, resc) = self.check(&c.result);
                self.scope.truncate(depth);
                // `map` and `filter` build a list of the step's elements.
                let result = match (&result, &step) {
                    (Ty::List(..), _) => match &step {
                        Ty::List(e, _) if !e.is_dyn() => Ty::List(e.clone(), range.size()),
                        Ty::List(..) | Ty::Dyn => Ty::List(Box::new(Ty::Dyn), range.size()),
                        _ => result,
                    },
                    _ => result,
                };
                let _ = accu;
                (result, rc + ac + n * (cc + sc) + resc)
            }
            Expr::Unspecified => (Ty::Dyn, 0.0),
        }
    }

    fn select(&mut self, id: u64, t: &Ty<'s>, field: &str) -> Ty<'s> {
        match t {
            Ty::Object(s, root) => match field_ty(s, *root, field) {
                Some(ft) => ft,
                None => {
                    self.error(id, format!("undefined field '{field}'"));
                    Ty::Dyn
                }
            },
            Ty::Meta => match field {
                "name" | "generateName" => Ty::Str(MAX_REQUEST_BYTES - 2),
                _ => {
                    self.error(id, format!("undefined field '{field}'"));
                    Ty::Dyn
                }
            },
            Ty::Map(v, _) => (**v).clone(),
            Ty::Fields(fields) => match fields.iter().find(|(n, _)| n == field) {
                Some((_, t)) => t.clone(),
                None => {
                    self.error(id, format!("undefined field '{field}'"));
                    Ty::Dyn
                }
            },
            Ty::Dyn => Ty::Dyn,
            Ty::Optional(_) => Ty::Dyn,
            other => {
                self.error(
                    id,
                    format!("type '{}' does not support field selection", other.name()),
                );
                Ty::Dyn
            }
        }
    }

    fn call(
        &mut self,
        id: u64,
        func: &str,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> (Ty<'s>, f64) {
        // `ns.f(...)`: a global function of a namespace, unless `ns` is a
        // variable.
        if let Some(Expr::Ident(ns)) = target.map(|t| &t.expr) {
            if NAMESPACES.contains(&ns.as_str()) && self.lookup(ns).is_none() {
                let qualified = format!("{ns}.{func}");
                return self.call(id, &qualified, None, args);
            }
        }
        let mut cost = 0.0;
        let t = target.map(|t| {
            let (ty, c) = self.check(t);
            cost += c;
            ty
        });
        let mut tys = Vec::with_capacity(args.len());
        for a in args {
            let (ty, c) = self.check(a);
            cost += c;
            tys.push(ty);
        }
        match func {
            "_[_]" | "_[?_]" => {
                let ty = match tys.first() {
                    Some(Ty::List(e, _)) => (**e).clone(),
                    Some(Ty::Map(v, _)) => (**v).clone(),
                    _ => Ty::Dyn,
                };
                let ty = if func == "_[?_]" {
                    Ty::Optional(Box::new(ty))
                } else {
                    ty
                };
                return (ty, cost + 1.0);
            }
            "_?._" => {
                let field = match args.get(1).map(|a| &a.expr) {
                    Some(Expr::Literal(LiteralValue::String(s))) => s.inner().to_string(),
                    _ => String::new(),
                };
                let base = match tys.first() {
                    Some(Ty::Optional(t)) => (**t).clone(),
                    Some(t) => t.clone(),
                    None => Ty::Dyn,
                };
                let ft = self.select(id, &base, &field);
                return (Ty::Optional(Box::new(ft)), cost + 1.0);
            }
            "_?_:_" => {
                let ty = match (tys.get(1), tys.get(2)) {
                    (Some(a), Some(b)) if a.name() == b.name() => a.clone(),
                    _ => Ty::Dyn,
                };
                return (ty, cost);
            }
            "-_" => return (tys.first().cloned().unwrap_or(Ty::Dyn), cost + 1.0),
            _ => {}
        }
        if is_arith(func) {
            if let [a, b] = &tys[..] {
                return match arith(func, a, b) {
                    Some(ty) => {
                        let c = match &ty {
                            Ty::Str(_) | Ty::List(..) => {
                                (a.size().saturating_add(b.size()) as f64 * 0.1).ceil()
                            }
                            _ => 1.0,
                        };
                        (ty, cost + c)
                    }
                    None => {
                        self.no_overload(id, func, a, b);
                        (Ty::Dyn, cost + 1.0)
                    }
                };
            }
        }
        if is_order(func) {
            if let [a, b] = &tys[..] {
                if !orderable(a, b) {
                    self.no_overload(id, func, a, b);
                }
            }
        }
        let call_cost = match func {
            "_==_" | "_!=_" => match (tys.first(), tys.get(1)) {
                (Some(a @ (Ty::Str(_) | Ty::Bytes(_) | Ty::List(..) | Ty::Map(..))), Some(b)) => {
                    (a.size().min(b.size()) as f64 * 0.1).ceil().max(1.0)
                }
                _ => 1.0,
            },
            "contains" | "startsWith" | "endsWith" | "indexOf" | "lastIndexOf" | "replace"
            | "split" | "lowerAscii" | "upperAscii" | "trim" | "substring" | "charAt" => {
                let n = t.as_ref().map_or(1, Ty::size);
                (n as f64 * 0.1).ceil().max(1.0)
            }
            "matches" | "find" | "findAll" => {
                let n = t.as_ref().or(tys.first()).map_or(1, Ty::size);
                let re = tys.last().map_or(1, Ty::size);
                (n as f64 * 0.1).ceil().max(1.0) * (re as f64 * 0.25).ceil().max(1.0)
            }
            "isSorted"
            | "sum"
            | "min"
            | "max"
            | "@in"
            | "join"
            | "sort"
            | "distinct"
            | "flatten"
            | "reverse"
            | "slice"
            | "@sortByAssociatedKeys"
                if t.is_some() || func == "@in" =>
            {
                let n = t.as_ref().or(tys.get(1)).map_or(1, Ty::size);
                n as f64
            }
            _ => 1.0,
        };
        // The authorizer library (`authorizer.group('apps').resource(...)
        // .check('create').allowed()`), for admission policies.
        match (t.as_ref(), func) {
            (
                Some(Ty::Authz),
                "group" | "resource" | "subresource" | "namespace" | "name" | "path"
                | "serviceAccount" | "requestResource",
            ) => return (Ty::Authz, cost + 1.0),
            (Some(Ty::Authz), "check") => return (Ty::AuthzDecision, cost + 1.0),
            (Some(Ty::AuthzDecision), "allowed" | "errored") => return (Ty::Bool, cost + 1.0),
            (Some(Ty::AuthzDecision), "reason" | "error") => {
                return (Ty::Str(MAX_REQUEST_BYTES), cost + 1.0)
            }
            _ => {}
        }
        match returns(func, t.as_ref(), &tys) {
            Some(ty) => (ty, cost + call_cost),
            None => {
                self.error(
                    id,
                    format!("undeclared reference to '{func}' (in container '')"),
                );
                (Ty::Dyn, cost + 1.0)
            }
        }
    }

    fn no_overload(&mut self, id: u64, func: &str, a: &Ty, b: &Ty) {
        self.error(
            id,
            format!(
                "found no matching overload for '{func}' applied to '({}, {})'",
                a.name(),
                b.name()
            ),
        );
    }
}

/// The type of `a op b` for arithmetic, `None` when no overload takes them.
fn arith<'s>(func: &str, a: &Ty<'s>, b: &Ty<'s>) -> Option<Ty<'s>> {
    use Ty::*;
    Some(match (a, b) {
        (Dyn, Dyn) => Dyn,
        // One known operand picks the overload (`add_string` for a string
        // and a dyn), as cel-go's checker resolves it.
        (Dyn, t) | (t, Dyn) => match t {
            Int | Uint | Double => t.clone(),
            Str(_) if func == "_+_" => Str(MAX_REQUEST_BYTES),
            Bytes(_) if func == "_+_" => Bytes(MAX_REQUEST_BYTES),
            List(e, _) if func == "_+_" => List(e.clone(), MAX_REQUEST_BYTES),
            Str(_) | Bytes(_) | List(..) | Bool | Null => return None,
            _ => Dyn,
        },
        (Int, Int) => Int,
        (Uint, Uint) => Uint,
        (Double, Double) if func != "_%_" => Double,
        (Str(x), Str(y)) if func == "_+_" => Str(x.saturating_add(*y)),
        (Bytes(x), Bytes(y)) if func == "_+_" => Bytes(x.saturating_add(*y)),
        (List(e, x), List(_, y)) if func == "_+_" => List(e.clone(), x.saturating_add(*y)),
        (Duration, Duration) if func == "_+_" || func == "_-_" => Duration,
        (Timestamp, Duration) if func == "_+_" || func == "_-_" => Timestamp,
        (Duration, Timestamp) if func == "_+_" => Timestamp,
        (Timestamp, Timestamp) if func == "_-_" => Duration,
        _ => return None,
    })
}

/// Whether `<` and the like take `a` and `b` (numbers of any kind compare
/// with each other, as apiserver's CEL allows).
fn orderable(a: &Ty, b: &Ty) -> bool {
    use Ty::*;
    let num = |t: &Ty| matches!(t, Int | Uint | Double);
    match (a, b) {
        (Dyn, _) | (_, Dyn) => true,
        (x, y) if num(x) && num(y) => true,
        (Str(_), Str(_)) | (Bytes(_), Bytes(_)) | (Bool, Bool) => true,
        (Duration, Duration) | (Timestamp, Timestamp) => true,
        _ => false,
    }
}

/// cel-go's error layout: `ERROR: <input>:L:C: msg`, the line, a caret.
pub(crate) fn located(
    source: &str,
    info: &cel::common::ast::SourceInfo,
    id: u64,
    msg: &str,
) -> String {
    let Some((start, _)) = info.offset_for(id) else {
        return format!("ERROR: <input>:-1:0: {msg}");
    };
    let start = start as usize;
    let mut line_start = 0;
    let mut line_no = 1;
    for (i, ch) in source.char_indices() {
        if i >= start {
            break;
        }
        if ch == '\n' {
            line_no += 1;
            line_start = i + 1;
        }
    }
    let line = source[line_start..].lines().next().unwrap_or("");
    let col = source
        .get(line_start..start.min(source.len()))
        .map_or(0, |s| s.chars().count());
    format!(
        "ERROR: <input>:{line_no}:{}: {msg}\n | {line}\n | {}^",
        col + 1,
        ".".repeat(col)
    )
}
