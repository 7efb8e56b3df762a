//! Discovery documents, generated from the resource table: the rows a
//! store serves at the time of the request (built-in, then those of its
//! established CRDs), so a new custom kind is discoverable at once.

use crate::resources::{self, ResourceInfo};
use serde_json::{json, Value};

/// The Kubernetes version this API claims to be.
pub const SERVER_VERSION: (&str, &str) = ("1", "30");

pub(crate) fn version() -> Value {
    json!({
        "major": SERVER_VERSION.0,
        "minor": SERVER_VERSION.1,
        "gitVersion": format!("v{}.{}.0", SERVER_VERSION.0, SERVER_VERSION.1),
        "gitCommit": "batkube-fakeapi",
        "gitTreeState": "clean",
        "buildDate": "2024-01-01T00:00:00Z",
        "goVersion": "go1.22.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub(crate) fn api_versions(server: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server}],
    })
}

fn group_doc(group: &str, versions: &[&str]) -> Value {
    let gvs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": gvs, "preferredVersion": gvs[0]})
}

pub(crate) fn api_group_list(rows: &[&'static ResourceInfo]) -> Value {
    let groups: Vec<Value> = resources::groups_of(rows)
        .into_iter()
        .map(|(g, vs)| group_doc(g, &vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub(crate) fn api_group(rows: &[&'static ResourceInfo], group: &str) -> Option<Value> {
    resources::groups_of(rows)
        .into_iter()
        .find(|(g, _)| *g == group)
        .map(|(g, vs)| {
            let mut doc = group_doc(g, &vs);
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            doc
        })
}

fn in_group<'a>(
    rows: &'a [&'static ResourceInfo],
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'static ResourceInfo> + 'a {
    rows.iter()
        .copied()
        .filter(move |r| r.group == group && r.version == version)
}

/// The group, version and kind a subresource's responses carry.
fn subresource_kind<'a>(
    r: &'a ResourceInfo,
    sub: &str,
) -> (&'a str, &'a str, &'a str, &'static [&'static str]) {
    let (g, kind, verbs) = resources::subresource_discovery(sub);
    if kind.is_empty() {
        (r.group, r.version, r.kind, verbs)
    } else {
        (g, "v1", kind, verbs)
    }
}

/// `APIResourceList` for `/api/v1` or `/apis/{group}/{version}`.
/// kube-apiserver's `storageVersionHash` of a resource: the first 8 bytes
/// of the SHA-256 of its storage `group/version/kind`, in base64 (for a
/// CRD, its storage version's; events.k8s.io Events are stored as core
/// ones, as kube-apiserver's cohabiting resources).
pub(crate) fn storage_version_hash(storage: &ResourceInfo) -> String {
    use base64::Engine;
    let (group, version, kind) = match (storage.group, storage.kind) {
        ("events.k8s.io", "Event") => ("", "v1", "Event"),
        (g, k) => (g, storage.version, k),
    };
    let d = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{group}/{version}/{kind}").as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(&d.as_ref()[..8])
}

pub(crate) fn resource_list(
    rows: &[&'static ResourceInfo],
    group: &str,
    version: &str,
    storage: impl Fn(&'static ResourceInfo) -> &'static ResourceInfo,
) -> Option<Value> {
    let mut list = Vec::new();
    for r in in_group(rows, group, version) {
        let s = storage(r);
        let mut doc = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": resources::verbs(r),
            "storageVersionHash": storage_version_hash(s),
        });
        if !r.short_names.is_empty() {
            doc["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            doc["categories"] = json!(r.categories);
        }
        list.push(doc);
        for sub in r.subresources {
            let (g, v, kind, verbs) = subresource_kind(r, sub);
            let mut doc = json!({
                "name": format!("{}/{}", r.plural, sub),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": kind,
                "verbs": verbs,
            });
            if kind != r.kind && !g.is_empty() {
                doc["group"] = json!(g);
                doc["version"] = json!(v);
            }
            list.push(doc);
        }
    }
    if list.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list}),
    )
}

/// Aggregated discovery (`apidiscovery.k8s.io/v2 APIGroupDiscoveryList`)
/// for `/api` (`core` = true) or `/apis`.
pub(crate) fn aggregated(rows: &[&'static ResourceInfo], core: bool, api_version: &str) -> Value {
    let groups: Vec<(&str, Vec<&str>)> = if core {
        vec![("", vec!["v1"])]
    } else {
        resources::groups_of(rows)
    };
    let items: Vec<Value> = groups
        .into_iter()
        .map(|(g, vs)| {
            let versions: Vec<Value> = vs.iter().map(|v| version_doc(rows, g, v)).collect();
            json!({"metadata": {"name": g}, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": api_version,
        "metadata": {},
        "items": items,
    })
}

/// One version of a group in aggregated discovery.
fn version_doc(rows: &[&'static ResourceInfo], g: &str, v: &str) -> Value {
    let resources: Vec<Value> = in_group(rows, g, v)
        .map(|r| {
            let subs: Vec<Value> = r
                .subresources
                .iter()
                .map(|sub| {
                    let (group, version, kind, verbs) = subresource_kind(r, sub);
                    json!({
                        "subresource": sub,
                        "responseKind": {"group": group, "version": version, "kind": kind},
                        "verbs": verbs,
                    })
                })
                .collect();
            let mut doc = json!({
                "resource": r.plural,
                "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                "singularResource": r.singular,
                "verbs": resources::verbs(r),
                "subresources": subs,
            });
            if !r.short_names.is_empty() {
                doc["shortNames"] = json!(r.short_names);
            }
            if !r.categories.is_empty() {
                doc["categories"] = json!(r.categories);
            }
            doc
        })
        .collect();
    json!({"version": v, "resources": resources, "freshness": "Current"})
}
