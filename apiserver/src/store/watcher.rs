//! A store watch: the replayed history, then the live changes under its key prefix.
//!
//! Each watcher has its own queue, filled by the committer with the changes under its
//! prefix only. A shared ring (one slot per change of any kind) made every watcher read
//! every change, and cut off a busy in-process watcher, such as the scheduler's pod
//! watch during a burst of creations, after a fraction of a second; the ring also kept
//! its last few thousand objects alive. A queue holds only what its watcher has not read
//! yet, and a watcher that falls [`QUEUE_LIMIT`] changes behind is cut off with Expired
//! (it then relists), so a stuck client cannot hold memory without bound.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use super::{Change, StoreError};

/// Changes a watcher may have unread before it is cut off.
pub(crate) const QUEUE_LIMIT: usize = 32 * 1024;

/// The committer's side of one watcher.
pub(crate) struct Subscriber {
    prefix: String,
    queue: Mutex<Queue>,
    wake: Notify,
}

#[derive(Default)]
struct Queue {
    changes: VecDeque<Arc<Change>>,
    overflowed: bool,
    closed: bool,
}

impl Subscriber {
    pub(crate) fn new(prefix: String) -> Arc<Self> {
        Arc::new(Self {
            prefix,
            queue: Mutex::new(Queue::default()),
            wake: Notify::new(),
        })
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `changes` that fall under the prefix; wakes the watcher if any did.
    pub(crate) fn offer(&self, changes: &[Arc<Change>]) {
        let mut queued = false;
        {
            let mut q = self.queue();
            if q.overflowed || q.closed {
                return;
            }
            for change in changes.iter().filter(|c| c.key.starts_with(&self.prefix)) {
                if q.changes.len() >= QUEUE_LIMIT {
                    q.overflowed = true;
                    q.changes.clear();
                    break;
                }
                q.changes.push_back(Arc::clone(change));
                queued = true;
            }
            queued |= q.overflowed;
        }
        if queued {
            self.wake.notify_one();
        }
    }

    /// The watcher must relist: it gets Expired once it has read nothing more.
    pub(crate) fn expire(&self) {
        {
            let mut q = self.queue();
            q.overflowed = true;
            q.changes.clear();
        }
        self.wake.notify_one();
    }

    /// Whether the watcher still exists (a feed of its own stops when it is gone).
    pub(crate) fn is_watched(self: &Arc<Self>) -> bool {
        Arc::strong_count(self) > 1
    }

    /// The store is gone: the watcher ends after what it has queued.
    pub(crate) fn close(&self) {
        self.queue().closed = true;
        self.wake.notify_one();
    }
}

/// Yields the changes after a resourceVersion in order; see [`super::Store::watch`].
pub struct Watcher {
    replay: VecDeque<Arc<Change>>,
    live: Arc<Subscriber>,
    last: u64,
    /// Live changes at or before this were replayed already. Several changes may share
    /// one resourceVersion (one etcd transaction), so `last` cannot serve.
    replayed: u64,
}

impl Watcher {
    pub(crate) fn new(replay: VecDeque<Arc<Change>>, live: Arc<Subscriber>, from: u64) -> Self {
        let replayed = replay.back().map_or(from, |c: &Arc<Change>| c.rv.max(from));
        Self {
            replay,
            live,
            last: from,
            replayed,
        }
    }

    /// The next change under the prefix. [`StoreError::Expired`] if this watcher fell too far
    /// behind; [`StoreError::Closed`] when the store is gone.
    pub async fn next(&mut self) -> Result<Arc<Change>, StoreError> {
        if let Some(change) = self.replay.pop_front() {
            self.last = change.rv;
            return Ok(change);
        }
        loop {
            {
                let mut q = self.live.queue();
                while let Some(change) = q.changes.pop_front() {
                    // Live changes at or before the replayed ones were already delivered.
                    if change.rv > self.replayed {
                        self.last = change.rv;
                        return Ok(change);
                    }
                }
                if q.overflowed {
                    return Err(StoreError::Expired {
                        requested: self.last,
                        oldest: self.last + 1,
                    });
                }
                if q.closed {
                    return Err(StoreError::Closed);
                }
            }
            // A wake-up sent before this wait is kept as a permit, so none is lost.
            self.live.wake.notified().await;
        }
    }
}
