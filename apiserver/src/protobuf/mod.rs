//! The little of Kubernetes' protobuf encoding the shim must read: typed clients inside
//! kubectl (e.g. `kubectl create namespace`) send their body as
//! `application/vnd.kubernetes.protobuf` whatever the server prefers. Object metadata
//! (name, generateName, labels, annotations) is decoded, which is all a namespace or
//! ServiceAccount create carries, and the data of ConfigMaps and Secrets (what
//! `kubectl create configmap|secret` send); any other protobuf body is 415.

use serde_json::{Map, Value, json};

use crate::error::ApiError;

/// The Content-Type of Kubernetes protobuf bodies.
pub(crate) const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The four bytes every Kubernetes protobuf body starts with.
pub(crate) const MAGIC: &[u8] = b"k8s\0";

pub(crate) fn bad(msg: &str) -> ApiError {
    ApiError::BadRequest(format!("error decoding protobuf body: {msg}"))
}

/// One field of a protobuf message: number and, for length-delimited fields, the bytes.
pub(crate) enum Field<'a> {
    Bytes(u32, &'a [u8]),
    Varint(u32, u64),
    Other,
}

fn varint(buf: &mut &[u8]) -> Result<u64, ApiError> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = buf.split_first().ok_or_else(|| bad("truncated varint"))?;
        *buf = rest;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(out);
        }
    }
    Err(bad("varint too long"))
}

pub(crate) fn fields(mut buf: &[u8]) -> Result<Vec<Field<'_>>, ApiError> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let key = varint(&mut buf)?;
        let number = u32::try_from(key >> 3).map_err(|_| bad("field number"))?;
        match key & 7 {
            0 => {
                let v = varint(&mut buf)?;
                out.push(Field::Varint(number, v));
            }
            1 | 5 => {
                let n = if key & 7 == 1 { 8 } else { 4 };
                buf = buf.get(n..).ok_or_else(|| bad("truncated fixed field"))?;
                out.push(Field::Other);
            }
            2 => {
                let len = usize::try_from(varint(&mut buf)?).map_err(|_| bad("length"))?;
                let bytes = buf.get(..len).ok_or_else(|| bad("truncated field"))?;
                buf = &buf[len..];
                out.push(Field::Bytes(number, bytes));
            }
            _ => return Err(bad("unsupported wire type")),
        }
    }
    Ok(out)
}

pub(crate) fn string(bytes: &[u8]) -> Result<String, ApiError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| bad("string is not UTF-8"))
}

fn map_entry(bytes: &[u8]) -> Result<(String, String), ApiError> {
    let (k, v) = bytes_entry(bytes)?;
    Ok((k, string(&v)?))
}

/// A `map<string, bytes>` entry.
fn bytes_entry(bytes: &[u8]) -> Result<(String, Vec<u8>), ApiError> {
    let (mut k, mut v) = (String::new(), Vec::new());
    for f in fields(bytes)? {
        match f {
            Field::Bytes(1, b) => k = string(b)?,
            Field::Bytes(2, b) => v = b.to_vec(),
            _ => {}
        }
    }
    Ok((k, v))
}

/// The JSON of a `map<string, bytes>` value: base64, as Kubernetes' JSON has it.
fn base64(bytes: Vec<u8>) -> Value {
    serde_json::to_value(k8s_openapi::ByteString(bytes)).unwrap_or(Value::Null)
}

/// The fields besides metadata of the kinds kubectl creates from protobuf, by their
/// numbers in `k8s.io/api/core/v1/generated.proto`.
fn kind_fields(kind: &str, raw: &[u8], obj: &mut Map<String, Value>) -> Result<(), ApiError> {
    let mut maps: [Map<String, Value>; 3] = Default::default();
    for f in fields(raw)? {
        match (kind, f) {
            (_, Field::Bytes(1, _)) => {}
            ("ConfigMap", Field::Bytes(2, b)) | ("Secret", Field::Bytes(4, b)) => {
                let (k, v) = map_entry(b)?;
                maps[0].insert(k, json!(v));
            }
            ("ConfigMap", Field::Bytes(3, b)) | ("Secret", Field::Bytes(2, b)) => {
                let (k, v) = bytes_entry(b)?;
                maps[1].insert(k, base64(v));
            }
            ("ConfigMap", Field::Varint(4, v)) | ("Secret", Field::Varint(5, v)) => {
                obj.insert("immutable".into(), json!(v != 0));
            }
            ("Secret", Field::Bytes(3, b)) => {
                obj.insert("type".into(), json!(string(b)?));
            }
            ("ServiceAccount", Field::Varint(4, v)) => {
                obj.insert("automountServiceAccountToken".into(), json!(v != 0));
            }
            ("Namespace", _) => {}
            // Anything else would be dropped silently: refuse it instead.
            _ => {
                return Err(ApiError::UnsupportedMediaType(format!(
                    "a protobuf {kind} with fields beyond what kubectl create sends is not supported; send JSON"
                )));
            }
        }
    }
    let [strings, bytes, _] = maps;
    let (string_field, bytes_field) = if kind == "Secret" {
        ("stringData", "data")
    } else {
        ("data", "binaryData")
    };
    for (field, map) in [(string_field, strings), (bytes_field, bytes)] {
        if !map.is_empty() {
            obj.insert(field.into(), Value::Object(map));
        }
    }
    Ok(())
}

pub(crate) fn object_meta(bytes: &[u8]) -> Result<Value, ApiError> {
    let mut meta = Map::new();
    let (mut labels, mut annotations) = (Map::new(), Map::new());
    for f in fields(bytes)? {
        match f {
            // Empty strings are proto2's unset, which JSON leaves out.
            Field::Bytes(1, b) if !b.is_empty() => {
                meta.insert("name".into(), json!(string(b)?));
            }
            // Empty strings are proto2's unset, which JSON leaves out.
            Field::Bytes(2, b) if !b.is_empty() => {
                meta.insert("generateName".into(), json!(string(b)?));
            }
            // Empty strings are proto2's unset, which JSON leaves out.
            Field::Bytes(3, b) if !b.is_empty() => {
                meta.insert("namespace".into(), json!(string(b)?));
            }
            Field::Bytes(11, b) => {
                let (k, v) = map_entry(b)?;
                labels.insert(k, json!(v));
            }
            Field::Bytes(12, b) => {
                let (k, v) = map_entry(b)?;
                annotations.insert(k, json!(v));
            }
            _ => {}
        }
    }
    if !labels.is_empty() {
        meta.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        meta.insert("annotations".into(), Value::Object(annotations));
    }
    Ok(Value::Object(meta))
}

/// Decodes a protobuf body of `kind` (Namespace, ServiceAccount, ConfigMap, Secret) into
/// the JSON the rest of the shim takes.
pub(crate) fn decode_object(body: &[u8], kind: &str) -> Result<Value, ApiError> {
    let body = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("missing k8s protobuf prefix"))?;
    let mut raw = None;
    let mut found_kind = String::new();
    for f in fields(body)? {
        match f {
            Field::Bytes(1, type_meta) => {
                for tf in fields(type_meta)? {
                    if let Field::Bytes(2, k) = tf {
                        found_kind = string(k)?;
                    }
                }
            }
            Field::Bytes(2, r) => raw = Some(r),
            _ => {}
        }
    }
    if found_kind != kind {
        return Err(ApiError::BadRequest(format!(
            "expected a {kind} in the protobuf body, got {found_kind:?}"
        )));
    }
    let raw = raw.ok_or_else(|| bad("no object"))?;
    let mut meta = json!({});
    for f in fields(raw)? {
        if let Field::Bytes(1, m) = f {
            meta = object_meta(m)?;
        }
    }
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!("v1"));
    obj.insert("kind".into(), json!(kind));
    obj.insert("metadata".into(), meta);
    kind_fields(kind, raw, &mut obj)?;
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ld(number: u8, bytes: &[u8]) -> Vec<u8> {
        let mut v = vec![(number << 3) | 2, u8::try_from(bytes.len()).unwrap()];
        v.extend_from_slice(bytes);
        v
    }

    #[test]
    fn a_namespace_create_body_decodes_to_its_name_and_labels() {
        let label = [ld(1, b"team"), ld(2, b"a")].concat();
        let meta = [ld(1, b"team-a"), ld(11, &label)].concat();
        let ns = ld(1, &meta);
        let type_meta = [ld(1, b"v1"), ld(2, b"Namespace")].concat();
        let body = [MAGIC.to_vec(), ld(1, &type_meta), ld(2, &ns)].concat();
        let v = decode_object(&body, "Namespace").unwrap();
        assert_eq!(
            v["metadata"],
            json!({"name": "team-a", "labels": {"team": "a"}})
        );
    }

    #[test]
    fn garbage_is_a_bad_request_not_a_panic() {
        for body in [&b""[..], b"k8s\0\xff", b"k8s\0\x0a\x05ab", b"nope"] {
            assert_eq!(
                decode_object(body, "Namespace")
                    .unwrap_err()
                    .code_and_reason()
                    .0,
                400
            );
        }
    }
}
