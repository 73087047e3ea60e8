//! The `pod-template-hash` that names a Deployment's ReplicaSets and tells
//! its pods apart, and template equality ignoring it.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::Value;

/// Label on a Deployment's ReplicaSets, their selectors and their pods.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";

/// The alphabet of Go's `rand.SafeEncodeString`: no vowels (no words), no
/// confusable 0/1/3 (so no accidental profanity or ambiguity in names).
const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `pod-template-hash` of a template: FNV-32a over a stable serialization
/// of the template, then `collisionCount` (when set) as 8 little-endian
/// bytes, the decimal digits of the sum mapped through the safe alphabet
/// (`controller.ComputeHash`).
///
/// The serialization is k8s-openapi's JSON (fields in a fixed order, maps
/// sorted), not Go's object dump, so the value differs from KCM's for the
/// same template; any stable hash works, as long as it is stable across
/// restarts and upgrades of mesopod, since a changed hash would make every
/// Deployment roll out again.
pub fn pod_template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let bytes =
        serde_json::to_vec(template).unwrap_or_else(|_| format!("{template:?}").into_bytes());
    let probe = collision_count.map(|c| {
        let mut buf = [0u8; 8];
        buf[..4].copy_from_slice(&c.to_le_bytes());
        buf
    });
    hash_name(&[&bytes, probe.as_ref().map_or(&[][..], |b| &b[..])])
}

/// FNV-32a over `parts` in order, its decimal digits mapped through the safe alphabet:
/// the name-safe hash both `pod-template-hash` and ControllerRevision names use.
pub(crate) fn hash_name(parts: &[&[u8]]) -> String {
    let mut h = Fnv32a::new();
    for p in parts {
        h.write(p);
    }
    safe_encode(&h.sum().to_string())
}

/// Go's `rand.SafeEncodeString`: each byte to the alphabet, modulo its
/// length.
fn safe_encode(s: &str) -> String {
    s.bytes()
        .map(|b| char::from(ALPHANUMS[usize::from(b) % ALPHANUMS.len()]))
        .collect()
}

struct Fnv32a(u32);

impl Fnv32a {
    const OFFSET: u32 = 0x811c_9dc5;
    const PRIME: u32 = 0x0100_0193;

    fn new() -> Self {
        Fnv32a(Self::OFFSET)
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u32::from(*b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    fn sum(&self) -> u32 {
        self.0
    }
}

/// Whether two templates are the same apart from the `pod-template-hash`
/// label (`EqualIgnoreHash`). Like Go's semantic equality, an empty list
/// or map equals an absent one.
pub fn templates_equal_ignoring_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    match (comparable(a), comparable(b)) {
        (Some(a), Some(b)) => a == b,
        _ => strip_hash(a) == strip_hash(b),
    }
}

fn strip_hash(t: &PodTemplateSpec) -> PodTemplateSpec {
    let mut t = t.clone();
    if let Some(labels) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH_LABEL);
    }
    t
}

fn comparable(t: &PodTemplateSpec) -> Option<Value> {
    let mut v = serde_json::to_value(strip_hash(t)).ok()?;
    prune_empty(&mut v);
    Some(v)
}

/// Drop empty arrays and objects, recursively, so `labels: {}` equals no
/// labels.
fn prune_empty(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for child in map.values_mut() {
                prune_empty(child);
            }
            map.retain(|_, child| !is_empty(child));
        }
        Value::Array(items) => items.iter_mut().for_each(prune_empty),
        _ => {}
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Null => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::collections::BTreeMap;

    fn template(image: &str, labels: &[(&str, &str)]) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some(image.into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        }
    }

    #[test]
    fn fnv32a_matches_the_reference_vectors() {
        let mut h = Fnv32a::new();
        assert_eq!(h.sum(), 0x811c_9dc5);
        h.write(b"a");
        assert_eq!(h.sum(), 0xe40c_292c);
        let mut h = Fnv32a::new();
        h.write(b"foobar");
        assert_eq!(h.sum(), 0xbf9c_f968);
    }

    #[test]
    fn safe_encode_maps_each_digit_into_the_alphabet() {
        // '0' is byte 48, 48 % 27 = 21 -> '4'; '9' is 57 % 27 = 3 -> 'f'.
        assert_eq!(safe_encode("0"), "4");
        assert_eq!(safe_encode("9"), "f");
        assert_eq!(safe_encode("1234567890"), "56789bcdf4");
    }

    #[test]
    fn hash_is_stable_short_and_depends_on_template_and_collisions() {
        let a = template("nginx:1", &[("app", "web")]);
        let h = pod_template_hash(&a, None);
        assert_eq!(h, pod_template_hash(&a.clone(), None));
        assert!((1..=10).contains(&h.len()), "{h}");
        assert!(h.bytes().all(|b| ALPHANUMS.contains(&b)), "{h}");
        assert_ne!(
            h,
            pod_template_hash(&template("nginx:2", &[("app", "web")]), None)
        );
        assert_ne!(h, pod_template_hash(&a, Some(1)));
        assert_ne!(
            pod_template_hash(&a, Some(0)),
            pod_template_hash(&a, Some(1))
        );
    }

    #[test]
    fn equality_ignores_the_hash_label_and_empty_collections() {
        let a = template("nginx:1", &[("app", "web")]);
        let hashed = template("nginx:1", &[("app", "web"), ("pod-template-hash", "x7")]);
        assert!(templates_equal_ignoring_hash(&a, &hashed));
        assert!(!templates_equal_ignoring_hash(
            &a,
            &template("nginx:2", &[("app", "web")])
        ));
        assert!(!templates_equal_ignoring_hash(
            &a,
            &template("nginx:1", &[("app", "db")])
        ));
        let mut empty_annotations = a.clone();
        if let Some(m) = empty_annotations.metadata.as_mut() {
            m.annotations = Some(BTreeMap::new());
        }
        assert!(templates_equal_ignoring_hash(&a, &empty_annotations));
    }
}
