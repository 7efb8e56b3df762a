//! ValidatingAdmissionPolicies, enforced as kube-apiserver 1.35's
//! `ValidatingAdmissionPolicy` admission plugin enforces them
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/validating`).
//!
//! Clients write `admissionregistration.k8s.io/v1`
//! ValidatingAdmissionPolicies and ValidatingAdmissionPolicyBindings
//! (defaulted and validated when written: [`spec`]; a policy's
//! `status.typeChecking` written right after, as kube-apiserver's status
//! controller writes it: [`typecheck`]). Every create, update, patch and
//! delete over HTTP (subresources included: `status`, `binding`,
//! `eviction`) then goes through the policies bound, after the validating
//! webhooks' mutating counterparts and before the validating webhooks, as
//! the real plugin order has it:
//!
//! 1. a policy applies if its `matchConstraints` match the request
//!    (`namespaceSelector`, `objectSelector`, `excludeResourceRules`, then
//!    `resourceRules` with their operations, groups, versions, resources
//!    and subresources, scope and `resourceNames`; `matchPolicy:
//!    Equivalent` also through another served version of a custom
//!    resource);
//! 2. each of its bindings that matches too (its own `matchResources`)
//!    collects its parameters (`paramRef`: by name or selector, in the
//!    request's namespace or the one named, `parameterNotFoundAction`);
//! 3. per parameter: the `matchConditions` (all true, or the policy does
//!    not apply), the `variables`, each validation (its `message`,
//!    `messageExpression`, `reason`), the `auditAnnotations`;
//! 4. a failed validation acts as the binding's `validationActions` say:
//!    `Deny` refuses the request (the first denial, with its reason's code:
//!    422 `Invalid` by default, as `deployments.apps "x" is forbidden:
//!    ValidatingAdmissionPolicy 'p' with binding 'b' denied request: MSG`),
//!    `Warn` adds a `Warning` header (`Validation failed for
//!    ValidatingAdmissionPolicy 'p' with binding 'b': MSG`), `Audit` is
//!    logged (fakeapi keeps no audit log; audit annotations are logged
//!    too, at debug level);
//! 5. an expression that errors, a parameter that cannot be found under
//!    `Deny`, a binding that cannot be set up, fail the request under
//!    `failurePolicy: Fail` and are ignored under `Ignore`.
//!
//! What a write costs: the bound policies are compiled once per change of
//! the policies and bindings (an epoch the store bumps when one is
//! written), indexed by the group and resource their rules name (rules
//! with a wildcard in a list of their own); a request whose resource no
//! policy names pays one map lookup; with no binding at all, nothing but a
//! counter read.
//!
//! Not covered: the `authorizer` answers every check with allowed (fakeapi
//! authorizes every request, as for `system:masters`); requests made
//! through the Rust API (the owner's, like writes to etcd); policies on the
//! policies and bindings themselves, which kube-apiserver exempts too.

pub(crate) mod expr;
pub(crate) mod spec;
pub(crate) mod typecheck;

use super::conditions::{self, Condition, Outcome};
use super::config::{strings, Rule};
use super::{rule_matches, Attributes};
use crate::error::{go_quote, ApiError, Result, StatusError};
use crate::registry::Served;
use crate::selector::LabelSelector;
use crate::Store;
use cel::Value as CelValue;
use expr::{Activation, Env, Program, Ran, Returns};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

pub(crate) const GROUP: &str = "admissionregistration.k8s.io";
pub(crate) const POLICIES: &str = "validatingadmissionpolicies";
pub(crate) const BINDINGS: &str = "validatingadmissionpolicybindings";

/// Whether a resource is one of the policy kinds (writes of which no
/// policy checks, and which the store's policy epoch follows).
pub(crate) fn is_policy_resource(group: &str, plural: &str) -> bool {
    group == GROUP
        && matches!(
            plural,
            POLICIES | BINDINGS | "mutatingadmissionpolicies" | "mutatingadmissionpolicybindings"
        )
}

/// A rule with the names it is limited to.
#[derive(Debug, Clone)]
struct NamedRule {
    rule: Rule,
    names: Vec<String>,
}

/// `matchConstraints` or a binding's `matchResources`.
#[derive(Debug, Clone)]
struct Match {
    rules: Vec<NamedRule>,
    exclude: Vec<NamedRule>,
    namespace_selector: LabelSelector,
    object_selector: LabelSelector,
    equivalent: bool,
}

impl Match {
    fn parse(v: &Value) -> Match {
        let rules = |k: &str| -> Vec<NamedRule> {
            v.get(k)
                .and_then(Value::as_array)
                .map(|rs| {
                    rs.iter()
                        .map(|r| NamedRule {
                            rule: Rule::from_json(r),
                            names: strings(r.get("resourceNames")),
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let selector = |k: &str| {
            LabelSelector::from_object(v.get(k).unwrap_or(&Value::Null)).unwrap_or_default()
        };
        Match {
            rules: rules("resourceRules"),
            exclude: rules("excludeResourceRules"),
            namespace_selector: selector("namespaceSelector"),
            object_selector: selector("objectSelector"),
            equivalent: v.get("matchPolicy").and_then(Value::as_str) != Some("Exact"),
        }
    }
}

#[derive(Debug, Clone)]
struct ParamRef {
    name: String,
    namespace: String,
    selector: Option<LabelSelector>,
    deny_not_found: bool,
}

#[derive(Debug, Clone)]
struct Binding {
    name: String,
    param_ref: Option<ParamRef>,
    matching: Option<Match>,
    deny: bool,
    warn: bool,
    audit: bool,
}

#[derive(Debug)]
struct Validation {
    program: Program,
    message: String,
    message_program: Option<Program>,
    reason: Option<String>,
}

/// A policy's expressions, compiled once.
#[derive(Debug, Default)]
struct Exprs {
    conditions: Vec<Condition>,
    variables: Vec<(String, Program)>,
    validations: Vec<Validation>,
    audits: Vec<(String, Program)>,
}

impl Exprs {
    fn compile(spec: &Value) -> std::result::Result<Exprs, String> {
        let has_params = spec.get("paramKind").is_some_and(|p| !p.is_null());
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let list = |k: &str| {
            spec.get(k)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let mut out = Exprs {
            conditions: conditions::compile(spec.get("matchConditions"), has_params),
            ..Exprs::default()
        };
        if let Some(e) = out
            .conditions
            .iter()
            .find_map(|c| c.program.as_ref().as_ref().err())
        {
            return Err(e.clone());
        }
        let mut env = Env::untyped(has_params);
        for v in list("variables") {
            let name = text(&v, "name");
            let c = expr::compile(&text(&v, "expression"), &env, Returns::Any)?;
            env.declare(&name, c.ty);
            out.variables.push((name, c.program));
        }
        for v in list("validations") {
            let program = expr::compile(&text(&v, "expression"), &env, Returns::Bool)?.program;
            let me = text(&v, "messageExpression");
            let message_program = if me.trim().is_empty() {
                None
            } else {
                Some(expr::compile(&me, &env.without_authorizer(), Returns::String)?.program)
            };
            out.validations.push(Validation {
                program,
                message: text(&v, "message"),
                message_program,
                reason: v.get("reason").and_then(Value::as_str).map(str::to_string),
            });
        }
        for a in list("auditAnnotations") {
            let p = expr::compile(
                text(&a, "valueExpression").trim(),
                &env,
                Returns::StringOrNull,
            )?;
            out.audits.push((text(&a, "key"), p.program));
        }
        Ok(out)
    }
}

#[derive(Debug)]
struct Policy {
    name: String,
    ignore_failures: bool,
    /// `paramKind` (apiVersion, kind).
    param_kind: Option<(String, String)>,
    constraints: Option<Match>,
    exprs: std::result::Result<Exprs, String>,
    bindings: Vec<Binding>,
}

/// The bound policies, compiled, and their index by resource.
#[derive(Debug, Default)]
pub(crate) struct PolicySet {
    policies: Vec<Policy>,
    /// By (group, resource) a rule names: the policies to look at.
    by_resource: HashMap<(String, String), Vec<usize>>,
    /// Policies with a wildcard group or resource: looked at always.
    wildcard: Vec<usize>,
}

impl PolicySet {
    /// The set of the stored policies and bindings (policies no binding
    /// names are left out: they act on nothing).
    pub(crate) fn build(policies: &[Value], bindings: &[Value]) -> PolicySet {
        let mut by_policy: HashMap<&str, Vec<Binding>> = HashMap::new();
        let mut sorted: Vec<&Value> = bindings.iter().collect();
        sorted.sort_by_key(|b| b.pointer("/metadata/name").and_then(Value::as_str));
        for b in sorted {
            let spec = &b["spec"];
            let Some(policy) = spec.get("policyName").and_then(Value::as_str) else {
                continue;
            };
            let actions = strings(spec.get("validationActions"));
            let param_ref = spec.get("paramRef").filter(|p| !p.is_null()).map(|p| {
                let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                ParamRef {
                    name: s("name"),
                    namespace: s("namespace"),
                    selector: p
                        .get("selector")
                        .filter(|x| !x.is_null())
                        .map(|x| LabelSelector::from_object(x).unwrap_or_default()),
                    deny_not_found: s("parameterNotFoundAction") == "Deny",
                }
            });
            by_policy.entry(policy).or_default().push(Binding {
                name: b
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                param_ref,
                matching: spec
                    .get("matchResources")
                    .filter(|m| !m.is_null())
                    .map(Match::parse),
                deny: actions.iter().any(|a| a == "Deny"),
                warn: actions.iter().any(|a| a == "Warn"),
                audit: actions.iter().any(|a| a == "Audit"),
            });
        }
        let mut set = PolicySet::default();
        let mut sorted: Vec<&Value> = policies.iter().collect();
        sorted.sort_by_key(|p| p.pointer("/metadata/name").and_then(Value::as_str));
        for p in sorted {
            let name = p
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let Some(bindings) = by_policy.remove(name) else {
                continue;
            };
            let spec = &p["spec"];
            let constraints = spec
                .get("matchConstraints")
                .filter(|m| !m.is_null())
                .map(Match::parse);
            let i = set.policies.len();
            let mut wild = constraints.is_none();
            let mut keys = Vec::new();
            for r in constraints.iter().flat_map(|c| &c.rules) {
                for g in &r.rule.groups {
                    for res in &r.rule.resources {
                        let (res, _) = res.split_once('/').unwrap_or((res, ""));
                        if g == "*" || res == "*" {
                            wild = true;
                        } else {
                            keys.push((g.clone(), res.to_string()));
                        }
                    }
                }
            }
            if wild {
                set.wildcard.push(i);
            } else {
                keys.sort();
                keys.dedup();
                for k in keys {
                    set.by_resource.entry(k).or_default().push(i);
                }
            }
            set.policies.push(Policy {
                name: name.to_string(),
                ignore_failures: spec.get("failurePolicy").and_then(Value::as_str)
                    == Some("Ignore"),
                param_kind: spec.get("paramKind").filter(|k| !k.is_null()).map(|k| {
                    let s = |f: &str| k.get(f).and_then(Value::as_str).unwrap_or("").to_string();
                    (s("apiVersion"), s("kind"))
                }),
                constraints,
                exprs: Exprs::compile(spec),
                bindings,
            });
        }
        set
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// The policies to look at for a request on `served` (in name order).
    fn candidates(&self, served: &Served) -> Vec<usize> {
        let info = served.info;
        let mut out: Vec<usize> = self.wildcard.clone();
        if let Some(v) = self
            .by_resource
            .get(&(info.group.to_string(), info.plural.to_string()))
        {
            out.extend(v);
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Whether `attr` is one a policy could check at all, and the set to
/// check it with: `None` (nothing to do) costs a counter read and, when
/// bindings exist, one map lookup.
pub(crate) fn for_request(store: &Store, served: &Served) -> Option<Arc<PolicySet>> {
    let set = store.policy_set();
    if set.is_empty() || is_policy_resource(served.info.group, served.info.plural) {
        return None;
    }
    (!set.candidates(served).is_empty()).then_some(set)
}

/// One failed validation, or a configuration or evaluation error.
struct Decision {
    policy: String,
    binding: Option<String>,
    message: String,
    reason: String,
}

/// Which version of the request a policy matched in.
fn matches(
    store: &Store,
    m: &Match,
    attr: &Attributes,
) -> std::result::Result<Option<Served>, ApiError> {
    let (ns_match, ns_err) = super::namespace_selects(store, &m.namespace_selector, attr);
    if !ns_match && ns_err.is_none() {
        return Ok(None);
    }
    let sel = |o: &Option<Value>| o.as_ref().is_some_and(|o| m.object_selector.matches(o));
    if !m.object_selector.is_empty() && !sel(&attr.object) && !sel(&attr.old_object) {
        return Ok(None);
    }
    let hit = |rules: &[NamedRule]| -> Option<Served> {
        let named = |r: &NamedRule| r.names.is_empty() || r.names.iter().any(|n| *n == attr.name);
        for r in rules {
            if rule_matches(&r.rule, attr, &attr.served) && named(r) {
                return Some(attr.served.clone());
            }
        }
        if !m.equivalent {
            return None;
        }
        for r in rules {
            for eq in store.equivalents(&attr.served) {
                if rule_matches(&r.rule, attr, &eq) && named(r) {
                    return Some(eq);
                }
            }
        }
        None
    };
    if hit(&m.exclude).is_some() {
        return Ok(None);
    }
    let matched = if m.rules.is_empty() {
        Some(attr.served.clone())
    } else {
        hit(&m.rules)
    };
    match (matched, ns_err) {
        (None, _) => Ok(None),
        (Some(_), Some(e)) => Err(e),
        (Some(s), None) => Ok(Some(s)),
    }
}

/// The `request` variable (a policy's, and a webhook's match conditions'):
/// the request's attributes in the version `matched`.
pub(super) fn request(attr: &Attributes, matched: &Served) -> Value {
    let i = matched.info;
    let r = attr.served.info;
    let mut req = json!({
        "uid": "",
        "kind": {"group": attr.kind.0, "version": if std::ptr::eq(i, r) { attr.kind.1.clone() } else { i.version.to_string() }, "kind": attr.kind.2},
        "resource": {"group": i.group, "version": i.version, "resource": i.plural},
        "requestKind": {"group": attr.kind.0, "version": attr.kind.1, "kind": attr.kind.2},
        "requestResource": {"group": r.group, "version": r.version, "resource": r.plural},
        "name": attr.name,
        "namespace": attr.namespace,
        "operation": attr.op.as_str(),
        "userInfo": {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]},
        "dryRun": attr.dry_run,
        "options": attr.options,
    });
    if !attr.subresource.is_empty() {
        req["subResource"] = json!(attr.subresource);
        req["requestSubResource"] = json!(attr.subresource);
    }
    req
}

/// The namespace as `namespaceObject` shows it (`CreateNamespaceObject`:
/// its metadata but managed fields and owners, its spec and status).
fn namespace_object(store: &Store, attr: &Attributes) -> Option<Value> {
    let is_namespace = attr.kind == ("".into(), "v1".into(), "Namespace".into());
    if attr.namespace.is_empty() || is_namespace {
        return None;
    }
    let mut ns = store.get("namespaces", None, &attr.namespace).ok()?;
    if let Some(m) = ns.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
        m.remove("ownerReferences");
        m.remove("selfLink");
    }
    if let Some(o) = ns.as_object_mut() {
        o.remove("kind");
        o.remove("apiVersion");
    }
    Some(ns)
}

/// The parameters of a binding: `[None]` when the policy takes none.
fn params(
    store: &Store,
    policy: &Policy,
    binding: &Binding,
    attr: &Attributes,
) -> std::result::Result<Vec<Option<Value>>, String> {
    let (Some((api_version, kind)), Some(pr)) = (&policy.param_kind, &binding.param_ref) else {
        return Ok(vec![None]);
    };
    let Some(info) = store.resource_for_kind(api_version, kind) else {
        return Err(format!(
            "paramKind kind `&ParamKind{{APIVersion:{api_version},Kind:{kind},}}` not known"
        ));
    };
    let resource = store
        .served_for(info)
        .map(|s| match &s.custom {
            Some(_) => format!("{}.{}", info.plural, info.group),
            None => info.qualified_name(),
        })
        .map_err(|e| e.to_string())?;
    let ns = if info.namespaced {
        if !pr.namespace.is_empty() {
            Some(pr.namespace.clone())
        } else if !attr.namespace.is_empty() {
            Some(attr.namespace.clone())
        } else {
            return Err(
                "cannot use namespaced paramRef in policy binding that matches cluster-scoped resources"
                    .into(),
            );
        }
    } else {
        if !pr.namespace.is_empty() {
            return Err(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
            );
        }
        None
    };
    let found: Vec<Option<Value>> = if !pr.name.is_empty() {
        match store.get(&resource, ns.as_deref(), &pr.name) {
            Ok(p) => vec![Some(p)],
            Err(ApiError::NotFound { .. }) => Vec::new(),
            Err(e) => return Err(e.to_string()),
        }
    } else if let Some(sel) = &pr.selector {
        store
            .list(&resource, ns.as_deref(), None, None)
            .map_err(|e| e.to_string())?
            .into_iter()
            .filter(|p| sel.matches(p))
            .map(Some)
            .collect()
    } else {
        return Err("one of name or selector must be provided".into());
    };
    if found.is_empty() && pr.deny_not_found {
        return Err(
            "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
        );
    }
    Ok(found)
}

/// What one evaluation of a policy found.
struct Evaluation {
    /// (message, reason) of each failed validation.
    failed: Vec<(String, String)>,
    /// Evaluation errors (the failure policy decides).
    errors: Vec<String>,
    /// Audit annotations published (key, value).
    audits: Vec<(String, String)>,
}

fn evaluate(
    exprs: &Exprs,
    attr: &Attributes,
    matched: &Served,
    param: Option<&Value>,
    namespace: Option<&Value>,
) -> Evaluation {
    let mut out = Evaluation {
        failed: Vec::new(),
        errors: Vec::new(),
        audits: Vec::new(),
    };
    let req = request(attr, matched);
    let mut act = Activation::new(
        expr::value(attr.object.as_ref()),
        expr::value(attr.old_object.as_ref()),
        expr::value(Some(&req)),
        expr::value(param),
        CelValue::Null,
    );
    // Match conditions: no namespace object, no variables.
    match conditions::evaluate(&exprs.conditions, &mut act) {
        Outcome::Match => {}
        Outcome::NoMatch(_) => return out,
        Outcome::Error(e) => {
            out.errors.push(e);
            return out;
        }
    }
    act.namespace = expr::value(namespace);
    act.evaluate_variables(&exprs.variables);
    for v in &exprs.validations {
        match act.run(&v.program, true) {
            Ran::Value(CelValue::Bool(true)) => {}
            Ran::Value(CelValue::Bool(false)) => {
                let mut message = String::new();
                if let Some(mp) = &v.message_program {
                    if let Ran::Value(CelValue::String(m)) = act.run(mp, false) {
                        let m = m.trim();
                        if m.len() <= 5 * 1024 && !m.contains('\n') {
                            message = m.to_string();
                        }
                    }
                }
                if message.is_empty() {
                    message = v.message.trim().to_string();
                }
                if message.is_empty() {
                    message = format!("failed expression: {}", v.program.source.trim());
                }
                let reason = v.reason.clone().unwrap_or_else(|| "Invalid".into());
                out.failed.push((message, reason));
            }
            Ran::Value(other) => out.errors.push(format!(
                "expression '{}' resulted in error: no such overload: {other:?} is not a bool",
                v.program.source
            )),
            Ran::Error(e) => out.errors.push(e),
        }
    }
    for (key, p) in &exprs.audits {
        match act.run(p, true) {
            Ran::Value(CelValue::String(s)) => {
                let s = s.trim();
                if !s.is_empty() {
                    let s: String = s.chars().take(10 * 1024).collect();
                    out.audits.push((key.clone(), s));
                }
            }
            Ran::Value(CelValue::Null) => {}
            Ran::Value(other) => out.errors.push(format!(
                "valueExpression '{}' resulted in unsupported return type: {}. Return type must be either string or null.",
                p.source,
                cel_type_name(&other)
            )),
            Ran::Error(e) => out.errors.push(e),
        }
    }
    out
}

fn cel_type_name(v: &CelValue) -> &'static str {
    match v {
        CelValue::Int(_) => "int",
        CelValue::UInt(_) => "uint",
        CelValue::Float(_) => "double",
        CelValue::Bool(_) => "bool",
        CelValue::Bytes(_) => "bytes",
        CelValue::List(_) => "list",
        CelValue::Map(_) => "map",
        CelValue::Duration(_) => "google.protobuf.Duration",
        CelValue::Timestamp(_) => "google.protobuf.Timestamp",
        _ => "dyn",
    }
}

/// The policies bound to `attr`'s resource, run on it: `Err` with the
/// first denial; warnings go to the response's `Warning` headers.
pub(crate) fn validate(store: &Store, set: &PolicySet, attr: &Attributes) -> Result<()> {
    let mut denied: Vec<Decision> = Vec::new();
    let mut namespace: Option<Option<Value>> = None;
    for i in set.candidates(&attr.served) {
        let policy = &set.policies[i];
        let config_error = |denied: &mut Vec<Decision>, binding: Option<&str>, e: String| {
            if policy.ignore_failures {
                return;
            }
            let what = if binding.is_some() {
                "binding"
            } else {
                "policy"
            };
            denied.push(Decision {
                policy: policy.name.clone(),
                binding: binding.map(str::to_string),
                message: format!("failed to configure {what}: {e}"),
                reason: "Invalid".into(),
            });
        };
        let Some(constraints) = &policy.constraints else {
            config_error(
                &mut denied,
                None,
                "policy contained no match constraints, a required field".into(),
            );
            continue;
        };
        let matched = match matches(store, constraints, attr) {
            Err(e) => {
                config_error(&mut denied, None, e.to_string());
                continue;
            }
            Ok(None) => continue,
            Ok(Some(m)) => m,
        };
        let exprs = match &policy.exprs {
            Ok(e) => e,
            Err(e) => {
                config_error(&mut denied, None, e.clone());
                continue;
            }
        };
        for binding in &policy.bindings {
            if let Some(m) = &binding.matching {
                match matches(store, m, attr) {
                    Err(e) => {
                        config_error(&mut denied, Some(&binding.name), e.to_string());
                        continue;
                    }
                    Ok(None) => continue,
                    Ok(Some(_)) => {}
                }
            }
            let params = match params(store, policy, binding, attr) {
                Ok(p) => p,
                Err(e) => {
                    config_error(&mut denied, Some(&binding.name), e);
                    continue;
                }
            };
            let ns = namespace
                .get_or_insert_with(|| namespace_object(store, attr))
                .as_ref();
            for param in &params {
                let ev = evaluate(exprs, attr, &matched, param.as_ref(), ns);
                for e in ev.errors {
                    if !policy.ignore_failures {
                        denied.push(Decision {
                            policy: policy.name.clone(),
                            binding: Some(binding.name.clone()),
                            message: e,
                            reason: "Invalid".into(),
                        });
                    }
                }
                for (message, reason) in ev.failed {
                    if binding.warn {
                        super::warn(format!(
                            "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {message}",
                            policy.name, binding.name
                        ));
                    }
                    if binding.audit {
                        tracing::info!(policy = %policy.name, binding = %binding.name, resource = %attr.served.info.qualified_name(), name = %attr.name, %message, "validation.policy.admission.k8s.io/validation_failure (Audit)");
                    }
                    if binding.deny {
                        denied.push(Decision {
                            policy: policy.name.clone(),
                            binding: Some(binding.name.clone()),
                            message,
                            reason,
                        });
                    }
                }
                for (key, value) in ev.audits {
                    tracing::debug!(policy = %policy.name, binding = %binding.name, annotation = %format!("{}/{key}", policy.name), %value, "audit annotation");
                }
            }
        }
    }
    let Some(d) = denied.into_iter().next() else {
        return Ok(());
    };
    Err(denial(attr, d))
}

/// `admission.NewForbidden` with the decision's reason and its code, and
/// the message as its one cause, as the plugin writes it.
fn denial(attr: &Attributes, d: Decision) -> ApiError {
    let inner = match &d.binding {
        Some(b) => format!(
            "ValidatingAdmissionPolicy '{}' with binding '{b}' denied request: {}",
            d.policy, d.message
        ),
        None => format!(
            "ValidatingAdmissionPolicy '{}' denied request: {}",
            d.policy, d.message
        ),
    };
    let info = attr.served.info;
    let resource = if info.group.is_empty() {
        info.plural.to_string()
    } else {
        format!("{}.{}", info.plural, info.group)
    };
    let name = if !attr.name.is_empty() {
        attr.name.clone()
    } else {
        attr.object
            .as_ref()
            .and_then(|o| {
                o.pointer("/metadata/name")
                    .or_else(|| o.pointer("/metadata/generateName"))
            })
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or("Unknown")
            .to_string()
    };
    let code = match d.reason.as_str() {
        "Forbidden" => 403,
        "Unauthorized" => 401,
        "RequestEntityTooLarge" => 413,
        _ => 422,
    };
    let mut details = json!({"name": name, "kind": info.plural, "causes": [{"message": inner}]});
    if !info.group.is_empty() {
        details["group"] = json!(info.group);
    }
    ApiError::Status(Box::new(StatusError {
        code,
        reason: d.reason,
        message: format!("{resource} {} is forbidden: {inner}", go_quote(&name)),
        details: Some(details),
    }))
}
