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
use super::super::{Change, ChangeKind, StoreError, Stored};
use super::codec;
use super::keys::{Key, Keys};
use super::own::InFlight;
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

/// One watch event, as the feed reads it.
struct Raw<'a> {
    rev: u64,
    /// A put; otherwise a deletion.
    put: bool,
    key: &'a [u8],
    value: &'a [u8],
}

impl<'a> Raw<'a> {
    fn of(event: &'a Event) -> Option<Self> {
        let kv = event.kv()?;
        Some(Self {
            rev: u64::try_from(kv.mod_revision()).unwrap_or(0),
            put: event.event_type() == EventType::Put,
            key: kv.key(),
            value: kv.value(),
        })
    }
}

/// One watch response as the view applies it.
#[derive(Default)]
struct Batch {
    writes: Vec<(String, Option<Stored>)>,
    meta: Vec<(String, Vec<u8>)>,
    changes: Vec<Arc<Change>>,
    /// Each key written so far, as it now is (`None`: deleted).
    latest: HashMap<String, Option<Stored>>,
}

/// The shared state of the feed.
pub(crate) struct Feed {
    pub(crate) view: Arc<View>,
    pub(crate) keys: Keys,
    pub(crate) encryption: Option<Arc<Encryption>>,
    /// This process's writes the watch has yet to deliver.
    pub(crate) own: InFlight,
    waiters: Mutex<Waiters>,
}

impl Feed {
    pub(crate) fn new(view: Arc<View>, keys: Keys, encryption: Option<Arc<Encryption>>) -> Self {
        Self {
            view,
            keys,
            encryption,
            own: InFlight::default(),
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

    /// Applies one watch response's events: its revisions become visible together (one
    /// publish, so one wake-up per watcher however many revisions arrived), and each
    /// writer gets the changes of its own revision.
    fn apply(&self, events: &[Event]) {
        let events: Vec<Raw<'_>> = events.iter().filter_map(Raw::of).collect();
        self.apply_raw(&events);
    }

    fn apply_raw(&self, events: &[Raw<'_>]) {
        let mut batch = Batch::default();
        let mut revisions = Vec::new();
        let mut start = 0;
        while start < events.len() {
            let rev = events[start].rev;
            let end = events[start..]
                .iter()
                .position(|e| e.rev != rev)
                .map_or(events.len(), |n| start + n);
            let first = batch.changes.len();
            for event in &events[start..end] {
                self.decode(event, &mut batch);
            }
            revisions.push((rev, first..batch.changes.len()));
            start = end;
        }
        let Some(&(last, _)) = revisions.last() else {
            return;
        };
        let changes = batch.changes;
        drop(self.view.publish(Applied {
            writes: batch.writes,
            meta: batch.meta,
            rv: last,
            changes: &changes,
        }));
        let mut w = self.waiters();
        w.applied = w.applied.max(last);
        for (rev, range) in revisions {
            let mine = changes[range].to_vec();
            if w.recent.len() >= RECENT {
                w.recent.pop_front();
            }
            w.recent.push_back((rev, mine.clone()));
            for tx in w.pending.remove(&rev).unwrap_or_default() {
                let _ = tx.send(Some(mine.clone()));
            }
        }
        // Revisions that carried nothing of ours (cannot be a writer's) are settled too.
        let settled: Vec<u64> = w.pending.keys().copied().filter(|r| *r <= last).collect();
        for r in settled {
            for tx in w.pending.remove(&r).unwrap_or_default() {
                let _ = tx.send(None);
            }
        }
    }

    /// Adds one event to `batch`.
    fn decode(&self, event: &Raw<'_>, batch: &mut Batch) {
        let rev = event.rev;
        let key = match self.keys.parse(event.key) {
            Some(Key::Meta(key)) if event.put => {
                batch.meta.push((key, event.value.to_vec()));
                return;
            }
            Some(Key::Object(key)) => key,
            _ => return,
        };
        // An earlier revision of this batch may have written the key: the view does not
        // show that yet.
        let previous = match batch.latest.get(&key) {
            Some(latest) => latest.clone(),
            None => self.view.state().objects.get(&key).cloned(),
        };
        let change = if event.put {
            let decoded = match self.own.take(&key, event.value) {
                Some(p) => codec::written(&key, p.object, &p.encoded, rev),
                None => codec::decode(&key, event.value, rev, self.encryption.as_deref()),
            };
            let (object, stored) = match decoded {
                Ok(decoded) => decoded,
                Err(e) => {
                    tracing::error!(%key, error = %e, "etcd value unreadable; skipped");
                    return;
                }
            };
            batch.latest.insert(key.clone(), Some(stored.clone()));
            batch.writes.push((key.clone(), Some(stored)));
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
        } else {
            let Some(prev) = previous else { return };
            let Ok(object) = codec::deleted(&key, &prev, rev) else {
                return;
            };
            batch.latest.insert(key.clone(), None);
            batch.writes.push((key.clone(), None));
            Change {
                rv: rev,
                kind: ChangeKind::Deleted,
                key,
                object,
                previous: Some(prev),
            }
        };
        batch.changes.push(Arc::new(change));
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use futures::FutureExt as _;
    use serde_json::json;

    use super::*;
    use crate::store::{Precondition, WriteOp};

    fn feed() -> Feed {
        let view = Arc::new(View::new(Loaded::default(), 100));
        Feed::new(view, Keys::new("/registry"), None)
    }

    fn put<'a>(rev: u64, key: &'a str, value: &'a str) -> Raw<'a> {
        Raw {
            rev,
            put: true,
            key: key.as_bytes(),
            value: value.as_bytes(),
        }
    }

    /// Several revisions in one watch response (etcd sends a lagging watcher its
    /// backlog so) touching one key: each change has the revision before it as its
    /// previous version, though the view shows none of them until the batch is in.
    #[tokio::test]
    async fn a_batch_of_revisions_chains_each_keys_previous_versions() {
        let feed = feed();
        let (x, y) = (
            feed.keys.object("configmaps/a/x"),
            feed.keys.object("configmaps/a/y"),
        );
        let v = |n: u32| format!(r#"{{"metadata":{{"name":"x"}},"data":{{"n":"{n}"}}}}"#);
        let (v1, v2, v3) = (v(1), v(2), v(3));
        let mut sub = feed.view.watch("configmaps/", 0).unwrap();
        let deleted = Raw {
            rev: 7,
            put: false,
            key: y.as_bytes(),
            value: b"",
        };
        feed.apply_raw(&[
            put(5, &x, &v1),
            put(5, &y, &v1),
            put(6, &x, &v2),
            deleted,
            put(8, &x, &v3),
        ]);
        let mut changes = Vec::new();
        for _ in 0..5 {
            changes.push(sub.next().await.unwrap());
        }
        let summary: Vec<_> = changes
            .iter()
            .map(|c| {
                (
                    c.rv,
                    c.kind,
                    c.key.as_str(),
                    c.previous.as_ref().map(Stored::rv),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (5, ChangeKind::Added, "configmaps/a/x", None),
                (5, ChangeKind::Added, "configmaps/a/y", None),
                (6, ChangeKind::Modified, "configmaps/a/x", Some(5)),
                (7, ChangeKind::Deleted, "configmaps/a/y", Some(5)),
                (8, ChangeKind::Modified, "configmaps/a/x", Some(6)),
            ]
        );
        let before = changes[2].previous.as_ref().unwrap().decode().unwrap();
        assert_eq!(before["data"]["n"], "1");
        assert_eq!(feed.view.get("configmaps/a/x").unwrap()["data"]["n"], "3");
        assert!(feed.view.get("configmaps/a/y").is_none());
        assert_eq!(feed.view.resource_version(), 8);
    }

    /// A writer waiting on a revision inside a batch gets that revision's changes, and
    /// its own write is taken as sent rather than parsed.
    #[tokio::test]
    async fn each_writer_gets_its_own_revisions_changes_from_a_batch() {
        let feed = feed();
        let object = json!({"metadata": {"name": "x", "resourceVersion": "1"}});
        let encoded = vec![codec::encode("configmaps/a/x", &object, None).unwrap()];
        let value = String::from_utf8(encoded[0].value().to_vec()).unwrap();
        let mut ops = vec![WriteOp::Put {
            key: "configmaps/a/x".into(),
            object,
            precondition: Precondition::None,
        }];
        let sent = feed.own.register(&mut ops, encoded);
        let (x, y) = (
            feed.keys.object("configmaps/a/x"),
            feed.keys.object("configmaps/a/y"),
        );
        let mut mine = Box::pin(feed.applied(6));
        let mut earlier = Box::pin(feed.applied(5));
        // Polled once, each is waiting on its revision.
        assert!((&mut mine).now_or_never().is_none());
        assert!((&mut earlier).now_or_never().is_none());
        feed.apply_raw(&[
            put(5, &y, r#"{"metadata":{"name":"y"}}"#),
            put(6, &x, &value),
        ]);
        let mine = mine.await.unwrap().unwrap();
        assert_eq!(mine.len(), 1);
        assert_eq!(mine[0].key, "configmaps/a/x");
        assert_eq!(
            *mine[0].object,
            json!({"metadata": {"name": "x", "resourceVersion": "6"}})
        );
        assert_eq!(earlier.await.unwrap().unwrap()[0].key, "configmaps/a/y");
        assert_eq!(feed.own.len(), 0, "the feed took the write it recognised");
        drop(sent);
    }
}
