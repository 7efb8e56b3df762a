//! Kubernetes protobuf back to its JSON form, for any message of
//! [`super::schema`]: the inverse of [`super::write`], with Go's JSON
//! forms for its own marshallers and embedded structs flattened into
//! their parent.
//!
//! Go's generated marshallers write every non-pointer field, zero or not;
//! the JSON read here has them all (`"nodeName": ""`), where Go's JSON
//! would leave the `omitempty` ones out. Both decode to the same Go value.

use super::schema::{special, Label, Special, Ty, MESSAGES};
use serde_json::{json, Map, Value};
use std::fmt;

/// Why bytes are not a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadError(pub String);

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(what: impl Into<String>) -> Result<T, ReadError> {
    Err(ReadError(what.into()))
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, ReadError> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let Some((&c, rest)) = self.b.split_first() else {
                return err("a varint runs past the end");
            };
            self.b = rest;
            n |= u64::from(c & 0x7f) << shift;
            if c < 0x80 {
                return Ok(n);
            }
        }
        err("a varint is longer than 10 bytes")
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], ReadError> {
        if n > self.b.len() {
            return err("a field runs past the end");
        }
        let (a, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(a)
    }
}

/// One field's raw value.
enum Raw<'a> {
    Varint(u64),
    Fixed64([u8; 8]),
    Fixed32,
    Bytes(&'a [u8]),
}

/// The fields of a message, in order.
fn fields(b: &[u8]) -> Result<Vec<(u32, Raw<'_>)>, ReadError> {
    let mut r = Reader { b };
    let mut out = Vec::new();
    while !r.b.is_empty() {
        let k = r.varint()?;
        let number = (k >> 3) as u32;
        let raw = match k & 7 {
            0 => Raw::Varint(r.varint()?),
            1 => Raw::Fixed64(r.take(8)?.try_into().expect("8 bytes")),
            2 => {
                let n = r.varint()? as usize;
                Raw::Bytes(r.take(n)?)
            }
            5 => {
                r.take(4)?;
                Raw::Fixed32
            }
            w => {
                return err(format!(
                    "field {number} has wire type {w}, which Kubernetes never writes"
                ))
            }
        };
        out.push((number, raw));
    }
    Ok(out)
}

/// Message `msg` of `b` as JSON.
pub(crate) fn message(msg: usize, b: &[u8]) -> Result<Value, ReadError> {
    match special(msg) {
        Special::None => {}
        s => return read_special(s, msg, b),
    }
    let desc = &MESSAGES[msg];
    let mut obj = Map::new();
    for (number, raw) in fields(b)? {
        // A field this version does not know: Go skips it too.
        let Some(f) = desc.fields.iter().find(|f| f.number == number) else {
            continue;
        };
        let name = f.json;
        match f.label {
            Label::Optional if f.inline => {
                let Ty::Message(m) = f.ty else { continue };
                let Raw::Bytes(b) = raw else {
                    return err(format!("{}.{} is not a message", desc.name, f.name));
                };
                if let Value::Object(inner) = message(m, b)? {
                    obj.extend(inner);
                }
            }
            Label::Optional => {
                obj.insert(name.to_string(), one(f.ty, raw, desc.name, f.name)?);
            }
            Label::Repeated => {
                let v = one(f.ty, raw, desc.name, f.name)?;
                match obj.entry(name).or_insert_with(|| json!([])) {
                    Value::Array(a) => a.push(v),
                    _ => unreachable!("a repeated field is an array"),
                }
            }
            Label::Map => {
                let Raw::Bytes(entry) = raw else {
                    return err(format!("{}.{} is not a map entry", desc.name, f.name));
                };
                let (mut k, mut v) = (String::new(), None);
                for (n, raw) in fields(entry)? {
                    match (n, raw) {
                        (1, Raw::Bytes(s)) => k = String::from_utf8_lossy(s).into_owned(),
                        (2, raw) => v = Some(one(f.ty, raw, desc.name, f.name)?),
                        _ => {}
                    }
                }
                let v = v.unwrap_or_else(|| zero(f.ty));
                match obj.entry(name).or_insert_with(|| json!({})) {
                    Value::Object(m) => {
                        m.insert(k, v);
                    }
                    _ => unreachable!("a map field is an object"),
                }
            }
        }
    }
    Ok(Value::Object(obj))
}

fn zero(ty: Ty) -> Value {
    match ty {
        Ty::String | Ty::Bytes => json!(""),
        Ty::Int32 | Ty::Int64 => json!(0),
        Ty::Bool => json!(false),
        Ty::Double => json!(0.0),
        Ty::Message(m) => message(m, b"").unwrap_or(Value::Null),
    }
}

fn one(ty: Ty, raw: Raw<'_>, msg: &str, field: &str) -> Result<Value, ReadError> {
    use base64::Engine as _;
    Ok(match (ty, raw) {
        (Ty::String, Raw::Bytes(b)) => Value::String(String::from_utf8_lossy(b).into_owned()),
        (Ty::Bytes, Raw::Bytes(b)) => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(b))
        }
        (Ty::Int32, Raw::Varint(n)) => json!(n as i64 as i32),
        (Ty::Int64, Raw::Varint(n)) => json!(n as i64),
        (Ty::Bool, Raw::Varint(n)) => json!(n != 0),
        (Ty::Double, Raw::Fixed64(b)) => json!(f64::from_le_bytes(b)),
        (Ty::Message(m), Raw::Bytes(b)) => message(m, b)?,
        _ => return err(format!("{msg}.{field} has the wrong wire type")),
    })
}

fn read_special(s: Special, msg: usize, b: &[u8]) -> Result<Value, ReadError> {
    let fs = fields(b)?;
    let bytes = |n: u32| {
        fs.iter().find_map(|(k, r)| match r {
            Raw::Bytes(b) if *k == n => Some(*b),
            _ => None,
        })
    };
    let int = |n: u32| {
        fs.iter()
            .find_map(|(k, r)| match r {
                Raw::Varint(v) if *k == n => Some(*v as i64),
                _ => None,
            })
            .unwrap_or(0)
    };
    let field_ty = |n: u32| {
        MESSAGES[msg]
            .fields
            .iter()
            .find(|f| f.number == n)
            .map(|f| f.ty)
            .expect("the wrappers have their fields")
    };
    Ok(match s {
        Special::None => unreachable!("not special"),
        Special::Quantity => json!(String::from_utf8_lossy(bytes(1).unwrap_or(b""))),
        // Go writes a zero `metav1.Time` of a struct (not a pointer) as
        // an empty message, and reads an empty one as the zero time, which
        // its JSON prints as null (an explicit 0 is 1970).
        Special::Time | Special::MicroTime if b.is_empty() => Value::Null,
        Special::Time | Special::MicroTime => {
            let t = chrono::DateTime::from_timestamp(int(1), int(2) as u32)
                .ok_or_else(|| ReadError("a time out of range".into()))?;
            let format = if s == Special::Time {
                "%Y-%m-%dT%H:%M:%SZ"
            } else {
                "%Y-%m-%dT%H:%M:%S%.6fZ"
            };
            json!(t.format(format).to_string())
        }
        Special::Duration => json!(go_duration_string(int(1))),
        Special::IntOrString => {
            if int(1) == 1 {
                json!(String::from_utf8_lossy(bytes(3).unwrap_or(b"")))
            } else {
                json!(int(2) as i32)
            }
        }
        Special::RawJson => match bytes(1) {
            None | Some(b"") => Value::Null,
            Some(raw) => serde_json::from_slice(raw)
                .map_err(|e| ReadError(format!("a raw JSON field is not JSON: {e}")))?,
        },
        Special::Items => Value::Array(
            fs.iter()
                .filter_map(|(k, r)| match r {
                    Raw::Bytes(b) if *k == 1 => Some(json!(String::from_utf8_lossy(b))),
                    _ => None,
                })
                .collect(),
        ),
        Special::SchemaOrBool => match (bytes(2), field_ty(2)) {
            (Some(b), Ty::Message(m)) => message(m, b)?,
            _ => json!(int(1) != 0),
        },
        Special::SchemaOrArray | Special::SchemaOrStringArray => {
            let Ty::Message(m) = field_ty(1) else {
                unreachable!("a schema")
            };
            match bytes(1) {
                Some(b) => message(m, b)?,
                None => {
                    let ty = field_ty(2);
                    let mut items = Vec::new();
                    for (k, r) in fs {
                        if k == 2 {
                            items.push(one(ty, r, MESSAGES[msg].name, "items")?);
                        }
                    }
                    Value::Array(items)
                }
            }
        }
    })
}

/// Go's `time.Duration.String()`.
pub(crate) fn go_duration_string(ns: i64) -> String {
    if ns == 0 {
        return "0s".into();
    }
    let neg = ns < 0;
    let u = ns.unsigned_abs();
    let sign = if neg { "-" } else { "" };
    if u < 1_000_000_000 {
        // Sub-second: the largest unit that keeps an integer part.
        let (unit, div) = if u < 1_000 {
            ("ns", 1)
        } else if u < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        return format!("{sign}{}{unit}", fraction(u, div));
    }
    let secs = u / 1_000_000_000;
    let frac = u % 1_000_000_000;
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    let mut out = String::from(sign);
    if h > 0 {
        out += &format!("{h}h");
    }
    if h > 0 || m > 0 {
        out += &format!("{m}m");
    }
    out += &fraction(s * 1_000_000_000 + frac, 1_000_000_000);
    out.push('s');
    out
}

/// `n / div` with its fraction's trailing zeros dropped.
fn fraction(n: u64, div: u64) -> String {
    let (i, f) = (n / div, n % div);
    if f == 0 {
        return i.to_string();
    }
    let width = div.ilog10() as usize;
    let f = format!("{f:0width$}");
    format!("{i}.{}", f.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_go_prints_them() {
        for (ns, s) in [
            (0, "0s"),
            (1_500_000_000, "1.5s"),
            (3_600_000_000_000, "1h0m0s"),
            (90_000_000_000, "1m30s"),
            (2_000_000, "2ms"),
            (-5_000_000_000, "-5s"),
        ] {
            assert_eq!(go_duration_string(ns), s);
            assert_eq!(
                crate::server::go_duration(s).unwrap(),
                i128::from(ns),
                "{s}"
            );
        }
    }
}

#[cfg(test)]
mod round_trip {
    use super::super::{schema, write};
    use serde_json::json;

    fn back(name: &str, v: &serde_json::Value) -> serde_json::Value {
        let m = schema::message(name).unwrap_or_else(|| panic!("{name}"));
        super::message(m, &write::message(m, v)).unwrap()
    }

    #[test]
    fn go_s_own_json_forms_survive_protobuf() {
        let pod = json!({
            "metadata": {"name": "p", "creationTimestamp": "2024-05-06T07:08:09Z",
                "managedFields": [{"manager": "m", "operation": "Apply",
                    "time": "2024-05-06T07:08:09Z", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:x": {}}}}]},
            "spec": {"containers": [{"name": "c",
                "resources": {"limits": {"cpu": "1500m", "nvidia.com/gpu": "1"}},
                "readinessProbe": {"tcpSocket": {"port": 8080}},
                "livenessProbe": {"httpGet": {"port": "web", "path": "/h"}},
                "envFrom": [{"configMapRef": {"name": "cm"}}]}],
                "overhead": {"memory": "64Mi"}},
        });
        assert_eq!(back("k8s.io.api.core.v1.Pod", &pod), pod);
        let lease = json!({"spec": {"renewTime": "2024-05-06T07:08:09.123456Z", "leaseDurationSeconds": 15}});
        assert_eq!(back("k8s.io.api.coordination.v1.Lease", &lease), lease);
        let rev = json!({"revision": 3, "data": {"any": ["json", 1, null]}});
        assert_eq!(back("k8s.io.api.apps.v1.ControllerRevision", &rev), rev);
        let props = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
            "additionalProperties": false, "$ref": "#/r",
            "items": [{"type": "string"}], "default": {"a": 1},
            "properties": {"n": {"type": "integer", "x-kubernetes-int-or-string": true,
                "enum": [1, "two"]}}});
        assert_eq!(
            back(
                "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps",
                &props
            ),
            props
        );
        let secret = json!({"data": {"k": "aGVsbG8="}, "type": "Opaque"});
        assert_eq!(back("k8s.io.api.core.v1.Secret", &secret), secret);
        let status = json!({"details": {"retryAfterSeconds": 2}, "code": 429, "status": "Failure"});
        assert_eq!(
            back("k8s.io.apimachinery.pkg.apis.meta.v1.Status", &status),
            status
        );
    }

    #[test]
    fn fields_whose_proto_name_is_not_their_json_name_survive() {
        // `protobuf:"…,name=Webhooks"` beside `json:"webhooks"`: the
        // proto name, read as a JSON key, would drop them.
        let hooks = json!({"metadata": {"name": "w"}, "webhooks": [{"name": "a.b.c",
            "clientConfig": {"url": "https://x"}, "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "matchConditions": [{"name": "m", "expression": "true"}]}]});
        for kind in [
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
        ] {
            let name = format!("k8s.io.api.admissionregistration.v1.{kind}");
            assert_eq!(back(&name, &hooks), hooks, "{kind}");
        }
        let policy = json!({"metadata": {"name": "p"}, "spec": {
            "validations": [{"expression": "object.spec.replicas < 5", "message": "m"}],
            "variables": [{"name": "v", "expression": "1"}]}});
        assert_eq!(
            back(
                "k8s.io.api.admissionregistration.v1.ValidatingAdmissionPolicy",
                &policy
            ),
            policy
        );
        let token = json!({"spec": {"audiences": ["a"],
            "boundObjectRef": {"kind": "Pod", "name": "p", "uid": "u-1"}}});
        assert_eq!(
            back("k8s.io.api.authentication.v1.TokenRequest", &token),
            token
        );
    }
}
