//! Answers in protobuf, as kube-apiserver writes them to a client whose
//! `Accept` asks for `application/vnd.kubernetes.protobuf` first: an object
//! (or list, or `Status`) is the magic `k8s\0` then a `runtime.Unknown`
//! naming its kind with the message in `raw`; a watch is a stream of
//! `metav1.WatchEvent` messages, each after its length (4 bytes, big
//! endian), whose object is such an enveloped object.
//!
//! Every built-in kind has its message (from [`super::schema`]); custom
//! resources have none, and answer JSON (see [`crate::negotiate`]).

use super::schema::{self, MESSAGES};
use super::{read, write, MAGIC};
use bytes::Bytes;
use serde_json::{json, Value};
use std::sync::OnceLock;

/// The content type of a protobuf watch stream.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

const META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.";

/// The message of `kind` in `api_version`: the group's own, or
/// apimachinery's for the kinds every group shares (`Status`,
/// `DeleteOptions`, `WatchEvent`).
fn message_of(api_version: &str, kind: &str) -> Option<usize> {
    schema::kind_message(api_version, kind).or_else(|| schema::message(&format!("{META}{kind}")))
}

/// Whether objects of `kind` in `api_version` have a protobuf form (every
/// built-in kind; not a custom resource, which the caller tells apart).
pub fn has_message(api_version: &str, kind: &str) -> bool {
    message_of(api_version, kind).is_some()
}

/// `raw` in kube-apiserver's envelope: the magic, then a `runtime.Unknown`
/// with `typeMeta`, `raw` and (empty) `contentEncoding` and `contentType`,
/// all four written as Go writes them.
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() + api_version.len() + kind.len() + 16);
    out.extend_from_slice(MAGIC);
    let mut tm = Vec::with_capacity(api_version.len() + kind.len() + 4);
    write::bytes_field(&mut tm, 1, api_version.as_bytes());
    write::bytes_field(&mut tm, 2, kind.as_bytes());
    write::bytes_field(&mut out, 1, &tm);
    write::bytes_field(&mut out, 2, raw);
    write::bytes_field(&mut out, 3, b"");
    write::bytes_field(&mut out, 4, b"");
    out
}

fn type_of(v: &Value) -> (&str, &str) {
    (
        v.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
        v.get("kind").and_then(Value::as_str).unwrap_or(""),
    )
}

/// An object's JSON in protobuf, enveloped, by its own `apiVersion` and
/// `kind`; `None` for a kind without a message.
///
/// ```
/// use serde_json::json;
/// let pod = json!({"apiVersion": "v1", "kind": "Pod",
///     "metadata": {"name": "a", "labels": {"x": "1"}},
///     "spec": {"nodeName": "n1", "containers": [{"name": "c",
///         "resources": {"requests": {"cpu": "100m"}}}]}});
/// let bytes = fakeapi::protobuf::encode(&pod).unwrap();
/// assert!(bytes.starts_with(b"k8s\0"));
/// let back = fakeapi::protobuf::decode_any(&bytes).unwrap();
/// assert_eq!(back["spec"]["nodeName"], "n1");
/// assert_eq!(back["spec"]["containers"][0]["resources"]["requests"]["cpu"], "100m");
/// assert_eq!(back["metadata"]["labels"], json!({"x": "1"}));
/// ```
pub fn encode(v: &Value) -> Option<Vec<u8>> {
    let (api_version, kind) = type_of(v);
    let msg = message_of(api_version, kind)?;
    Some(envelope(api_version, kind, &write::message(msg, v)))
}

/// An object's `meta.k8s.io/v1 PartialObjectMetadata`, enveloped: its
/// metadata only, for any resource (custom ones too).
pub(crate) fn encode_partial(v: &Value) -> Vec<u8> {
    let msg = schema::message(&format!("{META}PartialObjectMetadata")).expect("meta has it");
    envelope(
        "meta.k8s.io/v1",
        "PartialObjectMetadata",
        &write::message(msg, v),
    )
}

/// A list (`PodList`, or `PartialObjectMetadataList` when `partial`) of
/// `items` with list `metadata`, enveloped: each item is written straight
/// into the list, no list value is built.
pub(crate) fn encode_list<'a>(
    api_version: &str,
    list_kind: &str,
    metadata: &Value,
    items: impl Iterator<Item = &'a Value>,
    partial: bool,
) -> Option<Vec<u8>> {
    let (api_version, list_kind) = if partial {
        ("meta.k8s.io/v1", "PartialObjectMetadataList")
    } else {
        (api_version, list_kind)
    };
    let msg = message_of(api_version, list_kind)?;
    let desc = &MESSAGES[msg];
    let item_msg = desc
        .fields
        .iter()
        .find(|f| f.name == "items")
        .map(|f| f.ty)?;
    let schema::Ty::Message(item_msg) = item_msg else {
        return None;
    };
    let mut body = Vec::with_capacity(4096);
    let meta_msg = schema::message(&format!("{META}ListMeta")).expect("meta has it");
    write::bytes_field(&mut body, 1, &write::message(meta_msg, metadata));
    for item in items {
        write::bytes_field(&mut body, 2, &write::message(item_msg, item));
    }
    Some(envelope(api_version, list_kind, &body))
}

/// One watch event: its length, then a `metav1.WatchEvent` of `ty` whose
/// object is `object` (enveloped).
pub(crate) fn watch_frame(ty: &str, object: &[u8]) -> Bytes {
    let mut ev = Vec::with_capacity(object.len() + ty.len() + 16);
    write::bytes_field(&mut ev, 1, ty.as_bytes());
    let mut raw = Vec::with_capacity(object.len() + 4);
    write::bytes_field(&mut raw, 1, object);
    write::bytes_field(&mut ev, 2, &raw);
    let mut out = Vec::with_capacity(ev.len() + 4);
    out.extend_from_slice(&(ev.len() as u32).to_be_bytes());
    out.extend_from_slice(&ev);
    Bytes::from(out)
}

/// A watch event whose object is given as JSON (bookmarks, errors).
pub(crate) fn watch_frame_json(ty: &str, object: &Value, partial: bool) -> Bytes {
    let obj = if partial {
        encode_partial(object)
    } else {
        encode(object).unwrap_or_else(|| encode_partial(object))
    };
    watch_frame(ty, &obj)
}

/// An event's object in protobuf, encoded for the first watcher that asks
/// and kept for the others (per stored revision and form).
#[derive(Debug, Default)]
pub(crate) struct Encoded {
    object: OnceLock<Bytes>,
    partial: OnceLock<Bytes>,
}

impl Encoded {
    /// The object of `json` (the event's bytes), as itself or as its
    /// `PartialObjectMetadata`.
    pub(crate) fn get(&self, json: &[u8], partial: bool) -> Bytes {
        let cell = if partial { &self.partial } else { &self.object };
        cell.get_or_init(|| Bytes::from(encode_json(json, partial)))
            .clone()
    }
}

/// [`encode`] (or [`encode_partial`]) of an object's JSON bytes.
pub(crate) fn encode_json(json: &[u8], partial: bool) -> Vec<u8> {
    let v: Value = serde_json::from_slice(json).expect("the store serialized it");
    if partial {
        encode_partial(&v)
    } else {
        encode(&v).unwrap_or_else(|| encode_partial(&v))
    }
}

/// Why protobuf bytes could not be read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DecodeError {}

impl From<read::ReadError> for DecodeError {
    fn from(e: read::ReadError) -> Self {
        DecodeError(e.0)
    }
}

/// Any enveloped built-in object, list or `Status` read back into its JSON
/// form, with `apiVersion` and `kind` from the envelope (the inverse of
/// [`encode`]: Go's non-pointer fields that it writes when zero come back
/// as zero values, which Go's JSON leaves out).
pub fn decode_any(body: &[u8]) -> Result<Value, DecodeError> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| DecodeError("no k8s\\0 magic".into()))?;
    let unknown =
        schema::message("k8s.io.apimachinery.pkg.runtime.Unknown").expect("runtime has it");
    // Unknown's `raw` is bytes: read the envelope's fields by hand.
    let env = read::message(unknown, rest)?;
    let api_version = env.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = env.get("kind").and_then(Value::as_str).unwrap_or("");
    if let Some(e) = env
        .get("contentEncoding")
        .and_then(Value::as_str)
        .filter(|e| !e.is_empty())
    {
        return Err(DecodeError(format!("contentEncoding {e:?} is not read")));
    }
    let raw = env.get("raw").and_then(Value::as_str).unwrap_or("");
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(raw)
        .map_err(|e| DecodeError(e.to_string()))?;
    let msg = message_of(api_version, kind)
        .ok_or_else(|| DecodeError(format!("no message for {api_version} {kind}")))?;
    let mut v = read::message(msg, &raw)?;
    if let Value::Object(m) = &mut v {
        let mut out = serde_json::Map::new();
        out.insert("kind".into(), json!(kind));
        out.insert("apiVersion".into(), json!(api_version));
        out.extend(std::mem::take(m));
        v = Value::Object(out);
    }
    Ok(v)
}

/// The events of a protobuf watch stream, each as `{"type", "object"}`
/// with the object read by [`decode_any`]; and the bytes after the last
/// whole frame.
pub fn decode_watch(stream: &[u8]) -> Result<(Vec<Value>, &[u8]), DecodeError> {
    let mut rest = stream;
    let mut events = Vec::new();
    while rest.len() >= 4 {
        let n = u32::from_be_bytes(rest[..4].try_into().expect("4 bytes")) as usize;
        if rest.len() < 4 + n {
            break;
        }
        // WatchEvent's object is a RawExtension, read as JSON by the table
        // reader: take the frame's fields by hand instead.
        let frame = &rest[4..4 + n];
        let mut ty = String::new();
        let mut object = Value::Null;
        let mut r = frame;
        while !r.is_empty() {
            let (k, len, after) = field_bytes(r)?;
            let body = &after[..len];
            match k {
                1 => ty = String::from_utf8_lossy(body).into_owned(),
                2 => {
                    let (_, l2, a2) = field_bytes(body)?;
                    object = decode_any(&a2[..l2])?;
                }
                _ => {}
            }
            r = &after[len..];
        }
        events.push(json!({"type": ty, "object": object}));
        rest = &rest[4 + n..];
    }
    Ok((events, rest))
}

/// A length-delimited field at the start of `b`: its number, length and
/// the bytes from its body on.
fn field_bytes(b: &[u8]) -> Result<(u32, usize, &[u8]), DecodeError> {
    let (k, b) = uvarint(b)?;
    if k & 7 != 2 {
        return Err(DecodeError(format!(
            "field {} is not length-delimited",
            k >> 3
        )));
    }
    let (n, b) = uvarint(b)?;
    if b.len() < n as usize {
        return Err(DecodeError("a field runs past the end".into()));
    }
    Ok(((k >> 3) as u32, n as usize, b))
}

fn uvarint(b: &[u8]) -> Result<(u64, &[u8]), DecodeError> {
    let mut n = 0u64;
    for (i, &c) in b.iter().enumerate().take(10) {
        n |= u64::from(c & 0x7f) << (7 * i);
        if c < 0x80 {
            return Ok((n, &b[i + 1..]));
        }
    }
    Err(DecodeError("a bad varint".into()))
}
