//! Field ownership (`metadata.managedFields`), as kube-apiserver keeps it
//! for server-side apply.
//!
//! Every entry names a manager, an operation (`Apply` for a server-side
//! apply, `Update` for a create, update or non-apply patch), the API
//! version, the subresource and the set of fields it owns (`fieldsV1`: a
//! tree of `f:field`, `k:{list keys}`, `v:value`, `i:index`, with `.` for
//! a node owned itself). What the store does with them:
//!
//! - an update (HTTP create, PUT, merge/strategic/JSON patch) gives its
//!   manager (`fieldManager`, else the client's `User-Agent` up to its
//!   first `/`) the fields it added or changed, and takes them from every
//!   other manager; fields it removed are nobody's. An object that exists
//!   without `managedFields` (created by the broker, or stripped by a
//!   client) stays without on update, as kube-apiserver's
//!   `skipNonApplied` leaves it;
//! - an apply sets its manager's fields to the configuration's, fails with
//!   409 `FieldManagerConflict` naming every field another manager owns
//!   and the apply changes (unless `force=true`, which takes them), and
//!   removes what the manager applied before, no longer applies and no
//!   other manager owns. The first apply to an object without
//!   `managedFields` gives what it holds to `before-first-apply`;
//! - lists are owned by their `x-kubernetes-list-type`: `map` item by item
//!   (`x-kubernetes-list-map-keys`), `set` value by value, `atomic` (the
//!   default) as a whole; `x-kubernetes-map-type: atomic` objects as a
//!   whole. Custom kinds take them from their CRD's schema, built-in kinds
//!   from the table below (the list types of kube-apiserver's OpenAPI for
//!   the fields real clients apply: pods, Deployments, Jobs, ConfigMaps,
//!   Leases, Events). A custom object's applied configuration is merged
//!   into the live one by the same types ([`merge_applied`]): its
//!   `metadata.finalizers` is a set, as every kind's.
//!
//! The ownership lives in the object (what is not written changes nobody's
//! fields: a denied, invalid or dry-run request), computed before the
//! admission webhooks are called, as kube-apiserver does. Writes by the
//! store's owner (the broker's Rust API), its garbage collector and quota
//! controller leave `managedFields` as they are.
//!
//! Not modelled: the cap of ten `Update` entries (`ancient-changes`), the
//! conversion of sets between versions of a custom kind (a set is read in
//! the version of the request).

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

use crate::error::{ApiError, StatusError};
use crate::schema::Schema;

/// One element of a field path, as `fieldsV1` writes it. The order is
/// structured-merge-diff's: fields, keys, values, indices.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Pe {
    /// `f:name`.
    Field(String),
    /// `k:{...}`: the key fields of a map-list item, as a JSON object with
    /// its keys sorted.
    Key(String),
    /// `v:value`: a set-list item, as JSON.
    Value(String),
    /// `i:N`: an item of a list without keys (not written by this store,
    /// read back from clients' entries).
    Index(usize),
}

impl Pe {
    fn parse(s: &str) -> Option<Pe> {
        let (kind, rest) = s.split_once(':')?;
        Some(match kind {
            "f" => Pe::Field(rest.to_string()),
            "k" => Pe::Key(canonical(&serde_json::from_str(rest).ok()?)),
            "v" => Pe::Value(canonical(&serde_json::from_str(rest).ok()?)),
            "i" => Pe::Index(rest.parse().ok()?),
            _ => return None,
        })
    }

    fn encode(&self) -> String {
        match self {
            Pe::Field(f) => format!("f:{f}"),
            Pe::Key(k) => format!("k:{k}"),
            Pe::Value(v) => format!("v:{v}"),
            Pe::Index(i) => format!("i:{i}"),
        }
    }

    /// As a conflict's path shows it: `.data.a`, `[name="main"]`,
    /// `[=value]`, `[0]`.
    fn display(&self) -> String {
        match self {
            Pe::Field(f) => format!(".{f}"),
            Pe::Key(k) => {
                let parts: Vec<String> = match serde_json::from_str::<Value>(k) {
                    Ok(Value::Object(m)) => {
                        let mut ks: Vec<(&String, &Value)> = m.iter().collect();
                        ks.sort_by(|a, b| a.0.cmp(b.0));
                        ks.iter().map(|(n, v)| format!("{n}={v}")).collect()
                    }
                    _ => vec![k.clone()],
                };
                format!("[{}]", parts.join(","))
            }
            Pe::Value(v) => format!("[={v}]"),
            Pe::Index(i) => format!("[{i}]"),
        }
    }
}

/// JSON with object keys sorted (whatever `serde_json`'s map order).
fn canonical(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut ks: Vec<&String> = m.keys().collect();
                ks.sort();
                let mut out = Map::new();
                for k in ks {
                    out.insert(k.clone(), sorted(&m[k]));
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            x => x.clone(),
        }
    }
    match v {
        Value::Object(m) => {
            // Written by hand so that the order holds with `preserve_order`
            // on or off.
            let mut ks: Vec<&String> = m.keys().collect();
            ks.sort();
            let parts: Vec<String> = ks
                .iter()
                .map(|k| format!("{}:{}", json!(k), canonical(&m[k.as_str()])))
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        x => sorted(x).to_string(),
    }
}

/// A set of field paths: a tree of path elements, each node owned itself
/// (`member`) or only through what is below it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Set {
    member: bool,
    children: BTreeMap<Pe, Set>,
}

impl Set {
    pub(crate) fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    fn child_mut(&mut self, pe: Pe) -> &mut Set {
        self.children.entry(pe).or_default()
    }

    /// Adds what `other` holds.
    pub(crate) fn union_with(&mut self, other: &Set) {
        self.member |= other.member;
        for (pe, c) in &other.children {
            self.child_mut(pe.clone()).union_with(c);
        }
    }

    /// What `self` holds and `other` does not.
    pub(crate) fn difference(&self, other: &Set) -> Set {
        let mut out = Set {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (pe, c) in &self.children {
            let d = match other.children.get(pe) {
                Some(o) => c.difference(o),
                None => c.clone(),
            };
            if !d.is_empty() {
                out.children.insert(pe.clone(), d);
            }
        }
        out
    }

    /// What both hold.
    pub(crate) fn intersection(&self, other: &Set) -> Set {
        let mut out = Set {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (pe, c) in &self.children {
            if let Some(o) = other.children.get(pe) {
                let i = c.intersection(o);
                if !i.is_empty() {
                    out.children.insert(pe.clone(), i);
                }
            }
        }
        out
    }

    /// The member paths, in order, each as a conflict shows it.
    pub(crate) fn paths(&self) -> Vec<String> {
        fn walk(s: &Set, prefix: &str, out: &mut Vec<String>) {
            if s.member {
                out.push(prefix.to_string());
            }
            for (pe, c) in &s.children {
                walk(c, &format!("{prefix}{}", pe.display()), out);
            }
        }
        let mut out = Vec::new();
        walk(self, "", &mut out);
        out
    }

    /// `fieldsV1`.
    pub(crate) fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), json!({}));
        }
        for (pe, c) in &self.children {
            m.insert(pe.encode(), c.to_fields_v1());
        }
        Value::Object(m)
    }

    /// Reads `fieldsV1`; `None` if it is not one.
    pub(crate) fn from_fields_v1(v: &Value) -> Option<Set> {
        let m = v.as_object()?;
        let mut s = Set::default();
        for (k, c) in m {
            if k == "." {
                s.member = true;
                continue;
            }
            let mut child = Set::from_fields_v1(c)?;
            if child.children.is_empty() {
                child.member = true;
            }
            s.children.insert(Pe::parse(k)?, child);
        }
        Some(s)
    }

    /// Takes out the fields no manager owns: the object's identity and
    /// the server's own metadata (kube-apiserver's `stripMeta`).
    fn strip_meta(&mut self) {
        for f in ["apiVersion", "kind"] {
            self.children.remove(&Pe::Field(f.into()));
        }
        let key = Pe::Field("metadata".into());
        if let Some(m) = self.children.get_mut(&key) {
            m.member = false;
            for f in [
                "name",
                "namespace",
                "creationTimestamp",
                "selfLink",
                "uid",
                "clusterName",
                "generation",
                "managedFields",
                "resourceVersion",
            ] {
                m.children.remove(&Pe::Field(f.into()));
            }
            if m.is_empty() {
                self.children.remove(&key);
            }
        }
    }
}

/// What a node of an object is, for ownership: a custom kind's schema
/// node, or a built-in kind's field (by name, as the table below knows
/// them).
#[derive(Clone, Copy)]
pub(crate) struct Ty<'a> {
    custom: bool,
    schema: Option<&'a Schema>,
    /// The field holding this node (for a list's item: the list's).
    field: &'a str,
    item: bool,
    root: bool,
}

/// How a list is owned.
enum ListKind {
    Atomic,
    Set,
    Map(Vec<String>),
}

/// Built-in maps whose keys are data (`map[string]T`), not fields.
const BUILTIN_MAPS: &[&str] = &[
    "labels",
    "annotations",
    "data",
    "binaryData",
    "stringData",
    "nodeSelector",
    "matchLabels",
    "requests",
    "limits",
    "capacity",
    "allocatable",
    "overhead",
    "hard",
    "used",
];

impl<'a> Ty<'a> {
    /// The root of an object of a custom kind (`schema`) or a built-in one.
    pub(crate) fn root(schema: Option<&'a Schema>, custom: bool) -> Ty<'a> {
        Ty {
            custom,
            schema,
            field: "",
            item: false,
            root: true,
        }
    }

    fn child(self, k: &'a str) -> Ty<'a> {
        if self.root && k == "metadata" {
            // ObjectMeta, whatever the kind.
            return Ty {
                custom: false,
                schema: None,
                field: k,
                item: false,
                root: false,
            };
        }
        Ty {
            custom: self.custom,
            schema: self.schema.and_then(|s| s.field(k)),
            field: k,
            item: false,
            root: false,
        }
    }

    fn item(self) -> Ty<'a> {
        Ty {
            custom: self.custom,
            schema: self.schema.and_then(Schema::item),
            field: self.field,
            item: true,
            root: false,
        }
    }

    fn list_kind(self, items: &[Value]) -> ListKind {
        if self.custom {
            return match self.schema {
                Some(s) => match s.list_map_keys() {
                    Some(ks) => ListKind::Map(ks.to_vec()),
                    None if s.is_set_list() => ListKind::Set,
                    None => ListKind::Atomic,
                },
                None => ListKind::Atomic,
            };
        }
        let keys = |ks: &[&str]| ListKind::Map(ks.iter().map(|k| k.to_string()).collect());
        match self.field {
            "finalizers" => ListKind::Set,
            "ports" if items.iter().any(|i| i.get("containerPort").is_some()) => {
                keys(&["containerPort", "protocol"])
            }
            "ports" if items.iter().any(|i| i.get("port").is_some()) => keys(&["port", "protocol"]),
            "ports" => ListKind::Atomic,
            f => match crate::patch::merge_key(f) {
                Some(k) => keys(&[k]),
                None => ListKind::Atomic,
            },
        }
    }

    fn atomic_map(self, m: &Map<String, Value>) -> bool {
        if self.custom {
            return self.schema.is_some_and(Schema::is_atomic_map);
        }
        // LabelSelectors and owner references are owned as a whole.
        (!self.item && (m.contains_key("matchLabels") || m.contains_key("matchExpressions")))
            || (self.item && self.field == "ownerReferences")
    }

    /// Whether key `k` of this object is a field of its type (owned
    /// through what is below it) rather than a key of a map (owned itself).
    fn declares(self, k: &str) -> bool {
        if self.custom {
            return self.root || self.schema.is_some_and(|s| s.declares(k));
        }
        !BUILTIN_MAPS.contains(&self.field) || self.root
    }
}

/// The key of a map-list item: its key fields (a missing `protocol` is
/// the API's default, `TCP`).
fn item_key(item: &Value, keys: &[String]) -> Pe {
    let mut m = Map::new();
    for k in keys {
        let v = match item.get(k) {
            Some(v) => v.clone(),
            None if k == "protocol" => json!("TCP"),
            None => continue,
        };
        m.insert(k.clone(), v);
    }
    Pe::Key(canonical(&Value::Object(m)))
}

fn item_pe(item: &Value, kind: &ListKind, index: usize) -> Pe {
    match kind {
        ListKind::Map(ks) => item_key(item, ks),
        ListKind::Set => Pe::Value(canonical(item)),
        ListKind::Atomic => Pe::Index(index),
    }
}

/// The fields an applied configuration sets (structured-merge-diff's
/// `ToFieldSet`).
pub(crate) fn to_set(v: &Value, ty: Ty<'_>) -> Set {
    let mut out = Set::default();
    to_set_into(v, ty, &mut out);
    out.strip_meta();
    out
}

fn to_set_into(v: &Value, ty: Ty<'_>, out: &mut Set) {
    match v {
        Value::Object(m) => {
            if ty.atomic_map(m) {
                out.member = true;
                return;
            }
            for (k, cv) in m {
                let mut c = Set::default();
                to_set_into(cv, ty.child(k), &mut c);
                if cv.is_null() || cv.as_object().is_some_and(Map::is_empty) || !ty.declares(k) {
                    c.member = true;
                }
                if !c.is_empty() {
                    out.children.insert(Pe::Field(k.clone()), c);
                }
            }
        }
        Value::Array(items) => match ty.list_kind(items) {
            ListKind::Atomic => out.member = true,
            kind => {
                for (i, it) in items.iter().enumerate() {
                    let mut c = Set::default();
                    if let ListKind::Map(_) = kind {
                        to_set_into(it, ty.item(), &mut c);
                    }
                    c.member = true;
                    out.children.insert(item_pe(it, &kind, i), c);
                }
            }
        },
        _ => out.member = true,
    }
}

/// What changed from one object to the next (structured-merge-diff's
/// `Compare`): added paths (every node of a new subtree), modified leaves,
/// removed paths.
#[derive(Default, Debug)]
pub(crate) struct Comparison {
    pub added: Set,
    pub modified: Set,
    pub removed: Set,
}

pub(crate) fn compare(old: &Value, new: &Value, ty: Ty<'_>) -> Comparison {
    let mut c = Comparison::default();
    compare_into(Some(old), Some(new), ty, &mut c);
    for s in [&mut c.added, &mut c.modified, &mut c.removed] {
        s.strip_meta();
    }
    c
}

/// Marks every node of `v` (a subtree added or removed) in `out`.
fn all_nodes(v: &Value, ty: Ty<'_>, out: &mut Set) {
    out.member = true;
    match v {
        Value::Object(m) if !ty.atomic_map(m) => {
            for (k, cv) in m {
                all_nodes(cv, ty.child(k), out.child_mut(Pe::Field(k.clone())));
            }
        }
        Value::Array(items) if !items.is_empty() => match ty.list_kind(items) {
            ListKind::Atomic => {}
            kind => {
                for (i, it) in items.iter().enumerate() {
                    let pe = item_pe(it, &kind, i);
                    all_nodes(it, ty.item(), out.child_mut(pe));
                }
            }
        },
        _ => {}
    }
}

fn compare_into(l: Option<&Value>, r: Option<&Value>, ty: Ty<'_>, c: &mut Comparison) {
    fn sub(c: &mut Comparison, pe: &Pe) -> Comparison {
        Comparison {
            added: c.added.children.remove(pe).unwrap_or_default(),
            modified: c.modified.children.remove(pe).unwrap_or_default(),
            removed: c.removed.children.remove(pe).unwrap_or_default(),
        }
    }
    fn put(c: &mut Comparison, pe: Pe, s: Comparison) {
        for (to, from) in [
            (&mut c.added, s.added),
            (&mut c.modified, s.modified),
            (&mut c.removed, s.removed),
        ] {
            if !from.is_empty() {
                to.children.insert(pe.clone(), from);
            }
        }
    }
    match (l, r) {
        (None, None) => {}
        (None, Some(r)) => all_nodes(r, ty, &mut c.added),
        (Some(l), None) => all_nodes(l, ty, &mut c.removed),
        (Some(Value::Object(lm)), Some(Value::Object(rm)))
            if !ty.atomic_map(lm) && !ty.atomic_map(rm) =>
        {
            let mut keys: Vec<&String> = lm.keys().chain(rm.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let pe = Pe::Field(k.clone());
                let mut s = sub(c, &pe);
                compare_into(lm.get(k), rm.get(k), ty.child(k), &mut s);
                put(c, pe, s);
            }
        }
        (Some(Value::Array(la)), Some(Value::Array(ra))) if !(la.is_empty() && ra.is_empty()) => {
            let all: Vec<Value> = la.iter().chain(ra.iter()).cloned().collect();
            let kind = ty.list_kind(&all);
            if let ListKind::Atomic = kind {
                if la != ra {
                    c.modified.member = true;
                }
                return;
            }
            let (li, ri) = (index_items(la, &kind), index_items(ra, &kind));
            let mut pes: Vec<&Pe> = li.keys().chain(ri.keys()).collect();
            pes.sort();
            pes.dedup();
            for pe in pes {
                let lv = li.get(pe).map(Vec::as_slice).unwrap_or(&[]);
                let rv = ri.get(pe).map(Vec::as_slice).unwrap_or(&[]);
                if lv.len() <= 1 && rv.len() <= 1 {
                    let mut s = sub(c, pe);
                    compare_into(lv.first().copied(), rv.first().copied(), ty.item(), &mut s);
                    put(c, pe.clone(), s);
                } else if lv != rv {
                    // Duplicated keys: the items are compared as a whole.
                    c.modified.child_mut(pe.clone()).member = true;
                }
            }
        }
        (Some(l), Some(r)) => {
            if l != r {
                c.modified.member = true;
            }
        }
    }
}

/// A list's items by their path element.
fn index_items<'v>(a: &'v [Value], kind: &ListKind) -> BTreeMap<Pe, Vec<&'v Value>> {
    let mut m: BTreeMap<Pe, Vec<&Value>> = BTreeMap::new();
    for (i, it) in a.iter().enumerate() {
        m.entry(item_pe(it, kind, i)).or_default().push(it);
    }
    m
}

/// An applied configuration merged into the live object, as
/// structured-merge-diff merges them (before ownership removes what the
/// manager no longer applies): objects field by field (a null removes the
/// field), `x-kubernetes-map-type: atomic` objects replaced, lists by
/// their kind: `map` lists item by item on their keys and `set` lists
/// value by value (an item the configuration does not name stays, as
/// another manager's would, and the order is structured-merge-diff's:
/// the configuration's, each live item it does not name kept where it
/// was), atomic lists and scalars replaced. The root's `metadata` is
/// ObjectMeta whatever the kind, so a custom object's `finalizers` are a
/// set and its `ownerReferences` a map by `uid`, as on a real server.
pub(crate) fn merge_applied(target: &mut Value, config: &Value, ty: Ty<'_>) {
    match config {
        Value::Object(c) if !ty.atomic_map(c) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            let t = target.as_object_mut().expect("an object");
            for (k, v) in c {
                if v.is_null() {
                    t.remove(k);
                    continue;
                }
                let slot = t.entry(k.clone()).or_insert(Value::Null);
                merge_applied(slot, v, ty.child(k));
            }
        }
        Value::Array(rhs) => {
            let Some(lhs) = target.as_array() else {
                *target = config.clone();
                return;
            };
            let all: Vec<Value> = lhs.iter().chain(rhs).cloned().collect();
            let kind = ty.list_kind(&all);
            if let ListKind::Atomic = kind {
                *target = config.clone();
                return;
            }
            *target = Value::Array(merge_list_items(lhs, rhs, &kind, ty.item()));
        }
        _ => *target = config.clone(),
    }
}

/// The items of a `map` or `set` list merged, in structured-merge-diff's
/// order (`visitListItems`): walking both lists, an item of both is merged
/// where the configuration has it, an item only live stays where it was,
/// an item only applied goes where the configuration puts it.
fn merge_list_items(lhs: &[Value], rhs: &[Value], kind: &ListKind, item: Ty<'_>) -> Vec<Value> {
    let lpes: Vec<Pe> = lhs
        .iter()
        .enumerate()
        .map(|(i, v)| item_pe(v, kind, i))
        .collect();
    let rpes: Vec<Pe> = rhs
        .iter()
        .enumerate()
        .map(|(i, v)| item_pe(v, kind, i))
        .collect();
    let mut in_lhs: BTreeMap<&Pe, usize> = BTreeMap::new();
    for (i, pe) in lpes.iter().enumerate() {
        in_lhs.entry(pe).or_insert(i);
    }
    let in_rhs: std::collections::BTreeSet<&Pe> = rpes.iter().collect();
    // The items of both, in the configuration's order.
    let mut shared = rpes.iter().filter(|pe| in_lhs.contains_key(pe));
    let mut next_shared = shared.next();
    let mut merged: std::collections::BTreeSet<&Pe> = std::collections::BTreeSet::new();
    let merge_item = |l: Option<&Value>, r: &Value| match l {
        Some(l) => {
            let mut out = l.clone();
            merge_applied(&mut out, r, item);
            out
        }
        None => r.clone(),
    };
    let mut out = Vec::with_capacity(lhs.len().max(rhs.len()));
    let (mut li, mut ri) = (0, 0);
    while li < lpes.len() || ri < rpes.len() {
        if li < lpes.len() && ri < rpes.len() {
            let pe = &lpes[li];
            if *pe == rpes[ri] {
                merged.insert(pe);
                out.push(merge_item(Some(&lhs[in_lhs[pe]]), &rhs[ri]));
                li += 1;
                ri += 1;
                next_shared = shared.next();
                continue;
            }
            if in_rhs.contains(pe) && next_shared.is_some_and(|n| n != pe) {
                // Shared, but not the one due now: it goes where the
                // configuration has it.
                li += 1;
                continue;
            }
        }
        if li < lpes.len() {
            let pe = &lpes[li];
            if !in_rhs.contains(pe) {
                out.push(lhs[li].clone());
                li += 1;
                continue;
            } else if merged.contains(pe) {
                li += 1;
            }
        }
        if ri < rpes.len() {
            let pe = &rpes[ri];
            merged.insert(pe);
            out.push(merge_item(in_lhs.get(pe).map(|&i| &lhs[i]), &rhs[ri]));
            ri += 1;
            if next_shared == Some(pe) {
                next_shared = shared.next();
            }
        }
    }
    out
}

/// Removes from `obj` what `last` (a manager's previous applied set)
/// holds and nobody owns now (`owned`: every manager's set, the new apply
/// included); a map or list emptied so goes too.
pub(crate) fn prune(obj: &mut Value, last: &Set, owned: &Set, ty: Ty<'_>) {
    prune_node(obj, last, Some(owned), ty);
}

/// Prunes below `v`; whether it emptied it.
fn prune_node(v: &mut Value, last: &Set, owned: Option<&Set>, ty: Ty<'_>) -> bool {
    let mut emptied = false;
    match v {
        Value::Object(m) => {
            for (pe, lc) in &last.children {
                let Pe::Field(k) = pe else { continue };
                let oc = owned.and_then(|o| o.children.get(pe));
                let Some(cv) = m.get_mut(k.as_str()) else {
                    continue;
                };
                // Owning a node keeps it, not what is below it.
                let gone = if oc.is_none() && lc.member {
                    true
                } else {
                    prune_node(cv, lc, oc, ty.child(k)) && !oc.is_some_and(|o| o.member)
                };
                if gone {
                    m.remove(k.as_str());
                    emptied = true;
                }
            }
            emptied && m.is_empty()
        }
        Value::Array(items) => {
            let kind = ty.list_kind(items);
            if let ListKind::Atomic = kind {
                return false;
            }
            let mut keep = Vec::with_capacity(items.len());
            for (i, mut it) in std::mem::take(items).into_iter().enumerate() {
                let pe = item_pe(&it, &kind, i);
                let gone = match last.children.get(&pe) {
                    None => false,
                    Some(lc) => {
                        let oc = owned.and_then(|o| o.children.get(&pe));
                        if oc.is_none() && lc.member {
                            true
                        } else {
                            prune_node(&mut it, lc, oc, ty.item()) && !oc.is_some_and(|o| o.member)
                        }
                    }
                };
                if gone {
                    emptied = true;
                } else {
                    keep.push(it);
                }
            }
            *items = keep;
            emptied && items.is_empty()
        }
        _ => false,
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub manager: String,
    /// `Apply` or `Update`.
    pub apply: bool,
    pub api_version: String,
    pub time: Option<String>,
    /// `""` for the main resource.
    pub subresource: String,
    pub set: Set,
}

impl Entry {
    /// Whether `self` is the manager `manager` with this operation
    /// (structured-merge-diff's manager identifier: the API version counts
    /// for updates only).
    fn is(&self, manager: &str, apply: bool, api_version: &str, subresource: &str) -> bool {
        self.manager == manager
            && self.apply == apply
            && self.subresource == subresource
            && (apply || self.api_version == api_version)
    }

    /// As a conflict names it: `"alice"`, `"carol" using v1`, with
    /// ` with subresource "status"`.
    fn describe(&self) -> String {
        let mut s = crate::error::go_quote(&self.manager);
        if !self.subresource.is_empty() {
            s = format!(
                "{s} with subresource {}",
                crate::error::go_quote(&self.subresource)
            );
        }
        if !self.apply {
            s = format!("{s} using {}", self.api_version);
        }
        s
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert(
            "operation".into(),
            json!(if self.apply { "Apply" } else { "Update" }),
        );
        m.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            m.insert("time".into(), json!(t));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.set.to_fields_v1());
        if !self.subresource.is_empty() {
            m.insert("subresource".into(), json!(self.subresource));
        }
        Value::Object(m)
    }

    fn from_value(v: &Value) -> Option<Entry> {
        let apply = match v.get("operation")?.as_str()? {
            "Apply" => true,
            "Update" => false,
            _ => return None,
        };
        let api_version = v.get("apiVersion")?.as_str()?.to_string();
        if api_version.is_empty() || v.get("fieldsType")?.as_str()? != "FieldsV1" {
            return None;
        }
        let set = match v.get("fieldsV1") {
            Some(f) => Set::from_fields_v1(f)?,
            None => Set::default(),
        };
        Some(Entry {
            manager: v.get("manager").and_then(Value::as_str)?.to_string(),
            apply,
            api_version,
            time: v.get("time").and_then(Value::as_str).map(str::to_string),
            subresource: v
                .get("subresource")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            set,
        })
    }
}

/// The entries of an object's `metadata.managedFields` (none if absent or
/// not valid).
pub(crate) fn decode(obj: &Value) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .and_then(|es| es.iter().map(Entry::from_value).collect::<Option<Vec<_>>>())
        .unwrap_or_default()
}

/// Writes `entries` as `obj`'s `metadata.managedFields`, in
/// kube-apiserver's order (operation, time, manager, version,
/// subresource); none removes the field.
pub(crate) fn encode(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.set.is_empty());
    let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if entries.is_empty() {
        m.remove("managedFields");
        return;
    }
    entries.sort_by(|p, q| {
        (
            !p.apply,
            &p.time,
            &p.manager,
            &p.api_version,
            &p.subresource,
        )
            .cmp(&(
                !q.apply,
                &q.time,
                &q.manager,
                &q.api_version,
                &q.subresource,
            ))
    });
    m.insert(
        "managedFields".into(),
        Value::Array(entries.iter().map(Entry::to_value).collect()),
    );
}

/// What a write carries in `metadata.managedFields`: nothing (`Absent`:
/// the stored ones stay), the reset `[{}]`, or entries to start from.
pub(crate) enum Incoming {
    Absent,
    Reset,
    Entries(Vec<Entry>),
}

/// Takes a written object's `metadata.managedFields` out of it.
pub(crate) fn take_incoming(obj: &mut Value) -> Incoming {
    let v = obj
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .and_then(|m| m.remove("managedFields"));
    match v {
        Some(Value::Array(es)) if !es.is_empty() => {
            match es.iter().map(Entry::from_value).collect::<Option<Vec<_>>>() {
                Some(es) => Incoming::Entries(es),
                // `[{}]` (or anything not an entry) clears them.
                None => Incoming::Reset,
            }
        }
        _ => Incoming::Absent,
    }
}

/// Who writes, and how: `manager` (the request's `fieldManager`, or its
/// client's `User-Agent` up to the first `/`), the served `api_version`,
/// the `subresource` (`""` for the main resource), `now` (RFC 3339, to the
/// second).
pub(crate) struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    pub subresource: &'a str,
    pub now: &'a str,
}

/// The ownership after an update (create, PUT, non-apply patch) of `old`
/// (`None` for a create) into `new` by `w`, written into `new`.
/// `incoming` is what the request carried; an existing object without
/// entries (and none given) stays without.
pub(crate) fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    incoming: Incoming,
    w: &Writer<'_>,
    ty: Ty<'_>,
) {
    let mut entries = match incoming {
        Incoming::Entries(es) => es,
        Incoming::Reset => {
            encode(new, Vec::new());
            return;
        }
        Incoming::Absent => old.map(decode).unwrap_or_default(),
    };
    if old.is_some() && entries.is_empty() {
        encode(new, entries);
        return;
    }
    let empty = json!({});
    let cmp = compare(old.unwrap_or(&empty), new, ty);
    let mut changed = cmp.modified;
    changed.union_with(&cmp.added);
    for e in entries.iter_mut() {
        e.set = e.set.difference(&changed).difference(&cmp.removed);
    }
    let pos = entries
        .iter()
        .position(|e| e.is(w.manager, false, w.api_version, w.subresource));
    let mine = match pos {
        Some(i) => &mut entries[i],
        None => {
            entries.push(Entry {
                manager: w.manager.to_string(),
                apply: false,
                api_version: w.api_version.to_string(),
                time: None,
                subresource: w.subresource.to_string(),
                set: Set::default(),
            });
            entries.last_mut().expect("just pushed")
        }
    };
    if !changed.is_empty() {
        mine.time = Some(w.now.to_string());
    }
    mine.set.union_with(&changed);
    encode(new, entries);
}

/// What an apply makes of an object: `merged` is `live` (`None` for a
/// create) with `config` merged in; on success it has lost what the
/// manager applied before and no longer applies (and nobody else owns),
/// and carries the new ownership. `status_apart`: the kind has a status
/// subresource, so an apply to the main resource owns no status and one
/// to `status` only status.
#[allow(clippy::too_many_arguments)]
pub(crate) fn record_apply(
    live: Option<&Value>,
    merged: &mut Value,
    config: &Value,
    force: bool,
    status_apart: bool,
    w: &Writer<'_>,
    ty: Ty<'_>,
) -> Result<(), ApiError> {
    let empty = json!({});
    let live_v = live.unwrap_or(&empty);
    let mut entries = decode(live_v);
    if live.is_some() && entries.is_empty() {
        // What the object holds is `before-first-apply`'s.
        let set = {
            let c = compare(&empty, live_v, ty);
            let mut s = c.added;
            s.union_with(&c.modified);
            s
        };
        entries.push(Entry {
            manager: "before-first-apply".into(),
            apply: false,
            api_version: w.api_version.to_string(),
            time: None,
            subresource: String::new(),
            set,
        });
    }
    let mut set = to_set(config, ty);
    if status_apart {
        let status = Pe::Field("status".into());
        if w.subresource == "status" {
            set.children.retain(|pe, _| *pe == status);
        } else {
            set.children.remove(&status);
        }
    }
    let pos = entries
        .iter()
        .position(|e| e.is(w.manager, true, w.api_version, w.subresource));
    let (last, time) = match pos {
        Some(i) => {
            let e = entries.remove(i);
            (e.set, e.time)
        }
        None => (Set::default(), None),
    };
    if !last.is_empty() {
        let mut owned = set.clone();
        for e in &entries {
            owned.union_with(&e.set);
        }
        prune(merged, &last, &owned, ty);
    }
    let cmp = compare(live_v, merged, ty);
    let mut changed = cmp.modified;
    changed.union_with(&cmp.added);
    let mut conflicts: Vec<(String, Set)> = Vec::new();
    for e in &entries {
        let c = e.set.intersection(&changed);
        if !c.is_empty() {
            conflicts.push((e.describe(), c));
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(conflicts));
    }
    for e in entries.iter_mut() {
        e.set = e.set.difference(&changed).difference(&cmp.removed);
    }
    let written = {
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("managedFields");
            }
            v
        };
        strip(live_v) != strip(merged)
    };
    entries.push(Entry {
        manager: w.manager.to_string(),
        apply: true,
        api_version: w.api_version.to_string(),
        // Dated when the apply changes the object, as kube-apiserver's
        // `managedFieldsUpdater` does.
        time: if written {
            Some(w.now.to_string())
        } else {
            time
        },
        subresource: w.subresource.to_string(),
        set,
    });
    encode(merged, entries);
    Ok(())
}

/// kube-apiserver's 409 for an apply's conflicts: one cause per field,
/// the message listing them by manager.
fn conflict_error(mut conflicts: Vec<(String, Set)>) -> ApiError {
    conflicts.sort_by(|a, b| a.0.cmp(&b.0));
    let mut causes = Vec::new();
    let mut lines = Vec::new();
    let mut total = 0;
    for (who, set) in &conflicts {
        let paths = set.paths();
        total += paths.len();
        lines.push(format!("conflicts with {who}:"));
        for p in &paths {
            causes.push(json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with {who}"),
                "field": p,
            }));
            lines.push(format!("- {p}"));
        }
    }
    let message = if total == 1 {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            conflicts[0].0,
            conflicts[0].1.paths()[0]
        )
    } else {
        format!("Apply failed with {total} conflicts: {}", lines.join("\n"))
    };
    ApiError::Status(Box::new(StatusError {
        code: 409,
        reason: "Conflict".into(),
        message,
        details: Some(json!({"causes": causes})),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin() -> Ty<'static> {
        Ty::root(None, false)
    }

    fn w<'a>(manager: &'a str) -> Writer<'a> {
        Writer {
            manager,
            api_version: "v1",
            subresource: "",
            now: "2026-01-01T00:00:00Z",
        }
    }

    #[test]
    fn an_applied_configuration_owns_its_leaves_and_keyed_items() {
        let config = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "i",
                "ports": [{"containerPort": 80}]}],
                "selector": {"matchLabels": {"x": "y"}}}});
        let s = to_set(&config, builtin());
        assert_eq!(
            s.to_fields_v1(),
            json!({"f:metadata": {"f:labels": {"f:a": {}}},
                "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {},
                    "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}},
                    "f:selector": {}}})
        );
        assert_eq!(Set::from_fields_v1(&s.to_fields_v1()).unwrap(), s);
        assert_eq!(
            s.paths()[0],
            ".metadata.labels.a",
            "paths as conflicts show them"
        );
        assert!(s.paths().contains(
            &".spec.containers[name=\"c\"].ports[containerPort=80,protocol=\"TCP\"]".to_string()
        ));
    }

    #[test]
    fn an_update_owns_what_it_added_or_changed_and_takes_it_from_others() {
        let old = json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
        let mut created = old.clone();
        record_update(None, &mut created, Incoming::Absent, &w("maker"), builtin());
        assert_eq!(
            created["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {".": {}, "f:a": {}, "f:b": {}}})
        );
        let mut new = json!({"metadata": {"name": "c"}, "data": {"a": "9", "b": "2", "c": "3"}});
        record_update(
            Some(&created),
            &mut new,
            Incoming::Absent,
            &w("other"),
            builtin(),
        );
        let es = decode(&new);
        assert_eq!(es.len(), 2);
        assert_eq!(
            es.iter()
                .find(|e| e.manager == "maker")
                .unwrap()
                .set
                .to_fields_v1(),
            json!({"f:data": {".": {}, "f:b": {}}})
        );
        assert_eq!(
            es.iter()
                .find(|e| e.manager == "other")
                .unwrap()
                .set
                .to_fields_v1(),
            json!({"f:data": {"f:a": {}, "f:c": {}}})
        );
        // An object the broker made (no entries) stays without.
        let mut new2 = new.clone();
        record_update(Some(&old), &mut new2, Incoming::Absent, &w("x"), builtin());
        assert!(new2["metadata"].get("managedFields").is_none());
    }

    #[test]
    fn apply_conflicts_force_and_removal() {
        let ty = builtin();
        let apply = |live: Option<&Value>, config: Value, who: &str, force: bool| {
            let mut merged = match live {
                Some(l) => crate::patch::apply_merge(l, &config),
                None => config.clone(),
            };
            record_apply(live, &mut merged, &config, force, false, &w(who), ty).map(|()| merged)
        };
        let v1 = apply(
            None,
            json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}}),
            "alice",
            false,
        )
        .unwrap();
        // The same value: shared, no conflict.
        let v2 = apply(
            Some(&v1),
            json!({"metadata": {"name": "c"}, "data": {"a": "1"}}),
            "bob",
            false,
        )
        .unwrap();
        assert_eq!(decode(&v2).len(), 2);
        // Another value: a conflict with the owner.
        let e = apply(
            Some(&v2),
            json!({"metadata": {"name": "c"}, "data": {"b": "x"}}),
            "bob",
            false,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "Apply failed with 1 conflict: conflict with \"alice\": .data.b"
        );
        let v3 = apply(
            Some(&v2),
            json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "x"}}),
            "bob",
            true,
        )
        .unwrap();
        // alice stops applying a (bob still owns it) and b (bob took it): both stay.
        let v4 = apply(
            Some(&v3),
            json!({"metadata": {"name": "c"}, "data": {"c": "3"}}),
            "alice",
            false,
        )
        .unwrap();
        assert_eq!(v4["data"], json!({"a": "1", "b": "x", "c": "3"}));
        // bob stops applying b: his alone, it goes.
        let v5 = apply(
            Some(&v4),
            json!({"metadata": {"name": "c"}, "data": {"a": "1"}}),
            "bob",
            false,
        )
        .unwrap();
        assert_eq!(v5["data"], json!({"a": "1", "c": "3"}));
    }

    /// e2e "ServerSideApply should work for CRDs": a custom object's
    /// `metadata.finalizers` is a set, as is any list its schema marks
    /// `x-kubernetes-list-type: set`; an apply keeps the values other
    /// managers own, and drops only its own.
    #[test]
    fn a_custom_objects_sets_keep_every_managers_values() {
        let schema = Schema::parse(
            &json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
                "tags": {"type": "array", "x-kubernetes-list-type": "set",
                         "items": {"type": "string"}},
                "order": {"type": "array", "items": {"type": "string"}}}}}}),
            "",
        )
        .unwrap();
        let ty = Ty::root(Some(&schema), true);
        let apply = |live: Option<&Value>, config: Value, who: &str| {
            let mut merged = match live {
                Some(l) => {
                    let mut m = l.clone();
                    merge_applied(&mut m, &config, ty);
                    m
                }
                None => config.clone(),
            };
            record_apply(live, &mut merged, &config, false, false, &w(who), ty).map(|()| merged)
        };
        let update = |old: &Value, new: Value, who: &str| {
            let mut new = new;
            record_update(Some(old), &mut new, Incoming::Absent, &w(who), ty);
            new
        };
        let config = json!({"metadata": {"name": "mytest", "finalizers": ["test-finalizer"]},
                            "spec": {"tags": ["a"], "order": ["x"]}});
        let v1 = apply(None, config.clone(), "apply_test").unwrap();
        // Another manager adds a finalizer and a tag (a merge patch).
        let mut v2 = v1.clone();
        v2["metadata"]["finalizers"] = json!(["test-finalizer", "another-one"]);
        v2["spec"]["tags"] = json!(["a", "b"]);
        let v2 = update(&v1, v2, "kubectl");
        // The same configuration again: both finalizers and both tags stay.
        let v3 = apply(Some(&v2), config.clone(), "apply_test").unwrap();
        assert_eq!(
            v3["metadata"]["finalizers"],
            json!(["test-finalizer", "another-one"])
        );
        assert_eq!(v3["spec"]["tags"], json!(["a", "b"]));
        // The applier drops its finalizer and tag: the other manager's stay.
        let v4 = apply(
            Some(&v3),
            json!({"metadata": {"name": "mytest"}, "spec": {"order": ["x"]}}),
            "apply_test",
        )
        .unwrap();
        assert_eq!(v4["metadata"]["finalizers"], json!(["another-one"]));
        assert_eq!(v4["spec"]["tags"], json!(["b"]));
        let owner = |v: &Value, m: &str| {
            decode(v)
                .into_iter()
                .find(|e| e.manager == m)
                .map(|e| e.set.to_fields_v1())
        };
        assert_eq!(
            owner(&v4, "kubectl"),
            Some(
                json!({"f:metadata": {"f:finalizers": {"v:\"another-one\"": {}}},
                        "f:spec": {"f:tags": {"v:\"b\"": {}}}})
            )
        );
        // A list without a type is atomic: applied, it replaces.
        let mut v5 = v4.clone();
        v5["spec"]["order"] = json!(["x", "y"]);
        let v5 = update(&v4, v5, "kubectl");
        let e = apply(
            Some(&v5),
            json!({"metadata": {"name": "mytest"}, "spec": {"order": ["z"]}}),
            "apply_test",
        )
        .unwrap_err();
        assert!(e.to_string().contains(".spec.order"), "{e}");
    }

    /// structured-merge-diff's order: the configuration's, each live item
    /// it does not name kept where it was.
    #[test]
    fn merged_set_items_follow_structured_merge_diffs_order() {
        let ty = builtin().child("metadata").child("finalizers");
        let merge = |l: Value, r: Value| {
            let mut t = l;
            merge_applied(&mut t, &r, ty);
            t
        };
        assert_eq!(merge(json!(["a", "b"]), json!(["a"])), json!(["a", "b"]));
        assert_eq!(merge(json!(["a"]), json!(["b"])), json!(["a", "b"]));
        assert_eq!(
            merge(json!(["a", "b"]), json!(["c", "a"])),
            json!(["c", "a", "b"])
        );
        assert_eq!(
            merge(json!(["a", "b", "c"]), json!(["c", "a"])),
            json!(["b", "c", "a"])
        );
    }

    #[test]
    fn conflicts_with_several_managers_are_listed_by_manager() {
        let e = conflict_error(vec![
            (
                "\"b\"".into(),
                Set::from_fields_v1(&json!({"f:x": {}})).unwrap(),
            ),
            (
                "\"a\" using v1".into(),
                Set::from_fields_v1(&json!({"f:y": {}, "f:z": {}})).unwrap(),
            ),
        ]);
        assert_eq!(
            e.to_string(),
            "Apply failed with 3 conflicts: conflicts with \"a\" using v1:\n- .y\n- .z\nconflicts with \"b\":\n- .x"
        );
    }
}
