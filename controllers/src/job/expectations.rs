//! The pods whose tracking finalizer a Job's last syncs removed and whose
//! removal the pod watch has not shown yet (KCM's `finalizerExpectations`,
//! a `uidTrackingExpectations`).
//!
//! Why the runner keeps them: the Job's and the pods' watches lag
//! independently. After a sync recorded pod P in
//! `status.uncountedTerminatedPods` and removed P's finalizer, a later sync
//! may see the Job's status already past P (P counted and gone from the
//! uncounted lists) while the pod cache still shows P with its finalizer. P
//! would look finished and not counted, and be counted a second time. A
//! uid listed here is treated as already removed, so it never is.
//!
//! Memory only, like KCM's: after a restart the caches are fresh, so there
//! is nothing in flight to remember.

use std::collections::{BTreeSet, HashMap};

/// Expected finalizer removals of every Job, keyed by the Job's
/// `namespace/name`.
#[derive(Clone, Debug, Default)]
pub struct FinalizerExpectations {
    jobs: HashMap<String, BTreeSet<String>>,
}

/// The set of a Job with no expectations.
static NONE: BTreeSet<String> = BTreeSet::new();

impl FinalizerExpectations {
    /// No expectations.
    pub fn new() -> Self {
        Self::default()
    }

    /// Before sending a sync's [`RemovePodFinalizer`](crate::Action::RemovePodFinalizer)
    /// patches: their pods' uids ([`Reconciled::finalizer_removals`](crate::Reconciled::finalizer_removals)).
    pub fn expect_removals<'a, I>(&mut self, job: &str, uids: I)
    where
        I: IntoIterator<Item = &'a str>,
    {
        let mut uids = uids.into_iter().peekable();
        if uids.peek().is_none() {
            return;
        }
        self.jobs
            .entry(job.to_owned())
            .or_default()
            .extend(uids.map(str::to_owned));
    }

    /// The pod watch showed the pod without the finalizer, or deleted; or
    /// its patch failed or was never sent (no change will come).
    pub fn removal_observed(&mut self, job: &str, uid: &str) {
        if let Some(set) = self.jobs.get_mut(job) {
            set.remove(uid);
            if set.is_empty() {
                self.jobs.remove(job);
            }
        }
    }

    /// What to pass as [`JobContext::finalizer_removals_pending`](super::JobContext::finalizer_removals_pending).
    pub fn pending(&self, job: &str) -> &BTreeSet<String> {
        self.jobs.get(job).unwrap_or(&NONE)
    }

    /// The Job is gone: drop its record.
    pub fn forget(&mut self, job: &str) {
        self.jobs.remove(job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_removals_are_pending_until_observed() {
        let mut e = FinalizerExpectations::new();
        e.expect_removals("ns/job", ["a", "b"]);
        e.expect_removals("ns/job", []);
        assert_eq!(e.pending("ns/job").len(), 2);
        e.removal_observed("ns/job", "a");
        e.removal_observed("ns/job", "zzz");
        e.removal_observed("ns/other", "b");
        assert!(e.pending("ns/job").contains("b"));
        e.removal_observed("ns/job", "b");
        assert!(e.pending("ns/job").is_empty());
        e.expect_removals("ns/job", ["c"]);
        e.forget("ns/job");
        assert!(e.pending("ns/job").is_empty());
    }
}
