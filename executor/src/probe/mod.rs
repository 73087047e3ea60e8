//! Container probes (`livenessProbe`, `readinessProbe`, `startupProbe`)
//! with kubelet's semantics.
//!
//! Each probe of each container run is one tokio task ([`worker`]) ticking
//! at `periodSeconds`: no thread per probe, so an agent with hundreds of
//! probed pods stays cheap. Network probes run on a one-thread runtime of
//! their own ([`runtime`]), exec probes on the executor's. A worker
//! reports to its pod's supervisor only what the supervisor acts on: a
//! failed attempt (the `Unhealthy` event), a warning (`ProbeWarning`), and
//! a result that crossed its threshold (readiness flips, startup done,
//! liveness or startup failed).
//!
//! Handlers: [`exec`] (a command in the container, through the
//! [`exec::ProbeExec`] trait), [`http`] (`httpGet`), [`tcp`] (`tcpSocket`)
//! and [`grpc`] (`grpc.health.v1.Health/Check` over HTTP/2).

mod dial;
pub mod exec;
pub mod grpc;
mod grpc_wire;
pub mod http;
pub mod load;
pub mod runtime;
mod spec;
pub mod tcp;
pub(crate) mod worker;

pub use spec::{Handler, HttpGet, ProbeKind, ProbeSpec, Scheme};

/// One attempt's outcome, as kubelet's prober sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The probe passed.
    Success,
    /// The probe passed with a warning (a redirect to another host).
    Warning(String),
    /// The probe failed; the text is kubelet's output for the event.
    Failure(String),
    /// The prober itself failed; kubelet discards the attempt.
    Error(String),
}

/// The user agent kubelet's HTTP probes send (`kube-probe/<major>.<minor>`).
pub const USER_AGENT: &str = "kube-probe/1.33";

/// At most this much of a probe's output is kept (kubelet's 10 KiB).
pub const MAX_OUTPUT: usize = 10 * 1024;

/// Runs one attempt of `handler` against `host` (the pod's IP unless the
/// handler names one), bounded by `timeout`.
pub async fn run_once(
    handler: &Handler,
    host: &str,
    timeout: std::time::Duration,
    exec: &dyn exec::ProbeExec,
) -> Outcome {
    match handler {
        Handler::Exec { command } => exec::probe(exec, command, timeout).await,
        Handler::Http(get) => http::probe(get, host, timeout).await,
        Handler::Tcp { host: h, port } => {
            tcp::probe(h.as_deref().unwrap_or(host), *port, timeout).await
        }
        Handler::Grpc { port, service } => grpc::probe(host, *port, service, timeout).await,
        Handler::Invalid(why) => Outcome::Error(why.clone()),
    }
}
