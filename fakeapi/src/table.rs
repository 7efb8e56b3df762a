//! Server-side printing: `meta.k8s.io/v1 Table` for `kubectl get`.
//!
//! Built-in kinds print kubectl's usual columns; a custom resource prints
//! its name and its CRD's `additionalPrinterColumns` (its age if it has
//! none), read with a simple JSONPath (`.status.phase`, `.spec.items[0].x`).

use crate::crd::Column;
use crate::registry::Served;
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
        ("", "configmaps") => vec![("Name", 0), ("Data", 0), ("Age", 0)],
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => vec![
            ("Name", 0),
            ("PriorityLevel", 0),
            ("MatchingPrecedence", 0),
            ("DistinguisherMethod", 0),
            ("Age", 0),
            ("MissingPL", 0),
        ],
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => vec![
            ("Name", 0),
            ("Type", 0),
            ("NominalConcurrencyShares", 0),
            ("Queues", 0),
            ("HandSize", 0),
            ("QueueLengthLimit", 0),
            ("Age", 0),
        ],
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
                json!(restarts.to_string()),
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
        ("", "configmaps") => {
            let keys = |f: &str| o.get(f).and_then(Value::as_object).map_or(0, |m| m.len());
            vec![
                json!(name),
                json!(keys("data") + keys("binaryData")),
                json!(created),
            ]
        }
        ("flowcontrol.apiserver.k8s.io", "flowschemas") => {
            let dangling = o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Dangling"))
                .map_or("?", |c| s(c, "/status"));
            let method = s(o, "/spec/distinguisherMethod/type");
            vec![
                json!(name),
                json!(s(o, "/spec/priorityLevelConfiguration/name")),
                o.pointer("/spec/matchingPrecedence")
                    .cloned()
                    .unwrap_or(json!(0)),
                json!(if o
                    .pointer("/spec/distinguisherMethod")
                    .is_some_and(|d| !d.is_null())
                {
                    method
                } else {
                    "<none>"
                }),
                json!(created),
                json!(dangling),
            ]
        }
        ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => {
            let none = || json!("<none>");
            let limited = o.pointer("/spec/limited").filter(|l| !l.is_null());
            let queuing = limited
                .and_then(|l| l.pointer("/limitResponse/queuing"))
                .filter(|q| !q.is_null());
            let of =
                |v: Option<&Value>, k: &str| v.and_then(|v| v.get(k)).cloned().unwrap_or_else(none);
            vec![
                json!(name),
                json!(s(o, "/spec/type")),
                of(limited, "nominalConcurrencyShares"),
                of(queuing, "queues"),
                of(queuing, "handSize"),
                of(queuing, "queueLengthLimit"),
                json!(created),
            ]
        }
        _ => vec![json!(name), json!(created)],
    }
}

/// A value at a printer column's JSONPath (`.a.b`, `.a[0].b`, `.a['x.y']`).
fn json_path<'a>(o: &'a Value, path: &str) -> Option<&'a Value> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut cur = o;
    let mut rest = path.trim_start_matches('$');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end > 0 {
                cur = cur.get(&r[..end])?;
            }
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let key = &r[..end];
            cur = match key.parse::<usize>() {
                Ok(i) => cur.get(i)?,
                Err(_) => cur.get(key.trim_matches(|c| c == '\'' || c == '"'))?,
            };
            rest = &r[end + 1..];
        } else {
            return None;
        }
    }
    Some(cur)
}

/// A custom column's cell, as the real server's table convertor makes it.
fn custom_cell(col: &Column, o: &Value, now: DateTime<Utc>) -> Value {
    let Some(v) = json_path(o, &col.json_path).filter(|v| !v.is_null()) else {
        return Value::Null;
    };
    match (col.ty.as_str(), v) {
        ("string", Value::String(s)) => json!(s),
        ("string", other) => json!(other.to_string()),
        ("integer", Value::Number(n)) => n
            .as_i64()
            .map(|i| json!(i))
            .or_else(|| n.as_f64().map(|f| json!(f as i64)))
            .unwrap_or(Value::Null),
        ("number", Value::Number(n)) => n.as_f64().map(|f| json!(f)).unwrap_or(Value::Null),
        ("boolean", Value::Bool(b)) => json!(b),
        ("date", Value::String(s)) => json!(age(s, now)),
        _ => Value::Null,
    }
}

/// A Table of `objects`; `with_columns` false leaves out the column
/// definitions (every watch event after the first): `null`, as Go writes
/// the nil list kube-apiserver's printer leaves there.
pub(crate) fn table(
    served: &Served,
    objects: &[Arc<Value>],
    now: DateTime<Utc>,
    with_columns: bool,
    include: IncludeObject,
) -> Value {
    let info = served.info;
    if let Some(cv) = &served.custom {
        let cols: Vec<Value> = if with_columns {
            std::iter::once(json!({"name": "Name", "type": "string", "format": "name",
                "description": "Name must be unique within a namespace.", "priority": 0}))
            .chain(cv.def.columns.iter().map(|c| {
                let description = if c.description.is_empty() {
                    format!(
                        "Custom resource definition column (in JSONPath format): {}",
                        c.json_path
                    )
                } else {
                    c.description.clone()
                };
                json!({"name": c.name, "type": c.ty, "format": c.format,
                    "description": description, "priority": c.priority})
            }))
            .collect()
        } else {
            Vec::new()
        };
        let rows = objects
            .iter()
            .map(|o| {
                let cells: Vec<Value> = std::iter::once(json!(s(o, "/metadata/name")))
                    .chain(cv.def.columns.iter().map(|c| custom_cell(c, o, now)))
                    .collect();
                row(cells, o, include)
            })
            .collect();
        return assemble(cols, rows, with_columns);
    }
    let cols: Vec<Value> = if with_columns {
        columns(info)
            .into_iter()
            .map(|(name, priority)| {
                json!({
                    "name": name,
                    "type": "string",
                    "format": if name == "Name" { "name" } else { "" },
                    "description": "",
                    "priority": priority,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut objects: Vec<&Arc<Value>> = objects.iter().collect();
    if (info.group, info.plural) == ("flowcontrol.apiserver.k8s.io", "flowschemas") {
        // In matching order, as kube-apiserver's printer sorts them.
        let key = |o: &Value| {
            (
                o.pointer("/spec/matchingPrecedence")
                    .and_then(Value::as_i64)
                    .unwrap_or(0),
                s(o, "/metadata/name").to_string(),
            )
        };
        objects.sort_by_key(|o| key(o));
    }
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| row(cells(info, o, now), o, include))
        .collect();
    assemble(cols, rows, with_columns)
}

fn row(cells: Vec<Value>, o: &Value, include: IncludeObject) -> Value {
    let mut row = json!({"cells": cells});
    match include {
        IncludeObject::None => {}
        IncludeObject::Object => row["object"] = o.clone(),
        IncludeObject::Metadata => {
            row["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": o.get("metadata").cloned().unwrap_or(json!({})),
            })
        }
    }
    row
}

fn assemble(cols: Vec<Value>, rows: Vec<Value>, with_columns: bool) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": if with_columns { Value::Array(cols) } else { Value::Null },
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

    #[test]
    fn json_paths_of_printer_columns() {
        let o = json!({"status": {"phase": "Running", "xs": [{"n": 1}]}, "a": {"b.c": 2}});
        assert_eq!(json_path(&o, ".status.phase"), Some(&json!("Running")));
        assert_eq!(json_path(&o, ".status.xs[0].n"), Some(&json!(1)));
        assert_eq!(json_path(&o, ".a['b.c']"), Some(&json!(2)));
        assert_eq!(json_path(&o, ".status.missing"), None);
    }
}
