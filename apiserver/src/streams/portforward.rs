//! `kubectl port-forward`: SPDY/3.1 (`portforward.k8s.io`, kubectl ≤ 1.30 and the
//! fallback of later ones) and SPDY inside WebSocket (`SPDY/3.1+portforward.k8s.io`,
//! kubectl ≥ 1.31). As kubelet does, each forwarded connection is a pair of
//! streams with one `requestID`: `error` (we write a failure's text) and `data`
//! (the bytes). Each complete pair opens one [`StreamOp::PortForward`].

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::Request;
use k8s_openapi::api::core::v1::Pod;

use super::spdy::{Connection, Stream, StreamWriter, upgrade};
use super::{ContainerStreams, Frame, StreamOp, StreamTarget, channel, portforward_ws};
use crate::api::Api;
use crate::error::ApiError;

/// The one port-forward protocol.
pub(crate) const PROTOCOL: &str = "portforward.k8s.io";
/// Port-forward channels on the container side.
const DATA: u8 = 0;
const ERROR: u8 = 1;
/// Pairs waiting for their second stream before we refuse more.
const MAX_HALF_PAIRS: usize = 128;
/// How long one direction may go on after the other ended.
const LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// The route's entry (`streams/http.rs`): a port-forward to `pod` (Running, as
/// the route checked) through the API's streams; `query` may hold `ports`.
pub(crate) async fn serve(
    api: Api,
    pod: Pod,
    query: Vec<(String, String)>,
    req: Request<Body>,
) -> Response {
    let Some(streams) = api.container_streams().cloned() else {
        return ApiError::Unavailable("container streams are not served by this API".into())
            .into_response();
    };
    // Port-forward names no container; the executor needs one to find the pod by.
    let container = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .map(|c| c.name.clone())
        .unwrap_or_default();
    serve_with(req, pod, container, query, streams).await
}

/// Serves a port-forward request: SPDY when it asks `Upgrade: SPDY/3.1`, the
/// tunnel when it is a WebSocket asking for `SPDY/3.1+portforward.k8s.io`.
/// `container` is the pod's first container, which `ContainerStreams` needs.
pub(crate) async fn serve_with(
    mut req: Request<Body>,
    pod: Pod,
    container: String,
    query: Vec<(String, String)>,
    streams: Arc<dyn ContainerStreams>,
) -> Response {
    if upgrade::is_tunnel(req.headers()) {
        let forward = Forwarder {
            pod,
            container,
            streams,
        };
        return upgrade::tunnelled(&mut req, move |conn| forward.run(conn));
    }
    if let Some(protocol) = upgrade::websocket_protocol(req.headers(), &portforward_ws::PROTOCOLS) {
        let ports = match portforward_ws::ports(&query) {
            Ok(p) => p,
            Err(e) => return ApiError::BadRequest(e).into_response(),
        };
        let target = StreamTarget {
            pod,
            container,
            op: StreamOp::PortForward { port: ports[0] },
        };
        return upgrade::websocket(&mut req, protocol, move |ws| {
            portforward_ws::run(ws, target, ports, streams)
        });
    }
    let forward = Forwarder {
        pod,
        container,
        streams,
    };
    if !upgrade::is_spdy(req.headers()) {
        return ApiError::BadRequest(format!(
            "port-forward needs Upgrade: SPDY/3.1, or a WebSocket with the subprotocol {}",
            super::spdy::tunnel::PORTFORWARD_TUNNEL
        ))
        .into_response();
    }
    if let Err(response) = upgrade::negotiate(req.headers(), &[PROTOCOL]) {
        return response;
    }
    upgrade::spdy(&mut req, PROTOCOL, move |conn| forward.run(conn))
}

/// What every forwarded connection of one request shares.
#[derive(Clone)]
pub(crate) struct Forwarder {
    pub(crate) pod: Pod,
    pub(crate) container: String,
    pub(crate) streams: Arc<dyn ContainerStreams>,
}

#[derive(Default)]
struct Pair {
    data: Option<Stream>,
    error: Option<Stream>,
}

impl Forwarder {
    /// Pairs the client's streams and forwards each pair until the client leaves.
    pub(crate) async fn run(self, mut conn: Connection) {
        let mut pairs: HashMap<String, Pair> = HashMap::new();
        while let Some(stream) = conn.accept().await {
            let Some((request, kind, port)) = check(&stream) else {
                let _ = stream.tx.reset().await;
                continue;
            };
            if !pairs.contains_key(&request) && pairs.len() >= MAX_HALF_PAIRS {
                let _ = stream.tx.reset().await;
                continue;
            }
            let pair = pairs.entry(request.clone()).or_default();
            let slot = if kind == "data" {
                &mut pair.data
            } else {
                &mut pair.error
            };
            if slot.is_some() {
                let msg = format!(
                    "error processing stream for request {request}: {kind} stream already assigned"
                );
                let _ = stream.tx.send(Bytes::from(msg)).await;
                continue;
            }
            *slot = Some(stream);
            if pair.data.is_some()
                && pair.error.is_some()
                && let Some(Pair {
                    data: Some(data),
                    error: Some(error),
                }) = pairs.remove(&request)
            {
                tokio::spawn(self.clone().forward(port, data, error));
            }
        }
    }

    /// One forwarded connection: the data stream ↔ the container's port.
    async fn forward(self, port: u16, data: Stream, error: Stream) {
        let name = self.pod.metadata.name.clone().unwrap_or_default();
        let uid = self.pod.metadata.uid.clone().unwrap_or_default();
        let target = StreamTarget {
            pod: self.pod,
            container: self.container,
            op: StreamOp::PortForward { port },
        };
        let channels = match self.streams.open(target).await {
            Ok(c) => c,
            Err(e) => {
                let msg = format!("error forwarding port {port} to pod {name}, uid {uid}: {e}");
                finish_with(&error.tx, Some(msg)).await;
                let _ = data.tx.finish().await;
                return;
            }
        };
        let (tx, mut rx) = (channels.tx, channels.rx);
        let mut inbound = data.rx;
        let mut upstream = tokio::spawn(async move {
            while let Some(bytes) = inbound.recv().await {
                if tx.send(Frame::new(DATA, bytes)).await.is_err() {
                    return;
                }
            }
            // The client stopped sending: half-close the pod's side.
            let _ = tx.send(Frame::new(channel::CLOSE, vec![DATA])).await;
        });
        let (mut failure, mut upstream_done, mut data_done) = (None, false, false);
        // Once either direction ends the other gets a second, as containerd's
        // port forwarder gives it; client-go waits for both streams to end.
        let mut deadline: Option<tokio::time::Instant> = None;
        loop {
            let grace = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                frame = rx.recv() => match frame {
                    None => break,
                    Some(frame) => match frame.channel {
                        DATA => {
                            let sent = data.tx.send(frame.data).await;
                            if sent.is_err() {
                                break;
                            }
                        }
                        ERROR => {
                            failure = Some(format!(
                                "error forwarding port {port} to pod {name}, uid {uid}: {}",
                                String::from_utf8_lossy(&frame.data)
                            ));
                        }
                        channel::CLOSE if frame.data.first() == Some(&DATA) => {
                            let _ = data.tx.finish().await;
                            data_done = true;
                            deadline.get_or_insert_with(|| tokio::time::Instant::now() + LINGER);
                        }
                        _ => {}
                    },
                },
                _ = &mut upstream, if !upstream_done => {
                    upstream_done = true;
                    deadline.get_or_insert_with(|| tokio::time::Instant::now() + LINGER);
                }
                () = grace => break,
            }
        }
        upstream.abort();
        if !data_done {
            let _ = data.tx.finish().await;
        }
        finish_with(&error.tx, failure).await;
    }
}

async fn finish_with(error: &StreamWriter, message: Option<String>) {
    if let Some(message) = message {
        let _ = error.send(Bytes::from(message)).await;
    }
    let _ = error.finish().await;
}

/// `(requestID, streamType, port)` of a well-formed port-forward stream, as
/// kubelet's `httpStreamReceived` checks them; old clients without a request
/// id are paired by stream id, as kubelet does.
fn check(stream: &Stream) -> Option<(String, &'static str, u16)> {
    let port: u16 = stream.headers.get("port")?.parse().ok()?;
    if port == 0 {
        return None;
    }
    let kind = match stream.headers.get("streamtype")? {
        "data" => "data",
        "error" => "error",
        _ => return None,
    };
    let request = match stream.headers.get("requestid") {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ if kind == "error" => stream.id.to_string(),
        _ => stream.id.saturating_sub(2).to_string(),
    };
    Some((request, kind, port))
}

#[cfg(test)]
#[path = "portforward_tests.rs"]
pub(crate) mod tests;

#[cfg(test)]
#[path = "kubectl_tests.rs"]
mod kubectl_tests;
