//! The log source: where `kubectl logs` reads from. The shim only resolves the pod and
//! container; the bytes come from whoever fills this trait (the framework, or a test).

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Pod;

use crate::error::ApiError;

/// A stream of log bytes; ends when the log ends (or, when following, when the container
/// ends or the reader goes away).
pub type LogStream = BoxStream<'static, Result<Bytes, std::io::Error>>;

/// What `kubectl logs` asked for, with the container already resolved against the pod.
#[derive(Debug, Clone)]
pub struct LogRequest {
    /// The pod as stored.
    pub pod: Pod,
    /// Namespace of the pod.
    pub namespace: String,
    /// Name of the pod.
    pub name: String,
    /// The container (always set: defaulted when the pod has one container).
    pub container: String,
    /// Keep streaming new output (`-f`).
    pub follow: bool,
    /// Only the last N lines (`--tail`).
    pub tail_lines: Option<i64>,
    /// At most this many bytes (`--limit-bytes`).
    pub limit_bytes: Option<i64>,
    /// The previous instance's log (`-p`).
    pub previous: bool,
    /// Prefix each line with the time it was written (`--timestamps`).
    pub timestamps: bool,
    /// Only lines written at or after this time (`--since`, `--since-time`,
    /// already resolved against the API's clock).
    pub since: Option<std::time::SystemTime>,
}

/// Why a log cannot be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LogError {
    /// The container has not started or its log is gone: 400, as Kubernetes answers
    /// `container "c" in pod "p" is waiting to start`.
    #[error("{0}")]
    NotReady(String),
    /// The source cannot serve logs now: 503.
    #[error("{0}")]
    Unavailable(String),
}

impl From<LogError> for ApiError {
    fn from(e: LogError) -> Self {
        match e {
            LogError::NotReady(m) => ApiError::BadRequest(m),
            LogError::Unavailable(m) => ApiError::Unavailable(m),
        }
    }
}

/// The future a [`LogSource`] returns.
pub type LogFuture<'a> = Pin<Box<dyn Future<Output = Result<LogStream, LogError>> + Send + 'a>>;

/// Supplies container logs. Implemented by the framework; tests use their own.
pub trait LogSource: Send + Sync + 'static {
    /// Opens the log `req` names.
    fn logs(&self, req: LogRequest) -> LogFuture<'_>;
}

/// The log source of an API with none configured: every request is 503.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoLogs;

impl LogSource for NoLogs {
    fn logs(&self, _req: LogRequest) -> LogFuture<'_> {
        Box::pin(async { Err(LogError::Unavailable("no log source is configured".into())) })
    }
}
