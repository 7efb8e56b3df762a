//! Translation between Batsim's world and Kubernetes objects.
//!
//! - A compute host becomes a Node: its name made DNS-1123 safe
//!   deterministically (the original kept in an annotation, so the mapping
//!   is reversible), allocatable from its `<prop>`s (`cpu` or `core`,
//!   `memory` as a quantity or plain bytes, `pods` default 110, props whose
//!   key looks like `domain/name` with a numeric value as extended
//!   resources, every other prop as a label when it can be one), and Ready.
//! - A job becomes a Pod: its name from the job id, requests from the job's
//!   fields or else its profile's (`cpu`, `memory`/`mem`, extended
//!   resources), `schedulerName` from `scheduler` (the 2020 files' `default`
//!   means `default-scheduler`), `priority`, `nodeSelector`, `labels`; the
//!   Batsim id kept in an annotation.
//! - A job on `res` = N > 1 machines becomes a gang of N pods
//!   (`<pod>-0` … `<pod>-(N-1)`), each with the job's per-machine requests
//!   and a required pod anti-affinity on `kubernetes.io/hostname` against
//!   the others (Batsim allocates N distinct machines), labelled for the
//!   gang convention of `--gang` ([`GangStyle`]), with the group object that
//!   convention reads ([`group_object`]), created before the pods.
//! - A job that asks for neither cpu nor memory means what it means in
//!   Batsim: each of its pods takes its machine whole ([`WholeNode`],
//!   [`pods_from_job_on`]), unless the broker is told to keep such pods
//!   asking for nothing ([`NoRequests::Nothing`]).
//! - A job that cannot be pods (`res` 0, an unknown profile type, an
//!   unreadable request) is refused with the reason, for the broker to
//!   answer REJECT_JOB and log it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Pod, PodAffinityTerm,
    PodSchedulingGate, PodSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta, Time,
};
use serde_json::{json, Map, Value};

use batsim::protocol::{value_as_f64, Job, Resource};

/// Annotation holding a pod's Batsim job id (`workload!id`).
pub const JOB_ID_ANNOTATION: &str = "batkube.io/job-id";
/// Annotation holding a node's Batsim host name.
pub const HOST_NAME_ANNOTATION: &str = "batkube.io/host-name";
/// Annotation holding a node's Batsim resource id.
pub const RESOURCE_ID_ANNOTATION: &str = "batkube.io/resource-id";
/// Label naming the workload a pod came from.
pub const WORKLOAD_LABEL: &str = "batkube.io/workload";
/// The namespace pods are created in.
pub const NAMESPACE: &str = "default";

/// Resource amounts in integral units: cpu in millicores, everything else
/// (memory bytes, pods, extended resources) in units.
pub type Amounts = BTreeMap<String, i64>;

/// Makes a DNS-1123 subdomain from any text, deterministically. Valid names
/// stay as they are; others are lowercased, invalid characters become `-`,
/// and a hash of the original is appended so that distinct inputs never
/// collide.
pub fn dns1123(name: &str) -> String {
    if is_dns1123_subdomain(name) {
        return name.to_string();
    }
    // Fallback: one DNS-1123 label (dots become dashes too), with a hash.
    let mut s = String::with_capacity(name.len());
    for c in name.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if !(c == '-' && s.ends_with('-')) {
            s.push(c);
        }
    }
    let mut s = s.trim_matches('-').to_string();
    s.truncate(50);
    let s = s.trim_end_matches('-');
    let hash = fnv1a(name.as_bytes()) as u32;
    if s.is_empty() {
        format!("x-{hash:08x}")
    } else {
        format!("{s}-{hash:08x}")
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// A pod name for a Batsim job id: `w0!17` -> `w0-17`.
pub fn pod_name(job_id: &str) -> String {
    let plain = job_id.replacen('!', "-", 1);
    if is_dns1123_subdomain(&plain) && !plain.contains('.') {
        plain
    } else {
        dns1123(job_id)
    }
}

/// Parses a Kubernetes quantity (`"4"`, `"500m"`, `"1.5"`, `"4Gi"`, `"1e3"`)
/// or a JSON number, into the integral unit of `resource` (millicores for
/// cpu, rounding up as Kubernetes does).
pub fn parse_quantity(resource: &str, v: &Value) -> Result<i64, String> {
    let value = match v {
        Value::Number(_) => value_as_f64(v).ok_or_else(|| format!("{v} is not a finite number"))?,
        Value::String(s) => quantity_value(s)?,
        other => return Err(format!("{other} is not a quantity")),
    };
    if value < 0.0 {
        return Err(format!("{v} is negative"));
    }
    let scaled = if resource == "cpu" {
        value * 1000.0
    } else {
        value
    };
    if scaled > 9.0e18 {
        return Err(format!("{v} is too large"));
    }
    // Round up, tolerating binary noise (0.1 cpu is 100m, not 101m).
    let r = scaled.round();
    Ok(if (scaled - r).abs() < 1e-6 {
        r as i64
    } else {
        scaled.ceil() as i64
    })
}

fn quantity_value(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let base: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a Kubernetes quantity"))?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return Err(format!("{s:?} has an unknown suffix {suffix:?}")),
    };
    let v = base * factor;
    if v.is_finite() {
        Ok(v)
    } else {
        Err(format!("{s:?} is not finite"))
    }
}

/// Formats an amount back as a quantity.
pub fn format_quantity(resource: &str, amount: i64) -> Quantity {
    if resource == "cpu" {
        if amount % 1000 == 0 {
            Quantity((amount / 1000).to_string())
        } else {
            Quantity(format!("{amount}m"))
        }
    } else {
        Quantity(amount.to_string())
    }
}

fn is_extended_resource(key: &str) -> bool {
    // `domain/name`, not in the kubernetes.io namespace (those are labels).
    match key.split_once('/') {
        Some((domain, name)) => {
            domain.contains('.')
                && !domain.ends_with("kubernetes.io")
                && !name.is_empty()
                && !key.starts_with("batkube.io/")
        }
        None => false,
    }
}

fn is_label_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    prefix.is_none_or(is_dns1123_subdomain) && is_label_value(name) && !name.is_empty()
}

fn is_label_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && v.chars().next().is_none_or(|c| c.is_ascii_alphanumeric())
        && v.chars().last().is_none_or(|c| c.is_ascii_alphanumeric())
}

/// A node's allocatable resources from host properties.
pub fn node_allocatable(res: &Resource) -> Result<Amounts, String> {
    let mut a = Amounts::new();
    let prop = |k: &str| res.properties.get(k);
    match prop("cpu").or_else(|| prop("core")) {
        Some(v) => {
            a.insert(
                "cpu".into(),
                parse_quantity("cpu", v).map_err(|e| format!("cpu: {e}"))?,
            );
        }
        None => {
            tracing::warn!(host = %res.name, "host has no cpu or core property: 1 cpu assumed");
            a.insert("cpu".into(), 1000);
        }
    }
    if let Some(v) = prop("memory").or_else(|| prop("mem")) {
        a.insert(
            "memory".into(),
            parse_quantity("memory", v).map_err(|e| format!("memory: {e}"))?,
        );
    }
    let pods = match prop("pods") {
        Some(v) => parse_quantity("pods", v).map_err(|e| format!("pods: {e}"))?,
        None => 110,
    };
    a.insert("pods".into(), pods);
    for (k, v) in &res.properties {
        if is_extended_resource(k) {
            if let Ok(n) = parse_quantity(k, v) {
                a.insert(k.clone(), n);
            }
        }
    }
    Ok(a)
}

/// A Node for a Batsim compute resource.
pub fn node_from_host(res: &Resource, created: Time) -> Result<Node, String> {
    let allocatable = node_allocatable(res).map_err(|e| format!("host {:?}: {e}", res.name))?;
    let name = dns1123(&res.name);
    let mut labels = BTreeMap::new();
    labels.insert("kubernetes.io/hostname".to_string(), name.clone());
    labels.insert("kubernetes.io/os".to_string(), "linux".to_string());
    labels.insert("kubernetes.io/arch".to_string(), "amd64".to_string());
    for (k, v) in &res.properties {
        if matches!(
            k.as_str(),
            "cpu" | "core" | "memory" | "mem" | "pods" | "role" | "speed"
        ) || is_extended_resource(k)
        {
            continue;
        }
        let v = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if is_label_key(k) && is_label_value(&v) {
            labels.insert(k.clone(), v);
        }
    }
    let mut annotations = BTreeMap::new();
    annotations.insert(HOST_NAME_ANNOTATION.to_string(), res.name.clone());
    annotations.insert(RESOURCE_ID_ANNOTATION.to_string(), res.id.to_string());
    let quantities: BTreeMap<String, Quantity> = allocatable
        .iter()
        .map(|(k, v)| (k.clone(), format_quantity(k, *v)))
        .collect();
    Ok(Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(labels),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            capacity: Some(quantities.clone()),
            allocatable: Some(quantities),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: Some("KubeletReady".into()),
                message: Some("simulated by batkube".into()),
                last_heartbeat_time: Some(created.clone()),
                last_transition_time: Some(created),
            }]),
            addresses: Some(vec![NodeAddress {
                type_: "Hostname".into(),
                address: name,
            }]),
            ..Default::default()
        }),
    })
}

/// Profile types Batsim 4 knows; a pod can stand for any of them as long
/// as the job runs on one host.
const KNOWN_PROFILE_TYPES: &[&str] = &[
    "delay",
    "parallel",
    "parallel_homogeneous",
    "parallel_homogeneous_total",
    "parallel_homogeneous_pfs",
    "data_staging",
    "composed",
    "sequence",
    "usage_trace",
    "trace_replay",
    "smpi",
    "msg_par",
    "msg_par_hg",
    "msg_par_hg_tot",
    "send",
    "receive",
    "scheduler_send",
    "scheduler_recv",
];

/// A job field, or else the same field of its profile.
fn field<'a>(job: &'a Job, profile: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    job.extra
        .get(key)
        .or_else(|| profile.and_then(|p| p.get(key)))
}

/// Whether a job names its scheduler (`scheduler`, in the job or its
/// profile; the 2020 files' `default` names none).
pub fn names_scheduler(job: &Job, profile: Option<&Value>) -> bool {
    !matches!(
        field(job, profile, "scheduler").and_then(Value::as_str),
        None | Some("default") | Some("")
    )
}

/// The requests a job asks for.
pub fn job_requests(job: &Job, profile: Option<&Value>) -> Result<Amounts, String> {
    let mut a = Amounts::new();
    if let Some(v) = field(job, profile, "cpu") {
        a.insert(
            "cpu".into(),
            parse_quantity("cpu", v).map_err(|e| format!("cpu: {e}"))?,
        );
    }
    if let Some(v) = field(job, profile, "memory").or_else(|| field(job, profile, "mem")) {
        a.insert(
            "memory".into(),
            parse_quantity("memory", v).map_err(|e| format!("memory: {e}"))?,
        );
    }
    let mut keys: Vec<&String> = job.extra.keys().collect();
    if let Some(Value::Object(p)) = profile {
        keys.extend(p.keys());
    }
    for k in keys {
        if is_extended_resource(k) && !a.contains_key(k) {
            if let Some(v) = field(job, profile, k) {
                a.insert(
                    k.clone(),
                    parse_quantity(k, v).map_err(|e| format!("{k}: {e}"))?,
                );
            }
        }
    }
    Ok(a)
}

/// Whether a job asks for neither cpu nor memory (in its fields or its
/// profile's): most Batsim workloads (Batsim's own, pybatsim's,
/// batsched's) do not, because a Batsim job on N machines has them to
/// itself.
pub fn asks_for_no_cpu_or_memory(job: &Job, profile: Option<&Value>) -> bool {
    ["cpu", "memory", "mem"]
        .iter()
        .all(|k| field(job, profile, k).is_none())
}

/// What a job that asks for neither cpu nor memory means
/// (`--no-requests-means`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum NoRequests {
    /// What it means in Batsim: each of its pods takes its node whole
    /// ([`WholeNode`]).
    #[default]
    WholeNode,
    /// Pods that ask for nothing: Kubernetes may put any number of them
    /// on one node (batkube's meaning before whole nodes).
    Nothing,
}

impl NoRequests {
    pub fn as_str(self) -> &'static str {
        match self {
            NoRequests::WholeNode => "whole-node",
            NoRequests::Nothing => "nothing",
        }
    }
}

/// Label of a pod that takes its node whole ([`WholeNode`]), `"true"`.
pub const WHOLE_NODE_LABEL: &str = "batkube.io/whole-node";

/// How a pod of a job that asks for neither cpu nor memory takes its node
/// whole on a given platform, so that any scheduler honours it through
/// the API:
///
/// - where the nodes are alike (one cpu and memory allocatable for all),
///   the pod requests a node's whole cpu and memory: nothing else that
///   asks for cpu fits beside it, and quotas (Kueue, Volcano, YuniKorn)
///   count it as the machine it takes;
/// - where they differ, no one request is a whole node everywhere: the
///   pod requests the smallest node's cpu and memory (so it fits any
///   node) and carries a required anti-affinity on
///   `kubernetes.io/hostname` against every pod (nothing else runs on its
///   node, and, the rule being symmetric, nothing comes to it later); the
///   broker counts it as using its node's whole allocatable once bound.
///
/// A gang's pods each take one node whole (they are on distinct nodes
/// anyway). YuniKorn's gang placeholders are left out of the
/// anti-affinity (a real pod replaces its placeholder on the placeholder's
/// node, and YuniKorn checks the real pod's affinity there while the
/// placeholder is still on it), and keep away from whole-node pods of
/// other jobs themselves (see [`yunikorn_task_groups`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WholeNode {
    /// The cpu (and memory, where nodes have some) of the smallest node.
    pub requests: Amounts,
    /// The nodes' cpu or memory differ: the anti-affinity is needed.
    pub nodes_differ: bool,
}

impl WholeNode {
    /// From the allocatable of the platform's nodes (None: no nodes).
    pub fn of<'a>(nodes: impl IntoIterator<Item = &'a Amounts>) -> Option<WholeNode> {
        let shape = |a: &Amounts| -> Amounts {
            ["cpu", "memory"]
                .iter()
                .filter_map(|k| a.get(*k).map(|v| (k.to_string(), *v)))
                .collect()
        };
        let mut nodes = nodes.into_iter().map(shape);
        let first = nodes.next()?;
        let mut smallest = first.clone();
        let mut nodes_differ = false;
        for n in nodes {
            if n != first {
                nodes_differ = true;
            }
            for k in ["cpu", "memory"] {
                match (smallest.get(k).copied(), n.get(k).copied()) {
                    (Some(a), Some(b)) => {
                        smallest.insert(k.into(), a.min(b));
                    }
                    // A node without memory: no memory request fits it.
                    (Some(_), None) => {
                        smallest.remove(k);
                    }
                    _ => {}
                }
            }
        }
        Some(WholeNode {
            requests: smallest,
            nodes_differ,
        })
    }

    /// The required anti-affinity term of a whole-node pod where nodes
    /// differ: every pod but YuniKorn's placeholders.
    fn term() -> PodAffinityTerm {
        PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: YUNIKORN_PLACEHOLDER_LABEL.into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                }]),
                ..Default::default()
            }),
            topology_key: "kubernetes.io/hostname".into(),
            ..Default::default()
        }
    }

    /// Makes `pod` (a job's template pod) take its node whole.
    fn apply(&self, pod: &mut Pod) {
        pod.metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(WHOLE_NODE_LABEL.into(), "true".into());
        let Some(spec) = pod.spec.as_mut() else {
            return;
        };
        if let Some(c) = spec.containers.first_mut() {
            let requests = c
                .resources
                .get_or_insert_with(Default::default)
                .requests
                .get_or_insert_with(BTreeMap::new);
            for (k, v) in &self.requests {
                requests.insert(k.clone(), format_quantity(k, *v));
            }
        }
        if self.nodes_differ {
            add_anti_affinity(spec, Self::term());
        }
    }
}

/// Adds a required pod anti-affinity term to a pod's spec.
fn add_anti_affinity(spec: &mut PodSpec, term: PodAffinityTerm) {
    spec.affinity
        .get_or_insert_with(Default::default)
        .pod_anti_affinity
        .get_or_insert_with(Default::default)
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(Vec::new)
        .push(term);
}

/// Label every pod of a gang carries: the group's name (its job's pod
/// name); its pods' anti-affinity selects on it.
pub const GANG_LABEL: &str = "batkube.io/gang";
/// Annotation with the number of pods of a gang.
pub const GANG_SIZE_ANNOTATION: &str = "batkube.io/gang-size";

/// How a gang is written for the scheduler (`--gang`): the conventions of
/// the gang schedulers researchers evaluate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum GangStyle {
    /// kubernetes-sigs/scheduler-plugins' Coscheduling: a
    /// `scheduling.x-k8s.io/v1alpha1` PodGroup with `minMember` N, pods
    /// labelled `scheduling.x-k8s.io/pod-group`.
    #[default]
    Coscheduling,
    /// Volcano: a `scheduling.volcano.sh/v1beta1` PodGroup, pods annotated
    /// `scheduling.k8s.io/group-name`; every pod (a single machine's too)
    /// annotated `scheduling.volcano.sh/queue-name` with its queue, which
    /// is never empty (see [`job_queue_or`]).
    Volcano,
    /// Kueue's plain pod groups: pods labelled
    /// `kueue.x-k8s.io/pod-group-name`, annotated
    /// `kueue.x-k8s.io/pod-group-total-count` (Kueue makes the Workload).
    Kueue,
    /// Apache YuniKorn: every job an application (`applicationId`) in its
    /// queue (`queue`), `schedulerName: yunikorn`, what YuniKorn's
    /// admission controller writes; a gang one task group
    /// (`yunikorn.apache.org/task-groups`, `task-group-name`,
    /// `schedulingPolicyParameters`) whose placeholders YuniKorn creates.
    Yunikorn,
    /// Plain pods (with their anti-affinity): no group for the scheduler.
    None,
}

impl GangStyle {
    pub fn as_str(self) -> &'static str {
        match self {
            GangStyle::Coscheduling => "coscheduling",
            GangStyle::Volcano => "volcano",
            GangStyle::Kueue => "kueue",
            GangStyle::Yunikorn => "yunikorn",
            GangStyle::None => "none",
        }
    }

    /// The `schedulerName` this style's pods get when their job names none
    /// and `--scheduler-name` is not given: the scheduler whose convention
    /// it is, where that scheduler serves another name than
    /// `default-scheduler` (Volcano's programs serve `volcano`; YuniKorn's
    /// admission controller writes `yunikorn`).
    pub fn scheduler_name(self) -> Option<&'static str> {
        match self {
            GangStyle::Volcano => Some("volcano"),
            GangStyle::Yunikorn => Some(YUNIKORN_SCHEDULER_NAME),
            GangStyle::Coscheduling | GangStyle::Kueue | GangStyle::None => None,
        }
    }

    /// The resource (qualified plural) of the group object this style
    /// writes before a gang's pods, if any.
    pub fn group_resource(self) -> Option<&'static str> {
        match self {
            GangStyle::Coscheduling => Some("podgroups.scheduling.x-k8s.io"),
            GangStyle::Volcano => Some("podgroups.scheduling.volcano.sh"),
            GangStyle::Kueue | GangStyle::Yunikorn | GangStyle::None => None,
        }
    }
}

/// The group object of a gang of `size` pods named `group`, in the
/// convention of `style` (None: the style has none).
pub fn group_object(
    style: GangStyle,
    group: &str,
    size: u32,
    queue: Option<&str>,
) -> Option<Value> {
    let meta = serde_json::json!({"name": group, "namespace": NAMESPACE});
    match style {
        GangStyle::Coscheduling => Some(serde_json::json!({
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": meta,
            "spec": {"minMember": size},
        })),
        GangStyle::Volcano => {
            let mut spec = serde_json::json!({"minMember": size});
            if let Some(q) = queue {
                spec["queue"] = Value::String(q.to_string());
            }
            Some(serde_json::json!({
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": meta,
                "spec": spec,
            }))
        }
        GangStyle::Kueue | GangStyle::Yunikorn | GangStyle::None => None,
    }
}

/// Kueue's LocalQueue label on a job's pods (the job's `queue`).
pub const KUEUE_QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
/// Kueue's label (and finalizer) on the pods it manages.
pub const KUEUE_MANAGED: &str = "kueue.x-k8s.io/managed";
/// The scheduling gate Kueue removes when it admits a pod's workload.
pub const KUEUE_ADMISSION_GATE: &str = "kueue.x-k8s.io/admission";
/// Kueue's pod-group label (a gang) and its size annotation.
pub const KUEUE_POD_GROUP_LABEL: &str = "kueue.x-k8s.io/pod-group-name";
pub const KUEUE_GROUP_TOTAL_COUNT: &str = "kueue.x-k8s.io/pod-group-total-count";
/// Kueue ends a pod group's workload when a pod of it fails, if "false".
pub const KUEUE_RETRIABLE_IN_GROUP: &str = "kueue.x-k8s.io/retriable-in-group";

/// What Kueue's pod webhook (`PodWebhook.Default`, sigs.k8s.io/kueue
/// v0.17 `pkg/controller/jobs/pod`) writes on a pod that names a
/// LocalQueue, written here because batkube runs Kueue without its
/// webhooks: the queue label, the `kueue.x-k8s.io/managed` label (Kueue's
/// pod reconciler skips pods without it), the finalizer of the same name
/// (Kueue removes it once the workload is finished, so a pod stays in the
/// API until then) and the `kueue.x-k8s.io/admission` scheduling gate (the
/// scheduler leaves the pod alone until Kueue admits its workload and
/// removes the gate). Not written: the `kueue.x-k8s.io/role-hash`
/// annotation, which Kueue computes from the spec when absent (the same
/// for every pod of a gang, as long as admission does not change the
/// spec's nodeSelector: use ResourceFlavors without nodeLabels). A job
/// without a queue is left alone, as the webhook leaves it (with
/// `manageJobsWithoutQueueName` off, Kueue's default).
fn kueue_admission(pod: &mut Pod, queue: Option<&str>) {
    let Some(q) = queue.filter(|q| !q.is_empty()) else {
        return;
    };
    let m = &mut pod.metadata;
    let labels = m.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(KUEUE_QUEUE_LABEL.into(), q.to_string());
    labels.insert(KUEUE_MANAGED.into(), "true".into());
    m.finalizers
        .get_or_insert_with(Vec::new)
        .push(KUEUE_MANAGED.into());
    if let Some(spec) = pod.spec.as_mut() {
        spec.scheduling_gates
            .get_or_insert_with(Vec::new)
            .push(PodSchedulingGate {
                name: KUEUE_ADMISSION_GATE.into(),
            });
    }
}

/// The scheduler name YuniKorn serves (`constants.SchedulerName`).
pub const YUNIKORN_SCHEDULER_NAME: &str = "yunikorn";
/// YuniKorn's application id: the canonical label and the older one its
/// admission controller adds beside it.
pub const YUNIKORN_APP_ID_LABEL: &str = "yunikorn.apache.org/app-id";
pub const YUNIKORN_APPLICATION_ID: &str = "applicationId";
/// YuniKorn's queue: the canonical label and the older one its admission
/// controller adds beside it.
pub const YUNIKORN_QUEUE_LABEL: &str = "yunikorn.apache.org/queue";
pub const YUNIKORN_QUEUE: &str = "queue";
/// YuniKorn's gang annotations: the pod's task group, the application's
/// task groups (JSON) and its gang policy.
pub const YUNIKORN_TASK_GROUP_NAME: &str = "yunikorn.apache.org/task-group-name";
pub const YUNIKORN_TASK_GROUPS: &str = "yunikorn.apache.org/task-groups";
pub const YUNIKORN_SCHEDULING_POLICY: &str = "yunikorn.apache.org/schedulingPolicyParameters";
/// The label a gang's placeholders carry (through its task group), and
/// their anti-affinity selects on, one placeholder per node. Not
/// [`GANG_LABEL`]: a real pod replaces a placeholder on its node, and
/// YuniKorn checks the real pod's own anti-affinity (on [`GANG_LABEL`])
/// there while the placeholder is still on it.
pub const YUNIKORN_PLACEHOLDER_LABEL: &str = "batkube.io/placeholder-of";
/// The gang policy written on a gang's pods: YuniKorn's defaults (15
/// minutes for the placeholders to be allocated and replaced, then, Soft,
/// the pods are scheduled one by one), written out. Hard would fail the
/// application's pods instead.
pub const YUNIKORN_GANG_POLICY: &str = "placeholderTimeoutInSeconds=900 gangSchedulingStyle=Soft";

/// What YuniKorn's admission controller (yunikorn-k8shim v1.8
/// `pkg/admission`, `processPod`, with its defaults) writes on a pod it
/// admits, written here because batkube runs no admission webhooks:
/// `schedulerName: yunikorn` (set by the broker through
/// [`GangStyle::scheduler_name`] on the pods of jobs that name no
/// scheduler), the application id labels (the id is what the submitter
/// gives: here the job's pod name, so that a gang is one application),
/// the queue labels when the job has a queue (the canonical label and the
/// older `queue` one the controller adds beside it), the user who created
/// the pod (`yunikorn.apache.org/user.info`: the broker, `batkube`, in
/// `system:authenticated`; it matters for the queues' ACLs and user
/// limits) and `yunikorn.apache.org/allow-preemption: "true"` (a pod
/// without a PriorityClass may be preempted).
fn yunikorn_admission(pod: &mut Pod, app_id: &str, queue: Option<&str>) {
    let m = &mut pod.metadata;
    let labels = m.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(YUNIKORN_APP_ID_LABEL.into(), app_id.to_string());
    labels.insert(YUNIKORN_APPLICATION_ID.into(), app_id.to_string());
    if let Some(q) = queue.filter(|q| !q.is_empty()) {
        labels.insert(YUNIKORN_QUEUE_LABEL.into(), q.to_string());
        labels.insert(YUNIKORN_QUEUE.into(), q.to_string());
    }
    let annotations = m.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(
        "yunikorn.apache.org/user.info".into(),
        r#"{"user":"batkube","groups":["system:authenticated"]}"#.into(),
    );
    annotations.insert("yunikorn.apache.org/allow-preemption".into(), "true".into());
}

/// A gang's task group, as YuniKorn's gang scheduling documentation has
/// the submitter write it (`yunikorn.apache.org/task-groups`): `size`
/// members of the pods' requests, its placeholders placed as the pods
/// would be (the job's nodeSelector) and one per node (a required
/// anti-affinity on [`YUNIKORN_PLACEHOLDER_LABEL`]).
///
/// Where whole-node pods carry an anti-affinity ([`WholeNode`]), the
/// placeholders, which it leaves out, keep away from the whole-node pods
/// of other jobs themselves (`away_from_whole_nodes`).
fn yunikorn_task_groups(
    group: &str,
    size: u32,
    template: &Pod,
    away_from_whole_nodes: bool,
) -> String {
    let requests: Map<String, Value> = pod_requests(template)
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(format_quantity(k, *v).0)))
        .collect();
    let mut tg = serde_json::json!({
        "name": YUNIKORN_TASK_GROUP,
        "minMember": size,
        "minResource": requests,
        "labels": {YUNIKORN_PLACEHOLDER_LABEL: group},
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {YUNIKORN_PLACEHOLDER_LABEL: group}},
            "topologyKey": "kubernetes.io/hostname",
        }]}},
    });
    if let Some(sel) = template
        .spec
        .as_ref()
        .and_then(|s| s.node_selector.as_ref())
    {
        tg["nodeSelector"] = serde_json::json!(sel);
    }
    if away_from_whole_nodes {
        let terms = &mut tg["affinity"]["podAntiAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"];
        if let Value::Array(terms) = terms {
            terms.push(serde_json::json!({
                "labelSelector": {"matchExpressions": [
                    {"key": WHOLE_NODE_LABEL, "operator": "Exists"},
                    {"key": GANG_LABEL, "operator": "NotIn", "values": [group]},
                ]},
                "topologyKey": "kubernetes.io/hostname",
            }));
        }
    }
    Value::Array(vec![tg]).to_string()
}

/// The name of a gang's one task group.
pub const YUNIKORN_TASK_GROUP: &str = "gang";

/// The queue a job names (`queue`, in the job or its profile).
pub fn job_queue<'a>(job: &'a Job, profile: Option<&'a Value>) -> Option<&'a str> {
    field(job, profile, "queue").and_then(Value::as_str)
}

/// Volcano's queue for what names none: what its PodGroup admission
/// webhook writes into a PodGroup without `spec.queue`
/// (`schedulingv1beta1.DefaultQueue`), and the queue vc-scheduler creates
/// at start.
pub const VOLCANO_DEFAULT_QUEUE: &str = "default";

/// The queue of a job under `style`: the one it names, else `default_queue`
/// (`--default-queue`), else for Volcano its admission's default (a
/// PodGroup whose queue is empty belongs to no queue, and vc-scheduler
/// never schedules it), else none.
pub fn job_queue_or<'a>(
    style: GangStyle,
    job: &'a Job,
    profile: Option<&'a Value>,
    default_queue: Option<&'a str>,
) -> Option<&'a str> {
    job_queue(job, profile)
        .or(default_queue)
        .or((style == GangStyle::Volcano).then_some(VOLCANO_DEFAULT_QUEUE))
}

/// The pods of a submitted job: one for a job on one machine, a gang of
/// `res` for a parallel job (see the module doc); or why it cannot be.
/// `default_queue`: the queue of a job that names none (`--default-queue`).
pub fn pods_from_job(
    job_id: &str,
    job: &Job,
    profile: Option<&Value>,
    created: Time,
    style: GangStyle,
    default_queue: Option<&str>,
) -> Result<Vec<Pod>, String> {
    pods_from_job_on(job_id, job, profile, created, style, default_queue, None)
}

/// [`pods_from_job`], where a job that asks for neither cpu nor memory
/// ([`asks_for_no_cpu_or_memory`]) takes its nodes whole as `whole_node`
/// says (None: its pods ask for nothing).
pub fn pods_from_job_on(
    job_id: &str,
    job: &Job,
    profile: Option<&Value>,
    created: Time,
    style: GangStyle,
    default_queue: Option<&str>,
    whole_node: Option<&WholeNode>,
) -> Result<Vec<Pod>, String> {
    let n = job.res;
    if n == 0 {
        return Err("it asks for 0 machines".into());
    }
    let mut pod = template_pod(job_id, job, profile, created)?;
    let whole_node = whole_node.filter(|_| asks_for_no_cpu_or_memory(job, profile));
    if let Some(w) = whole_node {
        w.apply(&mut pod);
    }
    let queue = job_queue_or(style, job, profile, default_queue);
    if let (GangStyle::Volcano, Some(q)) = (style, queue) {
        // Read by Volcano's PodGroup controller when it makes the PodGroup
        // of a pod that has none (a single machine's job); the same on a
        // gang's pods, whose PodGroup the broker writes with this queue.
        pod.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert("scheduling.volcano.sh/queue-name".into(), q.to_string());
    }
    if style == GangStyle::Kueue {
        kueue_admission(&mut pod, queue);
    }
    let group = pod_name(job_id);
    if style == GangStyle::Yunikorn {
        yunikorn_admission(&mut pod, &group, queue);
    }
    if n == 1 {
        return Ok(vec![pod]);
    }
    let task_groups = (style == GangStyle::Yunikorn)
        .then(|| yunikorn_task_groups(&group, n, &pod, whole_node.is_some_and(|w| w.nodes_differ)));
    let anti = PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(GANG_LABEL.to_string(), group.clone())])),
            ..Default::default()
        }),
        topology_key: "kubernetes.io/hostname".into(),
        ..Default::default()
    };
    Ok((0..n)
        .map(|k| {
            let mut p = pod.clone();
            let m = &mut p.metadata;
            m.name = Some(format!("{group}-{k}"));
            let labels = m.labels.get_or_insert_with(BTreeMap::new);
            labels.insert(GANG_LABEL.into(), group.clone());
            let annotations = m.annotations.get_or_insert_with(BTreeMap::new);
            annotations.insert(GANG_SIZE_ANNOTATION.into(), n.to_string());
            match style {
                GangStyle::Coscheduling => {
                    labels.insert("scheduling.x-k8s.io/pod-group".into(), group.clone());
                }
                GangStyle::Volcano => {
                    annotations.insert("scheduling.k8s.io/group-name".into(), group.clone());
                }
                GangStyle::Kueue => {
                    // The queue label, managed label, finalizer and gate
                    // are the template's (kueue_admission).
                    labels.insert(KUEUE_POD_GROUP_LABEL.into(), group.clone());
                    annotations.insert(KUEUE_GROUP_TOTAL_COUNT.into(), n.to_string());
                    // A Batsim job whose pods are killed (preempted) is over,
                    // not re-run by new pods: without this Kueue keeps a
                    // preempted group's workload waiting for replacement
                    // pods (seen: re-admitted every 40 ms of simulated time,
                    // for ever) and never releases the pods' finalizers.
                    annotations.insert(KUEUE_RETRIABLE_IN_GROUP.into(), "false".into());
                }
                GangStyle::Yunikorn => {
                    // The application id and queue are the template's
                    // (yunikorn_admission); every member carries the task
                    // groups (YuniKorn reads them from the first pod it
                    // sees of the application).
                    annotations.insert(YUNIKORN_TASK_GROUP_NAME.into(), YUNIKORN_TASK_GROUP.into());
                    if let Some(tg) = &task_groups {
                        annotations.insert(YUNIKORN_TASK_GROUPS.into(), tg.clone());
                    }
                    annotations.insert(
                        YUNIKORN_SCHEDULING_POLICY.into(),
                        YUNIKORN_GANG_POLICY.into(),
                    );
                }
                GangStyle::None => {}
            }
            if let Some(spec) = p.spec.as_mut() {
                add_anti_affinity(spec, anti.clone());
            }
            p
        })
        .collect())
}

/// What one Batsim job is submitted as (`--submit-as`): its pods, or an
/// object of a workload API whose controller makes them, as users submit
/// jobs to a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SubmitAs {
    /// The job's pods (and its gang's group object), written by the broker.
    #[default]
    Pod,
    /// A `batch/v1` Job: `completions` = `parallelism` = N, Indexed for
    /// N > 1; kube-controller-manager's job controller makes its pods.
    Job,
    /// A Volcano Job (`batch.volcano.sh/v1alpha1`): one task of N
    /// replicas, `minAvailable` N; vc-controller-manager makes its
    /// PodGroup and pods.
    Vcjob,
    /// A JobSet (`jobset.x-k8s.io/v1alpha2`) with one replicated job (the
    /// Job above); JobSet's controller makes the Job.
    Jobset,
}

/// The replicated job of a JobSet, and a Volcano Job's task.
pub const MAIN_TASK: &str = "main";
/// The annotation a batch/v1 Indexed Job's pods carry their index in.
pub const JOB_COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// The annotation a Volcano Job's pods carry their index in their task in.
pub const VOLCANO_TASK_INDEX: &str = "volcano.sh/task-index";
/// The label JobSet's controller puts on its Jobs and their pods: the
/// JobSet's name (their controller reference names the Job, not the JobSet).
pub const JOBSET_NAME_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";

impl SubmitAs {
    pub fn as_str(self) -> &'static str {
        match self {
            SubmitAs::Pod => "pod",
            SubmitAs::Job => "job",
            SubmitAs::Vcjob => "vcjob",
            SubmitAs::Jobset => "jobset",
        }
    }

    /// The resource (qualified plural) of the object a job becomes, if
    /// not its pods.
    pub fn resource(self) -> Option<&'static str> {
        match self {
            SubmitAs::Pod => None,
            SubmitAs::Job => Some("jobs.batch"),
            SubmitAs::Vcjob => Some("jobs.batch.volcano.sh"),
            SubmitAs::Jobset => Some("jobsets.jobset.x-k8s.io"),
        }
    }

    /// The `--gang` style the pods of its template are written in: Kueue
    /// manages a Job itself (its queue label on the Job, not its pod-group
    /// labels on the pods); a Volcano Job is its own gang
    /// (`minAvailable`), whose PodGroup vc-controller-manager makes and
    /// names on its pods.
    pub fn pod_style(self, gang: GangStyle) -> GangStyle {
        match (self, gang) {
            (SubmitAs::Pod, g) => g,
            (SubmitAs::Vcjob, _) => GangStyle::None,
            (_, GangStyle::Kueue) => GangStyle::None,
            (_, g) => g,
        }
    }

    /// Its kind, as messages name it.
    pub fn kind(self) -> &'static str {
        match self {
            SubmitAs::Pod => "Pod",
            SubmitAs::Job => "Job",
            SubmitAs::Vcjob => "Job (batch.volcano.sh)",
            SubmitAs::Jobset => "JobSet",
        }
    }
}

/// A pod of [`pods_from_job`] as a controller's pod template: its labels,
/// annotations and spec, no name, no status.
fn pod_template(pod: &Pod) -> Value {
    let mut t = serde_json::to_value(pod).expect("a Pod serializes");
    if let Some(m) = t["metadata"].as_object_mut() {
        m.retain(|k, _| k == "labels" || k == "annotations");
    }
    if let Some(o) = t.as_object_mut() {
        o.remove("status");
        o.remove("apiVersion");
        o.remove("kind");
    }
    t
}

/// The object one Batsim job becomes under `submit` (a Job, a Volcano
/// Job), with `pod` (the first of the job's pods as [`pods_from_job`] made
/// them, in [`SubmitAs::pod_style`]) as its N pods' template, plus the
/// job's walltime as the pods' `activeDeadlineSeconds` (the kubelet's
/// limit); or why it cannot be. A Job's `backoffLimit` is the job's
/// `backoffLimit` field, else 0 (a Batsim job's failure is its end), and a
/// pod disrupted (evicted, preempted: its `DisruptionTarget` condition) is
/// replaced without counting (`podFailurePolicy`), as a node's failure
/// does not fail a job. A JobSet's `failurePolicy.maxRestarts` is the
/// job's `maxRestarts` field, else none (JobSet's default: no restart). The queue (`queue`, else `default_queue`) is
/// Kueue's `queue-name` label on the Job under `--gang kueue`, a Volcano
/// Job's `spec.queue`.
pub fn workload_object(
    submit: SubmitAs,
    job_id: &str,
    job: &Job,
    profile: Option<&Value>,
    pod: &Pod,
    gang: GangStyle,
    default_queue: Option<&str>,
) -> Result<Value, String> {
    let n = job.res;
    let mut template = pod_template(pod);
    if let Some(w) = job.walltime.filter(|w| *w > 0.0) {
        template["spec"]["activeDeadlineSeconds"] = json!(w.ceil() as i64);
    }
    let name = pod_name(job_id);
    let queue = job_queue_or(gang, job, profile, default_queue);
    let mut labels = serde_json::Map::new();
    if let Some(w) = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(WORKLOAD_LABEL))
    {
        labels.insert(WORKLOAD_LABEL.into(), json!(w));
    }
    if let (GangStyle::Kueue, Some(q)) = (gang, queue.filter(|q| !q.is_empty())) {
        labels.insert(KUEUE_QUEUE_LABEL.into(), json!(q));
    }
    let meta = json!({
        "name": name,
        "namespace": NAMESPACE,
        "labels": labels,
        "annotations": {JOB_ID_ANNOTATION: job_id},
    });
    let backoff = match field(job, profile, "backoffLimit") {
        None => 0,
        Some(v) => value_as_f64(v)
            .filter(|b| b.fract() == 0.0 && (0.0..=2e9).contains(b))
            .ok_or_else(|| format!("backoffLimit {v} is not a non-negative integer"))?
            as i64,
    };
    let job_spec = || {
        let mut spec = json!({
            "completions": n,
            "parallelism": n,
            "backoffLimit": backoff,
            "podFailurePolicy": {"rules": [
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            ]},
            "template": template.clone(),
        });
        if n > 1 {
            spec["completionMode"] = json!("Indexed");
        }
        spec
    };
    Ok(match submit {
        SubmitAs::Pod => return Err("pods are not a workload object".into()),
        SubmitAs::Job => json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": meta,
            "spec": job_spec(),
        }),
        SubmitAs::Vcjob => {
            let scheduler = template["spec"]["schedulerName"].clone();
            let mut spec = json!({
                "minAvailable": n,
                "schedulerName": scheduler,
                "tasks": [{"name": MAIN_TASK, "replicas": n, "template": template}],
            });
            if let Some(q) = queue.filter(|q| !q.is_empty()) {
                spec["queue"] = json!(q);
            }
            json!({
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "metadata": meta,
                "spec": spec,
            })
        }
        SubmitAs::Jobset => {
            let mut spec = json!({
                "replicatedJobs": [{"name": MAIN_TASK, "replicas": 1,
                                    "template": {"spec": job_spec()}}],
            });
            // JobSet's own retries: a failed Job restarts the whole JobSet
            // (its Jobs recreated) up to maxRestarts times.
            if let Some(v) = field(job, profile, "maxRestarts") {
                let restarts = value_as_f64(v)
                    .filter(|r| r.fract() == 0.0 && (0.0..=2e9).contains(r))
                    .ok_or_else(|| format!("maxRestarts {v} is not a non-negative integer"))?;
                spec["failurePolicy"] = json!({"maxRestarts": restarts as i64});
            }
            json!({
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": meta,
                "spec": spec,
            })
        }
    })
}

/// Builds the pod of a job on one machine, or says why the job cannot be
/// one (a parallel job is a gang: [`pods_from_job`]).
pub fn pod_from_job(
    job_id: &str,
    job: &Job,
    profile: Option<&Value>,
    created: Time,
) -> Result<Pod, String> {
    if job.res != 1 {
        return Err(format!(
            "it asks for {} machines; one pod runs on one node (a parallel job is a gang of pods)",
            job.res
        ));
    }
    template_pod(job_id, job, profile, created)
}

/// The pod of a job on one machine, and the template of a gang's pods.
fn template_pod(
    job_id: &str,
    job: &Job,
    profile: Option<&Value>,
    created: Time,
) -> Result<Pod, String> {
    let kind = profile.and_then(|p| p.get("type")).and_then(Value::as_str);
    if let Some(kind) = kind {
        if !KNOWN_PROFILE_TYPES.contains(&kind) {
            return Err(format!("its profile type {kind:?} is unknown"));
        }
    }
    let requests = job_requests(job, profile)?;
    let scheduler = match field(job, profile, "scheduler").and_then(Value::as_str) {
        None | Some("default") | Some("") => "default-scheduler".to_string(),
        Some(s) => s.to_string(),
    };
    let priority = match field(job, profile, "priority") {
        None => None,
        Some(v) => Some(
            value_as_f64(v)
                .filter(|p| p.fract() == 0.0 && p.abs() <= 2e9)
                .ok_or_else(|| format!("priority {v} is not an integer"))? as i32,
        ),
    };
    let node_selector = match field(job, profile, "nodeSelector")
        .or_else(|| field(job, profile, "node_selector"))
    {
        None => None,
        Some(Value::Object(m)) => Some(string_map(m, "nodeSelector")?),
        Some(other) => return Err(format!("nodeSelector {other} is not an object")),
    };
    let mut labels = match field(job, profile, "labels") {
        None => BTreeMap::new(),
        Some(Value::Object(m)) => string_map(m, "labels")?,
        Some(other) => return Err(format!("labels {other} is not an object")),
    };
    let workload = job_id.split_once('!').map(|(w, _)| w).unwrap_or("");
    if is_label_value(workload) {
        labels.insert(WORKLOAD_LABEL.into(), workload.to_string());
    }
    let delay = profile
        .and_then(|p| p.get("delay"))
        .and_then(value_as_f64)
        .unwrap_or(0.0);
    let mut annotations = BTreeMap::new();
    annotations.insert(JOB_ID_ANNOTATION.to_string(), job_id.to_string());
    let requests_q: BTreeMap<String, Quantity> = requests
        .iter()
        .map(|(k, v)| (k.clone(), format_quantity(k, *v)))
        .collect();
    Ok(Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(job_id)),
            namespace: Some(NAMESPACE.into()),
            labels: Some(labels),
            annotations: Some(annotations),
            creation_timestamp: Some(created),
            ..Default::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some(scheduler),
            priority,
            node_selector,
            restart_policy: Some("Never".into()),
            containers: vec![Container {
                name: "job".into(),
                image: Some("busybox".into()),
                command: Some(vec!["sleep".into(), format_seconds(delay)]),
                resources: Some(ResourceRequirements {
                    requests: (!requests_q.is_empty()).then_some(requests_q),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Pending".into()),
            ..Default::default()
        }),
    })
}

fn format_seconds(s: f64) -> String {
    if s.fract() == 0.0 {
        format!("{}", s as i64)
    } else {
        format!("{s}")
    }
}

fn string_map(m: &Map<String, Value>, what: &str) -> Result<BTreeMap<String, String>, String> {
    m.iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            Value::Number(n) => Ok((k.clone(), n.to_string())),
            Value::Bool(b) => Ok((k.clone(), b.to_string())),
            other => Err(format!("{what}: {k} = {other} is not a string")),
        })
        .collect()
}

/// Requests of a pod (sum of containers, or the largest init container,
/// whichever is larger, plus overhead), in integral units.
pub fn pod_requests(pod: &Pod) -> Amounts {
    let mut sum = Amounts::new();
    let Some(spec) = &pod.spec else { return sum };
    let add = |acc: &mut Amounts, rr: &Option<ResourceRequirements>| {
        if let Some(req) = rr.as_ref().and_then(|r| r.requests.as_ref()) {
            for (k, q) in req {
                if let Ok(v) = parse_quantity(k, &Value::String(q.0.clone())) {
                    *acc.entry(k.clone()).or_default() += v;
                }
            }
        }
    };
    for c in &spec.containers {
        add(&mut sum, &c.resources);
    }
    for c in spec.init_containers.iter().flatten() {
        let mut one = Amounts::new();
        add(&mut one, &c.resources);
        for (k, v) in one {
            let e = sum.entry(k).or_default();
            *e = (*e).max(v);
        }
    }
    for (k, q) in spec.overhead.iter().flatten() {
        if let Ok(v) = parse_quantity(k, &Value::String(q.0.clone())) {
            *sum.entry(k.clone()).or_default() += v;
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;
    use std::collections::BTreeSet;

    fn t0() -> Time {
        Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
    }

    fn resource(props: Value) -> Resource {
        serde_json::from_value(json!({"id": 3, "name": "graphene-4.nancy.grid5000.fr",
            "state": "idle", "properties": props}))
        .unwrap()
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("cpu", &json!("4000m")).unwrap(), 4000);
        assert_eq!(parse_quantity("cpu", &json!("1")).unwrap(), 1000);
        assert_eq!(parse_quantity("cpu", &json!(3.516)).unwrap(), 3516);
        assert_eq!(parse_quantity("cpu", &json!(0.1)).unwrap(), 100);
        assert_eq!(parse_quantity("memory", &json!("4Gi")).unwrap(), 4 << 30);
        assert_eq!(parse_quantity("memory", &json!("8192")).unwrap(), 8192);
        assert_eq!(parse_quantity("memory", &json!("1e3")).unwrap(), 1000);
        assert!(parse_quantity("cpu", &json!("four")).is_err());
        assert!(parse_quantity("cpu", &json!("-1")).is_err());
        assert!(parse_quantity("cpu", &json!("1e400")).is_err());
        assert_eq!(format_quantity("cpu", 1500).0, "1500m");
        assert_eq!(format_quantity("cpu", 2000).0, "2");
    }

    #[test]
    fn hosts_become_ready_nodes() {
        let n = node_from_host(
            &resource(
                json!({"role": "", "core": "1", "memory": "4Gi", "gpu_model": "none",
                "nvidia.com/gpu": "2", "speed": "16.673E9f"}),
            ),
            t0(),
        )
        .unwrap();
        assert_eq!(
            n.metadata.name.as_deref(),
            Some("graphene-4.nancy.grid5000.fr")
        );
        let st = n.status.unwrap();
        let alloc = st.allocatable.unwrap();
        assert_eq!(alloc["cpu"].0, "1");
        assert_eq!(alloc["memory"].0, (4u64 << 30).to_string());
        assert_eq!(alloc["pods"].0, "110");
        assert_eq!(alloc["nvidia.com/gpu"].0, "2");
        assert_eq!(n.metadata.labels.unwrap()["gpu_model"], "none");
        assert_eq!(st.conditions.unwrap()[0].type_, "Ready");
    }

    #[test]
    fn names_are_dns1123_and_distinct() {
        assert_eq!(dns1123("node0"), "node0");
        let a = dns1123("master_host");
        assert!(is_dns1123_subdomain(&a), "{a}");
        assert_ne!(dns1123("Node_A"), dns1123("node-a"));
        assert_eq!(pod_name("w0!17"), "w0-17");
        assert!(is_dns1123_subdomain(&pod_name("w0!Job_17")));
        assert_ne!(pod_name("w0!a_b"), pod_name("w0!a-b"));
    }

    fn job(v: Value) -> Job {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn jobs_become_pods() {
        let j = job(
            json!({"id": "w0!1", "subtime": 0, "res": 1, "profile": "delay",
            "priority": 5, "nodeSelector": {"disk": "ssd"}}),
        );
        let p = json!({"type": "delay", "delay": 170, "scheduler": "default", "cpu": "1"});
        let pod = pod_from_job("w0!1", &j, Some(&p), t0()).unwrap();
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
        assert_eq!(spec.priority, Some(5));
        assert_eq!(spec.node_selector.as_ref().unwrap()["disk"], "ssd");
        assert_eq!(pod_requests(&pod)["cpu"], 1000);
        assert_eq!(
            pod.metadata.annotations.as_ref().unwrap()[JOB_ID_ANNOTATION],
            "w0!1"
        );
        // The job's own field wins over the profile's.
        let j = job(
            json!({"id": "w0!2", "subtime": 0, "res": 1, "profile": "delay", "cpu": 2, "mem": "1Gi"}),
        );
        let pod = pod_from_job("w0!2", &j, Some(&p), t0()).unwrap();
        assert_eq!(pod_requests(&pod)["cpu"], 2000);
        assert_eq!(pod_requests(&pod)["memory"], 1 << 30);
    }

    #[test]
    fn a_parallel_job_is_a_gang_of_pods_with_their_anti_affinity() {
        let p = json!({"type": "delay", "delay": 5, "cpu": "2"});
        let j = job(json!({"id": "w0!7", "subtime": 0, "res": 3, "profile": "d", "queue": "q1"}));
        for style in [
            GangStyle::Coscheduling,
            GangStyle::Volcano,
            GangStyle::Kueue,
            GangStyle::Yunikorn,
            GangStyle::None,
        ] {
            let pods = pods_from_job("w0!7", &j, Some(&p), t0(), style, Some("other")).unwrap();
            assert_eq!(pods.len(), 3);
            for (k, pod) in pods.iter().enumerate() {
                let m = &pod.metadata;
                assert_eq!(m.name.as_deref(), Some(format!("w0-7-{k}").as_str()));
                let labels = m.labels.as_ref().unwrap();
                let ann = m.annotations.as_ref().unwrap();
                assert_eq!(labels[GANG_LABEL], "w0-7");
                assert_eq!(ann[JOB_ID_ANNOTATION], "w0!7");
                assert_eq!(ann[GANG_SIZE_ANNOTATION], "3");
                assert_eq!(pod_requests(pod)["cpu"], 2000, "per-machine requests");
                let anti = pod.spec.as_ref().unwrap().affinity.as_ref().unwrap();
                let terms = anti
                    .pod_anti_affinity
                    .as_ref()
                    .unwrap()
                    .required_during_scheduling_ignored_during_execution
                    .as_ref()
                    .unwrap();
                assert_eq!(terms[0].topology_key, "kubernetes.io/hostname");
                assert_eq!(
                    terms[0]
                        .label_selector
                        .as_ref()
                        .unwrap()
                        .match_labels
                        .as_ref()
                        .unwrap()[GANG_LABEL],
                    "w0-7"
                );
                match style {
                    GangStyle::Coscheduling => {
                        assert_eq!(labels["scheduling.x-k8s.io/pod-group"], "w0-7")
                    }
                    GangStyle::Volcano => {
                        assert_eq!(ann["scheduling.k8s.io/group-name"], "w0-7");
                        assert_eq!(ann["scheduling.volcano.sh/queue-name"], "q1");
                    }
                    GangStyle::Kueue => {
                        assert_eq!(labels["kueue.x-k8s.io/pod-group-name"], "w0-7");
                        assert_eq!(labels["kueue.x-k8s.io/queue-name"], "q1");
                        assert_eq!(ann["kueue.x-k8s.io/pod-group-total-count"], "3");
                        assert_eq!(labels["kueue.x-k8s.io/managed"], "true");
                        assert_eq!(ann["kueue.x-k8s.io/retriable-in-group"], "false");
                        assert_eq!(
                            m.finalizers.as_deref(),
                            Some(&["kueue.x-k8s.io/managed".to_string()][..])
                        );
                        let gates = pod.spec.as_ref().unwrap().scheduling_gates.as_ref();
                        assert_eq!(gates.unwrap()[0].name, "kueue.x-k8s.io/admission");
                    }
                    GangStyle::Yunikorn => {
                        assert_eq!(labels[YUNIKORN_APP_ID_LABEL], "w0-7");
                        assert_eq!(labels[YUNIKORN_APPLICATION_ID], "w0-7");
                        assert_eq!(labels[YUNIKORN_QUEUE], "q1");
                        assert_eq!(ann[YUNIKORN_TASK_GROUP_NAME], YUNIKORN_TASK_GROUP);
                        assert_eq!(ann[YUNIKORN_SCHEDULING_POLICY], YUNIKORN_GANG_POLICY);
                        let tg: Value = serde_json::from_str(&ann[YUNIKORN_TASK_GROUPS]).unwrap();
                        assert_eq!(tg[0]["name"], YUNIKORN_TASK_GROUP);
                        assert_eq!(tg[0]["minMember"], 3);
                        assert_eq!(tg[0]["minResource"], json!({"cpu": "2"}));
                    }
                    GangStyle::None => {}
                }
            }
        }
        let g = group_object(GangStyle::Coscheduling, "w0-7", 3, None).unwrap();
        assert_eq!(g["apiVersion"], "scheduling.x-k8s.io/v1alpha1");
        assert_eq!(g["spec"]["minMember"], 3);
        let v = group_object(GangStyle::Volcano, "w0-7", 3, Some("q1")).unwrap();
        assert_eq!(v["apiVersion"], "scheduling.volcano.sh/v1beta1");
        assert_eq!(v["spec"]["queue"], "q1");
        assert!(group_object(GangStyle::Kueue, "w0-7", 3, None).is_none());
        // One machine: the plain pod, whatever the style.
        let one = job(json!({"id": "w0!8", "subtime": 0, "res": 1, "profile": "d"}));
        let pods =
            pods_from_job("w0!8", &one, Some(&p), t0(), GangStyle::Coscheduling, None).unwrap();
        assert_eq!(pods.len(), 1);
        assert_eq!(pods[0].metadata.name.as_deref(), Some("w0-8"));
        assert!(pods[0].spec.as_ref().unwrap().affinity.is_none());
        let zero = job(json!({"id": "w0!9", "subtime": 0, "res": 0, "profile": "d"}));
        assert!(pods_from_job("w0!9", &zero, Some(&p), t0(), GangStyle::None, None).is_err());
    }

    /// What Volcano's admission would write: every pod and PodGroup in a
    /// queue, the job's own, else `--default-queue`, else `default`.
    #[test]
    fn volcano_jobs_always_have_a_queue() {
        let p = json!({"type": "delay", "delay": 5, "cpu": "1"});
        let queue_of = |pod: &Pod| {
            pod.metadata.annotations.as_ref().unwrap()["scheduling.volcano.sh/queue-name"].clone()
        };
        let named =
            job(json!({"id": "w0!1", "subtime": 0, "res": 1, "profile": "d", "queue": "q1"}));
        let plain = job(json!({"id": "w0!2", "subtime": 0, "res": 1, "profile": "d"}));
        let gang = job(json!({"id": "w0!3", "subtime": 0, "res": 2, "profile": "d"}));
        let v = GangStyle::Volcano;
        let one = |j: &Job, d| pods_from_job("w0!x", j, Some(&p), t0(), v, d).unwrap();
        assert_eq!(queue_of(&one(&named, Some("dq"))[0]), "q1");
        assert_eq!(queue_of(&one(&plain, Some("dq"))[0]), "dq");
        assert_eq!(queue_of(&one(&plain, None)[0]), VOLCANO_DEFAULT_QUEUE);
        for pod in one(&gang, Some("dq")) {
            assert_eq!(queue_of(&pod), "dq");
        }
        assert_eq!(job_queue_or(v, &gang, Some(&p), None), Some("default"));
        // Other styles: no queue unless one is named or given.
        assert_eq!(job_queue_or(GangStyle::Kueue, &gang, Some(&p), None), None);
        assert_eq!(
            job_queue_or(GangStyle::Kueue, &gang, Some(&p), Some("lq")),
            Some("lq")
        );
        let k = pods_from_job("w0!3", &gang, Some(&p), t0(), GangStyle::Kueue, Some("lq")).unwrap();
        assert_eq!(
            k[0].metadata.labels.as_ref().unwrap()["kueue.x-k8s.io/queue-name"],
            "lq"
        );
        let c = pods_from_job(
            "w0!1",
            &plain,
            Some(&p),
            t0(),
            GangStyle::Coscheduling,
            None,
        )
        .unwrap();
        assert!(!c[0]
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .contains_key("scheduling.volcano.sh/queue-name"));
    }

    #[test]
    fn kueue_pods_carry_what_its_webhook_writes() {
        let p = json!({"type": "delay", "delay": 5, "cpu": "1"});
        let one = job(json!({"id": "w0!8", "subtime": 0, "res": 1, "profile": "d"}));
        // Kueue runs a one-machine job as a plain pod, gated like a gang's
        // (what its webhook would write); a job without a queue is not
        // Kueue's.
        let queued =
            job(json!({"id": "w0!10", "subtime": 0, "res": 1, "profile": "d", "queue": "q1"}));
        let pods = pods_from_job("w0!10", &queued, Some(&p), t0(), GangStyle::Kueue, None).unwrap();
        let m = &pods[0].metadata;
        let labels = m.labels.as_ref().unwrap();
        assert_eq!(labels[KUEUE_QUEUE_LABEL], "q1");
        assert_eq!(labels[KUEUE_MANAGED], "true");
        assert!(!labels.contains_key(KUEUE_POD_GROUP_LABEL));
        assert_eq!(
            m.finalizers.as_deref(),
            Some(&[KUEUE_MANAGED.to_string()][..])
        );
        let gates = pods[0]
            .spec
            .as_ref()
            .unwrap()
            .scheduling_gates
            .as_ref()
            .unwrap();
        assert_eq!(gates[0].name, KUEUE_ADMISSION_GATE);
        let pods = pods_from_job("w0!8", &one, Some(&p), t0(), GangStyle::Kueue, None).unwrap();
        assert!(pods[0].metadata.finalizers.is_none());
        assert!(pods[0].spec.as_ref().unwrap().scheduling_gates.is_none());
        assert!(!pods[0]
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key(KUEUE_MANAGED));
    }

    /// What YuniKorn's admission controller would write, and a gang's task
    /// group as its documentation has the submitter write it.
    #[test]
    fn yunikorn_pods_carry_its_application_queue_and_task_group() {
        let p = json!({"type": "delay", "delay": 5, "cpu": "1", "memory": "2Gi"});
        let y = GangStyle::Yunikorn;
        assert_eq!(y.scheduler_name(), Some("yunikorn"));
        assert_eq!(GangStyle::Kueue.scheduler_name(), None);
        assert_eq!(y.group_resource(), None);
        assert!(group_object(y, "w0-1", 2, Some("q")).is_none());
        // A job on one machine: an application of one pod, no task group.
        let one = job(json!({"id": "w0!1", "subtime": 0, "res": 1, "profile": "d", "queue": "q1"}));
        let pods = pods_from_job("w0!1", &one, Some(&p), t0(), y, None).unwrap();
        let m = &pods[0].metadata;
        let labels = m.labels.as_ref().unwrap();
        let ann = m.annotations.as_ref().unwrap();
        assert_eq!(labels[YUNIKORN_APP_ID_LABEL], "w0-1");
        assert_eq!(labels[YUNIKORN_QUEUE_LABEL], "q1");
        assert_eq!(labels[YUNIKORN_QUEUE], "q1");
        assert_eq!(ann["yunikorn.apache.org/allow-preemption"], "true");
        let user: Value = serde_json::from_str(&ann["yunikorn.apache.org/user.info"]).unwrap();
        assert_eq!(user["user"], "batkube");
        assert!(!ann.contains_key(YUNIKORN_TASK_GROUPS));
        // No queue named or given: no queue label (YuniKorn's placement
        // rules decide).
        let plain = job(json!({"id": "w0!2", "subtime": 0, "res": 1, "profile": "d"}));
        let pods = pods_from_job("w0!2", &plain, Some(&p), t0(), y, None).unwrap();
        assert!(!pods[0]
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key(YUNIKORN_QUEUE));
        let pods = pods_from_job("w0!2", &plain, Some(&p), t0(), y, Some("dq")).unwrap();
        assert_eq!(
            pods[0].metadata.labels.as_ref().unwrap()[YUNIKORN_QUEUE],
            "dq"
        );
        // A gang: one application, one task group of its size and requests,
        // its placeholders one per node, where the job's nodeSelector says.
        let gang = job(json!({"id": "w0!3", "subtime": 0, "res": 4, "profile": "d",
            "queue": "q1", "nodeSelector": {"zone": "a"}}));
        let pods = pods_from_job("w0!3", &gang, Some(&p), t0(), y, None).unwrap();
        assert_eq!(pods.len(), 4);
        let groups: BTreeSet<&String> = pods
            .iter()
            .map(|p| &p.metadata.annotations.as_ref().unwrap()[YUNIKORN_TASK_GROUPS])
            .collect();
        assert_eq!(groups.len(), 1, "every member carries the same task groups");
        let tg: Value = serde_json::from_str(groups.into_iter().next().unwrap()).unwrap();
        assert_eq!(
            tg,
            json!([{
                "name": "gang", "minMember": 4,
                "minResource": {"cpu": "1", "memory": "2147483648"},
                "labels": {YUNIKORN_PLACEHOLDER_LABEL: "w0-3"},
                "nodeSelector": {"zone": "a"},
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchLabels": {YUNIKORN_PLACEHOLDER_LABEL: "w0-3"}},
                    "topologyKey": "kubernetes.io/hostname"}]}},
            }])
        );
        for pod in &pods {
            let labels = pod.metadata.labels.as_ref().unwrap();
            assert_eq!(labels[YUNIKORN_APP_ID_LABEL], "w0-3");
            // The real pods do not carry the placeholders' label.
            assert!(!labels.contains_key(YUNIKORN_PLACEHOLDER_LABEL));
        }
    }

    #[test]
    fn jobs_that_cannot_be_pods() {
        let p = json!({"type": "delay", "delay": 1});
        let e = pod_from_job(
            "w0!7",
            &job(json!({"id": "w0!7", "subtime": 0, "res": 8, "profile": "d"})),
            Some(&p),
            t0(),
        )
        .unwrap_err();
        assert!(e.contains("8 machines"), "{e}");
        let q = json!({"type": "quantum_annealing"});
        let e = pod_from_job(
            "w0!8",
            &job(json!({"id": "w0!8", "subtime": 0, "res": 1, "profile": "q"})),
            Some(&q),
            t0(),
        )
        .unwrap_err();
        assert!(e.contains("quantum_annealing"), "{e}");
        let e = pod_from_job(
            "w0!9",
            &job(json!({"id": "w0!9", "subtime": 0, "res": 1, "profile": "d", "cpu": "lots"})),
            Some(&p),
            t0(),
        )
        .unwrap_err();
        assert!(e.contains("cpu"), "{e}");
    }

    fn amounts(cpu: i64, memory: Option<i64>) -> Amounts {
        let mut a = Amounts::from([("cpu".to_string(), cpu), ("pods".to_string(), 110)]);
        if let Some(m) = memory {
            a.insert("memory".into(), m);
        }
        a
    }

    fn anti_terms(pod: &Pod) -> Vec<PodAffinityTerm> {
        pod.spec
            .as_ref()
            .and_then(|s| s.affinity.as_ref())
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|a| {
                a.required_during_scheduling_ignored_during_execution
                    .clone()
            })
            .unwrap_or_default()
    }

    #[test]
    fn whole_node_is_a_nodes_request_where_nodes_are_alike_else_the_smallest_and_an_anti_affinity()
    {
        let alike = [amounts(4000, Some(8 << 30)), amounts(4000, Some(8 << 30))];
        let w = WholeNode::of(&alike).unwrap();
        assert_eq!(
            w.requests,
            Amounts::from([("cpu".into(), 4000), ("memory".into(), 8 << 30)])
        );
        assert!(!w.nodes_differ);
        let differ = [amounts(8000, Some(8 << 30)), amounts(2000, Some(16 << 30))];
        let w = WholeNode::of(&differ).unwrap();
        assert_eq!(
            w.requests,
            Amounts::from([("cpu".into(), 2000), ("memory".into(), 8 << 30)])
        );
        assert!(w.nodes_differ);
        // A node without memory: no memory request would fit it.
        let some_without = [amounts(1000, Some(1 << 30)), amounts(1000, None)];
        let w = WholeNode::of(&some_without).unwrap();
        assert_eq!(w.requests, Amounts::from([("cpu".into(), 1000)]));
        assert!(w.nodes_differ);
        assert_eq!(WholeNode::of(&[]), None);
    }

    #[test]
    fn a_job_without_cpu_or_memory_takes_its_nodes_whole() {
        let p = json!({"type": "delay", "delay": 5});
        let alike = WholeNode::of(&[amounts(4000, None), amounts(4000, None)]).unwrap();
        let differ = WholeNode::of(&[amounts(4000, None), amounts(1000, None)]).unwrap();
        let one = job(json!({"id": "w0!1", "subtime": 0, "res": 1, "profile": "d"}));
        assert!(asks_for_no_cpu_or_memory(&one, Some(&p)));
        // Today's meaning without a WholeNode: a pod that asks for nothing.
        let pods = pods_from_job("w0!1", &one, Some(&p), t0(), GangStyle::None, None).unwrap();
        assert!(pod_requests(&pods[0]).is_empty());
        assert!(!pods[0]
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key(WHOLE_NODE_LABEL));
        // Nodes alike: a node's cpu, no anti-affinity needed.
        let on = |j: &Job, w: &WholeNode, style| {
            pods_from_job_on("w0!1", j, Some(&p), t0(), style, None, Some(w)).unwrap()
        };
        let pods = on(&one, &alike, GangStyle::None);
        assert_eq!(
            pod_requests(&pods[0]),
            Amounts::from([("cpu".into(), 4000)])
        );
        assert_eq!(
            pods[0].metadata.labels.as_ref().unwrap()[WHOLE_NODE_LABEL],
            "true"
        );
        assert!(anti_terms(&pods[0]).is_empty());
        // Nodes that differ: the smallest node's cpu and a term against
        // every pod but YuniKorn's placeholders.
        let pods = on(&one, &differ, GangStyle::None);
        assert_eq!(
            pod_requests(&pods[0]),
            Amounts::from([("cpu".into(), 1000)])
        );
        let terms = anti_terms(&pods[0]);
        assert_eq!(terms.len(), 1);
        assert_eq!(terms[0].topology_key, "kubernetes.io/hostname");
        let sel = terms[0].label_selector.as_ref().unwrap();
        assert_eq!(sel.match_labels, None);
        let req = &sel.match_expressions.as_ref().unwrap()[0];
        assert_eq!(
            (req.key.as_str(), req.operator.as_str()),
            (YUNIKORN_PLACEHOLDER_LABEL, "DoesNotExist")
        );
        // A gang: each pod a node whole, its gang's term kept beside.
        let gang = job(json!({"id": "w0!1", "subtime": 0, "res": 3, "profile": "d"}));
        for pod in on(&gang, &differ, GangStyle::Coscheduling) {
            assert_eq!(pod_requests(&pod)["cpu"], 1000);
            assert_eq!(anti_terms(&pod).len(), 2);
        }
        for pod in on(&gang, &alike, GangStyle::Volcano) {
            assert_eq!(pod_requests(&pod)["cpu"], 4000);
            assert_eq!(anti_terms(&pod).len(), 1, "the gang's own");
        }
        // YuniKorn: the placeholders reserve the whole node, and where
        // nodes differ keep away from other jobs' whole-node pods.
        let pods = on(&gang, &differ, GangStyle::Yunikorn);
        let ann = pods[0].metadata.annotations.as_ref().unwrap();
        let tg: Value = serde_json::from_str(&ann[YUNIKORN_TASK_GROUPS]).unwrap();
        assert_eq!(tg[0]["minResource"]["cpu"], "1");
        let terms =
            &tg[0]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
        assert_eq!(terms.as_array().unwrap().len(), 2, "{terms}");
        assert_eq!(
            terms[1]["labelSelector"]["matchExpressions"][1]["values"][0],
            "w0-1"
        );
        // A job that asks for cpu, or memory only, keeps its requests.
        for asks in [
            json!({"cpu": "500m"}),
            json!({"memory": "1Gi"}),
            json!({"mem": "1Gi"}),
        ] {
            let mut j = json!({"id": "w0!1", "subtime": 0, "res": 1, "profile": "d"});
            j.as_object_mut()
                .unwrap()
                .extend(asks.as_object().unwrap().clone());
            let j = job(j);
            assert!(!asks_for_no_cpu_or_memory(&j, Some(&p)));
            let pods = on(&j, &alike, GangStyle::None);
            assert_ne!(pod_requests(&pods[0]).get("cpu"), Some(&4000));
            assert!(!pods[0]
                .metadata
                .labels
                .as_ref()
                .unwrap()
                .contains_key(WHOLE_NODE_LABEL));
        }
        // The profile's cpu counts as the job's.
        let with_cpu = json!({"type": "delay", "delay": 5, "cpu": 1});
        assert!(!asks_for_no_cpu_or_memory(&one, Some(&with_cpu)));
    }

    /// A job on 3 machines as a JobSet (v1alpha2): one replicated job of
    /// one Job, Indexed with completions = parallelism = 3, its pods'
    /// template the gang's first pod; `maxRestarts` is its failure policy.
    #[test]
    fn a_parallel_job_as_a_jobset() {
        let p = json!({"type": "delay", "delay": 5, "cpu": "2"});
        let j = job(json!({"id": "w0!7", "subtime": 0, "res": 3, "profile": "d",
            "walltime": 9.5, "maxRestarts": 2}));
        let pods = pods_from_job("w0!7", &j, Some(&p), t0(), GangStyle::None, None).unwrap();
        let o = workload_object(
            SubmitAs::Jobset,
            "w0!7",
            &j,
            Some(&p),
            &pods[0],
            GangStyle::None,
            None,
        )
        .unwrap();
        assert_eq!(o["apiVersion"], "jobset.x-k8s.io/v1alpha2");
        assert_eq!(o["kind"], "JobSet");
        assert_eq!(o["metadata"]["name"], "w0-7");
        assert_eq!(o["metadata"]["annotations"][JOB_ID_ANNOTATION], "w0!7");
        assert_eq!(o["spec"]["failurePolicy"], json!({"maxRestarts": 2}));
        let rjobs = o["spec"]["replicatedJobs"].as_array().unwrap();
        assert_eq!(rjobs.len(), 1);
        assert_eq!(rjobs[0]["name"], MAIN_TASK);
        assert_eq!(rjobs[0]["replicas"], 1);
        let spec = &rjobs[0]["template"]["spec"];
        assert_eq!(spec["completions"], 3);
        assert_eq!(spec["parallelism"], 3);
        assert_eq!(spec["completionMode"], "Indexed");
        assert_eq!(spec["backoffLimit"], 0);
        let pod = &spec["template"];
        assert_eq!(pod["spec"]["activeDeadlineSeconds"], 10);
        assert_eq!(pod["spec"]["restartPolicy"], "Never");
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "2"
        );
        assert!(pod["metadata"].get("name").is_none());
        // Without the field, JobSet's default: no restart.
        let j = job(json!({"id": "w0!8", "subtime": 0, "res": 1, "profile": "d"}));
        let pods = pods_from_job("w0!8", &j, Some(&p), t0(), GangStyle::None, None).unwrap();
        let o = workload_object(
            SubmitAs::Jobset,
            "w0!8",
            &j,
            Some(&p),
            &pods[0],
            GangStyle::None,
            None,
        )
        .unwrap();
        assert!(o["spec"].get("failurePolicy").is_none(), "{o}");
        let j =
            job(json!({"id": "w0!9", "subtime": 0, "res": 1, "profile": "d", "maxRestarts": -1}));
        let e = workload_object(
            SubmitAs::Jobset,
            "w0!9",
            &j,
            Some(&p),
            &pods[0],
            GangStyle::None,
            None,
        )
        .unwrap_err();
        assert!(e.contains("maxRestarts -1"), "{e}");
    }

    proptest! {
        #[test]
        fn any_name_maps_to_a_valid_distinct_name(a in ".{1,80}", b in ".{1,80}") {
            let (na, nb) = (dns1123(&a), dns1123(&b));
            prop_assert!(is_dns1123_subdomain(&na), "{:?} -> {:?}", a, na);
            if a != b { prop_assert_ne!(na, nb); }
            let pa = pod_name(&format!("w0!{a}"));
            prop_assert!(is_dns1123_subdomain(&pa));
        }

        #[test]
        fn cpu_quantities_round_trip(m in 0i64..10_000_000) {
            let q = format_quantity("cpu", m);
            prop_assert_eq!(parse_quantity("cpu", &Value::String(q.0)).unwrap(), m);
        }
    }
}
