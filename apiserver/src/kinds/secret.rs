//! Secret: `stringData` merged into `data`, `type` defaulting to Opaque and immutable,
//! the well-known types' required keys, at most 1 MiB of values. No message here ever
//! quotes a value: a malformed one is `<secret contents redacted>`, as in Kubernetes.

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use serde_json::{Value, json};

use super::{Kind, MAX_DATA_BYTES, check_data_key, check_immutable, col, name_and_age};
use crate::CauseKind;
use crate::resource::Resource;
use crate::validation::Causes;

const OPAQUE: &str = "Opaque";
const REDACTED: &str = "<secret contents redacted>";

impl Kind for Secret {
    const RESOURCE: Resource = Resource::Secrets;
    const SENSITIVE: bool = true;

    fn normalize(&mut self) {
        if self.type_.as_deref().is_none_or(str::is_empty) {
            self.type_ = Some(OPAQUE.into());
        }
        if let Some(strings) = self.string_data.take() {
            let data = self.data.get_or_insert_with(Default::default);
            for (k, v) in strings {
                data.insert(k, ByteString(v.into_bytes()));
            }
        }
    }

    fn validate(&self, causes: &mut Causes) {
        let data = self.data.clone().unwrap_or_default();
        let mut total = 0;
        for (key, value) in &data {
            check_data_key(causes, "data", key);
            total += value.0.len();
        }
        if total > MAX_DATA_BYTES {
            causes.push(
                CauseKind::TooLong,
                "data",
                format!("Too long: may not be more than {MAX_DATA_BYTES} bytes"),
            );
        }
        let has = |k: &str| data.contains_key(k);
        match self.type_.as_deref().unwrap_or(OPAQUE) {
            "kubernetes.io/service-account-token" => {
                let named = self
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("kubernetes.io/service-account.name"))
                    .is_some_and(|n| !n.is_empty());
                if !named {
                    causes.required("metadata.annotations[kubernetes.io/service-account.name]");
                }
            }
            "kubernetes.io/dockercfg" => check_json(causes, &data, ".dockercfg"),
            "kubernetes.io/dockerconfigjson" => check_json(causes, &data, ".dockerconfigjson"),
            // Either may be empty, but one of them must be there.
            "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
                causes.required("data[username]");
                causes.required("data[password]");
            }
            "kubernetes.io/ssh-auth"
                if data.get("ssh-privatekey").is_none_or(|v| v.0.is_empty()) =>
            {
                causes.required("data[ssh-privatekey]");
            }
            "kubernetes.io/tls" => {
                for key in ["tls.crt", "tls.key"] {
                    if !has(key) {
                        causes.required(format!("data[{key}]"));
                    }
                }
            }
            _ => {}
        }
    }

    fn validate_update(old: &Self, new: &Self, causes: &mut Causes) {
        if old.type_ != new.type_ {
            let ty = new.type_.as_deref().unwrap_or("");
            causes.invalid("type", ty, "field is immutable");
        }
        check_immutable(
            causes,
            old.immutable,
            new.immutable,
            &[("data", old.data != new.data)],
        );
    }
}

/// `data[key]` must be there and hold a JSON object (a Docker config file).
fn check_json(
    causes: &mut Causes,
    data: &std::collections::BTreeMap<String, ByteString>,
    key: &str,
) {
    let field = format!("data[{key}]");
    let Some(bytes) = data.get(key) else {
        causes.required(field);
        return;
    };
    let problem = match serde_json::from_slice::<Value>(&bytes.0) {
        Ok(Value::Object(_)) => return,
        Ok(other) => format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            json_kind(&other)
        ),
        Err(e) if e.is_eof() => "unexpected end of JSON input".into(),
        // serde's message may quote what it read; only the position is safe to tell.
        Err(e) => format!("invalid JSON at line {} column {}", e.line(), e.column()),
    };
    causes.invalid(field, REDACTED, &problem);
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

pub(super) fn columns() -> Vec<Value> {
    let (name, age) = name_and_age();
    vec![
        name,
        col(
            "Type",
            "",
            "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
        ),
        col(
            "Data",
            "",
            "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
        ),
        age,
    ]
}

/// TYPE and DATA (the number of keys; never a value).
pub(super) fn type_and_count(obj: &Value) -> [Value; 2] {
    let ty = obj.get("type").and_then(Value::as_str).unwrap_or(OPAQUE);
    let n = obj
        .get("data")
        .and_then(Value::as_object)
        .map_or(0, |m| m.len());
    [json!(ty), json!(n)]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::kinds::validate;

    fn secret(v: Value) -> Secret {
        let mut s: Secret = serde_json::from_value(v).unwrap();
        s.normalize();
        s
    }

    fn messages(s: &Secret) -> Vec<String> {
        match validate(s, None) {
            Ok(()) => Vec::new(),
            Err(crate::ApiError::Invalid { causes, .. }) => {
                causes.into_iter().map(|c| c.to_string()).collect()
            }
            Err(other) => panic!("{other:?}"),
        }
    }

    #[test]
    fn string_data_merges_into_data_over_the_same_key_and_type_defaults_to_opaque() {
        let s = secret(
            json!({"metadata": {"name": "s"}, "data": {"a": "eA==", "b": "eQ=="}, "stringData": {"a": "new"}}),
        );
        assert_eq!(s.type_.as_deref(), Some("Opaque"));
        assert!(s.string_data.is_none());
        let data = s.data.unwrap();
        assert_eq!(data["a"].0, b"new");
        assert_eq!(data["b"].0, b"y");
    }

    #[test]
    fn each_well_known_type_requires_its_keys() {
        let of = |ty: &str, data: Value| {
            secret(json!({"metadata": {"name": "s"}, "type": ty, "data": data}))
        };
        assert_eq!(
            messages(&of("kubernetes.io/tls", json!({}))),
            [
                "data[tls.crt]: Required value",
                "data[tls.key]: Required value"
            ]
        );
        assert_eq!(
            messages(&of("kubernetes.io/basic-auth", json!({}))),
            [
                "data[username]: Required value",
                "data[password]: Required value"
            ]
        );
        assert!(messages(&of("kubernetes.io/basic-auth", json!({"password": ""}))).is_empty());
        assert_eq!(
            messages(&of("kubernetes.io/dockerconfigjson", json!({}))),
            ["data[.dockerconfigjson]: Required value"]
        );
        assert_eq!(
            messages(&of("kubernetes.io/service-account-token", json!({}))),
            ["metadata.annotations[kubernetes.io/service-account.name]: Required value"]
        );
        assert!(messages(&of("example.com/custom", json!({}))).is_empty());
    }

    #[test]
    fn a_malformed_docker_config_is_reported_without_its_contents() {
        let s = secret(
            json!({"metadata": {"name": "s"}, "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": "{\"auths\": hunter2"}}),
        );
        let m = messages(&s);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(
            m[0].starts_with(
                "data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": "
            ),
            "{m:?}"
        );
        assert!(!m[0].contains("hunter2"), "{m:?}");
    }

    #[test]
    fn the_type_cannot_change() {
        let old = secret(json!({"metadata": {"name": "s"}}));
        let new = secret(
            json!({"metadata": {"name": "s"}, "type": "kubernetes.io/basic-auth", "data": {"username": ""}}),
        );
        let err = validate(&new, Some(&old)).unwrap_err().to_string();
        assert!(
            err.contains("type: Invalid value: \"kubernetes.io/basic-auth\": field is immutable"),
            "{err}"
        );
    }
}
