//! The one accept loop: a handshake step (none, or TLS), then HTTP/1.1 or
//! HTTP/2 on the stream, under the connection cap and the idle timer.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Extensions;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::ConnLimits;
use crate::body::GuardedBody;
use crate::slots::{Busy, Connections, Slot, effective_max_connections};

/// How long requests in service may take to finish once shutdown begins;
/// past it their connections are dropped, so a stuck client cannot hold
/// the process up.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// What turns an accepted TCP connection into the stream HTTP is spoken on:
/// [`Plain`] keeps it, a TLS acceptor (the API shim's) shakes hands. The
/// handshake runs inside the connection's task, under the connection cap,
/// and is bounded by [`ConnLimits::header_read_timeout`] as Go's net/http
/// bounds it by ReadHeaderTimeout.
pub trait Handshake: Send + Sync + 'static {
    /// The stream after the handshake.
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;

    /// Shakes hands on `tcp`; the extensions are added to every request of
    /// the connection (a verified client certificate, say).
    fn handshake(
        &self,
        tcp: TcpStream,
    ) -> impl Future<Output = io::Result<(Self::Stream, Extensions)>> + Send;
}

/// Plain TCP: no handshake.
#[derive(Debug, Clone, Copy, Default)]
pub struct Plain;

impl Handshake for Plain {
    type Stream = TcpStream;

    async fn handshake(&self, tcp: TcpStream) -> io::Result<(TcpStream, Extensions)> {
        Ok((tcp, Extensions::new()))
    }
}

/// Serves `router` on one stream, HTTP/1.1 or HTTP/2 (hyper-util's auto
/// builder), until the client closes, the connection has been without a
/// request for `limits.header_read_timeout`, a newer connection displaces
/// it while idle, or `stop` turns true (then it finishes the requests in
/// service and closes). Each request carries `ConnectInfo(peer)` and
/// `extensions`.
async fn serve_connection<I>(
    io: I,
    peer: SocketAddr,
    extensions: Extensions,
    router: Router,
    limits: ConnLimits,
    slot: &Slot,
    stop: &mut watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let conn_state = slot.conn.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let busy = Busy::new(&conn_state);
        let mut router = router.clone();
        let mut req = req.map(Body::new);
        req.extensions_mut().extend(extensions.clone());
        req.extensions_mut().insert(ConnectInfo(peer));
        async move {
            let resp = match tower_service::Service::call(&mut router, req).await {
                Ok(resp) => resp,
                Err(never) => match never {},
            };
            Ok::<_, Infallible>(resp.map(|body| Body::new(GuardedBody::new(body, busy))))
        }
    });
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    builder.http2().timer(TokioTimer::new());
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    tokio::pin!(conn);
    let mut stopping = *stop.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    let idle = slot.conn.idle_for(limits.header_read_timeout);
    tokio::pin!(idle);
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended");
                }
                break;
            }
            () = slot.conn.evicted() => {
                tracing::debug!(%peer, "idle connection closed for a new one");
                break;
            }
            () = &mut idle => {
                tracing::debug!(%peer, "connection closed: no request within the header-read timeout");
                break;
            }
            changed = stop.changed(), if !stopping => {
                if changed.is_err() || *stop.borrow() {
                    stopping = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// One accepted connection, from handshake to close.
async fn connection<H: Handshake>(
    tcp: TcpStream,
    peer: SocketAddr,
    handshake: Arc<H>,
    router: Router,
    limits: ConnLimits,
    slot: Slot,
    mut stop: watch::Receiver<bool>,
) {
    let _ = tcp.set_nodelay(true);
    let shaken = tokio::select! {
        r = tokio::time::timeout(limits.header_read_timeout, handshake.handshake(tcp)) => r,
        () = slot.conn.evicted() => {
            tracing::debug!(%peer, "connection in its handshake closed for a new one");
            return;
        }
        _ = stop.wait_for(|stopped| *stopped) => return,
    };
    let (io, extensions) = match shaken {
        Ok(Ok(shaken)) => shaken,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%peer, "handshake not finished within the header-read timeout");
            return;
        }
    };
    serve_connection(io, peer, extensions, router, limits, &slot, &mut stop).await;
}

/// Whether an accept error is one connection's problem (the client gave up
/// already) rather than the listener's.
fn is_connection_error(e: &io::Error) -> bool {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

/// Serves `router` over plain TCP on `listener` with the connection limits
/// until `shutdown` resolves (see [`serve_with_handshake`]).
///
/// # Errors
/// None today: accept failures (EMFILE included) are logged and retried.
pub async fn serve_with_shutdown(
    listener: TcpListener,
    router: Router,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    serve_with_handshake(listener, Plain, router, limits, shutdown).await
}

/// Serves `router` on `listener`, each connection first through
/// `handshake`, with the connection limits, until `shutdown` resolves; then
/// stops accepting, lets requests in service finish (for at most
/// [`DRAIN_TIMEOUT`]) and returns. Per-request limits are the caller's to
/// layer onto `router`.
///
/// # Errors
/// None today: accept failures (EMFILE included) are logged and retried, so
/// the listener outlives a descriptor shortage.
pub async fn serve_with_handshake<H: Handshake>(
    listener: TcpListener,
    handshake: H,
    router: Router,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let connections = Connections::new(effective_max_connections(limits.max_connections));
    let handshake = Arc::new(handshake);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    let Some(slot) = connections.admit() else {
                        tracing::debug!(%peer, "connection refused: every connection is busy");
                        continue;
                    };
                    let (handshake, router, stop) = (handshake.clone(), router.clone(), stop_rx.clone());
                    tasks.spawn(connection(tcp, peer, handshake, router, limits, slot, stop));
                }
                Err(e) if is_connection_error(&e) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::debug!(
            left = tasks.len(),
            "requests still in service at the drain timeout"
        );
        tasks.shutdown().await;
    }
    Ok(())
}
