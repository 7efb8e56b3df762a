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
    /// The gang the pod belongs to (its job's pod name), for a parallel job.
    pub group: Option<std::sync::Arc<str>>,
    /// The pod's rank in its gang (0 for a job's only pod).
    pub rank: u32,
    /// The queue its job counts in (`queues.csv`'s name: a Volcano Queue, a
    /// Kueue ClusterQueue), if it names one.
    pub queue: Option<std::sync::Arc<str>>,
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

/// A row of one of the CSV files the broker writes.
pub trait CsvRow {
    const HEADER: &'static str;
    fn write(&self, w: &mut impl Write) -> std::io::Result<()>;
}

/// `path` with `rows` under the header.
pub fn write_csv<T: CsvRow>(path: &Path, rows: &[T]) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    writeln!(w, "{}", T::HEADER)?;
    for r in rows {
        r.write(&mut w)?;
    }
    w.flush()
}

/// Rows streamed to a file as a run goes, or kept (when nobody asked for a
/// file); the first write error is kept for `flush`.
pub struct RowSink<T> {
    sink: Option<std::io::BufWriter<std::fs::File>>,
    kept: Vec<T>,
    error: Option<std::io::Error>,
}

impl<T> Default for RowSink<T> {
    fn default() -> Self {
        RowSink {
            sink: None,
            kept: Vec::new(),
            error: None,
        }
    }
}

impl<T: CsvRow> RowSink<T> {
    /// From now on, rows go to `path` (the header and the rows so far).
    pub fn stream_to(&mut self, path: &Path) -> std::io::Result<()> {
        let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
        writeln!(w, "{}", T::HEADER)?;
        for r in self.kept.drain(..) {
            r.write(&mut w)?;
        }
        self.sink = Some(w);
        Ok(())
    }

    pub fn push(&mut self, r: T) {
        match &mut self.sink {
            Some(w) => {
                if let Err(e) = r.write(w) {
                    self.error.get_or_insert(e);
                }
            }
            None => self.kept.push(r),
        }
    }

    /// The rows kept in memory (none when streamed).
    pub fn take_kept(&mut self) -> Vec<T> {
        std::mem::take(&mut self.kept)
    }

    /// Flushes the file; the first write error, if any.
    pub fn flush(&mut self) -> std::io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        match &mut self.sink {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}

impl CsvRow for PodRecord {
    const HEADER: &'static str = "job_id,pod,node,created,bound,started,finished,attempts,last_unschedulable_reason,outcome,cpu_request_m,memory_request,group,queue";

    fn write(&self, w: &mut impl Write) -> std::io::Result<()> {
        let p = self;
        writeln!(
            w,
            "{},{},{},{:.6},{},{},{},{},{},{},{},{},{},{}",
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
            p.group.as_deref().unwrap_or(""),
            csv_field(p.queue.as_deref().unwrap_or("")),
        )
    }
}

pub fn write_pods_csv(path: &Path, pods: &[PodRecord]) -> std::io::Result<()> {
    write_csv(path, pods)
}

/// The job statistics of `summary.json`, added up pod by pod in pods.csv's
/// order (the same sums, to the last bit, as over the whole list).
#[derive(Debug, Clone, Default)]
pub struct PodStats {
    pub jobs: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub rejected: usize,
    waits: usize,
    wait_sum: f64,
    max_wait: f64,
    makespan: f64,
    busy_cpu: f64,
}

impl PodStats {
    /// Job statistics count a job once (its first pod: a gang's pods are
    /// created, started and ended together); the cpu it used counts every
    /// pod.
    pub fn add(&mut self, p: &PodRecord) {
        if p.rank > 0 {
            if let (Some(start), Some(f)) = (p.started, p.finished) {
                self.busy_cpu += (f - start) * p.requests.get("cpu").copied().unwrap_or(0) as f64;
            }
            return;
        }
        self.jobs += 1;
        match p.outcome.as_str() {
            "COMPLETED_SUCCESSFULLY" => self.succeeded += 1,
            o if o.starts_with("REJECTED") => self.rejected += 1,
            _ if p.finished.is_some() => self.failed += 1,
            _ => {}
        }
        if let Some(start) = p.started {
            let wait = start - p.created;
            self.waits += 1;
            self.wait_sum += wait;
            self.max_wait = self.max_wait.max(wait);
            if let Some(f) = p.finished {
                self.makespan = self.makespan.max(f);
                self.busy_cpu += (f - start) * p.requests.get("cpu").copied().unwrap_or(0) as f64;
            }
        }
    }

    /// A summary with these statistics (the rest left to the caller).
    pub fn summary(&self, allocatable_cpu_m: i64) -> Summary {
        let mut s = Summary {
            jobs: self.jobs,
            jobs_succeeded: self.succeeded,
            jobs_failed: self.failed,
            jobs_rejected: self.rejected,
            makespan: self.makespan,
            batkube_version: env!("CARGO_PKG_VERSION").to_string(),
            ..Default::default()
        };
        if self.waits > 0 {
            s.mean_wait = self.wait_sum / self.waits as f64;
            s.max_wait = self.max_wait;
        }
        if s.makespan > 0.0 && allocatable_cpu_m > 0 {
            s.utilisation = self.busy_cpu / (allocatable_cpu_m as f64 * s.makespan);
        }
        s
    }
}

/// pods.csv as a run goes: a finished job's record leaves memory once
/// every job submitted before it has finished too (the file keeps
/// submission order; only the records finished out of order wait here),
/// and the summary's statistics are kept as running sums.
#[derive(Default)]
pub struct PodLog {
    /// Index of the next record to write.
    next: usize,
    /// Finished records waiting for an earlier one.
    waiting: BTreeMap<usize, PodRecord>,
    stats: PodStats,
    rows: RowSink<PodRecord>,
}

impl PodLog {
    /// From now on, rows go to `path` (the header and the rows so far).
    pub fn stream_to(&mut self, path: &Path) -> std::io::Result<()> {
        self.rows.stream_to(path)
    }

    /// Job number `index` (in submission order) has its final record.
    pub fn finished(&mut self, index: usize, record: PodRecord) {
        self.waiting.insert(index, record);
        while let Some(r) = self.waiting.remove(&self.next) {
            self.stats.add(&r);
            self.rows.push(r);
            self.next += 1;
        }
    }

    /// Records finished out of order, waiting for an earlier one.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    pub fn stats(&self) -> &PodStats {
        &self.stats
    }

    /// The records kept in memory (none when streamed).
    pub fn take_kept(&mut self) -> Vec<PodRecord> {
        self.rows.take_kept()
    }

    /// Flushes the file; the first write error, if any.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.rows.flush()
    }
}

/// The final state of each pod as pods.csv says it (what a jobs.csv
/// written by the broker needs: job id, created, started, finished,
/// outcome), read back from the file.
pub fn read_pods_csv(path: &Path) -> std::io::Result<Vec<PodRecord>> {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_path(path)
        .map_err(std::io::Error::other)?;
    let num = |s: &str| s.parse::<f64>().ok();
    let mut out = Vec::new();
    for row in r.records() {
        let row = row.map_err(std::io::Error::other)?;
        let f = |i: usize| row.get(i).unwrap_or("");
        out.push(PodRecord {
            job_id: f(0).to_string(),
            pod: f(1).to_string(),
            created: num(f(3)).unwrap_or(0.0),
            started: num(f(5)),
            finished: num(f(6)),
            outcome: f(9).to_string(),
            ..Default::default()
        });
    }
    Ok(out)
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

impl CsvRow for NodeSample {
    const HEADER: &'static str =
        "time,node,cpu_used_m,cpu_allocatable_m,memory_used,memory_allocatable,pods";

    fn write(&self, w: &mut impl Write) -> std::io::Result<()> {
        let s = self;
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
        )
    }
}

pub fn write_nodes_csv(path: &Path, samples: &[NodeSample]) -> std::io::Result<()> {
    write_csv(path, samples)
}

/// nodes.csv as a run goes (two samples per job: a run of a million jobs
/// would hold two million), or the samples kept when nobody asked for a
/// file.
#[derive(Default)]
pub struct NodeLog {
    rows: RowSink<NodeSample>,
    /// The samples of the window now open: the order in which a
    /// scheduler's bindings reach the API within one instant is not the
    /// order it decided them in (its binding requests race on their
    /// connections), so a window's rows are put in node order, and a node
    /// changed several times in one instant keeps only its state at the
    /// end of it (its states in between exist only in the race's order).
    window: Option<Vec<NodeSample>>,
}

impl NodeLog {
    pub fn begin_window(&mut self) {
        self.window.get_or_insert_with(Vec::new);
    }

    pub fn end_window(&mut self) {
        if let Some(mut rows) = self.window.take() {
            rows.sort_by(|a, b| a.node.cmp(&b.node)); // stable
            let mut rows = rows.into_iter().peekable();
            while let Some(s) = rows.next() {
                let superseded = rows
                    .peek()
                    .is_some_and(|next| next.node == s.node && next.time == s.time);
                if !superseded {
                    self.rows.push(s);
                }
            }
        }
    }

    pub fn stream_to(&mut self, path: &Path) -> std::io::Result<()> {
        self.rows.stream_to(path)
    }

    pub fn push(&mut self, s: NodeSample) {
        match &mut self.window {
            Some(rows) => rows.push(s),
            None => self.rows.push(s),
        }
    }

    pub fn take_kept(&mut self) -> Vec<NodeSample> {
        self.end_window();
        self.rows.take_kept()
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.end_window();
        self.rows.flush()
    }
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
    /// A process of `--controller` ended before the simulation did (the
    /// error names it).
    ControllerExited,
    /// Batsim (or the stand-in) died or ended the exchange early.
    BatsimFailed,
    /// A binding overcommitted a node under `--strict`.
    Overcommit,
    /// Pending pods, nothing running, no decision for
    /// `--scheduler-crash-timeout` simulated seconds.
    Stalled,
    /// The scheduler did not watch the API within `--window-bound`.
    WindowBound,
    /// Nothing can ever progress: every pending gang is partly bound (its
    /// bound pods hold nodes the others wait for), nothing runs, nothing
    /// more is to arrive.
    Deadlock,
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
    /// Instants whose changes did not fit in the scheduler's receive
    /// windows: it could read part of them before the rest arrived (the
    /// only case where simultaneity is up to the machine; see the guide's
    /// docs/src/concepts/time-model.md).
    pub partial_instants: u64,
    /// Windows that closed on quiescence, after which the scheduler ran
    /// (or the API served it) before the next instant: the decision was
    /// wrong, and what it did then landed at the next instant (0 expected;
    /// the soak counts a run with any as suspect).
    pub quiescence_contradicted: u64,
    pub windows_bound_hit: u64,
    /// Times a deterministic program was held at `--spin-bound`: busy at
    /// one instant without ever being quiet, then let go on at the next.
    pub spins_held: u64,
    /// The most system calls a deterministic program made at one instant
    /// between two quiet points, short of `--spin-bound` (0 outside the
    /// deterministic mode): how close the run came to the bound.
    pub spin_busiest_calls: u64,
    /// CPU time (user and system, seconds) each program on simulated time
    /// had used when the run ended: `scheduler`, `controller-1`, …
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub program_cpu_seconds: BTreeMap<String, f64>,
    /// CPU time (user and system, seconds) batkube's own process had used
    /// when the run ended: the broker, the API, the time shim's
    /// supervisors and the built-in stand-in (not real Batsim, a process
    /// of its own, nor the programs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batkube_cpu_seconds: Option<f64>,
    /// The timer elision rules in force (`--elide`): `none` unless asked.
    pub elide: String,
    /// Per rule of `--elide`: programs' earliest timers the clock went past
    /// without stopping (each stands for one firing at least; see
    /// `timeshim::elide`).
    pub wake_ups_elided: BTreeMap<String, u64>,
    /// Gangs (jobs on several machines) started.
    pub gangs_started: u64,
    /// Jobs asking for no cpu or memory whose pods took their nodes whole,
    /// as in Batsim (`--no-requests-means whole-node`, the default).
    pub jobs_whole_node: u64,
    /// Node-seconds held by partly bound gangs: each pod of a gang, from
    /// its binding until the whole gang started (or ended unstarted).
    pub partial_gang_node_seconds: f64,
    pub batkube_version: String,
    /// How the scheduler got simulated time: linked, seccomp, preload or
    /// none (`--shim auto` resolved).
    pub shim: String,
    /// Under the seccomp supervisor: clock reads answered, timed waits
    /// handled, futex wakes seen (what a simulation cost in system calls).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supervisor: Option<BTreeMap<String, u64>>,
    /// What deciding quiescence cost, summed over the programs: probes of
    /// their threads, threads' states read, wake-ups of the wait by their
    /// activity (absent when no program runs under a time shim).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quiescence_looks: Option<BTreeMap<String, u64>>,
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
    /// Jobs registered again: by `--resubmit-evicted`, and the later
    /// attempts of `--submit-as` objects (retries, readmissions).
    pub resubmissions: u64,
    /// Per queue (jobs naming one; see `queues.rs`): waits, slowdowns,
    /// share of the cluster.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub queues: BTreeMap<String, super::queues::QueueSummary>,
}

impl Summary {
    /// Fills the job statistics from the pod records.
    pub fn from_pods(pods: &[PodRecord], allocatable_cpu_m: i64) -> Self {
        let mut stats = PodStats::default();
        for p in pods {
            stats.add(p);
        }
        stats.summary(allocatable_cpu_m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(node: &str, cpu_used: i64) -> NodeSample {
        NodeSample {
            time: 5.0,
            node: node.into(),
            cpu_used,
            cpu_allocatable: 4000,
            memory_used: 0,
            memory_allocatable: 0,
            pods: 1,
        }
    }

    /// Bindings of one instant reach the API in either order: nodes.csv
    /// is the same, each node's state at the end of the instant.
    #[test]
    fn a_windows_node_rows_come_out_in_node_order_whatever_the_arrival() {
        let rows = |order: &[(&str, i64)]| {
            let mut log = NodeLog::default();
            log.push(sample("node-9", 0)); // outside a window: as it comes
            log.begin_window();
            for &(n, c) in order {
                log.push(sample(n, c));
            }
            log.end_window();
            log.take_kept()
                .iter()
                .map(|s| format!("{}:{}", s.node, s.cpu_used))
                .collect::<Vec<_>>()
        };
        let a = rows(&[("node-2", 1000), ("node-1", 1000), ("node-2", 2000)]);
        let b = rows(&[("node-1", 1000), ("node-2", 1000), ("node-2", 2000)]);
        assert_eq!(a, b);
        assert_eq!(a, ["node-9:0", "node-1:1000", "node-2:2000"]);
    }
}
