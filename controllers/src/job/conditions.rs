//! Job conditions as KCM 1.31+ writes them: an interim condition first
//! (`SuccessCriteriaMet` or `FailureTarget`), which KCM writes as soon as it
//! has decided, then the terminal one (`Complete` or `Failed`, same reason
//! and message) once every pod is counted and none is terminating.

use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::jiff::Timestamp;

use crate::time::wire_time;

/// The Job succeeded (terminal).
pub const COMPLETE: &str = "Complete";
/// The Job failed (terminal).
pub const FAILED: &str = "Failed";
/// The Job will succeed once its pods are counted and gone (interim).
pub const SUCCESS_CRITERIA_MET: &str = "SuccessCriteriaMet";
/// The Job will fail once its pods are counted and gone (interim).
pub const FAILURE_TARGET: &str = "FailureTarget";
/// True while `spec.suspend` holds the Job.
pub const SUSPENDED: &str = "Suspended";

/// `failed > backoffLimit` (or, with restartPolicy OnFailure, the
/// containers' restarts reached it).
pub const REASON_BACKOFF_LIMIT_EXCEEDED: &str = "BackoffLimitExceeded";
/// Message of [`REASON_BACKOFF_LIMIT_EXCEEDED`].
pub const MESSAGE_BACKOFF_LIMIT_EXCEEDED: &str = "Job has reached the specified backoff limit";
/// `activeDeadlineSeconds` passed since `startTime`.
pub const REASON_DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
/// Message of [`REASON_DEADLINE_EXCEEDED`].
pub const MESSAGE_DEADLINE_EXCEEDED: &str = "Job was active longer than specified deadline";
/// A podFailurePolicy `FailJob` rule matched.
pub const REASON_POD_FAILURE_POLICY: &str = "PodFailurePolicy";
/// More indexes failed than `maxFailedIndexes`.
pub const REASON_MAX_FAILED_INDEXES_EXCEEDED: &str = "MaxFailedIndexesExceeded";
/// Message of [`REASON_MAX_FAILED_INDEXES_EXCEEDED`].
pub const MESSAGE_MAX_FAILED_INDEXES_EXCEEDED: &str =
    "Job has exceeded the specified maximal number of failed indexes";
/// Every index finished and some failed (backoffLimitPerIndex).
pub const REASON_FAILED_INDEXES: &str = "FailedIndexes";
/// Message of [`REASON_FAILED_INDEXES`].
pub const MESSAGE_FAILED_INDEXES: &str = "Job has failed indexes";
/// A successPolicy rule was met.
pub const REASON_SUCCESS_POLICY: &str = "SuccessPolicy";
/// `completions` pods succeeded (or, without completions, one did and none
/// is left active).
pub const REASON_COMPLETIONS_REACHED: &str = "CompletionsReached";
/// Message of [`REASON_COMPLETIONS_REACHED`].
pub const MESSAGE_COMPLETIONS_REACHED: &str = "Reached expected number of succeeded pods";
/// Reason of `Suspended=True`.
pub const REASON_SUSPENDED: &str = "JobSuspended";
/// Reason of `Suspended=False` after a resume.
pub const REASON_RESUMED: &str = "JobResumed";

/// A condition with both times at `now` (KCM's `newCondition`; an empty
/// reason or message is omitted, as Go's `omitempty` writes it).
pub(crate) fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> JobCondition {
    JobCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: (!reason.is_empty()).then(|| reason.to_owned()),
        message: (!message.is_empty()).then(|| message.to_owned()),
        last_probe_time: Some(wire_time(now)),
        last_transition_time: Some(wire_time(now)),
    }
}

/// The condition of this type, if any.
pub(crate) fn find<'a>(conds: &'a [JobCondition], type_: &str) -> Option<&'a JobCondition> {
    conds.iter().find(|c| c.type_ == type_)
}

/// The condition of this type with status True, if any.
pub(crate) fn find_true<'a>(conds: &'a [JobCondition], type_: &str) -> Option<&'a JobCondition> {
    find(conds, type_).filter(|c| c.status == "True")
}

/// KCM's `ensureJobConditionStatus`: set the condition of `type_` to
/// `status`/`reason`/`message`, replacing it (with new times) when any of
/// them differs. A condition that does not exist is added unless its
/// status is False (going from nothing to False says nothing). Whether the
/// list changed.
pub(crate) fn ensure(
    conds: &mut Vec<JobCondition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    if let Some(c) = conds.iter_mut().find(|c| c.type_ == type_) {
        let same = c.status == status
            && c.reason.as_deref().unwrap_or_default() == reason
            && c.message.as_deref().unwrap_or_default() == message;
        if same {
            return false;
        }
        *c = new_condition(type_, status, reason, message, now);
        return true;
    }
    if status == "False" {
        return false;
    }
    conds.push(new_condition(type_, status, reason, message, now));
    true
}

/// The Job has a terminal condition (`Complete` or `Failed` True): KCM
/// does nothing more for it (`IsJobFinished`).
pub fn is_finished(job: &Job) -> bool {
    let conds = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    find_true(conds, COMPLETE).is_some() || find_true(conds, FAILED).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("test timestamp")
    }

    #[test]
    fn ensure_adds_true_replaces_on_change_and_never_adds_false() {
        let t0 = ts("2024-01-01T00:00:00.7Z");
        let t1 = ts("2024-01-01T00:01:00Z");
        let mut conds = Vec::new();
        assert!(!ensure(
            &mut conds,
            SUSPENDED,
            "False",
            REASON_RESUMED,
            "Job resumed",
            t0
        ));
        assert!(conds.is_empty());
        assert!(ensure(
            &mut conds,
            SUSPENDED,
            "True",
            REASON_SUSPENDED,
            "Job suspended",
            t0
        ));
        assert_eq!(
            conds[0].last_transition_time.as_ref().map(|t| t.0),
            Some(ts("2024-01-01T00:00:00Z"))
        );
        assert!(!ensure(
            &mut conds,
            SUSPENDED,
            "True",
            REASON_SUSPENDED,
            "Job suspended",
            t1
        ));
        assert!(ensure(
            &mut conds,
            SUSPENDED,
            "False",
            REASON_RESUMED,
            "Job resumed",
            t1
        ));
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].status, "False");
        assert_eq!(conds[0].reason.as_deref(), Some(REASON_RESUMED));
        assert_eq!(conds[0].last_probe_time.as_ref().map(|t| t.0), Some(t1));
    }
}
