//! What two API servers may rightly answer differently, written the same
//! way on both sides: identifiers and versions by order of first
//! appearance, times as `<time>`, managed fields left out.
//!
//! - `uid`: `<uid:N>`, N counting the distinct uids this server showed in
//!   this case; anywhere else the same string appears (owner references,
//!   preconditions, messages), the same placeholder.
//! - an object's `resourceVersion`: `<rv:N>` likewise; a list's, a
//!   bookmark's or a watch's error's (a version of the whole store, which
//!   on a real server also counts writes nobody here sees, such as the API
//!   server's own leases) `<lrv:N>`, numbered apart. In a `Status` message,
//!   a known version is replaced where it stands as a whole number.
//! - a name the server generated (`metadata.generateName` + suffix):
//!   `<name:N>`, everywhere it appears.
//! - a list's `continue` token (opaque, each server its own): `<continue:N>`.
//! - a string that is an RFC 3339 time: `<time>`; an address of the
//!   service range (10.96.0.0/16), which each server picks at random:
//!   `<service-ip>`; a Table's age cell (`7s`): `<age>`.
//! - `metadata.managedFields`: left out (field ownership is compared by
//!   what server-side apply does, not by how it is written down).
//! - a bookmark's object: its `kind`, `apiVersion` and `metadata` only
//!   (what clients read of it), and bookmarks in a row that say the same
//!   thing as one (how many a real server sends in its last 2 s before a
//!   timeout depends on its 1 s ticker; see `main.rs`).

use regex::Regex;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::OnceLock;

/// The kinds of values a normaliser numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Uid,
    Rv,
    ListRv,
    Name,
    Continue,
}

impl Kind {
    pub fn tag(self) -> &'static str {
        match self {
            Kind::Uid => "uid",
            Kind::Rv => "rv",
            Kind::ListRv => "lrv",
            Kind::Name => "name",
            Kind::Continue => "continue",
        }
    }

    pub fn from_tag(t: &str) -> Option<Kind> {
        Some(match t {
            "uid" => Kind::Uid,
            "rv" => Kind::Rv,
            "lrv" => Kind::ListRv,
            "name" => Kind::Name,
            "continue" => Kind::Continue,
            _ => return None,
        })
    }
}

/// The numbering of one server's values in one case.
#[derive(Debug, Default)]
pub struct Normaliser {
    /// (kind, value) -> ordinal.
    seen: HashMap<(Kind, String), usize>,
    /// (kind, ordinal) -> value.
    values: HashMap<(Kind, usize), String>,
    next: HashMap<Kind, usize>,
}

fn time_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$").unwrap()
    })
}

/// A Table's `Age` cell (`7s`, `3m2s`, `5d`).
fn age_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^(\d+[smhdy])+$").unwrap())
}

/// An address of the service range `apiserver/run.sh` gives kube-apiserver
/// (10.96.0.0/16): a Service's cluster IP, picked at random.
fn service_ip_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^10\.96\.\d{1,3}\.\d{1,3}$").unwrap())
}

impl Normaliser {
    /// The placeholder of `value`, numbering it if new.
    pub fn number(&mut self, kind: Kind, value: &str) -> String {
        let n = match self.seen.get(&(kind, value.to_string())) {
            Some(n) => *n,
            None => {
                let n = self.next.entry(kind).or_insert(0);
                *n += 1;
                let n = *n;
                self.seen.insert((kind, value.to_string()), n);
                self.values.insert((kind, n), value.to_string());
                n
            }
        };
        format!("<{}:{n}>", kind.tag())
    }

    /// The number this normaliser gave `value` as a `kind`, if it saw it.
    pub fn ordinal(&self, kind: Kind, value: &str) -> Option<usize> {
        self.seen.get(&(kind, value.to_string())).copied()
    }

    /// This server's value of `@rv:3` (the text between `{{` and `}}`).
    pub fn resolve(&self, placeholder: &str) -> Option<String> {
        let (tag, n) = placeholder.strip_prefix('@')?.split_once(':')?;
        let kind = Kind::from_tag(tag)?;
        self.values.get(&(kind, n.parse().ok()?)).cloned()
    }

    /// A response body (an object, a list, a Status, a watch event's
    /// object), normalised.
    pub fn body(&mut self, v: &Value) -> Value {
        self.collect_generated(v);
        let list = is_list(v);
        self.walk(v, list, false)
    }

    /// A watch event, normalised: a bookmark's or an ERROR's version is a
    /// version of the store.
    pub fn event(&mut self, ev: &Value) -> Value {
        let ty = ev["type"].as_str().unwrap_or("");
        let obj = &ev["object"];
        self.collect_generated(obj);
        let store_version = ty == "BOOKMARK" || ty == "ERROR";
        let mut out = Map::new();
        for (k, x) in ev.as_object().into_iter().flatten() {
            let nx = if k == "object" && ty == "BOOKMARK" {
                // Clients read a bookmark's metadata only; kube-apiserver
                // fills the rest with the kind's zero values.
                let mut o = Map::new();
                for f in ["kind", "apiVersion", "metadata"] {
                    if let Some(v) = x.get(f) {
                        o.insert(f.to_string(), v.clone());
                    }
                }
                self.walk(&Value::Object(o), true, false)
            } else if k == "object" {
                self.walk(x, store_version, false)
            } else {
                x.clone()
            };
            out.insert(k.clone(), nx);
        }
        Value::Object(out)
    }

    /// Names made from `generateName` and uids, numbered before the walk so
    /// that every occurrence (the name may come before `generateName`) is
    /// replaced.
    fn collect_generated(&mut self, v: &Value) {
        match v {
            Value::Object(m) => {
                if let Some(meta) = m.get("metadata").and_then(Value::as_object) {
                    // A uid can appear before its `metadata.uid` (a Job's
                    // `controller-uid` label).
                    if let Some(u) = meta.get("uid").and_then(Value::as_str) {
                        if !u.is_empty() {
                            self.number(Kind::Uid, u);
                        }
                    }
                    if let (Some(g), Some(n)) = (
                        meta.get("generateName").and_then(Value::as_str),
                        meta.get("name").and_then(Value::as_str),
                    ) {
                        if !g.is_empty() && n.starts_with(g) && n.len() > g.len() {
                            self.number(Kind::Name, n);
                        }
                    }
                }
                m.values().for_each(|x| self.collect_generated(x));
            }
            Value::Array(a) => a.iter().for_each(|x| self.collect_generated(x)),
            _ => {}
        }
    }

    /// `store_version`: this object's own `metadata.resourceVersion` is a
    /// version of the whole store (a list, a bookmark).
    fn walk(&mut self, v: &Value, store_version: bool, in_message: bool) -> Value {
        match v {
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, x) in m {
                    let nx = match (k.as_str(), x) {
                        ("managedFields", _) => continue,
                        ("metadata", Value::Object(meta)) => {
                            let mut o = Map::new();
                            for (mk, mx) in meta {
                                let nmx = match (mk.as_str(), mx) {
                                    ("managedFields", _) => continue,
                                    ("resourceVersion", Value::String(s)) if is_version(s) => {
                                        let kind = if store_version {
                                            Kind::ListRv
                                        } else {
                                            Kind::Rv
                                        };
                                        Value::String(self.number(kind, s))
                                    }
                                    ("continue", Value::String(s)) if !s.is_empty() => {
                                        Value::String(self.number(Kind::Continue, s))
                                    }
                                    ("uid", Value::String(s)) if !s.is_empty() => {
                                        Value::String(self.number(Kind::Uid, s))
                                    }
                                    _ => self.walk(mx, false, false),
                                };
                                o.insert(mk.clone(), nmx);
                            }
                            Value::Object(o)
                        }
                        ("uid", Value::String(s)) if !s.is_empty() => {
                            Value::String(self.number(Kind::Uid, s))
                        }
                        ("resourceVersion", Value::String(s)) if is_version(s) => {
                            Value::String(self.number(Kind::Rv, s))
                        }
                        ("items", Value::Array(items)) => {
                            Value::Array(items.iter().map(|i| self.walk(i, false, false)).collect())
                        }
                        ("message", _) => self.walk(x, false, true),
                        // A Table's cells: an age depends on when it was asked.
                        ("cells", Value::Array(cells)) => Value::Array(
                            cells
                                .iter()
                                .map(|c| match c {
                                    Value::String(s) if age_re().is_match(s) => json!("<age>"),
                                    other => self.walk(other, false, false),
                                })
                                .collect(),
                        ),
                        _ => self.walk(x, false, in_message),
                    };
                    out.insert(k.clone(), nx);
                }
                Value::Object(out)
            }
            Value::Array(a) => {
                Value::Array(a.iter().map(|x| self.walk(x, false, in_message)).collect())
            }
            Value::String(s) => Value::String(self.string(s, in_message)),
            other => other.clone(),
        }
    }

    fn string(&mut self, s: &str, in_message: bool) -> String {
        if time_re().is_match(s) {
            return "<time>".into();
        }
        if service_ip_re().is_match(s) {
            return "<service-ip>".into();
        }
        for kind in [Kind::Uid, Kind::Name, Kind::Continue] {
            if let Some(n) = self.seen.get(&(kind, s.to_string())) {
                return format!("<{}:{n}>", kind.tag());
            }
        }
        let mut out = s.to_string();
        // Inside a longer string (a message, a path): known uids and names.
        let mut known: Vec<(String, String)> = self
            .seen
            .iter()
            .filter(|((k, v), _)| matches!(k, Kind::Uid | Kind::Name) && v.len() >= 6)
            .map(|((k, v), n)| (v.clone(), format!("<{}:{n}>", k.tag())))
            .collect();
        known.sort_by(|a, b| b.0.len().cmp(&a.0.len()));
        for (v, p) in known {
            if out.contains(&v) {
                out = out.replace(&v, &p);
            }
        }
        if in_message {
            out = self.versions_in_message(&out);
        }
        out
    }

    /// Known versions standing as whole numbers in a message; a version
    /// in a message that is not known yet is numbered as the store's
    /// (`too old resource version: 5 (73)`).
    fn versions_in_message(&mut self, s: &str) -> String {
        static RE: OnceLock<Regex> = OnceLock::new();
        let re = RE.get_or_init(|| Regex::new(r"\b\d+\b").unwrap());
        let versionish = s.contains("esource version")
            || s.contains("ResourceVersion")
            || s.contains("resourceVersion");
        if !versionish {
            return s.to_string();
        }
        let mut out = String::new();
        let mut last = 0;
        for m in re.find_iter(s) {
            out.push_str(&s[last..m.start()]);
            let t = m.as_str();
            let rep = if let Some(n) = self.seen.get(&(Kind::Rv, t.to_string())) {
                format!("<rv:{n}>")
            } else if let Some(n) = self.seen.get(&(Kind::ListRv, t.to_string())) {
                format!("<lrv:{n}>")
            } else if t.len() > 1 || t != "0" {
                // Codes and counts in such messages are not versions: only
                // what follows "version" words is.
                let before = &s[..m.start()];
                if before.ends_with("version: ")
                    || before.ends_with("meta: ")
                    || before.ends_with("precondition: ")
                    || before.ends_with('(')
                {
                    self.number(Kind::ListRv, t).to_string()
                } else {
                    t.to_string()
                }
            } else {
                t.to_string()
            };
            out.push_str(&rep);
            last = m.end();
        }
        out.push_str(&s[last..]);
        out
    }
}

fn is_version(s: &str) -> bool {
    !s.is_empty() && s != "0" && s.bytes().all(|b| b.is_ascii_digit())
}

fn is_list(v: &Value) -> bool {
    v.get("items").is_some_and(Value::is_array)
        || v["kind"].as_str().is_some_and(|k| k.ends_with("List"))
        || v["kind"] == "Table"
}
