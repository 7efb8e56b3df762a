//! The store's side of admission (`crate::admission`): a write split into
//! what the webhooks see and what is then committed, as kube-apiserver's
//! handlers split it.
//!
//! - create: the decoded body with its defaults ([`Store::create_candidate`])
//!   goes to the mutating webhooks; [`Store::prepare_create`] then fills its
//!   metadata and runs the kind's strategy and validation; the validating
//!   webhooks see that; [`Store::commit_create`] writes it.
//! - update and patch: the body, or the patch applied to the stored object
//!   ([`Store::update_candidate`], [`Store::patch_candidate`]), goes to the
//!   mutating webhooks; [`Store::shape_update`] applies the status rules and
//!   the strategy; the validating webhooks see that; [`Store::commit_update_if`]
//!   writes it if the object has not changed meanwhile (else the caller
//!   starts again, as the real server's `GuaranteedUpdate` does).

use super::*;

/// The object a patch will change, or the absence an apply will create.
pub(crate) enum PatchTarget {
    Existing {
        key: (String, String),
        old: Stored,
        patched: Value,
    },
    /// An apply patch of an object that does not exist: created from the
    /// patch.
    Create(Value),
}

impl Store {
    /// The defaults a decoded body gets (before mutating webhooks, and
    /// again after each patch they make): a pod's, a job's, a custom
    /// object's pruning and schema defaults (in the request's version).
    pub(crate) fn decode_defaults(&self, served: &Served, obj: &mut Value) {
        if let Some(cv) = &served.custom {
            obj["apiVersion"] = json!(cv.info.api_version());
            cv.def.schema.coerce(obj);
            return;
        }
        let info = served.info;
        if resources::builtin_index(info).is_some() {
            crate::defaults::default_object(info.group, info.kind, obj, false);
        }
        if (info.group, info.kind) == ("", "Pod") {
            default_pod(obj, &self.now_str());
        }
        crate::strategy::defaults(info, obj);
    }

    /// A create's body as mutating webhooks see it: its kind and version,
    /// its namespace, its defaults; no name generated, no uid yet.
    pub(crate) fn create_candidate(
        &self,
        served: &Served,
        namespace: Option<&str>,
        mut obj: Value,
    ) -> Result<(String, Value)> {
        let info = served.info;
        if !obj.is_object() {
            return Err(ApiError::BadRequest(format!(
                "the body of a {} must be a JSON object",
                info.kind
            )));
        }
        if let Some(k) = obj.get("kind").and_then(Value::as_str) {
            if k != info.kind {
                return Err(ApiError::BadRequest(format!(
                    "the kind {k:?} does not match the resource {} (kind {})",
                    info.qualified_name(),
                    info.kind
                )));
            }
        }
        let ns = Self::create_namespace(info, namespace, &obj)?;
        obj["kind"] = json!(info.kind);
        obj["apiVersion"] = json!(info.api_version());
        if info.namespaced {
            meta_mut(&mut obj).insert("namespace".into(), json!(ns));
        }
        self.decode_defaults(served, &mut obj);
        Ok((ns, obj))
    }

    /// The stored object `ns/name` as `served` shows it, with its key.
    pub(crate) fn existing_in(
        &self,
        served: &Served,
        ns: &str,
        name: &str,
    ) -> Result<((String, String), Stored)> {
        let (key, s) = self.inner.state.read().existing(served, ns, name)?;
        Ok((key, s))
    }

    /// An update's body checked against the stored object (name, a named
    /// resourceVersion), with its kind and version: what mutating webhooks
    /// see as the object, the stored one as the old object.
    pub(crate) fn update_candidate(
        &self,
        served: &Served,
        ns: &str,
        name: &str,
        mut obj: Value,
    ) -> Result<((String, String), Stored, Value)> {
        let info = served.info;
        check_update_body(info, ns, name, &obj)?;
        let (key, old) = self.existing_in(served, ns, name)?;
        check_resource_version(info, name, &obj, old.rv)?;
        obj["kind"] = json!(info.kind);
        obj["apiVersion"] = json!(info.api_version());
        self.decode_defaults(served, &mut obj);
        Ok((key, old, obj))
    }

    /// A patch applied to the stored object (or, for an apply of a missing
    /// object, the object to create), with its defaults, for the mutating
    /// webhooks. An apply's ownership is in it (`managedFields`), so that
    /// what is not written (a webhook's denial, validation, a dry run)
    /// changes nobody's fields.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn patch_candidate(
        &self,
        served: &Served,
        ns: &str,
        name: &str,
        subresource: Option<&str>,
        kind: PatchKind,
        body: &[u8],
        manager: Option<&str>,
    ) -> Result<PatchTarget> {
        let st = self.inner.state.read();
        let mut target =
            self.patch_target(&st, served, ns, name, subresource, kind, body, manager)?;
        drop(st);
        if let PatchTarget::Existing { patched, .. } = &mut target {
            self.decode_defaults(served, patched);
        }
        Ok(target)
    }

    /// What a patch makes of the object `ns/name` as `st` holds it: the
    /// patch applied to it (an apply also checks its manager's conflicts,
    /// removes what it applied before and no longer does, and records
    /// its fields: see `store/fields.rs`), or, for an apply of a missing
    /// object, the object to create. Reads `st` only: the one place both
    /// writes of a patch start from, under the store's lock
    /// ([`Store::patch_in`]) or before the admission webhooks
    /// ([`Store::patch_candidate`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn patch_target(
        &self,
        st: &State,
        served: &Served,
        ns: &str,
        name: &str,
        subresource: Option<&str>,
        kind: PatchKind,
        body: &[u8],
        manager: Option<&str>,
    ) -> Result<PatchTarget> {
        let info = served.info;
        let custom = served.custom.is_some();
        let patch = |target: &Value| {
            if custom {
                crate::patch::apply_patch_custom(
                    kind,
                    target,
                    body,
                    served.custom.as_ref().map(|cv| &*cv.def.schema),
                )
            } else {
                apply_patch(kind, target, body)
            }
        };
        if custom && kind == PatchKind::StrategicMerge {
            // Refused before reading anything, as the real server does.
            return Err(patch(&json!({})).expect_err("strategic merge is refused"));
        }
        st.live(served)?;
        if kind == PatchKind::Apply {
            check_applied_identity(body, name)?;
        }
        match st.existing(served, ns, name) {
            Ok((key, old)) => {
                let live = served.present(old.clone()).value;
                let mut patched = patch(&live)?;
                check_resource_version(info, name, &patched, old.rv)?;
                if kind == PatchKind::Apply {
                    self.own_applied(
                        served,
                        Some(&live),
                        &mut patched,
                        body,
                        subresource,
                        manager,
                    )?;
                }
                Ok(PatchTarget::Existing { key, old, patched })
            }
            Err(ApiError::NotFound { .. }) if kind == PatchKind::Apply && subresource.is_none() => {
                let mut obj = patch(&json!({}))?;
                meta_mut(&mut obj).insert("name".into(), json!(name));
                self.own_applied(served, None, &mut obj, body, None, manager)?;
                Ok(PatchTarget::Create(obj))
            }
            Err(e) => Err(e),
        }
    }

    /// An apply's field ownership (`store/fields.rs`) on `merged` (`live`
    /// with the configuration `body` merged in; `None` for a create).
    fn own_applied(
        &self,
        served: &Served,
        live: Option<&Value>,
        merged: &mut Value,
        body: &[u8],
        subresource: Option<&str>,
        manager: Option<&str>,
    ) -> Result<()> {
        let mut config: Value = serde_yaml::from_slice(body).unwrap_or(Value::Null);
        if let Some(m) = config.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
        let sub = subresource.unwrap_or("");
        let status_apart = served.info.has_status();
        if let (Some(live), true) = (live, status_apart) {
            // What the write will keep (`shape_update`): through status,
            // only status; through the main resource, all but status.
            let (from, keep) = if sub == "status" {
                (live.clone(), merged.get("status").cloned())
            } else {
                (merged.clone(), live.get("status").cloned())
            };
            *merged = from;
            match keep {
                Some(s) => merged["status"] = s,
                None => {
                    merged.as_object_mut().map(|o| o.remove("status"));
                }
            }
        }
        let manager = match manager {
            Some(m) => m.to_string(),
            None => request_manager(),
        };
        let now = self.now_str();
        let api_version = served.info.api_version();
        let w = fields::Writer {
            manager: &manager,
            api_version: &api_version,
            subresource: sub,
            now: &now,
        };
        fields::record_apply(
            live,
            merged,
            &config,
            request_forces(),
            status_apart,
            &w,
            field_ty(served),
        )
    }

    /// Writes a shaped update of `old` if the stored object is still `old`
    /// (`Ok(None)` otherwise: the caller reads it again and starts over).
    pub(crate) fn commit_update_if(
        &self,
        served: &Served,
        key: (String, String),
        old: Stored,
        obj: Value,
        origin: Origin,
        dry_run: bool,
    ) -> Result<Option<Stored>> {
        let mut st = self.inner.state.write();
        let (_, current) = st.existing(served, &key.0, &key.1)?;
        if current.rv != old.rv {
            return Ok(None);
        }
        let s = self.commit_shaped(&mut st, served, key, old, obj, origin, dry_run)?;
        drop(st);
        Ok(Some(served.present(s)))
    }

    /// The other served versions of the same resource (a custom
    /// resource's other versions; none for a built-in one).
    pub(crate) fn equivalents(&self, served: &Served) -> Vec<Served> {
        let Some(cv) = &served.custom else {
            return Vec::new();
        };
        let st = self.inner.state.read();
        st.registry
            .siblings(cv)
            .into_iter()
            .map(Served::custom)
            .collect()
    }

    /// The webhook call counts.
    pub(crate) fn webhook_stats(&self) -> &crate::admission::Stats {
        &self.inner.webhook_stats
    }

    /// Calls of each admission webhook so far, by outcome: (configuration,
    /// webhook, counts), in that order. A run reports which webhooks acted,
    /// and those that failed open (`failurePolicy: Ignore`).
    pub fn webhook_calls(&self) -> Vec<(String, String, crate::admission::WebhookCalls)> {
        self.inner.webhook_stats.snapshot()
    }

    /// A create as a client's goes: through the admission webhooks
    /// registered now (mutating, the server's rules, validating), then the
    /// write, with the Rust API's origin ([`Origin::Api`]). The webhooks'
    /// denial, or a call that failed under `failurePolicy: Fail`, is the
    /// error (its message is the one a client would read). For the owner
    /// of the store who writes objects a client would (the broker submits
    /// jobs as a user does): unlike [`Store::create`], webhooks act on it.
    ///
    /// Counted as a request in flight for the activity counters from this
    /// call (not from the future's first poll) until the returned future
    /// is dropped, as a client's request is until its response is out:
    /// quiescence covers the webhook calls it waits on, and whatever the
    /// caller does with the result before dropping it. Run it on the
    /// runtime that serves the API.
    pub fn create_admitted(&self, resource: &str, namespace: Option<&str>, obj: Value) -> Admitted {
        let store = self.clone();
        let activity = self.activity();
        activity.request_started();
        let in_flight = AdmittedInFlight(activity);
        let resource = resource.to_string();
        let namespace = namespace.map(str::to_string);
        Admitted {
            inner: Box::pin(async move {
                let served = store.resolve(&resource)?;
                crate::admission::create(
                    &store,
                    &served,
                    namespace.as_deref(),
                    obj,
                    json!({}),
                    Origin::Api,
                )
                .await
                .map(|s| (*s.value).clone())
            }),
            _in_flight: in_flight,
        }
    }

    /// The webhooks a create of `obj` (of `resource`, in `namespace`)
    /// would call now, as (configuration, webhook, mutating): their rules
    /// and selectors match it.
    pub fn webhooks_for_create(
        &self,
        resource: &str,
        namespace: Option<&str>,
        obj: &Value,
    ) -> Result<Vec<(String, String, bool)>> {
        let served = self.resolve(resource)?;
        Ok(crate::admission::creating(
            self,
            &served,
            namespace.unwrap_or(""),
            obj,
        ))
    }

    /// A new object identifier from the store's stream (random, or seeded:
    /// an AdmissionReview's `uid`).
    pub(crate) fn review_uid(&self) -> String {
        self.new_uid().to_string()
    }
}

/// An applied configuration names its type and the object of the URL, as
/// kube-apiserver checks it before anything else.
fn check_applied_identity(body: &[u8], name: &str) -> Result<()> {
    let applied: Value = serde_yaml::from_slice(body).unwrap_or(Value::Null);
    if !applied.is_object() {
        return Ok(());
    }
    let api_version = applied
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind_of = applied.get("kind").and_then(Value::as_str).unwrap_or("");
    if api_version.is_empty() || kind_of.is_empty() {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        return Err(ApiError::BadRequest(format!(
            "invalid object type: {group}/{version}, Kind={kind_of}"
        )));
    }
    if let Some(n) = meta_str(&applied, "name").filter(|n| *n != name) {
        return Err(ApiError::BadRequest(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    Ok(())
}

/// [`Store::create_admitted`]'s share of the requests in flight.
struct AdmittedInFlight(Arc<crate::activity::Activity>);

impl Drop for AdmittedInFlight {
    fn drop(&mut self) {
        self.0.request_finished(Default::default());
    }
}

/// The future of [`Store::create_admitted`]: the created object, or why
/// not. A request in flight until dropped.
pub struct Admitted {
    inner: std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value>> + Send>>,
    _in_flight: AdmittedInFlight,
}

impl std::future::Future for Admitted {
    type Output = Result<Value>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<Value>> {
        self.inner.as_mut().poll(cx)
    }
}
