//! The `Progressing` condition (`progress.go`): progress moves
//! lastUpdateTime; no progress for `progressDeadlineSeconds` turns it False
//! with `ProgressDeadlineExceeded`, which `kubectl rollout status` reports
//! as a failed rollout.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus, ReplicaSet};

use super::conditions::{
    NEW_RS_AVAILABLE, PAUSED, PROGRESSING, REPLICA_FAILURE, RESUMED, RS_UPDATED, TIMED_OUT,
    get_condition, new_condition, remove_condition, set_condition,
};
use super::plan::{Plan, name};
use super::status::{calculate, counts, is_complete};
use crate::time::{add_secs, requeue_at};

/// `checkPausedConditions`: pausing sets Progressing Unknown
/// `DeploymentPaused`, resuming `DeploymentResumed` (with a fresh
/// lastUpdateTime, so the time spent paused does not count against the
/// deadline). A timed-out rollout keeps its condition.
pub(crate) fn check_paused_conditions(plan: &mut Plan<'_>) {
    if plan.p.progress_deadline_seconds.is_none() {
        return;
    }
    let reason = get_condition(&plan.status, PROGRESSING).and_then(|c| c.reason.clone());
    if reason.as_deref() == Some(TIMED_OUT) {
        return;
    }
    let paused_cond = reason.as_deref() == Some(PAUSED);
    let cond = if plan.p.paused && !paused_cond {
        new_condition(
            PROGRESSING,
            "Unknown",
            PAUSED,
            "Deployment is paused".into(),
            plan.now,
        )
    } else if !plan.p.paused && paused_cond {
        new_condition(
            PROGRESSING,
            "Unknown",
            RESUMED,
            "Deployment is resumed".into(),
            plan.now,
        )
    } else {
        return;
    };
    set_condition(&mut plan.status, cond);
}

/// `syncRolloutStatus`: the status from `all` and `new`, with Progressing
/// brought up to date and ReplicaSet failures promoted; and when to look
/// again for the deadline.
pub(crate) fn rollout_status(
    plan: &Plan<'_>,
    all: &[ReplicaSet],
    new: Option<&ReplicaSet>,
) -> (DeploymentStatus, Option<Duration>) {
    let mut status = calculate(plan, all, new);
    let deadline = plan.p.progress_deadline_seconds;
    if deadline.is_none() {
        remove_condition(&mut status, PROGRESSING);
    }
    let current = get_condition(&plan.status, PROGRESSING).cloned();
    // A finished rollout seen again on a resync: nothing to estimate.
    let already_complete = counts(&status).replicas == counts(&status).updated
        && current.as_ref().and_then(|c| c.reason.as_deref()) == Some(NEW_RS_AVAILABLE);
    if deadline.is_some() && !already_complete {
        let subject = match new {
            Some(rs) => format!("ReplicaSet \"{}\"", name(rs)),
            None => format!(
                "Deployment \"{}\"",
                plan.d.metadata.name.as_deref().unwrap_or_default()
            ),
        };
        if is_complete(plan, &status) {
            set_condition(
                &mut status,
                new_condition(
                    PROGRESSING,
                    "True",
                    NEW_RS_AVAILABLE,
                    format!("{subject} has successfully progressed."),
                    plan.now,
                ),
            );
        } else if made_progress(&plan.status, &status) {
            // Progress moves lastUpdateTime even with an unchanged reason,
            // which set_condition alone would not do.
            let mut cond = new_condition(
                PROGRESSING,
                "True",
                RS_UPDATED,
                format!("{subject} is progressing."),
                plan.now,
            );
            if let Some(cur) = &current {
                if cur.status == "True" {
                    cond.last_transition_time = cur.last_transition_time.clone();
                }
                remove_condition(&mut status, PROGRESSING);
            }
            set_condition(&mut status, cond);
        } else if timed_out(plan, &status) {
            set_condition(
                &mut status,
                new_condition(
                    PROGRESSING,
                    "False",
                    TIMED_OUT,
                    format!("{subject} has timed out progressing."),
                    plan.now,
                ),
            );
        }
    }
    match replica_failure(all, new) {
        Some(c) => set_condition(&mut status, c),
        None => remove_condition(&mut status, REPLICA_FAILURE),
    }
    let requeue = requeue_for_deadline(plan, &status);
    (status, requeue)
}

/// `DeploymentProgressing`: more updated, fewer old, more ready or more
/// available pods than the stored status says.
fn made_progress(old: &DeploymentStatus, new: &DeploymentStatus) -> bool {
    let (o, n) = (counts(old), counts(new));
    let old_pods = |c: &super::status::Counts| i64::from(c.replicas) - i64::from(c.updated);
    n.updated > o.updated
        || old_pods(&n) < old_pods(&o)
        || n.ready > o.ready
        || n.available > o.available
}

/// `DeploymentTimedOut`: Progressing last updated more than the deadline
/// ago (a finished rollout never times out; a timed-out one stays so).
fn timed_out(plan: &Plan<'_>, status: &DeploymentStatus) -> bool {
    let Some(deadline) = plan.p.progress_deadline_seconds else {
        return false;
    };
    let Some(cond) = get_condition(status, PROGRESSING) else {
        return false;
    };
    match cond.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => false,
        Some(TIMED_OUT) => true,
        _ => deadline_at(cond, deadline).is_some_and(|at| at < plan.now),
    }
}

fn deadline_at(cond: &DeploymentCondition, deadline: i32) -> Option<k8s_openapi::jiff::Timestamp> {
    add_secs(cond.last_update_time.as_ref()?.0, i64::from(deadline))
}

/// `requeueStuckDeployment`: a rollout that is neither complete nor timed
/// out is looked at again just after its deadline passes, when nothing else
/// would wake it.
///
/// Unlike KCM, a condition still saying `NewReplicaSetAvailable` (a
/// finished rollout since scaled) gets no requeue: such a condition never
/// times out, so waking up could change nothing, and KCM's immediate
/// rate-limited requeue only spins.
fn requeue_for_deadline(plan: &Plan<'_>, status: &DeploymentStatus) -> Option<Duration> {
    let deadline = plan.p.progress_deadline_seconds?;
    let cond = get_condition(status, PROGRESSING)?;
    if is_complete(plan, status)
        || matches!(cond.reason.as_deref(), Some(TIMED_OUT | NEW_RS_AVAILABLE))
    {
        return None;
    }
    Some(requeue_at(plan.now, deadline_at(cond, deadline)?))
}

/// A ReplicaSet's `ReplicaFailure` condition, the new ReplicaSet's first.
fn replica_failure(all: &[ReplicaSet], new: Option<&ReplicaSet>) -> Option<DeploymentCondition> {
    let failure = |rs: &ReplicaSet| {
        rs.status
            .as_ref()?
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == REPLICA_FAILURE)
            .map(|c| DeploymentCondition {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
                last_transition_time: c.last_transition_time.clone(),
                last_update_time: c.last_transition_time.clone(),
            })
    };
    new.and_then(failure)
        .or_else(|| all.iter().find_map(failure))
}
