//! The open connections, oldest first, and the cap on them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};

/// Descriptors kept free of connections, for the store, files, agents'
/// sockets and the listener's own accept.
const DESCRIPTOR_RESERVE: u64 = 256;

/// One open connection's state.
#[derive(Debug)]
pub(crate) struct Conn {
    /// Requests in service (response not yet fully sent). A watch channel,
    /// so the idle timer sees every change and misses none.
    busy: watch::Sender<usize>,
    /// Told when a newer connection displaces this one.
    evict: Notify,
}

impl Conn {
    fn new() -> Self {
        Self {
            busy: watch::Sender::new(0),
            evict: Notify::new(),
        }
    }

    fn is_idle(&self) -> bool {
        *self.busy.borrow() == 0
    }

    /// Resolves once a newer connection has displaced this one.
    pub(crate) async fn evicted(&self) {
        self.evict.notified().await;
    }

    /// Resolves once the connection has had no request in service for
    /// `timeout` at a stretch: fresh, between keep-alive requests, or
    /// halfway through a request's headers (which is not in service yet).
    pub(crate) async fn idle_for(&self, timeout: Duration) {
        let mut busy = self.busy.subscribe();
        loop {
            if *busy.borrow_and_update() == 0 {
                if tokio::time::timeout(timeout, busy.changed()).await.is_err() {
                    return;
                }
            } else if busy.changed().await.is_err() {
                // The sender lives in `self`; it cannot be gone while we borrow it.
                std::future::pending::<()>().await;
            }
        }
    }
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
    pub(crate) conn: Arc<Conn>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.all.open.lock().unwrap_or_else(|p| p.into_inner());
        open.1.remove(&self.id);
    }
}

/// One request in service on a connection, until dropped.
pub(crate) struct Busy(Arc<Conn>);

impl Busy {
    pub(crate) fn new(conn: &Arc<Conn>) -> Self {
        conn.busy.send_modify(|n| *n += 1);
        Self(conn.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.send_modify(|n| *n = n.saturating_sub(1));
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
            let idle = open.iter().find(|(_, c)| c.is_idle()).map(|(id, _)| *id);
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
        let conn = Arc::new(Conn::new());
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

    #[tokio::test(start_paused = true)]
    async fn idle_timer_counts_only_stretches_without_a_request() {
        let all = Connections::new(1);
        let slot = all.admit().unwrap();
        let conn = slot.conn.clone();
        let busy = Busy::new(&conn);
        let timer = tokio::spawn({
            let conn = conn.clone();
            async move { conn.idle_for(Duration::from_secs(5)).await }
        });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!timer.is_finished(), "a busy connection is never idle");
        drop(busy);
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert!(!timer.is_finished());
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(timer.is_finished(), "idle for 5s after its last request");
    }
}
