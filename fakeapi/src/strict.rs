//! What `fieldValidation=Strict` refuses in a body besides unknown
//! fields: a key given twice in one object. Go's strict JSON decoder
//! reports it as `duplicate field "spec.replicas"` (serde_json keeps the
//! last silently, so the body is read once more, keys only); in a
//! server-side apply's YAML, sigs.k8s.io/yaml's strict reading (go-yaml's)
//! reports the line of each repeated key (`line 9: key "foo" already set in
//! map`), so the YAML is read once more as parser events, which carry
//! their lines (yaml-rust2: serde_yaml's errors name the line of the map,
//! not of the key).

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;
use std::fmt;

/// The paths of the keys repeated in an object of `body`, in the order
/// they come (`spec.replicas`, `spec.containers[0].name`); empty when
/// there is none or `body` is not JSON.
pub(crate) fn duplicate_fields(body: &[u8]) -> Vec<String> {
    let mut dups = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let _ = Walk {
        path: String::new(),
        dups: &mut dups,
    }
    .deserialize(&mut de);
    dups
}

struct Walk<'a> {
    path: String,
    dups: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(k) = m.next_key::<String>()? {
            let path = if self.path.is_empty() {
                k.clone()
            } else {
                format!("{}.{k}", self.path)
            };
            if !seen.insert(k) {
                self.dups.push(path.clone());
            }
            m.next_value_seed(Walk {
                path,
                dups: &mut *self.dups,
            })?;
        }
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        let mut i = 0;
        while s
            .next_element_seed(Walk {
                path: format!("{}[{i}]", self.path),
                dups: &mut *self.dups,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }
}

/// The keys repeated in a mapping of YAML `body`, each as go-yaml's strict
/// decoding names it (`line 9: key "foo" already set in map`: the line of
/// the repeated key, from 1), in the order they come; empty when there is
/// none or `body` is not YAML.
pub(crate) fn yaml_duplicate_keys(body: &[u8]) -> Vec<String> {
    use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
    use yaml_rust2::scanner::Marker;

    enum Frame {
        /// A mapping: the keys seen, and whether the next node is a key.
        Map(HashSet<String>, bool),
        Seq,
    }
    #[derive(Default)]
    struct Keys {
        stack: Vec<Frame>,
        found: Vec<String>,
    }
    impl Keys {
        /// A node ended: in a mapping, a key is followed by its value.
        fn node_done(&mut self) {
            if let Some(Frame::Map(_, next_is_key)) = self.stack.last_mut() {
                *next_is_key = !*next_is_key;
            }
        }
    }
    impl MarkedEventReceiver for Keys {
        fn on_event(&mut self, ev: Event, mark: Marker) {
            match ev {
                Event::Scalar(value, ..) => {
                    if let Some(Frame::Map(seen, true)) = self.stack.last_mut() {
                        if !seen.insert(value.clone()) {
                            self.found.push(format!(
                                "line {}: key {} already set in map",
                                mark.line(),
                                crate::error::go_quote(&value)
                            ));
                        }
                    }
                    self.node_done();
                }
                Event::Alias(_) => self.node_done(),
                Event::MappingStart(..) => self.stack.push(Frame::Map(HashSet::new(), true)),
                Event::SequenceStart(..) => self.stack.push(Frame::Seq),
                Event::MappingEnd | Event::SequenceEnd => {
                    self.stack.pop();
                    self.node_done();
                }
                _ => {}
            }
        }
    }
    let Ok(text) = std::str::from_utf8(body) else {
        return Vec::new();
    };
    let mut keys = Keys::default();
    match Parser::new_from_str(text).load(&mut keys, true) {
        Ok(()) => keys.found,
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_keys_are_found_where_they_are() {
        let body = br#"{"spec": {"unknownField": "foo", "replicas": 2, "replicas": 3,
            "template": {"spec": {"containers": [{"name": "a", "name": "b"}]}}},
            "kind": "Deployment"}"#;
        assert_eq!(
            duplicate_fields(body),
            vec![
                "spec.replicas".to_string(),
                "spec.template.spec.containers[0].name".to_string()
            ]
        );
        assert!(duplicate_fields(br#"{"a": [1, {"b": null}], "c": "d"}"#).is_empty());
        assert!(duplicate_fields(b"not json").is_empty());
    }

    #[test]
    fn repeated_yaml_keys_are_named_by_their_line() {
        let body = b"\napiVersion: a/v1\nkind: K\nmetadata:\n  name: x\nspec:\n  unknown: uk1\n  foo: foo1\n  foo: foo2\n  ports:\n  - name: x\n    name: y\n";
        assert_eq!(
            yaml_duplicate_keys(body),
            vec![
                r#"line 9: key "foo" already set in map"#.to_string(),
                r#"line 12: key "name" already set in map"#.to_string()
            ]
        );
        // The same key in two mappings, and a value equal to a key, are not.
        assert!(yaml_duplicate_keys(b"a: {b: 1}\nc: {b: 2}\nd: a\n").is_empty());
        assert!(yaml_duplicate_keys(b"a: [1, 2]\nb: {c: [d, e]}\n").is_empty());
    }
}
