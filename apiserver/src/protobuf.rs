//! The little of Kubernetes' protobuf encoding the shim must read: typed clients inside
//! kubectl (e.g. `kubectl create namespace`) send their body as
//! `application/vnd.kubernetes.protobuf` whatever the server prefers. Only object
//! metadata (name, generateName, labels, annotations) is decoded, which is all a
//! namespace create carries; any other protobuf body is 415.

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
    let (mut k, mut v) = (String::new(), String::new());
    for f in fields(bytes)? {
        match f {
            Field::Bytes(1, b) => k = string(b)?,
            Field::Bytes(2, b) => v = string(b)?,
            _ => {}
        }
    }
    Ok((k, v))
}

pub(crate) fn object_meta(bytes: &[u8]) -> Result<Value, ApiError> {
    let mut meta = Map::new();
    let (mut labels, mut annotations) = (Map::new(), Map::new());
    for f in fields(bytes)? {
        match f {
            Field::Bytes(1, b) => {
                meta.insert("name".into(), json!(string(b)?));
            }
            Field::Bytes(2, b) => {
                meta.insert("generateName".into(), json!(string(b)?));
            }
            Field::Bytes(3, b) => {
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

/// Decodes a protobuf body of `kind` into the JSON the rest of the shim takes; only the
/// metadata survives, so only kinds whose create needs nothing else are accepted.
pub(crate) fn decode_metadata_only(body: &[u8], kind: &str) -> Result<Value, ApiError> {
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
    Ok(json!({"apiVersion": "v1", "kind": kind, "metadata": meta}))
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
        let v = decode_metadata_only(&body, "Namespace").unwrap();
        assert_eq!(
            v["metadata"],
            json!({"name": "team-a", "labels": {"team": "a"}})
        );
    }

    #[test]
    fn garbage_is_a_bad_request_not_a_panic() {
        for body in [&b""[..], b"k8s\0\xff", b"k8s\0\x0a\x05ab", b"nope"] {
            assert_eq!(
                decode_metadata_only(body, "Namespace")
                    .unwrap_err()
                    .code_and_reason()
                    .0,
                400
            );
        }
    }
}
