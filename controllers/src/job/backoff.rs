//! The pod re-create backoff (KCM's `backoff_utils.go`): after `n` pod
//! failures since the Job's last success, no new pod before
//! `10 s × 2^(n−1)` (capped at [`MAX_POD_FAILURE_BACKOFF`]) has passed
//! since the last failure.
//!
//! KCM keeps this record in memory per Job and updates it from the pods a
//! sync counts for the first time; it is lost on a restart. Here it is
//! plain data: [`reconcile`](super::reconcile) takes the runner's record and
//! returns the next one, and [`BackoffRecord::rebuild`] makes one from the
//! pods still stored, so a restarted or new leader keeps the delays.

use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::pods::{finished_at, has_tracking_finalizer, is_failed, phase, uid};
use crate::owner::is_controlled_by;
use crate::time::until;

/// The first re-create delay (KCM's `DefaultJobPodFailureBackOff`).
pub const DEFAULT_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(10);

/// The longest re-create delay (KCM's `MaxJobPodFailureBackOff`): 10
/// minutes since kube 1.27's backoff record (the docs, and KCM before it,
/// say 6). A Job failing for ever waits this long between pods, so a broken
/// image costs one pod per 10 minutes, not a crash loop.
pub const MAX_POD_FAILURE_BACKOFF: Duration = Duration::from_secs(600);

/// A Job's failures since its last success (KCM's `backoffRecord`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackoffRecord {
    /// Pods failed (counted or ignored by the podFailurePolicy alike)
    /// since the last pod succeeded.
    pub failures_after_last_success: i32,
    /// When the last of them finished.
    pub last_failure_time: Option<Timestamp>,
}

impl BackoffRecord {
    /// No failures: create at once.
    pub const NONE: BackoffRecord = BackoffRecord {
        failures_after_last_success: 0,
        last_failure_time: None,
    };

    /// KCM's `newBackoffRecord`: the record after the pods that finished
    /// since it was made. A success among them resets the count to the
    /// failures that finished after the latest success.
    pub(crate) fn advance(&self, succeeded: &[&Pod], failed: &[&Pod]) -> BackoffRecord {
        let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        let mut failed: Vec<(Option<Timestamp>, &Pod)> =
            failed.iter().map(|p| (finished_at(p), *p)).collect();
        failed.sort_by_key(|(t, _)| *t);
        let Some(last_success) = succeeded.iter().map(|p| finished_at(p)).max() else {
            return match failed.last() {
                None => *self,
                Some((t, _)) => BackoffRecord {
                    failures_after_last_success: self
                        .failures_after_last_success
                        .saturating_add(count(failed.len())),
                    last_failure_time: *t,
                },
            };
        };
        let after: Vec<Option<Timestamp>> = failed
            .iter()
            .map(|(t, _)| *t)
            .filter(|t| *t > last_success)
            .collect();
        BackoffRecord {
            failures_after_last_success: count(after.len()),
            last_failure_time: after.last().copied().flatten(),
        }
    }

    /// The record for a Job whose runner has none (a restart, a new
    /// leader): built from the Job's pods that a [`reconcile`](super::reconcile)
    /// will not count as new, i.e. those without the tracking finalizer or
    /// already in `status.uncountedTerminatedPods`, in finish order. The
    /// pods that reconcile still sees as new are added by it, so none is
    /// counted twice. Failed pods already deleted from the API are not
    /// seen, so the delay may restart lower; KCM restarts from nothing.
    pub fn rebuild(job: &Job, pods: &[&Pod]) -> BackoffRecord {
        let job_uid = job.metadata.uid.as_deref().unwrap_or_default();
        let spec = job.spec.as_ref();
        let only_replace_failed = spec.is_some_and(|s| {
            s.pod_replacement_policy.as_deref() == Some("Failed") || s.pod_failure_policy.is_some()
        });
        let uncounted = job
            .status
            .as_ref()
            .and_then(|s| s.uncounted_terminated_pods.as_ref());
        let in_uncounted = |u: &str| {
            uncounted.is_some_and(|c| {
                c.succeeded
                    .iter()
                    .chain(c.failed.iter())
                    .flatten()
                    .any(|x| x == u)
            })
        };
        let seen: Vec<&Pod> = pods
            .iter()
            .copied()
            .filter(|p| is_controlled_by(&p.metadata, job_uid))
            .filter(|p| !has_tracking_finalizer(p) || in_uncounted(uid(p)))
            .collect();
        let succeeded: Vec<&Pod> = seen
            .iter()
            .copied()
            .filter(|p| phase(p) == "Succeeded")
            .collect();
        let failed: Vec<&Pod> = seen
            .iter()
            .copied()
            .filter(|p| is_failed(p, only_replace_failed))
            .collect();
        BackoffRecord::NONE.advance(&succeeded, &failed)
    }

    /// How long from `now` until a pod may be created (zero: now).
    pub fn remaining(&self, now: Timestamp) -> Duration {
        remaining(
            self.failures_after_last_success,
            self.last_failure_time,
            now,
        )
    }
}

/// The delay after `failures` (≥ 1) failures: `10 s × 2^(failures−1)`,
/// capped at [`MAX_POD_FAILURE_BACKOFF`].
pub fn delay_after(failures: i32) -> Duration {
    if failures <= 0 {
        return Duration::ZERO;
    }
    let mut d = DEFAULT_POD_FAILURE_BACKOFF;
    for _ in 1..failures {
        d = d.saturating_mul(2);
        if d >= MAX_POD_FAILURE_BACKOFF {
            return MAX_POD_FAILURE_BACKOFF;
        }
    }
    d
}

/// KCM's `getRemainingTimeForFailuresCount`: what is left of the delay
/// after `failures` failures, the last at `last_failure` (unknown: long
/// past).
pub(crate) fn remaining(
    failures: i32,
    last_failure: Option<Timestamp>,
    now: Timestamp,
) -> Duration {
    let Some(last) = last_failure else {
        return Duration::ZERO;
    };
    let delay = delay_after(failures);
    let elapsed = until(last, now);
    delay.saturating_sub(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_ten_seconds_to_ten_minutes() {
        let secs: Vec<u64> = (0..10).map(|n| delay_after(n).as_secs()).collect();
        assert_eq!(secs, [0, 10, 20, 40, 80, 160, 320, 600, 600, 600]);
        assert_eq!(delay_after(i32::MAX), MAX_POD_FAILURE_BACKOFF);
    }

    #[test]
    fn remaining_counts_from_the_last_failure() {
        let t: Timestamp = "2024-01-01T00:00:00Z".parse().expect("ts");
        let later: Timestamp = "2024-01-01T00:00:15Z".parse().expect("ts");
        assert_eq!(remaining(2, Some(t), later), Duration::from_secs(5));
        assert_eq!(remaining(1, Some(t), later), Duration::ZERO);
        assert_eq!(remaining(3, None, later), Duration::ZERO);
        assert_eq!(remaining(0, Some(t), t), Duration::ZERO);
    }
}
