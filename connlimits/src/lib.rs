//! Serving an axum router with a cap on open connections and a header-read
//! timeout, so idle or half-sent connections cannot use up the descriptors
//! and starve real requests. The API shim (plain HTTP and TLS) and
//! localmesos serve through it: it is the one accept loop of the workspace.
//!
//! # Contract
//!
//! - [`serve_with_handshake`] accepts on a listener, runs each connection's
//!   [`Handshake`] (none for [`Plain`], TLS for the API shim's acceptor)
//!   in that connection's own task, then speaks HTTP/1.1 or HTTP/2 (by
//!   preface; over TLS, by ALPN) on it. [`serve_with_shutdown`] is the
//!   plain-TCP case.
//! - At most [`ConnLimits::max_connections`] connections are open (lowered to
//!   what the descriptor limit leaves, [`effective_max_connections`]), those
//!   still in their handshake included. At the cap a new connection
//!   displaces the oldest one with no request in service (an idle,
//!   half-sent or still-handshaking one), so a flood of idle sockets costs
//!   at most the cap and a real request still gets through; if every open
//!   connection is serving a request the new one is closed.
//! - A connection with no request in service (in its handshake, fresh, idle
//!   keep-alive, or halfway through its headers) is closed after
//!   [`ConnLimits::header_read_timeout`] at a stretch, on HTTP/1.1 and
//!   HTTP/2 alike.
//! - A request counts as in service until its response body ends, so a
//!   watch's connection is never displaced.
//! - Each request carries `ConnectInfo<SocketAddr>` of its peer, and the
//!   extensions its connection's handshake gave.
//! - On shutdown the listener closes, every connection is told to finish
//!   its requests in service (HTTP/2 GOAWAY, HTTP/1.1 close after the
//!   response), and what is still open after [`DRAIN_TIMEOUT`] is dropped.

mod body;
mod serve;
mod slots;

use std::time::Duration;

pub use body::GuardedBody;
pub use serve::{DRAIN_TIMEOUT, Handshake, Plain, serve_with_handshake, serve_with_shutdown};
pub use slots::{Connections, Slot, effective_max_connections};

/// What [`serve_with_handshake`] enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// How long a connection may go without a request in service: to finish
    /// its handshake, to send a request's headers, or idle between requests.
    pub header_read_timeout: Duration,
}
