//! What form a response takes, from the request's `Accept` header, as the
//! real server negotiates it: the first clause it can serve wins.
//!
//! Answers are JSON or, for a clause of `application/vnd.kubernetes.protobuf`,
//! protobuf (see [`crate::protobuf`]); besides the objects themselves, a
//! clause may ask for a transformation of them with its `as`, `g` and `v`
//! parameters:
//!
//! - `as=Table;g=meta.k8s.io;v=v1` (or `v1beta1`): kubectl's tables;
//! - `as=PartialObjectMetadata;g=meta.k8s.io;v=v1` (or `v1beta1`) for a get or a
//!   watch, `as=PartialObjectMetadataList` for a list: metadata only, as
//!   client-go's metadata client asks (the garbage collector and quota
//!   controller of kube-controller-manager watch every resource this way).
//!
//! As kube-apiserver, a protobuf clause is served for the objects of a
//! built-in kind and for `PartialObjectMetadata(List)` of any resource; it
//! is skipped for a custom resource's objects (they have no protobuf form)
//! and for a Table (JSON only). A clause asking for a transformation that
//! does not apply to the request (a `PartialObjectMetadataList` for a get)
//! is skipped too, as the real server skips what it cannot produce;
//! nothing acceptable is a 406.
//!
//! ```
//! use fakeapi::negotiate::{negotiate, Form, Verb};
//! let metadata = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,\
//!                 application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
//! assert_eq!(negotiate(metadata, Verb::List), Some(Form::Metadata));
//! assert_eq!(negotiate(metadata, Verb::Get), Some(Form::Object));
//! assert_eq!(negotiate("application/json;as=Table;v=v1;g=meta.k8s.io,application/json", Verb::Get), Some(Form::Table));
//! assert_eq!(negotiate("application/vnd.kubernetes.protobuf", Verb::Get), None);
//! ```

use bytes::Bytes;
use serde_json::{json, Map, Value};

/// The kind of read the response answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// One object (a get, or what a write returns).
    Get,
    List,
    /// Each event's object.
    Watch,
}

/// The form of the objects in a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The objects as stored (in the version asked for).
    Object,
    /// A `meta.k8s.io/v1 Table`.
    Table,
    /// `meta.k8s.io/v1 PartialObjectMetadata` (a list: a
    /// `PartialObjectMetadataList` of them).
    Metadata,
}

/// How a response is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Media {
    Json,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

/// The form the first acceptable clause of `accept` asks for, for a
/// resource without a protobuf form, or `None` when no clause can be
/// served (the server answers 406). An empty header accepts anything.
pub fn negotiate(accept: &str, verb: Verb) -> Option<Form> {
    negotiate_media(accept, verb, false).map(|(form, _)| form)
}

/// The form and encoding the first acceptable clause of `accept` asks for;
/// `protobuf`: whether the resource's objects have a protobuf form (a
/// built-in kind).
///
/// ```
/// use fakeapi::negotiate::{negotiate_media, Form, Media, Verb};
/// let go = "application/vnd.kubernetes.protobuf, */*";
/// assert_eq!(negotiate_media(go, Verb::Watch, true), Some((Form::Object, Media::Protobuf)));
/// // A custom resource: the protobuf clause is skipped.
/// assert_eq!(negotiate_media(go, Verb::Watch, false), Some((Form::Object, Media::Json)));
/// assert_eq!(negotiate_media("application/vnd.kubernetes.protobuf", Verb::Get, false), None);
/// ```
pub fn negotiate_media(accept: &str, verb: Verb, protobuf: bool) -> Option<(Form, Media)> {
    if accept.trim().is_empty() {
        return Some((Form::Object, Media::Json));
    }
    accept
        .split(',')
        .find_map(|clause| clause_form(clause, verb, protobuf))
}

fn clause_form(clause: &str, verb: Verb, protobuf: bool) -> Option<(Form, Media)> {
    let mut parts = clause.split(';');
    let media = match parts.next().unwrap_or("").trim() {
        "application/json" | "*/*" | "application/*" => Media::Json,
        // A build without the message tables skips the clause, as a server
        // that does not speak protobuf would.
        crate::protobuf::MEDIA_TYPE if crate::protobuf::unavailable().is_none() => Media::Protobuf,
        _ => return None,
    };
    let (mut r#as, mut g, mut v) = ("", "", "");
    for p in parts {
        let Some((k, val)) = p.split_once('=') else {
            continue;
        };
        match k.trim() {
            "as" => r#as = val.trim(),
            "g" => g = val.trim(),
            "v" => v = val.trim(),
            _ => {}
        }
    }
    if r#as.is_empty() {
        return (media == Media::Json || protobuf).then_some((Form::Object, media));
    }
    if g != "meta.k8s.io" || !matches!(v, "v1" | "v1beta1") {
        return None;
    }
    let form = match (r#as, verb) {
        // kube-apiserver's tables are JSON (or YAML) only.
        ("Table", _) if media == Media::Json => Form::Table,
        ("PartialObjectMetadata", Verb::Get | Verb::Watch) => Form::Metadata,
        ("PartialObjectMetadataList", Verb::List) => Form::Metadata,
        _ => return None,
    };
    Some((form, media))
}

/// The `meta.k8s.io/v1 PartialObjectMetadata` of an object: its metadata,
/// nothing else.
pub fn partial_object(obj: &Value) -> Value {
    partial_of(obj.get("metadata").cloned())
}

fn partial_of(metadata: Option<Value>) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata.unwrap_or_else(|| Value::Object(Map::new())),
    })
}

/// [`partial_object`] of an object's JSON bytes, serialized. Only the
/// metadata is read: the rest of the object is skipped unparsed.
pub(crate) fn partial_json(json: &[u8]) -> Bytes {
    #[derive(serde::Deserialize)]
    struct OnlyMetadata {
        metadata: Option<Value>,
    }
    let metadata = serde_json::from_slice::<OnlyMetadata>(json)
        .ok()
        .and_then(|m| m.metadata);
    Bytes::from(serde_json::to_vec(&partial_of(metadata)).expect("json"))
}

/// Appends a stored object's JSON to `out` as an item of a built-in
/// kind's list: without its top-level `apiVersion` and `kind`, which
/// kube-apiserver leaves out of such lists' items (a typed Go client keeps
/// what it reads there, so an item would otherwise differ from the same
/// object read alone, whose kind its decoder clears). The members are cut
/// out of the bytes, not re-serialized: the scan stops once both are found,
/// near the start of every object a client wrote. Anything else than a
/// JSON object is appended whole.
pub(crate) fn push_list_item(json: &[u8], out: &mut Vec<u8>) {
    const TYPE_META: [&[u8]; 2] = [b"\"apiVersion\":", b"\"kind\":"];
    let begin = out.len();
    if json.first() != Some(&b'{') {
        out.extend_from_slice(json);
        return;
    }
    out.push(b'{');
    let (mut depth, mut in_str, mut escaped) = (0usize, false, false);
    let (mut start, mut found, mut wrote) = (1, 0, false);
    for (i, &b) in json.iter().enumerate() {
        if in_str {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => depth += 1,
            b',' | b'}' if depth == 1 => {
                // A top-level member ends here.
                let member = &json[start..i];
                if found < 2 && TYPE_META.iter().any(|k| member.starts_with(k)) {
                    found += 1;
                } else if !member.is_empty() {
                    if wrote {
                        out.push(b',');
                    }
                    out.extend_from_slice(member);
                    wrote = true;
                }
                start = i + 1;
                if b == b'}' {
                    out.push(b'}');
                    return;
                }
                if found == 2 {
                    // The rest, whole, closing brace included.
                    if wrote {
                        out.push(b',');
                    }
                    out.extend_from_slice(&json[start..]);
                    return;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    // Not a whole object: as it is.
    out.truncate(begin);
    out.extend_from_slice(json);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(json: &str) -> String {
        let mut out = Vec::new();
        push_list_item(json.as_bytes(), &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn list_items_lose_their_type_meta_only() {
        assert_eq!(
            item(
                r#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"a","labels":{"kind":"x"}},"data":{}}"#
            ),
            r#"{"metadata":{"name":"a","labels":{"kind":"x"}},"data":{}}"#
        );
        assert_eq!(
            item(
                r#"{"metadata":{"name":"a,\"}{"},"apiVersion":"v1","type":"Opaque","kind":"Secret"}"#
            ),
            r#"{"metadata":{"name":"a,\"}{"},"type":"Opaque"}"#
        );
        assert_eq!(item(r#"{"apiVersion":"v1","kind":"Secret"}"#), "{}");
        // One of the two, or neither.
        assert_eq!(
            item(r#"{"kind":"Secret","a":[1,{"b":2}]}"#),
            r#"{"a":[1,{"b":2}]}"#
        );
        assert_eq!(item(r#"{"a":1}"#), r#"{"a":1}"#);
        assert_eq!(item("{}"), "{}");
        assert_eq!(item(r#"{"a":"#), r#"{"a":"#);
        assert_eq!(item("[1]"), "[1]");
        // The result is the object less the two members.
        let obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"x": ["kind"]}});
        let got: Value = serde_json::from_str(&item(&obj.to_string())).unwrap();
        assert_eq!(
            got,
            json!({"metadata": {"name": "p"}, "spec": {"x": ["kind"]}})
        );
    }

    #[test]
    fn first_servable_clause_wins() {
        // client-go's metadata client.
        let get = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(negotiate(get, Verb::Get), Some(Form::Metadata));
        assert_eq!(negotiate(get, Verb::Watch), Some(Form::Metadata));
        // A list asks for the List form; the object form does not apply.
        assert_eq!(negotiate(get, Verb::List), Some(Form::Object));
        assert_eq!(
            negotiate(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
                Verb::Get
            ),
            None
        );
        assert_eq!(
            negotiate("application/json;as=Table;g=other.io;v=v1", Verb::List),
            None
        );
        assert_eq!(negotiate("", Verb::List), Some(Form::Object));
        assert_eq!(
            negotiate("application/vnd.kubernetes.protobuf, */*", Verb::List),
            Some(Form::Object)
        );
        assert_eq!(negotiate("application/yaml", Verb::Get), None);
    }

    #[test]
    fn protobuf_is_served_for_built_in_objects_and_metadata() {
        let m = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        // Metadata in protobuf for every resource, custom ones too.
        for built_in in [true, false] {
            assert_eq!(
                negotiate_media(m, Verb::List, built_in),
                Some((Form::Metadata, Media::Protobuf))
            );
        }
        let t = "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1,application/json";
        assert_eq!(
            negotiate_media(t, Verb::List, true),
            Some((Form::Object, Media::Json))
        );
        assert_eq!(
            negotiate_media(
                "application/vnd.kubernetes.protobuf;stream=watch",
                Verb::Watch,
                true
            ),
            Some((Form::Object, Media::Protobuf))
        );
        assert_eq!(
            negotiate_media(
                "application/json, application/vnd.kubernetes.protobuf",
                Verb::Get,
                true
            ),
            Some((Form::Object, Media::Json))
        );
    }

    #[test]
    fn partial_objects_keep_metadata_only() {
        let pod = json!({"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": "a", "ownerReferences": [{"uid": "u"}]}, "spec": {"x": 1}});
        let p = partial_object(&pod);
        assert_eq!(
            p,
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"name": "a", "ownerReferences": [{"uid": "u"}]}})
        );
        let bytes = partial_json(&serde_json::to_vec(&pod).unwrap());
        assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), p);
    }
}
