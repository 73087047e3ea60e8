//! Expectations: what an owner's last sync asked for and has not yet seen
//! in its watch (KCM's `UIDTrackingControllerExpectations`).
//!
//! A watch lags the API. Without expectations a ReplicaSet that has just
//! POSTed 3 pods would, on a sync triggered before their ADDED events
//! arrive, still see 3 missing and create 3 more. So the runner records
//! what it is about to create or delete *before* the calls, lowers the
//! record as the watch reports them (and for calls that failed or were
//! skipped, since those will never be seen), and lets replica management
//! run only when the record is satisfied. Status is recomputed on every
//! sync regardless.
//!
//! Kept in memory only, like KCM: after a restart there are no
//! expectations, so the first sync trusts the (fresh) cache.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::time::until;

/// Expectations older than this are ignored (`ExpectationsTimeout`): a
/// watch event lost for good must not stop the owner for ever, and five
/// minutes is far longer than any healthy watch lag.
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// One owner's record.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Record {
    add: i64,
    del: i64,
    set_at: Timestamp,
    /// `ns/name` of the pods whose deletion is expected: a deletion is
    /// counted once per pod, whether it shows as the deletionTimestamp
    /// update or as the DELETED event (or both).
    deleting: BTreeSet<String>,
}

/// Expectations of every owner, keyed by the owner's `namespace/name`.
#[derive(Clone, Debug, Default)]
pub struct Expectations {
    owners: HashMap<String, Record>,
}

impl Expectations {
    /// An empty set: every owner is satisfied.
    pub fn new() -> Self {
        Self::default()
    }

    /// Before creating `count` pods for `owner`. Replaces any earlier record
    /// (as KCM's `SetExpectations(key, count, 0)`).
    pub fn expect_creations(&mut self, owner: &str, count: usize, now: Timestamp) {
        self.owners.insert(
            owner.to_owned(),
            Record {
                add: i64::try_from(count).unwrap_or(i64::MAX),
                del: 0,
                set_at: now,
                deleting: BTreeSet::new(),
            },
        );
    }

    /// Before deleting these pods (`ns/name` keys) for `owner`. Replaces any
    /// earlier record.
    pub fn expect_deletions<I>(&mut self, owner: &str, pod_keys: I, now: Timestamp)
    where
        I: IntoIterator<Item = String>,
    {
        let deleting: BTreeSet<String> = pod_keys.into_iter().collect();
        self.owners.insert(
            owner.to_owned(),
            Record {
                add: 0,
                del: i64::try_from(deleting.len()).unwrap_or(i64::MAX),
                set_at: now,
                deleting,
            },
        );
    }

    /// A pod of `owner` was seen ADDED, or one of its creations failed or
    /// was skipped (it will never be seen).
    pub fn creation_observed(&mut self, owner: &str) {
        self.lower_creations(owner, 1);
    }

    /// `n` expected creations will never be seen (the rest of a slow-start
    /// batch skipped after an error).
    pub fn lower_creations(&mut self, owner: &str, n: usize) {
        if let Some(r) = self.owners.get_mut(owner) {
            r.add = r.add.saturating_sub(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// Pod `pod_key` (`ns/name`) of `owner` was seen deleted (DELETED, or a
    /// deletionTimestamp set), or its DELETE failed. Counted once per pod;
    /// a pod not expected is ignored.
    pub fn deletion_observed(&mut self, owner: &str, pod_key: &str) {
        if let Some(r) = self.owners.get_mut(owner)
            && r.deleting.remove(pod_key)
        {
            r.del = r.del.saturating_sub(1);
        }
    }

    /// Whether `owner` may manage its replicas now: no record, everything
    /// expected seen (adds ≤ 0 and deletes ≤ 0), or the record is older
    /// than [`EXPECTATIONS_TIMEOUT`].
    pub fn satisfied(&self, owner: &str, now: Timestamp) -> bool {
        match self.owners.get(owner) {
            None => true,
            Some(r) => (r.add <= 0 && r.del <= 0) || until(r.set_at, now) > EXPECTATIONS_TIMEOUT,
        }
    }

    /// The owner is gone: drop its record.
    pub fn forget(&mut self, owner: &str) {
        self.owners.remove(owner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("test timestamp")
    }

    const T0: &str = "2024-01-01T00:00:00Z";

    #[test]
    fn an_owner_without_a_record_is_satisfied() {
        assert!(Expectations::new().satisfied("ns/web", ts(T0)));
    }

    #[test]
    fn creations_are_satisfied_once_all_are_observed() {
        let mut e = Expectations::new();
        e.expect_creations("ns/web", 3, ts(T0));
        assert!(!e.satisfied("ns/web", ts(T0)));
        e.creation_observed("ns/web");
        e.creation_observed("ns/web");
        assert!(!e.satisfied("ns/web", ts(T0)));
        e.lower_creations("ns/web", 1);
        assert!(e.satisfied("ns/web", ts(T0)));
        assert!(e.satisfied("ns/other", ts(T0)));
    }

    #[test]
    fn a_deletion_counts_once_per_pod_and_unexpected_pods_are_ignored() {
        let mut e = Expectations::new();
        e.expect_deletions("ns/web", ["ns/a".to_owned(), "ns/b".to_owned()], ts(T0));
        e.deletion_observed("ns/web", "ns/a"); // deletionTimestamp set
        e.deletion_observed("ns/web", "ns/a"); // then DELETED: not counted again
        e.deletion_observed("ns/web", "ns/zzz");
        assert!(!e.satisfied("ns/web", ts(T0)));
        e.deletion_observed("ns/web", "ns/b");
        assert!(e.satisfied("ns/web", ts(T0)));
    }

    #[test]
    fn expectations_older_than_five_minutes_are_ignored() {
        let mut e = Expectations::new();
        e.expect_creations("ns/web", 1, ts(T0));
        assert!(!e.satisfied("ns/web", ts("2024-01-01T00:05:00Z")));
        assert!(e.satisfied("ns/web", ts("2024-01-01T00:05:00.001Z")));
    }

    #[test]
    fn a_new_record_replaces_the_old_and_forget_drops_it() {
        let mut e = Expectations::new();
        e.expect_creations("ns/web", 2, ts(T0));
        e.expect_deletions("ns/web", ["ns/a".to_owned()], ts(T0));
        e.deletion_observed("ns/web", "ns/a");
        assert!(e.satisfied("ns/web", ts(T0)));
        e.expect_creations("ns/web", 1, ts(T0));
        e.forget("ns/web");
        assert!(e.satisfied("ns/web", ts(T0)));
    }
}
