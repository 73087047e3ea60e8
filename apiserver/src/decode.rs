//! Turning request bytes into objects: JSON or YAML by Content-Type, typed decoding, and
//! the unknown-field check behind `fieldValidation`.
//!
//! These are the entry points for untrusted bytes; they never panic and every failure is
//! a 400 (a body too large is refused before decoding, see [`MAX_BODY_BYTES`]).

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ApiError;

/// The largest request body accepted: Kubernetes' own limit (3 MiB), since objects
/// larger than that cannot be stored by a real cluster either.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// How to treat fields the schema does not know (the `fieldValidation` parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Refuse with 400.
    Strict,
    /// Accept, and report them as warnings (Kubernetes' default).
    #[default]
    Warn,
    /// Accept silently.
    Ignore,
}

impl FieldValidation {
    /// Parses the query parameter; empty means the default.
    pub fn parse(s: Option<&str>) -> Result<Self, ApiError> {
        match s.unwrap_or("") {
            "" | "Warn" => Ok(Self::Warn),
            "Strict" => Ok(Self::Strict),
            "Ignore" => Ok(Self::Ignore),
            other => Err(ApiError::BadRequest(format!(
                "fieldValidation parameter unsupported: {other}, must be one of Ignore, Warn, Strict"
            ))),
        }
    }
}

/// Whether a Content-Type names YAML.
pub fn is_yaml(content_type: &str) -> bool {
    let ct = content_type.split(';').next().unwrap_or("").trim();
    ct.ends_with("yaml")
}

/// Parses a body as JSON, or YAML or Kubernetes protobuf when the Content-Type says so,
/// into one JSON value.
pub fn parse_body(bytes: &[u8], content_type: &str) -> Result<Value, ApiError> {
    if crate::protobuf::is_protobuf(content_type) {
        return crate::protobuf::decode(bytes);
    }
    let value: Value = if is_yaml(content_type) {
        serde_yaml_ng::from_slice(bytes)
            .map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))?
    } else {
        serde_json::from_slice(bytes)
            .map_err(|e| ApiError::BadRequest(format!("error decoding JSON: {e}")))?
    };
    Ok(value)
}

/// Parses a body that must be a JSON object.
pub fn parse_object(bytes: &[u8], content_type: &str) -> Result<Value, ApiError> {
    let value = parse_body(bytes, content_type)?;
    if value.is_object() {
        Ok(value)
    } else {
        Err(ApiError::BadRequest(
            "the body must be a JSON object".into(),
        ))
    }
}

/// Decodes `value` as `T` and lists the fields of `value` that `T` does not know, as
/// warnings (`unknown field "spec.containers[0].foo"`). Strict validation refuses them.
pub fn decode_typed<T: DeserializeOwned + Serialize>(
    value: &Value,
    validation: FieldValidation,
) -> Result<(T, Vec<String>), ApiError> {
    decode_checked(value, Vec::new(), validation)
}

/// [`decode_typed`] with the field problems found before decoding (duplicate keys)
/// reported alongside the unknown fields, in one strict error or as warnings.
fn decode_checked<T: DeserializeOwned + Serialize>(
    value: &Value,
    mut problems: Vec<String>,
    validation: FieldValidation,
) -> Result<(T, Vec<String>), ApiError> {
    let typed: T = serde_json::from_value(value.clone())
        .map_err(|e| ApiError::BadRequest(format!("error decoding object: {e}")))?;
    if validation == FieldValidation::Ignore {
        return Ok((typed, Vec::new()));
    }
    let round = serde_json::to_value(&typed).map_err(|e| ApiError::Internal(e.to_string()))?;
    let mut unknown = Vec::new();
    unknown_fields(value, &round, "", &mut unknown);
    let mut all: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    all.append(&mut problems);
    if validation == FieldValidation::Strict && !all.is_empty() {
        return Err(ApiError::BadRequest(format!(
            "strict decoding error: {}",
            all.join(", ")
        )));
    }
    Ok((typed, all))
}

/// Decodes an object of kind `T` (as [`decode_typed`]); errors read as kube-apiserver's,
/// `Pod in version "v1" cannot be handled as a Pod: ...`.
pub fn decode_resource<T>(
    value: &Value,
    validation: FieldValidation,
) -> Result<(T, Vec<String>), ApiError>
where
    T: k8s_openapi::Resource + DeserializeOwned + Serialize,
{
    decode_checked(value, Vec::new(), validation).map_err(cannot_handle::<T>)
}

/// Parses a JSON, YAML or protobuf body and decodes it as kind `T`; with field validation
/// on, keys given twice in a JSON body are reported (`duplicate field "metadata.name"`)
/// as kube-apiserver does, rather than the last one silently winning.
pub fn decode_resource_body<T>(
    bytes: &[u8],
    content_type: &str,
    validation: FieldValidation,
) -> Result<(T, Vec<String>), ApiError>
where
    T: k8s_openapi::Resource + DeserializeOwned + Serialize,
{
    if crate::protobuf::is_protobuf(content_type) {
        // The endpoint's kind, so that an envelope naming none is taken as one.
        let value = crate::protobuf::decode_object(bytes, T::API_VERSION, T::KIND)?;
        return decode_checked(&value, Vec::new(), validation).map_err(cannot_handle::<T>);
    }
    let value = parse_object(bytes, content_type)?;
    let duplicates = if validation == FieldValidation::Ignore || is_yaml(content_type) {
        Vec::new()
    } else {
        crate::duplicates::duplicate_fields(bytes)
            .into_iter()
            .map(|f| format!("duplicate field \"{f}\""))
            .collect()
    };
    decode_checked(&value, duplicates, validation).map_err(cannot_handle::<T>)
}

fn cannot_handle<T: k8s_openapi::Resource>(e: ApiError) -> ApiError {
    match e {
        ApiError::BadRequest(msg) => {
            let detail = msg.strip_prefix("error decoding object: ").unwrap_or(&msg);
            ApiError::BadRequest(format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: {detail}",
                kind = T::KIND,
                version = T::VERSION,
            ))
        }
        other => other,
    }
}

/// Fields present (and not null) in `original` but missing from the typed round trip.
fn unknown_fields(original: &Value, round: &Value, path: &str, out: &mut Vec<String>) {
    match (original, round) {
        (Value::Object(o), Value::Object(r)) => {
            for (k, v) in o {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match r.get(k) {
                    None if !v.is_null() => out.push(p),
                    None => {}
                    Some(rv) => unknown_fields(v, rv, &p, out),
                }
            }
        }
        (Value::Array(o), Value::Array(r)) => {
            for (i, (ov, rv)) in o.iter().zip(r).enumerate() {
                unknown_fields(ov, rv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    #[test]
    fn strict_validation_names_the_unknown_field_path() {
        let v = json!({"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "i", "bogus": 1}], "nope": true}});
        let err = decode_typed::<Pod>(&v, FieldValidation::Strict).unwrap_err();
        assert_eq!(err.code_and_reason(), (400, "BadRequest"));
        let msg = err.to_string();
        assert!(msg.contains("spec.containers[0].bogus"), "{msg}");
        assert!(msg.contains("spec.nope"), "{msg}");
        let (_, unknown) = decode_typed::<Pod>(&v, FieldValidation::Warn).unwrap();
        assert_eq!(unknown.len(), 2);
    }

    #[test]
    fn known_fields_and_nulls_are_not_unknown() {
        let v = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "creationTimestamp": null, "labels": {}},
            "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}], "resources": {"limits": {"cpu": "1"}}}]}});
        let (_, unknown) = decode_typed::<Pod>(&v, FieldValidation::Strict).unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
    }

    #[test]
    fn yaml_and_json_bodies_parse_and_garbage_is_400() {
        assert!(parse_object(b"a: 1\nb: [x]\n", "application/yaml").is_ok());
        assert!(parse_object(br#"{"a":1}"#, "application/json").is_ok());
        for bad in [&b"{"[..], b"[1]", b"\xff\xfe", b"a: [", b"null"] {
            let ct = if bad == b"a: [" {
                "application/yaml"
            } else {
                "application/json"
            };
            assert_eq!(parse_object(bad, ct).unwrap_err().code_and_reason().0, 400);
        }
    }

    #[test]
    fn a_yaml_alias_bomb_is_refused_rather_than_expanded() {
        let mut bomb = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for (prev, next) in ["a", "b", "c", "d", "e", "f", "g", "h"]
            .iter()
            .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
        {
            let refs = vec![format!("*{prev}"); 9].join(",");
            bomb.push_str(&format!("{next}: &{next} [{refs}]\n"));
        }
        let started = std::time::Instant::now();
        let result = parse_object(bomb.as_bytes(), "application/yaml");
        assert_eq!(result.unwrap_err().code_and_reason().0, 400);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
}
