//! The queue of pods waiting to be placed.
//!
//! # Contract
//!
//! - Order: higher `spec.priority` first, then earlier creation, then key.
//! - A pod that could not be placed waits out its own backoff (1 s doubling
//!   to 60 s) before it is tried again; a *hold* from the admission hook has
//!   its own backoff and does not count as a scheduling failure.
//! - The queue reads no clock: callers pass `now`. It never holds a pod
//!   twice: pushing a key that is already queued updates it in place.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::Hash;
use std::time::{Duration, SystemTime};

use mesos::client::backoff::Retry;

/// First wait after a failed attempt (kube-scheduler uses the same floor).
pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// Longest wait between attempts: a pod stuck Pending is still retried
/// every minute, so capacity that frees up is noticed without an event.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// What the queue knows of one pod.
#[derive(Debug, Clone)]
pub struct QueueEntry<K> {
    /// The pod.
    pub key: K,
    /// `spec.priority` (0 when unset).
    pub priority: i32,
    /// The pod's creation time.
    pub created: SystemTime,
    /// When it was first queued.
    pub queued: SystemTime,
    /// Failed scheduling attempts so far.
    pub attempts: u32,
    /// Holds from the admission hook so far.
    pub holds: u32,
    /// Earliest time of the next attempt.
    pub next_try: SystemTime,
    /// Why the last attempt failed or was held.
    pub last_reason: Option<String>,
    /// When the first hold happened, for the hold window.
    pub first_hold: Option<SystemTime>,
    failure_backoff: Retry,
    hold_backoff: Retry,
}

type OrderKey<K> = (Reverse<i32>, SystemTime, K);

/// Pods waiting for a placement.
#[derive(Debug)]
pub struct PodQueue<K: Ord + Hash + Clone> {
    entries: HashMap<K, QueueEntry<K>>,
    /// Every entry, in scheduling order.
    order: BTreeSet<OrderKey<K>>,
    /// The entries deferred (not backed off) since the last offer came: the next
    /// offer is what they wait for, whatever the clock says.
    deferred: HashSet<K>,
    initial: Duration,
    max: Duration,
}

impl<K: Ord + Hash + Clone> Default for PodQueue<K> {
    fn default() -> Self {
        Self::new(INITIAL_BACKOFF, MAX_BACKOFF)
    }
}

impl<K: Ord + Hash + Clone> PodQueue<K> {
    /// An empty queue with the given backoff bounds.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            entries: HashMap::new(),
            order: BTreeSet::new(),
            deferred: HashSet::new(),
            initial,
            max,
        }
    }

    /// Queues a pod, ready at once. A pod already queued keeps its backoff
    /// but takes the new priority.
    pub fn push(&mut self, key: K, priority: i32, created: SystemTime, now: SystemTime) {
        if let Some(entry) = self.entries.get_mut(&key) {
            if entry.priority != priority {
                self.order
                    .remove(&(Reverse(entry.priority), entry.created, key.clone()));
                entry.priority = priority;
                self.order.insert((Reverse(priority), entry.created, key));
            }
            return;
        }
        self.order.insert((Reverse(priority), created, key.clone()));
        self.entries.insert(
            key.clone(),
            QueueEntry {
                key,
                priority,
                created,
                queued: now,
                attempts: 0,
                holds: 0,
                next_try: now,
                last_reason: None,
                first_hold: None,
                failure_backoff: Retry::new(self.initial, self.max),
                hold_backoff: Retry::new(self.initial, self.max),
            },
        );
    }

    /// Takes a pod out of the queue (bound, deleted or failed for good).
    pub fn remove(&mut self, key: &K) -> Option<QueueEntry<K>> {
        let entry = self.entries.remove(key)?;
        self.order
            .remove(&(Reverse(entry.priority), entry.created, key.clone()));
        self.deferred.remove(key);
        Some(entry)
    }

    /// Whether the pod is queued.
    pub fn contains(&self, key: &K) -> bool {
        self.entries.contains_key(key)
    }

    /// The pods whose next attempt is due, in scheduling order. They stay
    /// queued until removed or backed off.
    pub fn ready(&self, now: SystemTime) -> Vec<K> {
        self.ready_up_to(now, usize::MAX)
    }

    /// The first `limit` pods of [`PodQueue::ready`], in the same order.
    pub fn ready_up_to(&self, now: SystemTime, limit: usize) -> Vec<K> {
        self.order
            .iter()
            .filter(|(_, _, k)| self.entries.get(k).is_some_and(|e| e.next_try <= now))
            .map(|(_, _, k)| k.clone())
            .take(limit)
            .collect()
    }

    /// Every queued key in scheduling order, due or not.
    pub fn keys_in_order(&self) -> impl Iterator<Item = &K> {
        self.order.iter().map(|(_, _, k)| k)
    }

    /// Records a failed attempt: the pod waits out its backoff.
    pub fn backoff(
        &mut self,
        key: &K,
        now: SystemTime,
        reason: impl Into<String>,
    ) -> Option<Duration> {
        self.deferred.remove(key);
        let entry = self.entries.get_mut(key)?;
        entry.attempts += 1;
        let delay = entry.failure_backoff.next_delay();
        entry.next_try = now + delay;
        entry.last_reason = Some(reason.into());
        Some(delay)
    }

    /// Tries the pod again at `until`, or when the next offer comes
    /// ([`PodQueue::wake_deferred`]) if that is sooner, without counting a
    /// failure: the attempt saw only part of the cluster (offers in flight).
    pub fn defer(&mut self, key: &K, until: SystemTime) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.next_try = until;
            self.deferred.insert(key.clone());
        }
    }

    /// Tries the pod again at `until`, and not sooner for an offer: it waits
    /// for something of its own (its nominated agent's room), and is woken
    /// by [`PodQueue::wake`] when that comes. Counts no failure.
    pub fn wait_until(&mut self, key: &K, until: SystemTime) {
        self.deferred.remove(key);
        if let Some(entry) = self.entries.get_mut(key) {
            entry.next_try = until;
        }
    }

    /// The pod is due now.
    pub fn wake(&mut self, key: &K, now: SystemTime) {
        if let Some(entry) = self.entries.get_mut(key)
            && entry.next_try > now
        {
            entry.next_try = now;
        }
    }

    /// An offer came: the deferred pods are due now. (A pod backed off after
    /// a failure keeps its backoff, as kube-scheduler's does.)
    pub fn wake_deferred(&mut self, now: SystemTime) {
        for key in self.deferred.drain() {
            if let Some(entry) = self.entries.get_mut(&key)
                && entry.next_try > now
            {
                entry.next_try = now;
            }
        }
    }

    /// Records a hold from the admission hook: its own backoff, not a failure.
    pub fn hold(
        &mut self,
        key: &K,
        now: SystemTime,
        reason: impl Into<String>,
    ) -> Option<Duration> {
        self.deferred.remove(key);
        let entry = self.entries.get_mut(key)?;
        entry.holds += 1;
        entry.first_hold.get_or_insert(now);
        let delay = entry.hold_backoff.next_delay();
        entry.next_try = now + delay;
        entry.last_reason = Some(reason.into());
        Some(delay)
    }

    /// Makes every queued pod due now (new capacity arrived, e.g. an agent).
    pub fn wake_all(&mut self, now: SystemTime) {
        for entry in self.entries.values_mut() {
            if entry.next_try > now {
                entry.next_try = now;
            }
        }
    }

    /// The entry for a pod.
    pub fn get(&self, key: &K) -> Option<&QueueEntry<K>> {
        self.entries.get(key)
    }

    /// Every entry, in scheduling order (for the debug handlers).
    pub fn entries(&self) -> impl Iterator<Item = &QueueEntry<K>> {
        self.order
            .iter()
            .filter_map(|(_, _, k)| self.entries.get(k))
    }

    /// The number of queued pods.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The earliest next attempt among pods not yet due.
    pub fn next_wakeup(&self, now: SystemTime) -> Option<SystemTime> {
        self.entries
            .values()
            .map(|e| e.next_try)
            .filter(|t| *t > now)
            .min()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn higher_priority_first_then_older_pods() {
        let mut q = PodQueue::default();
        q.push("late-low", 0, t(20), t(100));
        q.push("early-low", 0, t(10), t(100));
        q.push("high", 100, t(30), t(100));
        q.push("negative", -5, t(1), t(100));
        assert_eq!(
            q.ready(t(100)),
            ["high", "early-low", "late-low", "negative"]
        );
    }

    #[test]
    fn failed_pods_back_off_from_one_second_doubling_to_a_minute() {
        let mut q = PodQueue::default();
        q.push("p", 0, t(0), t(0));
        let mut now = t(0);
        let mut delays = vec![];
        for _ in 0..8 {
            let d = q.backoff(&"p", now, "no fit").unwrap();
            assert!(q.ready(now + d - Duration::from_millis(1)).is_empty());
            now += d;
            assert_eq!(q.ready(now), ["p"]);
            delays.push(d.as_secs());
        }
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60]);
        let e = q.get(&"p").unwrap();
        assert_eq!(e.attempts, 8);
        assert_eq!(e.holds, 0);
        assert_eq!(e.last_reason.as_deref(), Some("no fit"));
    }

    #[test]
    fn deferring_keeps_the_backoff_and_counts_no_failure() {
        let mut q = PodQueue::default();
        q.push("p", 0, t(0), t(0));
        q.defer(&"p", t(0) + Duration::from_millis(100));
        assert!(q.ready(t(0)).is_empty());
        assert_eq!(q.ready(t(1)), ["p"]);
        assert_eq!(q.ready_up_to(t(1), 1), ["p"]);
        assert!(q.ready_up_to(t(1), 0).is_empty());
        assert_eq!(q.get(&"p").unwrap().attempts, 0);
        assert_eq!(q.backoff(&"p", t(1), "x"), Some(Duration::from_secs(1)));
    }

    #[test]
    fn an_offer_makes_deferred_pods_due_but_not_backed_off_ones() {
        let mut q = PodQueue::default();
        q.push("deferred", 0, t(0), t(0));
        q.push("failed", 0, t(1), t(0));
        q.defer(&"deferred", t(0) + Duration::from_millis(200));
        q.backoff(&"failed", t(0), "no fit");
        assert!(q.ready(t(0)).is_empty());
        q.wake_deferred(t(0));
        assert_eq!(q.ready(t(0)), ["deferred"]);
        // Woken once: deferring again waits for the next offer.
        q.defer(&"deferred", t(0) + Duration::from_millis(200));
        assert!(q.ready(t(0)).is_empty());
        q.wake_deferred(t(0));
        assert_eq!(q.ready(t(0)), ["deferred"]);
    }

    #[test]
    fn holds_have_their_own_backoff_and_are_not_failures() {
        let mut q = PodQueue::default();
        q.push("p", 0, t(0), t(0));
        q.backoff(&"p", t(0), "no fit");
        q.backoff(&"p", t(1), "no fit");
        let d = q.hold(&"p", t(3), "freeze").unwrap();
        assert_eq!(d, Duration::from_secs(1));
        let e = q.get(&"p").unwrap();
        assert_eq!((e.attempts, e.holds), (2, 1));
        assert_eq!(e.first_hold, Some(t(3)));
    }

    #[test]
    fn pushing_again_keeps_one_entry_and_removal_forgets_it() {
        let mut q = PodQueue::default();
        q.push("p", 0, t(0), t(0));
        q.backoff(&"p", t(0), "x");
        q.push("p", 5, t(0), t(0));
        assert_eq!(q.len(), 1);
        assert!(
            q.ready(t(0)).is_empty(),
            "re-push must not reset the backoff"
        );
        assert_eq!(q.get(&"p").unwrap().priority, 5);
        q.wake_all(t(0));
        assert_eq!(q.ready(t(0)), ["p"]);
        assert!(q.remove(&"p").is_some());
        assert!(q.is_empty());
        assert!(q.ready(t(100)).is_empty());
    }
}
