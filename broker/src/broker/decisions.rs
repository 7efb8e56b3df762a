//! `decisions.jsonl`: every scheduling attempt a scheduler explained on its
//! pods (`batkube-scheduler --explain`, or any scheduler writing the
//! kube-scheduler-simulator's annotations), one JSON object per line, in
//! the order the API saw them, read from the pod changes the broker already
//! receives (no request to the API).
//!
//! A line:
//!
//! ```json
//! {"time":12.0,"job":"w0!3","pod":"w0-3","attempt":2,"node":"node-3","reason":null,
//!  "filter":{"node-1":{"NodeResourcesFit":"Insufficient cpu",...},...},
//!  "score":{"node-3":{"NodeResourcesFit":"73",...}},"finalscore":{...},"postfilter":{}}
//! ```
//!
//! `time` is the simulated instant the broker saw the attempt; `attempt`
//! the scheduler's number for it (`batkube.io/scheduling-attempt`, null if
//! the scheduler writes none); `node` the selected node or null; `reason`
//! the failure's message (`batkube.io/scheduling-message`, else null);
//! `filter`, `score`, `finalscore` and `postfilter` the simulator's
//! annotations as they are (node -> plugin -> verdict or score).
//!
//! A new attempt is a change of the pod whose explanation differs from the
//! one before (the attempt number, else the filter result or the selected
//! node). The file is created at the first attempt, or at the start when
//! `--explain` asks for it (so that its absence means nothing was explained).

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The kube-scheduler-simulator's keys this log reads, and ours.
pub const FILTER_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/filter-result";
pub const SCORE_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/score-result";
pub const FINALSCORE_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/finalscore-result";
pub const POSTFILTER_RESULT: &str = "kube-scheduler-simulator.sigs.k8s.io/postfilter-result";
pub const SELECTED_NODE: &str = "kube-scheduler-simulator.sigs.k8s.io/selected-node";
pub const ATTEMPT: &str = "batkube.io/scheduling-attempt";
pub const MESSAGE: &str = "batkube.io/scheduling-message";

/// The log; inactive (never written) until [`DecisionLog::stream_to`].
#[derive(Default)]
pub struct DecisionLog {
    path: Option<PathBuf>,
    sink: Option<std::io::BufWriter<std::fs::File>>,
    /// The first write error, reported by `flush`.
    error: Option<std::io::Error>,
    lines: u64,
    /// The line being written, kept between lines (each carries a few KiB
    /// of annotations).
    line: Vec<u8>,
    /// Per embedded annotation (in [`EMBEDDED`]'s order), the last texts
    /// read as JSON, at most [`KNOWN_JSON`]: attempts mostly carry one seen
    /// shortly before (a burst's 384 attempts on 16 nodes have 17 distinct
    /// filter results), which is then not read again.
    json: [Vec<String>; 4],
}

/// How many texts [`DecisionLog::json`] remembers per annotation.
const KNOWN_JSON: usize = 16;

/// The annotations a line embeds, and their names in it.
const EMBEDDED: [(&str, &str); 4] = [
    ("filter", FILTER_RESULT),
    ("score", SCORE_RESULT),
    ("finalscore", FINALSCORE_RESULT),
    ("postfilter", POSTFILTER_RESULT),
];

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.get("metadata")?.get("annotations")?.get(key)?.as_str()
}

/// What tells one attempt from the next on the same pod.
fn attempt_mark(obj: &Value) -> Option<(Option<&str>, &str, Option<&str>)> {
    let filter = annotation(obj, FILTER_RESULT)?;
    Some((
        annotation(obj, ATTEMPT),
        filter,
        annotation(obj, SELECTED_NODE),
    ))
}

/// Appends `v` as JSON (`serde_json`'s text of it).
fn push_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
    // Numbers, strings and options of them always serialize.
    let _ = serde_json::to_writer(out, v);
}

/// Appends a JSON document held in an annotation: as it is when it is
/// JSON, else as a string (a foreign scheduler's bad value stays readable).
/// `known` holds texts already found to be JSON for this annotation.
fn push_embedded(out: &mut Vec<u8>, text: Option<&str>, known: &mut Vec<String>) {
    match text {
        None => out.extend_from_slice(b"{}"),
        Some(t) if known.iter().any(|k| k == t) => out.extend_from_slice(t.as_bytes()),
        Some(t) if serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok() => {
            out.extend_from_slice(t.as_bytes());
            if known.len() == KNOWN_JSON {
                known.remove(0);
            }
            known.push(t.to_string());
        }
        Some(t) => push_json(out, t),
    }
}

impl DecisionLog {
    /// Writes to `path`: created now when `eager`, else at the first attempt.
    pub fn stream_to(&mut self, path: &Path, eager: bool) -> std::io::Result<()> {
        self.path = Some(path.to_path_buf());
        if eager {
            self.open()?;
        }
        Ok(())
    }

    fn open(&mut self) -> std::io::Result<()> {
        if self.sink.is_none() {
            if let Some(p) = &self.path {
                self.sink = Some(std::io::BufWriter::new(std::fs::File::create(p)?));
            }
        }
        Ok(())
    }

    /// Attempts written so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// A pod changed: one line if the change brings a new explained attempt.
    pub fn observe(&mut self, time: f64, job: &str, pod: &str, new: &Value, old: Option<&Value>) {
        if self.path.is_none() || self.error.is_some() {
            return;
        }
        let Some(mark) = attempt_mark(new) else {
            return;
        };
        if old.and_then(attempt_mark) == Some(mark) {
            return;
        }
        if let Err(e) = self.open() {
            self.error = Some(e);
            return;
        }
        self.write_line(time, job, pod, new);
        if let Some(w) = self.sink.as_mut() {
            if let Err(e) = w.write_all(&self.line) {
                self.error = Some(e);
                return;
            }
            self.lines += 1;
        }
    }

    /// Writes the line of the attempt `obj` shows into `self.line`.
    fn write_line(&mut self, time: f64, job: &str, pod: &str, obj: &Value) {
        let attempt = annotation(obj, ATTEMPT).and_then(|a| a.parse::<u64>().ok());
        let node = annotation(obj, SELECTED_NODE).filter(|n| !n.is_empty());
        let reason = annotation(obj, MESSAGE).filter(|m| !m.is_empty());
        let out = &mut self.line;
        out.clear();
        out.reserve(
            256 + EMBEDDED
                .iter()
                .map(|(_, key)| annotation(obj, key).map_or(2, str::len))
                .sum::<usize>(),
        );
        out.extend_from_slice(b"{\"time\":");
        push_json(out, &batsim::round6(time));
        out.extend_from_slice(b",\"job\":");
        push_json(out, job);
        out.extend_from_slice(b",\"pod\":");
        push_json(out, pod);
        out.extend_from_slice(b",\"attempt\":");
        push_json(out, &attempt);
        out.extend_from_slice(b",\"node\":");
        push_json(out, &node);
        out.extend_from_slice(b",\"reason\":");
        push_json(out, &reason);
        for ((name, key), known) in EMBEDDED.iter().zip(self.json.iter_mut()) {
            out.extend_from_slice(b",\"");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\":");
            push_embedded(out, annotation(obj, key), known);
        }
        out.extend_from_slice(b"}\n");
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        match self.sink.as_mut() {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(attempt: &str, node: &str, message: &str) -> Value {
        json!({"metadata": {"name": "p", "annotations": {
            FILTER_RESULT: r#"{"n1":{"NodeResourcesFit":"Insufficient cpu"},"n2":{"NodeResourcesFit":"passed"}}"#,
            SCORE_RESULT: "{}",
            FINALSCORE_RESULT: "{}",
            POSTFILTER_RESULT: "not json",
            SELECTED_NODE: node,
            ATTEMPT: attempt,
            MESSAGE: message,
        }}})
    }

    #[test]
    fn one_line_per_new_attempt_with_the_annotations_as_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("decisions.jsonl");
        let mut log = DecisionLog::default();
        log.stream_to(&path, false).unwrap();
        assert!(!path.exists(), "created at the first attempt only");
        let plain = json!({"metadata": {"name": "p"}});
        log.observe(1.0, "w0!1", "p", &plain, None);
        assert!(!path.exists());
        let a1 = pod("1", "", "0/2 nodes are available: 1 Insufficient cpu.");
        log.observe(2.0, "w0!1", "p", &a1, Some(&plain));
        // The same attempt seen again (a status change): no line.
        log.observe(2.5, "w0!1", "p", &a1, Some(&a1));
        let a2 = pod("2", "n2", "");
        log.observe(3.0, "w0!1", "p", &a2, Some(&a1));
        log.flush().unwrap();
        assert_eq!(log.lines(), 2);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["time"], json!(2.0));
        assert_eq!(lines[0]["attempt"], json!(1));
        assert_eq!(lines[0]["node"], Value::Null);
        assert_eq!(
            lines[0]["reason"],
            json!("0/2 nodes are available: 1 Insufficient cpu.")
        );
        assert_eq!(
            lines[0]["filter"]["n1"]["NodeResourcesFit"],
            json!("Insufficient cpu")
        );
        assert_eq!(lines[0]["postfilter"], json!("not json"));
        assert_eq!(lines[1]["node"], json!("n2"));
        assert_eq!(lines[1]["reason"], Value::Null);
        assert_eq!(lines[1]["job"], json!("w0!1"));
    }

    #[test]
    fn eager_creates_the_file_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("decisions.jsonl");
        let mut log = DecisionLog::default();
        log.stream_to(&path, true).unwrap();
        log.flush().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
    }
    #[test]
    fn a_value_read_as_json_is_embedded_again_and_a_changed_one_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("decisions.jsonl");
        let mut log = DecisionLog::default();
        log.stream_to(&path, true).unwrap();
        let with_postfilter = |attempt: &str, postfilter: &str| {
            let mut p = pod(attempt, "", "m");
            p["metadata"]["annotations"][POSTFILTER_RESULT] = json!(postfilter);
            p
        };
        let mut old = None;
        for (n, postfilter) in [(1, r#"{"n1":{}}"#), (2, r#"{"n1":{}}"#), (3, r#"{"n1":{"#)] {
            let p = with_postfilter(&n.to_string(), postfilter);
            log.observe(n as f64, "w0!1", "p", &p, old.as_ref());
            old = Some(p);
        }
        log.flush().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[0],
            r#"{"time":1.0,"job":"w0!1","pod":"p","attempt":1,"node":null,"reason":"m","filter":{"n1":{"NodeResourcesFit":"Insufficient cpu"},"n2":{"NodeResourcesFit":"passed"}},"score":{},"finalscore":{},"postfilter":{"n1":{}}}"#
        );
        assert!(
            lines[1].ends_with(r#","postfilter":{"n1":{}}}"#),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].ends_with(r#","postfilter":"{\"n1\":{"}"#),
            "{}",
            lines[2]
        );
    }
}
