//! Keys given twice in one JSON object. `serde_json::Value` keeps the last, so strict
//! field validation looks at the bytes themselves, as kube-apiserver's decoder does.

use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// The paths (`metadata.name`, `spec.containers[0].image`) of every key that repeats one
/// before it in the same object. Empty for JSON that does not parse (that is reported by
/// the parser, not here).
pub(crate) fn duplicate_fields(bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let seed = Walk {
        path: String::new(),
        out: &mut out,
    };
    if seed.deserialize(&mut de).is_err() {
        return Vec::new();
    }
    out
}

struct Walk<'a> {
    path: String,
    out: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if !seen.insert(key) {
                self.out.push(path.clone());
            }
            map.next_value_seed(Walk {
                path,
                out: &mut *self.out,
            })?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        loop {
            let seed = Walk {
                path: format!("{}[{i}]", self.path),
                out: &mut *self.out,
            };
            if seq.next_element_seed(seed)?.is_none() {
                return Ok(());
            }
            i += 1;
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_keys_are_found_at_any_depth_and_distinct_ones_are_not() {
        let body = br#"{"metadata": {"name": "a", "name": "b"}, "spec": {"containers": [{"name": "c", "image": "x", "image": "y"}]}, "kind": "Pod"}"#;
        assert_eq!(
            duplicate_fields(body),
            ["metadata.name", "spec.containers[0].image"]
        );
        assert!(duplicate_fields(br#"{"a": {"b": 1}, "b": {"a": 2}}"#).is_empty());
        assert!(duplicate_fields(b"{not json").is_empty());
    }
}
