//! ReplicaSet (and ReplicationController) status: the counts over the
//! owner's active pods, and the `ReplicaFailure` condition.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{
    Pod, ReplicationControllerCondition, ReplicationControllerStatus,
};
use k8s_openapi::jiff::Timestamp;

use crate::pod_state::{is_available, is_ready};
use crate::selector::Selector;
use crate::time::wire_time;

/// Condition type set while creating or deleting pods fails.
pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// Which call failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureReason {
    /// A pod POST failed.
    FailedCreate,
    /// A pod DELETE failed.
    FailedDelete,
}

impl FailureReason {
    /// The condition reason (also the Warning event's reason).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::FailedCreate => "FailedCreate",
            FailureReason::FailedDelete => "FailedDelete",
        }
    }
}

/// A create or delete of the last sync failed: the condition's reason and
/// message (the API error, as text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManageFailure {
    /// Which call failed.
    pub reason: FailureReason,
    /// The API error.
    pub message: String,
}

/// Counts over the owner's active, claimed pods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) replicas: i32,
    pub(crate) fully_labeled: i32,
    pub(crate) ready: i32,
    pub(crate) available: i32,
}

/// `fullyLabeledReplicas` counts pods whose labels include all of the
/// template's (the selector may be looser than the template).
pub(crate) fn count(
    pods: &[&Pod],
    template_labels: Option<&BTreeMap<String, String>>,
    min_ready_seconds: i32,
    now: Timestamp,
) -> Counts {
    let template = template_labels.map(Selector::from_map).unwrap_or_default();
    let mut c = Counts::default();
    for p in pods {
        c.replicas += 1;
        if template.matches(p.metadata.labels.as_ref()) {
            c.fully_labeled += 1;
        }
        if is_ready(p) {
            c.ready += 1;
            if is_available(p, min_ready_seconds, now) {
                c.available += 1;
            }
        }
    }
    c
}

/// Go's `omitempty`: a zero count is not written, so compare and write it
/// as absent.
pub(crate) fn omit_zero(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

/// The condition fields both owner kinds share.
struct Failure<'a> {
    reason: &'a str,
    message: &'a str,
    at: Timestamp,
}

/// KCM's rule: a failure adds the condition only when there is none (an
/// existing one keeps its message and time); a clean sync removes it.
fn conditions<C: Clone>(
    current: Option<&Vec<C>>,
    is_failure: impl Fn(&C) -> bool,
    failure: Option<Failure<'_>>,
    make: impl Fn(Failure<'_>) -> C,
) -> Option<Vec<C>> {
    let mut conds: Vec<C> = current.cloned().unwrap_or_default();
    let has = conds.iter().any(&is_failure);
    match failure {
        Some(f) if !has => conds.push(make(f)),
        Some(_) => {}
        None => conds.retain(|c| !is_failure(c)),
    }
    (!conds.is_empty()).then_some(conds)
}

/// The ReplicaSet's new status.
pub(crate) fn replicaset_status(
    current: &ReplicaSetStatus,
    counts: Counts,
    generation: i64,
    failure: Option<&ManageFailure>,
    now: Timestamp,
) -> ReplicaSetStatus {
    ReplicaSetStatus {
        replicas: counts.replicas,
        fully_labeled_replicas: omit_zero(counts.fully_labeled),
        ready_replicas: omit_zero(counts.ready),
        available_replicas: omit_zero(counts.available),
        observed_generation: (generation != 0).then_some(generation),
        terminating_replicas: current.terminating_replicas,
        conditions: conditions(
            current.conditions.as_ref(),
            |c: &ReplicaSetCondition| c.type_ == REPLICA_FAILURE,
            failure.map(|f| Failure {
                reason: f.reason.as_str(),
                message: &f.message,
                at: now,
            }),
            |f| ReplicaSetCondition {
                type_: REPLICA_FAILURE.into(),
                status: "True".into(),
                reason: Some(f.reason.into()),
                message: Some(f.message.into()),
                last_transition_time: Some(wire_time(f.at)),
            },
        ),
    }
}

/// The ReplicationController's new status (same rules, its own types).
pub(crate) fn rc_status(
    current: &ReplicationControllerStatus,
    counts: Counts,
    generation: i64,
    failure: Option<&ManageFailure>,
    now: Timestamp,
) -> ReplicationControllerStatus {
    ReplicationControllerStatus {
        replicas: counts.replicas,
        fully_labeled_replicas: omit_zero(counts.fully_labeled),
        ready_replicas: omit_zero(counts.ready),
        available_replicas: omit_zero(counts.available),
        observed_generation: (generation != 0).then_some(generation),
        conditions: conditions(
            current.conditions.as_ref(),
            |c: &ReplicationControllerCondition| c.type_ == REPLICA_FAILURE,
            failure.map(|f| Failure {
                reason: f.reason.as_str(),
                message: &f.message,
                at: now,
            }),
            |f| ReplicationControllerCondition {
                type_: REPLICA_FAILURE.into(),
                status: "True".into(),
                reason: Some(f.reason.into()),
                message: Some(f.message.into()),
                last_transition_time: Some(wire_time(f.at)),
            },
        ),
    }
}

/// The status as it reads back after a write (zeros and empty lists
/// omitted), so a status written by someone else with explicit zeros does
/// not look different from ours.
pub(crate) fn normalized_rs(s: &ReplicaSetStatus) -> ReplicaSetStatus {
    ReplicaSetStatus {
        replicas: s.replicas,
        fully_labeled_replicas: s.fully_labeled_replicas.filter(|n| *n != 0),
        ready_replicas: s.ready_replicas.filter(|n| *n != 0),
        available_replicas: s.available_replicas.filter(|n| *n != 0),
        observed_generation: s.observed_generation.filter(|n| *n != 0),
        terminating_replicas: s.terminating_replicas,
        conditions: s.conditions.clone().filter(|c| !c.is_empty()),
    }
}

/// [`normalized_rs`] for ReplicationControllers.
pub(crate) fn normalized_rc(s: &ReplicationControllerStatus) -> ReplicationControllerStatus {
    ReplicationControllerStatus {
        replicas: s.replicas,
        fully_labeled_replicas: s.fully_labeled_replicas.filter(|n| *n != 0),
        ready_replicas: s.ready_replicas.filter(|n| *n != 0),
        available_replicas: s.available_replicas.filter(|n| *n != 0),
        observed_generation: s.observed_generation.filter(|n| *n != 0),
        conditions: s.conditions.clone().filter(|c| !c.is_empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("test timestamp")
    }

    fn failure() -> ManageFailure {
        ManageFailure {
            reason: FailureReason::FailedCreate,
            message: "pods \"web-\" is forbidden: exceeded quota".into(),
        }
    }

    #[test]
    fn failure_adds_the_condition_once_and_a_clean_sync_removes_it() {
        let counts = Counts {
            replicas: 2,
            fully_labeled: 2,
            ready: 1,
            available: 0,
        };
        let now = ts("2024-01-01T00:00:00.5Z");
        let s = replicaset_status(
            &ReplicaSetStatus::default(),
            counts,
            3,
            Some(&failure()),
            now,
        );
        assert_eq!(s.replicas, 2);
        assert_eq!(s.fully_labeled_replicas, Some(2));
        assert_eq!(s.ready_replicas, Some(1));
        assert_eq!(s.available_replicas, None);
        assert_eq!(s.observed_generation, Some(3));
        let conds = s.conditions.clone().unwrap_or_default();
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].type_, "ReplicaFailure");
        assert_eq!(conds[0].status, "True");
        assert_eq!(conds[0].reason.as_deref(), Some("FailedCreate"));
        assert_eq!(
            conds[0].message.as_deref(),
            Some("pods \"web-\" is forbidden: exceeded quota")
        );
        assert_eq!(
            conds[0].last_transition_time.as_ref().map(|t| t.0),
            Some(ts("2024-01-01T00:00:00Z"))
        );

        // A second failure keeps the first condition as it was.
        let later = ts("2024-01-01T00:01:00Z");
        let other = ManageFailure {
            reason: FailureReason::FailedDelete,
            message: "other".into(),
        };
        let s2 = replicaset_status(&s, counts, 3, Some(&other), later);
        assert_eq!(s2.conditions, s.conditions);

        let s3 = replicaset_status(&s2, counts, 3, None, later);
        assert_eq!(s3.conditions, None);
    }

    #[test]
    fn rc_status_follows_the_same_rules() {
        let s = rc_status(
            &ReplicationControllerStatus::default(),
            Counts::default(),
            1,
            Some(&failure()),
            ts("2024-01-01T00:00:00Z"),
        );
        assert_eq!(s.replicas, 0);
        assert_eq!(s.ready_replicas, None);
        let conds = s.conditions.unwrap_or_default();
        assert_eq!(conds[0].reason.as_deref(), Some("FailedCreate"));
    }

    #[test]
    fn explicit_zeros_read_as_absent() {
        let explicit = ReplicaSetStatus {
            replicas: 0,
            ready_replicas: Some(0),
            conditions: Some(vec![]),
            ..Default::default()
        };
        assert_eq!(normalized_rs(&explicit), ReplicaSetStatus::default());
    }
}
