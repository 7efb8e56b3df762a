//! The store's side of API priority and fairness (`crate::flowcontrol`),
//! kube-apiserver's two controllers of it run in the store, as the
//! garbage collector and the quota controller are:
//!
//! - the bootstrap ensurer: the mandatory and suggested
//!   PriorityLevelConfigurations and FlowSchemas written when the store is
//!   made (the levels first, so that each schema's status is written once),
//!   as field manager `api-priority-and-fairness-config-producer-v1`.
//!   kube-apiserver's ensurer also runs again every minute, writing back a
//!   mandatory object deleted or changed meanwhile; here it runs once, and
//!   a missing mandatory object is imagined by the classifier instead (as
//!   kube-apiserver's does until the ensurer's next round).
//! - the config consumer: after each change of a FlowSchema (or of the
//!   level it names), its `Dangling` condition (`False`/`Found` when its
//!   level exists and is well formed, `True`/`NotFound` otherwise) applied
//!   to its status when it differs, forced, as field manager
//!   `api-priority-and-fairness-config-consumer-v1`: a change of its own
//!   (`Origin::FlowControl`), right after the change that called for it.
//!   kube-apiserver's controller does it from its informers a moment later,
//!   and holds back a schema it wrote more than 5 times in a minute; here
//!   nothing is held back.
//!
//! The classifier's [`Config`] is made again only after a change of a
//! FlowSchema or level (the store counts those changes).
//!
//! Uids: in a store with `id_seed`, the bootstrap objects' are derived from
//! their names and the seeded stream's state, not drawn from it, so every
//! other object keeps the uid it had before the store wrote these.

use super::*;
use crate::flowcontrol::{self, bootstrap, Config, FLOW_SCHEMAS, GROUP, PRIORITY_LEVELS};

/// The classifier's configuration and the epoch it was made at.
#[derive(Default)]
pub(crate) struct FlowControlCache {
    /// Bumped by every change of a FlowSchema or level.
    epoch: std::sync::atomic::AtomicU64,
    config: parking_lot::Mutex<Option<(u64, Arc<Config>)>>,
}

fn row(plural: &str) -> (usize, &'static ResourceInfo) {
    resources::builtin(GROUP, "v1", plural).expect("a flowcontrol row")
}

impl Store {
    /// The configuration requests are classified by now: made at most once
    /// per change of a FlowSchema or level.
    pub(crate) fn flow_config(&self) -> Arc<Config> {
        let cache = &self.inner.flowcontrol;
        let epoch = cache.epoch.load(Ordering::Acquire);
        if let Some((e, c)) = &*cache.config.lock() {
            if *e == epoch {
                return c.clone();
            }
        }
        let (epoch, config) = {
            let st = self.inner.state.read();
            // Stable while the lock is held: changes bump it under the
            // write lock.
            let epoch = cache.epoch.load(Ordering::Acquire);
            let values = |plural: &str| -> Vec<Arc<Value>> {
                st.tables[row(plural).0]
                    .objects
                    .values()
                    .map(|s| s.value.clone())
                    .collect()
            };
            let (schemas, levels) = (values(FLOW_SCHEMAS), values(PRIORITY_LEVELS));
            let config = Config::build(
                &schemas.iter().map(|v| &**v).collect::<Vec<_>>(),
                &levels.iter().map(|v| &**v).collect::<Vec<_>>(),
            );
            (epoch, Arc::new(config))
        };
        *cache.config.lock() = Some((epoch, config.clone()));
        config
    }

    /// kube-apiserver's bootstrap objects, written once when the store is
    /// made.
    pub(super) fn write_flowcontrol_bootstrap(&self) {
        let levels = bootstrap::suggested_levels()
            .into_iter()
            .chain(bootstrap::mandatory_levels())
            .map(|o| (PRIORITY_LEVELS, o));
        let schemas = bootstrap::suggested_schemas()
            .into_iter()
            .chain(bootstrap::mandatory_schemas())
            .map(|o| (FLOW_SCHEMAS, o));
        for (plural, mut obj) in levels.chain(schemas) {
            let (t, info) = row(plural);
            let now = self.now_str();
            if let Some(ids) = &self.inner.ids {
                let state = *ids.lock();
                let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
                obj["metadata"]["uid"] = json!(derived_uid(&format!("{plural}/{name}/{state}")));
            }
            let api_version = info.api_version();
            let w = fields::Writer {
                manager: flowcontrol::PRODUCER,
                api_version: &api_version,
                subresource: "",
                now: &now,
            };
            fields::record_update(
                None,
                &mut obj,
                fields::Incoming::Absent,
                &w,
                fields::Ty::root(None, false),
            );
            if let Err(e) = self.create_in(
                &Served::builtin(t, info),
                None,
                obj,
                Origin::FlowControl,
                false,
            ) {
                tracing::warn!(error = %e, "the flowcontrol bootstrap object was not written");
            }
        }
    }

    /// After a change of `info` at `key` committed (under the write lock):
    /// the classifier's configuration is stale, and the FlowSchemas it
    /// concerns (itself, or those naming the level) get their `Dangling`
    /// condition if it is not what it should be.
    pub(super) fn flowcontrol_after_change(
        &self,
        st: &mut State,
        info: &ResourceInfo,
        key: &(String, String),
        ty: EventType,
    ) {
        self.inner.flowcontrol.epoch.fetch_add(1, Ordering::AcqRel);
        let (fs_table, fs_info) = row(FLOW_SCHEMAS);
        let (pl_table, _) = row(PRIORITY_LEVELS);
        let level_of = |v: &Value| {
            v.pointer("/spec/priorityLevelConfiguration/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let targets: Vec<(String, String)> = match info.plural {
            FLOW_SCHEMAS if ty != EventType::Deleted => vec![key.clone()],
            PRIORITY_LEVELS => st.tables[fs_table]
                .objects
                .iter()
                .filter(|(_, s)| level_of(&s.value) == key.1)
                .map(|(k, _)| k.clone())
                .collect(),
            _ => return,
        };
        for k in targets {
            let Some(stored) = st.tables[fs_table].objects.get(&k).cloned() else {
                continue;
            };
            let level = level_of(&stored.value);
            let found = st.tables[pl_table]
                .objects
                .get(&(String::new(), level.clone()))
                .is_some_and(|pl| flowcontrol::level_usable(&pl.value));
            let (status, reason, message) = flowcontrol::dangling_condition(&level, found);
            let current = stored
                .value
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Dangling"));
            if current.is_some_and(|c| {
                c["status"] == status && c["reason"] == reason && c["message"] == *message
            }) {
                continue;
            }
            let now = self.now_str();
            let config = json!({
                "apiVersion": fs_info.api_version(),
                "kind": fs_info.kind,
                "metadata": {"name": k.1},
                "status": {"conditions": [{
                    "type": "Dangling",
                    "status": status,
                    "lastTransitionTime": now,
                    "reason": reason,
                    "message": message,
                }]},
            });
            let ty = fields::Ty::root(None, false);
            let mut merged = (*stored.value).clone();
            fields::merge_applied(&mut merged, &config, ty);
            let api_version = fs_info.api_version();
            let w = fields::Writer {
                manager: flowcontrol::CONSUMER,
                api_version: &api_version,
                subresource: "status",
                now: &now,
            };
            // Forced: it cannot conflict.
            if fields::record_apply(
                Some(&stored.value),
                &mut merged,
                &config,
                true,
                true,
                &w,
                ty,
            )
            .is_err()
            {
                continue;
            }
            self.commit(
                st,
                &Served::builtin(fs_table, fs_info),
                k,
                merged,
                Some(stored),
                EventType::Modified,
                Origin::FlowControl,
            );
        }
    }
}

/// A version 4 UUID derived from `from`.
fn derived_uid(from: &str) -> String {
    let d = ring::digest::digest(
        &ring::digest::SHA256,
        format!("flowcontrol/{from}").as_bytes(),
    );
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&d.as_ref()[..16]);
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}
