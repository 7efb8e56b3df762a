//! Discovery documents, generated from the resource table.

use crate::resources::{self, ResourceInfo, RESOURCES};
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

fn group_doc(group: &str, version: &str) -> Value {
    let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
}

pub(crate) fn api_group_list() -> Value {
    let groups: Vec<Value> = resources::groups()
        .into_iter()
        .map(|(g, v)| group_doc(g, v))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub(crate) fn api_group(group: &str) -> Option<Value> {
    resources::groups()
        .into_iter()
        .find(|(g, _)| *g == group)
        .map(|(g, v)| {
            let mut doc = group_doc(g, v);
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            doc
        })
}

fn in_group<'a>(
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'static ResourceInfo> + 'a {
    RESOURCES
        .iter()
        .filter(move |r| r.group == group && r.version == version)
}

/// `APIResourceList` for `/api/v1` or `/apis/{group}/{version}`.
pub(crate) fn resource_list(group: &str, version: &str) -> Option<Value> {
    let mut list = Vec::new();
    for r in in_group(group, version) {
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
            let (g, kind, verbs) = resources::subresource_discovery(sub);
            let mut doc = json!({
                "name": format!("{}/{}", r.plural, sub),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": if kind.is_empty() { r.kind } else { kind },
                "verbs": verbs,
            });
            if !g.is_empty() {
                doc["group"] = json!(g);
                doc["version"] = json!("v1");
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
pub(crate) fn aggregated(core: bool, api_version: &str) -> Value {
    let groups: Vec<(&str, &str)> = if core {
        vec![("", "v1")]
    } else {
        resources::groups()
    };
    let items: Vec<Value> = groups
        .into_iter()
        .map(|(g, v)| {
            let resources: Vec<Value> = in_group(g, v)
                .map(|r| {
                    let subs: Vec<Value> = r
                        .subresources
                        .iter()
                        .map(|sub| {
                            let (sg, kind, verbs) = resources::subresource_discovery(sub);
                            let kind = if kind.is_empty() { r.kind } else { kind };
                            let group = if kind == r.kind { r.group } else { sg };
                            json!({
                                "subresource": sub,
                                "responseKind": {"group": group, "version": "v1", "kind": kind},
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
            json!({
                "metadata": {"name": g},
                "versions": [{"version": v, "resources": resources, "freshness": "Current"}],
            })
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": api_version,
        "metadata": {},
        "items": items,
    })
}
