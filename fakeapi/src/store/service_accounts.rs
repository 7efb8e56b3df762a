//! kube-controller-manager's service-account controller, run by the store
//! as it runs the garbage collector and the quota controller: every
//! namespace that is not terminating has a ServiceAccount `default`,
//! written as soon as the namespace is (and again if it is deleted while
//! its namespace lives). kube-apiserver alone does not write it: clients
//! that wait for it (Kubernetes' e2e suite, the `ServiceAccount` admission
//! of a real cluster) rely on the controller.
//!
//! Its writes are the controller's (`Origin::ServiceAccountController`):
//! a change of its own, with its own resourceVersion and watch event, as
//! the controller's create is. Its uid, in a store with `id_seed`, is
//! derived from its namespace's (and the store's version), not taken from
//! the seeded stream, so that every other object keeps the uid it had
//! before the store wrote these.

use super::{EventType, Origin, Served, State, Store};
use crate::resources;
use serde_json::{json, Value};

/// The name of the account every namespace gets.
const DEFAULT: &str = "default";

impl Store {
    /// After a change of `info` at `key`: a namespace added gets its
    /// `default` ServiceAccount; a `default` ServiceAccount deleted from a
    /// namespace that is not terminating is written again.
    pub(super) fn service_accounts_after_change(
        &self,
        st: &mut State,
        served: &Served,
        key: &(String, String),
        ty: EventType,
    ) {
        let info = served.info;
        if served.custom.is_some() || !info.group.is_empty() {
            return;
        }
        let ns = match (info.plural, ty) {
            ("namespaces", EventType::Added) => key.1.as_str(),
            ("serviceaccounts", EventType::Deleted) if key.1 == DEFAULT => key.0.as_str(),
            _ => return,
        };
        let (ns_table, _) = resources::builtin("", "v1", "namespaces").expect("namespaces row");
        let Some(namespace) = st.tables[ns_table]
            .objects
            .get(&(String::new(), ns.to_string()))
            .map(|s| s.value.clone())
        else {
            return;
        };
        let terminating = !namespace["metadata"]["deletionTimestamp"].is_null()
            || namespace["status"]["phase"] == "Terminating";
        let (sa_table, sa_info) =
            resources::builtin("", "v1", "serviceaccounts").expect("serviceaccounts row");
        let sa_key = (ns.to_string(), DEFAULT.to_string());
        if terminating || st.tables[sa_table].objects.contains_key(&sa_key) {
            return;
        }
        let uid = match &self.inner.ids {
            Some(_) => derived_uid(namespace["metadata"]["uid"].as_str().unwrap_or(ns), st.rv),
            None => self.new_uid().to_string(),
        };
        let sa = json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {
                "name": DEFAULT,
                "namespace": ns,
                "uid": uid,
                "creationTimestamp": Value::String(self.now_str()),
            },
        });
        self.commit(
            st,
            &Served::builtin(sa_table, sa_info),
            sa_key,
            sa,
            None,
            EventType::Added,
            Origin::ServiceAccountController,
        );
    }
}

/// A version 4 UUID derived from `from` (the namespace's uid) and the
/// store's resourceVersion when it is written: the same in every run of a
/// seeded store, and another for an account written again.
fn derived_uid(from: &str, rv: u64) -> String {
    let d = ring::digest::digest(
        &ring::digest::SHA256,
        format!("serviceaccount/default/{from}/{rv}").as_bytes(),
    );
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&d.as_ref()[..16]);
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}
