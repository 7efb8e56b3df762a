//! Typed Batsim v4 protocol messages (JSON).
//!
//! A message is `{"now": t, "events": [{"timestamp": t, "type": T, "data": {…}}]}`.
//! Every number is read as `f64`, whatever its text form (`0`, `0.000000`,
//! `1e3`), because real Batsim prints integers from its inputs as integers and
//! everything else with six decimals. Event types this module does not know
//! are kept as [`EventData::Unknown`] (and logged by the link), never fatal.
//!
//! Fields a peer may add that we do not model (extra job fields, future
//! protocol fields) are kept in `extra` maps so that a message re-serializes
//! to an equivalent value.

use std::collections::BTreeMap;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::intervals::IntervalSet;

/// One protocol message, in either direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    #[serde(deserialize_with = "de_f64")]
    pub now: f64,
    pub events: Vec<Event>,
}

impl Message {
    pub fn new(now: f64) -> Self {
        Self {
            now,
            events: Vec::new(),
        }
    }

    /// An acknowledgement: no decision.
    pub fn empty(now: f64) -> Self {
        Self::new(now)
    }

    /// Appends an event stamped `timestamp`.
    pub fn push(&mut self, timestamp: f64, data: EventData) -> &mut Self {
        self.events.push(Event { timestamp, data });
        self
    }

    /// Appends an event stamped with the message's `now`.
    pub fn push_now(&mut self, data: EventData) -> &mut Self {
        let now = self.now;
        self.push(now, data)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("protocol messages always serialize")
    }

    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Checks Batsim's ordering rules for a reply to a message sent at
    /// `request_now`: the reply's `now` is not earlier than the request's,
    /// event timestamps do not decrease and none is after the reply's `now`.
    pub fn check_reply_order(&self, request_now: f64) -> Result<(), OrderError> {
        if !self.now.is_finite() {
            return Err(OrderError::NotFinite(self.now));
        }
        if self.now < request_now {
            return Err(OrderError::NowBeforeRequest {
                now: self.now,
                request_now,
            });
        }
        let mut prev = f64::NEG_INFINITY;
        for (index, ev) in self.events.iter().enumerate() {
            if !ev.timestamp.is_finite() {
                return Err(OrderError::NotFinite(ev.timestamp));
            }
            if ev.timestamp < prev {
                return Err(OrderError::Decreasing {
                    index,
                    timestamp: ev.timestamp,
                    previous: prev,
                });
            }
            if ev.timestamp > self.now {
                return Err(OrderError::AfterNow {
                    index,
                    timestamp: ev.timestamp,
                    now: self.now,
                });
            }
            prev = ev.timestamp;
        }
        Ok(())
    }
}

/// A reply that real Batsim would refuse because of its times.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OrderError {
    #[error("reply now={now} is before the message it answers (now={request_now})")]
    NowBeforeRequest { now: f64, request_now: f64 },
    #[error("event #{index} has timestamp {timestamp}, before the previous event's {previous}")]
    Decreasing {
        index: usize,
        timestamp: f64,
        previous: f64,
    },
    #[error("event #{index} has timestamp {timestamp}, after the reply's now={now}")]
    AfterNow {
        index: usize,
        timestamp: f64,
        now: f64,
    },
    #[error("time {0} is not a finite number")]
    NotFinite(f64),
}

/// One event of a message.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub timestamp: f64,
    pub data: EventData,
}

/// The events of the protocol, both directions.
#[derive(Debug, Clone, PartialEq)]
pub enum EventData {
    // Batsim -> decision process.
    SimulationBegins(Box<SimulationBegins>),
    SimulationEnds,
    JobSubmitted(JobSubmitted),
    JobCompleted(JobCompleted),
    JobKilled(JobKilled),
    ResourceStateChanged(ResourceStateChanged),
    RequestedCall,
    /// NOTIFY in either direction (`no_more_static_job_to_submit`,
    /// `no_more_external_event_to_occur`, `registration_finished`, …).
    Notify(Notify),
    /// QUERY in either direction.
    Query(Query),
    /// ANSWER in either direction.
    Answer(Answer),
    // Decision process -> Batsim.
    ExecuteJob(ExecuteJob),
    CallMeLater(CallMeLater),
    KillJob(KillJob),
    RejectJob(RejectJob),
    RegisterJob(RegisterJob),
    RegisterProfile(RegisterProfile),
    SetResourceState(SetResourceState),
    SetJobMetadata(SetJobMetadata),
    /// An event type this version does not know: kept verbatim.
    Unknown {
        kind: String,
        data: Value,
    },
}

impl EventData {
    /// The protocol's name for the event type.
    pub fn kind(&self) -> &str {
        match self {
            EventData::SimulationBegins(_) => "SIMULATION_BEGINS",
            EventData::SimulationEnds => "SIMULATION_ENDS",
            EventData::JobSubmitted(_) => "JOB_SUBMITTED",
            EventData::JobCompleted(_) => "JOB_COMPLETED",
            EventData::JobKilled(_) => "JOB_KILLED",
            EventData::ResourceStateChanged(_) => "RESOURCE_STATE_CHANGED",
            EventData::RequestedCall => "REQUESTED_CALL",
            EventData::Notify(_) => "NOTIFY",
            EventData::Query(_) => "QUERY",
            EventData::Answer(_) => "ANSWER",
            EventData::ExecuteJob(_) => "EXECUTE_JOB",
            EventData::CallMeLater(_) => "CALL_ME_LATER",
            EventData::KillJob(_) => "KILL_JOB",
            EventData::RejectJob(_) => "REJECT_JOB",
            EventData::RegisterJob(_) => "REGISTER_JOB",
            EventData::RegisterProfile(_) => "REGISTER_PROFILE",
            EventData::SetResourceState(_) => "SET_RESOURCE_STATE",
            EventData::SetJobMetadata(_) => "SET_JOB_METADATA",
            EventData::Unknown { kind, .. } => kind,
        }
    }

    fn data_value(&self) -> Result<Value, serde_json::Error> {
        Ok(match self {
            EventData::SimulationBegins(d) => serde_json::to_value(d)?,
            EventData::SimulationEnds | EventData::RequestedCall => Value::Object(Map::new()),
            EventData::JobSubmitted(d) => serde_json::to_value(d)?,
            EventData::JobCompleted(d) => serde_json::to_value(d)?,
            EventData::JobKilled(d) => serde_json::to_value(d)?,
            EventData::ResourceStateChanged(d) => serde_json::to_value(d)?,
            EventData::Notify(d) => serde_json::to_value(d)?,
            EventData::Query(d) => serde_json::to_value(d)?,
            EventData::Answer(d) => serde_json::to_value(d)?,
            EventData::ExecuteJob(d) => serde_json::to_value(d)?,
            EventData::CallMeLater(d) => serde_json::to_value(d)?,
            EventData::KillJob(d) => serde_json::to_value(d)?,
            EventData::RejectJob(d) => serde_json::to_value(d)?,
            EventData::RegisterJob(d) => serde_json::to_value(d)?,
            EventData::RegisterProfile(d) => serde_json::to_value(d)?,
            EventData::SetResourceState(d) => serde_json::to_value(d)?,
            EventData::SetJobMetadata(d) => serde_json::to_value(d)?,
            EventData::Unknown { data, .. } => data.clone(),
        })
    }

    fn from_parts(kind: String, data: Value) -> Result<Self, serde_json::Error> {
        fn de<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, serde_json::Error> {
            serde_json::from_value(v)
        }
        Ok(match kind.as_str() {
            "SIMULATION_BEGINS" => EventData::SimulationBegins(Box::new(de(data)?)),
            "SIMULATION_ENDS" => EventData::SimulationEnds,
            "JOB_SUBMITTED" => EventData::JobSubmitted(de(data)?),
            "JOB_COMPLETED" => EventData::JobCompleted(de(data)?),
            "JOB_KILLED" => EventData::JobKilled(de(data)?),
            "RESOURCE_STATE_CHANGED" => EventData::ResourceStateChanged(de(data)?),
            "REQUESTED_CALL" => EventData::RequestedCall,
            "NOTIFY" => EventData::Notify(de(data)?),
            "QUERY" => EventData::Query(de(data)?),
            "ANSWER" => EventData::Answer(de(data)?),
            "EXECUTE_JOB" => EventData::ExecuteJob(de(data)?),
            "CALL_ME_LATER" => EventData::CallMeLater(de(data)?),
            "KILL_JOB" => EventData::KillJob(de(data)?),
            "REJECT_JOB" => EventData::RejectJob(de(data)?),
            "REGISTER_JOB" => EventData::RegisterJob(de(data)?),
            "REGISTER_PROFILE" => EventData::RegisterProfile(de(data)?),
            "SET_RESOURCE_STATE" => EventData::SetResourceState(de(data)?),
            "SET_JOB_METADATA" => EventData::SetJobMetadata(de(data)?),
            _ => EventData::Unknown { kind, data },
        })
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeStruct};
        let data = self.data.data_value().map_err(S::Error::custom)?;
        let mut st = s.serialize_struct("Event", 3)?;
        st.serialize_field("timestamp", &self.timestamp)?;
        st.serialize_field("type", self.data.kind())?;
        st.serialize_field("data", &data)?;
        st.end()
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Raw {
            #[serde(deserialize_with = "de_f64")]
            timestamp: f64,
            #[serde(rename = "type")]
            kind: String,
            #[serde(default)]
            data: Value,
        }
        let raw = Raw::deserialize(d)?;
        let data = if raw.data.is_null() {
            Value::Object(Map::new())
        } else {
            raw.data
        };
        let kind = raw.kind;
        let parsed = EventData::from_parts(kind.clone(), data)
            .map_err(|e| D::Error::custom(format!("in {kind} event: {e}")))?;
        Ok(Event {
            timestamp: raw.timestamp,
            data: parsed,
        })
    }
}

/// Reads any JSON number (or a numeric string, as some tools write) as f64.
pub fn de_f64<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = Value::deserialize(d)?;
    value_as_f64(&v).ok_or_else(|| D::Error::custom(format!("expected a number, found {v}")))
}

fn de_opt_f64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => value_as_f64(&v)
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("expected a number, found {v}"))),
    }
}

fn de_u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let x = de_f64(d)?;
    if x.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&x) {
        Ok(x as u32)
    } else {
        Err(D::Error::custom(format!(
            "expected a non-negative integer, found {x}"
        )))
    }
}

fn de_i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let x = de_f64(d)?;
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        Ok(x as i64)
    } else {
        Err(D::Error::custom(format!("expected an integer, found {x}")))
    }
}

/// Writes integral values as integers, as Batsim forwards workload numbers
/// written as integers.
fn ser_num<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        s.serialize_i64(*x as i64)
    } else {
        s.serialize_f64(*x)
    }
}

fn ser_opt_num<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match x {
        Some(x) => ser_num(x, s),
        None => s.serialize_none(),
    }
}

/// A JSON number (or numeric string) as f64.
pub fn value_as_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64().filter(|x| x.is_finite()),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|x| x.is_finite()),
        _ => None,
    }
}

/// SIMULATION_BEGINS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimulationBegins {
    #[serde(deserialize_with = "de_u32")]
    pub nb_resources: u32,
    #[serde(deserialize_with = "de_u32")]
    pub nb_compute_resources: u32,
    #[serde(deserialize_with = "de_u32", default)]
    pub nb_storage_resources: u32,
    pub allow_compute_sharing: bool,
    #[serde(default)]
    pub allow_storage_sharing: bool,
    #[serde(default)]
    pub config: Map<String, Value>,
    pub compute_resources: Vec<Resource>,
    #[serde(default)]
    pub storage_resources: Vec<Resource>,
    #[serde(default)]
    pub workloads: Map<String, Value>,
    /// workload name -> profile name -> profile, when profiles are forwarded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profiles: Option<Map<String, Value>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A compute or storage resource as announced in SIMULATION_BEGINS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resource {
    #[serde(deserialize_with = "de_u32")]
    pub id: u32,
    pub name: String,
    #[serde(default)]
    pub state: String,
    /// Every host `<prop>` as a string, plus `role`.
    #[serde(default)]
    pub properties: Map<String, Value>,
    #[serde(default)]
    pub zone_properties: Map<String, Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Resource {
    /// A host property as text, whatever JSON type it came as.
    pub fn property(&self, key: &str) -> Option<String> {
        self.properties.get(key).map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }
}

/// A job as Batsim describes it: the known fields plus any user fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub id: String,
    #[serde(deserialize_with = "de_f64", serialize_with = "ser_num", default)]
    pub subtime: f64,
    #[serde(
        deserialize_with = "de_opt_f64",
        serialize_with = "ser_opt_num",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub walltime: Option<f64>,
    #[serde(deserialize_with = "de_u32", default = "one")]
    pub res: u32,
    pub profile: String,
    /// User fields passed through by Batsim (cpu, mem, user, scheduler, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn one() -> u32 {
    1
}

/// JOB_SUBMITTED.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSubmitted {
    pub job_id: String,
    pub job: Job,
    /// The job's profile, with `--forward-profiles-on-submission`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A job's final state as Batsim reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum JobState {
    CompletedSuccessfully,
    CompletedFailed,
    CompletedWalltimeReached,
    CompletedKilled,
    Rejected,
    Other(String),
}

impl JobState {
    pub fn as_str(&self) -> &str {
        match self {
            JobState::CompletedSuccessfully => "COMPLETED_SUCCESSFULLY",
            JobState::CompletedFailed => "COMPLETED_FAILED",
            JobState::CompletedWalltimeReached => "COMPLETED_WALLTIME_REACHED",
            JobState::CompletedKilled => "COMPLETED_KILLED",
            JobState::Rejected => "REJECTED",
            JobState::Other(s) => s,
        }
    }

    pub fn parse(s: &str) -> Self {
        match s {
            "COMPLETED_SUCCESSFULLY" => JobState::CompletedSuccessfully,
            "COMPLETED_FAILED" => JobState::CompletedFailed,
            "COMPLETED_WALLTIME_REACHED" => JobState::CompletedWalltimeReached,
            "COMPLETED_KILLED" => JobState::CompletedKilled,
            "REJECTED" => JobState::Rejected,
            other => JobState::Other(other.to_string()),
        }
    }

    /// Whether the job ran to its end and returned 0.
    pub fn is_success(&self) -> bool {
        matches!(self, JobState::CompletedSuccessfully)
    }
}

impl Serialize for JobState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for JobState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(JobState::parse(&String::deserialize(d)?))
    }
}

/// JOB_COMPLETED.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobCompleted {
    pub job_id: String,
    pub job_state: JobState,
    #[serde(deserialize_with = "de_i64")]
    pub return_code: i64,
    pub alloc: IntervalSet,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// JOB_KILLED.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobKilled {
    pub job_ids: Vec<String>,
    /// job id -> progress (`{"profile_name": …, "progress": …}` for simple
    /// profiles; nested for sequences).
    #[serde(default)]
    pub job_progress: Map<String, Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// RESOURCE_STATE_CHANGED.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceStateChanged {
    pub resources: IntervalSet,
    pub state: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// NOTIFY (`type` plus kind-specific fields such as `resources`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notify {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Notify {
    pub fn new(kind: &str) -> Self {
        Self {
            kind: kind.to_string(),
            extra: Map::new(),
        }
    }
}

/// Notification kinds used by Batsim 4.
pub mod notify {
    pub const NO_MORE_STATIC_JOB_TO_SUBMIT: &str = "no_more_static_job_to_submit";
    pub const NO_MORE_EXTERNAL_EVENT_TO_OCCUR: &str = "no_more_external_event_to_occur";
    pub const REGISTRATION_FINISHED: &str = "registration_finished";
    pub const CONTINUE_REGISTRATION: &str = "continue_registration";
}

/// QUERY: `{"requests": {name: args}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Query {
    #[serde(default)]
    pub requests: Map<String, Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// ANSWER: `{name: value}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    #[serde(flatten)]
    pub answers: Map<String, Value>,
}

/// EXECUTE_JOB.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecuteJob {
    pub job_id: String,
    pub alloc: IntervalSet,
    /// executor rank -> index into `alloc`, for several executors per host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapping: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_mapping: Option<Map<String, Value>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ExecuteJob {
    pub fn new(job_id: impl Into<String>, alloc: IntervalSet) -> Self {
        Self {
            job_id: job_id.into(),
            alloc,
            mapping: None,
            storage_mapping: None,
            extra: Map::new(),
        }
    }
}

/// CALL_ME_LATER.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallMeLater {
    #[serde(deserialize_with = "de_f64")]
    pub timestamp: f64,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// KILL_JOB.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KillJob {
    pub job_ids: Vec<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// REJECT_JOB.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RejectJob {
    pub job_id: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// REGISTER_JOB (dynamic jobs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterJob {
    pub job_id: String,
    pub job: Value,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// REGISTER_PROFILE (dynamic jobs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegisterProfile {
    pub workload_name: String,
    pub profile_name: String,
    pub profile: Value,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// SET_RESOURCE_STATE.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetResourceState {
    pub resources: IntervalSet,
    pub state: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// SET_JOB_METADATA.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetJobMetadata {
    pub job_id: String,
    pub metadata: String,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Builders for the decision process's replies.
pub mod build {
    use super::*;

    pub fn execute_job(job_id: &str, alloc: IntervalSet) -> EventData {
        EventData::ExecuteJob(ExecuteJob::new(job_id, alloc))
    }

    pub fn execute_job_mapped(
        job_id: &str,
        alloc: IntervalSet,
        mapping: BTreeMap<String, String>,
    ) -> EventData {
        let mut e = ExecuteJob::new(job_id, alloc);
        e.mapping = Some(mapping);
        EventData::ExecuteJob(e)
    }

    pub fn call_me_later(timestamp: f64) -> EventData {
        EventData::CallMeLater(CallMeLater {
            timestamp,
            extra: Map::new(),
        })
    }

    pub fn kill_jobs<I: IntoIterator<Item = S>, S: Into<String>>(ids: I) -> EventData {
        EventData::KillJob(KillJob {
            job_ids: ids.into_iter().map(Into::into).collect(),
            extra: Map::new(),
        })
    }

    pub fn reject_job(job_id: &str) -> EventData {
        EventData::RejectJob(RejectJob {
            job_id: job_id.to_string(),
            extra: Map::new(),
        })
    }

    pub fn notify(kind: &str) -> EventData {
        EventData::Notify(Notify::new(kind))
    }

    pub fn register_profile(workload: &str, name: &str, profile: Value) -> EventData {
        EventData::RegisterProfile(RegisterProfile {
            workload_name: workload.to_string(),
            profile_name: name.to_string(),
            profile,
            extra: Map::new(),
        })
    }

    pub fn register_job(job_id: &str, job: Value) -> EventData {
        EventData::RegisterJob(RegisterJob {
            job_id: job_id.to_string(),
            job,
            extra: Map::new(),
        })
    }

    pub fn set_resource_state(resources: IntervalSet, state: &str) -> EventData {
        EventData::SetResourceState(SetResourceState {
            resources,
            state: state.to_string(),
            extra: Map::new(),
        })
    }
}

/// Compares two JSON values the way the protocol means them: numbers by
/// value (`0`, `0.0` and `0.000000` are equal), objects regardless of key
/// order.
pub fn json_equivalent(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equivalent(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equivalent(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_events_are_kept() {
        let m = Message::from_json(
            r#"{"now":1,"events":[{"timestamp":1,"type":"FROM_THE_FUTURE","data":{"x":[1,2]}}]}"#,
        )
        .unwrap();
        assert_eq!(m.events[0].data.kind(), "FROM_THE_FUTURE");
        let back: Value = serde_json::from_str(&m.to_json()).unwrap();
        assert_eq!(back["events"][0]["data"]["x"][1], 2);
    }

    #[test]
    fn numbers_in_any_text_form() {
        let m = Message::from_json(
            r#"{"now":"2.5","events":[{"timestamp":2.500000,"type":"CALL_ME_LATER","data":{"timestamp":3e0}}]}"#,
        )
        .unwrap();
        assert_eq!(m.now, 2.5);
        match &m.events[0].data {
            EventData::CallMeLater(c) => assert_eq!(c.timestamp, 3.0),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn reply_order_rules() {
        let mut m = Message::new(5.0);
        m.push(4.0, build::reject_job("w!1"));
        m.push(5.0, build::reject_job("w!2"));
        assert!(m.check_reply_order(4.0).is_ok());
        assert!(matches!(
            m.check_reply_order(6.0),
            Err(OrderError::NowBeforeRequest { .. })
        ));
        m.push(4.5, build::reject_job("w!3"));
        assert!(matches!(
            m.check_reply_order(4.0),
            Err(OrderError::Decreasing { .. })
        ));
        let mut late = Message::new(1.0);
        late.push(2.0, build::call_me_later(3.0));
        assert!(matches!(
            late.check_reply_order(1.0),
            Err(OrderError::AfterNow { .. })
        ));
    }
}
