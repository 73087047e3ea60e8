//! Request plumbing: query parameters, path segments and bodies, each failing with a
//! `Status` (never axum's plain-text rejections), and content negotiation.

use std::collections::HashMap;

use axum::body::Body;
use axum::extract::{FromRequestParts, Path, Query};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use serde::de::DeserializeOwned;

use crate::api::WriteOptions;
use crate::decode::{FieldValidation, MAX_BODY_BYTES};
use crate::error::ApiError;

/// The query string as a map (a key given twice keeps the last value; empty values are
/// kept as empty, which every parameter treats as unset).
#[derive(Debug, Default)]
pub(crate) struct Params(pub(crate) HashMap<String, String>);

impl Params {
    /// The value of `key`, `None` when absent or empty.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.0
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// A boolean parameter (`true` or `1`).
    pub(crate) fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }

    /// An integer parameter; 400 if present and not an integer.
    pub(crate) fn int(&self, key: &str) -> Result<Option<i64>, ApiError> {
        self.get(key)
            .map(|v| {
                v.parse()
                    .map_err(|_| ApiError::BadRequest(format!("invalid {key}: {v:?}")))
            })
            .transpose()
    }

    /// `dryRun` and `fieldValidation`.
    pub(crate) fn write_options(&self) -> Result<WriteOptions, ApiError> {
        let dry_run = match self.get("dryRun") {
            None => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::BadRequest(format!(
                    "unsupported dryRun value {other:?}, must be All"
                )));
            }
        };
        Ok(WriteOptions {
            dry_run,
            field_validation: FieldValidation::parse(self.get("fieldValidation"))?,
        })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        Query::<HashMap<String, String>>::try_from_uri(&parts.uri)
            .map(|Query(map)| Self(map))
            .map_err(|e| ApiError::BadRequest(format!("invalid query: {e}")))
    }
}

/// Path parameters, rejected as a `Status`.
pub(crate) struct ApiPath<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(t)| Self(t))
            .map_err(|e| ApiError::BadRequest(format!("invalid path: {e}")))
    }
}

/// Bytes past the limit that are still read (and dropped) before answering 413, so a
/// client that is still sending gets the answer rather than a reset connection.
const DRAIN_BYTES: usize = MAX_BODY_BYTES;

/// Reads the body, refusing more than [`MAX_BODY_BYTES`] with 413.
pub(crate) async fn read_body(headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let mut stream = body.into_data_stream();
    let mut buf = BytesMut::new();
    let mut seen = 0usize;
    let too_large = declared.is_some_and(|n| n > MAX_BODY_BYTES);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ApiError::BadRequest(format!("error reading body: {e}")))?;
        seen += chunk.len();
        if too_large || seen > MAX_BODY_BYTES {
            if seen > MAX_BODY_BYTES + DRAIN_BYTES {
                break;
            }
            continue;
        }
        buf.extend_from_slice(&chunk);
    }
    if too_large || seen > MAX_BODY_BYTES {
        return Err(ApiError::TooLarge {
            size: seen.max(declared.unwrap_or(0)),
            limit: MAX_BODY_BYTES,
        });
    }
    Ok(buf.freeze())
}

/// The request's Content-Type (empty if none).
pub(crate) fn content_type(headers: &HeaderMap) -> &str {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Accepts JSON, YAML and Kubernetes protobuf bodies for create and replace; 415
/// otherwise.
pub(crate) fn object_content_type(headers: &HeaderMap) -> Result<&str, ApiError> {
    let ct = content_type(headers);
    let base = ct.split(';').next().unwrap_or("").trim();
    match base {
        ""
        | "application/json"
        | "application/yaml"
        | "application/x-yaml"
        | "text/yaml"
        | "*/*"
        | crate::protobuf::PROTOBUF => Ok(ct),
        other => Err(ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got {other:?})"
        ))),
    }
}

/// What the client asked to get back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// The objects themselves (also for protobuf-first clients: JSON is always answered).
    Object,
    /// A `meta.k8s.io/v1` Table.
    Table,
    /// `PartialObjectMetadata(List)`.
    Metadata,
}

/// Picks the first media range of `Accept` the shim can serve.
pub(crate) fn negotiate(headers: &HeaderMap) -> Format {
    let accept = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        if !matches!(media, "application/json" | "*/*" | "application/*") {
            continue;
        }
        let params: HashMap<&str, &str> = parts.filter_map(|p| p.split_once('=')).collect();
        match (params.get("as"), params.get("g"), params.get("v")) {
            (None, _, _) => return Format::Object,
            (Some(&"Table"), Some(&"meta.k8s.io"), Some(&"v1")) => return Format::Table,
            (
                Some(&("PartialObjectMetadata" | "PartialObjectMetadataList")),
                Some(&"meta.k8s.io"),
                Some(&"v1"),
            ) => {
                return Format::Metadata;
            }
            _ => continue,
        }
    }
    Format::Object
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Ok(v) = v.parse() {
            h.insert(axum::http::header::ACCEPT, v);
        }
        h
    }

    #[test]
    fn kubectl_table_accept_gets_a_table_and_protobuf_first_gets_json() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(negotiate(&accept(kubectl)), Format::Table);
        assert_eq!(
            negotiate(&accept(
                "application/vnd.kubernetes.protobuf,application/json"
            )),
            Format::Object
        );
        assert_eq!(
            negotiate(&accept(
                "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
            )),
            Format::Object
        );
        assert_eq!(negotiate(&HeaderMap::new()), Format::Object);
    }
}
