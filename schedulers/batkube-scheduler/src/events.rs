//! Events as the upstream kube-scheduler records them: `events.k8s.io/v1`
//! Events through client-go's event broadcaster (`tools/events`), which
//! folds repeats into a series instead of writing an Event per attempt.
//!
//! Two events are the same (isomorphic) when their type, action, reason,
//! reporting controller and instance, `regarding` and `related` references
//! are (the note is not part of it: a pod whose failure message changes
//! without its status changing stays in one series). Then:
//!
//! - the first is created;
//! - the second turns it into a series: a patch with `series.count` 2 and
//!   `lastObservedTime`;
//! - later ones only count, in memory;
//! - a series is written again (its count and last observation) when it
//!   has not been for 30 minutes, and when it ends: nothing seen for 6
//!   minutes, after which the next one starts a new Event;
//! - a patch whose Event is gone (its time to live ran out) creates it
//!   again, series included.
//!
//! Upstream does the last two on tickers (every 30 and every 6 minutes).
//! Here they are done when the next event is recorded, at most once per
//! simulated minute ([`SWEEP_EVERY`]): a ticker of its own would wake the
//! scheduler, and so the simulation, every 6 minutes whatever happens, for
//! writes that change nothing the simulation reads. A series' last count
//! is then written at the first event recorded 6 minutes or more after its
//! last observation, not at upstream's next tick; a run that ends before
//! leaves it unwritten, as upstream's would before its tick.
//!
//! A scheduler that writes an Event per attempt (this one did) makes the
//! API store one per pending pod per cycle: with hundreds of pods pending
//! that was most of a run's requests and memory (1,000 parallel jobs on 16
//! nodes: 2.1 GB).

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Value};

/// A series ends after this long without a repeat (upstream's `finishTime`).
pub const FINISH_AFTER: Duration = Duration::from_secs(6 * 60);
/// A series is written again after this long (upstream's `refreshTime`).
pub const REFRESH_AFTER: Duration = Duration::from_secs(30 * 60);
/// How often, at most, the series are looked over for the two above.
pub const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// An event to record, as `EventRecorder.Eventf(regarding, related, type,
/// reason, action, note)`.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub regarding: Value,
    pub related: Option<Value>,
    pub type_: &'static str,
    pub reason: &'static str,
    pub action: &'static str,
    pub note: String,
    /// The reporting controller: the scheduler's name.
    pub controller: String,
}

/// A pod's object reference, as `reference.GetReference` makes it.
pub fn pod_reference(pod: &Pod) -> Value {
    let m = &pod.metadata;
    let mut r = json!({"kind": "Pod", "apiVersion": "v1"});
    for (k, v) in [
        ("namespace", &m.namespace),
        ("name", &m.name),
        ("uid", &m.uid),
        ("resourceVersion", &m.resource_version),
    ] {
        if let Some(v) = v {
            r[k] = json!(v);
        }
    }
    r
}

/// A request to the API.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// `POST /apis/events.k8s.io/v1/namespaces/{namespace}/events`.
    Create { namespace: String, event: Value },
    /// A strategic merge patch of the Event `name`; when it is gone,
    /// `event` (the whole Event, series included) is created instead.
    Patch {
        namespace: String,
        name: String,
        patch: Value,
        event: Value,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Key {
    type_: &'static str,
    action: &'static str,
    reason: &'static str,
    controller: String,
    regarding: String,
    related: String,
}

#[derive(Debug)]
struct Entry {
    event: Value,
    namespace: String,
    name: String,
    /// 1 for a single Event, else the series' count.
    count: u64,
    event_time: Timestamp,
    last_observed: Timestamp,
    /// The count last written, and when.
    written: u64,
    written_at: Timestamp,
}

impl Entry {
    fn with_series(&self) -> Value {
        let mut e = self.event.clone();
        e["series"] = self.series();
        e
    }

    fn series(&self) -> Value {
        json!({"count": self.count, "lastObservedTime": micro_time(self.last_observed)})
    }

    fn patch(&mut self, now: Timestamp) -> Write {
        self.written = self.count;
        self.written_at = now;
        Write::Patch {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            patch: json!({"series": self.series()}),
            event: self.with_series(),
        }
    }
}

/// The broadcaster's cache of the events recorded recently.
#[derive(Debug)]
pub struct Recorder {
    instance_suffix: String,
    cache: HashMap<Key, Entry>,
    last_sweep: Option<Timestamp>,
    seq: u64,
}

impl Recorder {
    /// `host`: the machine's name; an event's reporting instance is its
    /// controller's name and the host's, as upstream's.
    pub fn new(host: &str) -> Self {
        Recorder {
            instance_suffix: format!("-{host}"),
            cache: HashMap::new(),
            last_sweep: None,
            seq: 0,
        }
    }

    /// How many events the cache holds (singles and series).
    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    /// Records `e` at `now`: the requests to send, in order.
    pub fn record(&mut self, e: NewEvent, now: Timestamp) -> Vec<Write> {
        let mut out = self.sweep(now);
        let key = Key {
            type_: e.type_,
            action: e.action,
            reason: e.reason,
            controller: e.controller.clone(),
            regarding: e.regarding.to_string(),
            related: e.related.as_ref().map(Value::to_string).unwrap_or_default(),
        };
        if let Some(entry) = self.cache.get_mut(&key) {
            entry.count += 1;
            entry.last_observed = now;
            if entry.count == 2 {
                out.push(entry.patch(now));
            }
            return out;
        }
        let namespace = e.regarding["namespace"]
            .as_str()
            .filter(|s| !s.is_empty())
            .unwrap_or("default")
            .to_string();
        // Upstream names an Event after its object and the time in
        // nanoseconds; on simulated time two events of one object often
        // share an instant, so a sequence number is added to it.
        self.seq += 1;
        let nanos = (now.as_nanosecond() as u64).wrapping_add(self.seq);
        let name = format!(
            "{}.{:x}",
            e.regarding["name"].as_str().unwrap_or_default(),
            nanos
        );
        let mut event = json!({
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro_time(now),
            "reportingController": e.controller,
            "reportingInstance": format!("{}{}", e.controller, self.instance_suffix),
            "action": e.action,
            "reason": e.reason,
            "regarding": e.regarding,
            "note": truncate_note(&e.note),
            "type": e.type_,
        });
        if let Some(r) = e.related {
            event["related"] = r;
        }
        out.push(Write::Create {
            namespace: namespace.clone(),
            event: event.clone(),
        });
        self.cache.insert(
            key,
            Entry {
                event,
                namespace,
                name,
                count: 1,
                event_time: now,
                last_observed: now,
                written: 1,
                written_at: now,
            },
        );
        out
    }

    /// Upstream's `finishSeries` and `refreshExistingEventSeries`, at most
    /// once per [`SWEEP_EVERY`]. Entries are visited in name order, so the
    /// requests come in the same order on every run.
    fn sweep(&mut self, now: Timestamp) -> Vec<Write> {
        if self
            .last_sweep
            .is_some_and(|t| elapsed(t, now) < SWEEP_EVERY)
        {
            return Vec::new();
        }
        self.last_sweep = Some(now);
        let mut keys: Vec<(&String, &Key)> = self.cache.iter().map(|(k, e)| (&e.name, k)).collect();
        keys.sort();
        let keys: Vec<Key> = keys.into_iter().map(|(_, k)| k.clone()).collect();
        let mut out = Vec::new();
        for key in keys {
            let e = self.cache.get_mut(&key).expect("listed above");
            if e.count >= 2 {
                if elapsed(e.last_observed, now) > FINISH_AFTER {
                    if e.count > e.written {
                        out.push(e.patch(now));
                    }
                    self.cache.remove(&key);
                } else if elapsed(e.written_at, now) >= REFRESH_AFTER {
                    out.push(e.patch(now));
                }
            } else if elapsed(e.event_time, now) > FINISH_AFTER {
                self.cache.remove(&key);
            }
        }
        out
    }
}

fn elapsed(from: Timestamp, to: Timestamp) -> Duration {
    let ns = to.as_nanosecond() - from.as_nanosecond();
    Duration::from_nanos(ns.max(0) as u64)
}

/// `metav1.MicroTime` in JSON: RFC 3339 with six fractional digits.
fn micro_time(t: Timestamp) -> Value {
    json!(MicroTime(t))
}

/// The API's limit on a note (`NoteLengthLimit`, 1 kB); upstream's
/// scheduler cuts longer messages with " ...".
fn truncate_note(note: &str) -> String {
    const LIMIT: usize = 1024;
    const SUFFIX: &str = " ...";
    if note.len() <= LIMIT {
        return note.to_string();
    }
    let mut end = LIMIT - SUFFIX.len();
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{SUFFIX}", &note[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    fn failed(pod: &str, rv: &str, note: &str) -> NewEvent {
        NewEvent {
            regarding: json!({"kind": "Pod", "apiVersion": "v1", "namespace": "default",
                              "name": pod, "uid": format!("uid-{pod}"), "resourceVersion": rv}),
            related: None,
            type_: "Warning",
            reason: "FailedScheduling",
            action: "Scheduling",
            note: note.into(),
            controller: "default-scheduler".into(),
        }
    }

    fn counts(w: &[Write]) -> Vec<(String, Option<u64>)> {
        w.iter()
            .map(|w| match w {
                Write::Create { event, .. } => (
                    event["metadata"]["name"].as_str().unwrap().to_string(),
                    None,
                ),
                Write::Patch { name, patch, .. } => {
                    (name.clone(), patch["series"]["count"].as_u64())
                }
            })
            .collect()
    }

    #[test]
    fn repeats_fold_into_a_series_written_on_the_second_and_at_its_end() {
        let mut r = Recorder::new("host");
        let first = r.record(failed("p", "1", "0/16 nodes are available"), at(0));
        let [Write::Create { event, namespace }] = first.as_slice() else {
            panic!("{first:?}")
        };
        assert_eq!(namespace, "default");
        assert_eq!(event["apiVersion"], "events.k8s.io/v1");
        assert_eq!(event["reportingInstance"], "default-scheduler-host");
        assert_eq!(event["eventTime"], "2023-11-14T22:13:20.000000Z");
        assert_eq!(event["note"], "0/16 nodes are available");
        let name = event["metadata"]["name"].as_str().unwrap().to_string();
        // The second: a series of 2, its Event patched.
        let w = r.record(failed("p", "1", "another message"), at(10));
        assert_eq!(counts(&w), vec![(name.clone(), Some(2))]);
        let Write::Patch { patch, event, .. } = &w[0] else {
            unreachable!()
        };
        assert_eq!(
            patch,
            &json!({"series": {"count": 2, "lastObservedTime": "2023-11-14T22:13:30.000000Z"}})
        );
        assert_eq!(event["series"]["count"], 2);
        assert_eq!(
            event["note"], "0/16 nodes are available",
            "the first note stays"
        );
        // Later ones only count.
        for s in 11..20 {
            assert!(r.record(failed("p", "1", "x"), at(s)).is_empty());
        }
        // Another pod's event, more than 6 minutes after the last repeat:
        // the series ends, its count of 11 written first.
        let w = r.record(failed("q", "1", "x"), at(19 + 361));
        assert_eq!(counts(&w)[0], (name.clone(), Some(11)));
        assert!(matches!(w[1], Write::Create { .. }));
        assert_eq!(r.cached(), 1);
        // The next one of p starts a new Event.
        let w = r.record(failed("p", "1", "x"), at(400));
        assert!(
            matches!(&w[..], [Write::Create { event, .. }] if event["metadata"]["name"] != name.as_str())
        );
    }

    #[test]
    fn another_resource_version_is_another_event() {
        let mut r = Recorder::new("h");
        assert_eq!(r.record(failed("p", "1", "x"), at(0)).len(), 1);
        let w = r.record(failed("p", "2", "x"), at(1));
        assert!(matches!(&w[..], [Write::Create { .. }]));
        assert_eq!(r.cached(), 2);
    }

    #[test]
    fn a_long_series_is_written_again_every_30_minutes() {
        let mut r = Recorder::new("h");
        r.record(failed("p", "1", "x"), at(0));
        assert_eq!(
            counts(&r.record(failed("p", "1", "x"), at(1)))[0].1,
            Some(2)
        );
        let mut patches = Vec::new();
        for s in (60..=3700).step_by(60) {
            for w in r.record(failed("p", "1", "x"), at(s)) {
                patches.push((s, counts(&[w])[0].1));
            }
        }
        // Written at 1 s; again at the first sweep 30 min later (1860 s,
        // with the 31 repeats then: the one at 1860 s counts after it),
        // then 30 min after that.
        assert_eq!(patches, vec![(1860, Some(32)), (3660, Some(62))]);
    }

    #[test]
    fn single_events_leave_the_cache_after_6_minutes() {
        let mut r = Recorder::new("h");
        for i in 0..100 {
            r.record(failed(&format!("p{i}"), "1", "x"), at(i));
        }
        assert_eq!(r.cached(), 100);
        assert!(matches!(
            &r.record(failed("z", "1", "x"), at(99 + 361))[..],
            [Write::Create { .. }]
        ));
        assert_eq!(r.cached(), 1, "singletons end without a request");
    }

    #[test]
    fn a_long_note_is_cut_as_upstream_cuts_it() {
        let n = truncate_note(&"é".repeat(600));
        assert!(n.len() <= 1024 && n.ends_with(" ..."));
        assert_eq!(truncate_note("short"), "short");
        assert_eq!(
            micro_time(Timestamp::from_nanosecond(1_500_000_123_456_789_000).unwrap()),
            "2017-07-14T02:42:03.456789Z"
        );
    }
}
