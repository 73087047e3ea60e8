//! A watch that starts before what the view remembers: served by an etcd watch of its
//! own from the asked revision, so any revision etcd still retains can be resumed
//! (a client moving to another replica keeps its place). Below etcd's compacted
//! revision the watcher gets [`StoreError::Expired`], which the API answers 410.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, EventType, WatchOptions};

use super::super::watcher::Subscriber;
use super::super::{Change, ChangeKind, Stored};
use super::codec;
use super::feed::Feed;
use super::keys::Key;

/// How often an idle replay checks whether its watcher is gone.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// Feeds `live` with the changes under `prefix` after `from`, until it is dropped.
pub(crate) async fn replay(
    feed: Arc<Feed>,
    mut client: Client,
    prefix: String,
    from: u64,
    live: Arc<Subscriber>,
) {
    // However the feed ends (the store's runtime stops with the store), its watcher
    // ends too instead of waiting forever.
    let _closing = CloseOnDrop(Arc::clone(&live));
    let options = WatchOptions::new()
        .with_prefix()
        .with_prev_key()
        .with_start_revision(i64::try_from(from + 1).unwrap_or(i64::MAX));
    let mut stream = match client.watch(feed.keys.object(&prefix), Some(options)).await {
        Ok(stream) => stream,
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch etcd for a resumed watch");
            live.expire();
            return;
        }
    };
    let mut idle = tokio::time::interval(IDLE_CHECK);
    loop {
        let message = tokio::select! {
            m = stream.message() => m,
            _ = idle.tick() => {
                if live.is_watched() { continue } else { return }
            }
        };
        let response = match message {
            Ok(Some(r)) => r,
            Ok(None) | Err(_) => {
                live.expire();
                return;
            }
        };
        if response.compact_revision() > 0 || response.canceled() {
            live.expire();
            return;
        }
        let changes: Vec<Arc<Change>> = response
            .events()
            .iter()
            .filter_map(|event| {
                let kv = event.kv()?;
                let Some(Key::Object(key)) = feed.keys.parse(kv.key()) else {
                    return None;
                };
                let rv = u64::try_from(kv.mod_revision()).ok()?;
                let enc = feed.encryption.as_deref();
                let previous: Option<Stored> = event.prev_kv().and_then(|p| {
                    let prv = u64::try_from(p.mod_revision()).ok()?;
                    codec::decode(&key, p.value(), prv, enc)
                        .ok()
                        .map(|(_, s)| s)
                });
                let (kind, object) = match event.event_type() {
                    EventType::Put => {
                        let (object, _) = codec::decode(&key, kv.value(), rv, enc).ok()?;
                        let kind = if kv.version() == 1 {
                            ChangeKind::Added
                        } else {
                            ChangeKind::Modified
                        };
                        (kind, object)
                    }
                    EventType::Delete => {
                        let object = codec::deleted(&key, previous.as_ref()?, rv).ok()?;
                        (ChangeKind::Deleted, object)
                    }
                };
                Some(Arc::new(Change {
                    rv,
                    kind,
                    key,
                    object,
                    previous,
                }))
            })
            .collect();
        live.offer(&changes);
        if !live.is_watched() {
            return;
        }
    }
}

struct CloseOnDrop(Arc<Subscriber>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}
