//! Tests of the protobuf decoder. Bodies are encoded from the same descriptors the
//! decoder reads (fields set by name, then `encode_to_vec`), laid out as Go writes them:
//! every non-pointer field present, even when empty.

#![allow(clippy::unwrap_used, clippy::panic)]

mod errors;
mod http;
mod kinds;

use std::collections::HashMap;

use prost::Message as _;
use prost_reflect::{
    DynamicMessage, FieldDescriptor, Kind, MapKey, MessageDescriptor, Value as Proto,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::envelope::MAGIC;
use super::schema;
use crate::decode::{FieldValidation, decode_resource};

/// The message `name` (full name) with the fields of `spec` set by name: objects are
/// messages or maps, arrays repeated fields, strings of a `bytes` field its bytes.
pub(super) fn build(name: &str, spec: &Value) -> DynamicMessage {
    let desc = schema::by_name(name).unwrap_or_else(|| panic!("no message {name}"));
    build_desc(&desc, spec)
}

fn build_desc(desc: &MessageDescriptor, spec: &Value) -> DynamicMessage {
    let mut msg = DynamicMessage::new(desc.clone());
    for (k, v) in spec.as_object().unwrap() {
        let field = desc
            .get_field_by_name(k)
            .unwrap_or_else(|| panic!("no field {k} in {}", desc.full_name()));
        let value = field_value(&field, v);
        msg.set_field(&field, value);
    }
    msg
}

fn field_value(field: &FieldDescriptor, v: &Value) -> Proto {
    if field.is_map() {
        let entry = field.kind();
        let entry = entry.as_message().unwrap();
        let value_kind = entry.map_entry_value_field().kind();
        let map: HashMap<MapKey, Proto> = v
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (MapKey::String(k.clone()), scalar(&value_kind, v)))
            .collect();
        Proto::Map(map)
    } else if field.is_list() {
        let kind = field.kind();
        Proto::List(
            v.as_array()
                .unwrap()
                .iter()
                .map(|v| scalar(&kind, v))
                .collect(),
        )
    } else {
        scalar(&field.kind(), v)
    }
}

fn scalar(kind: &Kind, v: &Value) -> Proto {
    match kind {
        Kind::String => Proto::String(v.as_str().unwrap().to_owned()),
        Kind::Bytes => Proto::Bytes(v.as_str().unwrap().as_bytes().to_vec().into()),
        Kind::Bool => Proto::Bool(v.as_bool().unwrap()),
        Kind::Int32 => Proto::I32(i32::try_from(v.as_i64().unwrap()).unwrap()),
        Kind::Int64 => Proto::I64(v.as_i64().unwrap()),
        Kind::Double => Proto::F64(v.as_f64().unwrap()),
        Kind::Message(m) => Proto::Message(build_desc(m, v)),
        other => panic!("no test encoding for {other:?}"),
    }
}

/// A Kubernetes protobuf body: the magic, then a `runtime.Unknown` holding `object`.
pub(super) fn body(api_version: &str, kind: &str, object: &DynamicMessage) -> Vec<u8> {
    envelope_with(api_version, kind, &object.encode_to_vec())
}

/// A body whose object is the bytes `raw`.
pub(super) fn envelope_with(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut unknown = build(
        "k8s.io.apimachinery.pkg.runtime.Unknown",
        &serde_json::json!({"typeMeta": {"apiVersion": api_version, "kind": kind}}),
    );
    unknown.set_field_by_name("raw", Proto::Bytes(raw.to_vec().into()));
    [MAGIC, &unknown.encode_to_vec()].concat()
}

/// Decodes `body` at an endpoint of `T`, and checks that the JSON decodes as `T` with
/// strict field validation: every field it holds is one of `T`'s.
pub(super) fn decode_as<T>(body: &[u8]) -> Value
where
    T: k8s_openapi::Resource + DeserializeOwned + Serialize,
{
    let json = super::decode_object(body, T::API_VERSION, T::KIND).unwrap();
    let (_, warnings) = decode_resource::<T>(&json, FieldValidation::Strict)
        .unwrap_or_else(|e| panic!("{e}: {json:#}"));
    assert!(warnings.is_empty(), "{warnings:?}");
    json
}

/// The HTTP status of decoding `body` at an endpoint of `api_version` `kind`.
pub(super) fn status(body: &[u8], api_version: &str, kind: &str) -> u16 {
    match super::decode_object(body, api_version, kind) {
        Ok(_) => 200,
        Err(e) => e.code_and_reason().0,
    }
}
