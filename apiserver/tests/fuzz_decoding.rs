//! Random bytes and random JSON through every decoding entry point: the shim answers
//! with errors, never a panic.
#![allow(clippy::unwrap_used)]

use apiserver::decode::{FieldValidation, decode_typed, parse_body, parse_object};
use apiserver::patch::{PatchType, apply, parse_patch};
use apiserver::resource::Resource;
use apiserver::selectors::Selectors;
use apiserver::validation::validate_pod;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use proptest::prelude::*;
use serde_json::{Value, json};

const CONTENT_TYPES: [&str; 3] = [
    "application/json",
    "application/yaml",
    "application/apply-patch+yaml",
];
const PATCHES: [PatchType; 4] = [
    PatchType::Merge,
    PatchType::Json,
    PatchType::Strategic,
    PatchType::Apply,
];

fn live() -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "image": "i", "env": [{"name": "A"}]}]}})
}

/// JSON made of the shapes pod fields take, nested a few levels.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-zA-Z0-9$/._-]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        let keys = prop_oneof![
            Just("metadata".to_string()),
            Just("spec".to_string()),
            Just("containers".to_string()),
            Just("name".to_string()),
            Just("image".to_string()),
            Just("$patch".to_string()),
            Just("$setElementOrder/containers".to_string()),
            Just("env".to_string()),
            "[a-z]{1,6}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(keys, inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn exercise_value(v: &Value) {
    let _ = decode_typed::<Pod>(v, FieldValidation::Strict).map(|(p, _)| validate_pod(&p));
    let _ = decode_typed::<Event>(v, FieldValidation::Warn);
    let _ = decode_typed::<Namespace>(v, FieldValidation::Ignore);
    for ty in PATCHES {
        if let Ok(out) = apply(ty, &live(), v, "Pod", "p") {
            let _ =
                decode_typed::<Pod>(&out, FieldValidation::Strict).map(|(p, _)| validate_pod(&p));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic_the_decoders(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        for ct in CONTENT_TYPES {
            if let Ok(v) = parse_body(&bytes, ct) {
                exercise_value(&v);
            }
            let _ = parse_object(&bytes, ct);
        }
        for ty in PATCHES {
            let _ = parse_patch(ty, &bytes);
        }
        let text = String::from_utf8_lossy(&bytes);
        for r in [Resource::Pods, Resource::Events, Resource::Nodes, Resource::Namespaces] {
            let _ = Selectors::parse(&text, &text, r);
        }
    }

    #[test]
    fn random_json_never_panics_decoding_validation_or_patching(v in json_value()) {
        exercise_value(&v);
        let text = serde_json::to_vec(&v).unwrap();
        for ty in PATCHES {
            if let Ok(p) = parse_patch(ty, &text) {
                let _ = apply(ty, &live(), &p, "Pod", "p");
            }
        }
    }

    #[test]
    fn random_selector_text_never_panics(s in "[a-z=!,() .in/-]{0,40}") {
        let _ = Selectors::parse(&s, "", Resource::Pods).map(|sel| sel.matches(&live()));
    }
}
