//! Resource quantities and pod requests, computed the way upstream's
//! `NodeResourcesFit` does (sum of containers, max with init containers,
//! sidecars counted, plus overhead).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// Upstream `DefaultMilliCPURequest`: used for scoring when a container sets no cpu request.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Upstream `DefaultMemoryRequest` (200 MiB).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// A set of resource amounts: cpu in millicores, memory and ephemeral storage
/// in bytes, pods as a count, every other resource (extended resources,
/// hugepages) as an integer in its own unit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    pub pods: i64,
    pub scalar: BTreeMap<String, i64>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid quantity {0:?}")]
pub struct QuantityError(pub String);

impl Resources {
    /// Amount of a resource by its Kubernetes name (0 when absent).
    pub fn get(&self, name: &str) -> i64 {
        match name {
            "cpu" => self.milli_cpu,
            "memory" => self.memory,
            "ephemeral-storage" => self.ephemeral_storage,
            "pods" => self.pods,
            other => self.scalar.get(other).copied().unwrap_or(0),
        }
    }

    fn entry(&mut self, name: &str) -> &mut i64 {
        match name {
            "cpu" => &mut self.milli_cpu,
            "memory" => &mut self.memory,
            "ephemeral-storage" => &mut self.ephemeral_storage,
            "pods" => &mut self.pods,
            other => self.scalar.entry(other.to_string()).or_insert(0),
        }
    }

    pub fn add(&mut self, other: &Resources) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        self.pods += other.pods;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_insert(0) += v;
        }
    }

    pub fn sub(&mut self, other: &Resources) {
        self.milli_cpu -= other.milli_cpu;
        self.memory -= other.memory;
        self.ephemeral_storage -= other.ephemeral_storage;
        self.pods -= other.pods;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_insert(0) -= v;
        }
    }

    /// Element-wise maximum (upstream `SetMaxResource`).
    pub fn set_max(&mut self, other: &Resources) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        self.pods = self.pods.max(other.pods);
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_insert(0);
            *e = (*e).max(*v);
        }
    }

    /// Parses a resource list (`requests`, `allocatable`, `overhead`).
    pub fn from_list(
        list: Option<&BTreeMap<String, Quantity>>,
    ) -> Result<Resources, QuantityError> {
        let mut r = Resources::default();
        if let Some(list) = list {
            for (name, q) in list {
                let v = if name == "cpu" {
                    parse_quantity(&q.0, 3)?
                } else {
                    parse_quantity(&q.0, 0)?
                };
                *r.entry(name) += v;
            }
        }
        Ok(r)
    }

    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar.values().all(|v| *v == 0)
    }
}

/// Parses a Kubernetes quantity and returns `ceil(value * 10^scale)`
/// (scale 3 gives millis, as upstream's `MilliValue`).
pub fn parse_quantity(s: &str, scale: i32) -> Result<i64, QuantityError> {
    let err = || QuantityError(s.to_string());
    let s = s.trim();
    if s.is_empty() {
        return Err(err());
    }
    let (sign, body) = match s.as_bytes()[0] {
        b'-' => (-1i128, &s[1..]),
        b'+' => (1, &s[1..]),
        _ => (1, s),
    };
    let num_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (num, suffix) = body.split_at(num_end);
    if num.is_empty() || num.matches('.').count() > 1 {
        return Err(err());
    }
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    let digits = format!("{int_part}{frac_part}");
    if digits.is_empty() || digits.len() > 30 {
        return Err(err());
    }
    let mantissa: i128 = digits.parse().map_err(|_| err())?;
    let mut pow10: i32 = -(frac_part.len() as i32) + scale;
    let mut pow2: u32 = 0;
    match suffix {
        "" => {}
        "n" => pow10 -= 9,
        "u" => pow10 -= 6,
        "m" => pow10 -= 3,
        "k" => pow10 += 3,
        "M" => pow10 += 6,
        "G" => pow10 += 9,
        "T" => pow10 += 12,
        "P" => pow10 += 15,
        "E" => pow10 += 18,
        "Ki" => pow2 = 10,
        "Mi" => pow2 = 20,
        "Gi" => pow2 = 30,
        "Ti" => pow2 = 40,
        "Pi" => pow2 = 50,
        "Ei" => pow2 = 60,
        other if other.starts_with(['e', 'E']) => {
            let e: i32 = other[1..].parse().map_err(|_| err())?;
            pow10 += e;
        }
        _ => return Err(err()),
    }
    let mut v = mantissa.checked_mul(1i128 << pow2).ok_or_else(err)?;
    if pow10 >= 0 {
        for _ in 0..pow10 {
            v = v.checked_mul(10).ok_or_else(err)?;
        }
    } else {
        let mut div: i128 = 1;
        for _ in 0..(-pow10) {
            div = div.checked_mul(10).ok_or_else(err)?;
        }
        // Round up, as upstream's MilliValue/Value do.
        v = (v + div - 1) / div;
    }
    let v = sign * v;
    i64::try_from(v).map_err(|_| err())
}

fn is_restartable_init(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// Effective requests of a pod (upstream `PodRequests`): the sum over
/// containers and sidecars, at least the largest init container (plus the
/// sidecars started before it), plus the pod overhead. When `non_zero` is
/// set, a container that requests no cpu or memory counts for the upstream
/// defaults (100m, 200Mi), as the scoring plugins do.
pub fn pod_requests(pod: &Pod, non_zero: bool) -> Result<Resources, QuantityError> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(Resources::default());
    };
    let container_reqs = |c: &Container| -> Result<Resources, QuantityError> {
        let list = c.resources.as_ref().and_then(|r| r.requests.as_ref());
        let mut r = Resources::from_list(list)?;
        if non_zero {
            if !list.is_some_and(|l| l.contains_key("cpu")) {
                r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
            }
            if !list.is_some_and(|l| l.contains_key("memory")) {
                r.memory = DEFAULT_MEMORY_REQUEST;
            }
        }
        Ok(r)
    };
    let mut reqs = Resources::default();
    for c in &spec.containers {
        reqs.add(&container_reqs(c)?);
    }
    let mut restartable = Resources::default();
    let mut init_max = Resources::default();
    for c in spec.init_containers.iter().flatten() {
        let mut cr = container_reqs(c)?;
        if is_restartable_init(c) {
            reqs.add(&cr);
            restartable.add(&cr);
            cr = restartable.clone();
        } else {
            cr.add(&restartable);
        }
        init_max.set_max(&cr);
    }
    reqs.set_max(&init_max);
    if let Some(overhead) = spec.overhead.as_ref() {
        reqs.add(&Resources::from_list(Some(overhead))?);
    }
    reqs.pods = 0;
    Ok(reqs)
}

/// A node's allocatable resources (capacity when allocatable is not set).
pub fn node_allocatable(node: &Node) -> Result<Resources, QuantityError> {
    let status = node.status.as_ref();
    let list = status
        .and_then(|s| s.allocatable.as_ref())
        .or_else(|| status.and_then(|s| s.capacity.as_ref()));
    Resources::from_list(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_parse_like_upstream() {
        assert_eq!(parse_quantity("1", 3), Ok(1000));
        assert_eq!(parse_quantity("500m", 3), Ok(500));
        assert_eq!(parse_quantity("1.5", 3), Ok(1500));
        assert_eq!(parse_quantity("0.1", 3), Ok(100));
        assert_eq!(parse_quantity("1Gi", 0), Ok(1 << 30));
        assert_eq!(parse_quantity("1G", 0), Ok(1_000_000_000));
        assert_eq!(parse_quantity("128974848", 0), Ok(128974848));
        assert_eq!(parse_quantity("129e6", 0), Ok(129_000_000));
        assert_eq!(parse_quantity("123Mi", 0), Ok(123 << 20));
        assert_eq!(parse_quantity("1n", 3), Ok(1)); // rounds up
        assert_eq!(parse_quantity("110", 0), Ok(110));
        assert!(parse_quantity("abc", 0).is_err());
        assert!(parse_quantity("1Zi", 0).is_err());
        assert!(parse_quantity("", 0).is_err());
    }

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn pod_requests_take_init_max_sidecars_and_overhead() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [
                    {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                    {"name": "b", "resources": {"requests": {"cpu": "500m", "example.com/gpu": "1"}}}
                ],
                "initContainers": [
                    {"name": "i", "resources": {"requests": {"cpu": "2"}}}
                ],
                "overhead": {"cpu": "100m"}
            }
        }));
        let r = pod_requests(&p, false).unwrap();
        assert_eq!(r.milli_cpu, 2100);
        assert_eq!(r.memory, 1 << 30);
        assert_eq!(r.get("example.com/gpu"), 1);

        let nz = pod_requests(&p, true).unwrap();
        // container b has no memory request: counted as 200Mi when scoring.
        assert_eq!(nz.memory, (1 << 30) + DEFAULT_MEMORY_REQUEST);

        let s = pod(serde_json::json!({
            "metadata": {"name": "s"},
            "spec": {
                "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}],
                "initContainers": [
                    {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                    {"name": "i", "resources": {"requests": {"cpu": "2"}}}
                ]
            }
        }));
        // sidecar runs alongside: max(1 + 1, 1 + 2) = 3
        assert_eq!(pod_requests(&s, false).unwrap().milli_cpu, 3000);
    }
}
