//! A case: a sequence of requests (and watches) that means the same thing
//! on any API server, written by hand (`cases/*.yaml`) or recorded from a
//! real client (`recorded/*.json`).
//!
//! A step is one of
//!
//! ```yaml
//! - {req: "POST /api/v1/namespaces/$ns/pods", as: p, body: {...}}          # a request
//! - {req: "PATCH /api/v1/namespaces/$ns/pods/a", type: merge, body: {...}}  # content type
//! - {req: "POST /apis/x/v1/y", type: yaml, text: "apiVersion: ..."}       # a raw body
//! - {watch: w, req: "GET /api/v1/namespaces/$ns/pods?watch=1&timeoutSeconds=2"}
//! - {end: w}                                                               # read w to its end
//! - {req: "GET /apis/x.example.com/v1/namespaces/$ns/ys", until: 200}      # repeated until 200
//! ```
//!
//! In paths and bodies, `$ns` is the case's namespace and `{{label:/json/pointer}}`
//! the value at that pointer in the answer to the step labelled `label` on the
//! same server (a uid, a resourceVersion, a generated name). Recorded cases
//! use `{{@rv:3}}`, `{{@uid:1}}`, `{{@name:2}}`, `{{@lrv:1}}`, `{{@continue:1}}`:
//! this server's value of what the normaliser called so (see `normalise.rs`).
//! A watch that the client closed itself has `{end: w, events: N}`: its end
//! comes once N events have arrived (or after a short wait). Recorded cases
//! also use `{{@wN#K:/object/metadata/resourceVersion}}`: a value of the K-th
//! event (progress bookmarks not counted) of the open watch `wN`, waited for;
//! and `{file: crds/volcano/NAME.yaml}`, a body read from the Go programs'
//! directory (a controller's CRD, see `crd_program`).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;

/// One step of a case, as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// `METHOD /path?query`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub req: Option<String>,
    /// A label for `{{label:/pointer}}` in later steps.
    #[serde(default, rename = "as", skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The body's content type: `json` (default), `merge`, `strategic`,
    /// `jsonpatch`, `apply` (YAML), `apply-json`, `yaml`, or a media type.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// `Accept`, when not `application/json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept: Option<String>,
    /// A JSON body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// A body sent as it is written (YAML).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A binary body (a recorded client's protobuf), base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base64: Option<String>,
    /// A JSON body read from a YAML file of the Go programs' directory
    /// (`crds/volcano/...`: a CRD `schedulers/build-go.sh crds-volcano`
    /// copies from its module, too large to keep in a case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Opens a watch with this id (`req` is its GET).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<String>,
    /// Reads watch `end` to its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// For a watch the client closed: how many events it had read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<usize>,
    /// Sent again (every 100 ms, for at most a minute) until the answer has
    /// this status: what a server does asynchronously (a real one serves a
    /// custom kind once its CRD is established) is waited for, and only
    /// the last answer counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<u16>,
    /// `status`: only the answer's status and content type are compared.
    /// For documents that describe all a server serves (discovery,
    /// OpenAPI), which a real client fetched in a recording: fakeapi
    /// serves a subset of kube-apiserver's kinds, and the harness's own
    /// cases compare the documents of the kinds it serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compare: Option<String>,
}

impl Step {
    /// What the step does, for reports: `POST /api/...`, `end w`.
    pub fn describe(&self) -> String {
        match (&self.req, &self.end) {
            (Some(r), _) => match &self.watch {
                Some(w) => format!("watch {w}: {r}"),
                None => r.clone(),
            },
            (None, Some(w)) => format!("end of watch {w}"),
            _ => "(empty step)".into(),
        }
    }

    pub fn media_type(&self) -> Option<String> {
        let t = self.content_type.as_deref()?;
        Some(
            match t {
                "json" => "application/json",
                "merge" => "application/merge-patch+json",
                "strategic" => "application/strategic-merge-patch+json",
                "jsonpatch" => "application/json-patch+json",
                "apply" => "application/apply-patch+yaml",
                "apply-json" => "application/apply-patch+json",
                "yaml" => "application/yaml",
                other => other,
            }
            .to_string(),
        )
    }
}

/// A case file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    /// What it checks, in a sentence.
    #[serde(default)]
    pub about: String,
    pub steps: Vec<Step>,
}

impl Case {
    pub fn parse_yaml(name: &str, text: &str) -> Result<Case, String> {
        let case: Case = serde_yaml::from_str(text).map_err(|e| format!("{name}: {e}"))?;
        case.check().map_err(|e| format!("{name}: {e}"))?;
        Ok(case)
    }

    /// Steps that make sense: each is a request or an end, watches opened
    /// once and ended once, labels and references known before use.
    pub fn check(&self) -> Result<(), String> {
        let mut open: HashMap<&str, usize> = HashMap::new();
        let mut labels: Vec<&str> = Vec::new();
        for (i, s) in self.steps.iter().enumerate() {
            let n = i + 1;
            match (&s.req, &s.end) {
                (Some(r), None) => {
                    let mut parts = r.splitn(2, ' ');
                    let method = parts.next().unwrap_or("");
                    let path = parts.next().unwrap_or("");
                    if !["GET", "POST", "PUT", "PATCH", "DELETE"].contains(&method)
                        || !path.starts_with('/')
                    {
                        return Err(format!("step {n}: `req` must be `METHOD /path`, not {r:?}"));
                    }
                    for reference in references(r).chain(
                        s.body
                            .iter()
                            .flat_map(|b| references_in(b).into_iter())
                            .collect::<Vec<_>>(),
                    ) {
                        if !reference.starts_with('@') && !labels.contains(&reference.as_str()) {
                            return Err(format!(
                                "step {n}: {{{{{reference}:...}}}} refers to no earlier step"
                            ));
                        }
                    }
                    if let Some(w) = &s.watch {
                        if open.insert(w, n).is_some() {
                            return Err(format!("step {n}: watch {w} is already open"));
                        }
                    }
                    if s.compare.as_deref().is_some_and(|c| c != "status") {
                        return Err(format!("step {n}: `compare` can only be `status`"));
                    }
                    if [
                        s.body.is_some(),
                        s.text.is_some(),
                        s.base64.is_some(),
                        s.file.is_some(),
                    ]
                    .iter()
                    .filter(|x| **x)
                    .count()
                        > 1
                    {
                        return Err(format!(
                            "step {n}: one of `body`, `text`, `base64` or `file`"
                        ));
                    }
                    if let Some(f) = &s.file {
                        if crd_program(f).is_none() {
                            return Err(format!(
                                "step {n}: `file` is `crds/<volcano|kueue|coscheduling>/NAME.yaml`, not {f:?}"
                            ));
                        }
                    }
                }
                (None, Some(w)) => {
                    if open.remove(w.as_str()).is_none() {
                        return Err(format!("step {n}: watch {w} is not open"));
                    }
                }
                _ => return Err(format!("step {n}: a step is a `req` or an `end`")),
            }
            if let Some(l) = &s.label {
                labels.push(l);
            }
        }
        if let Some((w, n)) = open.iter().next() {
            return Err(format!("watch {w} (step {n}) never ends"));
        }
        Ok(())
    }
}

/// The `schedulers/build-go.sh` program that copies a step's `file`.
pub fn crd_program(file: &str) -> Option<&'static str> {
    let mut parts = file.split('/');
    let (Some("crds"), Some(set), Some(name), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    if !name.ends_with(".yaml") {
        return None;
    }
    match set {
        "volcano" => Some("crds-volcano"),
        "kueue" => Some("crds-kueue"),
        "coscheduling" => Some("crds-coscheduling"),
        _ => None,
    }
}

/// The labels a string refers to with `{{label:...}}`.
fn references(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split("{{").skip(1).filter_map(|rest| {
        let inner = rest.split("}}").next()?;
        Some(inner.split(':').next()?.to_string())
    })
}

fn references_in(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    match v {
        Value::String(s) => out.extend(references(s)),
        Value::Array(a) => a.iter().for_each(|x| out.extend(references_in(x))),
        Value::Object(m) => m.values().for_each(|x| out.extend(references_in(x))),
        _ => {}
    }
    out
}

/// Replaces `$ns` and every `{{...}}` in `s` with `lookup`'s answer (a
/// string as it is, anything else as JSON).
pub fn render_str(
    s: &str,
    ns: &str,
    lookup: &dyn Fn(&str) -> Result<Value, String>,
) -> Result<String, String> {
    let s = s.replace("$ns", ns);
    let mut out = String::with_capacity(s.len());
    let mut rest = s.as_str();
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("unclosed {{{{ in {s:?}"))?;
        match lookup(&after[..end])? {
            Value::String(v) => out.push_str(&v),
            other => out.push_str(&other.to_string()),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// [`render_str`] on every string of a JSON value; a string that is one
/// `{{...}}` and nothing else becomes the value it names (an object too).
pub fn render_value(
    v: &Value,
    ns: &str,
    lookup: &dyn Fn(&str) -> Result<Value, String>,
) -> Result<Value, String> {
    Ok(match v {
        Value::String(s)
            if s.starts_with("{{") && s.ends_with("}}") && s[2..].find("{{").is_none() =>
        {
            lookup(&s[2..s.len() - 2])?
        }
        Value::String(s) => Value::String(render_str(s, ns, lookup)?),
        Value::Array(a) => Value::Array(
            a.iter()
                .map(|x| render_value(x, ns, lookup))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| Ok((render_str(k, ns, lookup)?, render_value(x, ns, lookup)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}
