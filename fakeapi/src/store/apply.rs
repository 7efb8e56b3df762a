//! What server-side apply removes: a field its manager applied before,
//! leaves out of its new configuration, and no other manager applies.
//!
//! kube-apiserver tracks every field's owners (`managedFields`); an apply
//! removes the fields its manager owned alone and no longer sets. The store
//! keeps, per object, the last configuration each manager applied (per
//! subresource, as `managedFields` entries are), and on an apply removes
//! what the previous one set, the new one leaves out and no other manager's
//! configuration names, if the object still holds what was applied there.
//! A field another client has changed since (an update, a merge patch) is
//! kept: on a real server that client then owns it.
//!
//! Kueue clears a Workload's admission this way: its `kueue-admission`
//! manager applies the status without `admission`; kept, the stale
//! admission made Kueue admit and evict the Workload in a loop.
//!
//! Not modelled: ownership of fields written by updates (`Update`
//! entries), conflicts between managers (an apply always forces), and
//! `managedFields` in the objects served.

use serde_json::{Map, Value};

use crate::schema::Schema;

/// The last configuration one manager applied to one object.
#[derive(Debug, Clone)]
pub(crate) struct Applied {
    /// The object's uid (a recreated object starts over).
    pub uid: String,
    pub manager: String,
    /// "" for the main resource, "status", "scale".
    pub subresource: String,
    /// The configuration, restricted to the fields apply tracks.
    pub config: Value,
}

/// The part of an applied configuration whose fields are tracked: all but
/// `apiVersion`, `kind`, and in `metadata` all but `labels`,
/// `annotations`, `finalizers` and `ownerReferences` (the identity and
/// the server's own fields).
pub(crate) fn tracked(config: &Value) -> Value {
    let Some(m) = config.as_object() else {
        return Value::Object(Map::new());
    };
    let mut out = Map::new();
    for (k, v) in m {
        match k.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" => {
                let mut meta = Map::new();
                for f in ["labels", "annotations", "finalizers", "ownerReferences"] {
                    if let Some(x) = v.get(f).filter(|x| !x.is_null()) {
                        meta.insert(f.into(), x.clone());
                    }
                }
                if !meta.is_empty() {
                    out.insert(k.clone(), Value::Object(meta));
                }
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// How list items are matched: a custom resource's schema
/// (`x-kubernetes-list-map-keys`), else the built-in merge keys by field
/// name.
#[derive(Clone, Copy)]
pub(crate) enum Keys<'a> {
    Schema(Option<&'a Schema>),
    Builtin,
}

impl<'a> Keys<'a> {
    fn field(self, k: &str) -> Keys<'a> {
        match self {
            Keys::Schema(s) => Keys::Schema(s.and_then(|s| s.field(k))),
            Keys::Builtin => Keys::Builtin,
        }
    }

    fn item(self) -> Keys<'a> {
        match self {
            Keys::Schema(s) => Keys::Schema(s.and_then(Schema::item)),
            Keys::Builtin => Keys::Builtin,
        }
    }

    /// The key fields of the list in field `field` (of this node's schema).
    fn list_keys(self, field: &str) -> Option<Vec<String>> {
        match self {
            Keys::Schema(s) => s
                .and_then(|s| s.field(field))
                .and_then(Schema::list_map_keys)
                .map(<[String]>::to_vec),
            Keys::Builtin => crate::patch::merge_key(field).map(|k| vec![k.to_string()]),
        }
    }
}

fn key_of(item: &Value, keys: &[String]) -> Vec<Value> {
    keys.iter()
        .map(|k| item.get(k).cloned().unwrap_or(Value::Null))
        .collect()
}

/// Whether `live` holds everything of `applied` (objects field by field,
/// keyed lists item by item, the rest equal).
fn holds(live: &Value, applied: &Value, keys: Keys<'_>, field: &str) -> bool {
    match (live, applied) {
        (Value::Object(l), Value::Object(a)) => a.iter().all(|(k, av)| {
            l.get(k)
                .is_some_and(|lv| holds(lv, av, keys.field(field), k))
        }),
        (Value::Array(l), Value::Array(a)) => match keys.list_keys(field) {
            Some(ks) => a.iter().all(|ai| {
                let key = key_of(ai, &ks);
                l.iter()
                    .find(|li| key_of(li, &ks) == key)
                    .is_some_and(|li| holds(li, ai, keys.field(field).item(), ""))
            }),
            None => live == applied,
        },
        _ => live == applied,
    }
}

/// Removes from `target` (the object after the new apply) what `prev` (the
/// manager's previous configuration) set and `new` leaves out, unless one
/// of `others` (the other managers' configurations) names it or `live`
/// (the object before the apply) no longer holds what was applied.
pub(crate) fn remove_unapplied(
    prev: &Value,
    new: &Value,
    others: &[&Value],
    live: &Value,
    target: &mut Value,
    keys: Keys<'_>,
) {
    let (Some(p), Some(t)) = (prev.as_object(), target.as_object_mut()) else {
        return;
    };
    for (k, pv) in p {
        let nv = new.get(k);
        let others_k: Vec<&Value> = others.iter().filter_map(|o| o.get(k)).collect();
        let live_k = live.get(k).unwrap_or(&Value::Null);
        if nv.is_none() && others_k.is_empty() && holds(live_k, pv, keys, k) {
            t.remove(k);
            continue;
        }
        // Left out, but another manager applies part of it: what is this
        // manager's alone within it goes.
        let empty = match pv {
            Value::Array(_) => Value::Array(Vec::new()),
            _ => Value::Object(Map::new()),
        };
        let nv = nv.unwrap_or(&empty);
        let Some(tk) = t.get_mut(k) else { continue };
        match (pv, nv) {
            (Value::Object(_), Value::Object(_)) => {
                remove_unapplied(pv, nv, &others_k, live_k, tk, keys.field(k));
            }
            (Value::Array(pa), Value::Array(na)) => {
                let Some(ks) = keys.list_keys(k) else {
                    continue;
                };
                let item_keys = keys.field(k).item();
                let Some(ta) = tk.as_array_mut() else {
                    continue;
                };
                for pi in pa {
                    let key = key_of(pi, &ks);
                    let find = |xs: &Value| -> Option<Value> {
                        xs.as_array()
                            .and_then(|a| a.iter().find(|x| key_of(x, &ks) == key))
                            .cloned()
                    };
                    let others_i: Vec<Value> = others_k.iter().filter_map(|o| find(o)).collect();
                    let live_i = find(live_k).unwrap_or(Value::Null);
                    match na.iter().find(|x| key_of(x, &ks) == key) {
                        None => {
                            if others_i.is_empty() && holds(&live_i, pi, item_keys, "") {
                                ta.retain(|x| key_of(x, &ks) != key);
                            }
                        }
                        Some(ni) => {
                            let others_ref: Vec<&Value> = others_i.iter().collect();
                            if let Some(ti) = ta.iter_mut().find(|x| key_of(x, &ks) == key) {
                                remove_unapplied(pi, ni, &others_ref, &live_i, ti, item_keys);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_field_its_manager_no_longer_applies_goes() {
        let prev = json!({"status": {"admission": {"clusterQueue": "cq"},
            "conditions": [{"type": "QuotaReserved", "status": "True"}]}});
        let new = json!({"status": {"conditions": [{"type": "QuotaReserved", "status": "False"}]}});
        let live = json!({"status": {"admission": {"clusterQueue": "cq"},
            "conditions": [{"type": "QuotaReserved", "status": "True"},
                           {"type": "Finished", "status": "True"}]}});
        let mut target = json!({"status": {"admission": {"clusterQueue": "cq"},
            "conditions": [{"type": "QuotaReserved", "status": "False"},
                           {"type": "Finished", "status": "True"}]}});
        remove_unapplied(&prev, &new, &[], &live, &mut target, Keys::Builtin);
        assert_eq!(
            target,
            json!({"status": {"conditions": [{"type": "QuotaReserved", "status": "False"},
                {"type": "Finished", "status": "True"}]}})
        );
    }

    #[test]
    fn what_another_manager_applies_or_another_client_changed_stays() {
        let prev = json!({"status": {"admission": {"clusterQueue": "cq"},
            "conditions": [{"type": "A", "status": "True"}]}});
        let new = json!({"status": {}});
        let other = json!({"status": {"conditions": [{"type": "A", "status": "True"}]}});
        // admission changed by another client since.
        let live = json!({"status": {"admission": {"clusterQueue": "other"},
            "conditions": [{"type": "A", "status": "True"}]}});
        let mut target = live.clone();
        remove_unapplied(&prev, &new, &[&other], &live, &mut target, Keys::Builtin);
        assert_eq!(target, live);
        // The condition alone goes when nobody else applies it.
        let mut target = live.clone();
        remove_unapplied(&prev, &new, &[], &live, &mut target, Keys::Builtin);
        assert_eq!(
            target,
            json!({"status": {"admission": {"clusterQueue": "other"}}})
        );
        // Its condition alone goes from a list another manager also applies to.
        let other = json!({"status": {"conditions": [{"type": "B", "status": "True"}]}});
        let live = json!({"status": {"conditions": [{"type": "A", "status": "True"},
            {"type": "B", "status": "True"}]}});
        let mut target = live.clone();
        remove_unapplied(&prev, &new, &[&other], &live, &mut target, Keys::Builtin);
        assert_eq!(
            target,
            json!({"status": {"conditions": [{"type": "B", "status": "True"}]}})
        );
    }

    #[test]
    fn identity_fields_are_not_tracked() {
        let c = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a", "uid": "u",
            "resourceVersion": "3", "labels": {"l": "1"}}, "status": {"s": 1}});
        assert_eq!(
            tracked(&c),
            json!({"metadata": {"labels": {"l": "1"}}, "status": {"s": 1}})
        );
    }
}
