//! The read side both engines share: the objects in memory, the bounded change history
//! and the live fan-out to watchers.
//!
//! The redb/memory engine feeds it from its committer thread; the etcd store feeds it
//! from an etcd watch (as kube-apiserver's watch cache does). Either way a batch becomes
//! visible to readers and watchers at once, in resourceVersion order.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, RwLock, Weak};

use serde_json::Value;

use super::engine::Loaded;
use super::watcher::{Subscriber, Watcher};
use super::{Change, StoreError, Stored};

pub(crate) struct State {
    pub(crate) objects: BTreeMap<String, Stored>,
    pub(crate) meta: HashMap<String, Vec<u8>>,
    pub(crate) rv: u64,
}

struct Hub {
    history: VecDeque<Arc<Change>>,
    capacity: usize,
    /// A watch may start from any resourceVersion >= horizon: every change after it is
    /// still in `history`.
    horizon: u64,
    /// Every open watch; dropped watches are pruned as changes are published.
    subscribers: Vec<Weak<Subscriber>>,
}

impl Drop for Hub {
    fn drop(&mut self) {
        // The store is gone: open watches end once they have read what is queued.
        for sub in self.subscribers.iter().filter_map(Weak::upgrade) {
            sub.close();
        }
    }
}

/// One committed batch as the view applies it: object writes in order (`None` removes),
/// meta writes, the batch's resourceVersion and the changes watchers receive.
pub(crate) struct Applied<'a> {
    pub(crate) writes: Vec<(String, Option<Stored>)>,
    pub(crate) meta: Vec<(String, Vec<u8>)>,
    pub(crate) rv: u64,
    pub(crate) changes: &'a [Arc<Change>],
}

/// The objects, their history and the watchers.
pub(crate) struct View {
    state: RwLock<State>,
    hub: Mutex<Hub>,
}

impl View {
    pub(crate) fn new(loaded: Loaded, history: usize) -> Self {
        Self {
            hub: Mutex::new(Hub {
                history: VecDeque::new(),
                capacity: history.max(1),
                horizon: loaded.rv,
                subscribers: Vec::new(),
            }),
            state: RwLock::new(State {
                objects: loaded.objects,
                meta: loaded.meta,
                rv: loaded.rv,
            }),
        }
    }

    /// The state, for a writer checking preconditions against it.
    pub(crate) fn state(&self) -> std::sync::RwLockReadGuard<'_, State> {
        read(&self.state)
    }

    pub(crate) fn get(&self, key: &str) -> Option<Arc<Value>> {
        let stored = read(&self.state).objects.get(key).cloned()?;
        decoded(key, &stored)
    }

    pub(crate) fn list(&self, prefix: &str) -> (Vec<Arc<Value>>, u64) {
        self.list_where(prefix, |_| true)
    }

    pub(crate) fn list_containing(&self, prefix: &str, needle: &str) -> (Vec<Arc<Value>>, u64) {
        let finder = memchr::memmem::Finder::new(needle.as_bytes());
        self.list_where(prefix, |s| finder.find(s.json()).is_some())
    }

    pub(crate) fn list_stored(&self, prefix: &str) -> (Vec<Stored>, u64) {
        let state = read(&self.state);
        let items = under(&state.objects, prefix)
            .map(|(_, v)| v.clone())
            .collect();
        (items, state.rv)
    }

    fn list_where(&self, prefix: &str, keep: impl Fn(&Stored) -> bool) -> (Vec<Arc<Value>>, u64) {
        // Copy the (cheap) encoded objects under the lock, decode outside it.
        let (stored, rv): (Vec<(String, Stored)>, u64) = {
            let state = read(&self.state);
            let items = under(&state.objects, prefix)
                .filter(|(_, v)| keep(v))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            (items, state.rv)
        };
        let items = stored
            .iter()
            .filter_map(|(key, v)| decoded(key, v))
            .collect();
        (items, rv)
    }

    pub(crate) fn watch(&self, prefix: &str, from: u64) -> Result<Watcher, StoreError> {
        let mut hub = lock(&self.hub);
        if from < hub.horizon {
            return Err(StoreError::Expired {
                requested: from,
                oldest: hub.horizon,
            });
        }
        let replay = hub
            .history
            .iter()
            .filter(|c| c.rv > from && c.key.starts_with(prefix))
            .cloned()
            .collect();
        let live = Subscriber::new(prefix.to_string());
        hub.subscribers.push(Arc::downgrade(&live));
        Ok(Watcher::new(replay, live, from))
    }

    /// The changes after `from` under `prefix` as the history holds them, or `None` if
    /// the history no longer reaches back to `from`.
    pub(crate) fn changes_since(&self, prefix: &str, from: u64) -> Option<Vec<Arc<Change>>> {
        let hub = lock(&self.hub);
        if from < hub.horizon {
            return None;
        }
        Some(
            hub.history
                .iter()
                .filter(|c| c.rv > from && c.key.starts_with(prefix))
                .cloned()
                .collect(),
        )
    }

    pub(crate) fn resource_version(&self) -> u64 {
        read(&self.state).rv
    }

    pub(crate) fn get_meta(&self, key: &str) -> Option<Vec<u8>> {
        read(&self.state).meta.get(key).cloned()
    }

    /// Drops the changes before `rv` (the backend compacted its history to `rv`): a
    /// watch or paged list from before it is Expired, as the backend would answer.
    pub(crate) fn forget_before(&self, rv: u64) {
        let horizon = rv.saturating_sub(1);
        let mut hub = lock(&self.hub);
        if horizon <= hub.horizon {
            return;
        }
        hub.horizon = horizon;
        while hub.history.front().is_some_and(|c| c.rv <= horizon) {
            hub.history.pop_front();
        }
    }

    /// Replaces everything with `loaded` (the backend lost track of its changes) and
    /// cuts off every watcher with Expired, so each relists.
    pub(crate) fn reset(&self, loaded: Loaded) {
        let mut hub = lock(&self.hub);
        {
            let mut state = write(&self.state);
            state.objects = loaded.objects;
            state.meta = loaded.meta;
            state.rv = loaded.rv;
        }
        hub.history.clear();
        hub.horizon = loaded.rv;
        for sub in hub.subscribers.drain(..).filter_map(|w| w.upgrade()) {
            sub.expire();
        }
    }

    /// Makes a committed batch visible; returns the changes it pushed out of the history,
    /// for the caller to free outside the locks.
    pub(crate) fn publish(&self, batch: Applied<'_>) -> Vec<Arc<Change>> {
        // Hub first, then state: a watch subscribing under the hub lock sees either all
        // of this batch in history or all of it live, never half.
        let mut hub = lock(&self.hub);
        {
            let mut state = write(&self.state);
            for (key, value) in batch.writes {
                match value {
                    Some(v) => {
                        state.objects.insert(key, v);
                    }
                    None => {
                        state.objects.remove(&key);
                    }
                }
            }
            for (key, value) in batch.meta {
                state.meta.insert(key, value);
            }
            state.rv = state.rv.max(batch.rv);
        }
        let mut evicted = Vec::new();
        for change in batch.changes {
            if hub.history.len() >= hub.capacity
                && let Some(old) = hub.history.pop_front()
            {
                hub.horizon = old.rv;
                evicted.push(old);
            }
            hub.history.push_back(Arc::clone(change));
        }
        hub.subscribers.retain(|weak| match weak.upgrade() {
            Some(sub) => {
                sub.offer(batch.changes);
                true
            }
            None => false,
        });
        evicted
    }
}

/// The objects whose key starts with `prefix`, in key order.
pub(crate) fn under<'a>(
    objects: &'a BTreeMap<String, Stored>,
    prefix: &'a str,
) -> impl Iterator<Item = (&'a String, &'a Stored)> {
    objects
        .range(prefix.to_string()..)
        .take_while(move |(k, _)| k.starts_with(prefix))
}

fn read(state: &RwLock<State>) -> std::sync::RwLockReadGuard<'_, State> {
    state
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write(state: &RwLock<State>) -> std::sync::RwLockWriteGuard<'_, State> {
    state
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lock(hub: &Mutex<Hub>) -> std::sync::MutexGuard<'_, Hub> {
    hub.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `stored` decoded for a reader; a failure (memory corruption: the store wrote the text
/// itself) is logged and reads as absent rather than taking the process down.
pub(crate) fn decoded(key: &str, stored: &Stored) -> Option<Arc<Value>> {
    match stored.value() {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::error!(key, error = %e, "stored object cannot be decoded");
            None
        }
    }
}
