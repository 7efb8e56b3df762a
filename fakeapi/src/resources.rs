//! The resource table: every kind the API serves, as data.
//!
//! Handlers, discovery documents and the store are all driven by this table,
//! the way the real API server's registry is; serving a new kind is one row.

/// One served resource (one group/version/kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceInfo {
    /// API group, `""` for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    /// Lower-case plural used in URLs (`pods`).
    pub plural: &'static str,
    pub singular: &'static str,
    pub namespaced: bool,
    /// Subresources served (`status`, `binding`, `eviction`).
    pub subresources: &'static [&'static str],
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
}

impl ResourceInfo {
    /// `v1` or `group/version`, as written in `apiVersion`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `leases.coordination.k8s.io`: the name the Rust API takes.
    pub fn qualified_name(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub fn has_status(&self) -> bool {
        self.subresources.contains(&"status")
    }
}

#[allow(clippy::too_many_arguments)]
const fn row(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    namespaced: bool,
    subresources: &'static [&'static str],
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
) -> ResourceInfo {
    ResourceInfo {
        group,
        version,
        kind,
        plural,
        singular,
        namespaced,
        subresources,
        short_names,
        categories,
    }
}

const NS: bool = true;
const CLUSTER: bool = false;
const ALL: &[&str] = &["all"];

/// Every resource served. Order is the order of discovery documents.
pub static RESOURCES: &[ResourceInfo] = &[
    row(
        "",
        "v1",
        "Pod",
        "pods",
        "pod",
        NS,
        &["status", "binding", "eviction"],
        &["po"],
        ALL,
    ),
    row(
        "",
        "v1",
        "Node",
        "nodes",
        "node",
        CLUSTER,
        &["status"],
        &["no"],
        &[],
    ),
    row(
        "",
        "v1",
        "Namespace",
        "namespaces",
        "namespace",
        CLUSTER,
        &["status"],
        &["ns"],
        &[],
    ),
    row(
        "",
        "v1",
        "Binding",
        "bindings",
        "binding",
        NS,
        &[],
        &[],
        &[],
    ),
    row("", "v1", "Event", "events", "event", NS, &[], &["ev"], &[]),
    row(
        "",
        "v1",
        "Service",
        "services",
        "service",
        NS,
        &["status"],
        &["svc"],
        ALL,
    ),
    row(
        "",
        "v1",
        "ReplicationController",
        "replicationcontrollers",
        "replicationcontroller",
        NS,
        &["status"],
        &["rc"],
        ALL,
    ),
    row(
        "",
        "v1",
        "PersistentVolume",
        "persistentvolumes",
        "persistentvolume",
        CLUSTER,
        &["status"],
        &["pv"],
        &[],
    ),
    row(
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        NS,
        &["status"],
        &["pvc"],
        &[],
    ),
    row(
        "",
        "v1",
        "ConfigMap",
        "configmaps",
        "configmap",
        NS,
        &[],
        &["cm"],
        &[],
    ),
    row("", "v1", "Secret", "secrets", "secret", NS, &[], &[], &[]),
    row(
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        "serviceaccount",
        NS,
        &[],
        &["sa"],
        &[],
    ),
    row(
        "",
        "v1",
        "Endpoints",
        "endpoints",
        "endpoints",
        NS,
        &[],
        &["ep"],
        &[],
    ),
    row(
        "",
        "v1",
        "ResourceQuota",
        "resourcequotas",
        "resourcequota",
        NS,
        &["status"],
        &["quota"],
        &[],
    ),
    row(
        "",
        "v1",
        "LimitRange",
        "limitranges",
        "limitrange",
        NS,
        &[],
        &["limits"],
        &[],
    ),
    row(
        "apps",
        "v1",
        "ReplicaSet",
        "replicasets",
        "replicaset",
        NS,
        &["status"],
        &["rs"],
        ALL,
    ),
    row(
        "apps",
        "v1",
        "StatefulSet",
        "statefulsets",
        "statefulset",
        NS,
        &["status"],
        &["sts"],
        ALL,
    ),
    row(
        "apps",
        "v1",
        "Deployment",
        "deployments",
        "deployment",
        NS,
        &["status"],
        &["deploy"],
        ALL,
    ),
    row(
        "apps",
        "v1",
        "DaemonSet",
        "daemonsets",
        "daemonset",
        NS,
        &["status"],
        &["ds"],
        ALL,
    ),
    row(
        "batch",
        "v1",
        "Job",
        "jobs",
        "job",
        NS,
        &["status"],
        &[],
        ALL,
    ),
    row(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        NS,
        &["status"],
        &["pdb"],
        &[],
    ),
    row(
        "events.k8s.io",
        "v1",
        "Event",
        "events",
        "event",
        NS,
        &[],
        &["ev"],
        &[],
    ),
    row(
        "coordination.k8s.io",
        "v1",
        "Lease",
        "leases",
        "lease",
        NS,
        &[],
        &[],
        &[],
    ),
    row(
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        "priorityclass",
        CLUSTER,
        &[],
        &["pc"],
        &[],
    ),
    row(
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        "storageclass",
        CLUSTER,
        &[],
        &["sc"],
        &[],
    ),
    row(
        "storage.k8s.io",
        "v1",
        "CSINode",
        "csinodes",
        "csinode",
        CLUSTER,
        &[],
        &[],
        &[],
    ),
    row(
        "storage.k8s.io",
        "v1",
        "CSIDriver",
        "csidrivers",
        "csidriver",
        CLUSTER,
        &[],
        &[],
        &[],
    ),
    row(
        "storage.k8s.io",
        "v1",
        "CSIStorageCapacity",
        "csistoragecapacities",
        "csistoragecapacity",
        NS,
        &[],
        &[],
        &[],
    ),
    row(
        "storage.k8s.io",
        "v1",
        "VolumeAttachment",
        "volumeattachments",
        "volumeattachment",
        CLUSTER,
        &["status"],
        &[],
        &[],
    ),
    row(
        "resource.k8s.io",
        "v1",
        "ResourceClaim",
        "resourceclaims",
        "resourceclaim",
        NS,
        &["status"],
        &[],
        &[],
    ),
    row(
        "resource.k8s.io",
        "v1",
        "ResourceClaimTemplate",
        "resourceclaimtemplates",
        "resourceclaimtemplate",
        NS,
        &[],
        &[],
        &[],
    ),
    row(
        "resource.k8s.io",
        "v1",
        "ResourceSlice",
        "resourceslices",
        "resourceslice",
        CLUSTER,
        &[],
        &[],
        &[],
    ),
    row(
        "resource.k8s.io",
        "v1",
        "DeviceClass",
        "deviceclasses",
        "deviceclass",
        CLUSTER,
        &[],
        &[],
        &[],
    ),
];

/// Finds a resource by URL coordinates.
pub fn lookup(group: &str, version: &str, plural: &str) -> Option<&'static ResourceInfo> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Finds a resource by `plural` or `plural.group` (`pods`, `leases.coordination.k8s.io`).
pub fn lookup_qualified(name: &str) -> Option<&'static ResourceInfo> {
    let (plural, group) = name.split_once('.').unwrap_or((name, ""));
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.plural == plural)
}

/// Index of a resource in [`RESOURCES`], used as the store's key.
pub(crate) fn index_of(info: &ResourceInfo) -> usize {
    RESOURCES
        .iter()
        .position(|r| r == info)
        .expect("ResourceInfo comes from RESOURCES")
}

/// The served groups with their (single) version, in table order.
pub fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        if !out.iter().any(|(g, v)| *g == r.group && *v == r.version) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// Verbs advertised in discovery for the main resource.
pub fn verbs(info: &ResourceInfo) -> &'static [&'static str] {
    if info.plural == "bindings" {
        &["create"]
    } else {
        &[
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

/// Verbs and response kind advertised for a subresource.
pub fn subresource_discovery(sub: &str) -> (&'static str, &'static str, &'static [&'static str]) {
    match sub {
        "binding" => ("", "Binding", &["create"]),
        "eviction" => ("policy", "Eviction", &["create"]),
        _ => ("", "", &["get", "patch", "update"]),
    }
}
