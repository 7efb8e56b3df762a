//! The resource table: every kind the API serves, as data.
//!
//! Handlers, discovery documents and the store are all driven by this table,
//! the way the real API server's registry is; serving a new kind is one row.
//! [`RESOURCES`] holds the built-in rows; a CustomResourceDefinition adds
//! rows of its own to a store at run time ([`intern`] makes them), served by
//! the same code paths.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// One served resource (one group/version/kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    /// Whether objects of this kind are kept. `false`: a create-only
    /// kind whose create is answered and nothing stored (a Binding binds
    /// its pod; a TokenReview or SubjectAccessReview is answered with its
    /// status, as kube-apiserver's REST storage of them has only `Create`).
    pub stored: bool,
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
        stored: true,
    }
}

/// A create-only row (see [`ResourceInfo::stored`]): no subresources,
/// short names nor categories, as kube-apiserver lists its reviews.
const fn create_only(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    namespaced: bool,
) -> ResourceInfo {
    ResourceInfo {
        stored: false,
        ..row(
            group,
            version,
            kind,
            plural,
            singular,
            namespaced,
            &[],
            &[],
            &[],
        )
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
        &["status", "finalize"],
        &["ns"],
        &[],
    ),
    create_only("", "v1", "Binding", "bindings", "binding", NS),
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
        "PodTemplate",
        "podtemplates",
        "podtemplate",
        NS,
        &[],
        &[],
        &[],
    ),
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
    // Discovered by clients and the e2e suite's discovery tests; nothing
    // in a simulation makes an APIService (fakeapi aggregates no server).
    row(
        "apiregistration.k8s.io",
        "v1",
        "APIService",
        "apiservices",
        "apiservice",
        CLUSTER,
        &["status"],
        &[],
        &["api-extensions"],
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
    // kube-apiserver's reviews: a create answered with its status, kept
    // nowhere (`crate::reviews`). fakeapi authenticates nobody and allows
    // every request, so every requester is `system:admin` and every review
    // allows.
    create_only(
        "authentication.k8s.io",
        "v1",
        "SelfSubjectReview",
        "selfsubjectreviews",
        "selfsubjectreview",
        CLUSTER,
    ),
    create_only(
        "authentication.k8s.io",
        "v1",
        "TokenReview",
        "tokenreviews",
        "tokenreview",
        CLUSTER,
    ),
    create_only(
        "authorization.k8s.io",
        "v1",
        "LocalSubjectAccessReview",
        "localsubjectaccessreviews",
        "localsubjectaccessreview",
        NS,
    ),
    create_only(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        CLUSTER,
    ),
    create_only(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        CLUSTER,
    ),
    create_only(
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
        "subjectaccessreviews",
        "subjectaccessreview",
        CLUSTER,
    ),
    // Both versions kube-apiserver serves, v2 (its preferred and storage
    // version) first; here each version is a table of its own: an object
    // written in one is not seen in the other, where kube-apiserver
    // converts it (nothing in a simulation writes either).
    row(
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        NS,
        &["status"],
        &["hpa"],
        ALL,
    ),
    row(
        "autoscaling",
        "v1",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        NS,
        &["status"],
        &["hpa"],
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
    // Stored only: fakeapi runs no cronjob controller (`batkube run
    // --controller` can run kube-controller-manager's).
    row(
        "batch",
        "v1",
        "CronJob",
        "cronjobs",
        "cronjob",
        NS,
        &["status"],
        &["cj"],
        ALL,
    ),
    // Stored, approved and denied through `approval`; nothing signs them.
    row(
        "certificates.k8s.io",
        "v1",
        "CertificateSigningRequest",
        "certificatesigningrequests",
        "certificatesigningrequest",
        CLUSTER,
        &["approval", "status"],
        &["csr"],
        &[],
    ),
    row(
        "networking.k8s.io",
        "v1",
        "IngressClass",
        "ingressclasses",
        "ingressclass",
        CLUSTER,
        &[],
        &[],
        &[],
    ),
    row(
        "networking.k8s.io",
        "v1",
        "Ingress",
        "ingresses",
        "ingress",
        NS,
        &["status"],
        &["ing"],
        &[],
    ),
    row(
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        "networkpolicy",
        NS,
        &[],
        &["netpol"],
        &[],
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
    // Read by Kueue (a pod's overhead comes from its RuntimeClass): its
    // controllers wait for their RuntimeClass cache to sync.
    row(
        "node.k8s.io",
        "v1",
        "RuntimeClass",
        "runtimeclasses",
        "runtimeclass",
        CLUSTER,
        &[],
        &[],
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
    // Admission webhooks (`crate::admission`), and the EndpointSlices
    // through which a webhook's Service is reached.
    row(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        "mutatingwebhookconfiguration",
        CLUSTER,
        &[],
        &[],
        &["api-extensions"],
    ),
    // ValidatingAdmissionPolicies (`crate::admission::policy`): CEL
    // checks of writes, bound to resources by their bindings.
    row(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        "validatingadmissionpolicy",
        CLUSTER,
        &["status"],
        &[],
        &["api-extensions"],
    ),
    row(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        "validatingadmissionpolicybinding",
        CLUSTER,
        &[],
        &[],
        &["api-extensions"],
    ),
    row(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        "validatingwebhookconfiguration",
        CLUSTER,
        &[],
        &[],
        &["api-extensions"],
    ),
    row(
        "discovery.k8s.io",
        "v1",
        "EndpointSlice",
        "endpointslices",
        "endpointslice",
        NS,
        &[],
        &[],
        &[],
    ),
    // API priority and fairness (`crate::flowcontrol`): requests are
    // classified by the FlowSchemas, never queued nor rejected. v1 is the
    // only version kube-apiserver 1.35 serves (v1beta3 left in 1.32).
    row(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "FlowSchema",
        "flowschemas",
        "flowschema",
        CLUSTER,
        &["status"],
        &[],
        &[],
    ),
    row(
        "flowcontrol.apiserver.k8s.io",
        "v1",
        "PriorityLevelConfiguration",
        "prioritylevelconfigurations",
        "prioritylevelconfiguration",
        CLUSTER,
        &["status"],
        &[],
        &[],
    ),
    row(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        "customresourcedefinition",
        CLUSTER,
        &["status"],
        &["crd", "crds"],
        &["api-extensions"],
    ),
];

/// Finds a built-in resource by URL coordinates.
pub fn lookup(group: &str, version: &str, plural: &str) -> Option<&'static ResourceInfo> {
    builtin(group, version, plural).map(|(_, r)| r)
}

/// Finds a built-in resource by `plural` or `plural.group` (`pods`, `leases.coordination.k8s.io`).
pub fn lookup_qualified(name: &str) -> Option<&'static ResourceInfo> {
    builtin_qualified(name).map(|(_, r)| r)
}

/// A built-in row and its index in [`RESOURCES`] (the store's table).
/// Whether kube-apiserver's storage of this built-in kind answers a
/// deletion with the deleted object (`ReturnDeletedObject`) rather than a
/// `Status`.
pub(crate) fn returns_deleted_object(info: &ResourceInfo) -> bool {
    matches!(
        (info.group, info.plural),
        (
            "",
            "pods"
                | "namespaces"
                | "persistentvolumes"
                | "persistentvolumeclaims"
                | "podtemplates"
                | "resourcequotas"
                | "services"
                | "serviceaccounts"
        ) | (
            "resource.k8s.io",
            "deviceclasses" | "resourceclaims" | "resourceclaimtemplates" | "resourceslices"
        ) | (
            "storage.k8s.io",
            "csidrivers" | "csinodes" | "storageclasses" | "volumeattachments"
        )
    )
}

pub(crate) fn builtin(
    group: &str,
    version: &str,
    plural: &str,
) -> Option<(usize, &'static ResourceInfo)> {
    RESOURCES
        .iter()
        .enumerate()
        .find(|(_, r)| r.plural == plural && r.group == group && r.version == version)
}

pub(crate) fn builtin_qualified(name: &str) -> Option<(usize, &'static ResourceInfo)> {
    let (plural, group) = name.split_once('.').unwrap_or((name, ""));
    RESOURCES
        .iter()
        .enumerate()
        .find(|(_, r)| r.group == group && r.plural == plural)
}

/// The index of a built-in row: by address for a row of [`RESOURCES`]
/// (what lookups hand out), else by value; `None` for a custom row.
pub(crate) fn builtin_index(info: &ResourceInfo) -> Option<usize> {
    RESOURCES
        .iter()
        .position(|r| std::ptr::eq(r, info))
        .or_else(|| RESOURCES.iter().position(|r| r == info))
}

/// The CustomResourceDefinition row.
pub(crate) fn crd_row() -> (usize, &'static ResourceInfo) {
    static ROW: OnceLock<usize> = OnceLock::new();
    let i = *ROW.get_or_init(|| {
        builtin("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .expect("the CRD row")
            .0
    });
    (i, &RESOURCES[i])
}

/// The served built-in groups with each of their versions, in table order.
pub fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        if !out.iter().any(|(g, v)| *g == r.group && *v == r.version) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// The groups of `rows` (core left out) in order of first appearance,
/// each with its versions, preferred first (Kubernetes' version priority).
pub(crate) fn groups_of(rows: &[&'static ResourceInfo]) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in rows.iter().filter(|r| !r.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, vs)) => {
                if !vs.contains(&r.version) {
                    vs.push(r.version);
                }
            }
            None => out.push((r.group, vec![r.version])),
        }
    }
    for (_, vs) in &mut out {
        vs.sort_by(|a, b| crate::crd::version_order(a, b));
    }
    out
}

/// A row of a custom resource, owned by the process: a [`crate::Change`]
/// hands out `&'static ResourceInfo`, so custom rows live as long as
/// built-in ones. The same row asked for again (the same CRD installed in
/// every run, in every test's store, or re-created) is the same allocation,
/// so memory is bounded by the distinct definitions ever seen.
#[allow(clippy::too_many_arguments)]
pub(crate) fn intern(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    singular: &str,
    namespaced: bool,
    subresources: &[&str],
    short_names: &[String],
    categories: &[String],
) -> &'static ResourceInfo {
    static ROWS: OnceLock<Mutex<HashMap<String, &'static ResourceInfo>>> = OnceLock::new();
    let key = format!(
        "{group}\0{version}\0{kind}\0{plural}\0{singular}\0{namespaced}\0{}\0{}\0{}",
        subresources.join(","),
        short_names.join(","),
        categories.join(",")
    );
    let mut rows = ROWS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    rows.entry(key).or_insert_with(|| {
        fn leak(s: &str) -> &'static str {
            Box::leak(s.to_string().into_boxed_str())
        }
        fn leak_all<S: AsRef<str>>(v: &[S]) -> &'static [&'static str] {
            Box::leak(
                v.iter()
                    .map(|s| leak(s.as_ref()))
                    .collect::<Vec<_>>()
                    .into_boxed_slice(),
            )
        }
        Box::leak(Box::new(ResourceInfo {
            group: leak(group),
            version: leak(version),
            kind: leak(kind),
            plural: leak(plural),
            singular: leak(singular),
            namespaced,
            subresources: leak_all(subresources),
            short_names: leak_all(short_names),
            categories: leak_all(categories),
            stored: true,
        }))
    })
}

/// Verbs advertised in discovery for the main resource.
pub fn verbs(info: &ResourceInfo) -> &'static [&'static str] {
    if !info.stored {
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
        "scale" => ("autoscaling", "Scale", &["get", "patch", "update"]),
        "finalize" => ("", "", &["update"]),
        _ => ("", "", &["get", "patch", "update"]),
    }
}
