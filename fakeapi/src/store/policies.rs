//! The store's side of ValidatingAdmissionPolicies
//! (`crate::admission::policy`): the compiled set of bound policies, made
//! again only after a policy or binding changed (the store counts those
//! changes), and a policy's `status.typeChecking`, written right after each
//! change of its spec by [`Origin::PolicyStatusController`], as
//! kube-apiserver's status controller writes it.

use super::*;
use crate::admission::policy::{self, typecheck, PolicySet};

/// The compiled policies and the policy epoch they were made at.
#[derive(Default)]
pub(crate) struct PolicyCache {
    /// Bumped by every change of a policy or a binding.
    epoch: std::sync::atomic::AtomicU64,
    set: parking_lot::Mutex<Option<(u64, Arc<PolicySet>)>>,
}

impl Store {
    /// The bound policies now: compiled at most once per change of them.
    pub(crate) fn policy_set(&self) -> Arc<PolicySet> {
        let cache = &self.inner.policies;
        let epoch = cache.epoch.load(Ordering::Acquire);
        if let Some((e, set)) = &*cache.set.lock() {
            if *e == epoch {
                return set.clone();
            }
        }
        let (epoch, policies, bindings) = {
            let st = self.inner.state.read();
            // Stable while the lock is held: changes bump it under the
            // write lock.
            let epoch = cache.epoch.load(Ordering::Acquire);
            let values = |plural: &str| -> Vec<Value> {
                let (t, _) =
                    resources::builtin(policy::GROUP, "v1", plural).expect("a built-in row");
                st.tables[t]
                    .objects
                    .values()
                    .map(|s| (*s.value).clone())
                    .collect()
            };
            (epoch, values(policy::POLICIES), values(policy::BINDINGS))
        };
        let set = Arc::new(PolicySet::build(&policies, &bindings));
        *cache.set.lock() = Some((epoch, set.clone()));
        set
    }

    /// After a change of `served` committed (under the write lock): a
    /// change of a policy or binding makes the compiled set stale; a
    /// policy whose spec changed gets its type checking.
    pub(super) fn policies_after_change(
        &self,
        st: &mut State,
        served: &Served,
        key: &(String, String),
        stored: &Stored,
        ty: EventType,
        origin: Origin,
    ) {
        let info = served.info;
        if served.custom.is_some() || info.group != policy::GROUP {
            return;
        }
        if info.plural != policy::POLICIES && info.plural != policy::BINDINGS {
            return;
        }
        self.inner.policies.epoch.fetch_add(1, Ordering::AcqRel);
        if info.plural != policy::POLICIES
            || ty == EventType::Deleted
            || origin == Origin::PolicyStatusController
        {
            return;
        }
        let value = &*stored.value;
        let generation = value
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let observed = value
            .pointer("/status/observedGeneration")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if generation <= observed {
            return;
        }
        let status = {
            let registry = &st.registry;
            let resolve = |g: &str, v: &str, res: &str| -> Option<typecheck::Resolved> {
                if let Some((_, row)) = resources::builtin(g, v, res) {
                    let s = crate::builtin_schema::schema(g, v, row.kind)?;
                    return Some(((g.into(), v.into(), row.kind.into()), s));
                }
                let cv = registry.served(g, v, res)?;
                Some((
                    (g.into(), v.into(), cv.info.kind.into()),
                    cv.def.schema.clone(),
                ))
            };
            let param_schema = value
                .pointer("/spec/paramKind")
                .filter(|p| !p.is_null())
                .and_then(|p| {
                    let api_version = p.get("apiVersion").and_then(Value::as_str)?;
                    let kind = p.get("kind").and_then(Value::as_str)?;
                    if let Some(r) = RESOURCES
                        .iter()
                        .find(|r| r.kind == kind && r.api_version() == api_version)
                    {
                        return crate::builtin_schema::schema(r.group, r.version, r.kind);
                    }
                    registry
                        .by_kind(api_version, kind)
                        .map(|cv| cv.def.schema.clone())
                });
            typecheck::status(value, &resolve, param_schema)
        };
        if value.get("status") == Some(&status) {
            return;
        }
        let mut obj = value.clone();
        obj["status"] = status;
        self.commit(
            st,
            served,
            key.clone(),
            obj,
            Some(stored.clone()),
            EventType::Modified,
            Origin::PolicyStatusController,
        );
    }
}
