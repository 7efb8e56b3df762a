//! The garbage collector: owner references, as kube-controller-manager's
//! garbage collector keeps them.
//!
//! A real cluster's collector is a separate client that watches every
//! resource, builds a graph of owner references, and deletes dependents
//! whose owners are gone (`attemptToDelete`), orphans dependents
//! (`orphan` finalizer) and deletes dependents first (`foregroundDeletion`
//! finalizer, `blockOwnerDeletion`). Here it runs inside the store, under
//! its write lock, right after the change that calls for it: on simulated
//! time a collector that lags by a wall-clock delay would make a run's
//! outcome depend on the machine; one that acts in the same instant cannot.
//! Each of its writes is a change of its own (its own resourceVersion,
//! watch event and [`Origin::GarbageCollector`]), as the real collector's
//! requests are.
//!
//! The rules, from the Kubernetes documentation ("Garbage Collection",
//! "Use Cascading Deletion") and the collector's behaviour:
//! - an owner reference is *solid* when an object of its `apiVersion`,
//!   `kind` and `name` exists (in the dependent's namespace for a
//!   namespaced kind) with its `uid`, and is not itself waiting for its
//!   dependents (foreground deletion); a reference to a kind the server
//!   does not serve cannot be checked and counts as solid;
//! - a dependent with no solid owner is deleted: in the foreground if an
//!   owner waiting for its dependents is blocked by it
//!   (`blockOwnerDeletion: true`), in the background otherwise; it is
//!   looked at when it is created, when its references change and when
//!   one of its owners goes;
//! - `propagationPolicy: Orphan` (or `orphanDependents: true`) removes the
//!   owner's references from its dependents before the owner goes;
//! - `propagationPolicy: Foreground` keeps the owner, marked with the
//!   `foregroundDeletion` finalizer, until none of its dependents that
//!   block it exists any more.
//! - a deletion that names no policy takes the kind's default, as
//!   kube-apiserver's strategies give it: orphaning for v1
//!   ReplicationControllers and batch/v1 Jobs (kept for compatibility,
//!   though other versions delete), none at all for Events, deleting the
//!   dependents for every other kind; a garbage-collection finalizer already
//!   on the object stands for the policy then ([`deletion_finalizers`]);
//! - a circle of foreground deletions (a dependent whose owner waits for it
//!   and that has a dependent waiting too) is broken as the collector breaks
//!   it: the dependent's references stop blocking (`blockOwnerDeletion:
//!   false`), then it is deleted in the foreground.

use super::*;
use std::collections::{BTreeSet, HashMap};

/// How a deletion treats the dependents of the deleted object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// The object goes now; its dependents afterwards (the default).
    #[default]
    Background,
    /// Its dependents go first; the object waits for them.
    Foreground,
    /// Its dependents stay, without their reference to it.
    Orphan,
}

/// What a kind's deletions do to its dependents when the request names no
/// policy: kube-apiserver's `DefaultGarbageCollectionPolicy` of its
/// strategy ([`crate::strategy::gc_default`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DefaultPolicy {
    /// The dependents are deleted (in the background).
    Delete,
    /// They are orphaned: v1 ReplicationControllers and batch/v1 Jobs, for
    /// compatibility (their other versions delete).
    Orphan,
    /// No garbage-collection finalizer at all (Events).
    Unsupported,
}

/// The finalizers a deletion leaves on the object, as kube-apiserver's
/// `deletionFinalizersForGarbageCollection`: the collector's two are taken
/// off, then `orphan` put back when the dependents are to be orphaned and
/// `foregroundDeletion` when they are to go first. The request's policy
/// (`orphanDependents`, else `propagationPolicy`) decides; without one a
/// collector's finalizer already there stands, and without that the kind's
/// default.
pub(crate) fn deletion_finalizers(
    finalizers: &[Value],
    opts: &DeleteOptions,
    default: DefaultPolicy,
) -> Vec<Value> {
    let (orphan, foreground) = if default == DefaultPolicy::Unsupported {
        (false, false)
    } else if let Some(o) = opts.orphan_dependents {
        (o, false)
    } else if let Some(p) = opts.propagation {
        (p == Propagation::Orphan, p == Propagation::Foreground)
    } else {
        // The first of the two in the list wins, as upstream walks it.
        match finalizers
            .iter()
            .filter_map(Value::as_str)
            .find(|f| *f == ORPHAN || *f == FOREGROUND)
        {
            Some(f) => (f == ORPHAN, f == FOREGROUND),
            None => (default == DefaultPolicy::Orphan, false),
        }
    };
    let mut out: Vec<Value> = finalizers
        .iter()
        .filter(|f| !matches!(f.as_str(), Some(ORPHAN) | Some(FOREGROUND)))
        .cloned()
        .collect();
    if orphan {
        out.push(json!(ORPHAN));
    }
    if foreground {
        out.push(json!(FOREGROUND));
    }
    out
}

impl Propagation {
    /// The `propagationPolicy` of DeleteOptions.
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "Background" => Ok(Propagation::Background),
            "Foreground" => Ok(Propagation::Foreground),
            "Orphan" => Ok(Propagation::Orphan),
            other => Err(ApiError::invalid(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                vec![crate::error::FieldError::not_supported(
                    "propagationPolicy",
                    &serde_json::json!(other),
                    &["Foreground", "Background", "Orphan", "nil"].map(String::from),
                )],
            )),
        }
    }
}

pub(crate) const FOREGROUND: &str = "foregroundDeletion";
pub(crate) const ORPHAN: &str = "orphan";

/// An object of a table.
pub(crate) type Item = (usize, (String, String));

/// Work for the collector.
#[derive(Debug)]
pub(crate) enum Job {
    /// Delete this object if no owner of it is solid.
    Dependent(Item),
    /// This object waits for its dependents (foreground): delete them,
    /// or finish it when none blocks it any more.
    Owner(Item),
    /// This object is being deleted with `orphan`: take its references
    /// off its dependents, then let it go.
    Orphan(Item),
}

/// The collector's part of the store's state.
#[derive(Debug, Default)]
pub(crate) struct Graph {
    /// Owner uid -> the objects that name it in their ownerReferences.
    dependents: HashMap<String, BTreeSet<Item>>,
    /// Owners deleted in the foreground that still wait for a dependent
    /// blocking them: uid -> the owner.
    waiting_owners: HashMap<String, Item>,
    queue: VecDeque<Job>,
    /// Set while the queue is being worked (a write of the collector's
    /// queues more work instead of starting a second loop).
    pub(super) working: bool,
}

/// One entry of `metadata.ownerReferences`.
struct OwnerRef<'a> {
    api_version: &'a str,
    kind: &'a str,
    name: &'a str,
    uid: &'a str,
    block: bool,
}

fn owner_refs(obj: &Value) -> impl Iterator<Item = OwnerRef<'_>> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| {
            Some(OwnerRef {
                api_version: r.get("apiVersion")?.as_str()?,
                kind: r.get("kind")?.as_str()?,
                name: r.get("name")?.as_str()?,
                uid: r.get("uid")?.as_str()?,
                block: r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true),
            })
        })
}

fn uids(obj: Option<&Value>) -> BTreeSet<&str> {
    obj.map(|o| owner_refs(o).map(|r| r.uid).collect())
        .unwrap_or_default()
}

fn has_finalizer(obj: &Value, f: &str) -> bool {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|l| l.iter().any(|x| x.as_str() == Some(f)))
}

fn deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp").is_some()
}

/// Waiting for its dependents: being deleted in the foreground.
fn waiting(obj: &Value) -> bool {
    deleting(obj) && has_finalizer(obj, FOREGROUND)
}

impl Graph {
    /// Called by every commit: keeps the reference index and queues what
    /// the change calls for.
    pub(crate) fn changed(
        &mut self,
        table: usize,
        key: &(String, String),
        old: Option<&Value>,
        new: &Value,
        ty: EventType,
    ) {
        // An update that keeps the owners as they were, of an object that
        // owns nothing and is not being deleted with a policy, calls for
        // nothing: the common case (a pod's status written), decided
        // without building the owner sets.
        if let Some(o) = old {
            if ty != EventType::Deleted
                && owner_refs(o)
                    .map(|r| (r.uid, r.block))
                    .eq(owner_refs(new).map(|r| (r.uid, r.block)))
                && !self.may_own(new)
            {
                return;
            }
        }
        let before = uids(old);
        let after = if ty == EventType::Deleted {
            BTreeSet::new()
        } else {
            uids(Some(new))
        };
        if before.is_empty() && after.is_empty() && !self.may_own(new) {
            return; // the common case: nothing owned, nothing owning
        }
        let item = (table, key.clone());
        for uid in before.difference(&after) {
            if let Some(set) = self.dependents.get_mut(*uid) {
                set.remove(&item);
                if set.is_empty() {
                    self.dependents.remove(*uid);
                }
            }
        }
        for uid in after.difference(&before) {
            self.dependents
                .entry(uid.to_string())
                .or_default()
                .insert(item.clone());
        }
        match ty {
            EventType::Deleted => {
                if let Some(uid) = meta_str(new, "uid") {
                    // Its dependents may have lost their last owner.
                    if let Some(set) = self.dependents.get(uid) {
                        self.queue.extend(set.iter().cloned().map(Job::Dependent));
                    }
                    self.waiting_owners.remove(uid);
                }
                // An owner waiting for it may be free to go.
                for uid in &before {
                    if let Some(owner) = self.waiting_owners.get(*uid) {
                        self.queue.push_back(Job::Owner(owner.clone()));
                    }
                }
            }
            _ => {
                if before != after && !after.is_empty() {
                    // Created with owners, or given new ones: are they there?
                    self.queue.push_back(Job::Dependent(item.clone()));
                }
                if waiting(new) && !old.is_some_and(waiting) {
                    self.queue.push_back(Job::Owner(item.clone()));
                }
                // A reference that stops blocking a waiting owner may
                // free it.
                if let Some(o) = old {
                    let still: BTreeSet<&str> =
                        owner_refs(new).filter(|r| r.block).map(|r| r.uid).collect();
                    for r in owner_refs(o).filter(|r| r.block && !still.contains(r.uid)) {
                        if let Some(owner) = self.waiting_owners.get(r.uid) {
                            self.queue.push_back(Job::Owner(owner.clone()));
                        }
                    }
                }
                let orphaning = |o: &Value| deleting(o) && has_finalizer(o, ORPHAN);
                if orphaning(new) && !old.is_some_and(orphaning) {
                    self.queue.push_back(Job::Orphan(item));
                }
            }
        }
    }

    /// An object can own others only if something names its uid.
    fn may_own(&self, obj: &Value) -> bool {
        meta_str(obj, "uid").is_some_and(|u| self.dependents.contains_key(u))
            || waiting(obj)
            || (deleting(obj) && has_finalizer(obj, ORPHAN))
    }
}

impl Store {
    /// Works the collector's queue (called with the write lock held, after
    /// a commit). Each write it makes is committed like any other and may
    /// queue more work; the loop ends when nothing is left.
    pub(super) fn collect_garbage(&self, st: &mut State) {
        if st.gc.working || st.gc.queue.is_empty() {
            return;
        }
        st.gc.working = true;
        while let Some(job) = st.gc.queue.pop_front() {
            match job {
                Job::Dependent(item) => self.attempt_to_delete(st, item),
                Job::Owner(item) => self.process_waiting_owner(st, item),
                Job::Orphan(item) => self.orphan_dependents(st, item),
            }
        }
        st.gc.working = false;
    }

    /// The served storage form of a table (None once its CRD is gone).
    fn served_of(&self, st: &State, table: usize) -> Option<Served> {
        if table < RESOURCES.len() {
            return Some(Served::builtin(table, &RESOURCES[table]));
        }
        st.registry.storage_by_table(table).map(Served::custom)
    }

    /// The table and key an owner reference points at, for a dependent in
    /// namespace `ns`; None when the server does not serve that kind.
    fn resolve_owner(&self, st: &State, r: &OwnerRef<'_>, ns: &str) -> Option<Item> {
        let (table, namespaced) = match RESOURCES
            .iter()
            .enumerate()
            .find(|(_, i)| i.stored && i.kind == r.kind && i.api_version() == r.api_version)
        {
            Some((t, info)) => (t, info.namespaced),
            None => {
                let cv = st.registry.by_kind(r.api_version, r.kind)?;
                (cv.table, cv.info.namespaced)
            }
        };
        let ns = if namespaced { ns } else { "" };
        Some((table, (ns.to_string(), r.name.to_string())))
    }

    fn object(st: &State, item: &Item) -> Option<Stored> {
        st.tables.get(item.0)?.objects.get(&item.1).cloned()
    }

    /// attemptToDelete: the object goes if none of its owners is solid.
    fn attempt_to_delete(&self, st: &mut State, item: Item) {
        let Some(obj) = Self::object(st, &item) else {
            return;
        };
        if deleting(&obj.value) {
            return; // already going (its own finalizers decide when)
        }
        let mut any = false;
        let mut blocks_waiting_owner = false;
        let mut owner_waiting = false;
        for r in owner_refs(&obj.value) {
            any = true;
            let Some(owner_item) = self.resolve_owner(st, &r, &item.1 .0) else {
                return; // a kind we cannot check: assume it is there
            };
            match Self::object(st, &owner_item) {
                Some(o) if meta_str(&o.value, "uid") == Some(r.uid) => {
                    if waiting(&o.value) {
                        owner_waiting = true;
                        blocks_waiting_owner |= r.block;
                    } else {
                        return; // a solid owner
                    }
                }
                _ => {} // gone, or a new object of the same name
            }
        }
        if !any {
            return;
        }
        let Some(served) = self.served_of(st, item.0) else {
            return;
        };
        let mut obj = obj;
        let mut blocks_waiting_owner = blocks_waiting_owner;
        if owner_waiting && self.dependent_waits(st, &obj.value) {
            // A cycle of foreground deletions (its owner waits for it, and
            // it would wait for a dependent that waits too): as the
            // collector does, its references stop blocking their owners,
            // then it goes in the foreground.
            let mut v = (*obj.value).clone();
            if let Some(refs) = v
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            {
                for r in refs {
                    if r.get("blockOwnerDeletion").and_then(Value::as_bool) == Some(true) {
                        r["blockOwnerDeletion"] = json!(false);
                    }
                }
            }
            self.commit(
                st,
                &served,
                item.1.clone(),
                v,
                Some(obj),
                EventType::Modified,
                Origin::GarbageCollector,
            );
            let Some(now) = Self::object(st, &item) else {
                return;
            };
            obj = now;
            blocks_waiting_owner = true;
        }
        let policy = if blocks_waiting_owner {
            Propagation::Foreground
        } else {
            Propagation::Background
        };
        let opts = DeleteOptions {
            propagation: Some(policy),
            ..DeleteOptions::default()
        };
        let _ = self.delete_locked(st, &served, item.1, obj, &opts, Origin::GarbageCollector);
    }

    /// Whether a dependent of `obj` is itself being deleted in the
    /// foreground (waits for its own dependents).
    fn dependent_waits(&self, st: &State, obj: &Value) -> bool {
        let Some(uid) = meta_str(obj, "uid") else {
            return false;
        };
        st.gc.dependents.get(uid).is_some_and(|deps| {
            deps.iter()
                .any(|d| Self::object(st, d).is_some_and(|o| waiting(&o.value)))
        })
    }

    /// An owner deleted in the foreground: its dependents go; once none
    /// that blocks it is left, its `foregroundDeletion` finalizer goes.
    fn process_waiting_owner(&self, st: &mut State, item: Item) {
        let Some(obj) = Self::object(st, &item) else {
            return;
        };
        if !waiting(&obj.value) {
            return;
        }
        let uid = meta_str(&obj.value, "uid").unwrap_or("").to_string();
        let deps: Vec<Item> = st
            .gc
            .dependents
            .get(&uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        let mut blocked = false;
        for d in deps {
            let Some(dep) = Self::object(st, &d) else {
                continue;
            };
            if owner_refs(&dep.value).any(|r| r.uid == uid && r.block) {
                blocked = true;
            }
            if !deleting(&dep.value) {
                st.gc.queue.push_back(Job::Dependent(d));
            }
        }
        if blocked {
            // Looked at again when a dependent goes (see `changed`).
            st.gc.waiting_owners.insert(uid, item);
        } else {
            st.gc.waiting_owners.remove(&uid);
            self.drop_finalizer(st, item, obj, FOREGROUND);
        }
    }

    /// `orphan`: every dependent loses its references to the owner, then
    /// the owner's `orphan` finalizer goes.
    fn orphan_dependents(&self, st: &mut State, item: Item) {
        let Some(obj) = Self::object(st, &item) else {
            return;
        };
        if !(deleting(&obj.value) && has_finalizer(&obj.value, ORPHAN)) {
            return;
        }
        let uid = meta_str(&obj.value, "uid").unwrap_or("").to_string();
        let deps: Vec<Item> = st
            .gc
            .dependents
            .get(&uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        for d in deps {
            let (Some(dep), Some(served)) = (Self::object(st, &d), self.served_of(st, d.0)) else {
                continue;
            };
            let mut v = (*dep.value).clone();
            if let Some(refs) = v
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            {
                refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid.as_str()));
                if refs.is_empty() {
                    meta_mut(&mut v).remove("ownerReferences");
                }
            }
            self.commit(
                st,
                &served,
                d.1,
                v,
                Some(dep),
                EventType::Modified,
                Origin::GarbageCollector,
            );
        }
        let Some(obj) = Self::object(st, &item) else {
            return;
        };
        self.drop_finalizer(st, item, obj, ORPHAN);
    }

    /// Removes one finalizer; the object goes if it was the last one.
    fn drop_finalizer(&self, st: &mut State, item: Item, obj: Stored, finalizer: &str) {
        let Some(served) = self.served_of(st, item.0) else {
            return;
        };
        let mut v = (*obj.value).clone();
        let mut left = true;
        if let Some(list) = v
            .pointer_mut("/metadata/finalizers")
            .and_then(Value::as_array_mut)
        {
            list.retain(|f| f.as_str() != Some(finalizer));
            left = !list.is_empty();
            if !left {
                meta_mut(&mut v).remove("finalizers");
            }
        }
        let ty = if deleting(&v) && !left {
            EventType::Deleted
        } else {
            EventType::Modified
        };
        self.commit(
            st,
            &served,
            item.1,
            v,
            Some(obj),
            ty,
            Origin::GarbageCollector,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(s: &Store, name: &str) -> String {
        let o = s
            .create(
                "configmaps",
                Some("default"),
                json!({"metadata": {"name": name}}),
            )
            .unwrap();
        o["metadata"]["uid"].as_str().unwrap().to_string()
    }

    fn owned(s: &Store, name: &str, owners: &[(&str, &str, bool)], finalizers: &[&str]) {
        let refs: Vec<Value> = owners
            .iter()
            .map(|(n, uid, block)| {
                json!({"apiVersion": "v1", "kind": "ConfigMap", "name": n, "uid": uid,
                       "blockOwnerDeletion": block})
            })
            .collect();
        s.create(
            "configmaps",
            Some("default"),
            json!({"metadata": {"name": name, "ownerReferences": refs, "finalizers": finalizers}}),
        )
        .unwrap();
    }

    fn exists(s: &Store, name: &str) -> Option<Value> {
        s.get("configmaps", Some("default"), name).ok()
    }

    fn delete(s: &Store, name: &str, p: Propagation) -> Value {
        let opts = DeleteOptions {
            propagation: Some(p),
            ..DeleteOptions::default()
        };
        s.delete_with("configmaps", Some("default"), name, &opts)
            .unwrap()
    }

    #[test]
    fn background_deletes_dependents_whose_last_owner_went_and_chains() {
        let s = Store::new();
        let a = cm(&s, "a");
        let b = cm(&s, "b");
        owned(&s, "only-a", &[("a", &a, false)], &[]);
        owned(&s, "a-and-b", &[("a", &a, false), ("b", &b, false)], &[]);
        let c = exists(&s, "only-a").unwrap()["metadata"]["uid"]
            .as_str()
            .unwrap()
            .to_string();
        owned(&s, "grandchild", &[("only-a", &c, false)], &[]);
        let mut changes = s.subscribe();
        delete(&s, "a", Propagation::Background);
        assert!(exists(&s, "a").is_none());
        assert!(exists(&s, "only-a").is_none());
        assert!(
            exists(&s, "grandchild").is_none(),
            "dependents of dependents go too"
        );
        assert!(exists(&s, "a-and-b").is_some(), "b still owns it");
        let mut seen = vec![];
        while let Ok(ch) = changes.try_recv() {
            seen.push((ch.name.clone(), ch.kind, ch.origin));
        }
        assert_eq!(
            seen,
            vec![
                ("a".into(), EventType::Deleted, Origin::Api),
                (
                    "only-a".into(),
                    EventType::Deleted,
                    Origin::GarbageCollector
                ),
                (
                    "grandchild".into(),
                    EventType::Deleted,
                    Origin::GarbageCollector
                ),
            ]
        );
        delete(&s, "b", Propagation::Background);
        assert!(exists(&s, "a-and-b").is_none(), "its last owner went");
    }

    #[test]
    fn a_dependent_of_a_missing_owner_goes_at_creation_and_finalizers_hold_it() {
        let s = Store::new();
        owned(&s, "orphan", &[("nobody", "no-such-uid", false)], &[]);
        assert!(exists(&s, "orphan").is_none());
        // Same name, another uid: the owner it names is gone.
        let _ = cm(&s, "x");
        owned(&s, "stale", &[("x", "an-older-uid", false)], &[]);
        assert!(exists(&s, "stale").is_none());
        // A finalizer keeps it, marked, until it is removed.
        owned(
            &s,
            "held",
            &[("nobody", "no-such-uid", false)],
            &["example.com/keep"],
        );
        let held = exists(&s, "held").unwrap();
        assert!(held["metadata"]["deletionTimestamp"].is_string());
        let mut upd = held.clone();
        upd["metadata"]["finalizers"] = json!([]);
        s.update("configmaps", Some("default"), upd).unwrap();
        assert!(exists(&s, "held").is_none());
        // A kind the server does not serve cannot be checked: kept.
        s.create(
            "configmaps",
            Some("default"),
            json!({"metadata": {"name": "unknown-owner", "ownerReferences": [
                {"apiVersion": "example.com/v1", "kind": "Thing", "name": "t", "uid": "u"}]}}),
        )
        .unwrap();
        assert!(exists(&s, "unknown-owner").is_some());
    }

    #[test]
    fn orphan_takes_the_references_off_and_keeps_the_dependents() {
        let s = Store::new();
        let a = cm(&s, "a");
        let b = cm(&s, "b");
        owned(&s, "d1", &[("a", &a, true)], &[]);
        owned(&s, "d2", &[("a", &a, false), ("b", &b, false)], &[]);
        delete(&s, "a", Propagation::Orphan);
        assert!(exists(&s, "a").is_none());
        assert!(exists(&s, "d1").unwrap()["metadata"]
            .get("ownerReferences")
            .is_none());
        let d2 = exists(&s, "d2").unwrap();
        assert_eq!(
            d2["metadata"]["ownerReferences"].as_array().unwrap().len(),
            1
        );
        assert_eq!(d2["metadata"]["ownerReferences"][0]["uid"], b.as_str());
        // An owner with finalizers of its own stays until they go.
        let c = s
            .create(
                "configmaps",
                Some("default"),
                json!({"metadata": {"name": "c", "finalizers": ["example.com/keep"]}}),
            )
            .unwrap();
        let c_uid = c["metadata"]["uid"].as_str().unwrap().to_string();
        owned(&s, "d3", &[("c", &c_uid, false)], &[]);
        let marked = delete(&s, "c", Propagation::Orphan);
        assert_eq!(
            marked["metadata"]["finalizers"],
            json!(["example.com/keep", "orphan"])
        );
        let c = exists(&s, "c").unwrap();
        assert_eq!(c["metadata"]["finalizers"], json!(["example.com/keep"]));
        assert!(exists(&s, "d3").unwrap()["metadata"]
            .get("ownerReferences")
            .is_none());
    }

    #[test]
    fn foreground_waits_for_blocking_dependents() {
        let s = Store::new();
        let a = cm(&s, "a");
        owned(&s, "blocker", &[("a", &a, true)], &["example.com/keep"]);
        owned(&s, "free", &[("a", &a, false)], &[]);
        let marked = delete(&s, "a", Propagation::Foreground);
        assert_eq!(
            marked["metadata"]["finalizers"],
            json!(["foregroundDeletion"])
        );
        let a_now = exists(&s, "a").expect("waits for its blocking dependent");
        assert!(a_now["metadata"]["deletionTimestamp"].is_string());
        assert!(exists(&s, "free").is_none());
        let blocker = exists(&s, "blocker").unwrap();
        assert!(blocker["metadata"]["deletionTimestamp"].is_string());
        let mut upd = blocker.clone();
        upd["metadata"]["finalizers"] = json!([]);
        s.update("configmaps", Some("default"), upd).unwrap();
        assert!(exists(&s, "blocker").is_none());
        assert!(
            exists(&s, "a").is_none(),
            "its last blocking dependent went"
        );
        // Without dependents, it goes at once.
        cm(&s, "lonely");
        delete(&s, "lonely", Propagation::Foreground);
        assert!(exists(&s, "lonely").is_none());
    }

    /// Three objects owning each other in a circle, every reference
    /// blocking: a foreground deletion of one takes all three (the e2e
    /// suite's "should not be blocked by dependency circle"), the circle
    /// broken as kube-controller-manager's collector breaks it.
    #[test]
    fn foreground_deletion_of_a_circle_takes_it_all() {
        let s = Store::new();
        let uid = |n: &str| {
            exists(&s, n).unwrap()["metadata"]["uid"]
                .as_str()
                .unwrap()
                .to_string()
        };
        for n in ["c1", "c2", "c3"] {
            cm(&s, n);
        }
        for (name, owner) in [("c1", "c3"), ("c2", "c1"), ("c3", "c2")] {
            let mut o = exists(&s, name).unwrap();
            o["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
                "name": owner, "uid": uid(owner), "controller": true, "blockOwnerDeletion": true}]);
            s.update("configmaps", Some("default"), o).unwrap();
        }
        delete(&s, "c1", Propagation::Foreground);
        for n in ["c1", "c2", "c3"] {
            assert!(exists(&s, n).is_none(), "{n} is left: {:?}", exists(&s, n));
        }
    }

    #[test]
    fn custom_dependents_of_pods() {
        let s = Store::new();
        let crd: Value = serde_yaml::from_str(crate::COSCHEDULING_PODGROUP_CRD).unwrap();
        s.install_crd(crd).unwrap();
        let pod = s
            .create(
                "pods",
                Some("default"),
                json!({"metadata": {"name": "p"}, "spec": {"containers": []}}),
            )
            .unwrap();
        s.create(
            "podgroups.scheduling.x-k8s.io",
            Some("default"),
            json!({"metadata": {"name": "g", "ownerReferences": [{"apiVersion": "v1", "kind": "Pod",
                "name": "p", "uid": pod["metadata"]["uid"]}]}, "spec": {"minMember": 1}}),
        )
        .unwrap();
        s.delete("pods", Some("default"), "p").unwrap();
        assert!(s
            .get("podgroups.scheduling.x-k8s.io", Some("default"), "g")
            .is_err());
    }

    #[test]
    fn bad_propagation_policy_is_refused() {
        let e = Propagation::parse("Sideways").unwrap_err();
        assert_eq!(e.code(), 422);
        assert!(e.to_string().contains("Unsupported value: \"Sideways\""));
    }

    /// A v1 ReplicationController with a pod of its own, as its controller
    /// makes them.
    fn rc_with_pod(s: &Store, name: &str) {
        let rc = s
            .create(
                "replicationcontrollers",
                Some("default"),
                json!({"metadata": {"name": name},
                       "spec": {"replicas": 1, "selector": {"app": name},
                                "template": {"metadata": {"labels": {"app": name}},
                                             "spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
            )
            .unwrap();
        let uid = rc["metadata"]["uid"].as_str().unwrap();
        s.create(
            "pods",
            Some("default"),
            json!({"metadata": {"name": format!("{name}-pod"), "labels": {"app": name},
                                "ownerReferences": [{"apiVersion": "v1", "kind": "ReplicationController",
                                                     "name": name, "uid": uid, "controller": true,
                                                     "blockOwnerDeletion": true}]},
                   "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        )
        .unwrap();
    }

    fn pod_owners(s: &Store, name: &str) -> Option<Value> {
        s.get("pods", Some("default"), &format!("{name}-pod"))
            .ok()
            .map(|p| p["metadata"]["ownerReferences"].clone())
    }

    #[test]
    fn a_v1_replication_controller_deleted_without_a_policy_orphans_as_kube_apiserver() {
        // kube-apiserver's rcStrategy and jobStrategy default to
        // OrphanDependents for v1 (the e2e test "should orphan pods created
        // by rc if deleteOptions.OrphanDependents is nil").
        let s = Store::new();
        rc_with_pod(&s, "plain");
        s.delete("replicationcontrollers", Some("default"), "plain")
            .unwrap();
        assert!(s
            .get("replicationcontrollers", Some("default"), "plain")
            .is_err());
        assert_eq!(
            pod_owners(&s, "plain"),
            Some(Value::Null),
            "the pod stays, orphaned"
        );

        // orphanDependents: false, or a policy, decides over the default.
        for (name, opts) in [
            (
                "not-orphaned",
                DeleteOptions {
                    orphan_dependents: Some(false),
                    ..Default::default()
                },
            ),
            (
                "background",
                DeleteOptions {
                    propagation: Some(Propagation::Background),
                    ..Default::default()
                },
            ),
        ] {
            rc_with_pod(&s, name);
            s.delete_with("replicationcontrollers", Some("default"), name, &opts)
                .unwrap();
            assert_eq!(
                pod_owners(&s, name),
                None,
                "{name}: the pod goes with its owner"
            );
        }

        // The default of any other kind deletes (a ConfigMap's dependent).
        let a = cm(&s, "owner");
        owned(&s, "dependent", &[("owner", &a, false)], &[]);
        s.delete("configmaps", Some("default"), "owner").unwrap();
        assert!(exists(&s, "dependent").is_none());
    }

    #[test]
    fn the_collectors_finalizers_follow_the_request_then_the_object_then_the_kind() {
        let f = |v: &[&str]| v.iter().map(|x| json!(x)).collect::<Vec<_>>();
        let none = DeleteOptions::default();
        let with = |p| DeleteOptions {
            propagation: Some(p),
            ..Default::default()
        };
        let orphan = |o| DeleteOptions {
            orphan_dependents: Some(o),
            ..Default::default()
        };
        use DefaultPolicy::*;
        assert_eq!(crate::strategy::gc_default("batch", "jobs", false), Orphan);
        assert_eq!(
            crate::strategy::gc_default("batch", "jobs", true),
            Delete,
            "a custom kind's default"
        );
        assert_eq!(
            crate::strategy::gc_default("events.k8s.io", "events", false),
            Unsupported
        );
        // The kind's default when nothing else says.
        assert_eq!(deletion_finalizers(&[], &none, Delete), f(&[]));
        assert_eq!(deletion_finalizers(&[], &none, Orphan), f(&[ORPHAN]));
        // A collector's finalizer on the object stands for the policy.
        assert_eq!(
            deletion_finalizers(&f(&["x", FOREGROUND]), &none, Orphan),
            f(&["x", FOREGROUND])
        );
        assert_eq!(
            deletion_finalizers(&f(&[ORPHAN, FOREGROUND]), &none, Delete),
            f(&[ORPHAN])
        );
        // The request decides over both, and takes the other one off.
        assert_eq!(
            deletion_finalizers(&f(&[ORPHAN, "x"]), &with(Propagation::Foreground), Orphan),
            f(&["x", FOREGROUND])
        );
        assert_eq!(
            deletion_finalizers(&f(&[FOREGROUND]), &with(Propagation::Background), Delete),
            f(&[])
        );
        assert_eq!(
            deletion_finalizers(&f(&[FOREGROUND]), &orphan(true), Delete),
            f(&[ORPHAN])
        );
        assert_eq!(deletion_finalizers(&[], &orphan(false), Orphan), f(&[]));
        // Events take none.
        assert_eq!(
            deletion_finalizers(&f(&[ORPHAN]), &with(Propagation::Orphan), Unsupported),
            f(&[])
        );
    }
}
