//! The Deployment's status from its ReplicaSets (`calculateStatus`) and
//! the `Available` condition.

use k8s_openapi::api::apps::v1::{DeploymentStatus, ReplicaSet};

use super::conditions::{AVAILABLE, new_condition, set_condition};
use super::plan::{Plan, replicas, status_counts, sum};

/// `Available` reasons and messages.
const MIN_AVAILABLE: (&str, &str) = (
    "MinimumReplicasAvailable",
    "Deployment has minimum availability.",
);
const MIN_UNAVAILABLE: (&str, &str) = (
    "MinimumReplicasUnavailable",
    "Deployment does not have minimum availability.",
);

/// Go's `omitempty`: a zero count is not written.
fn omit_zero(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

/// The status the ReplicaSets `all` (as they were when the sync looked at
/// them) and `new` give: counts summed over ReplicaSet *statuses*, except
/// `unavailableReplicas` = Σ spec.replicas − available (≥ 0); conditions
/// carried over from the working status, with `Available` set.
pub(crate) fn calculate(
    plan: &Plan<'_>,
    all: &[ReplicaSet],
    new: Option<&ReplicaSet>,
) -> DeploymentStatus {
    let available = sum(all.iter().map(|rs| status_counts(rs).2));
    let total = sum(all.iter().map(replicas));
    let mut status = DeploymentStatus {
        observed_generation: plan.d.metadata.generation.filter(|g| *g != 0),
        replicas: omit_zero(sum(all.iter().map(|rs| status_counts(rs).0))),
        updated_replicas: omit_zero(new.map_or(0, |rs| status_counts(rs).0)),
        ready_replicas: omit_zero(sum(all.iter().map(|rs| status_counts(rs).1))),
        available_replicas: omit_zero(available),
        unavailable_replicas: omit_zero(total.saturating_sub(available).max(0)),
        collision_count: plan.status.collision_count,
        terminating_replicas: None,
        conditions: plan.status.conditions.clone(),
    };
    let (status_str, (reason, message)) = if available >= plan.p.min_available() {
        ("True", MIN_AVAILABLE)
    } else {
        ("False", MIN_UNAVAILABLE)
    };
    set_condition(
        &mut status,
        new_condition(AVAILABLE, status_str, reason, message.to_owned(), plan.now),
    );
    status
}

/// The status as it reads back after a write: Go's `omitempty` drops zero
/// counts and an empty condition list, so those compare equal to absent.
pub(crate) fn normalized(s: &DeploymentStatus) -> DeploymentStatus {
    let nz = |v: Option<i32>| v.filter(|n| *n != 0);
    DeploymentStatus {
        observed_generation: s.observed_generation.filter(|g| *g != 0),
        replicas: nz(s.replicas),
        updated_replicas: nz(s.updated_replicas),
        ready_replicas: nz(s.ready_replicas),
        available_replicas: nz(s.available_replicas),
        unavailable_replicas: nz(s.unavailable_replicas),
        collision_count: s.collision_count,
        terminating_replicas: s.terminating_replicas,
        conditions: s.conditions.clone().filter(|c| !c.is_empty()),
    }
}

/// Counts as plain numbers (absent = 0).
pub(crate) struct Counts {
    pub(crate) replicas: i32,
    pub(crate) updated: i32,
    pub(crate) ready: i32,
    pub(crate) available: i32,
    pub(crate) observed_generation: i64,
}

pub(crate) fn counts(s: &DeploymentStatus) -> Counts {
    Counts {
        replicas: s.replicas.unwrap_or(0),
        updated: s.updated_replicas.unwrap_or(0),
        ready: s.ready_replicas.unwrap_or(0),
        available: s.available_replicas.unwrap_or(0),
        observed_generation: s.observed_generation.unwrap_or(0),
    }
}

/// `DeploymentComplete`: every replica updated and available, none old
/// left, and this generation observed.
pub(crate) fn is_complete(plan: &Plan<'_>, s: &DeploymentStatus) -> bool {
    let c = counts(s);
    let want = plan.p.replicas;
    c.updated == want
        && c.replicas == want
        && c.available == want
        && c.observed_generation >= plan.d.metadata.generation.unwrap_or(0)
}
