//! Kubernetes' protobuf request bodies, read as the JSON the rest of the shim takes.
//!
//! kubectl's typed clients (`kubectl create deployment|namespace|configmap|secret|role|
//! clusterrole|rolebinding|token`, `auth can-i`, ...) send their body as
//! `application/vnd.kubernetes.protobuf` whatever the server prefers, and so do
//! controllers built on client-go. Rather than a table of hand-picked fields per kind,
//! the body is decoded by reflection over Kubernetes' own wire schemas (the
//! `generated.proto` of each API package, in `proto/`, compiled into descriptors at
//! build time), so every field of every kind those schemas hold is read:
//!
//! 1. [`envelope`]: the `k8s\0` magic and the `runtime.Unknown` around the object, whose
//!    `apiVersion` and `kind` name its message (`apps/v1` `Deployment` is
//!    `k8s.io.api.apps.v1.Deployment`, see [`schema`]);
//! 2. the object itself, decoded as a `prost_reflect::DynamicMessage` of that message;
//! 3. [`walker`]: that message as Kubernetes JSON, with [`special`] for the types whose
//!    JSON is not their message's shape (times, durations, quantities, int-or-strings,
//!    embedded JSON).
//!
//! What differs from decoding the same object sent as JSON:
//! - Go writes every non-pointer field to protobuf, even when empty, where its JSON
//!   leaves empty ones out (`omitempty`); protobuf does not say which fields are
//!   pointers. Empty nested messages become `{}` (Go's JSON writes those too). Empty
//!   strings are left out: an empty string means "unset" everywhere but the fields
//!   [`walker`] lists. Zero numbers and `false` are kept, since many are pointers where
//!   zero is a choice (`runAsUser: 0`, `replicas: 0`, `allowPrivilegeEscalation: false`),
//!   except the plain fields [`walker`] lists (`metadata.generation`, a probe's periods,
//!   `hostNetwork`, ...), whose zero the shim's defaulting must see as unset. Other plain
//!   zeros (status counters, say) decode to the same typed object either way.
//! - Fields the schemas do not know (from a newer client) are skipped, as kube-apiserver
//!   skips them; `fieldValidation` cannot see them.
//! - An object embedded in a `RawExtension` must be JSON (client-go may nest protobuf
//!   there; the kinds served do not use `RawExtension`).
//!
//! Every failure is a 400 ("error decoding protobuf body: ..."), a kind the schemas lack
//! is a 415, and no error quotes a value (Secrets' data never reaches a message).

mod envelope;
mod schema;
mod special;
pub(crate) use special::go_duration;
mod walker;

#[cfg(test)]
mod tests;

use serde_json::Value;

use crate::error::ApiError;

/// The Content-Type of Kubernetes protobuf bodies.
pub(crate) const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Whether a Content-Type names Kubernetes protobuf.
pub(crate) fn is_protobuf(content_type: &str) -> bool {
    content_type.split(';').next().unwrap_or("").trim() == PROTOBUF
}

/// Why a protobuf body could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// Not a well-formed object of a kind the schemas hold.
    #[error("error decoding protobuf body: {0}")]
    Malformed(String),
    /// The body holds another kind than the endpoint takes.
    #[error("expected a {expected} in the protobuf body, got {got:?}")]
    WrongKind {
        /// The endpoint's kind.
        expected: String,
        /// The body's.
        got: String,
    },
    /// The endpoint's kind has no schema here.
    #[error(
        "protobuf bodies of {kind} ({api_version}) are not supported by this server; send JSON"
    )]
    Unsupported {
        /// The endpoint's kind.
        kind: String,
        /// And its group and version.
        api_version: String,
    },
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        match e {
            Error::Unsupported { .. } => ApiError::UnsupportedMediaType(e.to_string()),
            Error::Malformed(_) | Error::WrongKind { .. } => ApiError::BadRequest(e.to_string()),
        }
    }
}

/// Decodes a protobuf body that an endpoint of `kind` in `api_version` takes, into JSON
/// with its `apiVersion` and `kind`. As kube-apiserver does, an envelope that names no
/// kind or version is taken to hold the endpoint's.
///
/// # Errors
/// 400 for a malformed body or another kind, 415 for a kind without a schema here.
pub(crate) fn decode_object(body: &[u8], api_version: &str, kind: &str) -> Result<Value, ApiError> {
    let env = envelope::open(body)?;
    let got_kind = if env.kind.is_empty() { kind } else { &env.kind };
    let got_version = if env.api_version.is_empty() {
        api_version
    } else {
        &env.api_version
    };
    if (got_version, got_kind) != (api_version, kind) {
        return Err(Error::WrongKind {
            expected: kind.to_owned(),
            got: format!("{got_kind} ({got_version})"),
        }
        .into());
    }
    let message = schema::message(api_version, kind).ok_or_else(|| Error::Unsupported {
        kind: kind.to_owned(),
        api_version: api_version.to_owned(),
    })?;
    Ok(envelope::object(message, env.raw, api_version, kind)?)
}

/// Decodes a protobuf body of whatever kind its envelope names (for bodies whose kind the
/// endpoint checks itself, such as `DeleteOptions` or a `Scale`).
///
/// # Errors
/// 400 for a malformed body, a missing kind or version, or a kind without a schema.
pub(crate) fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let env = envelope::open(body)?;
    if env.kind.is_empty() || env.api_version.is_empty() {
        return Err(Error::Malformed("the object names no kind or apiVersion".into()).into());
    }
    let message = schema::message(&env.api_version, &env.kind).ok_or_else(|| {
        Error::Malformed(format!(
            "no schema for kind {:?} in {:?}",
            env.kind, env.api_version
        ))
    })?;
    Ok(envelope::object(
        message,
        env.raw,
        &env.api_version,
        &env.kind,
    )?)
}
