//! kube-controller-manager's garbage collector, as far as simulations need
//! it: an object whose owners (`metadata.ownerReferences`) have all left the
//! API is deleted (background propagation). Controllers count on it: Kueue
//! makes a pod group's Workload owned by the group's pods, and when the last
//! pod is gone it only drops the Workload's finalizer, leaving the deletion
//! to the collector; without it the Workload stays, is queued again as
//! waiting for replacement pods, and may be admitted again with no pod to
//! run, holding its ClusterQueue's quota for ever.
//!
//! It follows the API's change stream: objects with owner references are
//! indexed by their owners' uids; an owner's deletion (the object leaving
//! the API, after its finalizers) strikes it from its dependents' owners,
//! and a dependent left without owners is returned to be deleted (its own
//! finalizers then apply). Only owners that were seen leaving count as
//! gone: a reference to an object that never existed keeps its dependent,
//! where upstream would collect it. Deletion is immediate, in the same
//! instant, where upstream's collector acts a moment later.

use std::collections::{BTreeSet, HashMap};

use fakeapi::{Change, EventType};

/// An object of the API.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// The qualified resource (`workloads.kueue.x-k8s.io`), for the store.
    pub resource: String,
    pub kind: &'static str,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub name: String,
}

#[derive(Debug, Default)]
pub struct OwnerGc {
    /// Owner uid -> its dependents.
    dependents: HashMap<String, BTreeSet<ObjectKey>>,
    /// Dependent -> the uids of its owners still in the API.
    owners: HashMap<ObjectKey, BTreeSet<String>>,
    collected: u64,
}

impl OwnerGc {
    /// Follows one change; returns the dependents now without any owner,
    /// to be deleted.
    pub fn observe(&mut self, ch: &Change) -> Vec<ObjectKey> {
        let key = ObjectKey {
            resource: ch.resource.qualified_name(),
            kind: ch.resource.kind,
            namespace: ch.namespace.clone(),
            name: ch.name.clone(),
        };
        match ch.kind {
            EventType::Added | EventType::Modified => {
                let uids: BTreeSet<String> = ch.object["metadata"]["ownerReferences"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r["uid"].as_str().map(str::to_string))
                    .collect();
                if uids.is_empty() && !self.owners.contains_key(&key) {
                    return Vec::new();
                }
                self.unindex(&key);
                if !uids.is_empty() {
                    for u in &uids {
                        self.dependents
                            .entry(u.clone())
                            .or_default()
                            .insert(key.clone());
                    }
                    self.owners.insert(key, uids);
                }
                Vec::new()
            }
            EventType::Deleted => {
                self.unindex(&key);
                let Some(uid) = ch.object["metadata"]["uid"].as_str() else {
                    return Vec::new();
                };
                let Some(deps) = self.dependents.remove(uid) else {
                    return Vec::new();
                };
                let mut orphans = Vec::new();
                for d in deps {
                    if let Some(left) = self.owners.get_mut(&d) {
                        left.remove(uid);
                        if left.is_empty() {
                            self.owners.remove(&d);
                            orphans.push(d);
                        }
                    }
                }
                self.collected += orphans.len() as u64;
                orphans
            }
        }
    }

    /// Objects deleted because their owners were gone.
    pub fn collected(&self) -> u64 {
        self.collected
    }

    fn unindex(&mut self, key: &ObjectKey) {
        if let Some(uids) = self.owners.remove(key) {
            for u in uids {
                if let Some(d) = self.dependents.get_mut(&u) {
                    d.remove(key);
                    if d.is_empty() {
                        self.dependents.remove(&u);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// Through a real store: its change stream, as the broker reads it.
    #[test]
    fn a_dependent_goes_when_its_last_owner_goes() {
        let store = fakeapi::Store::new();
        let mut rx = store.subscribe();
        let mut gc = OwnerGc::default();
        let pod = |name: &str| {
            store
                .create(
                    "pods",
                    Some("default"),
                    json!({"metadata": {"name": name}, "spec": {"containers": []}}),
                )
                .unwrap()
        };
        let (a, b) = (pod("a"), pod("b"));
        let owner = |p: &Value| {
            json!({"apiVersion": "v1", "kind": "Pod", "name": p["metadata"]["name"],
                "uid": p["metadata"]["uid"]})
        };
        let cm = json!({"metadata": {"name": "dep", "ownerReferences": [owner(&a), owner(&b)]}});
        store.create("configmaps", Some("default"), cm).unwrap();
        let mut drain = |gc: &mut OwnerGc| {
            let mut out = Vec::new();
            while let Ok(ch) = rx.try_recv() {
                out.extend(gc.observe(&ch));
            }
            out
        };
        assert!(drain(&mut gc).is_empty());
        store.delete("pods", Some("default"), "a").unwrap();
        assert!(drain(&mut gc).is_empty(), "b still owns it");
        store.delete("pods", Some("default"), "b").unwrap();
        let gone = drain(&mut gc);
        assert_eq!(gone.len(), 1);
        assert_eq!(
            (
                gone[0].resource.as_str(),
                gone[0].kind,
                gone[0].namespace.as_str(),
                gone[0].name.as_str()
            ),
            ("configmaps", "ConfigMap", "default", "dep")
        );
        assert_eq!(gc.collected(), 1);
        // An object whose references were dropped is no longer a dependent.
        let c = pod("c");
        store
            .create(
                "configmaps",
                Some("default"),
                json!({"metadata": {"name": "dep2", "ownerReferences": [owner(&c)]}}),
            )
            .unwrap();
        let mut cm2 = store.get("configmaps", Some("default"), "dep2").unwrap();
        cm2["metadata"]["ownerReferences"] = json!([]);
        store.update("configmaps", Some("default"), cm2).unwrap();
        store.delete("pods", Some("default"), "c").unwrap();
        assert!(drain(&mut gc).is_empty());
    }
}
