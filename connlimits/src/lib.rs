//! Serving an axum router with a cap on open connections and a header-read
//! timeout, so idle or half-sent connections cannot use up the descriptors
//! and starve real requests. The API shim and localmesos serve through it.
//!
//! # Contract
//!
//! - At most [`ConnLimits::max_connections`] connections are open (lowered to
//!   what the descriptor limit leaves, [`effective_max_connections`]). At the
//!   cap a new connection displaces the oldest one with no request in
//!   service (an idle or half-sent one), so a flood of idle sockets costs at
//!   most the cap and a real request still gets through; if every open
//!   connection is serving a request the new one is closed.
//! - A connection waiting for a request (fresh, idle keep-alive, or halfway
//!   through its headers) is closed after [`ConnLimits::header_read_timeout`].
//! - A request counts as in service until its response body ends, so a
//!   watch's connection is never displaced.
//! - Each request carries `ConnectInfo<SocketAddr>` of its peer.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

/// What [`serve_with_shutdown`] enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// How long a connection may wait for, or take to send, a request's headers.
    pub header_read_timeout: Duration,
}

/// Descriptors kept free of connections, for the store, files, agents'
/// sockets and the listener's own accept.
const DESCRIPTOR_RESERVE: u64 = 256;

/// A response body that holds `guard` until it ends or is dropped, so a count
/// (a connection's busy requests, a client's watches) lasts as long as the
/// response streams. Size hints pass through, so Content-Length is kept.
pub struct GuardedBody<G> {
    inner: Body,
    _guard: G,
}

impl<G> GuardedBody<G> {
    /// `inner`, holding `guard` while it streams.
    pub fn new(inner: Body, guard: G) -> Self {
        Self {
            inner,
            _guard: guard,
        }
    }
}

impl<G: Unpin + Send + 'static> HttpBody for GuardedBody<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// One open connection's state.
#[derive(Debug, Default)]
struct Conn {
    /// Requests in service (response not yet fully sent).
    busy: AtomicUsize,
    /// Told when a newer connection displaces this one.
    evict: Notify,
}

/// Open connections, oldest first, and the cap on them.
#[derive(Debug)]
pub struct Connections {
    max: usize,
    open: Mutex<(u64, BTreeMap<u64, Arc<Conn>>)>,
    displaced: AtomicUsize,
    refused: AtomicUsize,
}

/// A connection's place among the [`Connections`]; dropping it frees the place.
#[derive(Debug)]
pub struct Slot {
    all: Arc<Connections>,
    id: u64,
    conn: Arc<Conn>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.all.open.lock().unwrap_or_else(|p| p.into_inner());
        open.1.remove(&self.id);
    }
}

struct Busy(Arc<Conn>);

impl Busy {
    fn new(conn: &Arc<Conn>) -> Self {
        conn.busy.fetch_add(1, Ordering::AcqRel);
        Self(conn.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Connections {
    /// At most `max` connections (at least one).
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            open: Mutex::new((0, BTreeMap::new())),
            displaced: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
        })
    }

    /// A place for a new connection: free, or taken from the oldest connection
    /// with no request in service (which is told to close). `None` when every
    /// open connection is serving a request.
    pub fn admit(self: &Arc<Self>) -> Option<Slot> {
        let mut guard = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let (next, open) = &mut *guard;
        if open.len() >= self.max {
            let idle = open
                .iter()
                .find(|(_, c)| c.busy.load(Ordering::Acquire) == 0)
                .map(|(id, _)| *id);
            let Some(idle) = idle else {
                self.refused.fetch_add(1, Ordering::Relaxed);
                return None;
            };
            if let Some(c) = open.remove(&idle) {
                c.evict.notify_one();
                self.displaced.fetch_add(1, Ordering::Relaxed);
            }
        }
        let id = *next;
        *next += 1;
        let conn = Arc::new(Conn::default());
        open.insert(id, conn.clone());
        Some(Slot {
            all: self.clone(),
            id,
            conn,
        })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).1.len()
    }

    /// Idle connections closed so far to make room for new ones.
    pub fn displaced(&self) -> usize {
        self.displaced.load(Ordering::Relaxed)
    }

    /// New connections closed so far because every open one was busy.
    pub fn refused(&self) -> usize {
        self.refused.load(Ordering::Relaxed)
    }
}

/// `wanted`, lowered to what the process' descriptor limit leaves after a
/// reserve, so the cap is reached before `accept` fails with EMFILE.
pub fn effective_max_connections(wanted: usize) -> usize {
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    let room = soft.saturating_sub(DESCRIPTOR_RESERVE).max(16);
    wanted.min(usize::try_from(room).unwrap_or(usize::MAX))
}

/// Serves `router` on one accepted stream (plain TCP or TLS) over HTTP/1.1
/// with `limits.header_read_timeout`, until the client closes, a newer
/// connection displaces this idle one, or `stop` turns true (then it
/// finishes the request in service and closes). Each request carries
/// `ConnectInfo(peer)`.
pub async fn serve_connection<I>(
    io: I,
    peer: SocketAddr,
    router: Router,
    limits: ConnLimits,
    slot: Slot,
    mut stop: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let conn_state = slot.conn.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let busy = Busy::new(&conn_state);
        let mut router = router.clone();
        let mut req = req.map(Body::new);
        req.extensions_mut().insert(ConnectInfo(peer));
        async move {
            let resp = match tower_service::Service::call(&mut router, req).await {
                Ok(resp) => resp,
                Err(never) => match never {},
            };
            Ok::<_, Infallible>(resp.map(|body| Body::new(GuardedBody::new(body, busy))))
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let conn = builder
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    tokio::pin!(conn);
    let mut stopping = *stop.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(%peer, error = %e, "connection ended");
                }
                break;
            }
            () = slot.conn.evict.notified() => {
                tracing::debug!(%peer, "idle connection closed for a new one");
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
    drop(slot);
}

/// Whether an accept error is one connection's problem (the client gave up
/// already) rather than the listener's.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    matches!(
        e.kind(),
        ConnectionRefused | ConnectionAborted | ConnectionReset
    )
}

/// Serves `router` on `listener` with the connection limits until `shutdown`
/// resolves; then stops accepting, lets requests in service finish and
/// returns. Per-request limits are the caller's to layer onto `router`.
///
/// # Errors
/// None today: accept failures (EMFILE included) are logged and retried, so
/// the listener outlives a descriptor shortage.
pub async fn serve_with_shutdown(
    listener: TcpListener,
    router: Router,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let connections = Connections::new(effective_max_connections(limits.max_connections));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let Some(slot) = connections.admit() else {
                        tracing::debug!(%peer, "connection refused: every connection is busy");
                        continue;
                    };
                    let (router, stop) = (router.clone(), stop_rx.clone());
                    let _ = stream.set_nodelay(true);
                    tasks.spawn(async move {
                        serve_connection(stream, peer, router, limits, slot, stop).await;
                    });
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
    while tasks.join_next().await.is_some() {}
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn at_the_cap_the_oldest_idle_connection_makes_room_and_busy_ones_stay() {
        let all = Connections::new(2);
        let a = all.admit().unwrap();
        let b = all.admit().unwrap();
        let _busy_a = Busy::new(&a.conn);
        let c = all.admit().unwrap();
        assert_eq!(all.open(), 2);
        assert_eq!(all.displaced(), 1, "b, idle, made room");
        let _busy_c = Busy::new(&c.conn);
        assert!(all.admit().is_none(), "a and c are both busy");
        assert_eq!(all.refused(), 1);
        drop(b);
        drop(c);
        assert_eq!(all.open(), 1);
        assert!(all.admit().is_some());
    }
}
