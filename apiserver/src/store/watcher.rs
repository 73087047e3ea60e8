//! A store watch: the replayed history, then the live stream, filtered by key prefix.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::broadcast;

use super::{Change, StoreError};

/// Yields the changes after a resourceVersion in order; see [`super::Store::watch`].
pub struct Watcher {
    prefix: String,
    replay: VecDeque<Arc<Change>>,
    live: broadcast::Receiver<Arc<Change>>,
    last: u64,
}

impl Watcher {
    pub(crate) fn new(
        prefix: String,
        replay: VecDeque<Arc<Change>>,
        live: broadcast::Receiver<Arc<Change>>,
        from: u64,
    ) -> Self {
        Self {
            prefix,
            replay,
            live,
            last: from,
        }
    }

    /// The resourceVersion of the last change delivered (or the start).
    pub fn last_rv(&self) -> u64 {
        self.last
    }

    /// The next change under the prefix. [`StoreError::Expired`] if this watcher fell too far
    /// behind the live stream; [`StoreError::Closed`] when the store is gone.
    pub async fn next(&mut self) -> Result<Arc<Change>, StoreError> {
        if let Some(change) = self.replay.pop_front() {
            self.last = change.rv;
            return Ok(change);
        }
        loop {
            match self.live.recv().await {
                Ok(change) => {
                    // Live changes at or before the replayed ones were already delivered.
                    if change.rv <= self.last || !change.key.starts_with(&self.prefix) {
                        continue;
                    }
                    self.last = change.rv;
                    return Ok(change);
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    return Err(StoreError::Expired {
                        requested: self.last,
                        oldest: self.last + 1,
                    });
                }
                Err(broadcast::error::RecvError::Closed) => return Err(StoreError::Closed),
            }
        }
    }
}
