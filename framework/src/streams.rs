//! Container streams for the API shim: `kubectl exec` (and attach, port-forward) reach
//! the executor of the pod's agent.
//!
//! An executor announces its streaming endpoint (host, port) with its node key
//! ([`crate::node_identity`]); [`StreamEndpoints`] keeps them by node. To open a stream,
//! [`ExecutorStreams`] dials the endpoint over TLS 1.3 and accepts only a handshake
//! signed by the key that executor registered (the certificate itself is not trusted:
//! the key is pinned), then presents a stream credential signed by this scheduler's
//! stream key for that node (audience), valid one minute. Frames are relayed through
//! bounded channels both ways.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use apiserver::streams::{
    Channels, ContainerStreams, Frame, StreamError, StreamFuture, StreamOp, StreamTarget,
};
use executor::streaming::auth::StreamSigner;
use futures::{SinkExt as _, StreamExt as _};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

/// Frames in flight each way per stream.
const CHANNEL_FRAMES: usize = 16;
/// How long a stream credential is valid: only for the dial it is made for.
const CREDENTIAL_LIFETIME: Duration = Duration::from_secs(60);
/// How long a dial (TCP, TLS, WebSocket) may take.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

/// Where one node's executor serves streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Host (an IP address).
    pub host: String,
    /// Port.
    pub port: u16,
    /// The executor's public key (uncompressed P-256 point).
    pub public_key: Vec<u8>,
}

/// The streaming endpoints executors announced, by node name.
#[derive(Debug, Default)]
pub struct StreamEndpoints {
    by_node: RwLock<HashMap<String, Endpoint>>,
}

impl StreamEndpoints {
    /// Records `node`'s endpoint (a new registration replaces the old one).
    pub fn set(&self, node: &str, endpoint: Endpoint) {
        if let Ok(mut m) = self.by_node.write() {
            m.insert(node.to_owned(), endpoint);
        }
    }

    /// `node`'s endpoint, if its executor announced one.
    pub fn get(&self, node: &str) -> Option<Endpoint> {
        self.by_node.read().ok()?.get(node).cloned()
    }
}

/// Records the streaming port on Node `node` as kubelet does
/// (`status.daemonEndpoints.kubeletEndpoint.Port`).
pub async fn record_on_node(api: &apiserver::Api, node: &str, port: u16) {
    use k8s_openapi::api::core::v1::{DaemonEndpoint, NodeDaemonEndpoints};
    let Ok(mut n) = api.get_node(node) else {
        return;
    };
    let status = n.status.get_or_insert_with(Default::default);
    status.daemon_endpoints = Some(NodeDaemonEndpoints {
        kubelet_endpoint: Some(DaemonEndpoint {
            port: i32::from(port),
        }),
    });
    if let Err(e) = api.upsert_node(n).await {
        tracing::warn!(node, error = %e, "cannot record the streaming endpoint on the Node");
    }
}

/// The framework's [`ContainerStreams`]: dials the executors.
pub struct ExecutorStreams {
    endpoints: Arc<StreamEndpoints>,
    signer: StreamSigner,
}

impl std::fmt::Debug for ExecutorStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecutorStreams").finish_non_exhaustive()
    }
}

impl ExecutorStreams {
    /// Streams to the endpoints in `endpoints`, credentials signed with the P-256 key in
    /// `pkcs8`.
    ///
    /// # Errors
    /// The key does not parse.
    pub fn new(endpoints: Arc<StreamEndpoints>, pkcs8: &[u8]) -> Result<Self, String> {
        Ok(Self {
            endpoints,
            signer: StreamSigner::from_pkcs8(pkcs8)?,
        })
    }

    /// Streams with a fresh signing key (kept in memory only: after a restart,
    /// executors learn the new key when they register again).
    ///
    /// # Errors
    /// The random source failed.
    pub fn generate() -> Result<Self, String> {
        Self::new(
            Arc::new(StreamEndpoints::default()),
            &StreamSigner::generate_pkcs8()?,
        )
    }

    /// Where executors' endpoints are recorded.
    pub fn endpoints(&self) -> &Arc<StreamEndpoints> {
        &self.endpoints
    }

    /// The public stream key executors verify credentials with.
    pub fn public_key(&self) -> String {
        self.signer.public_key()
    }

    async fn open_inner(&self, target: StreamTarget) -> Result<Channels, StreamError> {
        let pod = &target.pod;
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                StreamError::NotRunning(format!("pod {name} does not have a host assigned"))
            })?;
        let endpoint = self.endpoints.get(node).ok_or_else(|| {
            StreamError::Unreachable(format!(
                "no streaming endpoint is known for node {node} (its executor has not registered)"
            ))
        })?;
        let path = stream_path(ns, name, &target.container, &target.op);
        let token = self
            .signer
            .token(node, SystemTime::now(), CREDENTIAL_LIFETIME)
            .map_err(StreamError::Unreachable)?;
        let ws = tokio::time::timeout(DIAL_TIMEOUT, dial(&endpoint, &path, &token))
            .await
            .map_err(|_| {
                StreamError::Unreachable(format!(
                    "timed out dialing the executor of node {node} at {}:{}",
                    endpoint.host, endpoint.port
                ))
            })??;
        Ok(relay(ws))
    }
}

impl ContainerStreams for ExecutorStreams {
    fn open(&self, target: StreamTarget) -> StreamFuture<'_> {
        Box::pin(self.open_inner(target))
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;

async fn dial(endpoint: &Endpoint, path: &str, token: &str) -> Result<Ws, StreamError> {
    let unreachable = |what: &str, e: &dyn std::fmt::Display| {
        StreamError::Unreachable(format!(
            "{what} the executor at {}:{}: {e}",
            endpoint.host, endpoint.port
        ))
    };
    let tcp = tokio::net::TcpStream::connect((endpoint.host.as_str(), endpoint.port))
        .await
        .map_err(|e| unreachable("cannot connect to", &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| unreachable("cannot set up TLS to", &e))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PinnedKey(endpoint.public_key.clone())))
        .with_no_client_auth();
    let server = ServerName::try_from("mesopod-executor").map_err(|e| unreachable("to", &e))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(server, tcp)
        .await
        .map_err(|e| unreachable("TLS with", &e))?;
    let url = format!("wss://{}:{}{path}", endpoint.host, endpoint.port);
    let mut req = url
        .into_client_request()
        .map_err(|e| unreachable("bad request to", &e))?;
    let bearer = http::HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|e| unreachable("bad credential for", &e))?;
    req.headers_mut()
        .insert(http::header::AUTHORIZATION, bearer);
    match tokio_tungstenite::client_async(req, tls).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
            let body = resp
                .body()
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_default();
            Err(match resp.status().as_u16() {
                404 | 400 => StreamError::BadContainer(body),
                code => StreamError::Unreachable(format!(
                    "the executor at {}:{} answered {code}: {body}",
                    endpoint.host, endpoint.port
                )),
            })
        }
        Err(e) => Err(unreachable("WebSocket with", &e)),
    }
}

/// Relays frames between `ws` and the returned channels until either side ends.
fn relay(ws: Ws) -> Channels {
    let (to_exec, mut from_shim) = tokio::sync::mpsc::channel::<Frame>(CHANNEL_FRAMES);
    let (to_shim, from_exec) = tokio::sync::mpsc::channel::<Frame>(CHANNEL_FRAMES);
    let (mut sink, mut stream) = ws.split();
    let outbound = tokio::spawn(async move {
        while let Some(f) = from_shim.recv().await {
            let mut msg = Vec::with_capacity(f.data.len() + 1);
            msg.push(f.channel);
            msg.extend_from_slice(&f.data);
            if sink.send(Message::Binary(msg.into())).await.is_err() {
                return;
            }
        }
        // The client hung up: so do we, which stops the command.
        let _ = sink.send(Message::Close(None)).await;
    });
    tokio::spawn(async move {
        while let Some(Ok(msg)) = stream.next().await {
            match msg {
                Message::Binary(b) if !b.is_empty() => {
                    if to_shim.send(Frame::new(b[0], b.slice(1..))).await.is_err() {
                        break;
                    }
                }
                Message::Close(_) => break,
                _ => {}
            }
        }
        // The executor is done; the shim sees the end of its frames.
        drop(to_shim);
        let _ = outbound;
    });
    Channels {
        tx: to_exec,
        rx: from_exec,
    }
}

/// The executor's path for `op` (see `executor::streaming`).
fn stream_path(ns: &str, pod: &str, container: &str, op: &StreamOp) -> String {
    let flags = |stdin: bool, stdout: bool, stderr: bool, tty: bool| {
        format!(
            "stdin={}&stdout={}&stderr={}&tty={}",
            u8::from(stdin),
            u8::from(stdout),
            u8::from(stderr),
            u8::from(tty)
        )
    };
    let (ns, pod, container) = (encode(ns), encode(pod), encode(container));
    match op {
        StreamOp::Exec {
            command,
            stdin,
            stdout,
            stderr,
            tty,
        } => {
            let cmd: String = command
                .iter()
                .map(|c| format!("command={}&", encode(c)))
                .collect();
            format!(
                "/exec/{ns}/{pod}/{container}?{cmd}{}",
                flags(*stdin, *stdout, *stderr, *tty)
            )
        }
        StreamOp::Attach {
            stdin,
            stdout,
            stderr,
            tty,
        } => format!(
            "/attach/{ns}/{pod}/{container}?{}",
            flags(*stdin, *stdout, *stderr, *tty)
        ),
        StreamOp::PortForward { port } => format!("/portforward/{ns}/{pod}?port={port}"),
    }
}

/// Percent-encodes everything but unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Trusts a server that proves it holds one P-256 key: TLS 1.3's CertificateVerify is
/// checked against the pinned key, whatever the certificate says.
#[derive(Debug)]
struct PinnedKey(Vec<u8>);

impl ServerCertVerifier for PinnedKey {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The certificate only carries the key; the handshake signature, checked
        // against the pinned key below, is what proves the server's identity.
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("TLS 1.2 is not accepted".into()))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        _cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        if dss.scheme != SignatureScheme::ECDSA_NISTP256_SHA256 {
            return Err(rustls::Error::General(
                "the executor must sign with its P-256 key".into(),
            ));
        }
        ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_ASN1, &self.0)
            .verify(message, dss.signature())
            .map(|()| HandshakeSignatureValid::assertion())
            .map_err(|_| {
                rustls::Error::General("the executor is not the one that registered".into())
            })
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        vec![SignatureScheme::ECDSA_NISTP256_SHA256]
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn stream_paths_escape_what_the_executor_decodes() {
        let op = apiserver::streams::StreamOp::Exec {
            command: vec!["sh".into(), "-c".into(), "echo hi; exit 3".into()],
            stdin: true,
            stdout: true,
            stderr: false,
            tty: false,
        };
        assert_eq!(
            super::stream_path("default", "web", "app", &op),
            "/exec/default/web/app?command=sh&command=-c&command=echo%20hi%3B%20exit%203&stdin=1&stdout=1&stderr=0&tty=0"
        );
    }
}
