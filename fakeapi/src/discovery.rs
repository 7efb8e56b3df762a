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
pub(crate) fn resource_list(
    rows: &[&'static ResourceInfo],
    group: &str,
    version: &str,
) -> Option<Value> {
    let mut list = Vec::new();
    for r in in_group(rows, group, version) {
        let mut doc = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": resources::verbs(r),
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

/// `/openapi/v3`: one document per group/version.
pub(crate) fn openapi_v3_root(rows: &[&'static ResourceInfo]) -> Value {
    let mut paths = serde_json::Map::new();
    paths.insert(
        "api/v1".into(),
        json!({"serverRelativeURL": "/openapi/v3/api/v1?hash=fakeapi"}),
    );
    for (g, vs) in resources::groups_of(rows) {
        for v in vs {
            // The hash names the rows served, so a client's cache of a
            // group's document changes when a CRD changes it.
            let hash = rows
                .iter()
                .filter(|r| r.group == g && r.version == v)
                .fold(0u64, |h, r| {
                    r.plural.bytes().chain(r.kind.bytes()).fold(h, |h, b| {
                        h.wrapping_mul(1_099_511_628_211).wrapping_add(b as u64)
                    })
                });
            paths.insert(
                format!("apis/{g}/{v}"),
                json!({"serverRelativeURL": format!("/openapi/v3/apis/{g}/{v}?hash={hash:016x}")}),
            );
        }
    }
    json!({ "paths": paths })
}

/// A minimal OpenAPI v3 document for a group/version: its paths with the
/// operations' group-version-kind and the `fieldValidation` parameter, which
/// is what kubectl checks before leaving validation to the server (this
/// server accepts unknown fields). Schemas are not served.
pub(crate) fn openapi_v3_group_version(
    rows: &[&'static ResourceInfo],
    group: &str,
    version: &str,
) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    for r in in_group(rows, group, version) {
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let params = json!([
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        ]);
        let op = |action: &str| {
            json!({
                "operationId": format!("{action}{}", r.kind),
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
            })
        };
        let (collection, item) = if r.namespaced {
            (
                format!("{prefix}/namespaces/{{namespace}}/{}", r.plural),
                format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", r.plural),
            )
        } else {
            (
                format!("{prefix}/{}", r.plural),
                format!("{prefix}/{}/{{name}}", r.plural),
            )
        };
        paths.insert(collection, json!({"post": op("post")}));
        paths.insert(
            item,
            json!({"patch": op("patch"), "put": op("put"), "get": op("get")}),
        );
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v{}.{}.0", SERVER_VERSION.0, SERVER_VERSION.1)},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}
