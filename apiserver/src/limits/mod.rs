//! Limits that keep one client, or thousands of idle sockets, from taking the
//! API down: kube-apiserver's in-flight budgets, request timeout and body limit,
//! a cap on each client's watches, and a connection cap with header-read
//! timeouts, so `/healthz` and kubectl keep answering under a flood.
//!
//! - [`requests::layer`] wraps a router with the per-request limits: bodies
//!   received whole before a request takes a seat, within
//!   [`Limits::body_read_timeout`], and seats shared fairly between users
//!   ([`fair`], after API Priority and Fairness).
//! - The connection limits are the `connlimits` crate's accept loop, which
//!   serves plain TCP and TLS ([`crate::tls::serve`]) alike, HTTP/1.1 and
//!   HTTP/2. [`Limits::connections`] gives their settings.

pub mod fair;
pub mod requests;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;

/// Who a request counts against for [`Limits::max_watches_per_user`]: by
/// default the authenticated user, else the client's address
/// ([`requests::user_or_peer`]).
pub type ClientKey = Arc<dyn Fn(&Request) -> String + Send + Sync>;

/// Which flow a request queues in for a seat (APF's flow distinguisher):
/// by default the authenticated user, else the connection
/// ([`requests::user_or_connection`]).
pub type FlowDistinguisher = ClientKey;

/// Whether a request skips the in-flight budgets: kube-apiserver exempts
/// the group `system:masters`; authentication, once it names groups, says so.
pub type Exempt = Arc<dyn Fn(&Request) -> bool + Send + Sync>;

/// The API server's limits. [`Limits::default`] has kube-apiserver's values.
#[derive(Clone)]
pub struct Limits {
    /// Read-only requests (get, list) served at once; past it 429
    /// (`--max-requests-inflight`, 400). 0 disables the limit, as in kube-apiserver.
    pub max_requests_inflight: usize,
    /// Mutating requests served at once; past it 429
    /// (`--max-mutating-requests-inflight`, 200). 0 disables the limit.
    pub max_mutating_requests_inflight: usize,
    /// How long a non-long-running request may take before 504
    /// (`--request-timeout`, 60s), counted from its headers: receiving its
    /// body, waiting for a seat (at most a quarter of it, as APF) and serving.
    pub request_timeout: Duration,
    /// How long a request's body may take to arrive, counted from its
    /// headers; past it 504, as a request past `--request-timeout`. The body
    /// is received before the request takes a seat, so a slow sender holds
    /// none. kube-apiserver leaves this to `--request-timeout`; mesopod's
    /// flag is `--body-read-timeout` (10s).
    pub body_read_timeout: Duration,
    /// Requests of one flow that may wait for a seat of a full budget; past
    /// it 429 (APF's `queueLengthLimit`, 50). 0 refuses at once, as the
    /// budgets did before APF.
    pub queue_length_limit: usize,
    /// Bytes of request bodies received whole and not yet answered, across
    /// all clients; a body that would pass it gets 429. Bodies are received
    /// before a seat, so without this bound many clients (each flow with
    /// its queue) could make the server hold bodies without end
    /// (`MAX_QUEUED_BODY_BYTES`, 256 MiB). 0: no bound.
    pub max_queued_body_bytes: usize,
    /// Watches (and followed logs) one client may hold open at once; past it
    /// 429. kube-apiserver has no such flag; mesopod's is `--max-watches-per-user`.
    pub max_watches_per_user: usize,
    /// How long a connection may take to send a request's headers, counted
    /// from when it starts waiting for a request; it bounds half-sent requests
    /// and idle keep-alive connections alike (kube-apiserver's
    /// ReadHeaderTimeout, 32s).
    pub header_read_timeout: Duration,
    /// Connections open at once. At the cap a new connection closes the
    /// oldest one that has no request in service; if every one is busy the
    /// new one is closed (`--max-connections`, 4096, at most the descriptor
    /// limit less a reserve).
    pub max_connections: usize,
    /// Who a request's watches count against.
    pub client_key: ClientKey,
    /// Which flow a request waits in for a seat.
    pub flow_distinguisher: FlowDistinguisher,
    /// Requests never refused with 429 (by default those of `system:masters`,
    /// as in kube-apiserver; health probes always are exempt).
    pub exempt: Exempt,
}

impl std::fmt::Debug for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Limits")
            .field("max_requests_inflight", &self.max_requests_inflight)
            .field(
                "max_mutating_requests_inflight",
                &self.max_mutating_requests_inflight,
            )
            .field("request_timeout", &self.request_timeout)
            .field("body_read_timeout", &self.body_read_timeout)
            .field("queue_length_limit", &self.queue_length_limit)
            .field("max_queued_body_bytes", &self.max_queued_body_bytes)
            .field("max_watches_per_user", &self.max_watches_per_user)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("max_connections", &self.max_connections)
            .finish_non_exhaustive()
    }
}

/// kube-apiserver's `--max-requests-inflight` default.
pub const DEFAULT_MAX_REQUESTS_INFLIGHT: usize = 400;
/// kube-apiserver's `--max-mutating-requests-inflight` default.
pub const DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT: usize = 200;
/// kube-apiserver's `--request-timeout` default.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a body may take to arrive: a 3 MiB body (the largest taken)
/// needs 315 KB/s, a pod's few kilobytes next to nothing, and a slow sender
/// is cut off long before `--request-timeout`.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// APF's default `queueLengthLimit`.
pub const DEFAULT_QUEUE_LENGTH_LIMIT: usize = 50;
/// What bodies waiting for a seat or being served may hold in memory at
/// most: room for the seats' and queues' ordinary bodies (a pod is a few
/// KiB; 600 seats of 64 KiB are 38 MiB), and far below the machine's
/// memory even when every body is the largest allowed (85 of 3 MiB).
pub const DEFAULT_MAX_QUEUED_BODY_BYTES: usize = 256 * 1024 * 1024;
/// Watches per client: enough for any controller (one per resource it
/// watches, a few times over), far below the thousands that once used
/// hundreds of megabytes.
pub const DEFAULT_MAX_WATCHES_PER_USER: usize = 500;
/// kube-apiserver's ReadHeaderTimeout.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);
/// Connections at once by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

impl Limits {
    /// The connection limits among these.
    pub fn connections(&self) -> connlimits::ConnLimits {
        connlimits::ConnLimits {
            max_connections: self.max_connections,
            header_read_timeout: self.header_read_timeout,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_requests_inflight: DEFAULT_MAX_REQUESTS_INFLIGHT,
            max_mutating_requests_inflight: DEFAULT_MAX_MUTATING_REQUESTS_INFLIGHT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            queue_length_limit: DEFAULT_QUEUE_LENGTH_LIMIT,
            max_queued_body_bytes: DEFAULT_MAX_QUEUED_BODY_BYTES,
            max_watches_per_user: DEFAULT_MAX_WATCHES_PER_USER,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            client_key: Arc::new(requests::user_or_peer),
            flow_distinguisher: Arc::new(requests::user_or_connection),
            exempt: Arc::new(requests::is_system_master),
        }
    }
}
