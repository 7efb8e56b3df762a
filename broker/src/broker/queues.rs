//! Per-queue results: `queues.csv` (every queue's state at every instant it
//! changed) and the per-queue part of `summary.json`.
//!
//! A job's queue is the one it names (the Batsim job's `queue` field, or
//! `--default-queue`). For Kueue, that name is a LocalQueue: the row is its
//! ClusterQueue's (`spec.clusterQueue`), where quotas live, when the
//! LocalQueue exists at the job's submission. The quota of a row is read
//! from the API: a Volcano Queue's `spec.capability`, or the sum of a Kueue
//! ClusterQueue's `nominalQuota` over its resource groups and flavors, or a
//! YuniKorn queue's `max` resources (else its `guaranteed` ones) in
//! YuniKorn's configuration (the `queues.yaml` of the ConfigMap
//! `yunikorn-configs` in `default`; a job's `tenant-a` is `root.tenant-a`).
//!
//! Counts are per job (a gang is one job): `pending` from submission until
//! it starts (its pods pending or bound), `running` from its start until
//! Batsim's end of it; allocated cpu and memory are the requests of its
//! pods while they hold a node (bound, running, or completing), as
//! `nodes.csv` counts them. `borrowed` is what is allocated beyond the
//! quota (Kueue's borrowing within a cohort; it must stay 0 under a Volcano
//! capability).
//!
//! As `nodes.csv`, one row per changed queue per window, queues in name
//! order, with the state at the end of the window: the order in which a
//! window's bindings reach the API is not the order they were decided in.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::sync::Arc;

use fakeapi::Store;
use serde::Serialize;
use serde_json::Value;

use super::record::{CsvRow, RowSink};
use crate::translate::{self, Amounts};

/// Where the quota of a queue named `q` is read from (cluster-scoped
/// objects, as Volcano's Queue and Kueue's ClusterQueue are).
const QUOTA_KINDS: [&str; 2] = [
    "queues.scheduling.volcano.sh",
    "clusterqueues.kueue.x-k8s.io",
];
/// Kueue's namespaced queue pointing at a ClusterQueue.
const LOCAL_QUEUES: &str = "localqueues.kueue.x-k8s.io";
/// YuniKorn's configuration: the ConfigMap it reads in its namespace (the
/// scheduler's `NAMESPACE`, `default` unless set) and the key of its queues.
const YUNIKORN_CONFIGMAP: (&str, &str) = ("default", "yunikorn-configs");
const YUNIKORN_QUEUES_KEY: &str = "queues.yaml";

/// Bounded slowdown's threshold (seconds), the usual 10 s.
const BSLD_TAU: f64 = 10.0;

/// One row of `queues.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueRow {
    pub time: f64,
    pub queue: Arc<str>,
    pub pending: u64,
    pub running: u64,
    pub cpu_allocated_m: i64,
    pub memory_allocated: i64,
    pub cpu_quota_m: Option<i64>,
    pub memory_quota: Option<i64>,
}

impl QueueRow {
    fn borrowed(used: i64, quota: Option<i64>) -> String {
        quota
            .map(|q| (used - q).max(0).to_string())
            .unwrap_or_default()
    }
}

impl CsvRow for QueueRow {
    const HEADER: &'static str = "time,queue,pending,running,cpu_allocated_m,memory_allocated,cpu_quota_m,memory_quota,cpu_borrowed_m,memory_borrowed";

    fn write(&self, w: &mut impl Write) -> std::io::Result<()> {
        let opt = |x: Option<i64>| x.map(|v| v.to_string()).unwrap_or_default();
        writeln!(
            w,
            "{:.6},{},{},{},{},{},{},{},{},{}",
            self.time,
            self.queue,
            self.pending,
            self.running,
            self.cpu_allocated_m,
            self.memory_allocated,
            opt(self.cpu_quota_m),
            opt(self.memory_quota),
            Self::borrowed(self.cpu_allocated_m, self.cpu_quota_m),
            Self::borrowed(self.memory_allocated, self.memory_quota),
        )
    }
}

/// A queue in `summary.json`.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct QueueSummary {
    /// Jobs submitted to it.
    pub jobs: u64,
    /// Jobs that started and ended.
    pub jobs_finished: u64,
    pub mean_wait: f64,
    /// Mean of max(1, (wait + run) / max(run, 10 s)).
    pub mean_bounded_slowdown: f64,
    /// Its allocated cpu-seconds over the cluster's allocatable cpu-seconds
    /// up to the makespan. Allocated counts pods from their binding, so a
    /// gang's pods hold before it starts: the queues' shares add up to at
    /// least the utilisation (which counts running pods).
    pub cpu_share: f64,
    /// The most cpu it held at once, in millicores.
    pub peak_cpu_allocated_m: i64,
}

#[derive(Default)]
struct QueueState {
    pending: u64,
    running: u64,
    cpu: i64,
    memory: i64,
    /// Allocated cpu integrated over time (millicore-seconds), up to `since`.
    cpu_seconds: f64,
    since: f64,
    jobs: u64,
    finished: u64,
    wait_sum: f64,
    bsld_sum: f64,
    peak_cpu: i64,
}

impl QueueState {
    fn integrate(&mut self, now: f64) {
        if now > self.since {
            self.cpu_seconds += self.cpu as f64 * (now - self.since);
            self.since = now;
        }
    }
}

/// A job's state as the queue counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// Submitted, not started.
    Waiting,
    /// Started, not ended by Batsim.
    Running,
    /// Neither (done).
    Neither,
}

/// Every queue of the run.
#[derive(Default)]
pub struct Queues {
    queues: BTreeMap<Arc<str>, QueueState>,
    /// Queue names as jobs give them -> the queue they count in.
    resolved: HashMap<Arc<str>, Arc<str>>,
    /// Queues changed in the window now open.
    dirty: BTreeSet<Arc<str>>,
    rows: RowSink<QueueRow>,
    /// Where `queues.csv` goes once there is a queue.
    streamed: Option<std::path::PathBuf>,
    open_error: Option<std::io::Error>,
    /// YuniKorn's parsed `queues.yaml`, with the ConfigMap's
    /// resourceVersion it was parsed from (parsed again when it changes).
    yunikorn: Option<(String, Value)>,
}

impl Queues {
    /// The queue a job naming `name` counts in (see the module doc).
    pub fn resolve(&mut self, store: &Store, name: &str) -> Arc<str> {
        if let Some(q) = self.resolved.get(name) {
            return q.clone();
        }
        let local = store
            .get(LOCAL_QUEUES, Some(translate::NAMESPACE), name)
            .ok()
            .and_then(|lq| {
                lq.pointer("/spec/clusterQueue")
                    .and_then(Value::as_str)
                    .map(Arc::<str>::from)
            });
        let q = local.clone().unwrap_or_else(|| name.into());
        // A name that is no LocalQueue (yet) is looked up again next time.
        if local.is_some() {
            self.resolved.insert(name.into(), q.clone());
        }
        q
    }

    /// A job enters its queue.
    pub fn submitted(&mut self, queue: &Arc<str>) {
        let s = self.queues.entry(queue.clone()).or_default();
        s.jobs += 1;
        self.dirty.insert(queue.clone());
    }

    /// A job's count moves from `from` to `to`.
    pub fn job_moved(&mut self, queue: &Arc<str>, from: Counted, to: Counted) {
        if from == to {
            return;
        }
        let s = self.queues.entry(queue.clone()).or_default();
        match from {
            Counted::Waiting => s.pending = s.pending.saturating_sub(1),
            Counted::Running => s.running = s.running.saturating_sub(1),
            Counted::Neither => {}
        }
        match to {
            Counted::Waiting => s.pending += 1,
            Counted::Running => s.running += 1,
            Counted::Neither => {}
        }
        self.dirty.insert(queue.clone());
    }

    /// A pod of the queue takes (`by` = 1) or gives back (-1) its requests.
    pub fn hold(&mut self, queue: &Arc<str>, requests: &Amounts, by: i64, now: f64) {
        let s = self.queues.entry(queue.clone()).or_default();
        s.integrate(now);
        s.cpu += by * requests.get("cpu").copied().unwrap_or(0);
        s.memory += by * requests.get("memory").copied().unwrap_or(0);
        s.peak_cpu = s.peak_cpu.max(s.cpu);
        self.dirty.insert(queue.clone());
    }

    /// A job of the queue ended after running: its wait and slowdown.
    pub fn finished(&mut self, queue: &Arc<str>, created: f64, started: f64, finished: f64) {
        let s = self.queues.entry(queue.clone()).or_default();
        let wait = (started - created).max(0.0);
        let run = (finished - started).max(0.0);
        s.finished += 1;
        s.wait_sum += wait;
        s.bsld_sum += ((wait + run) / run.max(BSLD_TAU)).max(1.0);
    }

    /// The queue object changed (a scenario patched its quota).
    pub fn touched(&mut self, name: &str) {
        if let Some((q, _)) = self.queues.get_key_value(name) {
            self.dirty.insert(q.clone());
        }
    }

    /// Writes a row for every queue changed since the last call, with its
    /// state now and its quota as the API holds it.
    pub fn flush(&mut self, store: &Store, now: f64) {
        if self.dirty.is_empty() {
            return;
        }
        if let Some(p) = self.streamed.take() {
            if let Err(e) = self.rows.stream_to(&p) {
                self.open_error.get_or_insert(e);
            }
        }
        for q in std::mem::take(&mut self.dirty) {
            let (cpu_quota_m, memory_quota) = match quota(store, &q) {
                (None, None) => self.yunikorn_quota(store, &q),
                found => found,
            };
            let s = &self.queues[&q];
            self.rows.push(QueueRow {
                time: now,
                queue: q.clone(),
                pending: s.pending,
                running: s.running,
                cpu_allocated_m: s.cpu,
                memory_allocated: s.memory,
                cpu_quota_m,
                memory_quota,
            });
        }
    }

    /// Whether any job named a queue.
    pub fn any(&self) -> bool {
        !self.queues.is_empty()
    }

    /// `queues.csv` goes to `path` as the run goes, from the first queue
    /// on (a run without queues has no such file).
    pub fn stream_to(&mut self, path: &std::path::Path) {
        self.streamed = Some(path.to_path_buf());
    }

    /// Per queue, for `summary.json`; `cpu_seconds_m` is the cluster's
    /// allocatable millicore-seconds up to `now`.
    pub fn summary(&mut self, now: f64, cpu_seconds_m: f64) -> BTreeMap<String, QueueSummary> {
        self.queues
            .iter_mut()
            .map(|(q, s)| {
                s.integrate(now);
                let n = s.finished.max(1) as f64;
                (
                    q.to_string(),
                    QueueSummary {
                        jobs: s.jobs,
                        jobs_finished: s.finished,
                        mean_wait: s.wait_sum / n,
                        mean_bounded_slowdown: if s.finished > 0 { s.bsld_sum / n } else { 0.0 },
                        cpu_share: if cpu_seconds_m > 0.0 {
                            s.cpu_seconds / cpu_seconds_m
                        } else {
                            0.0
                        },
                        peak_cpu_allocated_m: s.peak_cpu,
                    },
                )
            })
            .collect()
    }

    /// Rows kept in memory (none once streamed).
    pub fn take_kept(&mut self) -> Vec<QueueRow> {
        self.rows.take_kept()
    }

    /// Completes `queues.csv`; the first error met writing it.
    pub fn finish(&mut self) -> std::io::Result<()> {
        if let Some(e) = self.open_error.take() {
            return Err(e);
        }
        self.rows.flush()
    }
}

impl Queues {
    /// The cpu and memory of YuniKorn's queue `name` (`root.` prefixed
    /// unless it is a full path) in the default partition of its
    /// configuration: its `max` resources, else its `guaranteed` ones
    /// (`vcore` as a cpu quantity, `10` or `500m`; `memory` as bytes or
    /// with a suffix).
    fn yunikorn_quota(&mut self, store: &Store, name: &str) -> (Option<i64>, Option<i64>) {
        let (ns, cm) = YUNIKORN_CONFIGMAP;
        let Ok(obj) = store.get("configmaps", Some(ns), cm) else {
            return (None, None);
        };
        let rv = obj["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if self.yunikorn.as_ref().is_none_or(|(v, _)| *v != rv) {
            let parsed = obj["data"][YUNIKORN_QUEUES_KEY]
                .as_str()
                .and_then(|text| serde_yaml::from_str::<Value>(text).ok())
                .unwrap_or(Value::Null);
            self.yunikorn = Some((rv, parsed));
        }
        let Some((_, conf)) = &self.yunikorn else {
            return (None, None);
        };
        yunikorn_queue(conf, name)
            .map(|q| {
                let res = &q["resources"];
                let limits = if res["max"].is_object() {
                    &res["max"]
                } else {
                    &res["guaranteed"]
                };
                let read = |resource: &str, key: &str| {
                    let v = match &limits[key] {
                        Value::Number(n) => Value::String(n.to_string()),
                        other => other.clone(),
                    };
                    translate::parse_quantity(resource, &v).ok()
                };
                (read("cpu", "vcore"), read("memory", "memory"))
            })
            .unwrap_or((None, None))
    }
}

/// The queue at `name` (`a.b` under root, or `root.a.b`) in YuniKorn's
/// configuration's `default` partition (else its only one).
fn yunikorn_queue<'a>(conf: &'a Value, name: &str) -> Option<&'a Value> {
    let partitions = conf["partitions"].as_array()?;
    let partition = partitions
        .iter()
        .find(|p| p["name"] == "default")
        .or_else(|| (partitions.len() == 1).then(|| &partitions[0]))?;
    let path = if name == "root" || name.starts_with("root.") {
        name.to_string()
    } else {
        format!("root.{name}")
    };
    let mut level = partition["queues"].as_array()?;
    let mut found = None;
    for part in path.split('.') {
        let q = level.iter().find(|q| {
            q["name"]
                .as_str()
                .is_some_and(|n| n.eq_ignore_ascii_case(part))
        })?;
        found = Some(q);
        level = match q["queues"].as_array() {
            Some(children) => children,
            None => &EMPTY,
        };
    }
    found
}

static EMPTY: Vec<Value> = Vec::new();

/// A queue's cpu and memory quota from its object in the API, if any.
fn quota(store: &Store, name: &str) -> (Option<i64>, Option<i64>) {
    for kind in QUOTA_KINDS {
        let Ok(obj) = store.get(kind, None, name) else {
            continue;
        };
        let mut cpu = None;
        let mut memory = None;
        let mut add = |resource: &str, v: &Value| {
            if let Ok(x) = translate::parse_quantity(resource, v) {
                let slot = if resource == "cpu" {
                    &mut cpu
                } else {
                    &mut memory
                };
                *slot = Some(slot.unwrap_or(0) + x);
            }
        };
        if let Some(cap) = obj.pointer("/spec/capability").and_then(Value::as_object) {
            for r in ["cpu", "memory"] {
                if let Some(v) = cap.get(r) {
                    add(r, v);
                }
            }
        }
        let groups = obj
            .pointer("/spec/resourceGroups")
            .and_then(Value::as_array);
        for g in groups.into_iter().flatten() {
            let flavors = g.get("flavors").and_then(Value::as_array);
            for f in flavors.into_iter().flatten() {
                let resources = f.get("resources").and_then(Value::as_array);
                for r in resources.into_iter().flatten() {
                    let name = r.get("name").and_then(Value::as_str).unwrap_or("");
                    if let (true, Some(v)) =
                        (name == "cpu" || name == "memory", r.get("nominalQuota"))
                    {
                        add(name, v);
                    }
                }
            }
        }
        return (cpu, memory);
    }
    (None, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amounts(cpu: i64, memory: i64) -> Amounts {
        [("cpu".to_string(), cpu), ("memory".to_string(), memory)]
            .into_iter()
            .collect()
    }

    #[test]
    fn rows_per_window_with_quota_and_borrowing_and_a_summary() {
        let store = Store::new();
        let crd = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "clusterqueues.kueue.x-k8s.io"},
            "spec": {"group": "kueue.x-k8s.io", "scope": "Cluster",
                "names": {"plural": "clusterqueues", "singular": "clusterqueue", "kind": "ClusterQueue"},
                "versions": [{"name": "v1beta1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
        store.install_crd(crd).unwrap();
        store
            .create(
                "clusterqueues.kueue.x-k8s.io",
                None,
                serde_json::json!({"metadata": {"name": "team-a"}, "spec": {"resourceGroups": [
                    {"coveredResources": ["cpu"], "flavors": [
                        {"name": "f1", "resources": [{"name": "cpu", "nominalQuota": "2"}]},
                        {"name": "f2", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}]}}),
            )
            .unwrap();
        let mut qs = Queues::default();
        let a = qs.resolve(&store, "team-a");
        let b = qs.resolve(&store, "team-b");
        qs.submitted(&a);
        qs.job_moved(&a, Counted::Neither, Counted::Waiting);
        qs.submitted(&b);
        qs.job_moved(&b, Counted::Neither, Counted::Waiting);
        qs.flush(&store, 0.0);
        // A 4-cpu gang of team-a starts at 5 and ends at 25.
        for _ in 0..2 {
            qs.hold(&a, &amounts(2000, 1 << 30), 1, 5.0);
        }
        qs.job_moved(&a, Counted::Waiting, Counted::Running);
        qs.flush(&store, 5.0);
        qs.job_moved(&a, Counted::Running, Counted::Neither);
        for _ in 0..2 {
            qs.hold(&a, &amounts(2000, 1 << 30), -1, 25.0);
        }
        qs.finished(&a, 0.0, 5.0, 25.0);
        qs.flush(&store, 25.0);
        let rows: Vec<String> = qs
            .take_kept()
            .iter()
            .map(|r| {
                let mut v = Vec::new();
                r.write(&mut v).unwrap();
                String::from_utf8(v).unwrap().trim().to_string()
            })
            .collect();
        assert_eq!(
            rows,
            [
                "0.000000,team-a,1,0,0,0,3000,,0,",
                "0.000000,team-b,1,0,0,0,,,,",
                "5.000000,team-a,0,1,4000,2147483648,3000,,1000,",
                "25.000000,team-a,0,0,0,0,3000,,0,",
            ]
        );
        let s = qs.summary(50.0, 8000.0 * 50.0);
        let ta = &s["team-a"];
        assert_eq!((ta.jobs, ta.jobs_finished), (1, 1));
        assert_eq!(ta.mean_wait, 5.0);
        assert_eq!(ta.mean_bounded_slowdown, 25.0 / 20.0);
        assert_eq!(ta.cpu_share, 4000.0 * 20.0 / (8000.0 * 50.0));
        assert_eq!(ta.peak_cpu_allocated_m, 4000);
        assert_eq!(s["team-b"].jobs_finished, 0);
    }

    /// YuniKorn's queues: `max` where given, else `guaranteed`, read from
    /// its ConfigMap, and read again when the ConfigMap changes.
    #[test]
    fn yunikorn_quotas_come_from_its_configmap() {
        let store = Store::new();
        let conf = |b_max: &str| {
            serde_json::json!({"metadata": {"name": "yunikorn-configs", "namespace": "default"},
                "data": {"queues.yaml": format!(
                    "partitions:\n- name: default\n  queues:\n  - name: root\n    queues:\n\
                     \x20   - name: a\n      resources:\n        guaranteed: {{vcore: 10, memory: 40Gi}}\n\
                     \x20   - name: b\n      resources:\n        guaranteed: {{vcore: \"2\"}}\n\
                     \x20       max: {{vcore: {b_max}, memory: \"1073741824\"}}\n")}})
        };
        store
            .create("configmaps", Some("default"), conf("6"))
            .unwrap();
        let mut qs = Queues::default();
        assert_eq!(
            qs.yunikorn_quota(&store, "a"),
            (Some(10_000), Some(40 << 30))
        );
        assert_eq!(
            qs.yunikorn_quota(&store, "root.b"),
            (Some(6000), Some(1 << 30))
        );
        assert_eq!(qs.yunikorn_quota(&store, "c"), (None, None));
        let mut cm = store
            .get("configmaps", Some("default"), "yunikorn-configs")
            .unwrap();
        cm["data"] = conf("500m")["data"].clone();
        store.update("configmaps", Some("default"), cm).unwrap();
        assert_eq!(qs.yunikorn_quota(&store, "b"), (Some(500), Some(1 << 30)));
    }
}
