//! `timeline.csv`: what happened when, one row per API change and per
//! Batsim event, in simulated time (KEP-140's "result timeline").
//!
//! Columns: `time,source,verb,kind,namespace,name,detail`. Sources:
//! `batsim` (an event Batsim sent), `broker` (a decision sent to Batsim,
//! or an API change the broker made: nodes from hosts, pods from jobs, the
//! node lifecycle controller's taints and evictions, a resubmission),
//! `kubelet` (the kubelet model: pod statuses), `scheduler` (the
//! scheduler, or an HTTP client that does not say who it is), the name of
//! any other HTTP client from its `User-Agent` (its program, and the
//! component client-go appends: `kube-controller-manager/job-controller`,
//! `vc-controller-manager`, `kueue-manager`, `kubectl`), `garbage-collector`
//! (the API's garbage collector deleting dependents whose owners are
//! gone), `scenario` (an operation of `--scenario`).
//!
//! Leases and Events are left out (a scheduler renews its lease every
//! two simulated seconds and writes an Event per attempt: they would drown
//! the rest). Changes an HTTP client makes within one window reach the
//! broker in an order that varies from run to run; the window's rows are
//! sorted by object (then by arrival per object), so reruns give the same
//! file.
//!
//! A run streams the rows to its `timeline.csv` as each window closes
//! ([`Timeline::stream_to`]): memory holds one window's rows, not the
//! run's (a million pods make millions of rows).

use std::borrow::Cow;
use std::path::Path;

use fakeapi::{Change, EventType};

/// One row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub time: f64,
    pub source: Cow<'static, str>,
    pub verb: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub detail: String,
}

/// The rows of a run.
#[derive(Debug, Default)]
pub struct Timeline {
    /// Rows not written yet.
    rows: Vec<Row>,
    window_start: Option<usize>,
    sink: Option<Sink>,
    /// The scheduler's program (its file name), whose requests are the
    /// `scheduler`'s (see [`Timeline::name_scheduler`]).
    scheduler_program: Option<String>,
}

#[derive(Debug)]
struct Sink {
    path: std::path::PathBuf,
    writer: csv::Writer<std::io::BufWriter<std::fs::File>>,
    /// The first write error, reported when the file is finished.
    error: Option<std::io::Error>,
}

const HEADER: [&str; 7] = [
    "time",
    "source",
    "verb",
    "kind",
    "namespace",
    "name",
    "detail",
];

fn write_row<W: std::io::Write>(w: &mut csv::Writer<W>, r: &Row) -> csv::Result<()> {
    w.write_record([
        format!("{:.6}", r.time).as_str(),
        &r.source,
        &r.verb,
        &r.kind,
        &r.namespace,
        &r.name,
        &r.detail,
    ])
}

/// Kinds left out of the timeline.
const LEFT_OUT: &[&str] = &["leases", "events"];

impl Timeline {
    pub fn push(
        &mut self,
        time: f64,
        source: impl Into<Cow<'static, str>>,
        verb: impl Into<String>,
        kind: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
        detail: impl Into<String>,
    ) {
        self.rows.push(Row {
            time,
            source: source.into(),
            verb: verb.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            detail: detail.into(),
        });
    }

    /// A change an HTTP client made (the scheduler).
    pub fn http_change(&mut self, time: f64, ch: &Change) {
        if LEFT_OUT.contains(&ch.resource.plural) {
            return;
        }
        let (verb, detail) = match ch.kind {
            EventType::Added => ("create", String::new()),
            EventType::Deleted => ("delete", String::new()),
            EventType::Modified => classify_update(ch),
        };
        let who: Cow<'static, str> = match (ch.origin, ch.client.as_deref()) {
            (fakeapi::Origin::GarbageCollector, _) => "garbage-collector".into(),
            (fakeapi::Origin::QuotaController, _) => "resourcequota-controller".into(),
            (fakeapi::Origin::ServiceAccountController, _) => "serviceaccount-controller".into(),
            (fakeapi::Origin::FlowControl, _) => "apiserver-flowcontrol".into(),
            (fakeapi::Origin::PolicyStatusController, _) => {
                "validatingadmissionpolicy-status-controller".into()
            }
            (_, None) => "scheduler".into(),
            (_, Some(ua)) => {
                let (program, name) = client_name(ua);
                if self.scheduler_program.as_deref() == Some(program) {
                    "scheduler".into()
                } else {
                    name.into()
                }
            }
        };
        self.push(
            time,
            who,
            verb,
            ch.resource.kind,
            ch.namespace.clone(),
            ch.name.clone(),
            detail,
        );
    }

    /// Requests whose `User-Agent` names `program` (the file name of the
    /// `--scheduler` command's program) are the scheduler's.
    pub fn name_scheduler(&mut self, program: &str) {
        self.scheduler_program = Some(program.to_string());
    }

    /// Rows pushed from now on belong to one window.
    pub fn begin_window(&mut self) {
        self.window_start = Some(self.rows.len());
    }

    /// Sorts the window's rows by object, keeping each object's order,
    /// and writes out what is settled when streaming.
    pub fn end_window(&mut self) {
        if let Some(start) = self.window_start.take() {
            self.rows[start..].sort_by(|a, b| {
                (a.kind.as_str(), a.namespace.as_str(), a.name.as_str()).cmp(&(
                    b.kind.as_str(),
                    b.namespace.as_str(),
                    b.name.as_str(),
                ))
            });
        }
        self.spill();
    }

    /// From now on, rows go to `path` as their window closes (the header
    /// and the rows so far at once).
    pub fn stream_to(&mut self, path: &Path) -> std::io::Result<()> {
        let file = std::fs::File::create(path)?;
        let mut writer = csv::Writer::from_writer(std::io::BufWriter::new(file));
        writer.write_record(HEADER).map_err(std::io::Error::other)?;
        self.sink = Some(Sink {
            path: path.to_path_buf(),
            writer,
            error: None,
        });
        self.spill();
        Ok(())
    }

    fn spill(&mut self) {
        if self.window_start.is_some() {
            return;
        }
        let Some(sink) = self.sink.as_mut() else {
            return;
        };
        for r in self.rows.drain(..) {
            if sink.error.is_none() {
                if let Err(e) = write_row(&mut sink.writer, &r) {
                    sink.error = Some(std::io::Error::other(e));
                }
            }
        }
    }

    /// The rows not written to the stream yet (all of them without one).
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// Finishes `timeline.csv` at `path`: the stream's file if it is that
    /// one (its last rows, then flushed), else every row at once.
    pub fn write_csv(&mut self, path: &Path) -> std::io::Result<()> {
        self.window_start = None;
        if self.sink.as_ref().is_some_and(|s| s.path == path) {
            self.spill();
            let sink = self.sink.as_mut().expect("checked above");
            if let Some(e) = sink.error.take() {
                return Err(e);
            }
            return sink.writer.flush();
        }
        let mut w = csv::Writer::from_path(path)?;
        w.write_record(HEADER)?;
        for r in &self.rows {
            write_row(&mut w, r)?;
        }
        w.flush()?;
        Ok(())
    }
}

/// A client's program and its name in the timeline, from its `User-Agent`:
/// client-go writes `PROGRAM/VERSION (OS/ARCH) kubernetes/COMMIT`, and a
/// component that asked for its own client appends `/COMPONENT`
/// (kube-controller-manager's controllers do): `PROGRAM/COMPONENT`; other
/// clients, the product before the first `/` (`kubectl`, `Python-urllib`).
pub fn client_name(ua: &str) -> (&str, String) {
    let ua = ua.trim();
    let program = ua
        .split(|c: char| c == '/' || c.is_whitespace())
        .next()
        .unwrap_or("");
    let component = ua
        .split_whitespace()
        .last()
        .and_then(|t| t.strip_prefix("kubernetes/"))
        .and_then(|t| t.split_once('/'))
        .map(|(_, c)| c)
        .filter(|c| !c.is_empty());
    let name = match component {
        Some(c) => format!("{program}/{c}"),
        None => program.to_string(),
    };
    (program, name)
}

fn classify_update(ch: &Change) -> (&'static str, String) {
    let Some(old) = &ch.old else {
        return ("update", String::new());
    };
    let new = &ch.object;
    let node = new["spec"]["nodeName"].as_str().unwrap_or("");
    let was = old["spec"]["nodeName"].as_str().unwrap_or("");
    if !node.is_empty() && was.is_empty() {
        return ("bind", format!("node={node}"));
    }
    if old["spec"] == new["spec"]
        && old["metadata"]["labels"] == new["metadata"]["labels"]
        && old["status"] != new["status"]
    {
        return ("status", status_detail(ch.resource.kind, new));
    }
    ("update", String::new())
}

/// What a status change says: a pod's PodScheduled reason (the scheduler's
/// verdict); for other kinds their `status.phase` as `phase=P` (a
/// PodGroup's Pending, Inqueue, Running, Completed, written by the gang
/// scheduler or its controller, never by the broker), if they have one.
fn status_detail(kind: &str, new: &serde_json::Value) -> String {
    if kind == "Pod" {
        return new["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled"))
            .and_then(|c| c["reason"].as_str())
            .unwrap_or("")
            .to_string();
    }
    // A Volcano Job's phase.
    if let Some(p) = new["status"]["state"]["phase"].as_str() {
        return format!("phase={p}");
    }
    if kind == "Job" || kind == "JobSet" {
        // A batch/v1 Job's conditions that hold (Suspended, Complete,
        // Failed, ...), a JobSet's (StartupPolicyCompleted, Completed,
        // Failed, ...).
        let held: Vec<&str> = new["status"]["conditions"]
            .as_array()
            .map(|cs| {
                cs.iter()
                    .filter(|c| c["status"] == "True")
                    .filter_map(|c| c["type"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        if !held.is_empty() {
            return format!("conditions={}", held.join("+"));
        }
    }
    match new["status"]["phase"].as_str() {
        Some(p) => format!("phase={p}"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::{client_name, status_detail};

    #[test]
    fn clients_are_named_from_their_user_agent() {
        let kcm = "kube-controller-manager/v1.35.8 (linux/amd64) kubernetes/1e5a0f2/job-controller";
        assert_eq!(
            client_name(kcm),
            (
                "kube-controller-manager",
                "kube-controller-manager/job-controller".into()
            )
        );
        let kueue = "kueue-manager/v0.17.0 (linux/amd64) kubernetes/$Format";
        assert_eq!(
            client_name(kueue),
            ("kueue-manager", "kueue-manager".into())
        );
        assert_eq!(
            client_name("Python-urllib/3.12"),
            ("Python-urllib", "Python-urllib".into())
        );
        assert_eq!(client_name("curl"), ("curl", "curl".into()));
    }
    use serde_json::json;

    #[test]
    fn status_rows_say_the_reason_or_the_phase() {
        let pod = json!({"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}});
        assert_eq!(status_detail("Pod", &pod), "Unschedulable");
        let pg = json!({"status": {"phase": "Inqueue", "conditions": []}});
        assert_eq!(status_detail("PodGroup", &pg), "phase=Inqueue");
        assert_eq!(
            status_detail("Queue", &json!({"status": {"running": 1}})),
            ""
        );
        let js = json!({"status": {"conditions": [
            {"type": "StartupPolicyCompleted", "status": "True"},
            {"type": "Completed", "status": "True"}, {"type": "Failed", "status": "False"}]}});
        assert_eq!(
            status_detail("JobSet", &js),
            "conditions=StartupPolicyCompleted+Completed"
        );
    }
}
