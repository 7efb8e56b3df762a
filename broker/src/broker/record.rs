//! What the broker records for researchers: one row per pod (`pods.csv`),
//! the allocation of every node over time (`nodes.csv`) and a run summary
//! (`summary.json`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::Serialize;

use crate::translate::Amounts;

/// One pod's life.
#[derive(Debug, Clone, Default)]
pub struct PodRecord {
    pub job_id: String,
    pub pod: String,
    pub node: Option<String>,
    pub created: f64,
    pub bound: Option<f64>,
    pub started: Option<f64>,
    pub finished: Option<f64>,
    /// Scheduling attempts seen (failed ones plus the binding).
    pub attempts: u32,
    pub last_unschedulable_reason: Option<String>,
    /// Batsim's final state, or why the job was rejected.
    pub outcome: String,
    pub requests: Amounts,
}

fn opt(x: Option<f64>) -> String {
    x.map(|v| format!("{v:.6}")).unwrap_or_default()
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

pub fn write_pods_csv(path: &Path, pods: &[PodRecord]) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(
        w,
        "job_id,pod,node,created,bound,started,finished,attempts,last_unschedulable_reason,outcome,cpu_request_m,memory_request"
    )?;
    for p in pods {
        writeln!(
            w,
            "{},{},{},{:.6},{},{},{},{},{},{},{},{}",
            csv_field(&p.job_id),
            p.pod,
            p.node.as_deref().unwrap_or(""),
            p.created,
            opt(p.bound),
            opt(p.started),
            opt(p.finished),
            p.attempts,
            csv_field(p.last_unschedulable_reason.as_deref().unwrap_or("")),
            csv_field(&p.outcome),
            p.requests.get("cpu").copied().unwrap_or(0),
            p.requests.get("memory").copied().unwrap_or(0),
        )?;
    }
    w.flush()
}

/// One allocation change on a node: the columns of `nodes.csv`, with the
/// node's name shared (a run of a million jobs makes two million samples).
#[derive(Debug, Clone)]
pub struct NodeSample {
    pub time: f64,
    pub node: std::sync::Arc<str>,
    /// Millicores.
    pub cpu_used: i64,
    pub cpu_allocatable: i64,
    /// Bytes.
    pub memory_used: i64,
    pub memory_allocatable: i64,
    pub pods: u32,
}

pub fn write_nodes_csv(path: &Path, samples: &[NodeSample]) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(
        w,
        "time,node,cpu_used_m,cpu_allocatable_m,memory_used,memory_allocatable,pods"
    )?;
    for s in samples {
        writeln!(
            w,
            "{:.6},{},{},{},{},{},{}",
            s.time,
            s.node,
            s.cpu_used,
            s.cpu_allocatable,
            s.memory_used,
            s.memory_allocatable,
            s.pods,
        )?;
    }
    w.flush()
}

/// How a run ended (`end_reason` in summary.json).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum EndReason {
    /// Batsim sent SIMULATION_ENDS.
    #[default]
    Done,
    /// SIGINT (Ctrl-C).
    Sigint,
    /// SIGTERM.
    Sigterm,
    /// The scheduler process ended before the simulation did.
    SchedulerExited,
    /// Batsim (or the stand-in) died or ended the exchange early.
    BatsimFailed,
    /// A binding overcommitted a node under `--strict`.
    Overcommit,
    /// Pending pods, nothing running, no decision for
    /// `--scheduler-crash-timeout` simulated seconds.
    Stalled,
    /// The scheduler did not watch the API within `--window-bound`.
    WindowBound,
    /// Another invariant failed (a binding to an unknown node, the API's
    /// own accounting).
    Invariant,
    /// Anything else (bad input met during the run, an I/O error).
    Error,
}

impl EndReason {
    /// The exit status of `batkube run` for this ending: 0, 128 + the
    /// signal's number, else 1.
    pub fn exit_code(self) -> u8 {
        match self {
            EndReason::Done => 0,
            EndReason::Sigint => 128 + 2,
            EndReason::Sigterm => 128 + 15,
            _ => 1,
        }
    }
}

/// `summary.json`.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Summary {
    pub completed: bool,
    /// Why the run ended (`done` when it completed).
    pub end_reason: EndReason,
    /// Simulated time (Batsim seconds) when the run ended.
    pub end_time: f64,
    pub makespan: f64,
    pub mean_wait: f64,
    pub max_wait: f64,
    /// Busy cpu time over allocatable cpu time up to the makespan.
    pub utilisation: f64,
    pub overcommit_count: u64,
    pub jobs: usize,
    pub jobs_succeeded: usize,
    pub jobs_failed: usize,
    pub jobs_rejected: usize,
    pub wall_seconds: f64,
    pub messages_exchanged: u64,
    pub simulated_to_wall_ratio: f64,
    pub windows: u64,
    /// Terminated pods the pod GC deleted from the API
    /// (`--terminated-pod-gc-threshold`).
    pub pods_garbage_collected: u64,
    pub wake_ups_requested: u64,
    pub windows_bound_hit: u64,
    pub batkube_version: String,
    /// How the scheduler got simulated time: linked, seccomp, preload or
    /// none (`--shim auto` resolved).
    pub shim: String,
    /// Under the seccomp supervisor: clock reads answered, timed waits
    /// handled, futex wakes seen (what a simulation cost in system calls).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supervisor: Option<BTreeMap<String, u64>>,
    pub flags: BTreeMap<String, String>,
    pub error: Option<String>,
    /// What the run warned about (pods of a schedulerName nobody serves).
    pub warnings: Vec<String>,
    /// Pods evicted while bound or running (node failures, drains, the
    /// scenario's deletions).
    pub evictions: u64,
    /// Simulated seconds the evicted jobs had run (work lost, with
    /// `--resubmit-evicted` done again).
    pub lost_work_seconds: f64,
    /// Jobs registered again by `--resubmit-evicted`.
    pub resubmissions: u64,
}

impl Summary {
    /// Fills the job statistics from the pod records.
    pub fn from_pods(pods: &[PodRecord], allocatable_cpu_m: i64) -> Self {
        let mut s = Summary {
            jobs: pods.len(),
            batkube_version: env!("CARGO_PKG_VERSION").to_string(),
            ..Default::default()
        };
        let mut waits = Vec::new();
        let mut busy_cpu = 0.0;
        for p in pods {
            match p.outcome.as_str() {
                "COMPLETED_SUCCESSFULLY" => s.jobs_succeeded += 1,
                o if o.starts_with("REJECTED") => s.jobs_rejected += 1,
                _ if p.finished.is_some() => s.jobs_failed += 1,
                _ => {}
            }
            if let Some(start) = p.started {
                waits.push(start - p.created);
                if let Some(f) = p.finished {
                    s.makespan = s.makespan.max(f);
                    busy_cpu += (f - start) * p.requests.get("cpu").copied().unwrap_or(0) as f64;
                }
            }
        }
        if !waits.is_empty() {
            s.mean_wait = waits.iter().sum::<f64>() / waits.len() as f64;
            s.max_wait = waits.iter().copied().fold(0.0, f64::max);
        }
        if s.makespan > 0.0 && allocatable_cpu_m > 0 {
            s.utilisation = busy_cpu / (allocatable_cpu_m as f64 * s.makespan);
        }
        s
    }
}
