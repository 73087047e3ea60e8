//! What wraps every Kubernetes protobuf object: the four bytes `k8s\0`, then a
//! `runtime.Unknown` whose `typeMeta` names the object's `apiVersion` and `kind` and
//! whose `raw` is the object's message.

use prost_reflect::bytes::Bytes;
use prost_reflect::{DynamicMessage, MessageDescriptor};
use serde_json::Value;

use super::{Error, schema, walker};

/// The four bytes every Kubernetes protobuf body starts with.
pub(super) const MAGIC: &[u8] = b"k8s\0";

const UNKNOWN: &str = "k8s.io.apimachinery.pkg.runtime.Unknown";

/// An opened envelope.
pub(super) struct Envelope {
    pub(super) api_version: String,
    pub(super) kind: String,
    pub(super) raw: Bytes,
}

/// Opens the envelope of `body`.
pub(super) fn open(body: &[u8]) -> Result<Envelope, Error> {
    let rest = body.strip_prefix(MAGIC).ok_or_else(|| {
        Error::Malformed("the body does not start with the k8s protobuf prefix".into())
    })?;
    if rest.is_empty() {
        return Err(Error::Malformed("empty body".into()));
    }
    let desc = schema::by_name(UNKNOWN)
        .ok_or_else(|| Error::Malformed("the protobuf schemas are not loaded".into()))?;
    let unknown = DynamicMessage::decode(desc, rest)
        .map_err(|e| Error::Malformed(format!("the envelope: {}", malformed(e))))?;
    let string = |number: u32, from: &DynamicMessage| {
        from.get_field_by_number(number)
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    // Go reads neither contentEncoding nor contentType: `raw` is always the object's
    // protobuf. Anything else there could not decode, so it is refused by name.
    let encoding = string(3, &unknown);
    if !encoding.is_empty() {
        return Err(Error::Malformed(format!(
            "contentEncoding {encoding:?} is not supported"
        )));
    }
    let content_type = string(4, &unknown);
    if !content_type.is_empty() && !super::is_protobuf(&content_type) {
        return Err(Error::Malformed(format!(
            "an object of contentType {content_type:?} is not supported"
        )));
    }
    let (api_version, kind) = match unknown.get_field_by_number(1).as_deref() {
        Some(prost_reflect::Value::Message(type_meta)) => {
            (string(1, type_meta), string(2, type_meta))
        }
        _ => Default::default(),
    };
    let raw = unknown
        .get_field_by_number(2)
        .and_then(|v| v.as_bytes().cloned())
        .unwrap_or_default();
    Ok(Envelope {
        api_version,
        kind,
        raw,
    })
}

/// Decodes `raw` as `message` and returns its JSON with `apiVersion` and `kind`.
pub(super) fn object(
    message: MessageDescriptor,
    raw: Bytes,
    api_version: &str,
    kind: &str,
) -> Result<Value, Error> {
    let object = DynamicMessage::decode(message, raw)
        .map_err(|e| Error::Malformed(format!("{kind}: {}", malformed(e))))?;
    let mut json = walker::message(&object).map_err(|p| Error::Malformed(p.to_string()))?;
    if let Value::Object(map) = &mut json {
        map.insert("apiVersion".into(), api_version.into());
        map.insert("kind".into(), kind.into());
    }
    Ok(json)
}

/// What was wrong with the bytes, as prost says it: it never quotes them.
fn malformed(e: prost_reflect::prost::DecodeError) -> String {
    let msg = e.to_string();
    msg.strip_prefix("failed to decode Protobuf message: ")
        .unwrap_or(&msg)
        .to_owned()
}
