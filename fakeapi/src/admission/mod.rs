//! Admission webhooks, called as kube-apiserver 1.35 calls them
//! (`k8s.io/apiserver/pkg/admission/plugin/webhook`).
//!
//! Clients register `admissionregistration.k8s.io/v1`
//! MutatingWebhookConfigurations and ValidatingWebhookConfigurations
//! (served kinds, defaulted and validated when written: [`config`]). Every
//! create, update, patch and delete over HTTP, of any resource and of the
//! `status`, `binding` and `eviction` subresources, then goes through them:
//!
//! 1. the mutating webhooks, in the order of their configurations' names
//!    and their own, each called if a rule matches the request (operation,
//!    group, version, resource/subresource, scope; with `matchPolicy:
//!    Equivalent` another served version of the same resource, the object
//!    sent in that version), its `namespaceSelector` and `objectSelector`
//!    select it and its `matchConditions` hold ([`conditions`]: CEL on
//!    `object`, `oldObject`, `request` and `authorizer`; one that is false
//!    skips the webhook, one that errors fails the request with 403 under
//!    `failurePolicy: Fail` and skips it under `Ignore`); its JSON patch
//!    applied, the object defaulted again; those with `reinvocationPolicy:
//!    IfNeeded` called once more if a later webhook changed the object;
//! 2. the server's own rules (metadata, the kind's strategy, validation);
//! 3. the ValidatingAdmissionPolicies bound to the request ([`policy`]),
//!    then the validating webhooks, all at once; the first refusal (in their
//!    order) is the answer;
//! 4. the write, if the object is still what the webhooks saw (an update
//!    starts over otherwise, as `GuaranteedUpdate` does).
//!
//! A webhook is called with an AdmissionReview (v1, or v1beta1 if that is
//! all it reads) over HTTPS: its certificate must chain to its `caBundle`
//! and name the host (`NAME.NAMESPACE.svc` for a service). A service is
//! reached as kube-apiserver with `--enable-aggregator-routing=true`
//! reaches it: the Service's port, then a ready endpoint of its
//! EndpointSlices (`kubernetes.io/service-name`) on that port's name
//! ([`resolve`]); a program serving a webhook on 127.0.0.1 is made
//! reachable by a Service and an EndpointSlice pointing there.
//!
//! A call takes at most `timeoutSeconds` on the store's clock: the wall
//! clock, or simulated time when the store's timers are
//! [`WatchTimers::Simulated`](crate::WatchTimers) (the timeout fires when the
//! owner of that clock moves it past the deadline; [`crate::SimTimers`]
//! includes it). A call that fails (unreachable, refused TLS, timed out, a
//! response that is no AdmissionReview) fails the request with a 500
//! `failed calling webhook` under `failurePolicy: Fail`, and is skipped
//! under `Ignore` (logged, and counted in [`Store::webhook_calls`](crate::Store::webhook_calls)
//! and `/metrics`). A denial reaches the client as the webhook's `Status`:
//! its code (400 if below), `admission webhook "NAME" denied the request:
//! MESSAGE`. An answer's `warnings`, allowed or not, reach the client as
//! `Warning` headers (deduplicated and cut as kube-apiserver's recorder
//! does, beside those of the policies: [`warn`]); its `auditAnnotations`
//! are taken (logged at debug level: fakeapi keeps no audit log).
//!
//! The request that waits on a webhook is in flight for the server's
//! activity ([`crate::Activity`]) for the whole call;
//! [`Activity::webhook_calls_waiting`](crate::Activity::webhook_calls_waiting)
//! counts the calls awaiting a webhook's answer.
//!
//! Not covered: scale subresources, the Rust API's writes (they are the
//! owner's, like writing to etcd directly), user information (every
//! request is `system:admin`, and the `authorizer` of a match condition
//! allows everything), an audit log.

mod call;
mod conditions;
pub(crate) mod config;
pub(crate) mod policy;
mod resolve;

use crate::error::{ApiError, Result, StatusError};
use crate::patch::PatchKind;
use crate::registry::Served;
use crate::store::{DeleteOptions, Deletion, Origin, PatchTarget, Stored};
use crate::Store;
use config::Hook;
use parking_lot::Mutex;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};

tokio::task_local! {
    /// The warnings of the HTTP request being served (set by the server
    /// around each request; sent as `Warning` headers, each as the text it
    /// derefs to): what a ValidatingAdmissionPolicy bound with `Warn` says,
    /// and the `warnings` of webhooks' answers.
    pub(crate) static WARNINGS: std::sync::Arc<Mutex<Vec<Warning>>>;
}

/// One warning of a response: the text added, and the text sent (the same,
/// or its first 256 characters once the response's warnings pass 4096
/// characters, as kube-apiserver's warning recorder cuts them). Reads as
/// the text sent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Warning {
    added: String,
    sent: String,
    /// Whether the response's warnings were cut when it was recorded.
    cutting: bool,
}

impl std::ops::Deref for Warning {
    type Target = str;
    fn deref(&self) -> &str {
        &self.sent
    }
}

/// Adds a warning to the response of the request being served (none
/// outside one: a write of the Rust API has no response headers).
pub(crate) fn warn(message: String) {
    let _ = WARNINGS.try_with(|w| record_warning(&mut w.lock(), message));
}

/// kube-apiserver's warning recorder (`WithWarningRecorder`): empty and
/// repeated texts dropped; past 4096 characters in all, every warning (the
/// earlier ones too) cut to 256, and none added once 4096 are written so.
fn record_warning(ws: &mut Vec<Warning>, text: String) {
    const TOTAL: usize = 4 * 1024;
    const ITEM: usize = 256;
    if text.is_empty() {
        return;
    }
    let runes = |t: &str| t.chars().count();
    let cut = |t: &str| -> String { t.chars().take(ITEM).collect() };
    let cutting = ws.first().is_some_and(|w| w.cutting);
    let written: usize = ws.iter().map(|w| runes(&w.sent)).sum();
    if cutting && written >= TOTAL {
        return;
    }
    if ws.iter().any(|w| w.added == text) {
        return;
    }
    let sent = if cutting { cut(&text) } else { text.clone() };
    if cutting || written + runes(&sent) <= TOTAL {
        ws.push(Warning {
            added: text,
            sent,
            cutting,
        });
        return;
    }
    ws.push(Warning {
        added: text,
        sent: String::new(),
        cutting: true,
    });
    for w in ws.iter_mut() {
        w.cutting = true;
        w.sent = cut(&w.added);
    }
}

/// What an admission request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// The attributes of a request, as webhooks are matched and called on them.
#[derive(Debug, Clone)]
pub(crate) struct Attributes {
    pub op: Operation,
    /// The resource of the request, in the version asked for.
    pub served: Served,
    /// `""` for the main resource.
    pub subresource: String,
    /// The kind of `object` (`Binding` for `pods/binding`).
    pub kind: (String, String, String),
    pub namespace: String,
    pub name: String,
    pub object: Option<Value>,
    pub old_object: Option<Value>,
    /// CreateOptions, UpdateOptions, PatchOptions or DeleteOptions.
    pub options: Value,
    pub dry_run: bool,
}

impl Attributes {
    fn main_kind(served: &Served) -> (String, String, String) {
        let i = served.info;
        (i.group.into(), i.version.into(), i.kind.into())
    }
}

/// Calls of one webhook, by outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhookCalls {
    /// Allowed (and, for a mutating one, patched or not).
    pub allowed: u64,
    /// Allowed with a patch that changed the object.
    pub patched: u64,
    pub denied: u64,
    /// Could not be called and `failurePolicy: Fail`: the request failed.
    pub failed_closed: u64,
    /// Could not be called and `failurePolicy: Ignore`: the request went on.
    pub failed_open: u64,
}

/// A store's webhook call counts, by (configuration, webhook).
#[derive(Debug, Default)]
pub(crate) struct Stats(Mutex<BTreeMap<(String, String), WebhookCalls>>);

impl Stats {
    fn count(&self, h: &Hook, f: impl FnOnce(&mut WebhookCalls)) {
        f(self
            .0
            .lock()
            .entry((h.configuration.clone(), h.name.clone()))
            .or_default());
    }

    pub(crate) fn snapshot(&self) -> Vec<(String, String, WebhookCalls)> {
        self.0
            .lock()
            .iter()
            .map(|((c, n), w)| (c.clone(), n.clone(), w.clone()))
            .collect()
    }
}

const MUTATING: &str = "mutatingwebhookconfigurations.admissionregistration.k8s.io";
const VALIDATING: &str = "validatingwebhookconfigurations.admissionregistration.k8s.io";

/// The hooks registered now (mutating, validating), in call order.
fn hooks(store: &Store) -> (Vec<Hook>, Vec<Hook>) {
    let read = |resource: &str, mutating: bool| -> Vec<Hook> {
        store
            .list(resource, None, None, None)
            .unwrap_or_default()
            .iter()
            .flat_map(|c| config::hooks_of(c, mutating))
            .collect()
    };
    (read(MUTATING, true), read(VALIDATING, false))
}

/// Requests on webhook configurations are never sent to webhooks (a bad
/// webhook could otherwise lock itself in).
fn exempt(attr: &Attributes) -> bool {
    attr.kind.0 == "admissionregistration.k8s.io"
}

/// Why a webhook could not be called (its `failurePolicy` decides).
#[derive(Debug)]
pub(crate) struct CallError(String);

/// What a webhook answered.
struct Answer {
    allowed: bool,
    status: Option<Value>,
    /// A decoded JSON patch (mutating only).
    patch: Option<Value>,
    /// `warnings`: sent to the client as `Warning` headers.
    warnings: Vec<String>,
    /// `auditAnnotations`: fakeapi keeps no audit log; logged at debug
    /// level, keyed `WEBHOOK/KEY` as kube-apiserver records them.
    audit_annotations: Vec<(String, String)>,
}

impl Answer {
    /// What any answer carries besides its verdict, allowed or not.
    fn publish_notes(&self, hook: &Hook) {
        for w in &self.warnings {
            warn(w.clone());
        }
        for (k, v) in &self.audit_annotations {
            tracing::debug!(webhook = %hook.name, annotation = %format!("{}/{k}", hook.name), value = %v, "audit annotation");
        }
    }
}

/// The version of a request the hook is called in: the request's, or an
/// equivalent one a rule names.
struct Invocation {
    served: Served,
}

fn exact_or_wildcard(items: &[String], v: &str) -> bool {
    items.iter().any(|i| i == "*" || i == v)
}

fn rule_matches(r: &config::Rule, attr: &Attributes, served: &Served) -> bool {
    let info = served.info;
    let is_namespaces = (info.group, info.plural) == ("", "namespaces");
    let scope = match r.scope.as_str() {
        "Namespaced" => !is_namespaces && !attr.namespace.is_empty(),
        "Cluster" => is_namespaces || attr.namespace.is_empty(),
        _ => true,
    };
    scope
        && r.operations
            .iter()
            .any(|o| o == "*" || o == attr.op.as_str())
        && exact_or_wildcard(&r.groups, info.group)
        && exact_or_wildcard(&r.versions, info.version)
        && r.resources.iter().any(|rs| {
            let (res, sub) = rs.split_once('/').unwrap_or((rs, ""));
            (res == "*" || res == info.plural) && (sub == "*" || sub == attr.subresource)
        })
}

/// Whether `hook` is called for `attr` (and in which version), as
/// `ShouldCallHook`: selectors first, then the rules, then the
/// equivalent versions.
fn should_call(store: &Store, hook: &Hook, attr: &Attributes) -> Result<Option<Invocation>> {
    let (ns_match, ns_err) = namespace_selects(store, &hook.namespace_selector, attr);
    if !ns_match && ns_err.is_none() {
        return Ok(None);
    }
    if !hook.object_selector.is_empty() {
        let sel = |o: &Option<Value>| o.as_ref().is_some_and(|o| hook.object_selector.matches(o));
        if !sel(&attr.object) && !sel(&attr.old_object) {
            return Ok(None);
        }
    }
    let mut invocation = hook
        .rules
        .iter()
        .any(|r| rule_matches(r, attr, &attr.served))
        .then(|| Invocation {
            served: attr.served.clone(),
        });
    if invocation.is_none() && hook.equivalent {
        'outer: for r in &hook.rules {
            for eq in store.equivalents(&attr.served) {
                if rule_matches(r, attr, &eq) {
                    invocation = Some(Invocation { served: eq });
                    break 'outer;
                }
            }
        }
    }
    let inv = match (invocation, ns_err) {
        (None, _) => return Ok(None),
        (Some(_), Some(e)) => return Err(e),
        (Some(i), None) => i,
    };
    if hook.match_conditions.is_empty() {
        return Ok(Some(inv));
    }
    // `matchConditions`, on the objects as the webhook would get them.
    let request = policy::request(attr, &inv.served);
    let mut act = policy::expr::Activation::new(
        policy::expr::value(Some(&in_version(&attr.object, &inv))),
        policy::expr::value(Some(&in_version(&attr.old_object, &inv))),
        policy::expr::value(Some(&request)),
        cel::Value::Null,
        cel::Value::Null,
    );
    match conditions::evaluate(&hook.match_conditions, &mut act) {
        conditions::Outcome::Match => Ok(Some(inv)),
        conditions::Outcome::NoMatch(_) => Ok(None),
        conditions::Outcome::Error(e) if hook.ignore_failures => {
            tracing::warn!(webhook = %hook.name, configuration = %hook.configuration, operation = attr.op.as_str(), resource = %attr.served.info.qualified_name(), name = %attr.name, error = %e, "failed evaluating match conditions, not calling the webhook (failurePolicy: Ignore)");
            Ok(None)
        }
        conditions::Outcome::Error(e) => {
            tracing::warn!(webhook = %hook.name, configuration = %hook.configuration, operation = attr.op.as_str(), resource = %attr.served.info.qualified_name(), name = %attr.name, error = %e, "failed evaluating match conditions, failing closed (failurePolicy: Fail)");
            Err(forbidden(attr, &e))
        }
    }
}

/// `apierrors.NewForbidden` on the request's resource and name: how
/// kube-apiserver refuses a request whose webhook's match conditions
/// failed to evaluate under `failurePolicy: Fail`.
fn forbidden(attr: &Attributes, err: &str) -> ApiError {
    let info = attr.served.info;
    let resource = if info.group.is_empty() {
        info.plural.to_string()
    } else {
        format!("{}.{}", info.plural, info.group)
    };
    let message = if attr.name.is_empty() {
        format!("{resource} is forbidden: {err}")
    } else {
        format!(
            "{resource} {} is forbidden: {err}",
            crate::error::go_quote(&attr.name)
        )
    };
    let mut details = json!({"kind": info.plural});
    if !attr.name.is_empty() {
        details["name"] = json!(attr.name);
    }
    if !info.group.is_empty() {
        details["group"] = json!(info.group);
    }
    ApiError::Status(Box::new(StatusError {
        code: 403,
        reason: "Forbidden".into(),
        message,
        details: Some(details),
    }))
}

/// `MatchNamespaceSelector`: (matches, the error looking the namespace up).
fn namespace_selects(
    store: &Store,
    selector: &crate::selector::LabelSelector,
    attr: &Attributes,
) -> (bool, Option<ApiError>) {
    let info = attr.served.info;
    let is_namespaces = (info.group, info.plural) == ("", "namespaces");
    if attr.namespace.is_empty() && !is_namespaces {
        return (true, None);
    }
    if selector.is_empty() {
        return (true, None);
    }
    let labels = if is_namespaces
        && attr.subresource.is_empty()
        && matches!(attr.op, Operation::Create | Operation::Update)
    {
        attr.object
            .as_ref()
            .and_then(|o| o.pointer("/metadata/labels"))
            .cloned()
    } else {
        let ns = if is_namespaces {
            &attr.name
        } else {
            &attr.namespace
        };
        match store.get("namespaces", None, ns) {
            Ok(n) => n.pointer("/metadata/labels").cloned(),
            Err(e) => return (false, Some(e)),
        }
    };
    (selector.matches_labels(labels.as_ref()), None)
}

/// The object of `attr` as `inv` shows it (another version of a custom
/// resource: its `apiVersion`).
fn in_version(obj: &Option<Value>, inv: &Invocation) -> Value {
    match obj {
        None => Value::Null,
        Some(o) => {
            let mut o = o.clone();
            if inv.served.custom.is_some() && o.get("apiVersion").is_some() {
                o["apiVersion"] = json!(inv.served.info.api_version());
            }
            o
        }
    }
}

fn review(store: &Store, hook: &Hook, attr: &Attributes, inv: &Invocation) -> (String, Value) {
    let uid = store.review_uid();
    let i = inv.served.info;
    let r = attr.served.info;
    let mut request = json!({
        "uid": uid,
        "kind": {"group": attr.kind.0, "version": if std::ptr::eq(i, r) { attr.kind.1.clone() } else { i.version.to_string() }, "kind": attr.kind.2},
        "resource": {"group": i.group, "version": i.version, "resource": i.plural},
        "requestKind": {"group": attr.kind.0, "version": attr.kind.1, "kind": attr.kind.2},
        "requestResource": {"group": r.group, "version": r.version, "resource": r.plural},
        "name": attr.name,
        "operation": attr.op.as_str(),
        "userInfo": {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]},
        "object": in_version(&attr.object, inv),
        "oldObject": in_version(&attr.old_object, inv),
        "dryRun": attr.dry_run,
        "options": attr.options,
    });
    if !attr.subresource.is_empty() {
        request["subResource"] = json!(attr.subresource);
        request["requestSubResource"] = json!(attr.subresource);
    }
    if !attr.namespace.is_empty() {
        request["namespace"] = json!(attr.namespace);
    }
    let api_version = if hook.review_v1 {
        "admission.k8s.io/v1"
    } else {
        "admission.k8s.io/v1beta1"
    };
    (
        uid,
        json!({"kind": "AdmissionReview", "apiVersion": api_version, "request": request}),
    )
}

/// `ToStatusErr`: a webhook's refusal as the client gets it.
fn denial(hook: &Hook, status: Option<Value>) -> ApiError {
    let status = status.unwrap_or_else(|| json!({}));
    let denied_by = format!("admission webhook {:?} denied the request", hook.name);
    let message = status.get("message").and_then(Value::as_str).unwrap_or("");
    let reason = status.get("reason").and_then(Value::as_str).unwrap_or("");
    let message = if !message.is_empty() {
        format!("{denied_by}: {message}")
    } else if !reason.is_empty() {
        format!("{denied_by}: {reason}")
    } else {
        format!("{denied_by} without explanation")
    };
    let code = status
        .get("code")
        .and_then(Value::as_u64)
        .filter(|c| *c >= 400)
        .unwrap_or(400) as u16;
    ApiError::Status(Box::new(StatusError {
        code,
        reason: reason.to_string(),
        message,
        details: status.get("details").filter(|d| !d.is_null()).cloned(),
    }))
}

/// One call: the answer, or why there is none.
async fn call_hook(
    store: &Store,
    hook: &Hook,
    attr: &Attributes,
    inv: &Invocation,
) -> std::result::Result<Answer, CallError> {
    if attr.dry_run && !matches!(hook.side_effects.as_str(), "None" | "NoneOnDryRun") {
        return Err(CallError(format!(
            "admission webhook {:?} does not support dry run",
            hook.name
        )));
    }
    let (uid, body) = review(store, hook, attr, inv);
    let reply = call::post(store, hook, &body).await?;
    call::verify(&reply, &uid, hook)
}

/// The mutating webhooks on `attr.object` (changed in place).
async fn mutate(store: &Store, hooks: &[Hook], attr: &mut Attributes) -> Result<()> {
    let mut previously_invoked: HashSet<String> = HashSet::new();
    let mut reinvoke: HashSet<String> = HashSet::new();
    let mut should_reinvoke = false;
    for round in 0..2 {
        if round == 1 && !should_reinvoke {
            break;
        }
        for hook in hooks {
            let Some(inv) = should_call(store, hook, attr)? else {
                continue;
            };
            if round == 1 && !reinvoke.contains(&hook.uid) {
                continue;
            }
            let result = call_hook(store, hook, attr, &inv).await;
            let changed = match result {
                Ok(answer) => apply_answer(store, hook, attr, &inv, answer)?,
                Err(e) => {
                    failed(store, hook, attr, e)?;
                    false
                }
            };
            if changed {
                // Those called before (reinvocable) may want to see this.
                reinvoke.extend(previously_invoked.drain());
                should_reinvoke = true;
            }
            if hook.reinvoke {
                previously_invoked.insert(hook.uid.clone());
            }
        }
    }
    Ok(())
}

/// A mutating webhook's answer applied to `attr.object`; whether it
/// changed it.
fn apply_answer(
    store: &Store,
    hook: &Hook,
    attr: &mut Attributes,
    inv: &Invocation,
    answer: Answer,
) -> Result<bool> {
    {
        {
            answer.publish_notes(hook);
            if !answer.allowed {
                store.webhook_stats().count(hook, |c| c.denied += 1);
                return Err(denial(hook, answer.status));
            }
            store.webhook_stats().count(hook, |c| c.allowed += 1);
            let Some(patch) = answer.patch else {
                return Ok(false);
            };
            let Some(obj) = attr.object.as_ref() else {
                return Err(ApiError::Internal(format!(
                    "admission webhook {:?} attempted to modify the object, which is not supported for this operation",
                    hook.name
                )));
            };
            let before = in_version(&attr.object, inv);
            let ops: json_patch::Patch = serde_json::from_value(patch).map_err(|e| {
                ApiError::Internal(format!(
                    "failed calling webhook {:?}: received undecodable patch in webhook response: {e}",
                    hook.name
                ))
            })?;
            let mut patched = before.clone();
            json_patch::patch(&mut patched, &ops).map_err(|e| ApiError::Internal(e.to_string()))?;
            if patched.get("apiVersion").is_some() {
                patched["apiVersion"] = obj["apiVersion"].clone();
            }
            store.decode_defaults(&attr.served, &mut patched);
            if patched == *obj {
                return Ok(false);
            }
            store.webhook_stats().count(hook, |c| c.patched += 1);
            attr.object = Some(patched);
            Ok(true)
        }
    }
}

/// A call that did not happen or got no usable answer: the request fails
/// (`Fail`) or goes on (`Ignore`).
fn failed(store: &Store, hook: &Hook, attr: &Attributes, e: CallError) -> Result<()> {
    let kind = if hook.mutating {
        "mutating"
    } else {
        "validating"
    };
    if hook.ignore_failures {
        store.webhook_stats().count(hook, |c| c.failed_open += 1);
        tracing::warn!(webhook = %hook.name, configuration = %hook.configuration, kind, operation = attr.op.as_str(), resource = %attr.served.info.qualified_name(), name = %attr.name, error = %e.0, "failed calling webhook, failing open (failurePolicy: Ignore)");
        return Ok(());
    }
    store.webhook_stats().count(hook, |c| c.failed_closed += 1);
    tracing::warn!(webhook = %hook.name, configuration = %hook.configuration, kind, operation = attr.op.as_str(), resource = %attr.served.info.qualified_name(), name = %attr.name, error = %e.0, "failed calling webhook, failing closed (failurePolicy: Fail)");
    Err(ApiError::Internal(format!(
        "failed calling webhook {:?}: {}",
        hook.name, e.0
    )))
}

/// The validating webhooks on `attr`, called at once.
async fn validate(store: &Store, hooks: &[Hook], attr: &Attributes) -> Result<()> {
    let mut calls = Vec::new();
    for hook in hooks {
        if let Some(inv) = should_call(store, hook, attr)? {
            calls.push((hook, inv));
        }
    }
    if calls.is_empty() {
        return Ok(());
    }
    let results = futures_util::future::join_all(
        calls
            .iter()
            .map(|(hook, inv)| call_hook(store, hook, attr, inv)),
    )
    .await;
    let mut first: Option<ApiError> = None;
    for ((hook, _), r) in calls.iter().zip(results) {
        if let Ok(a) = &r {
            a.publish_notes(hook);
        }
        let err = match r {
            Ok(a) if a.allowed => {
                store.webhook_stats().count(hook, |c| c.allowed += 1);
                None
            }
            Ok(a) => {
                store.webhook_stats().count(hook, |c| c.denied += 1);
                Some(denial(hook, a.status))
            }
            Err(e) => failed(store, hook, attr, e).err(),
        };
        if first.is_none() {
            first = err;
        }
    }
    first.map_or(Ok(()), Err)
}

/// The hooks for a request, or none when nothing is registered or the
/// request is exempt.
fn hooks_for(store: &Store, attr: &Attributes) -> Option<(Vec<Hook>, Vec<Hook>)> {
    if exempt(attr) {
        return None;
    }
    let (m, v) = hooks(store);
    (!m.is_empty() || !v.is_empty()).then_some((m, v))
}

/// Whether any webhook configuration exists (else every write goes
/// straight to the store).
pub(crate) fn any_registered(store: &Store) -> bool {
    let (m, v) = hooks(store);
    !m.is_empty() || !v.is_empty()
}

/// The admission chain over `attr`, as kube-apiserver runs it for every
/// write: the mutating webhooks, then `server` (the server's own rules on
/// what they made: defaults, the kind's strategy, validation; it may
/// reshape `attr.object` and name it), then the ValidatingAdmissionPolicies
/// and the validating webhooks on the result. Returns what `server` made.
async fn chain<T>(
    store: &Store,
    policies: Option<&policy::PolicySet>,
    hooks: Option<(Vec<Hook>, Vec<Hook>)>,
    attr: &mut Attributes,
    server: impl FnOnce(&mut Attributes) -> Result<T>,
) -> Result<T> {
    if let Some((mutating, _)) = &hooks {
        mutate(store, mutating, attr).await?;
    }
    let made = server(attr)?;
    if let Some(set) = policies {
        policy::validate(store, set, attr)?;
    }
    if let Some((_, validating)) = &hooks {
        validate(store, validating, attr).await?;
    }
    Ok(made)
}

fn dry_run(options: &Value) -> bool {
    options
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|d| !d.is_empty())
}

/// A create through admission.
pub(crate) async fn create(
    store: &Store,
    served: &Served,
    namespace: Option<&str>,
    body: Value,
    options: Value,
    origin: Origin,
) -> Result<Stored> {
    let policies = policy::for_request(store, served);
    if policies.is_none() && !any_registered(store) {
        return store.create_in(served, namespace, body, origin, dry_run(&options));
    }
    let (ns, obj) = store.create_candidate(served, namespace, body)?;
    let mut attr = Attributes {
        op: Operation::Create,
        served: served.clone(),
        subresource: String::new(),
        kind: Attributes::main_kind(served),
        namespace: ns.clone(),
        name: obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        object: Some(obj),
        old_object: None,
        dry_run: dry_run(&options),
        options,
    };
    let ns_arg = served.info.namespaced.then_some(ns.as_str());
    let hooks = hooks_for(store, &attr);
    if hooks.is_none() && policies.is_none() {
        let obj = attr.object.take().expect("an object");
        return store.create_in(served, ns_arg, obj, origin, attr.dry_run);
    }
    let prepared = chain(store, policies.as_deref(), hooks, &mut attr, |attr| {
        let obj = attr.object.take().expect("an object");
        let prepared = store.prepare_create(served, ns_arg, obj, origin)?;
        attr.name = prepared.key.1.clone();
        attr.object = Some(served_view(served, &prepared.obj));
        Ok(prepared)
    })
    .await?;
    store.commit_create(served, prepared, origin, attr.dry_run)
}

/// The webhooks (configuration, webhook, mutating) a create of `obj` in
/// `ns` would call now: their rules and selectors match it. What the
/// broker asks before it writes an object a webhook may act on, to know
/// whether it must imitate that webhook and to say which one acts.
pub(crate) fn creating(
    store: &Store,
    served: &Served,
    ns: &str,
    obj: &Value,
) -> Vec<(String, String, bool)> {
    let attr = Attributes {
        op: Operation::Create,
        served: served.clone(),
        subresource: String::new(),
        kind: Attributes::main_kind(served),
        namespace: if served.info.namespaced {
            ns.to_string()
        } else {
            String::new()
        },
        name: obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        object: Some(obj.clone()),
        old_object: None,
        options: json!({}),
        dry_run: false,
    };
    let Some((m, v)) = hooks_for(store, &attr) else {
        return Vec::new();
    };
    m.iter()
        .map(|h| (h, true))
        .chain(v.iter().map(|h| (h, false)))
        .filter(|(h, _)| matches!(should_call(store, h, &attr), Ok(Some(_)) | Err(_)))
        .map(|(h, m)| (h.configuration.clone(), h.name.clone(), m))
        .collect()
}

/// An object being written as the request's version shows it (custom
/// objects are prepared in their storage version).
fn served_view(served: &Served, obj: &Value) -> Value {
    let mut o = obj.clone();
    if served.custom.is_some() {
        o["apiVersion"] = json!(served.info.api_version());
    }
    o
}

/// How an update's new object is obtained from the stored one.
pub(crate) enum Change<'a> {
    /// A PUT's body.
    Replace(Value),
    /// A PATCH.
    Patch(PatchKind, &'a [u8]),
}

/// An update or patch through admission; returns the object and whether it
/// was created (an apply of a missing object).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn update(
    store: &Store,
    served: &Served,
    ns: &str,
    name: &str,
    subresource: Option<&str>,
    change: Change<'_>,
    options: Value,
    origin: Origin,
) -> Result<(Stored, bool)> {
    let dry = dry_run(&options);
    let policies = policy::for_request(store, served);
    if policies.is_none() && !any_registered(store) {
        return match change {
            Change::Replace(body) => store
                .update_in(served, ns, name, subresource, body, origin, dry)
                .map(|s| (s, false)),
            Change::Patch(kind, bytes) => {
                let manager = options["fieldManager"].as_str();
                store.patch_in(
                    served,
                    ns,
                    name,
                    subresource,
                    kind,
                    bytes,
                    manager,
                    origin,
                    dry,
                )
            }
        };
    }
    // Optimistic, as GuaranteedUpdate: read, admit, write if unchanged;
    // else again (a named resourceVersion makes a change a 409 instead).
    loop {
        let (key, old, candidate) = match &change {
            Change::Replace(body) => store.update_candidate(served, ns, name, body.clone())?,
            Change::Patch(kind, bytes) => {
                let manager = options["fieldManager"].as_str();
                match store.patch_candidate(served, ns, name, subresource, *kind, bytes, manager)? {
                    PatchTarget::Existing { key, old, patched } => (key, old, patched),
                    PatchTarget::Create(obj) => {
                        let ns = served.info.namespaced.then_some(ns);
                        return create(store, served, ns, obj, options, origin)
                            .await
                            .map(|s| (s, true));
                    }
                }
            }
        };
        let old_view = served.present(old.clone()).value;
        let mut attr = Attributes {
            op: Operation::Update,
            served: served.clone(),
            subresource: subresource.unwrap_or("").to_string(),
            kind: Attributes::main_kind(served),
            namespace: key.0.clone(),
            name: key.1.clone(),
            object: Some(candidate),
            old_object: Some((*old_view).clone()),
            dry_run: dry_run(&options),
            options: options.clone(),
        };
        let hooks = hooks_for(store, &attr);
        let admitted = hooks.is_some() || policies.is_some();
        let shaped = chain(store, policies.as_deref(), hooks, &mut attr, |attr| {
            let obj = attr.object.take().expect("an object");
            let shaped = store.shape_update(served, &key, &old, obj, subresource, origin)?;
            if admitted {
                attr.object = Some(served_view(served, &shaped));
            }
            Ok(shaped)
        })
        .await?;
        if let Some(s) = store.commit_update_if(served, key, old, shaped, origin, dry)? {
            return Ok((s, false));
        }
    }
}

/// A delete through admission: the webhooks see the object as `oldObject`.
pub(crate) async fn delete(
    store: &Store,
    served: &Served,
    ns: &str,
    name: &str,
    opts: &DeleteOptions,
    options: Value,
    origin: Origin,
) -> Result<Deletion> {
    let policies = policy::for_request(store, served);
    if policies.is_none() && !any_registered(store) {
        return store.delete_in(served, ns, name, opts, origin);
    }
    let (key, old) = store.existing_in(served, ns, name)?;
    let mut attr = Attributes {
        op: Operation::Delete,
        served: served.clone(),
        subresource: String::new(),
        kind: Attributes::main_kind(served),
        namespace: key.0.clone(),
        name: key.1.clone(),
        object: None,
        old_object: Some((*served.present(old).value).clone()),
        dry_run: dry_run(&options),
        options,
    };
    let hooks = hooks_for(store, &attr);
    chain(store, policies.as_deref(), hooks, &mut attr, |_| Ok(())).await?;
    store.delete_in(served, ns, name, opts, origin)
}

/// A create on a subresource (`pods/binding`, `pods/eviction`): the
/// webhooks see its body (a Binding, an Eviction) as the object; returns
/// the body as they left it.
pub(crate) async fn subresource_create(
    store: &Store,
    served: &Served,
    ns: &str,
    name: &str,
    subresource: &str,
    mut body: Value,
) -> Result<Value> {
    let policies = policy::for_request(store, served);
    if policies.is_none() && !any_registered(store) {
        return Ok(body);
    }
    let (group, version, kind) = match subresource {
        "binding" => ("", "v1", "Binding"),
        "eviction" => ("policy", "v1", "Eviction"),
        other => {
            return Err(ApiError::NotFoundPath(format!(
                "subresource {other:?} cannot be created"
            )))
        }
    };
    if body.is_object() {
        body["kind"] = json!(kind);
        body["apiVersion"] = json!(if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        });
    }
    let mut attr = Attributes {
        op: Operation::Create,
        served: served.clone(),
        subresource: subresource.to_string(),
        kind: (group.into(), version.into(), kind.into()),
        namespace: ns.to_string(),
        name: name.to_string(),
        object: Some(body),
        old_object: None,
        dry_run: false,
        options: json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}),
    };
    let hooks = hooks_for(store, &attr);
    chain(store, policies.as_deref(), hooks, &mut attr, |_| Ok(())).await?;
    Ok(attr.object.take().expect("an object"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_recorded_as_kube_apiserver_records_them() {
        let mut ws = Vec::new();
        record_warning(&mut ws, "a".into());
        record_warning(&mut ws, String::new());
        record_warning(&mut ws, "a".into());
        record_warning(&mut ws, "b".into());
        let sent = |ws: &Vec<Warning>| ws.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        assert_eq!(sent(&ws), ["a", "b"]);
        // Past 4096 characters: all cut to 256, the earlier ones too.
        let long = "x".repeat(3000);
        record_warning(&mut ws, long.clone());
        record_warning(&mut ws, "y".repeat(2000));
        assert_eq!(ws.len(), 4);
        assert!(ws.iter().all(|w| w.chars().count() <= 256));
        assert_eq!(&*ws[2], &long[..256]);
        // Once cut, more go in cut until 4096 are written.
        for i in 0..20 {
            record_warning(&mut ws, format!("{i}{}", "z".repeat(300)));
        }
        let total: usize = ws.iter().map(|w| w.chars().count()).sum();
        assert!((4096..4096 + 256).contains(&total), "{total}");
    }

    #[test]
    fn denials_read_as_kube_apiserver_writes_them() {
        let hook = &config::hooks_of(
            &json!({"metadata": {"name": "c"}, "webhooks": [{"name": "a.b.c", "clientConfig": {"url": "https://x"}}]}),
            false,
        )[0];
        let e = denial(
            hook,
            Some(json!({"code": 403, "message": "no", "reason": "Forbidden"})),
        );
        assert_eq!(e.code(), 403);
        assert_eq!(
            e.to_string(),
            r#"admission webhook "a.b.c" denied the request: no"#
        );
        let s = e.to_status();
        assert_eq!(s["reason"], "Forbidden");
        let e = denial(hook, Some(json!({"code": 200})));
        assert_eq!(e.code(), 400);
        assert_eq!(
            e.to_string(),
            r#"admission webhook "a.b.c" denied the request without explanation"#
        );
        assert!(e.to_status().get("reason").is_none());
    }
}
