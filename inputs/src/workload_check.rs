//! `batkube workload validate`: Batsim's workload rules plus the broker's,
//! every problem reported with the line of the offending job in the file.
//!
//! Batsim (4.2) refuses: a missing or duplicated job id, a missing or
//! negative `subtime`, a `res` that is not a positive integer, a `walltime`
//! that is neither positive nor -1, a `profile` that is not defined, a
//! profile without a `type`. The broker adds: requests (`cpu`, `memory` or
//! `mem`, on the job or its profile) must be Kubernetes quantities (they
//! are per pod: a job with `res` N is N pods, one per machine). Given the
//! target platform, a job on more machines than it has compute hosts is a
//! warning: the workload stays valid for Batsim, but that job can never run
//! and ends rejected. Finally the built-in stand-in must be able to
//! simulate the workload.

use serde_json::{Map, Value};

use super::quantity;
use batsim::workload::Workload;

/// Profile types Batsim 4.2 knows.
const BATSIM_PROFILE_TYPES: &[&str] = &[
    "delay",
    "parallel",
    "parallel_homogeneous",
    "parallel_homogeneous_total",
    "composed",
    "parallel_homogeneous_pfs",
    "data_staging",
    "smpi",
    "usage_trace",
    "trace_replay",
    "send",
    "recv",
    "sched",
    "msg_par",
    "msg_par_hg",
    "msg_par_hg_tot",
    "msg_par_hg_pfs",
];

/// One finding, located in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// 1-based line; 0 when the problem is the file as a whole.
    pub line: usize,
    /// 1-based column where the job or profile starts (0: unknown).
    pub column: usize,
    pub error: bool,
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.error { "error" } else { "warning" };
        if self.line > 0 && self.column > 0 {
            let (l, c) = (self.line, self.column);
            write!(f, "line {l}, column {c}: {kind}: {}", self.message)
        } else if self.line > 0 {
            write!(f, "line {}: {kind}: {}", self.line, self.message)
        } else {
            write!(f, "{kind}: {}", self.message)
        }
    }
}

/// Byte offsets of the elements of the top-level `"jobs"` array and of the
/// members of the top-level `"profiles"` object, found by scanning the text
/// (serde_json does not keep positions).
#[derive(Debug, Default)]
struct Positions {
    jobs: Vec<usize>,
    profiles: Vec<(String, usize)>,
}

fn scan_positions(text: &str) -> Positions {
    let b = text.as_bytes();
    let mut pos = Positions::default();
    let mut depth = 0usize;
    let mut i = 0;
    // The top-level key whose value we are in, and what the last string was.
    let mut current_key: Option<String> = None;
    let mut last_string: Option<String> = None;
    let mut expect_element = false;
    while i < b.len() {
        let c = b[i];
        match c {
            b'"' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                let s = text
                    .get(start + 1..i.min(b.len()))
                    .unwrap_or("")
                    .to_string();
                if depth == 2 && current_key.as_deref() == Some("profiles") {
                    // A key of the profiles object is followed by ':'.
                    let mut k = i + 1;
                    while k < b.len() && b[k].is_ascii_whitespace() {
                        k += 1;
                    }
                    if k < b.len() && b[k] == b':' {
                        pos.profiles.push((s.clone(), start));
                    }
                }
                if depth == 2 && expect_element && current_key.as_deref() == Some("jobs") {
                    pos.jobs.push(start);
                    expect_element = false;
                }
                last_string = Some(s);
            }
            b'{' | b'[' => {
                if depth == 2 && expect_element && current_key.as_deref() == Some("jobs") {
                    pos.jobs.push(i);
                    expect_element = false;
                }
                depth += 1;
                if depth == 2 && c == b'[' && current_key.as_deref() == Some("jobs") {
                    expect_element = true;
                }
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 1 {
                    current_key = None;
                }
            }
            b':' if depth == 1 => current_key = last_string.take(),
            b',' if depth == 2 && current_key.as_deref() == Some("jobs") => expect_element = true,
            c if depth == 2
                && expect_element
                && current_key.as_deref() == Some("jobs")
                && !c.is_ascii_whitespace() =>
            {
                pos.jobs.push(i);
                expect_element = false;
            }
            _ => {}
        }
        i += 1;
    }
    pos
}

/// Where a job or profile starts in the file.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Loc {
    line: usize,
    column: usize,
}

/// 1-based line and column numbers of byte offsets.
struct Lines(Vec<usize>);

impl Lines {
    fn new(text: &str) -> Self {
        Lines(
            text.bytes()
                .enumerate()
                .filter(|(_, c)| *c == b'\n')
                .map(|(i, _)| i)
                .collect(),
        )
    }
    fn of(&self, offset: usize) -> Loc {
        let before = self.0.partition_point(|&nl| nl < offset);
        let line_start = if before == 0 {
            0
        } else {
            self.0[before - 1] + 1
        };
        Loc {
            line: before + 1,
            column: offset - line_start + 1,
        }
    }
}

/// Checks a workload's text; `Ok` holds warnings only, `Err` every finding
/// when at least one is an error.
pub fn check(text: &str, shown: &str) -> Result<Vec<Finding>, Vec<Finding>> {
    check_counted(text, shown).map(|c| c.warnings)
}

/// The target platform, as far as a workload check needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlatformSize {
    /// Compute machines (the master excluded).
    pub machines: usize,
    /// How to name it in messages (its path).
    pub name: String,
}

/// How many jobs too large for the platform are reported one by one; the
/// rest are counted in one more warning.
const TOO_LARGE_LISTED: usize = 10;

/// What a valid workload holds, with its warnings.
pub struct Checked {
    pub warnings: Vec<Finding>,
    pub jobs: usize,
    pub profiles: usize,
}

/// As [`check`], with the counts of jobs and profiles (from the same
/// parse: a million-job workload is parsed once for them, not again).
pub fn check_counted(text: &str, shown: &str) -> Result<Checked, Vec<Finding>> {
    check_on(text, shown, None)
}

/// As [`check_counted`], and against a platform when one is given: every
/// job with `res` above its compute machines is a warning (the first
/// [`TOO_LARGE_LISTED`] with their line, then a count).
pub fn check_on(
    text: &str,
    shown: &str,
    platform: Option<&PlatformSize>,
) -> Result<Checked, Vec<Finding>> {
    let mut out = Vec::new();
    let err = |out: &mut Vec<Finding>, at: Loc, message: String| {
        out.push(Finding {
            line: at.line,
            column: at.column,
            error: true,
            message,
        })
    };
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            return Err(vec![Finding {
                line: e.line(),
                column: e.column(),
                error: true,
                message: format!("not valid JSON: {e}"),
            }])
        }
    };
    let Some(obj) = value.as_object() else {
        return Err(vec![Finding {
            line: 1,
            column: 1,
            error: true,
            message: "the top level is not a JSON object".into(),
        }]);
    };
    let pos = scan_positions(text);
    let lines = Lines::new(text);
    let job_line = |i: usize| pos.jobs.get(i).map(|&o| lines.of(o)).unwrap_or_default();
    let profile_offsets: std::collections::HashMap<&str, usize> =
        pos.profiles.iter().map(|(n, o)| (n.as_str(), *o)).collect();
    let profile_line = |name: &str| {
        profile_offsets
            .get(name)
            .map(|&o| lines.of(o))
            .unwrap_or_default()
    };
    match obj.get("nb_res") {
        None => out.push(Finding {
            line: 0,
            column: 0,
            error: false,
            message: "no \"nb_res\" (Batsim 4.2 ignores it; older tools want it)".into(),
        }),
        Some(v) if v.as_u64().is_none() => err(
            &mut out,
            Loc::default(),
            format!("\"nb_res\" must be a non-negative integer, found {v}"),
        ),
        _ => {}
    }
    let empty = Map::new();
    let profiles = match obj.get("profiles") {
        Some(Value::Object(m)) => m,
        None => {
            err(
                &mut out,
                Loc::default(),
                "there is no \"profiles\" object".into(),
            );
            &empty
        }
        Some(_) => {
            err(
                &mut out,
                Loc::default(),
                "\"profiles\" must be an object".into(),
            );
            &empty
        }
    };
    for (name, p) in profiles {
        let line = profile_line(name);
        let Some(po) = p.as_object() else {
            err(&mut out, line, format!("profile {name:?} is not an object"));
            continue;
        };
        match po.get("type").and_then(Value::as_str) {
            None => err(
                &mut out,
                line,
                format!("profile {name:?} has no string \"type\""),
            ),
            Some(t) if !BATSIM_PROFILE_TYPES.contains(&t) => err(
                &mut out,
                line,
                format!("profile {name:?} has type {t:?}, which Batsim 4.2 does not know"),
            ),
            Some("delay") => {
                if !po
                    .get("delay")
                    .and_then(batsim::protocol::value_as_f64)
                    .is_some_and(|d| d >= 0.0)
                {
                    err(
                        &mut out,
                        line,
                        format!("delay profile {name:?} needs a non-negative \"delay\""),
                    );
                }
            }
            Some(_) => {}
        }
        check_requests(po, &mut out, line, &format!("profile {name:?}"));
    }
    let Some(jobs) = obj.get("jobs").and_then(Value::as_array) else {
        err(
            &mut out,
            Loc::default(),
            "there is no \"jobs\" array".into(),
        );
        return Err(out);
    };
    let mut seen: std::collections::HashMap<String, Loc> = Default::default();
    let mut too_large = 0usize;
    for (i, j) in jobs.iter().enumerate() {
        let line = job_line(i);
        let Some(jo) = j.as_object() else {
            err(&mut out, line, format!("job #{i} is not an object"));
            continue;
        };
        let id = match jo.get("id") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) if n.is_u64() => n.to_string(),
            _ => {
                err(
                    &mut out,
                    line,
                    format!("job #{i} has no string or integer \"id\""),
                );
                format!("#{i}")
            }
        };
        if let Some(first) = seen.insert(id.clone(), line) {
            err(
                &mut out,
                line,
                format!("job id {id:?} was already used on line {}", first.line),
            );
        }
        let num = |k: &str| jo.get(k).and_then(batsim::protocol::value_as_f64);
        match num("subtime") {
            Some(t) if t >= 0.0 => {}
            _ => err(
                &mut out,
                line,
                format!("job {id:?}: \"subtime\" must be a non-negative number"),
            ),
        }
        match num("res") {
            Some(r) if r >= 1.0 && r.fract() == 0.0 => {
                if let Some(p) = platform.filter(|p| r > p.machines as f64) {
                    too_large += 1;
                    if too_large <= TOO_LARGE_LISTED {
                        out.push(Finding {
                            line: line.line,
                            column: line.column,
                            error: false,
                            message: format!(
                                "job {id:?} asks for {r} machines, more than the {} compute machines of {}: it can never run",
                                p.machines, p.name
                            ),
                        });
                    }
                }
            }
            _ => err(
                &mut out,
                line,
                format!("job {id:?}: \"res\" must be a positive integer"),
            ),
        }
        if let Some(w) = jo.get("walltime") {
            match batsim::protocol::value_as_f64(w) {
                Some(x) if x > 0.0 || x == -1.0 => {}
                _ => err(
                    &mut out,
                    line,
                    format!("job {id:?}: \"walltime\" must be positive or -1, found {w}"),
                ),
            }
        }
        match jo.get("profile").and_then(Value::as_str) {
            None => err(
                &mut out,
                line,
                format!("job {id:?}: \"profile\" must be a string"),
            ),
            Some(p) if !profiles.contains_key(p) => err(
                &mut out,
                line,
                format!("job {id:?}: profile {p:?} is not defined in \"profiles\""),
            ),
            Some(_) => {}
        }
        check_requests(jo, &mut out, line, &format!("job {id:?}"));
    }
    if let Some(p) = platform.filter(|_| too_large > TOO_LARGE_LISTED) {
        out.push(Finding {
            line: 0,
            column: 0,
            error: false,
            message: format!(
                "{too_large} jobs in all ask for more than the {} compute machines of {}",
                p.machines, p.name
            ),
        });
    }
    if !out.iter().any(|f| f.error) {
        // What the stand-in (and so `batkube run` without Batsim) accepts.
        if let Err(e) = Workload::parse(text, "w0", shown) {
            err(
                &mut out,
                Loc::default(),
                format!("the built-in Batsim stand-in refuses it: {e}"),
            );
        }
    }
    if out.iter().any(|f| f.error) {
        Err(out)
    } else {
        Ok(Checked {
            warnings: out,
            jobs: obj
                .get("jobs")
                .and_then(Value::as_array)
                .map_or(0, Vec::len),
            profiles: obj
                .get("profiles")
                .and_then(Value::as_object)
                .map_or(0, Map::len),
        })
    }
}

fn check_requests(o: &Map<String, Value>, out: &mut Vec<Finding>, line: Loc, what: &str) {
    if let Some(v) = o.get("cpu") {
        // In parallel profiles `cpu` is flops, not a request.
        let typed_parallel = matches!(
            o.get("type").and_then(Value::as_str),
            Some(t) if t != "delay"
        );
        if !typed_parallel {
            if let Err(e) = quantity::cpu_from_value(v) {
                out.push(Finding {
                    line: line.line,
                    column: line.column,
                    error: true,
                    message: format!("{what}: {e}"),
                });
            }
        }
    }
    for k in ["memory", "mem"] {
        if let Some(v) = o.get(k) {
            if let Err(e) = quantity::memory_from_value(v) {
                out.push(Finding {
                    line: line.line,
                    column: line.column,
                    error: true,
                    message: format!("{what}: {e}"),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_the_line_of_each_bad_job() {
        let text = r#"{
  "nb_res": 1,
  "jobs": [
    {"id": "1", "subtime": 0, "res": 1, "profile": "p"},
    {"id": "2", "subtime": -5, "res": 1, "profile": "p"},
    {"id": "1", "subtime": 3, "res": 1, "profile": "q"}
  ],
  "profiles": {
    "p": {"type": "delay", "delay": 10, "cpu": "4000m"},
    "r": {"type": "delay", "delay": 1, "memory": "lots"}
  }
}"#;
        let f = check(text, "x.json").unwrap_err();
        let lines: Vec<usize> = f.iter().filter(|f| f.error).map(|f| f.line).collect();
        assert!(lines.contains(&5), "{f:?}");
        assert!(lines.contains(&6), "{f:?}");
        assert!(lines.contains(&10), "{f:?}");
        let dup = f
            .iter()
            .find(|f| f.message.contains("already used"))
            .unwrap();
        assert_eq!(dup.line, 6);
        assert!(dup.message.contains("line 4"));
        assert!(f.iter().any(|f| f.line == 6 && f.message.contains("\"q\"")));
    }

    #[test]
    fn parallel_jobs_are_valid_and_those_larger_than_the_platform_are_warned_of() {
        let text = r#"{
  "nb_res": 16,
  "jobs": [
    {"id": "1", "subtime": 0, "res": 4, "profile": "p"},
    {"id": "2", "subtime": 1, "res": 16, "profile": "p"},
    {"id": "3", "subtime": 2, "res": 8, "profile": "p"}
  ],
  "profiles": {
    "p": {"type": "delay", "delay": 10, "cpu": 1}
  }
}"#;
        assert_eq!(check(text, "x").unwrap(), vec![]);
        let eight = PlatformSize {
            machines: 8,
            name: "p8.xml".into(),
        };
        let w = check_on(text, "x", Some(&eight)).unwrap().warnings;
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!((w[0].line, w[0].column, w[0].error), (5, 5, false));
        assert!(
            w[0].to_string().starts_with(
                "line 5, column 5: warning: job \"2\" asks for 16 machines, more than the 8 compute machines of p8.xml"
            ),
            "{}",
            w[0]
        );
        // Beyond the first few, a count.
        let many: Vec<String> = (0..25)
            .map(|i| format!("{{\"id\":\"{i}\",\"subtime\":0,\"res\":9,\"profile\":\"p\"}}"))
            .collect();
        let big = format!(
            "{{\"nb_res\":9,\"jobs\":[{}],\"profiles\":{{\"p\":{{\"type\":\"delay\",\"delay\":1}}}}}}",
            many.join(",\n")
        );
        let w = check_on(&big, "x", Some(&eight)).unwrap().warnings;
        assert_eq!(w.len(), TOO_LARGE_LISTED + 1);
        assert!(w[TOO_LARGE_LISTED].message.starts_with("25 jobs in all"));
    }

    #[test]
    fn compact_files_locate_jobs_on_one_line_and_bad_json_by_line() {
        let text = "{\"jobs\":[{\"id\":\"a\",\"subtime\":0,\"res\":1,\"profile\":\"p\"}],\n\"profiles\":{\"p\":{\"type\":\"delay\",\"delay\":1,\"cpu\":1}}}";
        let w = check(text, "x").unwrap();
        assert!(w.iter().all(|f| !f.error));
        let two = "{\"jobs\":[{\"id\":\"a\",\"subtime\":0,\"res\":1,\"profile\":\"p\"},{\"id\":\"b\",\"subtime\":0,\"res\":0,\"profile\":\"p\"}],\n\"profiles\":{\"p\":{\"type\":\"delay\",\"delay\":1}}}";
        let f = check(two, "x").unwrap_err();
        let e = f.iter().find(|f| f.error).unwrap();
        assert_eq!((e.line, e.column), (1, 55), "{f:?}");
        assert!(e
            .to_string()
            .starts_with("line 1, column 55: error: job \"b\""));
        let e = check("{\n\"jobs\": [\n{\"id\": }\n]}", "x").unwrap_err();
        assert_eq!(e[0].line, 3);
    }
}
