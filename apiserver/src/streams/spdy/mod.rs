//! SPDY/3.1, as kubectl and kubelet speak it for `exec`, `attach` and
//! `port-forward` (Go's `moby/spdystream`): [`frame`] (the wire format),
//! [`headers`] (zlib-compressed header blocks with the SPDY dictionary),
//! [`session`] (sans-IO: bytes in → events, commands → bytes) and [`conn`] (the
//! async server driver with bounded buffers). [`tunnel`] carries the same bytes
//! inside WebSocket binary messages (`SPDY/3.1+portforward.k8s.io`, kubectl ≥ 1.31).
//!
//! Every decoder returns errors on bad input, never panics; an error ends the
//! connection, since the peer's zlib stream can no longer be followed.

pub(crate) mod conn;
mod dictionary;
pub(crate) mod frame;
pub(crate) mod headers;
pub(crate) mod session;
#[cfg(test)]
pub(crate) mod test_client;
pub(crate) mod tunnel;
pub(crate) mod upgrade;

pub(crate) use conn::{Connection, Stream, StreamWriter};

/// Why a SPDY connection failed.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum SpdyError {
    /// The peer broke the protocol.
    #[error("SPDY protocol error: {0}")]
    Protocol(String),
    /// zlib refused a header block.
    #[error("SPDY header compression: {0}")]
    Zlib(String),
    /// The connection is gone.
    #[error("the SPDY connection is closed")]
    Closed,
}
