//! The two encodings Mesos speaks, chosen per connection.
//!
//! A request body's encoding comes from its `Content-Type`; a response
//! stream's encoding comes from `Accept`. Mesos answers JSON when `Accept` is
//! missing or `*/*`, which is why a protobuf client must ask for protobuf
//! explicitly.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// `Content-Type` of protobuf bodies and streams.
pub const PROTOBUF: &str = "application/x-protobuf";
/// `Content-Type` of JSON bodies and streams.
pub const JSON: &str = "application/json";

/// One of Mesos' two encodings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Codec {
    /// Binary protobuf (`application/x-protobuf`).
    Protobuf,
    /// Mesos' JSON mapping (`application/json`).
    Json,
}

/// Why bytes could not be decoded into a message.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not valid protobuf for the message.
    #[error("invalid protobuf: {0}")]
    Protobuf(#[from] prost::DecodeError),
    /// Not valid JSON for the message.
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Why a media type was not one Mesos speaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MediaTypeError {
    /// No `Content-Type` at all: Mesos answers 400.
    #[error("expecting 'Content-Type' to be present")]
    Missing,
    /// A `Content-Type` Mesos does not speak: Mesos answers 415.
    #[error("expecting 'Content-Type' of application/json or application/x-protobuf, got '{0}'")]
    Unsupported(String),
    /// An `Accept` that allows neither encoding: Mesos answers 406.
    #[error("expecting 'Accept' to allow application/json or application/x-protobuf, got '{0}'")]
    NotAcceptable(String),
}

impl Codec {
    /// The media type of this encoding.
    pub fn content_type(self) -> &'static str {
        match self {
            Codec::Protobuf => PROTOBUF,
            Codec::Json => JSON,
        }
    }

    /// The codec of a request body, from its `Content-Type` header.
    pub fn from_content_type(header: Option<&str>) -> Result<Codec, MediaTypeError> {
        let header = header.ok_or(MediaTypeError::Missing)?;
        match media_type(header).as_str() {
            PROTOBUF => Ok(Codec::Protobuf),
            JSON => Ok(Codec::Json),
            _ => Err(MediaTypeError::Unsupported(header.to_owned())),
        }
    }

    /// The codec for a response, from the request's `Accept` header.
    ///
    /// A missing header or a wildcard gets JSON, as Mesos does. Among
    /// explicit types the first acceptable one in the header wins; `q=0`
    /// excludes a type.
    pub fn from_accept(header: Option<&str>) -> Result<Codec, MediaTypeError> {
        let Some(header) = header.filter(|h| !h.trim().is_empty()) else {
            return Ok(Codec::Json);
        };
        for part in header.split(',') {
            if part
                .split(';')
                .skip(1)
                .any(|p| matches!(p.trim(), "q=0" | "q=0.0" | "q=0.00" | "q=0.000"))
            {
                continue;
            }
            match media_type(part).as_str() {
                PROTOBUF => return Ok(Codec::Protobuf),
                JSON | "application/*" | "*/*" => return Ok(Codec::Json),
                _ => {}
            }
        }
        Err(MediaTypeError::NotAcceptable(header.to_owned()))
    }

    /// Encodes a message.
    pub fn encode<M: prost::Message + Serialize>(self, msg: &M) -> Vec<u8> {
        match self {
            Codec::Protobuf => msg.encode_to_vec(),
            // Serialising our own proto types cannot fail: every map key is a
            // string and every enum number we hold came from a known value.
            // Should one ever fail, an empty object is a safe, visible answer.
            Codec::Json => serde_json::to_vec(msg).unwrap_or_else(|_| b"{}".to_vec()),
        }
    }

    /// Decodes a message; unknown fields and keys are skipped.
    pub fn decode<M: prost::Message + DeserializeOwned + Default>(
        self,
        bytes: &[u8],
    ) -> Result<M, DecodeError> {
        match self {
            Codec::Protobuf => Ok(M::decode(bytes)?),
            Codec::Json => Ok(serde_json::from_slice(bytes)?),
        }
    }
}

/// The bare, lower-cased media type of a header value (`type/subtype`).
fn media_type(header: &str) -> String {
    header
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}
