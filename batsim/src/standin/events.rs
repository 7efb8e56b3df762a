//! Batsim's external events (`--events FILE`), as Batsim 4.2.1 plays them.
//!
//! The input is one JSON object per line (`{"type": "machine_unavailable",
//! "resources": "0-4 6", "timestamp": 10}`); empty lines are skipped. What
//! the stand-in reproduces of Batsim (`events.cpp`, `event_submitter.cpp`,
//! `server.cpp`):
//!
//! - a file's events are sorted by timestamp, then by type
//!   (`machine_available` before `machine_unavailable` before generic
//!   events), the file order kept among equals;
//! - each file has its own submitter, which sends the events of one instant
//!   together and says goodbye after its last batch; when every event
//!   submitter is done, the server sends NOTIFY
//!   `no_more_external_event_to_occur`, and the simulation cannot end before;
//! - `machine_unavailable` / `machine_available` become NOTIFY
//!   `event_machine_unavailable` / `event_machine_available` with the
//!   `resources` interval set; a machine made unavailable twice, or made
//!   available while it is not unavailable, aborts the simulation, as does
//!   EXECUTE_JOB on an unavailable machine. Jobs already running there are
//!   not killed (the decision process decides);
//! - other types abort at load time unless `--forward-unknown-events`, which
//!   forwards the whole object as the NOTIFY's data.

use std::path::Path;

use serde_json::{Map, Value};

use crate::protocol::{EventData, Notify};
use crate::IntervalSet;

/// NOTIFY kinds the server sends for machine events.
pub const MACHINE_UNAVAILABLE: &str = "event_machine_unavailable";
pub const MACHINE_AVAILABLE: &str = "event_machine_available";

/// What an external event does.
#[derive(Debug, Clone, PartialEq)]
pub enum ExternalKind {
    MachineAvailable(IntervalSet),
    MachineUnavailable(IntervalSet),
    /// An unknown type, forwarded as is (`--forward-unknown-events`).
    Generic(Map<String, Value>),
}

impl ExternalKind {
    /// Batsim's order among simultaneous events (its `EventType` enum).
    fn rank(&self) -> u8 {
        match self {
            ExternalKind::MachineAvailable(_) => 0,
            ExternalKind::MachineUnavailable(_) => 1,
            ExternalKind::Generic(_) => 2,
        }
    }
}

/// One external event, with the line it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalEvent {
    pub timestamp: f64,
    pub kind: ExternalKind,
    pub line: usize,
}

/// A bad events file, with the line.
#[derive(Debug, thiserror::Error)]
#[error("{path}:{line}: {message}")]
pub struct EventsError {
    pub path: String,
    pub line: usize,
    pub message: String,
}

/// Reads an events file (Batsim 4.2's format), sorted as Batsim sorts it.
/// `machines` is the number of compute machines: resources beyond it are
/// refused here rather than at the instant they occur.
pub fn load_events(
    path: &Path,
    machines: u32,
    forward_unknown: bool,
) -> anyhow::Result<Vec<ExternalEvent>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read the events file {}: {e}", path.display()))?;
    parse_events(
        &text,
        &path.display().to_string(),
        machines,
        forward_unknown,
    )
    .map_err(anyhow::Error::from)
}

/// [`load_events`] on text.
pub fn parse_events(
    text: &str,
    path: &str,
    machines: u32,
    forward_unknown: bool,
) -> Result<Vec<ExternalEvent>, EventsError> {
    let mut events = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let err = |message: String| EventsError {
            path: path.to_string(),
            line,
            message,
        };
        if raw.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(raw)
            .map_err(|e| err(format!("not a JSON object on one line: {e}")))?;
        let Value::Object(obj) = v else {
            return Err(err("an event must be a JSON object".into()));
        };
        let kind = match obj.get("type") {
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(err("\"type\" must be a string".into())),
            None => return Err(err("the event has no \"type\"".into())),
        };
        let timestamp = match obj.get("timestamp") {
            Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
            Some(_) => return Err(err("\"timestamp\" must be a number".into())),
            None => return Err(err("the event has no \"timestamp\"".into())),
        };
        if !(timestamp >= 0.0 && timestamp.is_finite()) {
            return Err(err(format!(
                "\"timestamp\" must be a non-negative number of seconds, not {timestamp}"
            )));
        }
        let resources = || -> Result<IntervalSet, EventsError> {
            let s = match obj.get("resources") {
                Some(Value::String(s)) => s,
                Some(_) => {
                    return Err(err(
                        "\"resources\" must be a string (an interval set such as \"0-4 6\")".into(),
                    ))
                }
                None => return Err(err("the event has no \"resources\"".into())),
            };
            let set = IntervalSet::parse(s)
                .map_err(|e| err(format!("\"resources\" {s:?} is not an interval set: {e}")))?;
            if let Some(last) = set.last() {
                if last >= machines {
                    return Err(err(format!(
                        "\"resources\" {s:?} names machine {last}, but the platform has {machines} \
                         compute machine(s) (0-{})",
                        machines.saturating_sub(1)
                    )));
                }
            }
            Ok(set)
        };
        let kind = match kind.as_str() {
            "machine_unavailable" => ExternalKind::MachineUnavailable(resources()?),
            "machine_available" => ExternalKind::MachineAvailable(resources()?),
            _ if forward_unknown => ExternalKind::Generic(obj),
            other => {
                return Err(err(format!(
                    "unknown event type {other:?} (Batsim knows machine_unavailable and \
                     machine_available; other types need --forward-unknown-events)"
                )))
            }
        };
        events.push(ExternalEvent {
            timestamp,
            kind,
            line,
        });
    }
    // Stable: equal events keep the file's order.
    events.sort_by(|a, b| {
        a.timestamp
            .total_cmp(&b.timestamp)
            .then(a.kind.rank().cmp(&b.kind.rank()))
    });
    Ok(events)
}

/// Groups sorted events into the batches their submitter sends: every
/// event of one instant together.
pub fn batches(events: Vec<ExternalEvent>) -> Vec<(f64, Vec<ExternalEvent>)> {
    let mut out: Vec<(f64, Vec<ExternalEvent>)> = Vec::new();
    for e in events {
        match out.last_mut() {
            Some((t, v)) if e.timestamp <= *t => v.push(e),
            _ => out.push((e.timestamp, vec![e])),
        }
    }
    out
}

/// Which machines are unavailable, and the server's checks.
#[derive(Debug, Default, Clone)]
pub struct Availability {
    unavailable: Vec<bool>,
}

impl Availability {
    pub fn new(machines: usize) -> Self {
        Self {
            unavailable: vec![false; machines],
        }
    }

    pub fn is_unavailable(&self, m: u32) -> bool {
        self.unavailable.get(m as usize).copied().unwrap_or(false)
    }

    /// Applies one event; returns the NOTIFY to send, or why Batsim aborts.
    /// `names` gives a machine's host name for the message.
    pub fn apply(
        &mut self,
        event: &ExternalEvent,
        names: impl Fn(u32) -> String,
    ) -> Result<Option<EventData>, String> {
        let (set, to, kind) = match &event.kind {
            ExternalKind::Generic(obj) => {
                let mut n = Notify::new(obj["type"].as_str().unwrap_or_default());
                n.extra = obj
                    .iter()
                    .filter(|(k, _)| *k != "type")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                return Ok(Some(EventData::Notify(n)));
            }
            ExternalKind::MachineUnavailable(s) => (s, true, MACHINE_UNAVAILABLE),
            ExternalKind::MachineAvailable(s) => (s, false, MACHINE_AVAILABLE),
        };
        if set.is_empty() {
            return Ok(None);
        }
        for m in set.iter() {
            let was = self.unavailable[m as usize];
            if to && was {
                return Err(format!(
                    "the events file (line {}) makes machine {m} ({}) unavailable, but it is \
                     already unavailable (Batsim aborts)",
                    event.line,
                    names(m)
                ));
            }
            if !to && !was {
                return Err(format!(
                    "the events file (line {}) makes machine {m} ({}) available, but it is not \
                     unavailable (Batsim aborts)",
                    event.line,
                    names(m)
                ));
            }
            self.unavailable[m as usize] = to;
        }
        let mut n = Notify::new(kind);
        n.extra
            .insert("resources".into(), Value::String(set.to_string()));
        Ok(Some(EventData::Notify(n)))
    }
}

/// The stand-in's side: event submitters and the server's handling.
impl super::StandIn {
    /// Loads `--events` files and schedules their submitters (one per
    /// file, created after the workloads' as Batsim creates its actors).
    pub(super) fn load_external_events(&mut self) -> anyhow::Result<()> {
        self.availability = Availability::new(self.machines.len());
        let files = self.opts.events.clone();
        self.event_submitters = files.len();
        for path in files {
            let evs = load_events(
                &path,
                self.machines.len() as u32,
                self.opts.forward_unknown_events,
            )?;
            // One event submitter per file, the job submitters' program
            // (`static_event_submitter_process`).
            let times = evs.iter().map(|e| e.timestamp).collect();
            let items = super::Items::Events(evs.into_iter().map(Some).collect());
            self.spawn(super::Program::Submitter(super::SubmitterProgram::new(
                items, times,
            )));
        }
        Ok(())
    }

    pub(super) fn external_events(&mut self, events: Vec<ExternalEvent>) -> anyhow::Result<()> {
        for e in &events {
            let machines = &self.machines;
            match self
                .availability
                .apply(e, |m| machines[m as usize].name.clone())
            {
                Ok(Some(n)) => self.outbox.push((self.now, n)),
                Ok(None) => {}
                Err(why) => return self.fail(why),
            }
        }
        Ok(())
    }

    pub(super) fn external_bye(&mut self) {
        self.event_submitters_done += 1;
        if self.event_submitters_done == self.event_submitters {
            self.outbox.push((
                self.now,
                EventData::Notify(Notify::new(
                    crate::protocol::notify::NO_MORE_EXTERNAL_EVENT_TO_OCCUR,
                )),
            ));
        }
    }

    /// Batsim aborts on EXECUTE_JOB on an unavailable machine.
    pub(super) fn check_available(&self, job: &str, machines: &[u32]) -> anyhow::Result<()> {
        for &m in machines {
            if self.availability.is_unavailable(m) {
                return self.fail(format!(
                    "EXECUTE_JOB {job:?}: machine {m} ({}) is unavailable (an external event made \
                     it so); Batsim aborts",
                    self.machines[m as usize].name
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batsims_example_is_sorted_and_batched() {
        let text = r#"{"type": "machine_unavailable", "resources": "0", "timestamp" : 0}
{"type": "machine_available", "resources": "0", "timestamp" : 10}

{"type": "machine_unavailable", "resources": "0-1 3", "timestamp" : 20}
{"type": "machine_available", "resources": "3", "timestamp" : 300}
{"type": "machine_available", "resources": "0 1", "timestamp" : 250}
"#;
        let ev = parse_events(text, "e.txt", 4, false).unwrap();
        assert_eq!(
            ev.iter().map(|e| e.timestamp).collect::<Vec<_>>(),
            [0.0, 10.0, 20.0, 250.0, 300.0]
        );
        assert_eq!(ev[2].line, 4);
        assert_eq!(batches(ev).len(), 5);
    }

    #[test]
    fn available_sorts_before_unavailable_at_one_instant() {
        let text = "{\"type\": \"machine_unavailable\", \"resources\": \"1\", \"timestamp\": 5}\n\
                    {\"type\": \"machine_available\", \"resources\": \"0\", \"timestamp\": 5}\n";
        let ev = parse_events(text, "e", 2, false).unwrap();
        assert!(matches!(ev[0].kind, ExternalKind::MachineAvailable(_)));
        assert_eq!(batches(ev).len(), 1);
    }

    #[test]
    fn bad_lines_are_refused_with_their_number() {
        for (text, want) in [
            (
                "{\"type\": \"machine_unavailable\", \"timestamp\": 1}",
                "no \"resources\"",
            ),
            ("{\"type\": \"x\", \"timestamp\": 1}", "unknown event type"),
            (
                "{\"type\": \"machine_available\", \"resources\": \"9\", \"timestamp\": 1}",
                "names machine 9",
            ),
            (
                "{\"type\": \"machine_available\", \"resources\": \"0\", \"timestamp\": -1}",
                "non-negative",
            ),
            ("not json", "not a JSON object"),
        ] {
            let e = parse_events(&format!("\n{text}\n"), "f", 4, false).unwrap_err();
            assert_eq!(e.line, 2, "{text}");
            assert!(e.to_string().contains(want), "{e}");
        }
    }

    #[test]
    fn availability_checks_as_batsim_does() {
        let mut a = Availability::new(4);
        let ev = |k| ExternalEvent {
            timestamp: 0.0,
            kind: k,
            line: 1,
        };
        let set = IntervalSet::parse("0-1 3").unwrap();
        let n = a
            .apply(&ev(ExternalKind::MachineUnavailable(set.clone())), |m| {
                m.to_string()
            })
            .unwrap()
            .unwrap();
        let EventData::Notify(n) = n else { panic!() };
        assert_eq!(n.kind, MACHINE_UNAVAILABLE);
        assert_eq!(n.extra["resources"], "0-1 3");
        assert!(a.is_unavailable(3) && !a.is_unavailable(2));
        assert!(a
            .apply(&ev(ExternalKind::MachineUnavailable(set)), |m| m
                .to_string())
            .is_err());
        assert!(a
            .apply(
                &ev(ExternalKind::MachineAvailable(IntervalSet::single(2))),
                |m| m.to_string()
            )
            .is_err());
    }
}
