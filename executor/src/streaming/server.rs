//! The executor's streaming server: TLS with a certificate for the executor's own key
//! (which the shim pins), the shim's credential ([`super::auth`]), and the WebSocket
//! framing of [`super::Frame`]s (binary messages, the first byte the channel).
//!
//! Refusals happen before the upgrade, as HTTP statuses: 401 without a valid
//! credential, 400 for a malformed request, 404 for a container not running here.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use futures::{SinkExt as _, StreamExt as _};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};

use super::{Channels, Frame, OpRequest, Stdio, StreamContext, StreamError, channel};
use crate::apiclient::Credential;
use crate::apiclient::protocol::StreamingEndpoint;

/// A running streaming server; dropping it stops accepting.
#[derive(Debug)]
pub struct StreamServer {
    endpoint: StreamingEndpoint,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for StreamServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StreamServer {
    /// Listens on `host:port` (`port` 0: any free one) and serves `ctx`, accepting the
    /// credentials the scheduler's stream key (in `credential`'s registration) signs.
    ///
    /// # Errors
    /// The port cannot be bound, or the TLS certificate cannot be made.
    pub fn start(
        host: std::net::IpAddr,
        port: u16,
        credential: Arc<Credential>,
        ctx: StreamContext,
    ) -> Result<StreamServer, String> {
        let tls = tls_config(credential.identity().pkcs8())?;
        let std_listener = std::net::TcpListener::bind((host, port))
            .map_err(|e| format!("cannot listen on {host}:{port}: {e}"))?;
        std_listener
            .set_nonblocking(true)
            .map_err(|e| e.to_string())?;
        let listener = TcpListener::from_std(std_listener).map_err(|e| e.to_string())?;
        let port = listener.local_addr().map_err(|e| e.to_string())?.port();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let task = tokio::spawn(accept_loop(listener, acceptor, credential, ctx));
        Ok(StreamServer {
            endpoint: StreamingEndpoint {
                host: host.to_string(),
                port,
            },
            task,
        })
    }

    /// Where it listens.
    pub fn endpoint(&self) -> &StreamingEndpoint {
        &self.endpoint
    }
}

/// TLS 1.3 only, with a self-signed certificate for the key in `pkcs8`: the shim trusts
/// the key, not the certificate (it checks the handshake's signature against the key
/// the executor registered).
fn tls_config(pkcs8: &[u8]) -> Result<rustls::ServerConfig, String> {
    let key = rcgen::KeyPair::try_from(pkcs8).map_err(|e| format!("stream TLS key: {e}"))?;
    let params = rcgen::CertificateParams::new(vec!["mesopod-executor".to_owned()])
        .map_err(|e| e.to_string())?;
    let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(pkcs8.to_vec().into()),
        )
        .map_err(|e| e.to_string())
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    credential: Arc<Credential>,
    ctx: StreamContext,
) {
    loop {
        let Ok((tcp, peer)) = listener.accept().await else {
            continue;
        };
        let acceptor = acceptor.clone();
        let credential = credential.clone();
        let ctx = ctx.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                tracing::debug!(%peer, "stream TLS handshake failed");
                return;
            };
            serve_connection(tls, &credential, ctx).await;
        });
    }
}

/// One WebSocket: checks it, then relays frames between it and the operation.
pub async fn serve_connection<S>(io: S, credential: &Credential, ctx: StreamContext)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut parsed = None;
    // The callback's signature is tungstenite's.
    #[allow(clippy::result_large_err)]
    let check = |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
        let reg = credential.current();
        let (key, node) = reg
            .as_ref()
            .map(|r| (r.stream_key.as_str(), r.node.as_str()))
            .unwrap_or_default();
        let authz = req
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if let Err(e) = super::auth::check(authz, key, node, SystemTime::now()) {
            return Err(refuse(401, &e.to_string()));
        }
        let op = parse_request(req.uri()).map_err(|e| refuse(400, &e))?;
        if let OpRequest::Exec {
            namespace,
            pod,
            container,
            ..
        }
        | OpRequest::Attach {
            namespace,
            pod,
            container,
            ..
        } = &op
            && let Err(e) = ctx.pods.container(namespace, pod, container)
        {
            return Err(refuse(404, &e.to_string()));
        }
        parsed = Some(op);
        Ok(resp)
    };
    let Ok(ws) = tokio_tungstenite::accept_hdr_async(io, check).await else {
        return;
    };
    let Some(op) = parsed else { return };
    relay(ws, op, ctx).await;
}

fn refuse(code: u16, message: &str) -> ErrorResponse {
    let mut r = ErrorResponse::new(Some(message.to_owned()));
    *r.status_mut() = http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::BAD_REQUEST);
    r
}

/// Frames both ways until the operation ends; then its last frames and a close.
async fn relay<S>(ws: tokio_tungstenite::WebSocketStream<S>, op: OpRequest, ctx: StreamContext)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut stream) = ws.split();
    let (ours, theirs) = Channels::pair();
    let Channels { tx, mut rx } = ours;
    // From the shim: each binary message is one frame, waited for room (backpressure).
    let inbound = tokio::spawn(async move {
        while let Some(Ok(msg)) = stream.next().await {
            match msg {
                Message::Binary(b) if !b.is_empty() => {
                    let frame = Frame::new(b[0], b.slice(1..));
                    if tx.send(frame).await.is_err() {
                        return;
                    }
                }
                Message::Close(_) => return,
                _ => {}
            }
        }
    });
    let op_task = tokio::spawn(async move {
        let out = theirs.tx.clone();
        if let Err(e) = dispatch(&ctx, op, theirs).await {
            let _ = out
                .send(Frame::new(channel::ERROR, failure_status(&e.to_string())))
                .await;
        }
    });
    while let Some(frame) = rx.recv().await {
        let mut msg = Vec::with_capacity(frame.data.len() + 1);
        msg.push(frame.channel);
        msg.extend_from_slice(&frame.data);
        if sink.send(Message::Binary(msg.into())).await.is_err() {
            break;
        }
    }
    let _ = sink.send(Message::Close(None)).await;
    inbound.abort();
    op_task.abort();
}

/// The operation `op` names. Each one's `serve` owns its frames until it returns.
async fn dispatch(
    ctx: &StreamContext,
    op: OpRequest,
    channels: Channels,
) -> Result<(), StreamError> {
    match op {
        OpRequest::Exec { .. } => super::exec::serve(ctx, op, channels).await,
        OpRequest::Attach { .. } => super::attach::serve(ctx, op, channels).await,
        OpRequest::PortForward { .. } => super::portforward::serve(ctx, op, channels).await,
    }
}

/// A metav1 `Status` of failure, as the error channel carries it.
pub fn failure_status(message: &str) -> Bytes {
    Bytes::from(
        serde_json::json!({
            "metadata": {}, "status": "Failure", "message": message,
            "reason": "InternalError", "code": 500,
        })
        .to_string(),
    )
}

/// `/exec/{ns}/{pod}/{container}?…`, `/attach/…`, `/portforward/{ns}/{pod}?port=N`.
///
/// # Errors
/// What is wrong with it, for a 400.
pub fn parse_request(uri: &http::Uri) -> Result<OpRequest, String> {
    let segments: Vec<String> = uri
        .path()
        .trim_start_matches('/')
        .split('/')
        .map(percent_decode)
        .collect();
    let query: Vec<(String, String)> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    let flag = |name: &str| {
        query
            .iter()
            .any(|(k, v)| k == name && matches!(v.as_str(), "1" | "true" | "True"))
    };
    let stdio = Stdio {
        stdin: flag("stdin"),
        stdout: flag("stdout"),
        stderr: flag("stderr"),
        tty: flag("tty"),
    };
    match segments.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["exec", ns, pod, container] => {
            let command: Vec<String> = query
                .iter()
                .filter(|(k, _)| k == "command")
                .map(|(_, v)| v.clone())
                .collect();
            if command.is_empty() {
                return Err("you must specify at least 1 command".into());
            }
            Ok(OpRequest::Exec {
                namespace: ns.into(),
                pod: pod.into(),
                container: container.into(),
                command,
                stdio,
            })
        }
        ["attach", ns, pod, container] => Ok(OpRequest::Attach {
            namespace: ns.into(),
            pod: pod.into(),
            container: container.into(),
            stdio,
        }),
        ["portforward", ns, pod] => {
            let port = query
                .iter()
                .find(|(k, _)| k == "port")
                .and_then(|(_, v)| v.parse::<u16>().ok())
                .filter(|p| *p > 0)
                .ok_or("a port between 1 and 65535 is required")?;
            Ok(OpRequest::PortForward {
                namespace: ns.into(),
                pod: pod.into(),
                port,
            })
        }
        _ => Err(format!("unknown stream path {}", uri.path())),
    }
}

/// `application/x-www-form-urlencoded` decoding (`+` is a space); bad escapes stay as
/// written.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = |b: u8| (b as char).to_digit(16);
                match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push(u8::try_from(h * 16 + l).unwrap_or(b'?'));
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn exec_paths_and_queries_parse_as_kubelet_reads_them() {
        let uri: http::Uri =
            "/exec/default/web/app?command=sh&command=-c&command=echo%20hi%3B+exit%203&stdin=1&stdout=true&tty=0"
                .parse()
                .unwrap();
        let op = parse_request(&uri).unwrap();
        assert_eq!(
            op,
            OpRequest::Exec {
                namespace: "default".into(),
                pod: "web".into(),
                container: "app".into(),
                command: vec!["sh".into(), "-c".into(), "echo hi; exit 3".into()],
                stdio: Stdio {
                    stdin: true,
                    stdout: true,
                    stderr: false,
                    tty: false
                },
            }
        );
        let pf: http::Uri = "/portforward/ns/p?port=8080".parse().unwrap();
        assert!(matches!(
            parse_request(&pf).unwrap(),
            OpRequest::PortForward { port: 8080, .. }
        ));
    }

    #[test]
    fn malformed_requests_are_refused_with_a_reason() {
        for bad in [
            "/exec/default/web/app",
            "/exec/default/web",
            "/portforward/ns/p?port=0",
            "/portforward/ns/p?port=x",
            "/other",
        ] {
            let uri: http::Uri = bad.parse().unwrap();
            assert!(parse_request(&uri).is_err(), "{bad}");
        }
        assert_eq!(percent_decode("a%2"), "a%2");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
