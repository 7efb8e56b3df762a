//! Batsim JSON workloads: `{"nb_res": n, "jobs": [...], "profiles": {...}}`.
//!
//! Jobs keep their original JSON (user fields and key order) because Batsim
//! forwards it verbatim in JOB_SUBMITTED, with the id rewritten to
//! `"<workload>!<id>"`.

use std::path::Path;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// An object's members in their order, values as text; a repeated key
/// keeps its first place and its last value (as a parsed object does).
struct OrderedMembers<'a>(Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> serde::Deserialize<'de> for OrderedMembers<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = OrderedMembers<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out: Vec<(String, &'a RawValue)> = Vec::new();
                let mut at = std::collections::HashMap::new();
                while let Some((k, v)) = m.next_entry::<String, &'de RawValue>()? {
                    match at.get(&k) {
                        Some(&i) => out[i] = (k, v),
                        None => {
                            at.insert(k.clone(), out.len());
                            out.push((k, v));
                        }
                    }
                }
                Ok(OrderedMembers(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

use crate::protocol::value_as_f64;

/// A workload that cannot be used, with the reason in the user's terms.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("cannot read workload file {path}: {error}")]
    Io {
        path: String,
        /// Said in the message, not a `source()`: each cause once.
        error: std::io::Error,
    },
    #[error("workload {path} is not valid JSON: {error}")]
    Json {
        path: String,
        error: serde_json::Error,
    },
    #[error("workload {path}: {message}")]
    Invalid { path: String, message: String },
}

/// What a profile asks the platform to simulate.
#[derive(Debug, Clone, PartialEq)]
pub enum ProfileKind {
    /// Sleep for `delay` seconds; uses no resource.
    Delay { delay: f64 },
    /// `cpu` flops on each host and `com` bytes between each pair of hosts.
    ParallelHomogeneous { cpu: f64, com: f64 },
}

/// One profile of a workload.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub kind: ProfileKind,
    /// The profile as written (compact JSON text: a parsed object costs
    /// ten times more, and generated workloads have a profile per job).
    pub raw: Box<str>,
}

impl Profile {
    /// The profile as written, forwarded to the decision process.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.raw).expect("a profile's own serialization parses")
    }
}

/// One job of a workload.
#[derive(Debug, Clone)]
pub struct WorkloadJob {
    /// The id as written in the workload (without the workload prefix).
    pub id: String,
    pub subtime: f64,
    /// `None` when the workload gives none (Batsim's -1).
    pub walltime: Option<f64>,
    pub res: u32,
    pub profile: String,
    /// The job object as written, as compact JSON text (what a million
    /// jobs cost in memory is what they cost as text, not as parsed maps).
    pub raw: Box<str>,
}

impl WorkloadJob {
    /// The job object as written (keys in their order).
    pub fn json(&self) -> Map<String, Value> {
        serde_json::from_str(&self.raw).expect("a job's own serialization parses")
    }
}

/// A loaded workload.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Batsim's name for it: `w0`, `w1`, … in command-line order.
    pub name: String,
    /// The path as given on the command line.
    pub path: String,
    pub nb_res: Option<u32>,
    pub jobs: Vec<WorkloadJob>,
    /// Profiles in file order.
    pub profiles: Vec<Profile>,
    /// Profile name to its place in `profiles`.
    index: std::collections::HashMap<String, usize>,
}

impl Workload {
    pub fn from_file(path: &Path, name: &str) -> Result<Self, WorkloadError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|error| WorkloadError::Io {
            path: shown.clone(),
            error,
        })?;
        Self::parse(&text, name, &shown)
    }

    /// Parses and validates a workload. Every job must name a defined
    /// profile of a type the stand-in can simulate.
    pub fn parse(text: &str, name: &str, path: &str) -> Result<Self, WorkloadError> {
        let bad_json = |error| WorkloadError::Json {
            path: path.to_string(),
            error,
        };
        let invalid = |message: String| WorkloadError::Invalid {
            path: path.to_string(),
            message,
        };
        // The top level's members as text, each job and profile parsed on
        // its own: the whole document is never a tree in memory (a million
        // jobs would make a gigabyte of it). Duplicate keys: the last wins,
        // as in a parsed object. Members and jobs are borrowed from `text`.
        let top: std::collections::BTreeMap<String, &RawValue> = match serde_json::from_str(text) {
            Ok(t) => t,
            Err(e) => {
                return match serde_json::from_str::<serde::de::IgnoredAny>(text) {
                    Ok(_) => Err(invalid("the top level is not a JSON object".into())),
                    Err(_) => Err(bad_json(e)),
                }
            }
        };
        let starts = |r: &RawValue, c: char| r.get().trim_start().starts_with(c);
        let nb_res = match top.get("nb_res") {
            None => None,
            Some(r) => {
                let v: Value = serde_json::from_str(r.get()).map_err(bad_json)?;
                Some(
                    value_as_f64(&v)
                        .filter(|x| *x >= 0.0 && x.fract() == 0.0 && *x <= f64::from(u32::MAX))
                        .ok_or_else(|| {
                            invalid(format!("nb_res must be a non-negative integer, found {v}"))
                        })? as u32,
                )
            }
        };
        let prof_raw: Vec<(String, &RawValue)> = match top.get("profiles") {
            None => Vec::new(),
            Some(r) if starts(r, '{') => {
                serde_json::from_str::<OrderedMembers>(r.get())
                    .map_err(bad_json)?
                    .0
            }
            Some(_) => return Err(invalid("\"profiles\" must be an object".into())),
        };
        let by_name: std::collections::HashMap<String, usize> = prof_raw
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.clone(), i))
            .collect();
        let jobs_v: Vec<&RawValue> = match top.get("jobs") {
            Some(r) if starts(r, '[') => serde_json::from_str(r.get()).map_err(bad_json)?,
            _ => return Err(invalid("there is no \"jobs\" array".into())),
        };
        drop(top);
        let mut jobs = Vec::with_capacity(jobs_v.len());
        let mut seen = std::collections::HashSet::new();
        for (at, j) in jobs_v.into_iter().enumerate() {
            let index = at;
            let jo = match serde_json::from_str::<Value>(j.get()).map_err(bad_json)? {
                Value::Object(m) => m,
                _ => return Err(invalid(format!("job #{index} is not an object"))),
            };
            // Batsim (jobs.cpp): a string, or an int (rapidjson's IsInt:
            // an integer literal within 32 bits).
            let id = match jo.get("id") {
                Some(Value::String(s)) => s.clone(),
                Some(v) if json_int(v).is_some() => v.to_string(),
                _ => {
                    return Err(invalid(format!(
                        "job #{index}: its id field is invalid, it should be a string or an integer"
                    )))
                }
            };
            let what = |field: &str| format!("job {id:?} (#{index}): {field}");
            if !seen.insert(id.clone()) {
                return Err(invalid(format!("job id {id:?} appears twice")));
            }
            // Numbers are JSON numbers: Batsim asserts IsNumber (a string
            // holding one is refused).
            let subtime = jo
                .get("subtime")
                .and_then(json_number)
                .filter(|t| *t >= 0.0)
                .ok_or_else(|| invalid(what("\"subtime\" must be a non-negative number")))?;
            let walltime = match jo.get("walltime") {
                None | Some(Value::Null) => None,
                Some(v) => {
                    let w = json_number(v)
                        .ok_or_else(|| invalid(what("\"walltime\" must be a number")))?;
                    if w == -1.0 {
                        None
                    } else if w > 0.0 {
                        Some(w)
                    } else {
                        return Err(invalid(what("\"walltime\" must be positive or -1")));
                    }
                }
            };
            let res = jo
                .get("res")
                .and_then(json_int)
                .filter(|r| *r >= 1)
                .ok_or_else(|| invalid(what("\"res\" must be a positive integer")))?
                as u32;
            let profile = jo
                .get("profile")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(what("\"profile\" must be a string")))?
                .to_string();
            if !by_name.contains_key(&profile) {
                return Err(invalid(what(&format!(
                    "profile {profile:?} is not defined in \"profiles\""
                ))));
            }
            let raw = serde_json::to_string(&jo)
                .expect("a parsed job serializes")
                .into_boxed_str();
            jobs.push(WorkloadJob {
                id,
                subtime,
                walltime,
                res,
                profile,
                raw,
            });
        }
        // Only the profiles jobs use must be simulable; say which job needs
        // an unsupported one.
        // One pass over the jobs: the first user of each profile.
        let mut first_user: std::collections::HashMap<&str, &str> =
            std::collections::HashMap::with_capacity(prof_raw.len());
        for j in &jobs {
            first_user
                .entry(j.profile.as_str())
                .or_insert(j.id.as_str());
        }
        let mut profiles = Vec::with_capacity(prof_raw.len());
        for (pname, r) in prof_raw {
            let v: Value = serde_json::from_str(r.get()).map_err(bad_json)?;
            let kind = match profile_kind(&v) {
                Ok(k) => k,
                // What real Batsim refuses in any profile, used or not (it
                // reads them all): a bad delay.
                Err(why) if v.get("type").and_then(Value::as_str) == Some("delay") => {
                    return Err(invalid(format!("profile {pname:?} {why}")))
                }
                Err(why) if !first_user.contains_key(pname.as_str()) => {
                    tracing::debug!(profile = %pname, %why, "unused profile ignored");
                    ProfileKind::Delay { delay: 0.0 }
                }
                Err(why) => {
                    return Err(invalid(format!(
                        "job {:?} uses profile {:?}: {why}",
                        first_user[pname.as_str()],
                        pname
                    )))
                }
            };
            profiles.push(Profile {
                name: pname,
                kind,
                raw: serde_json::to_string(&v)
                    .expect("a parsed profile serializes")
                    .into_boxed_str(),
            });
        }
        Ok(Workload {
            name: name.to_string(),
            path: path.to_string(),
            nb_res,
            jobs,
            profiles,
            index: by_name,
        })
    }

    pub fn profile(&self, name: &str) -> Option<&Profile> {
        self.index.get(name).map(|&i| &self.profiles[i])
    }
}

/// A JSON number (rapidjson's IsNumber, which Batsim asserts on numeric
/// fields): a string holding a number is not one.
fn json_number(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

/// A JSON integer within 32 bits (rapidjson's IsInt, which Batsim asserts
/// on `res` and integer ids): `2.0` and `"2"` are not.
fn json_int(v: &Value) -> Option<i64> {
    v.as_i64().filter(|x| i32::try_from(*x).is_ok())
}

/// Reads a profile's type; errors name what is unsupported.
pub fn profile_kind(p: &Value) -> Result<ProfileKind, String> {
    let ty = p
        .get("type")
        .and_then(Value::as_str)
        .ok_or("the profile has no \"type\"")?;
    let num = |field: &str| -> Result<f64, String> {
        p.get(field)
            .and_then(json_number)
            .filter(|x| *x >= 0.0)
            .ok_or(format!(
                "profile type {ty:?} needs a non-negative number \"{field}\""
            ))
    };
    match ty {
        // Batsim 4.2.1 (profiles.cpp) asserts `delay > 0`.
        "delay" => match num("delay")? {
            d if d > 0.0 => Ok(ProfileKind::Delay { delay: d }),
            d => Err(format!(
                "has a non-strictly-positive 'delay' field ({d}): Batsim 4.2.1 refuses it"
            )),
        },
        "parallel_homogeneous" | "msg_par_hg" => Ok(ProfileKind::ParallelHomogeneous {
            cpu: num("cpu")?,
            com: num("com")?,
        }),
        other => Err(format!(
            "profile type {other:?} is not supported by the built-in Batsim stand-in \
             (it simulates \"delay\" and \"parallel_homogeneous\"); run real Batsim for it"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delay_that_is_not_strictly_positive_is_refused_as_batsim_does() {
        for w in [
            r#"{"jobs":[{"id":"a","subtime":0,"res":1,"profile":"p"}],"profiles":{"p":{"type":"delay","delay":0}}}"#,
            // Unused: real Batsim reads every profile.
            r#"{"jobs":[{"id":"a","subtime":0,"res":1,"profile":"p"}],"profiles":{"p":{"type":"delay","delay":1},"q":{"type":"delay","delay":0}}}"#,
        ] {
            let e = Workload::parse(w, "w0", "x").unwrap_err().to_string();
            assert!(e.contains("non-strictly-positive 'delay'"), "{e}");
        }
    }

    #[test]
    fn refuses_unsupported_profiles_naming_job_and_profile() {
        let w = r#"{"jobs":[{"id":"j1","subtime":0,"res":1,"profile":"smpi1"}],
                    "profiles":{"smpi1":{"type":"smpi","trace":"x"}}}"#;
        let e = Workload::parse(w, "w0", "x.json").unwrap_err().to_string();
        assert!(
            e.contains("\"j1\"") && e.contains("smpi1") && e.contains("smpi"),
            "{e}"
        );
    }

    #[test]
    fn line_precise_messages_for_bad_jobs() {
        let e = Workload::parse(r#"{"jobs":[{"id":"a","subtime":-1,"res":1,"profile":"p"}],"profiles":{"p":{"type":"delay","delay":1}}}"#, "w0", "x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("subtime"), "{e}");
        let e = Workload::parse(
            r#"{"jobs":[{"id":"a","subtime":0,"res":1,"profile":"q"}],"profiles":{}}"#,
            "w0",
            "x",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("\"q\""), "{e}");
        assert!(Workload::parse("{", "w0", "x").is_err());
    }

    #[test]
    fn integer_ids_but_no_numbers_in_strings_as_batsim() {
        let w = Workload::parse(
            r#"{"jobs":[{"id":7,"subtime":1.5,"walltime":-1,"res":1,"profile":"p"}],"profiles":{"p":{"type":"delay","delay":3}}}"#,
            "w0",
            "x",
        )
        .unwrap();
        assert_eq!(w.jobs[0].id, "7");
        assert_eq!(w.jobs[0].subtime, 1.5);
        assert_eq!(w.jobs[0].walltime, None);
        assert_eq!(w.profiles[0].kind, ProfileKind::Delay { delay: 3.0 });
        // Batsim 4.2.1 asserts IsNumber / IsInt on each of these.
        for (job, profile, says) in [
            (r#""subtime":"1.5","res":1"#, r#""delay":3"#, "subtime"),
            (
                r#""subtime":1,"walltime":"9","res":1"#,
                r#""delay":3"#,
                "walltime",
            ),
            (r#""subtime":1,"res":"1""#, r#""delay":3"#, "res"),
            (r#""subtime":1,"res":2.0"#, r#""delay":3"#, "res"),
            (r#""subtime":1,"res":1"#, r#""delay":"3""#, "delay"),
        ] {
            let text = format!(
                r#"{{"jobs":[{{"id":"a",{job},"profile":"p"}}],"profiles":{{"p":{{"type":"delay",{profile}}}}}}}"#
            );
            let e = Workload::parse(&text, "w0", "x").unwrap_err().to_string();
            assert!(e.contains(says), "{text}: {e}");
        }
        for id in ["7.5", "4294967296"] {
            let text = format!(
                r#"{{"jobs":[{{"id":{id},"subtime":0,"res":1,"profile":"p"}}],"profiles":{{"p":{{"type":"delay","delay":3}}}}}}"#
            );
            let e = Workload::parse(&text, "w0", "x").unwrap_err().to_string();
            assert!(e.contains("string or an integer"), "{id}: {e}");
        }
    }
}
