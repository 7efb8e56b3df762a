//! What a request is served by: a row of the resource table, the store's
//! table of its objects, and, for a custom resource, its definition.
//!
//! Built-in rows come from [`RESOURCES`](crate::resources::RESOURCES) with no
//! lock; a store's custom rows live in its [`Registry`], under the store's
//! lock, added when a CRD is established and removed when it is deleted. Every
//! verb takes a [`Served`], so built-in and custom kinds share one code path:
//! a custom one only adds its schema (pruning, defaults, validation), its
//! subresources and the conversion between its versions (`apiVersion`
//! rewritten: the `None` strategy).

use crate::crd::{Definition, VersionDef};
use crate::resources::{self, ResourceInfo};
use crate::store::Stored;
use bytes::Bytes;
use serde_json::{json, Value};
use std::sync::Arc;

/// One version of a custom resource, as served.
#[derive(Debug)]
pub(crate) struct CustomVersion {
    /// This version's row.
    pub info: &'static ResourceInfo,
    /// The storage version's row: objects are stored in it, and their
    /// changes reported under it.
    pub storage: &'static ResourceInfo,
    /// The CRD's name (`podgroups.scheduling.x-k8s.io`).
    pub crd: String,
    pub list_kind: String,
    /// The store's table of the resource's objects (one for all versions).
    pub table: usize,
    pub def: VersionDef,
    /// The CRD's conversion webhook, if it names one (never called: see
    /// [`Served::unconvertible`]).
    pub conversion_webhook: Option<String>,
}

/// A resolved resource: its row, its table, its definition if custom.
#[derive(Debug, Clone)]
pub(crate) struct Served {
    pub info: &'static ResourceInfo,
    pub table: usize,
    pub custom: Option<Arc<CustomVersion>>,
}

impl Served {
    pub(crate) fn builtin(table: usize, info: &'static ResourceInfo) -> Self {
        Served {
            info,
            table,
            custom: None,
        }
    }

    pub(crate) fn custom(cv: Arc<CustomVersion>) -> Self {
        Served {
            info: cv.info,
            table: cv.table,
            custom: Some(cv),
        }
    }

    /// The row changes are stored and reported under.
    pub(crate) fn storage_info(&self) -> &'static ResourceInfo {
        self.custom.as_ref().map_or(self.info, |c| c.storage)
    }

    /// Whether objects must be converted between this version and storage.
    pub(crate) fn converts(&self) -> bool {
        self.custom
            .as_ref()
            .is_some_and(|c| !std::ptr::eq(c.info, c.storage))
    }

    /// Why this version cannot be served: its objects are stored in
    /// another version, and only the CRD's conversion webhook, which the
    /// API does not call, could convert them. Said as kube-apiserver says a
    /// failed conversion (a 500), with what to do.
    pub(crate) fn unconvertible(&self) -> Option<crate::error::ApiError> {
        let c = self.custom.as_ref().filter(|_| self.converts())?;
        let hook = c.conversion_webhook.as_ref()?;
        Some(crate::error::ApiError::Internal(format!(
            "conversion webhook for {}, Kind={} failed: batkube does not call conversion \
             webhooks ({hook}, of the CustomResourceDefinition {}): request the storage \
             version {} instead",
            c.storage.api_version(),
            c.info.kind,
            c.crd,
            c.storage.api_version()
        )))
    }

    pub(crate) fn is_crd(&self) -> bool {
        self.custom.is_none() && self.table == resources::crd_row().0
    }

    /// A stored object as this version shows it.
    pub(crate) fn present(&self, s: Stored) -> Stored {
        if !self.converts() {
            return s;
        }
        let mut v = (*s.value).clone();
        v["apiVersion"] = json!(self.info.api_version());
        Stored {
            json: Bytes::from(serde_json::to_vec(&v).expect("a Value serializes")),
            value: Arc::new(v),
            rv: s.rv,
        }
    }

    /// Stored bytes as this version shows them.
    pub(crate) fn present_json(&self, json: &Bytes) -> Bytes {
        if !self.converts() {
            return json.clone();
        }
        let mut v: Value = serde_json::from_slice(json).expect("the store serialized it");
        v["apiVersion"] = json!(self.info.api_version());
        Bytes::from(serde_json::to_vec(&v).expect("a Value serializes"))
    }
}

/// A store's custom rows.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    /// Every version of every established CRD (served or not: an unserved
    /// storage version still names where objects are stored).
    versions: Vec<Arc<CustomVersion>>,
}

impl Registry {
    /// A served version by URL coordinates.
    pub(crate) fn served(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<Arc<CustomVersion>> {
        self.versions
            .iter()
            .find(|c| {
                c.def.served
                    && c.info.plural == plural
                    && c.info.group == group
                    && c.info.version == version
            })
            .cloned()
    }

    /// The other served versions of the resource of `cv` (the versions an
    /// admission webhook with `matchPolicy: Equivalent` may match).
    pub(crate) fn siblings(&self, cv: &CustomVersion) -> Vec<Arc<CustomVersion>> {
        self.versions
            .iter()
            .filter(|c| c.def.served && c.crd == cv.crd && !std::ptr::eq(c.info, cv.info))
            .cloned()
            .collect()
    }

    /// The storage version of `plural.group`.
    pub(crate) fn storage(&self, group: &str, plural: &str) -> Option<Arc<CustomVersion>> {
        self.versions
            .iter()
            .find(|c| c.def.storage && c.info.plural == plural && c.info.group == group)
            .cloned()
    }

    /// The version a row belongs to.
    pub(crate) fn by_info(&self, info: &ResourceInfo) -> Option<Arc<CustomVersion>> {
        self.versions
            .iter()
            .find(|c| std::ptr::eq(c.info, info))
            .or_else(|| self.versions.iter().find(|c| *c.info == *info))
            .cloned()
    }

    /// A served version by `apiVersion` and `kind`.
    pub(crate) fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<CustomVersion>> {
        self.versions
            .iter()
            .find(|c| c.def.served && c.info.kind == kind && c.info.api_version() == api_version)
            .cloned()
    }

    /// Every served version of every CRD, in installation order (a CRD
    /// whose resource shadows a built-in one included: its schema is
    /// published all the same).
    pub(crate) fn served_versions(&self) -> Vec<Arc<CustomVersion>> {
        self.versions
            .iter()
            .filter(|c| c.def.served)
            .cloned()
            .collect()
    }

    /// The served rows, in installation order.
    pub(crate) fn rows(&self) -> impl Iterator<Item = &'static ResourceInfo> + '_ {
        self.versions
            .iter()
            .filter(|c| {
                c.def.served
                    && resources::builtin(c.info.group, c.info.version, c.info.plural).is_none()
            })
            .map(|c| c.info)
    }

    /// The table of a CRD's objects, if it has been established.
    pub(crate) fn table_of(&self, crd: &str) -> Option<usize> {
        self.versions.iter().find(|c| c.crd == crd).map(|c| c.table)
    }

    /// The storage version of the CRD whose objects are in `table`.
    pub(crate) fn storage_by_table(&self, table: usize) -> Option<Arc<CustomVersion>> {
        self.versions
            .iter()
            .find(|c| c.table == table && c.def.storage)
            .cloned()
    }

    /// The storage version of a CRD, if established.
    pub(crate) fn storage_of(&self, crd: &str) -> Option<Arc<CustomVersion>> {
        self.versions
            .iter()
            .find(|c| c.crd == crd && c.def.storage)
            .cloned()
    }

    /// Takes a CRD's versions out (it is deleted, or no longer accepted).
    pub(crate) fn remove(&mut self, crd: &str) -> Vec<Arc<CustomVersion>> {
        let (gone, kept) = std::mem::take(&mut self.versions)
            .into_iter()
            .partition(|c| c.crd == crd);
        self.versions = kept;
        gone
    }

    /// Serves `def` from `table`, replacing what its CRD served before.
    pub(crate) fn install(&mut self, def: &Definition, table: usize) {
        self.remove(&def.name);
        let mut subs: Vec<&str> = Vec::new();
        let rows: Vec<&'static ResourceInfo> = def
            .versions
            .iter()
            .map(|v| {
                subs.clear();
                if v.status {
                    subs.push("status");
                }
                if v.scale.is_some() {
                    subs.push("scale");
                }
                resources::intern(
                    &def.group,
                    &v.name,
                    &def.kind,
                    &def.plural,
                    &def.singular,
                    def.namespaced,
                    &subs,
                    &def.short_names,
                    &def.categories,
                )
            })
            .collect();
        let storage = def
            .versions
            .iter()
            .position(|v| v.storage)
            .map(|i| rows[i])
            .expect("an admitted CRD has a storage version");
        for (v, info) in def.versions.iter().zip(rows) {
            self.versions.push(Arc::new(CustomVersion {
                info,
                storage,
                crd: def.name.clone(),
                list_kind: def.list_kind.clone(),
                table,
                def: v.clone(),
                conversion_webhook: def.conversion_webhook.clone(),
            }));
        }
    }

    /// Why `def`'s names cannot be accepted: another CRD of its group
    /// already uses one (the naming controller's reasons and messages).
    pub(crate) fn conflict(&self, def: &Definition) -> Option<(&'static str, String)> {
        let others: Vec<&Arc<CustomVersion>> = self
            .versions
            .iter()
            .filter(|c| c.crd != def.name && c.info.group == def.group)
            .collect();
        let resource_taken = |n: &str| {
            !n.is_empty()
                && others.iter().any(|c| {
                    c.info.plural == n || c.info.singular == n || c.info.short_names.contains(&n)
                })
        };
        let kind_taken =
            |n: &str| !n.is_empty() && others.iter().any(|c| c.info.kind == n || c.list_kind == n);
        let in_use = |n: &str| format!("{n:?} is already in use");
        if resource_taken(&def.plural) {
            return Some(("PluralConflict", in_use(&def.plural)));
        }
        if resource_taken(&def.singular) {
            return Some(("SingularConflict", in_use(&def.singular)));
        }
        let taken: Vec<String> = def
            .short_names
            .iter()
            .filter(|s| resource_taken(s))
            .map(|s| in_use(s))
            .collect();
        if !taken.is_empty() {
            let msg = if taken.len() == 1 {
                taken[0].clone()
            } else {
                format!("[{}]", taken.join(", "))
            };
            return Some(("ShortNamesConflict", msg));
        }
        if kind_taken(&def.kind) {
            return Some(("KindConflict", in_use(&def.kind)));
        }
        if kind_taken(&def.list_kind) {
            return Some(("ListKindConflict", in_use(&def.list_kind)));
        }
        None
    }
}

/// The path segments of a scale path (`.spec.replicas`).
fn segments(path: &str) -> impl Iterator<Item = &str> {
    path.split('.').filter(|s| !s.is_empty())
}

pub(crate) fn get_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    segments(path).try_fold(obj, |v, k| v.get(k))
}

/// Sets a value at a path, creating the objects on the way.
pub(crate) fn set_path(obj: &mut Value, path: &str, value: Value) {
    let mut cur = obj;
    let segs: Vec<&str> = segments(path).collect();
    for (i, k) in segs.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        let m = cur.as_object_mut().expect("just made an object");
        if i + 1 == segs.len() {
            m.insert(k.to_string(), value);
            return;
        }
        cur = m.entry(k.to_string()).or_insert_with(|| json!({}));
    }
}

impl CustomVersion {
    /// The `autoscaling/v1 Scale` of an object (the scale subresource).
    pub(crate) fn scale_of(&self, obj: &Value) -> Option<Value> {
        let sc = self.def.scale.as_ref()?;
        let int = |p: &str| get_path(obj, p).and_then(Value::as_i64).unwrap_or(0);
        let meta = &obj["metadata"];
        let mut m = json!({});
        for f in [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
        ] {
            if !meta[f].is_null() {
                m[f] = meta[f].clone();
            }
        }
        let mut status = json!({"replicas": int(&sc.status_replicas)});
        if let Some(sel) = sc
            .label_selector
            .as_deref()
            .and_then(|p| get_path(obj, p))
            .and_then(Value::as_str)
        {
            status["selector"] = json!(sel);
        }
        Some(json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": m,
            "spec": {"replicas": int(&sc.spec_replicas)},
            "status": status,
        }))
    }
}
