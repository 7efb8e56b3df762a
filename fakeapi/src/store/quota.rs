//! ResourceQuota as a cluster keeps it: kube-apiserver's `ResourceQuota`
//! admission plugin and kube-controller-manager's resource-quota
//! controller, done by the store (`batkube serve` runs no controller
//! manager).
//!
//! - **Usage** (`k8s.io/kubernetes/pkg/quota/v1/evaluator/core`): pods
//!   count `pods`, `count/pods` and their compute resources (`cpu`,
//!   `memory`, `ephemeral-storage`, `requests.*`, `limits.*`, hugepages,
//!   `requests.<extended>`: the pod's requests as the scheduler sums them,
//!   init containers and overhead included) while not terminal (`count/pods`
//!   always); services count `services`, `services.loadbalancers`,
//!   `services.nodeports`; claims count `persistentvolumeclaims`,
//!   `requests.storage` and the same per storage class
//!   (`<class>.storageclass.storage.k8s.io/…`); every other resource,
//!   custom ones included, `count/<plural>.<group>` (and the legacy
//!   `configmaps`, `secrets`, `replicationcontrollers`, `resourcequotas`);
//!   DRA's ResourceClaims their devices by class
//!   (`<class>.deviceclass.resource.k8s.io/devices`).
//!   Scopes (`spec.scopes`, `spec.scopeSelector`): `Terminating`,
//!   `NotTerminating`, `BestEffort`, `NotBestEffort`, `PriorityClass`,
//!   `CrossNamespacePodAffinity` for pods, `VolumeAttributesClass` for
//!   claims; a quota with scopes counts nothing else.
//! - **The controller**: a quota's `status.hard` is its `spec.hard` and its
//!   `status.used` the sum over the objects of its namespace, computed
//!   when the quota is created or a client writes it (its spec, or its
//!   status: the real controller puts a status a client wrote back at its
//!   next resync; here at once, in a write of its own), and moved by each
//!   change of a counted object (the replenishment), each a write of the
//!   quota's status by [`Origin::QuotaController`] right after the change.
//! - **Admission**: a create (an update, for services and claims) by an API
//!   client that would take a quota's usage past its hard limit is refused
//!   `403` with kube-apiserver's message (`exceeded quota: NAME, requested:
//!   …, used: …, limited: …`), and a pod without a request or limit a quota
//!   of its namespace limits (cpu, memory) with `failed quota: NAME: must
//!   specify …`. The broker's own writes ([`Origin::Api`]) are counted, not
//!   refused.
//!
//! Quantities are summed exactly ([`crate::quantity`]). A namespace without
//! a ResourceQuota costs one lookup in a map of namespaces that have one.
//! Not done: a pod past its deletion grace period stays counted until it
//! leaves the API (the controller stops counting it at once), and DRA's
//! extended resources backed by devices (`DRAExtendedResource`, alpha).

use super::{meta_str, EventType, Origin, State, Store};
use crate::error::{ApiError, Result};
use crate::quantity::Quantity;
use crate::registry::Served;
use crate::resources::{self, ResourceInfo};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Usage or limits by resource name.
type List = BTreeMap<String, Quantity>;

/// Which evaluator measures a resource.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Eval {
    Pods,
    Services,
    Claims,
    /// DRA's ResourceClaims: devices by class.
    DeviceClaims,
    /// Object count, with the legacy name of the few core kinds that have one.
    Count,
}

fn evaluator(group: &str, plural: &str) -> Eval {
    match (group, plural) {
        ("", "pods") => Eval::Pods,
        ("", "services") => Eval::Services,
        ("", "persistentvolumeclaims") => Eval::Claims,
        ("resource.k8s.io", "resourceclaims") => Eval::DeviceClaims,
        _ => Eval::Count,
    }
}

/// `count/<plural>.<group>` (`count/<plural>` in the core group).
fn count_name(group: &str, plural: &str) -> String {
    if group.is_empty() {
        format!("count/{plural}")
    } else {
        format!("count/{plural}.{group}")
    }
}

/// The legacy name of an object count (`generic.NewObjectCountEvaluator`'s alias).
fn legacy_name(group: &str, plural: &str) -> Option<&'static str> {
    match (group, plural) {
        ("", "configmaps") => Some("configmaps"),
        ("", "secrets") => Some("secrets"),
        ("", "replicationcontrollers") => Some("replicationcontrollers"),
        ("", "resourcequotas") => Some("resourcequotas"),
        _ => None,
    }
}

const POD_RESOURCES: [&str; 11] = [
    "count/pods",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
];
const SERVICE_RESOURCES: [&str; 4] = [
    "count/services",
    "services",
    "services.loadbalancers",
    "services.nodeports",
];
const CLAIM_RESOURCES: [&str; 2] = ["persistentvolumeclaims", "requests.storage"];
const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";
const DEVICE_CLASS_SUFFIX: &str = ".deviceclass.resource.k8s.io/devices";
/// `AllocationResultsMaxSize`: what a request for all devices of a class counts.
const ALL_DEVICES: i64 = 32;
/// The resources whose presence a quota requires on every container.
const VALIDATION_SET: [&str; 6] = [
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

/// `helper.IsNativeResource`: unqualified, or in `kubernetes.io/`.
fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// `helper.IsExtendedResourceName`.
fn is_extended(name: &str) -> bool {
    !is_native(name) && !name.starts_with("requests.")
}

/// The names of `keys` a resource's evaluator counts (`MatchingResources`).
fn matching_resources<'a>(
    eval: Eval,
    group: &str,
    plural: &str,
    keys: impl Iterator<Item = &'a String>,
) -> Vec<String> {
    let count = count_name(group, plural);
    let legacy = legacy_name(group, plural);
    keys.filter(|k| match eval {
        Eval::Pods => {
            POD_RESOURCES.contains(&k.as_str())
                || k.starts_with("hugepages-")
                || k.starts_with("requests.hugepages-")
                || (!is_native(k) && k.starts_with("requests."))
        }
        Eval::Services => SERVICE_RESOURCES.contains(&k.as_str()),
        Eval::Claims => {
            **k == count
                || CLAIM_RESOURCES.contains(&k.as_str())
                || CLAIM_RESOURCES
                    .iter()
                    .any(|r| k.ends_with(&format!("{STORAGE_CLASS_SUFFIX}{r}")))
        }
        Eval::DeviceClaims => **k == count || k.ends_with(DEVICE_CLASS_SUFFIX),
        Eval::Count => **k == count || legacy == Some(k.as_str()),
    })
    .cloned()
    .collect()
}

fn quantity_at(v: &Value, key: &str) -> Option<Quantity> {
    v.get(key).and_then(Quantity::from_json)
}

fn list_of(v: Option<&Value>) -> List {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), Quantity::from_json(v)?)))
                .collect()
        })
        .unwrap_or_default()
}

fn add_into(to: &mut List, from: &List) {
    for (k, v) in from {
        let e = to.entry(k.clone()).or_insert(Quantity::ZERO);
        *e = e.add(*v);
    }
}

fn max_into(to: &mut List, from: &List) {
    for (k, v) in from {
        match to.get_mut(k) {
            Some(e) if *e >= *v => {}
            Some(e) => *e = *v,
            None => {
                to.insert(k.clone(), *v);
            }
        }
    }
}

/// A pod's requests or limits (`resourcehelper.PodRequests`/`PodLimits`):
/// its containers' sum; an init container runs alone (its need, with the
/// sidecars started before it, is a floor), a sidecar (`restartPolicy:
/// Always`) beside the rest; plus the overhead; a pod-level value
/// replaces the containers' for its resource.
fn pod_resources(pod: &Value, which: &str) -> List {
    let spec = &pod["spec"];
    let of = |c: &Value| list_of(c.pointer(&format!("/resources/{which}")));
    let mut total = List::new();
    for c in spec["containers"].as_array().into_iter().flatten() {
        add_into(&mut total, &of(c));
    }
    let mut sidecars = List::new();
    let mut init = List::new();
    for c in spec["initContainers"].as_array().into_iter().flatten() {
        let mine = of(c);
        let need = if c["restartPolicy"] == "Always" {
            add_into(&mut total, &mine);
            add_into(&mut sidecars, &mine);
            sidecars.clone()
        } else {
            let mut n = mine;
            add_into(&mut n, &sidecars);
            n
        };
        max_into(&mut init, &need);
    }
    max_into(&mut total, &init);
    if let Some(overhead) = spec.get("overhead") {
        add_into(&mut total, &list_of(Some(overhead)));
    }
    for (k, v) in list_of(spec.pointer(&format!("/resources/{which}"))) {
        if k == "cpu" || k == "memory" || k.starts_with("hugepages-") {
            total.insert(k, v);
        }
    }
    total
}

/// `podComputeUsageHelper`: the quota names of a pod's (or a container's)
/// requests and limits.
fn compute_usage(requests: &List, limits: &List) -> List {
    let mut out = List::new();
    out.insert("pods".into(), Quantity::count(1));
    for r in ["cpu", "memory", "ephemeral-storage"] {
        if let Some(q) = requests.get(r) {
            out.insert(r.into(), *q);
            out.insert(format!("requests.{r}"), *q);
        }
        if let Some(q) = limits.get(r) {
            out.insert(format!("limits.{r}"), *q);
        }
    }
    for (k, q) in requests {
        if k.starts_with("hugepages-") {
            out.insert(k.clone(), *q);
            out.insert(format!("requests.{k}"), *q);
        }
        if is_extended(k) {
            out.insert(format!("requests.{k}"), *q);
        }
    }
    out
}

/// What an object counts against quota (`Evaluator.Usage`).
fn usage(eval: Eval, group: &str, plural: &str, obj: &Value) -> List {
    let mut out = List::new();
    match eval {
        Eval::Pods => {
            out.insert("count/pods".into(), Quantity::count(1));
            let phase = obj.pointer("/status/phase").and_then(Value::as_str);
            if !matches!(phase, Some("Succeeded" | "Failed")) {
                let compute = compute_usage(
                    &pod_resources(obj, "requests"),
                    &pod_resources(obj, "limits"),
                );
                add_into(&mut out, &compute);
            }
        }
        Eval::Services => {
            let spec = &obj["spec"];
            let ports = spec["ports"].as_array().map_or(0, Vec::len) as i64;
            out.insert("count/services".into(), Quantity::count(1));
            out.insert("services".into(), Quantity::count(1));
            let (lb, node_ports) = match spec["type"].as_str() {
                Some("NodePort") => (0, ports),
                Some("LoadBalancer") => {
                    let np = if spec["allocateLoadBalancerNodePorts"] == false {
                        spec["ports"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter(|p| p["nodePort"].as_i64().is_some_and(|n| n != 0))
                            .count() as i64
                    } else {
                        ports
                    };
                    (1, np)
                }
                _ => (0, 0),
            };
            out.insert("services.loadbalancers".into(), Quantity::count(lb));
            out.insert("services.nodeports".into(), Quantity::count(node_ports));
        }
        Eval::Claims => {
            out.insert("persistentvolumeclaims".into(), Quantity::count(1));
            out.insert("count/persistentvolumeclaims".into(), Quantity::count(1));
            let class = obj
                .pointer("/spec/storageClassName")
                .and_then(Value::as_str)
                .or_else(|| {
                    obj.pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
                        .and_then(Value::as_str)
                })
                .filter(|c| !c.is_empty());
            if let Some(c) = class {
                out.insert(
                    format!("{c}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"),
                    Quantity::count(1),
                );
            }
            let requested = obj
                .pointer("/spec/resources/requests")
                .and_then(|r| quantity_at(r, "storage"))
                .map(Quantity::round_up_to_units);
            if let Some(mut storage) = requested {
                // A larger allocation (an expansion under way) counts.
                if let Some(a) = obj
                    .pointer("/status/allocatedResources")
                    .and_then(|r| quantity_at(r, "storage"))
                {
                    storage = storage.max(a);
                }
                out.insert("requests.storage".into(), storage);
                if let Some(c) = class {
                    out.insert(
                        format!("{c}{STORAGE_CLASS_SUFFIX}requests.storage"),
                        storage,
                    );
                }
            }
        }
        Eval::DeviceClaims => {
            out.insert(count_name(group, plural), Quantity::count(1));
            // A request names its class (`exactly`, or on itself before
            // v1) or lists alternatives (`firstAvailable`: the most any of
            // them asks of a class).
            let devices = |r: &Value| -> Option<(String, i64)> {
                let class = r["deviceClassName"].as_str().filter(|c| !c.is_empty())?;
                let n = match r["allocationMode"].as_str() {
                    Some("All") => ALL_DEVICES,
                    _ => r["count"].as_i64().unwrap_or(1),
                };
                Some((format!("{class}{DEVICE_CLASS_SUFFIX}"), n))
            };
            for r in obj
                .pointer("/spec/devices/requests")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let mut by_class: BTreeMap<String, i64> = BTreeMap::new();
                if let Some(subs) = r["firstAvailable"].as_array().filter(|a| !a.is_empty()) {
                    for (class, n) in subs.iter().filter_map(devices) {
                        let e = by_class.entry(class).or_insert(0);
                        *e = (*e).max(n);
                    }
                } else if let Some(d) = devices(r.get("exactly").unwrap_or(r)) {
                    by_class.insert(d.0, d.1);
                }
                for (class, n) in by_class {
                    let e = out.entry(class).or_insert(Quantity::ZERO);
                    *e = e.add(Quantity::count(n));
                }
            }
        }
        Eval::Count => {
            out.insert(count_name(group, plural), Quantity::count(1));
            if let Some(l) = legacy_name(group, plural) {
                out.insert(l.into(), Quantity::count(1));
            }
        }
    }
    out
}

/// One scope of a quota (`spec.scopes` as `Exists`, or a `scopeSelector`
/// expression).
#[derive(Debug, Clone)]
struct Scope {
    name: String,
    operator: String,
    values: Vec<String>,
}

impl Scope {
    /// The scope as a label requirement on `labels` (the scope's name as
    /// key), as `ScopedResourceSelectorRequirementsAsSelector` makes it.
    fn selects(&self, labels: &BTreeSet<&str>) -> bool {
        match self.operator.as_str() {
            "Exists" => !labels.is_empty(),
            "DoesNotExist" => labels.is_empty(),
            "In" => labels.iter().any(|l| self.values.iter().any(|v| v == l)),
            "NotIn" => {
                labels.is_empty() || labels.iter().any(|l| !self.values.iter().any(|v| v == l))
            }
            _ => false,
        }
    }
}

fn scopes(quota: &Value) -> Vec<Scope> {
    let mut out: Vec<Scope> = quota
        .pointer("/spec/scopes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|s| Scope {
            name: s.to_string(),
            operator: "Exists".into(),
            values: Vec::new(),
        })
        .collect();
    for e in quota
        .pointer("/spec/scopeSelector/matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.push(Scope {
            name: e["scopeName"].as_str().unwrap_or("").to_string(),
            operator: e["operator"].as_str().unwrap_or("").to_string(),
            values: e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect(),
        });
    }
    out
}

fn cross_namespace_affinity(pod: &Value) -> bool {
    let cross = |t: &Value| {
        t["namespaces"].as_array().is_some_and(|n| !n.is_empty())
            || t.get("namespaceSelector").is_some_and(|s| !s.is_null())
    };
    ["podAffinity", "podAntiAffinity"].iter().any(|a| {
        let aff = &pod["spec"]["affinity"][a];
        aff["requiredDuringSchedulingIgnoredDuringExecution"]
            .as_array()
            .into_iter()
            .flatten()
            .any(cross)
            || aff["preferredDuringSchedulingIgnoredDuringExecution"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|w| cross(&w["podAffinityTerm"]))
    })
}

/// Whether an object is in a scope (`podMatchesScopeFunc`,
/// `pvcMatchesScopeFunc`; other resources are in none).
fn in_scope(eval: Eval, scope: &Scope, obj: &Value) -> bool {
    match (eval, scope.name.as_str()) {
        (Eval::Pods, "Terminating") => obj
            .pointer("/spec/activeDeadlineSeconds")
            .and_then(Value::as_i64)
            .is_some_and(|s| s >= 0),
        (Eval::Pods, "NotTerminating") => !obj
            .pointer("/spec/activeDeadlineSeconds")
            .and_then(Value::as_i64)
            .is_some_and(|s| s >= 0),
        (Eval::Pods, "BestEffort") => best_effort(obj),
        (Eval::Pods, "NotBestEffort") => !best_effort(obj),
        (Eval::Pods, "PriorityClass") => {
            let class = obj
                .pointer("/spec/priorityClassName")
                .and_then(Value::as_str)
                .filter(|c| !c.is_empty());
            scope.selects(&class.into_iter().collect())
        }
        (Eval::Pods, "CrossNamespacePodAffinity") => cross_namespace_affinity(obj),
        (Eval::Claims, "VolumeAttributesClass") => {
            let names: BTreeSet<&str> = [
                "/spec/volumeAttributesClassName",
                "/status/currentVolumeAttributesClassName",
                "/status/modifyVolumeStatus/targetVolumeAttributesClassName",
            ]
            .iter()
            .filter_map(|p| obj.pointer(p).and_then(Value::as_str))
            .filter(|n| !n.is_empty())
            .collect();
            if names.is_empty() || scope.operator == "Exists" || scope.operator == "DoesNotExist" {
                return scope.selects(&names);
            }
            names
                .iter()
                .any(|n| scope.selects(&[*n].into_iter().collect()))
        }
        _ => false,
    }
}

/// `qos.GetPodQOS(pod) == BestEffort`: no cpu or memory request or limit
/// above zero, on any container or the pod.
fn best_effort(pod: &Value) -> bool {
    let spec = &pod["spec"];
    let positive = |m: Option<&Value>| {
        m.and_then(Value::as_object).is_some_and(|m| {
            ["cpu", "memory"].iter().any(|r| {
                m.get(*r)
                    .and_then(Quantity::from_json)
                    .is_some_and(|q| q > Quantity::ZERO)
            })
        })
    };
    let containers = ["containers", "initContainers"]
        .iter()
        .flat_map(|k| spec[k].as_array().into_iter().flatten());
    let any_container = containers.clone().any(|c| {
        positive(c.pointer("/resources/requests")) || positive(c.pointer("/resources/limits"))
    });
    !(any_container
        || positive(spec.pointer("/resources/requests"))
        || positive(spec.pointer("/resources/limits")))
}

/// `generic.Matches`: the quota limits something the evaluator counts, and
/// the object is in every scope of the quota.
fn quota_matches(
    eval: Eval,
    info: &ResourceInfo,
    hard: &List,
    scopes: &[Scope],
    obj: &Value,
) -> bool {
    !matching_resources(eval, info.group, info.plural, hard.keys()).is_empty()
        && scopes.iter().all(|s| in_scope(eval, s, obj))
}

/// `podEvaluator.Constraints`: every container requests (or limits) each
/// of cpu and memory a quota limits.
fn pod_constraints(required: &[String], pod: &Value) -> std::result::Result<(), String> {
    let required: BTreeSet<&str> = required
        .iter()
        .map(String::as_str)
        .filter(|r| VALIDATION_SET.contains(r))
        .collect();
    if required.is_empty() {
        return Ok(());
    }
    let mut missing: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let spec = &pod["spec"];
    for c in ["containers", "initContainers"]
        .iter()
        .flat_map(|k| spec[k].as_array().into_iter().flatten())
    {
        let have = compute_usage(
            &list_of(c.pointer("/resources/requests")),
            &list_of(c.pointer("/resources/limits")),
        );
        for r in &required {
            if !have.contains_key(*r) {
                missing
                    .entry(r)
                    .or_default()
                    .insert(c["name"].as_str().unwrap_or("").to_string());
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(r, names)| {
            format!(
                "{r} for: {}",
                names.iter().cloned().collect::<Vec<_>>().join(",")
            )
        })
        .collect();
    Err(format!("must specify {}", parts.join("; ")))
}

/// `prettyPrint`: `name=quantity`, sorted, comma-separated.
fn pretty(list: &List) -> String {
    list.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn to_json(list: &List) -> Value {
    Value::Object(
        list.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.to_string())))
            .collect::<Map<String, Value>>(),
    )
}

/// The table of the resource a quota name counts (`count/<plural>.<group>`
/// or a legacy name), with its row, if it is served.
fn counted_table(st: &State, name: &str) -> Option<(usize, &'static ResourceInfo)> {
    let qualified = match name.strip_prefix("count/") {
        Some(q) => q,
        None => match name {
            "configmaps" | "secrets" | "replicationcontrollers" | "resourcequotas" => name,
            _ => return None,
        },
    };
    if let Some(found) = resources::builtin_qualified(qualified) {
        return Some(found);
    }
    let (plural, group) = qualified.split_once('.')?;
    st.registry
        .storage(group, plural)
        .map(|cv| (cv.table, cv.storage))
}

fn builtin_table(plural: &str) -> (usize, &'static ResourceInfo) {
    resources::builtin("", "v1", plural).expect("a core row")
}

/// The objects of table `t` in namespace `ns`.
fn in_namespace<'a>(st: &'a State, t: usize, ns: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    st.tables[t]
        .objects
        .range((ns.to_string(), String::new())..)
        .take_while(move |((n, _), _)| n == ns)
        .map(|(_, s)| &*s.value)
}

/// The quotas of namespace `ns`, by name.
fn quotas_of<'a>(st: &'a State, ns: &'a str) -> Vec<&'a Value> {
    in_namespace(st, builtin_table("resourcequotas").0, ns).collect()
}

fn is_quota(info: &ResourceInfo) -> bool {
    info.group.is_empty() && info.plural == "resourcequotas"
}

impl Store {
    /// The `ResourceQuota` admission plugin on a create (`old` `None`) or an
    /// update of `obj` in `ns`, before it is written.
    pub(super) fn admit_quota(
        &self,
        st: &State,
        info: &ResourceInfo,
        ns: &str,
        obj: &Value,
        old: Option<&Value>,
        origin: Origin,
    ) -> Result<()> {
        if origin != Origin::Http || ns.is_empty() || !st.quota_namespaces.contains_key(ns) {
            return Ok(());
        }
        let eval = evaluator(info.group, info.plural);
        // Pods and counted objects on create; services and claims also on
        // update (a type or a size changes).
        if old.is_some() && !matches!(eval, Eval::Services | Eval::Claims) {
            return Ok(());
        }
        let forbidden = |message: String| ApiError::Forbidden {
            resource: info.qualified_name(),
            name: meta_str(obj, "name").unwrap_or("").to_string(),
            message,
        };
        let mut interesting = Vec::new();
        for q in quotas_of(st, ns) {
            let name = meta_str(q, "name").unwrap_or("");
            let hard = list_of(q.pointer("/status/hard"));
            let sc = scopes(q);
            if !quota_matches(eval, info, &hard, &sc, obj) {
                continue;
            }
            let restricted = matching_resources(eval, info.group, info.plural, hard.keys());
            if eval == Eval::Pods {
                pod_constraints(&restricted, obj)
                    .map_err(|e| forbidden(format!("failed quota: {name}: {e}")))?;
            }
            let used = list_of(q.pointer("/status/used"));
            if restricted.iter().any(|r| !used.contains_key(r)) {
                let mut names = restricted.clone();
                names.sort();
                return Err(forbidden(format!(
                    "status unknown for quota: {name}, resources: {}",
                    names.join(",")
                )));
            }
            interesting.push((name, hard, used, sc));
        }
        if interesting.is_empty() {
            return Ok(());
        }
        let input = usage(eval, info.group, info.plural, obj);
        if let Some((k, _)) = input.iter().find(|(_, q)| q.is_negative()) {
            return Err(forbidden(format!(
                "quota usage is negative for resource(s): {k}"
            )));
        }
        for (name, hard, used, sc) in interesting {
            let delta = match old {
                Some(o) if quota_matches(eval, info, &hard, &sc, o) => {
                    let prev = usage(eval, info.group, info.plural, o);
                    // `SubtractWithNonNegativeResult`.
                    input
                        .iter()
                        .map(|(k, v)| {
                            let d = v.sub(prev.get(k).copied().unwrap_or(Quantity::ZERO));
                            (k.clone(), if d.is_negative() { Quantity::ZERO } else { d })
                        })
                        .collect()
                }
                _ => input.clone(),
            };
            let requested: List = delta
                .into_iter()
                .filter(|(k, v)| !v.is_zero() && hard.contains_key(k))
                .collect();
            let exceeded: Vec<&String> = requested
                .iter()
                .filter(|(k, v)| {
                    let now = used.get(*k).copied().unwrap_or(Quantity::ZERO).add(**v);
                    now > hard[*k]
                })
                .map(|(k, _)| k)
                .collect();
            if !exceeded.is_empty() {
                let mask = |l: &List| -> List {
                    exceeded
                        .iter()
                        .filter_map(|k| Some(((*k).clone(), *l.get(*k)?)))
                        .collect()
                };
                return Err(forbidden(format!(
                    "exceeded quota: {name}, requested: {}, used: {}, limited: {}",
                    pretty(&mask(&requested)),
                    pretty(&mask(&used)),
                    pretty(&mask(&hard)),
                )));
            }
        }
        Ok(())
    }

    /// After a change was stored: the quota controller's part (see the
    /// module doc). `new` is `None` for a deletion.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn quota_after_change(
        &self,
        st: &mut State,
        info: &'static ResourceInfo,
        key: &(String, String),
        old: Option<&Value>,
        new: Option<&Value>,
        origin: Origin,
    ) {
        let ns = key.0.as_str();
        if is_quota(info) {
            match (old.is_some(), new.is_some()) {
                (false, true) => *st.quota_namespaces.entry(ns.to_string()).or_insert(0) += 1,
                (true, false) => {
                    if let Some(n) = st.quota_namespaces.get_mut(ns) {
                        *n -= 1;
                        if *n == 0 {
                            st.quota_namespaces.remove(ns);
                        }
                    }
                }
                _ => {}
            }
        }
        if ns.is_empty() || !st.quota_namespaces.contains_key(ns) {
            return;
        }
        // Replenishment: each quota that counts this resource moves by the
        // change's difference.
        let eval = evaluator(info.group, info.plural);
        let mut writes = Vec::new();
        for q in quotas_of(st, ns) {
            if is_quota(info) && meta_str(q, "name") == Some(key.1.as_str()) {
                // The quota's own write: recomputed whole below.
                continue;
            }
            let hard = list_of(q.pointer("/spec/hard"));
            let sc = scopes(q);
            let counted = |o: Option<&Value>| -> List {
                match o {
                    Some(o) if quota_matches(eval, info, &hard, &sc, o) => {
                        usage(eval, info.group, info.plural, o)
                    }
                    _ => List::new(),
                }
            };
            let (before, after) = (counted(old), counted(new));
            let mut used = list_of(q.pointer("/status/used"));
            let mut changed = false;
            for k in matching_resources(eval, info.group, info.plural, hard.keys()) {
                let b = before.get(&k).copied().unwrap_or(Quantity::ZERO);
                let a = after.get(&k).copied().unwrap_or(Quantity::ZERO);
                if a != b {
                    let e = used.entry(k).or_insert(Quantity::ZERO);
                    *e = e.add(a).sub(b);
                    changed = true;
                }
            }
            if changed {
                writes.push((meta_str(q, "name").unwrap_or("").to_string(), hard, used));
            }
        }
        if is_quota(info) && origin != Origin::QuotaController {
            if let Some(q) = new {
                let hard = list_of(q.pointer("/spec/hard"));
                let used = self.quota_usage(st, ns, q, &hard);
                writes.push((key.1.clone(), hard, used));
            }
        }
        for (name, hard, used) in writes {
            self.write_quota_status(st, ns, &name, &hard, &used);
        }
    }

    /// A quota's usage computed whole (`quota.CalculateUsage`): each
    /// resource of `hard` summed over the namespace's objects in scope.
    fn quota_usage(&self, st: &State, ns: &str, quota: &Value, hard: &List) -> List {
        let sc = scopes(quota);
        // The tables to read: pods, services and claims by their
        // evaluators' names, the rest by their counts.
        let mut tables: Vec<(usize, &'static ResourceInfo)> = Vec::new();
        for plural in ["pods", "services", "persistentvolumeclaims"] {
            let (t, info) = builtin_table(plural);
            if !matching_resources(evaluator("", plural), "", plural, hard.keys()).is_empty() {
                tables.push((t, info));
            }
        }
        if hard.keys().any(|k| k.ends_with(DEVICE_CLASS_SUFFIX)) {
            if let Some(found) = counted_table(st, "count/resourceclaims.resource.k8s.io") {
                tables.push(found);
            }
        }
        for k in hard.keys() {
            if let Some(found) = counted_table(st, k) {
                if !tables.iter().any(|(t, _)| *t == found.0) {
                    tables.push(found);
                }
            }
        }
        let mut used = list_of(quota.pointer("/status/used"));
        used.retain(|k, _| hard.contains_key(k));
        for (t, info) in tables {
            let eval = evaluator(info.group, info.plural);
            let names = matching_resources(eval, info.group, info.plural, hard.keys());
            let mut sum: List = names.iter().map(|n| (n.clone(), Quantity::ZERO)).collect();
            for obj in in_namespace(st, t, ns) {
                if sc.iter().all(|s| in_scope(eval, s, obj)) {
                    let u = usage(eval, info.group, info.plural, obj);
                    for n in &names {
                        if let Some(q) = u.get(n) {
                            let e = sum.get_mut(n).expect("listed");
                            *e = e.add(*q);
                        }
                    }
                }
            }
            used.extend(sum);
        }
        used
    }

    /// Writes a quota's status (`hard` from its spec, `used`) as the quota
    /// controller does, unless it already says so.
    fn write_quota_status(&self, st: &mut State, ns: &str, name: &str, hard: &List, used: &List) {
        let (t, info) = builtin_table("resourcequotas");
        let key = (ns.to_string(), name.to_string());
        let Some(old) = st.tables[t].objects.get(&key).cloned() else {
            return;
        };
        let status = json!({"hard": to_json(hard), "used": to_json(used)});
        if old.value.get("status") == Some(&status) {
            return;
        }
        let mut obj = (*old.value).clone();
        obj["status"] = status;
        let served = Served::builtin(t, info);
        self.commit(
            st,
            &served,
            key,
            obj,
            Some(old),
            EventType::Modified,
            Origin::QuotaController,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn a_pods_usage_sums_its_containers_and_floors_at_its_init_containers() {
        let pod = json!({"spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}, "limits": {"cpu": "200m"}}},
                {"name": "b", "resources": {"requests": {"cpu": "250m", "example.com/gpu": "1"}}}],
            "initContainers": [
                {"name": "i", "resources": {"requests": {"cpu": "1", "memory": "512Mi"}}}],
            "overhead": {"cpu": "10m"}}});
        let u = usage(Eval::Pods, "", "pods", &pod);
        assert_eq!(u["cpu"], q("1010m"));
        assert_eq!(u["requests.cpu"].to_string(), "1010m");
        assert_eq!(u["requests.memory"].to_string(), "1Gi");
        assert_eq!(u["limits.cpu"], q("210m"));
        assert_eq!(u["requests.example.com/gpu"], q("1"));
        assert_eq!(u["pods"], q("1"));
        assert_eq!(u["count/pods"], q("1"));
        let mut done = pod.clone();
        done["status"] = json!({"phase": "Succeeded"});
        let u = usage(Eval::Pods, "", "pods", &done);
        assert_eq!(u.len(), 1, "a terminal pod counts as an object only: {u:?}");
    }

    #[test]
    fn a_resource_claim_counts_its_devices_by_class() {
        let claim = json!({"spec": {"devices": {"requests": [
            {"name": "a", "exactly": {"deviceClassName": "gold", "allocationMode": "ExactCount", "count": 2}},
            {"name": "b", "exactly": {"deviceClassName": "gold"}},
            {"name": "c", "firstAvailable": [
                {"name": "x", "deviceClassName": "silver", "count": 3},
                {"name": "y", "deviceClassName": "silver", "allocationMode": "All"}]}]}}});
        let u = usage(
            Eval::DeviceClaims,
            "resource.k8s.io",
            "resourceclaims",
            &claim,
        );
        assert_eq!(u["count/resourceclaims.resource.k8s.io"], q("1"));
        assert_eq!(u["gold.deviceclass.resource.k8s.io/devices"], q("3"));
        assert_eq!(u["silver.deviceclass.resource.k8s.io/devices"], q("32"));
    }

    #[test]
    fn a_container_without_the_quotas_resources_is_named() {
        let pod = json!({"spec": {"containers": [
            {"name": "b", "resources": {"requests": {"cpu": "1"}}},
            {"name": "a"}]}});
        let required = vec!["cpu".to_string(), "memory".to_string(), "pods".to_string()];
        assert_eq!(
            pod_constraints(&required, &pod).unwrap_err(),
            "must specify cpu for: a; memory for: a,b"
        );
    }

    #[test]
    fn scopes_select_pods_as_the_evaluator_does() {
        let pod = json!({"spec": {"priorityClassName": "high", "activeDeadlineSeconds": 10,
            "containers": [{"name": "c"}]}});
        let s = |name: &str, op: &str, values: &[&str]| Scope {
            name: name.into(),
            operator: op.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        };
        assert!(in_scope(Eval::Pods, &s("Terminating", "Exists", &[]), &pod));
        assert!(!in_scope(
            Eval::Pods,
            &s("NotTerminating", "Exists", &[]),
            &pod
        ));
        assert!(in_scope(Eval::Pods, &s("BestEffort", "Exists", &[]), &pod));
        assert!(in_scope(
            Eval::Pods,
            &s("PriorityClass", "In", &["high"]),
            &pod
        ));
        assert!(!in_scope(
            Eval::Pods,
            &s("PriorityClass", "NotIn", &["high"]),
            &pod
        ));
        assert!(in_scope(
            Eval::Pods,
            &s("PriorityClass", "Exists", &[]),
            &pod
        ));
        assert!(!in_scope(
            Eval::Services,
            &s("BestEffort", "Exists", &[]),
            &pod
        ));
    }
}
