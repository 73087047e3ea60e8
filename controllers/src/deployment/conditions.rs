//! Deployment conditions: types, reasons, and KCM's rules for replacing one
//! (`SetDeploymentCondition`), which decide when the times move.

use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
use k8s_openapi::jiff::Timestamp;

use crate::time::wire_time;

/// Condition: the rollout is moving (or has finished, or timed out).
pub(crate) const PROGRESSING: &str = "Progressing";
/// Condition: at least `replicas - maxUnavailable` pods are available.
pub(crate) const AVAILABLE: &str = "Available";
/// Condition copied from a ReplicaSet failing to create or delete pods.
pub(crate) const REPLICA_FAILURE: &str = "ReplicaFailure";

/// Progressing reasons (`kubectl rollout status` stops on
/// [`TIMED_OUT`]).
pub(crate) const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
pub(crate) const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
pub(crate) const RS_UPDATED: &str = "ReplicaSetUpdated";
pub(crate) const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
pub(crate) const TIMED_OUT: &str = "ProgressDeadlineExceeded";
pub(crate) const RS_CREATE_ERROR: &str = "ReplicaSetCreateError";
pub(crate) const PAUSED: &str = "DeploymentPaused";
pub(crate) const RESUMED: &str = "DeploymentResumed";

/// A condition stamped `now` (both times, whole seconds).
pub(crate) fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(wire_time(now)),
        last_transition_time: Some(wire_time(now)),
    }
}

pub(crate) fn get_condition<'s>(
    s: &'s DeploymentStatus,
    type_: &str,
) -> Option<&'s DeploymentCondition> {
    s.conditions.iter().flatten().find(|c| c.type_ == type_)
}

/// Same status and reason: keep the existing condition untouched (message
/// and times included). Same status, new reason: replace it but keep its
/// lastTransitionTime. The replacement goes to the end of the list.
pub(crate) fn set_condition(s: &mut DeploymentStatus, mut cond: DeploymentCondition) {
    if let Some(current) = get_condition(s, &cond.type_) {
        if current.status == cond.status && current.reason == cond.reason {
            return;
        }
        if current.status == cond.status {
            cond.last_transition_time = current.last_transition_time.clone();
        }
    }
    remove_condition(s, &cond.type_);
    s.conditions.get_or_insert_with(Vec::new).push(cond);
}

pub(crate) fn remove_condition(s: &mut DeploymentStatus, type_: &str) {
    if let Some(conds) = s.conditions.as_mut() {
        conds.retain(|c| c.type_ != type_);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("test timestamp")
    }

    #[test]
    fn same_status_and_reason_keeps_the_condition_as_is() {
        let mut s = DeploymentStatus::default();
        set_condition(
            &mut s,
            new_condition(
                AVAILABLE,
                "True",
                "A",
                "first".into(),
                ts("2024-01-01T00:00:00Z"),
            ),
        );
        set_condition(
            &mut s,
            new_condition(
                AVAILABLE,
                "True",
                "A",
                "second".into(),
                ts("2024-01-01T01:00:00Z"),
            ),
        );
        let c = get_condition(&s, AVAILABLE).expect("condition");
        assert_eq!(c.message.as_deref(), Some("first"));
        assert_eq!(
            c.last_update_time.as_ref().map(|t| t.0),
            Some(ts("2024-01-01T00:00:00Z"))
        );
    }

    #[test]
    fn a_new_reason_with_the_same_status_keeps_the_transition_time() {
        let mut s = DeploymentStatus::default();
        set_condition(
            &mut s,
            new_condition(
                PROGRESSING,
                "True",
                NEW_RS_CREATED,
                "m".into(),
                ts("2024-01-01T00:00:00Z"),
            ),
        );
        set_condition(
            &mut s,
            new_condition(
                AVAILABLE,
                "True",
                "x",
                "m".into(),
                ts("2024-01-01T00:00:00Z"),
            ),
        );
        set_condition(
            &mut s,
            new_condition(
                PROGRESSING,
                "True",
                RS_UPDATED,
                "n".into(),
                ts("2024-01-01T01:00:00Z"),
            ),
        );
        let c = get_condition(&s, PROGRESSING).expect("condition");
        assert_eq!(c.reason.as_deref(), Some(RS_UPDATED));
        assert_eq!(
            c.last_transition_time.as_ref().map(|t| t.0),
            Some(ts("2024-01-01T00:00:00Z"))
        );
        assert_eq!(
            c.last_update_time.as_ref().map(|t| t.0),
            Some(ts("2024-01-01T01:00:00Z"))
        );
        // Replaced conditions move to the end, as in KCM.
        let order: Vec<&str> = s
            .conditions
            .iter()
            .flatten()
            .map(|c| c.type_.as_str())
            .collect();
        assert_eq!(order, [AVAILABLE, PROGRESSING]);
        set_condition(
            &mut s,
            new_condition(
                PROGRESSING,
                "False",
                TIMED_OUT,
                "t".into(),
                ts("2024-01-01T02:00:00Z"),
            ),
        );
        let c = get_condition(&s, PROGRESSING).expect("condition");
        assert_eq!(
            c.last_transition_time.as_ref().map(|t| t.0),
            Some(ts("2024-01-01T02:00:00Z"))
        );
    }
}
