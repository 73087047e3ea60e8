//! ConfigMap: keys as Kubernetes allows them, `data` and `binaryData` disjoint, at most
//! 1 MiB of values, and `immutable`.

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::{Value, json};

use super::{Kind, check_data_key, check_immutable, col, name_and_age};
use crate::CauseKind;
use crate::resource::Resource;
use crate::validation::Causes;

/// The most bytes of values a ConfigMap or Secret may hold (Kubernetes' `MaxSecretSize`).
pub(crate) const MAX_DATA_BYTES: usize = 1024 * 1024;

impl Kind for ConfigMap {
    const RESOURCE: Resource = Resource::ConfigMaps;

    fn validate(&self, causes: &mut Causes) {
        let mut total = 0;
        for (key, value) in self.data.iter().flatten() {
            check_data_key(causes, "data", key);
            total += value.len();
        }
        for (key, value) in self.binary_data.iter().flatten() {
            check_data_key(causes, "binaryData", key);
            if self.data.as_ref().is_some_and(|d| d.contains_key(key)) {
                causes.invalid(
                    format!("binaryData[{key}]"),
                    key,
                    "duplicate of key present in data",
                );
            }
            total += value.0.len();
        }
        if total > MAX_DATA_BYTES {
            causes.push(
                CauseKind::TooLong,
                "",
                format!("Too long: may not be more than {MAX_DATA_BYTES} bytes"),
            );
        }
    }

    fn validate_update(old: &Self, new: &Self, causes: &mut Causes) {
        check_immutable(
            causes,
            old.immutable,
            new.immutable,
            &[
                ("data", old.data != new.data),
                ("binaryData", old.binary_data != new.binary_data),
            ],
        );
    }
}

pub(super) fn columns() -> Vec<Value> {
    let (name, age) = name_and_age();
    vec![
        name,
        col(
            "Data",
            "",
            "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
        ),
        age,
    ]
}

/// DATA: the number of keys in `data` and `binaryData`.
pub(super) fn data_count(obj: &Value) -> Value {
    let len = |f: &str| obj.get(f).and_then(Value::as_object).map_or(0, |m| m.len());
    json!(len("data") + len("binaryData"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::kinds::validate;

    fn cm(v: Value) -> ConfigMap {
        serde_json::from_value(v).unwrap()
    }

    fn fields(e: crate::ApiError) -> Vec<(String, String)> {
        match e {
            crate::ApiError::Invalid { causes, .. } => {
                causes.into_iter().map(|c| (c.field, c.message)).collect()
            }
            other => panic!("not invalid: {other:?}"),
        }
    }

    #[test]
    fn keys_follow_kubernetes_rules_and_data_and_binary_data_are_disjoint() {
        assert!(
            validate(
                &cm(json!({"metadata": {"name": "a"}, "data": {"k.e-y_1": "v"}})),
                None
            )
            .is_ok()
        );
        let bad = cm(json!({"metadata": {"name": "a"},
            "data": {"a b": "v", "..x": "v", "same": "v"}, "binaryData": {"same": "AA=="}}));
        let f = fields(validate(&bad, None).unwrap_err());
        assert!(
            f.iter().any(|(p, m)| p == "data[a b]"
                && m.starts_with("Invalid value: \"a b\": a valid config key")),
            "{f:?}"
        );
        assert!(
            f.iter()
                .any(|(p, m)| p == "data[..x]" && m.ends_with("must not start with '..'")),
            "{f:?}"
        );
        assert!(
            f.iter()
                .any(|(p, m)| p == "binaryData[same]"
                    && m.ends_with("duplicate of key present in data")),
            "{f:?}"
        );
    }

    #[test]
    fn more_than_one_mebibyte_of_values_is_too_long() {
        let big = "x".repeat(MAX_DATA_BYTES);
        let ok = cm(json!({"metadata": {"name": "a"}, "data": {"a": big}}));
        assert!(validate(&ok, None).is_ok());
        let over = cm(json!({"metadata": {"name": "a"}, "data": {"a": big, "b": "y"}}));
        let f = fields(validate(&over, None).unwrap_err());
        assert_eq!(
            f,
            [(
                String::new(),
                "Too long: may not be more than 1048576 bytes".to_string()
            )]
        );
    }

    #[test]
    fn an_immutable_config_map_keeps_its_data_and_stays_immutable() {
        let old = cm(json!({"metadata": {"name": "a"}, "data": {"a": "1"}, "immutable": true}));
        let changed = cm(json!({"metadata": {"name": "a"}, "data": {"a": "2"}}));
        let f = fields(validate(&changed, Some(&old)).unwrap_err());
        let paths: Vec<&str> = f.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["immutable", "data"]);
        let relabelled = cm(
            json!({"metadata": {"name": "a", "labels": {"x": "y"}}, "data": {"a": "1"}, "immutable": true}),
        );
        assert!(validate(&relabelled, Some(&old)).is_ok());
    }
}
