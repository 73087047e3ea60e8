//! Deadlines by the API's clock: the sweep of the run controllers (Jobs'
//! `activeDeadlineSeconds` and re-create backoff, CronJobs' ticks,
//! `ttlSecondsAfterFinished`).
//!
//! A reconcile that says "look again in `d`" is requeued after `d` on the queue's own
//! timer, which is precise under the system clock. The same moment is also written
//! here, by the injected clock ([`apiserver::Api::now`]); the sweep compares it with
//! that clock every [`SWEEP_INTERVAL`], so a test that moves a manual clock across a
//! deadline or a minute boundary sees the controller act within one interval,
//! without sleeping for the deadline itself.
//!
//! # Invariant
//! The sweep transitions nothing: it only queues keys. Every status change stays in
//! the controller's sync, which the queue serializes per key, so a sweep cannot race
//! a watch-driven sync of the same object.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::queue::{Key, Queue};

/// How often due deadlines are looked for: it bounds how late a deadline met by a
/// jump of an injected clock is acted on, not how precisely ticks are computed.
pub(crate) const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Default)]
struct State {
    due: BTreeMap<SystemTime, BTreeSet<Key>>,
    by_key: HashMap<Key, SystemTime>,
}

/// One controller's pending deadlines: at most one per key, the latest asked for.
#[derive(Default)]
pub(crate) struct Deadlines(Mutex<State>);

impl Deadlines {
    /// `key` is due at `at` (replacing what it was due at before).
    pub(crate) fn set(&self, key: Key, at: SystemTime) {
        let mut s = self.lock();
        if let Some(old) = s.by_key.insert(key.clone(), at)
            && let Some(keys) = s.due.get_mut(&old)
        {
            keys.remove(&key);
            if keys.is_empty() {
                s.due.remove(&old);
            }
        }
        s.due.entry(at).or_default().insert(key);
    }

    /// Removes and returns the keys due at or before `now`.
    pub(crate) fn take_due(&self, now: SystemTime) -> Vec<Key> {
        let mut s = self.lock();
        let later = match now.checked_add(Duration::from_nanos(1)) {
            Some(t) => s.due.split_off(&t),
            None => BTreeMap::new(),
        };
        let due = std::mem::replace(&mut s.due, later);
        let keys: Vec<Key> = due.into_values().flatten().collect();
        for k in &keys {
            s.by_key.remove(k);
        }
        keys
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Queues each key of `deadlines` on `queue` once `now()` has passed it, for ever.
pub(crate) async fn sweep(deadlines: &Deadlines, queue: &Queue, now: impl Fn() -> SystemTime) {
    let mut tick = tokio::time::interval(SWEEP_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for key in deadlines.take_due(now()) {
            queue.add(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: &str) -> Key {
        ("default".into(), n.into())
    }

    #[test]
    fn a_key_is_due_once_at_its_latest_deadline() {
        let d = Deadlines::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        d.set(key("a"), t0 + Duration::from_secs(10));
        d.set(key("b"), t0 + Duration::from_secs(5));
        // Asked again: the later deadline replaces the earlier one.
        d.set(key("b"), t0 + Duration::from_secs(20));
        assert!(d.take_due(t0).is_empty());
        assert_eq!(d.take_due(t0 + Duration::from_secs(10)), vec![key("a")]);
        assert!(d.take_due(t0 + Duration::from_secs(19)).is_empty());
        assert_eq!(d.take_due(t0 + Duration::from_secs(60)), vec![key("b")]);
        assert!(d.take_due(t0 + Duration::from_secs(3600)).is_empty());
    }
}
