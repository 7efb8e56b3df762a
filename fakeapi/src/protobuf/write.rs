//! Kubernetes JSON to protobuf, for any built-in kind, driven by the
//! message tables of [`super::schema`]: kube-apiserver's answers to a
//! client that asks for `application/vnd.kubernetes.protobuf`.
//!
//! Fields are written in number order, map entries by key, as Go's
//! generated marshallers write them. A field is written when its JSON key
//! is present and not null: what Go's JSON leaves out (`omitempty`)
//! decodes in Go to the same zero value as Go's protobuf writes for it.
//! The JSON forms of Go's own marshallers are read as Go reads them
//! ([`Special`]); keys no message field has are dropped, as Go's decoder
//! drops them.

use super::schema::{special, Label, Special, Ty, MESSAGES};
use serde_json::Value;

/// The protobuf of `v` as message `msg`.
pub(crate) fn message(msg: usize, v: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_message(msg, v, &mut out);
    out
}

pub(crate) fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

pub(crate) fn key(out: &mut Vec<u8>, number: u32, wire: u8) {
    varint(out, (u64::from(number) << 3) | u64::from(wire));
}

pub(crate) fn bytes_field(out: &mut Vec<u8>, number: u32, b: &[u8]) {
    key(out, number, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A submessage written by `f` into `out` after its key and length,
/// without an intermediate buffer: the length is written after the body,
/// which is then moved by the few bytes the length takes beyond one.
fn nested(out: &mut Vec<u8>, number: u32, f: impl FnOnce(&mut Vec<u8>)) {
    key(out, number, 2);
    let at = out.len();
    out.push(0);
    f(out);
    let len = out.len() - at - 1;
    if len < 0x80 {
        out[at] = len as u8;
        return;
    }
    let mut l = Vec::with_capacity(5);
    varint(&mut l, len as u64);
    out.splice(at..at + 1, l);
}

fn write_message(msg: usize, v: &Value, out: &mut Vec<u8>) {
    match special(msg) {
        Special::None => {}
        s => return write_special(s, msg, v, out),
    }
    let Value::Object(obj) = v else {
        return;
    };
    let desc = &MESSAGES[msg];
    for f in desc.fields {
        if f.inline {
            // Go embeds it: its fields are this object's.
            if let Ty::Message(m) = f.ty {
                nested(out, f.number, |out| write_message(m, v, out));
            }
            continue;
        }
        let name = f.json;
        let Some(value) = obj.get(name) else {
            continue;
        };
        write_field(f.number, f.label, f.ty, value, out);
    }
}

fn write_field(number: u32, label: Label, ty: Ty, v: &Value, out: &mut Vec<u8>) {
    match (label, v) {
        (_, Value::Null) => {}
        (Label::Repeated, Value::Array(items)) => {
            for x in items {
                // Go cannot hold a null in a list of structs or strings: it
                // reads it as the zero value.
                write_one(number, ty, x, out);
            }
        }
        (Label::Map, Value::Object(m)) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_unstable();
            for k in keys {
                nested(out, number, |out| {
                    bytes_field(out, 1, k.as_bytes());
                    write_one(2, ty, &m[k], out);
                });
            }
        }
        (Label::Optional, _) => write_one(number, ty, v, out),
        // A list or map in another form than JSON's: Go's decoder refuses
        // it, and the store never holds one.
        _ => {}
    }
}

/// One value, written even when zero (a present key).
fn write_one(number: u32, ty: Ty, v: &Value, out: &mut Vec<u8>) {
    match ty {
        Ty::String => match v {
            Value::String(s) => bytes_field(out, number, s.as_bytes()),
            Value::Null => bytes_field(out, number, b""),
            other => bytes_field(out, number, other.to_string().as_bytes()),
        },
        Ty::Bytes => {
            use base64::Engine as _;
            let s = v.as_str().unwrap_or("");
            match base64::engine::general_purpose::STANDARD.decode(s) {
                Ok(b) => bytes_field(out, number, &b),
                Err(_) => bytes_field(out, number, s.as_bytes()),
            }
        }
        Ty::Int32 | Ty::Int64 => {
            key(out, number, 0);
            varint(out, int(v) as u64);
        }
        Ty::Bool => {
            key(out, number, 0);
            varint(out, u64::from(v.as_bool().unwrap_or(false)));
        }
        Ty::Double => {
            key(out, number, 1);
            out.extend_from_slice(&v.as_f64().unwrap_or(0.0).to_le_bytes());
        }
        Ty::Message(m) => nested(out, number, |out| write_message(m, v, out)),
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_u64().map(|u| u as i64))
            .or_else(|| n.as_f64().map(|f| f as i64))
            .unwrap_or(0),
        Value::String(s) => s.parse().unwrap_or(0),
        Value::Bool(b) => i64::from(*b),
        _ => 0,
    }
}

fn write_special(s: Special, msg: usize, v: &Value, out: &mut Vec<u8>) {
    match (s, v) {
        (Special::Quantity, Value::String(q)) => bytes_field(out, 1, q.as_bytes()),
        (Special::Quantity, Value::Number(n)) => bytes_field(out, 1, n.to_string().as_bytes()),
        (Special::Time | Special::MicroTime, Value::String(t)) => {
            let Ok(t) = chrono::DateTime::parse_from_rfc3339(t) else {
                return;
            };
            // Go's metav1.Time keeps seconds only in protobuf, as in JSON.
            key(out, 1, 0);
            varint(out, t.timestamp() as u64);
            key(out, 2, 0);
            let nanos = match s {
                Special::MicroTime => t.timestamp_subsec_micros() * 1000,
                _ => 0,
            };
            varint(out, u64::from(nanos));
        }
        (Special::Duration, Value::String(d)) => {
            if let Ok(ns) = crate::server::go_duration(d) {
                key(out, 1, 0);
                varint(out, ns as i64 as u64);
            }
        }
        (Special::IntOrString, Value::Number(_)) => {
            key(out, 1, 0);
            varint(out, 0);
            key(out, 2, 0);
            varint(out, int(v) as i32 as i64 as u64);
            bytes_field(out, 3, b"");
        }
        (Special::IntOrString, Value::String(s)) => {
            key(out, 1, 0);
            varint(out, 1);
            key(out, 2, 0);
            varint(out, 0);
            bytes_field(out, 3, s.as_bytes());
        }
        (Special::RawJson, v) => {
            bytes_field(out, 1, &serde_json::to_vec(v).expect("a Value serializes"))
        }
        (Special::Items, Value::Array(items)) => {
            for x in items {
                write_one(1, Ty::String, x, out);
            }
        }
        (Special::SchemaOrBool, Value::Bool(b)) => {
            key(out, 1, 0);
            varint(out, u64::from(*b));
        }
        (Special::SchemaOrBool, Value::Object(_)) => {
            key(out, 1, 0);
            varint(out, 1);
            write_field(2, Label::Optional, schema_field(msg, 2), v, out);
        }
        (Special::SchemaOrArray | Special::SchemaOrStringArray, Value::Object(_)) => {
            write_field(1, Label::Optional, schema_field(msg, 1), v, out);
        }
        (Special::SchemaOrArray | Special::SchemaOrStringArray, Value::Array(_)) => {
            write_field(2, Label::Repeated, schema_field(msg, 2), v, out);
        }
        // Anything else is not a value of the type: Go's decoder refuses
        // it, and the store never holds one.
        _ => {}
    }
}

/// The type of field `number` of message `msg`.
fn schema_field(msg: usize, number: u32) -> Ty {
    MESSAGES[msg]
        .fields
        .iter()
        .find(|f| f.number == number)
        .map(|f| f.ty)
        .expect("the JSONSchemaProps wrappers have their fields")
}
