//! The executor's streaming endpoint: what `kubectl exec`, `attach` and `port-forward`
//! reach, through the API shim, on the agent that runs the pod.
//!
//! The shim dials `wss://<agent>:<port>/{exec,attach,portforward}/...` over TLS with a
//! certificate for the executor's own P-256 key (which the shim pins), presenting a
//! short-lived credential minted for this executor ([`auth`]); a request without it is 401.
//! Every message is binary, its first byte the channel ([`channel`], the numbering of
//! `v5.channel.k8s.io`), the rest the data. Each operation is one `serve` function over a
//! [`StreamContext`], its [`OpRequest`] and a pair of bounded [`Channels`].
//!
//! Paths:
//! - `GET /exec/{ns}/{pod}/{container}?command=…&command=…&stdin=1&stdout=1&stderr=1&tty=1`
//! - `GET /attach/{ns}/{pod}/{container}?stdin=1&stdout=1&stderr=1&tty=1`
//! - `GET /portforward/{ns}/{pod}?port=N`

use bytes::Bytes;

pub mod attach;
pub mod auth;
pub mod exec;
pub mod pods;
pub mod portforward;
pub mod server;

/// Channel numbers: `v5.channel.k8s.io`'s (port-forward: 0 data, 1 error).
pub mod channel {
    /// The container's standard input.
    pub const STDIN: u8 = 0;
    /// The container's standard output.
    pub const STDOUT: u8 = 1;
    /// The container's standard error.
    pub const STDERR: u8 = 2;
    /// The outcome: a metav1 `Status` as JSON, sent once, last.
    pub const ERROR: u8 = 3;
    /// Terminal size changes, `{"Width":W,"Height":H}`.
    pub const RESIZE: u8 = 4;
    /// Half-close: the data is the one channel that ended (stdin EOF).
    pub const CLOSE: u8 = 255;
}

/// Bound of each direction of a stream, in frames: a slow reader holds the container's
/// output back rather than letting it pile up.
pub const CHANNEL_FRAMES: usize = 16;

/// One frame of a container stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Which stream ([`channel`]).
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

/// One side's ends of a stream, both bounded by [`CHANNEL_FRAMES`].
#[derive(Debug)]
pub struct Channels {
    /// Frames to the shim (stdout, stderr, error).
    pub tx: tokio::sync::mpsc::Sender<Frame>,
    /// Frames from the shim (stdin, resize, close); ends when the shim hangs up.
    pub rx: tokio::sync::mpsc::Receiver<Frame>,
}

impl Channels {
    /// Two connected pairs: what one side sends the other receives.
    pub fn pair() -> (Channels, Channels) {
        let (a_tx, b_rx) = tokio::sync::mpsc::channel(CHANNEL_FRAMES);
        let (b_tx, a_rx) = tokio::sync::mpsc::channel(CHANNEL_FRAMES);
        (
            Channels { tx: a_tx, rx: a_rx },
            Channels { tx: b_tx, rx: b_rx },
        )
    }
}

/// Which stdio an exec or attach passes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stdio {
    /// Pass stdin.
    pub stdin: bool,
    /// Pass stdout.
    pub stdout: bool,
    /// Pass stderr.
    pub stderr: bool,
    /// On a pty.
    pub tty: bool,
}

/// What the shim asked for, parsed from the request path and query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpRequest {
    /// Run `command` in a container.
    Exec {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        pod: String,
        /// The container's name.
        container: String,
        /// The command and its arguments (never empty).
        command: Vec<String>,
        /// Which stdio to pass.
        stdio: Stdio,
    },
    /// Attach to a container's own stdio.
    Attach {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        pod: String,
        /// The container's name.
        container: String,
        /// Which stdio to pass.
        stdio: Stdio,
    },
    /// One TCP connection to `port` in the pod's network.
    PortForward {
        /// The pod's namespace.
        namespace: String,
        /// The pod's name.
        pod: String,
        /// The port.
        port: u16,
    },
}

/// Why a stream failed; sent to the shim as a `Status` on the error channel when the
/// stream is already open, or as the HTTP status before it is.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StreamError {
    /// No such pod or container on this executor, or it is not running: 404.
    #[error("{0}")]
    NotFound(String),
    /// The request is malformed: 400.
    #[error("{0}")]
    BadRequest(String),
    /// Running it failed: 500.
    #[error("{0}")]
    Internal(String),
}

/// A running container as the streaming operations see it: enough to enter it.
#[derive(Debug, Clone)]
pub struct ContainerRef {
    /// The container's OCI id (process mode: none).
    pub id: Option<String>,
    /// Its bundle directory (where its `config.json` is), when known.
    pub bundle: Option<std::path::PathBuf>,
    /// The pid of its first process, when known.
    pub pid: Option<u32>,
    /// Its directory in the executor's sandbox (`layout::container_dir`).
    pub dir: std::path::PathBuf,
}

impl ContainerRef {
    /// Where an exec into it runs.
    pub fn exec_target(&self) -> crate::oci::exec::ExecTarget {
        match &self.id {
            Some(id) => crate::oci::exec::ExecTarget::Container(id.clone()),
            None => crate::oci::exec::ExecTarget::Process(self.dir.clone()),
        }
    }
}

/// What the operations need from the executor: which containers run, and how.
pub trait PodDirectory: Send + Sync + 'static {
    /// The running container `container` of pod `namespace/pod`.
    fn container(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Result<ContainerRef, StreamError>;

    /// The network namespace of pod `namespace/pod` for port-forward: `None` when it
    /// runs in the agent's network (no namespace of its own, or process mode).
    /// A directory that cannot tell refuses, rather than guess the agent's network.
    fn network(
        &self,
        namespace: &str,
        pod: &str,
    ) -> Result<Option<std::path::PathBuf>, StreamError> {
        Err(StreamError::NotFound(format!(
            "no network is known for pod {namespace}/{pod} on this node"
        )))
    }
}

/// Everything an operation's `serve` may use.
#[derive(Clone)]
pub struct StreamContext {
    /// The pods this executor runs.
    pub pods: std::sync::Arc<dyn PodDirectory>,
    /// How containers are entered (runtime binary, process mode).
    pub exec: std::sync::Arc<crate::oci::exec::ContainerExec>,
}

impl std::fmt::Debug for StreamContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamContext").finish_non_exhaustive()
    }
}

/// Starts the streaming server of an executor on the port its `ExecutorInfo` procured
/// (the first of its `ports` resource; any free port when it has none) on the agent's
/// address, and announces it in `credential`'s registrations. `None` (logged) when it
/// cannot listen: pods still run, streams are refused.
pub fn start(
    env: &crate::ExecutorEnv,
    info: Option<&mesos::proto::ExecutorInfo>,
    credential: &std::sync::Arc<crate::apiclient::Credential>,
    containers: &crate::oci::ContainerSettings,
) -> Option<server::StreamServer> {
    let port = info.and_then(procured_port).unwrap_or(0);
    let host = env
        .agent_ip()
        .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
    let exec = std::sync::Arc::new(crate::oci::exec::ContainerExec::new(
        containers,
        &env.sandbox,
    ));
    let ctx = StreamContext {
        pods: std::sync::Arc::new(pods::SandboxPods::new(env.sandbox.clone(), exec.clone())),
        exec,
    };
    // The procured port can still be held by a process the agent does not
    // account for (a stale executor of an earlier run, or several agents on
    // one address offering the same range): then a free one, which the
    // registration announces, rather than no streams at all.
    let started = server::StreamServer::start(host, port, credential.clone(), ctx.clone())
        .or_else(|e| {
            if port == 0 {
                return Err(e);
            }
            tracing::warn!(port, error = %e, "the procured streaming port is taken; serving on a free one");
            server::StreamServer::start(host, 0, credential.clone(), ctx)
        });
    match started {
        Ok(s) => {
            tracing::info!(host = %host, port = s.endpoint().port, "serving container streams");
            credential.set_streaming(s.endpoint().clone());
            Some(s)
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot serve container streams");
            None
        }
    }
}

/// The first port of the executor's own `ports` resource.
pub fn procured_port(info: &mesos::proto::ExecutorInfo) -> Option<u16> {
    info.resources
        .iter()
        .filter(|r| r.name == "ports")
        .filter_map(|r| r.ranges.as_ref())
        .flat_map(|r| r.range.iter())
        .find_map(|r| u16::try_from(r.begin).ok())
}

// Every operation implements:
// `pub async fn serve(ctx: &StreamContext, req: OpRequest, channels: Channels) -> Result<(), StreamError>`
// (exec.rs here; attach.rs by the attach owner; portforward.rs by the port-forward owner).
