//! Differences between two normalised answers, and the ones written down
//! as intended (`intended.yaml`).

use serde::Deserialize;
use serde_json::Value;

/// One difference: where, and what each server said (`None`: absent).
#[derive(Debug, Clone)]
pub struct Difference {
    pub case: String,
    /// 1-based.
    pub step: usize,
    pub request: String,
    /// `/status`, `/body/spec/tolerations`, `/events/2/object/...`.
    pub path: String,
    pub real: Option<Value>,
    pub fake: Option<Value>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<Value>| match v {
            None => "(absent)".to_string(),
            Some(v) => {
                let s = v.to_string();
                if s.len() > 300 {
                    format!("{}…", &s[..s.floor_char_boundary(300)])
                } else {
                    s
                }
            }
        };
        write!(
            f,
            "{} step {} ({}): {}\n    kube-apiserver: {}\n    fakeapi:        {}",
            self.case,
            self.step,
            self.request,
            self.path,
            show(&self.real),
            show(&self.fake)
        )
    }
}

/// The paths where `real` and `fake` differ, under `prefix`.
pub fn diff(
    prefix: &str,
    real: Option<&Value>,
    fake: Option<&Value>,
    out: &mut Vec<(String, Option<Value>, Option<Value>)>,
) {
    match (real, fake) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                diff(&format!("{prefix}/{}", escape(k)), a.get(k), b.get(k), out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for i in 0..a.len().max(b.len()) {
                diff(&format!("{prefix}/{i}"), a.get(i), b.get(i), out);
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push((prefix.to_string(), a.cloned(), b.cloned())),
    }
}

fn escape(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

/// A difference written down as intended, with its reason.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Intended {
    /// Case names it covers (`*` for all; a trailing `*` for a prefix),
    /// one or a list.
    #[serde(default = "every_case")]
    pub case: Cases,
    /// The request it covers: a substring of `METHOD /path` (default: any).
    #[serde(default)]
    pub request: Option<String>,
    /// The steps it covers, by number (default: any).
    #[serde(default)]
    pub steps: Option<Vec<usize>>,
    /// Path patterns: segments of a JSON pointer, `*` one segment, a
    /// final `**` any rest.
    pub paths: Vec<String>,
    /// Which side has it: `real` (only kube-apiserver has the value),
    /// `fake`, or `both` (different values; the default).
    #[serde(default)]
    pub only: Option<String>,
    pub reason: String,
}

#[derive(Debug, Clone, serde::Deserialize)]
#[serde(untagged)]
pub enum Cases {
    One(String),
    Many(Vec<String>),
}

fn every_case() -> Cases {
    Cases::One("*".into())
}

fn case_matches(pattern: &str, case: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => case.starts_with(prefix),
        None => case == pattern,
    }
}

impl Intended {
    pub fn covers(&self, d: &Difference) -> bool {
        let case_ok = match &self.case {
            Cases::One(p) => case_matches(p, &d.case),
            Cases::Many(ps) => ps.iter().any(|p| case_matches(p, &d.case)),
        };
        let req_ok = self
            .request
            .as_ref()
            .is_none_or(|r| d.request.contains(r.as_str()))
            && self.steps.as_ref().is_none_or(|s| s.contains(&d.step));
        let side_ok = match self.only.as_deref() {
            Some("real") => d.real.is_some() && d.fake.is_none(),
            Some("fake") => d.fake.is_some() && d.real.is_none(),
            _ => true,
        };
        case_ok && req_ok && side_ok && self.paths.iter().any(|p| path_matches(p, &d.path))
    }
}

fn path_matches(pattern: &str, path: &str) -> bool {
    let pat: Vec<&str> = pattern.trim_start_matches('/').split('/').collect();
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let mut i = 0;
    for (j, p) in pat.iter().enumerate() {
        if *p == "**" && j == pat.len() - 1 {
            return true;
        }
        match segs.get(i) {
            Some(s) if *p == "*" || p == s => i += 1,
            _ => return false,
        }
    }
    i == segs.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(path_matches("/body/spec/volumes", "/body/spec/volumes"));
        assert!(path_matches(
            "/body/items/*/spec/volumes/**",
            "/body/items/3/spec/volumes/0/name"
        ));
        assert!(!path_matches(
            "/body/items/*/spec",
            "/body/items/3/spec/volumes"
        ));
        assert!(path_matches("/body/**", "/body"));
    }
}
