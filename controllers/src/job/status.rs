//! The Job status as the API stores it, so a sync writes only what
//! changes.

use k8s_openapi::api::batch::v1::{JobStatus, UncountedTerminatedPods};

/// The status as KCM writes it: counters and strings Go omits when empty
/// (`active`, `succeeded`, `failed`, `completedIndexes`, `conditions`) are
/// absent; `ready` and `terminating` (pointers) and `failedIndexes` stay
/// as set, `uncountedTerminatedPods` is always present (`{}` when empty).
pub(super) fn omit_empty(s: JobStatus) -> JobStatus {
    JobStatus {
        active: s.active.filter(|n| *n != 0),
        succeeded: s.succeeded.filter(|n| *n != 0),
        failed: s.failed.filter(|n| *n != 0),
        completed_indexes: s.completed_indexes.filter(|c| !c.is_empty()),
        conditions: s.conditions.filter(|c| !c.is_empty()),
        uncounted_terminated_pods: Some(uncounted(s.uncounted_terminated_pods)),
        ..s
    }
}

fn uncounted(u: Option<UncountedTerminatedPods>) -> UncountedTerminatedPods {
    let u = u.unwrap_or_default();
    UncountedTerminatedPods {
        succeeded: u.succeeded.filter(|l| !l.is_empty()),
        failed: u.failed.filter(|l| !l.is_empty()),
    }
}

/// Whether `new` says something `stored` does not (explicit zeros and
/// empty lists read as absent).
pub(super) fn differs(new: &JobStatus, stored: &JobStatus) -> bool {
    omit_empty(new.clone()) != omit_empty(stored.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_zeros_and_empty_lists_read_as_absent() {
        let explicit = JobStatus {
            active: Some(0),
            succeeded: Some(0),
            conditions: Some(vec![]),
            completed_indexes: Some(String::new()),
            uncounted_terminated_pods: Some(UncountedTerminatedPods {
                succeeded: Some(vec![]),
                failed: None,
            }),
            ready: Some(0),
            ..Default::default()
        };
        let bare = JobStatus {
            ready: Some(0),
            ..Default::default()
        };
        assert!(!differs(&explicit, &bare));
        assert!(
            differs(&explicit, &JobStatus::default()),
            "ready: 0 is written once"
        );
        assert!(differs(
            &JobStatus {
                failed_indexes: Some(String::new()),
                ..Default::default()
            },
            &JobStatus::default()
        ));
    }
}
