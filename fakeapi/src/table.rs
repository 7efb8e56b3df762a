//! Server-side printing: `meta.k8s.io/v1 Table` for `kubectl get`.

use crate::resources::ResourceInfo;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use std::sync::Arc;

/// What each row carries in `object` (the `includeObject` parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub(crate) fn parse(s: Option<&str>) -> Self {
        match s {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

fn s<'a>(v: &'a Value, ptr: &str) -> &'a str {
    v.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

fn or_none(x: &str) -> String {
    if x.is_empty() {
        "<none>".to_string()
    } else {
        x.to_string()
    }
}

/// `kubectl`'s short age: 42s, 5m10s, 3h, 12d.
pub(crate) fn age(ts: &str, now: DateTime<Utc>) -> String {
    let Ok(t) = DateTime::parse_from_rfc3339(ts) else {
        return "<unknown>".to_string();
    };
    let secs = (now - t.with_timezone(&Utc)).num_seconds().max(0);
    match secs {
        0..=119 => format!("{secs}s"),
        120..=599 => format!("{}m{}s", secs / 60, secs % 60),
        600..=10799 => format!("{}m", secs / 60),
        10800..=172799 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86400),
    }
}

fn columns(info: &ResourceInfo) -> Vec<(&'static str, u8)> {
    match (info.group, info.plural) {
        ("", "pods") => vec![
            ("Name", 0),
            ("Ready", 0),
            ("Status", 0),
            ("Restarts", 0),
            ("Age", 0),
            ("IP", 1),
            ("Node", 1),
            ("Nominated Node", 1),
            ("Readiness Gates", 1),
        ],
        ("", "nodes") => vec![
            ("Name", 0),
            ("Status", 0),
            ("Roles", 0),
            ("Age", 0),
            ("Version", 0),
            ("Internal-IP", 1),
            ("External-IP", 1),
            ("OS-Image", 1),
            ("Kernel-Version", 1),
            ("Container-Runtime", 1),
        ],
        ("", "namespaces") => vec![("Name", 0), ("Status", 0), ("Age", 0)],
        ("", "events") => vec![
            ("Last Seen", 0),
            ("Type", 0),
            ("Reason", 0),
            ("Object", 0),
            ("Message", 0),
        ],
        _ => vec![("Name", 0), ("Age", 0)],
    }
}

fn cells(info: &ResourceInfo, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = s(o, "/metadata/name");
    let created = age(s(o, "/metadata/creationTimestamp"), now);
    match (info.group, info.plural) {
        ("", "pods") => {
            let total = o
                .pointer("/spec/containers")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            let statuses = o
                .pointer("/status/containerStatuses")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let ready = statuses
                .iter()
                .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
                .count();
            let restarts: i64 = statuses
                .iter()
                .filter_map(|c| c.get("restartCount").and_then(Value::as_i64))
                .sum();
            let mut status = s(o, "/status/phase").to_string();
            if !s(o, "/status/reason").is_empty() {
                status = s(o, "/status/reason").to_string();
            }
            if !s(o, "/metadata/deletionTimestamp").is_empty() {
                status = "Terminating".to_string();
            }
            vec![
                json!(name),
                json!(format!("{ready}/{total}")),
                json!(status),
                json!(restarts),
                json!(created),
                json!(or_none(s(o, "/status/podIP"))),
                json!(or_none(s(o, "/spec/nodeName"))),
                json!(or_none(s(o, "/status/nominatedNodeName"))),
                json!("<none>"),
            ]
        }
        ("", "nodes") => {
            let ready = o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|cs| {
                    cs.iter()
                        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
                })
                .map(|c| c.get("status").and_then(Value::as_str) == Some("True"));
            let mut status = match ready {
                Some(true) => "Ready".to_string(),
                Some(false) => "NotReady".to_string(),
                None => "Unknown".to_string(),
            };
            if o.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
                status.push_str(",SchedulingDisabled");
            }
            let addr = |t: &str| {
                o.pointer("/status/addresses")
                    .and_then(Value::as_array)
                    .and_then(|a| {
                        a.iter()
                            .find(|x| x.get("type").and_then(Value::as_str) == Some(t))
                    })
                    .and_then(|x| x.get("address").and_then(Value::as_str))
                    .unwrap_or("")
                    .to_string()
            };
            vec![
                json!(name),
                json!(status),
                json!("<none>"),
                json!(created),
                json!(s(o, "/status/nodeInfo/kubeletVersion")),
                json!(or_none(&addr("InternalIP"))),
                json!(or_none(&addr("ExternalIP"))),
                json!(or_none(s(o, "/status/nodeInfo/osImage"))),
                json!(or_none(s(o, "/status/nodeInfo/kernelVersion"))),
                json!(or_none(s(o, "/status/nodeInfo/containerRuntimeVersion"))),
            ]
        }
        ("", "namespaces") => vec![json!(name), json!(s(o, "/status/phase")), json!(created)],
        ("", "events") => {
            let last = [
                "/lastTimestamp",
                "/eventTime",
                "/metadata/creationTimestamp",
            ]
            .iter()
            .map(|p| s(o, p))
            .find(|t| !t.is_empty())
            .unwrap_or("");
            vec![
                json!(age(last, now)),
                json!(s(o, "/type")),
                json!(s(o, "/reason")),
                json!(format!(
                    "{}/{}",
                    s(o, "/involvedObject/kind").to_lowercase(),
                    s(o, "/involvedObject/name")
                )),
                json!(s(o, "/message")),
            ]
        }
        _ => vec![json!(name), json!(created)],
    }
}

/// A Table of `objects`; `with_columns` false leaves out the column
/// definitions (every watch event after the first).
pub(crate) fn table(
    info: &ResourceInfo,
    objects: &[Arc<Value>],
    now: DateTime<Utc>,
    with_columns: bool,
    include: IncludeObject,
) -> Value {
    let cols: Vec<Value> = if with_columns {
        columns(info)
            .into_iter()
            .map(|(name, priority)| {
                json!({
                    "name": name,
                    "type": if name == "Restarts" { "integer" } else { "string" },
                    "format": if name == "Name" { "name" } else { "" },
                    "description": "",
                    "priority": priority,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut row = json!({"cells": cells(info, o, now)});
            match include {
                IncludeObject::None => {}
                IncludeObject::Object => row["object"] = (**o).clone(),
                IncludeObject::Metadata => {
                    row["object"] = json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": o.get("metadata").cloned().unwrap_or(json!({})),
                    })
                }
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": cols,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages() {
        let now = DateTime::parse_from_rfc3339("2024-01-01T01:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(age("2024-01-01T00:59:18Z", now), "42s");
        assert_eq!(age("2024-01-01T00:55:00Z", now), "5m0s");
        assert_eq!(age("2023-12-31T20:00:00Z", now), "5h");
        assert_eq!(age("garbage", now), "<unknown>");
    }
}
