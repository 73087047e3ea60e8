//! The view fed by etcd: the initial load (paged, at one revision) and the watch that
//! applies every later revision, ours and other processes' alike.
//!
//! A writer's transaction resolves only once this feed has applied its revision, so
//! a process reads its own writes; the feed hands the writer the very changes its
//! watchers receive.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use etcd_client::{Client, Event, EventType, GetOptions, WatchOptions};
use tokio::sync::oneshot;

use super::super::encryption::Encryption;
use super::super::engine::Loaded;
use super::super::view::{Applied, View};
use super::super::{Change, ChangeKind, StoreError};
use super::codec;
use super::keys::{Key, Keys};
use super::storage;

/// Objects read per page at load: well under gRPC's 4 MiB message limit at the sizes
/// of Kubernetes objects.
const PAGE: i64 = 500;

/// Revisions whose changes are kept for writers whose answer arrives after the watch
/// delivered their revision (the usual order under load).
const RECENT: usize = 4096;

/// How long the feed waits before reconnecting a broken watch.
const RETRY: Duration = Duration::from_millis(200);

/// What a writer gets for its revision; `None` if the feed lost track (a resync after
/// compaction) and the writer must describe its changes itself.
pub(crate) type Outcome = Option<Vec<Arc<Change>>>;

#[derive(Default)]
struct Waiters {
    applied: u64,
    recent: VecDeque<(u64, Vec<Arc<Change>>)>,
    pending: HashMap<u64, Vec<oneshot::Sender<Outcome>>>,
}

/// The shared state of the feed.
pub(crate) struct Feed {
    pub(crate) view: Arc<View>,
    pub(crate) keys: Keys,
    pub(crate) encryption: Option<Arc<Encryption>>,
    waiters: Mutex<Waiters>,
}

impl Feed {
    pub(crate) fn new(view: Arc<View>, keys: Keys, encryption: Option<Arc<Encryption>>) -> Self {
        Self {
            view,
            keys,
            encryption,
            waiters: Mutex::new(Waiters::default()),
        }
    }

    fn waiters(&self) -> MutexGuard<'_, Waiters> {
        self.waiters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Resolves once revision `rv` is applied, with its changes.
    pub(crate) async fn applied(&self, rv: u64) -> Result<Outcome, StoreError> {
        let rx = {
            let mut w = self.waiters();
            if rv <= w.applied {
                let found = w
                    .recent
                    .binary_search_by_key(&rv, |(r, _)| *r)
                    .ok()
                    .and_then(|i| w.recent.get(i))
                    .map(|(_, c)| c.clone());
                return Ok(found);
            }
            let (tx, rx) = oneshot::channel();
            w.pending.entry(rv).or_default().push(tx);
            rx
        };
        rx.await.map_err(|_| StoreError::Closed)
    }

    /// Starts the feed at `loaded` (already in the view) from revision `loaded.rv + 1`.
    pub(crate) fn mark_loaded(&self, rv: u64) {
        self.waiters().applied = rv;
    }

    /// Applies one watch response's events, one revision at a time.
    fn apply(&self, events: &[Event]) {
        let mut start = 0;
        while start < events.len() {
            let rev = revision(&events[start]);
            let end = events[start..]
                .iter()
                .position(|e| revision(e) != rev)
                .map_or(events.len(), |n| start + n);
            self.apply_revision(rev, &events[start..end]);
            start = end;
        }
    }

    fn apply_revision(&self, rev: u64, events: &[Event]) {
        let mut writes = Vec::new();
        let mut meta = Vec::new();
        let mut changes = Vec::new();
        for event in events {
            let Some(kv) = event.kv() else { continue };
            match self.keys.parse(kv.key()) {
                Some(Key::Meta(key)) if event.event_type() == EventType::Put => {
                    meta.push((key, kv.value().to_vec()));
                }
                Some(Key::Object(key)) => {
                    let previous = self.view.state().objects.get(&key).cloned();
                    let change = match event.event_type() {
                        EventType::Put => {
                            match codec::decode(&key, kv.value(), rev, self.encryption.as_deref()) {
                                Ok((object, stored)) => {
                                    writes.push((key.clone(), Some(stored)));
                                    let kind = if previous.is_some() {
                                        ChangeKind::Modified
                                    } else {
                                        ChangeKind::Added
                                    };
                                    Change {
                                        rv: rev,
                                        kind,
                                        key,
                                        object,
                                        previous,
                                    }
                                }
                                Err(e) => {
                                    tracing::error!(%key, error = %e, "etcd value unreadable; skipped");
                                    continue;
                                }
                            }
                        }
                        EventType::Delete => {
                            let Some(prev) = previous else { continue };
                            let Ok(object) = codec::deleted(&key, &prev, rev) else {
                                continue;
                            };
                            writes.push((key.clone(), None));
                            Change {
                                rv: rev,
                                kind: ChangeKind::Deleted,
                                key,
                                object,
                                previous: Some(prev),
                            }
                        }
                    };
                    changes.push(Arc::new(change));
                }
                _ => {}
            }
        }
        let changes_ref = &changes;
        drop(self.view.publish(Applied {
            writes,
            meta,
            rv: rev,
            changes: changes_ref,
        }));
        let mut w = self.waiters();
        w.applied = w.applied.max(rev);
        if w.recent.len() >= RECENT {
            w.recent.pop_front();
        }
        w.recent.push_back((rev, changes.clone()));
        for tx in w.pending.remove(&rev).unwrap_or_default() {
            let _ = tx.send(Some(changes.clone()));
        }
        // Revisions that carried nothing of ours (cannot be a writer's) are settled too.
        let settled: Vec<u64> = w.pending.keys().copied().filter(|r| *r <= rev).collect();
        for r in settled {
            for tx in w.pending.remove(&r).unwrap_or_default() {
                let _ = tx.send(None);
            }
        }
    }

    /// Replaces the view with a fresh load (after the watch fell behind compaction).
    fn reset(&self, loaded: Loaded) {
        let rv = loaded.rv;
        self.view.reset(loaded);
        let mut w = self.waiters();
        w.applied = rv;
        w.recent.clear();
        let settled: Vec<u64> = w.pending.keys().copied().filter(|r| *r <= rv).collect();
        for r in settled {
            for tx in w.pending.remove(&r).unwrap_or_default() {
                let _ = tx.send(None);
            }
        }
    }
}

fn revision(event: &Event) -> u64 {
    event
        .kv()
        .map_or(0, |kv| u64::try_from(kv.mod_revision()).unwrap_or(0))
}

/// Reads everything under the prefix at one revision, page by page.
pub(crate) async fn load(
    client: &mut Client,
    keys: &Keys,
    encryption: Option<&Encryption>,
) -> Result<Loaded, StoreError> {
    let mut loaded = Loaded::default();
    let root = keys.all().as_bytes().to_vec();
    let mut end = root.clone();
    // The prefix's range end: the root with its last byte incremented ('/' + 1).
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    let mut from = root;
    let mut at = 0i64;
    loop {
        let mut options = GetOptions::new().with_range(end.clone()).with_limit(PAGE);
        if at > 0 {
            options = options.with_revision(at);
        }
        let page = client
            .get(from.clone(), Some(options))
            .await
            .map_err(storage)?;
        if at == 0 {
            at = page.header().map_or(0, |h| h.revision());
        }
        for kv in page.kvs() {
            let rv = u64::try_from(kv.mod_revision()).unwrap_or(0);
            match keys.parse(kv.key()) {
                Some(Key::Object(key)) => {
                    let (_, stored) = codec::decode(&key, kv.value(), rv, encryption)?;
                    loaded.objects.insert(key, stored);
                }
                Some(Key::Meta(key)) => {
                    loaded.meta.insert(key, kv.value().to_vec());
                }
                None => {}
            }
        }
        match page.kvs().last() {
            Some(last) if page.more() => {
                from = last.key().to_vec();
                from.push(0);
            }
            _ => break,
        }
    }
    loaded.rv = u64::try_from(at).unwrap_or(0);
    Ok(loaded)
}

/// Follows etcd from `after + 1` for as long as `stop` is not fired: applies every
/// revision, reconnects a broken watch where it left off, reloads after compaction.
pub(crate) async fn follow(feed: Arc<Feed>, mut client: Client, mut after: u64) {
    loop {
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(i64::try_from(after + 1).unwrap_or(i64::MAX))
            .with_progress_notify();
        match client.watch(feed.keys.all(), Some(options)).await {
            Ok(mut stream) => loop {
                match stream.message().await {
                    Ok(Some(response)) => {
                        if response.compact_revision() > 0 || response.canceled() {
                            tracing::warn!(
                                compacted = response.compact_revision(),
                                "etcd watch fell behind; reloading the store"
                            );
                            match load(&mut client, &feed.keys, feed.encryption.as_deref()).await {
                                Ok(loaded) => {
                                    after = loaded.rv;
                                    feed.reset(loaded);
                                }
                                Err(e) => tracing::error!(error = %e, "etcd reload failed"),
                            }
                            break;
                        }
                        let events = response.events();
                        if let Some(last) = events.last() {
                            after = after.max(revision(last));
                        }
                        feed.apply(events);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "etcd watch broken; reconnecting");
                        break;
                    }
                }
            },
            Err(e) => tracing::warn!(error = %e, "cannot watch etcd; retrying"),
        }
        tokio::time::sleep(RETRY).await;
    }
}
