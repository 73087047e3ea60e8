//! Container streams: `kubectl exec`, `attach` and `port-forward`.
//!
//! The shim terminates kubectl's protocols (WebSocket `v5.channel.k8s.io` /
//! `v4.channel.k8s.io` in [`websocket`], SPDY/3.1 in `spdy_exec` and `portforward`) and
//! hands the embedder one simple shape: a [`StreamTarget`] in, a pair of bounded
//! [`Channels`] of [`Frame`]s out. Who runs the container (the framework dialling the
//! pod's executor) fills [`ContainerStreams`]; the shim knows nothing of where.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;
use k8s_openapi::api::core::v1::Pod;

use crate::error::ApiError;

pub(crate) mod http;
pub(crate) mod portforward;
pub(crate) mod portforward_ws;
pub(crate) mod spdy;
pub(crate) mod spdy_exec;
pub(crate) mod websocket;

/// Channel numbers of `v5.channel.k8s.io` (and of the executor's own protocol).
pub mod channel {
    /// The container's standard input.
    pub const STDIN: u8 = 0;
    /// The container's standard output (port-forward: the error channel is 1).
    pub const STDOUT: u8 = 1;
    /// The container's standard error.
    pub const STDERR: u8 = 2;
    /// The outcome: a metav1 `Status` as JSON, sent once.
    pub const ERROR: u8 = 3;
    /// Terminal size changes, `{"Width":W,"Height":H}`.
    pub const RESIZE: u8 = 4;
    /// v5's half-close: the data is the one channel that ended.
    pub const CLOSE: u8 = 255;
}

/// One frame of a container stream: v5.channel.k8s.io numbering.
/// 0 stdin, 1 stdout, 2 stderr, 3 error (a metav1 Status JSON; exec's exit code as
/// kubelet sends it: reason NonZeroExitCode, details.causes[{reason: ExitCode, message: "3"}]),
/// 4 resize ({"Width":u16,"Height":u16}), 255 close (data = [channel]).
/// For port-forward: 0 data, 1 error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Which stream the bytes belong to ([`channel`]).
    pub channel: u8,
    /// The bytes.
    pub data: Bytes,
}

impl Frame {
    /// A frame of `data` on `channel`.
    pub fn new(channel: u8, data: impl Into<Bytes>) -> Self {
        Self {
            channel,
            data: data.into(),
        }
    }
}

/// An open stream to a container, both directions bounded (backpressure).
#[derive(Debug)]
pub struct Channels {
    /// Frames to the container (stdin, resize, close).
    pub tx: tokio::sync::mpsc::Sender<Frame>,
    /// Frames from the container (stdout, stderr, error, close); ends when the stream ends.
    pub rx: tokio::sync::mpsc::Receiver<Frame>,
}

/// What to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamOp {
    /// Run `command` in the container.
    Exec {
        /// The command and its arguments (never empty).
        command: Vec<String>,
        /// Pass stdin.
        stdin: bool,
        /// Pass stdout.
        stdout: bool,
        /// Pass stderr (false with a tty: the tty merges it into stdout).
        stderr: bool,
        /// Run on a pty.
        tty: bool,
    },
    /// Attach to the container's own stdio.
    Attach {
        /// Pass stdin.
        stdin: bool,
        /// Pass stdout.
        stdout: bool,
        /// Pass stderr.
        stderr: bool,
        /// The container runs on a pty.
        tty: bool,
    },
    /// One TCP connection to `port` in the pod's network.
    PortForward {
        /// The pod's port.
        port: u16,
    },
}

/// A stream to open: the pod as stored, the container (already resolved against it) and
/// the operation.
#[derive(Debug, Clone)]
pub struct StreamTarget {
    /// The pod as stored.
    pub pod: Pod,
    /// The container's name (port-forward: the pod's first container).
    pub container: String,
    /// What to do.
    pub op: StreamOp,
}

/// Why a stream cannot be opened.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StreamError {
    /// The pod is not running on a node (yet or any more): 400, as kube-apiserver words it
    /// (`pod X does not have a host assigned`).
    #[error("{0}")]
    NotRunning(String),
    /// The container is not part of the pod or not running: 400
    /// (`container Y is not valid for pod X`).
    #[error("{0}")]
    BadContainer(String),
    /// The node's endpoint cannot be reached or refused us: 500.
    #[error("{0}")]
    Unreachable(String),
    /// The embedder serves no streams: 503.
    #[error("{0}")]
    Unavailable(String),
}

impl From<StreamError> for ApiError {
    fn from(e: StreamError) -> Self {
        match e {
            StreamError::NotRunning(m) | StreamError::BadContainer(m) => ApiError::BadRequest(m),
            StreamError::Unreachable(m) => ApiError::Internal(m),
            StreamError::Unavailable(m) => ApiError::Unavailable(m),
        }
    }
}

/// The future a [`ContainerStreams`] returns.
pub type StreamFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Channels, StreamError>> + Send + 'a>>;

/// Opens streams to containers. Implemented by the framework; tests use their own.
pub trait ContainerStreams: Send + Sync + 'static {
    /// Opens the stream `target` names.
    fn open(&self, target: StreamTarget) -> StreamFuture<'_>;
}

/// The streams of an API with none configured: every request is 503.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoStreams;

impl ContainerStreams for NoStreams {
    fn open(&self, _target: StreamTarget) -> StreamFuture<'_> {
        Box::pin(async {
            Err(StreamError::Unavailable(
                "no container streams are configured".into(),
            ))
        })
    }
}
