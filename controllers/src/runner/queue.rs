//! A work queue keyed by object, level-triggered: a key queued twice is reconciled
//! once, with whatever the cache holds by then, and never by two workers at once (a
//! key queued while it is being reconciled comes out again once that is done, as
//! client-go's queue has it). Retries and requeues wait in the queue itself (no task
//! per delay), so a runner that stops leaves nothing behind.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// A namespaced object's key: namespace and name.
pub(crate) type Key = (String, String);

/// The first retry's delay; each failure in a row doubles it.
const BACKOFF_BASE: Duration = Duration::from_millis(5);
/// The longest retry delay (client-go's controllers wait up to 1,000 s; a user
/// fixing a quota should not wait that long).
const BACKOFF_MAX: Duration = Duration::from_secs(60);

#[derive(Default)]
struct State {
    ready: VecDeque<Key>,
    queued: HashSet<Key>,
    /// Keys due later, by when.
    later: BTreeMap<Instant, Vec<Key>>,
    /// Failures in a row per key (the backoff's exponent).
    failures: HashMap<Key, u32>,
    /// Keys a worker has taken and not yet finished.
    processing: HashSet<Key>,
    /// Keys queued while being processed: queued again when done.
    dirty: HashSet<Key>,
    /// Keys in `later` through [`Queue::add_within`]: more such adds are no-ops.
    gathering: HashSet<Key>,
}

/// One controller's queue.
#[derive(Default)]
pub(crate) struct Queue {
    state: Mutex<State>,
    wake: Notify,
}

impl Queue {
    /// Queues `key` now (a no-op if it is queued already).
    pub(crate) fn add(&self, key: Key) {
        let mut s = self.lock();
        if s.processing.contains(&key) {
            s.dirty.insert(key);
            return;
        }
        if s.queued.insert(key.clone()) {
            s.ready.push_back(key);
            drop(s);
            self.wake.notify_one();
        }
    }

    /// Queues `key` within `window`, gathering every such add until then into one:
    /// events that come in bursts (a ReplicaSet's pods changing by the thousand) cost
    /// one reconcile per window, not one each. A key queued already stays as it is.
    pub(crate) fn add_within(&self, key: Key, window: Duration) {
        let mut s = self.lock();
        if s.queued.contains(&key) || s.dirty.contains(&key) || !s.gathering.insert(key.clone()) {
            return;
        }
        s.later
            .entry(Instant::now() + window)
            .or_default()
            .push(key);
        drop(s);
        self.wake.notify_one();
    }

    /// Queues `key` once `after` has passed.
    pub(crate) fn add_after(&self, key: Key, after: Duration) {
        if after.is_zero() {
            return self.add(key);
        }
        self.lock()
            .later
            .entry(Instant::now() + after)
            .or_default()
            .push(key);
        self.wake.notify_one();
    }

    /// Queues `key` again after its backoff (which grows with each failure in a row).
    pub(crate) fn retry(&self, key: Key) {
        let delay = {
            let mut s = self.lock();
            let n = s.failures.entry(key.clone()).or_insert(0);
            let delay = BACKOFF_BASE
                .saturating_mul(1u32.checked_shl(*n).unwrap_or(u32::MAX))
                .min(BACKOFF_MAX);
            *n = n.saturating_add(1);
            delay
        };
        self.add_after(key, delay);
    }

    /// `key` was reconciled without error: its backoff starts over.
    pub(crate) fn succeeded(&self, key: &Key) {
        self.lock().failures.remove(key);
    }

    /// A worker is done with `key` (call after [`Queue::retry`] or
    /// [`Queue::add_after`], if any): queued meanwhile, it comes out again.
    pub(crate) fn done(&self, key: &Key) {
        let mut s = self.lock();
        s.processing.remove(key);
        if s.dirty.remove(key) && s.queued.insert(key.clone()) {
            s.ready.push_back(key.clone());
            drop(s);
            self.wake.notify_one();
        }
    }

    /// The next key to reconcile, waiting for one.
    pub(crate) async fn next(&self) -> Key {
        loop {
            let notified = self.wake.notified();
            let due = {
                let mut s = self.lock();
                let now = Instant::now();
                while let Some(entry) = s.later.first_entry() {
                    if *entry.key() > now {
                        break;
                    }
                    for key in entry.remove() {
                        s.gathering.remove(&key);
                        if s.processing.contains(&key) {
                            s.dirty.insert(key);
                        } else if s.queued.insert(key.clone()) {
                            s.ready.push_back(key);
                        }
                    }
                }
                if let Some(key) = s.ready.pop_front() {
                    s.queued.remove(&key);
                    s.processing.insert(key.clone());
                    return key;
                }
                s.later.keys().next().copied()
            };
            match due {
                Some(at) => {
                    tokio::select! {
                        () = notified => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// How many keys wait now (due or not).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        let s = self.lock();
        s.ready.len() + s.later.values().map(Vec::len).sum::<usize>()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: &str) -> Key {
        ("default".into(), n.into())
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_queued_twice_comes_out_once_and_in_order() {
        let q = Queue::default();
        q.add(key("a"));
        q.add(key("b"));
        q.add(key("a"));
        assert_eq!(q.next().await, key("a"));
        assert_eq!(q.next().await, key("b"));
        assert_eq!(q.len(), 0);
        // Queued while a worker has it: it waits until that worker is done.
        q.add(key("a"));
        assert_eq!(q.len(), 0);
        q.done(&key("a"));
        q.done(&key("b"));
        assert_eq!(q.next().await, key("a"));
        q.done(&key("a"));
        assert_eq!(q.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn adds_within_a_window_come_out_once_at_its_end() {
        let q = Queue::default();
        let start = Instant::now();
        let window = Duration::from_millis(20);
        for _ in 0..1000 {
            q.add_within(key("rs"), window);
        }
        assert_eq!(q.len(), 1);
        assert_eq!(q.next().await, key("rs"));
        assert_eq!(start.elapsed(), window);
        // While it is processed, the next burst gathers again and comes out once more.
        q.add_within(key("rs"), window);
        q.add_within(key("rs"), window);
        assert_eq!(q.len(), 1);
        q.done(&key("rs"));
        assert_eq!(q.next().await, key("rs"));
        assert_eq!(start.elapsed(), window * 2);
        q.done(&key("rs"));
        assert_eq!(q.len(), 0);
        // A key queued for now is not delayed by a gathering add.
        q.add(key("now"));
        q.add_within(key("now"), window);
        assert_eq!(q.len(), 1);
        assert_eq!(q.next().await, key("now"));
        assert_eq!(start.elapsed(), window * 2);
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_keys_and_retries_come_due_with_a_growing_backoff() {
        let q = Queue::default();
        let start = Instant::now();
        q.add_after(key("later"), Duration::from_secs(10));
        q.retry(key("r"));
        assert_eq!(q.next().await, key("r"));
        assert_eq!(start.elapsed(), BACKOFF_BASE);
        q.retry(key("r"));
        q.done(&key("r"));
        let again = Instant::now();
        assert_eq!(q.next().await, key("r"));
        assert_eq!(again.elapsed(), BACKOFF_BASE * 2);
        q.succeeded(&key("r"));
        q.done(&key("r"));
        assert_eq!(q.next().await, key("later"));
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        // Many failures in a row stop at the cap.
        for _ in 0..40 {
            q.retry(key("x"));
            q.next().await;
            q.done(&key("x"));
        }
        let t = Instant::now();
        q.retry(key("x"));
        q.next().await;
        assert_eq!(t.elapsed(), BACKOFF_MAX);
    }
}
