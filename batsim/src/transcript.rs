//! Recorded conversations: the shared transcript format, a recorder, and a
//! replay that plays a conversation's replies against the stand-in and
//! names the first message that differs.
//!
//! One JSON object per line, in order:
//! `{"seq": n, "dir": "batsim->scheduler" | "scheduler->batsim", "wall": unix_s,
//! "raw": "<exact text sent>", "msg": <parsed>}`, the format of the real
//! Batsim recordings in `reference/batsim/`.
//!
//! ```no_run
//! use batsim::platform::Platform;
//! use batsim::standin::{Options, StandIn};
//! use batsim::transcript;
//! use batsim::workload::Workload;
//! use std::path::Path;
//!
//! let lines = transcript::read(Path::new("burst.jsonl")).unwrap();
//! let platform = Platform::from_file(Path::new("16-node.xml")).unwrap();
//! let workload = Workload::from_file(Path::new("burst.json"), "w0").unwrap();
//! let opts = Options { compute_sharing: true, ..Options::default() };
//! let sim = StandIn::new(platform, vec![workload], opts).unwrap();
//! match transcript::replay(sim, &lines) {
//!     Ok(n) => println!("{n} messages, all identical"),
//!     Err(diff) => println!("{diff}"),
//! }
//! ```

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::protocol::Message;
use crate::standin::{DecisionProcess, StandIn};

/// Who sent a recorded message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `"batsim->scheduler"`
    FromBatsim,
    /// `"scheduler->batsim"`
    FromScheduler,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::FromBatsim => "batsim->scheduler",
            Direction::FromScheduler => "scheduler->batsim",
        }
    }
}

/// One recorded message.
#[derive(Debug, Clone)]
pub struct Line {
    pub seq: u64,
    pub dir: Direction,
    /// Wall-clock time it was sent (Unix seconds).
    pub wall: f64,
    /// The exact text sent.
    pub raw: String,
}

/// A transcript that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    #[error("cannot read transcript {path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("transcript {path}, line {line}: {message}")]
    Invalid {
        path: String,
        line: usize,
        message: String,
    },
}

/// Reads a transcript file.
pub fn read(path: &Path) -> Result<Vec<Line>, TranscriptError> {
    let shown = path.display().to_string();
    let file = File::open(path).map_err(|error| TranscriptError::Io {
        path: shown.clone(),
        error,
    })?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|error| TranscriptError::Io {
            path: shown.clone(),
            error,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let bad = |message: String| TranscriptError::Invalid {
            path: shown.clone(),
            line: i + 1,
            message,
        };
        let v: Value = serde_json::from_str(&line).map_err(|e| bad(format!("not JSON: {e}")))?;
        let dir = match v.get("dir").and_then(Value::as_str) {
            Some("batsim->scheduler") => Direction::FromBatsim,
            Some("scheduler->batsim") => Direction::FromScheduler,
            other => {
                return Err(bad(format!(
                    "\"dir\" must be \"batsim->scheduler\" or \"scheduler->batsim\", not {other:?}"
                )))
            }
        };
        let raw = v
            .get("raw")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("no \"raw\" text".into()))?
            .to_string();
        out.push(Line {
            seq: v
                .get("seq")
                .and_then(Value::as_u64)
                .unwrap_or(out.len() as u64),
            dir,
            wall: v.get("wall").and_then(Value::as_f64).unwrap_or(0.0),
            raw,
        });
    }
    Ok(out)
}

/// Writes a conversation as it happens, one line per message, flushed
/// after each reply so that a crash loses nothing already exchanged.
pub struct Recorder {
    out: BufWriter<File>,
    path: PathBuf,
    seq: u64,
}

impl Recorder {
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let file = File::create(path).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot create the protocol record {}: {e}", path.display()),
            )
        })?;
        Ok(Self {
            out: BufWriter::new(file),
            path: path.to_path_buf(),
            seq: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records one message given as the exact text sent.
    pub fn record(&mut self, dir: Direction, raw: &str) -> std::io::Result<()> {
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let msg: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
        let line =
            json!({"seq": self.seq, "dir": dir.as_str(), "wall": wall, "raw": raw, "msg": msg});
        self.seq += 1;
        writeln!(self.out, "{line}")?;
        if dir == Direction::FromScheduler {
            self.out.flush()?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.out.flush();
    }
}

/// A decision process recorded: every message it is sent and every reply.
pub struct Recording<'a> {
    pub inner: &'a mut dyn DecisionProcess,
    pub recorder: Recorder,
}

impl DecisionProcess for Recording<'_> {
    fn exchange(&mut self, msg: &Message) -> anyhow::Result<Message> {
        self.recorder
            .record(Direction::FromBatsim, &crate::to_batsim_text(msg))?;
        let reply = self.inner.exchange(msg)?;
        self.recorder
            .record(Direction::FromScheduler, &crate::to_batsim_text(&reply))?;
        Ok(reply)
    }
}

/// Where a replayed conversation first left the recording.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", self.describe())]
pub struct Difference {
    /// 1-based number of the message from Batsim that differs.
    pub message: usize,
    /// Its `seq` in the recording (when there is one).
    pub seq: Option<u64>,
    /// What differs (a JSON path and both values), or what went wrong.
    pub what: String,
    /// The recorded message and ours, when both exist.
    pub recorded: Option<Value>,
    pub ours: Option<Value>,
}

impl Difference {
    fn describe(&self) -> String {
        let mut s = format!("message #{} from Batsim", self.message);
        if let Some(seq) = self.seq {
            s.push_str(&format!(" (seq {seq})"));
        }
        s.push_str(&format!(" differs: {}", self.what));
        if let Some(r) = &self.recorded {
            s.push_str(&format!("\n  recorded: {}", excerpt(r)));
        }
        if let Some(o) = &self.ours {
            s.push_str(&format!("\n  ours:     {}", excerpt(o)));
        }
        s
    }
}

fn excerpt(v: &Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 600 {
        let cut: String = text.chars().take(600).collect();
        format!("{cut}…")
    } else {
        text
    }
}

/// Absolute tolerance on numbers when comparing messages: Batsim prints
/// six decimals.
pub const TOLERANCE: f64 = 1e-6 + 1e-9;

/// The first place where two messages differ (numbers within `tol`,
/// object keys in any order, arrays in order); `None` when equivalent.
pub fn first_difference(recorded: &Value, ours: &Value, tol: f64) -> Option<String> {
    fn walk(a: &Value, b: &Value, tol: f64, path: &mut String) -> Option<String> {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) => {
                let (x, y) = (x.as_f64()?, y.as_f64()?);
                if (x - y).abs() <= tol {
                    None
                } else {
                    Some(format!("{path}: recorded {x}, ours {y}"))
                }
            }
            (Value::Array(x), Value::Array(y)) => {
                for (i, (a, b)) in x.iter().zip(y).enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    let d = walk(a, b, tol, path);
                    path.truncate(len);
                    if d.is_some() {
                        return d;
                    }
                }
                if x.len() != y.len() {
                    return Some(format!(
                        "{path}: recorded {} item(s), ours {}",
                        x.len(),
                        y.len()
                    ));
                }
                None
            }
            (Value::Object(x), Value::Object(y)) => {
                for k in x.keys().chain(y.keys()) {
                    let len = path.len();
                    path.push('.');
                    path.push_str(k);
                    let d = match (x.get(k), y.get(k)) {
                        (Some(a), Some(b)) => walk(a, b, tol, path),
                        (Some(_), None) => Some(format!("{path}: missing from ours")),
                        (None, _) => Some(format!("{path}: not in the recording")),
                    };
                    path.truncate(len);
                    if d.is_some() {
                        return d;
                    }
                }
                None
            }
            _ if a == b => None,
            _ => Some(format!("{path}: recorded {a}, ours {b}")),
        }
    }
    walk(recorded, ours, tol, &mut String::from("$"))
}

/// Workload paths differ between machines: keep their file names only.
fn normalize(v: &mut Value) {
    if let Some(events) = v.get_mut("events").and_then(Value::as_array_mut) {
        for e in events {
            if let Some(Value::Object(w)) = e.pointer_mut("/data/workloads") {
                for (_, p) in w.iter_mut() {
                    if let Some(s) = p.as_str() {
                        let name = Path::new(s)
                            .file_name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        *p = Value::from(name);
                    }
                }
            }
        }
    }
}

/// Plays the recorded replies of `lines` against `sim`: the n-th message
/// the stand-in sends is compared with the n-th recorded message from
/// Batsim and answered with the recorded reply that followed it. Returns
/// the number of messages compared, or the first difference.
pub fn replay(sim: StandIn, lines: &[Line]) -> Result<usize, Difference> {
    let expected: Vec<&Line> = lines
        .iter()
        .filter(|l| l.dir == Direction::FromBatsim)
        .collect();
    let replies: Vec<&Line> = lines
        .iter()
        .filter(|l| l.dir == Direction::FromScheduler)
        .collect();
    let mut n = 0usize;
    let mut found: Option<Difference> = None;
    let mut dp = |msg: &Message| -> anyhow::Result<Message> {
        let k = n;
        n += 1;
        let mut ours: Value = serde_json::from_str(&crate::to_batsim_text(msg))?;
        normalize(&mut ours);
        let Some(line) = expected.get(k) else {
            found = Some(Difference {
                message: k + 1,
                seq: None,
                what: format!(
                    "the recording has {} message(s) from Batsim; ours sent one more",
                    expected.len()
                ),
                recorded: None,
                ours: Some(ours),
            });
            anyhow::bail!("replay stopped");
        };
        let mut recorded: Value = serde_json::from_str(&line.raw)?;
        normalize(&mut recorded);
        if let Some(what) = first_difference(&recorded, &ours, TOLERANCE) {
            found = Some(Difference {
                message: k + 1,
                seq: Some(line.seq),
                what,
                recorded: Some(recorded),
                ours: Some(ours),
            });
            anyhow::bail!("replay stopped");
        }
        let Some(reply) = replies.get(k) else {
            found = Some(Difference {
                message: k + 1,
                seq: Some(line.seq),
                what: "the recording has no reply to this message".into(),
                recorded: Some(recorded),
                ours: None,
            });
            anyhow::bail!("replay stopped");
        };
        Ok(Message::from_json(&reply.raw)?)
    };
    let result = sim.run(&mut dp);
    if let Some(d) = found {
        return Err(d);
    }
    if let Err(e) = result {
        return Err(Difference {
            message: n,
            seq: expected.get(n.saturating_sub(1)).map(|l| l.seq),
            what: format!("the stand-in stopped: {e:#}"),
            recorded: None,
            ours: None,
        });
    }
    if n != expected.len() {
        return Err(Difference {
            message: n + 1,
            seq: expected.get(n).map(|l| l.seq),
            what: format!(
                "the stand-in ended after {n} message(s); the recording has {}",
                expected.len()
            ),
            recorded: expected
                .get(n)
                .and_then(|l| serde_json::from_str(&l.raw).ok()),
            ours: None,
        });
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_are_found_and_located() {
        let a =
            json!({"now": 1.0, "events": [{"timestamp": 1.0, "type": "A"}, {"timestamp": 2.0}]});
        assert_eq!(first_difference(&a, &a.clone(), TOLERANCE), None);
        let within = json!({"now": 1.0000005, "events": [{"timestamp": 1.0, "type": "A"}, {"timestamp": 2.0}]});
        assert_eq!(first_difference(&a, &within, TOLERANCE), None);
        let later =
            json!({"now": 1.0, "events": [{"timestamp": 1.0, "type": "A"}, {"timestamp": 2.1}]});
        let d = first_difference(&a, &later, TOLERANCE).unwrap();
        assert!(d.starts_with("$.events[1].timestamp"), "{d}");
        let shorter = json!({"now": 1.0, "events": [{"timestamp": 1.0, "type": "A"}]});
        let d = first_difference(&a, &shorter, TOLERANCE).unwrap();
        assert!(d.contains("2 item(s), ours 1"), "{d}");
        let kind =
            json!({"now": 1.0, "events": [{"timestamp": 1.0, "type": "B"}, {"timestamp": 2.0}]});
        let d = first_difference(&a, &kind, TOLERANCE).unwrap();
        assert!(d.starts_with("$.events[0].type"), "{d}");
    }

    #[test]
    fn a_recording_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let mut r = Recorder::create(&path).unwrap();
        r.record(Direction::FromBatsim, r#"{"now":0.000000,"events":[]}"#)
            .unwrap();
        r.record(Direction::FromScheduler, r#"{"now":0.0,"events":[]}"#)
            .unwrap();
        drop(r);
        let lines = read(&path).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].seq, 0);
        assert_eq!(lines[0].dir, Direction::FromBatsim);
        assert_eq!(lines[1].raw, r#"{"now":0.0,"events":[]}"#);
        let v: Value = serde_json::from_str(
            &std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .next()
                .unwrap()
                .to_string(),
        )
        .unwrap();
        assert_eq!(v["msg"]["now"], json!(0.0));
        assert!(v["wall"].as_f64().unwrap() > 0.0);
    }
}
