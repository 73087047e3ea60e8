//! `exec` and `attach` over SPDY/3.1 (kubectl 1.27–1.29, and later ones when a
//! WebSocket upgrade is refused), as kubelet's `remotecommand` server speaks it:
//! the client opens one stream per `streamType` (error, stdin, stdout, stderr,
//! resize); once all it asked for are open, they are joined to the container's
//! [`Channels`]. v4 sends the outcome as a metav1 `Status` (JSON) on the error
//! stream; v3 and v2 send only a failure's message, and v2 has no resize.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::{Bytes, BytesMut};
use http::Request;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::spdy::upgrade;
use super::spdy::{Connection, Stream, StreamWriter};
use super::{Channels, ContainerStreams, Frame, StreamOp, StreamTarget, channel};
use crate::api::Api;
use crate::error::ApiError;

/// The versions we speak, best first (kubelet's SPDY list without v1).
pub(crate) const PROTOCOLS: [&str; 3] = [V4, "v3.channel.k8s.io", V2];
const V4: &str = "v4.channel.k8s.io";
const V2: &str = "v2.channel.k8s.io";
/// How long the client has to open its streams (kubelet's default).
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);
/// A resize message is a few dozen bytes; more without one whole is garbage.
const MAX_RESIZE_PENDING: usize = 4096;

/// The route's entry (`streams/http.rs`): `target` opened on the API's streams.
pub(crate) async fn serve(api: Api, target: StreamTarget, req: Request<Body>) -> Response {
    match api.container_streams().cloned() {
        Some(streams) => serve_with(req, target, streams).await,
        None => ApiError::Unavailable("container streams are not served by this API".into())
            .into_response(),
    }
}

/// Serves an exec or attach request that asked for `Upgrade: SPDY/3.1`, opening
/// `target` on `streams`.
pub(crate) async fn serve_with(
    mut req: Request<Body>,
    target: StreamTarget,
    streams: Arc<dyn ContainerStreams>,
) -> Response {
    let protocol = match upgrade::negotiate(req.headers(), &PROTOCOLS) {
        Ok(p) => p,
        Err(response) => return response,
    };
    let wanted = match Wanted::of(&target.op, &protocol) {
        Some(w) => w,
        None => {
            return ApiError::BadRequest("port-forward is not served as exec".into())
                .into_response();
        }
    };
    if !(wanted.stdin || wanted.stdout || wanted.stderr) {
        return ApiError::BadRequest("you must specify at least 1 of stdin, stdout, stderr".into())
            .into_response();
    }
    // Opened before the upgrade, so a pod that is not running is an HTTP error
    // kubectl prints, as kube-apiserver's are.
    let channels = match streams.open(target).await {
        Ok(c) => c,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let chosen = protocol.clone();
    upgrade::spdy(&mut req, &chosen, move |conn| {
        session(conn, protocol, wanted, channels)
    })
}

/// The streams the client will open.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wanted {
    stdin: bool,
    stdout: bool,
    stderr: bool,
    resize: bool,
}

impl Wanted {
    fn of(op: &StreamOp, protocol: &str) -> Option<Self> {
        let (stdin, stdout, stderr, tty) = match op {
            StreamOp::Exec {
                stdin,
                stdout,
                stderr,
                tty,
                ..
            }
            | StreamOp::Attach {
                stdin,
                stdout,
                stderr,
                tty,
            } => (*stdin, *stdout, *stderr, *tty),
            StreamOp::PortForward { .. } => return None,
        };
        Some(Self {
            stdin,
            stdout,
            // kubelet drops stderr with a tty: the terminal merges it.
            stderr: stderr && !tty,
            resize: tty && protocol != V2,
        })
    }

    fn count(self) -> usize {
        1 + [self.stdin, self.stdout, self.stderr, self.resize]
            .iter()
            .filter(|b| **b)
            .count()
    }
}

/// Joins the client's streams on `conn` to the container's `channels`.
pub(crate) async fn session(
    mut conn: Connection,
    protocol: String,
    wanted: Wanted,
    channels: Channels,
) {
    let Ok(Some(mut opened)) = tokio::time::timeout(
        STREAM_CREATION_TIMEOUT,
        accept_all(&mut conn, wanted.count()),
    )
    .await
    else {
        tracing::debug!("exec client did not open its streams");
        return;
    };
    let Channels { tx, mut rx } = channels;
    let mut pumps: Vec<JoinHandle<()>> = Vec::new();
    if let Some(stdin) = opened.remove("stdin") {
        pumps.push(tokio::spawn(pump_stdin(stdin.rx, tx.clone())));
    }
    if let Some(resize) = opened.remove("resize") {
        pumps.push(tokio::spawn(pump_resize(resize.rx, tx.clone())));
    }
    // Held until the container's side ends: a closed sender tells the
    // executor's relay that the client went away, which ends the exec.
    let hold_open = tx;
    let writer = |name: &str| opened.get(name).map(|s| s.tx.clone());
    let (stdout, stderr, error) = (writer("stdout"), writer("stderr"), writer("error"));
    let mut status = None;
    while let Some(frame) = rx.recv().await {
        let to = match frame.channel {
            channel::STDOUT => stdout.as_ref(),
            channel::STDERR => stderr.as_ref(),
            channel::ERROR => {
                status = Some(frame.data);
                continue;
            }
            channel::CLOSE => {
                let ended = match frame.data.first() {
                    Some(&channel::STDOUT) => stdout.as_ref(),
                    Some(&channel::STDERR) => stderr.as_ref(),
                    _ => None,
                };
                if let Some(w) = ended {
                    let _ = w.finish().await;
                }
                continue;
            }
            _ => continue,
        };
        if let Some(w) = to
            && w.send(frame.data).await.is_err()
        {
            break;
        }
    }
    drop(hold_open);
    for w in [&stdout, &stderr].into_iter().flatten() {
        let _ = w.finish().await;
    }
    if let Some(error) = &error {
        write_status(error, &protocol, status).await;
    }
    for pump in pumps {
        pump.abort();
    }
    conn.close().await;
}

async fn accept_all(conn: &mut Connection, count: usize) -> Option<HashMap<String, Stream>> {
    let mut opened = HashMap::new();
    while opened.len() < count {
        let stream = conn.accept().await?;
        match stream.headers.get("streamtype") {
            Some(kind @ ("error" | "stdin" | "stdout" | "stderr" | "resize")) => {
                opened.insert(kind.to_owned(), stream);
            }
            other => {
                tracing::debug!(stream_type = ?other, "unexpected exec stream type");
                let _ = stream.tx.reset().await;
            }
        }
    }
    Some(opened)
}

async fn pump_stdin(mut rx: mpsc::Receiver<Bytes>, tx: mpsc::Sender<Frame>) {
    while let Some(data) = rx.recv().await {
        if tx.send(Frame::new(channel::STDIN, data)).await.is_err() {
            return;
        }
    }
    // The client closed stdin: v5's half-close tells the container EOF.
    let _ = tx
        .send(Frame::new(channel::CLOSE, vec![channel::STDIN]))
        .await;
}

/// Go's `json.Encoder` writes one `{"Width":W,"Height":H}` after another; a
/// message may arrive in pieces or several in one frame.
async fn pump_resize(mut rx: mpsc::Receiver<Bytes>, tx: mpsc::Sender<Frame>) {
    let mut pending = BytesMut::new();
    while let Some(data) = rx.recv().await {
        pending.extend_from_slice(&data);
        let mut used = 0;
        let mut iter = serde_json::Deserializer::from_slice(&pending)
            .into_iter::<serde_json::Map<String, serde_json::Value>>();
        let mut sizes = Vec::new();
        loop {
            match iter.next() {
                Some(Ok(size)) => {
                    used = iter.byte_offset();
                    sizes.push(size);
                }
                Some(Err(e)) if e.is_eof() => break,
                Some(Err(_)) => return,
                None => {
                    used = iter.byte_offset();
                    break;
                }
            }
        }
        let _ = pending.split_to(used);
        for size in sizes {
            let Ok(json) = serde_json::to_vec(&size) else {
                continue;
            };
            if tx.send(Frame::new(channel::RESIZE, json)).await.is_err() {
                return;
            }
        }
        if pending.len() > MAX_RESIZE_PENDING {
            return;
        }
    }
}

/// The outcome on the error stream, in the protocol's form.
async fn write_status(error: &StreamWriter, protocol: &str, status: Option<Bytes>) {
    let status = status.unwrap_or_else(|| {
        let lost = serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "reason": "InternalError", "code": 500,
            "message": "the stream to the container ended without its exit status",
        });
        Bytes::from(lost.to_string())
    });
    let body = if protocol == V4 {
        Some(status)
    } else {
        // v2/v3 (kubelet's v1WriteStatusFunc): nothing on success, else the message.
        let parsed: serde_json::Value = serde_json::from_slice(&status).unwrap_or_default();
        (parsed["status"] != "Success").then(|| {
            Bytes::from(
                parsed["message"]
                    .as_str()
                    .unwrap_or("command failed")
                    .to_owned(),
            )
        })
    };
    if let Some(body) = body {
        let _ = error.send(body).await;
    }
    let _ = error.finish().await;
}

#[cfg(test)]
#[path = "spdy_exec_tests.rs"]
mod tests;
