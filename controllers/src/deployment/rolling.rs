//! RollingUpdate (`rolloutRolling`): each sync either grows the new
//! ReplicaSet within `replicas + maxSurge`, or shrinks old ones while
//! `replicas - maxUnavailable` pods stay available; when neither is
//! possible the rollout waits for pods to become available.

use k8s_openapi::api::apps::v1::ReplicaSet;

use super::cleanup::cleanup;
use super::newrs;
use super::plan::{Plan, available, replicas, sum};
use super::progress::rollout_status;
use super::status::is_complete;
use crate::action::Reconciled;

/// One RollingUpdate sync.
pub(crate) fn rollout(mut plan: Plan<'_>) -> Reconciled {
    let new = newrs::get(&mut plan, true);
    // The status describes the ReplicaSets as the sync found them (KCM
    // computes it from the objects it read, not from its own updates).
    let before = plan.rses.clone();
    let (status, requeue) = rollout_status(&plan, &before, new.map(|i| &before[i]));
    let Some(new) = new else {
        return plan.finish(status, requeue);
    };
    if reconcile_new(&mut plan, new) || reconcile_old(&mut plan, new) {
        return plan.finish(status, requeue);
    }
    if is_complete(&plan, &plan.status) {
        let olds: Vec<ReplicaSet> = plan
            .olds(Some(new))
            .into_iter()
            .map(|i| before[i].clone())
            .collect();
        cleanup(&mut plan, &olds);
    }
    plan.finish(status, requeue)
}

/// Scale the new ReplicaSet toward `replicas` (down at once if above it).
/// True if it changed size.
fn reconcile_new(plan: &mut Plan<'_>, new: usize) -> bool {
    let have = replicas(&plan.rses[new]);
    let want = plan.p.replicas;
    if have == want {
        return false;
    }
    if have > want {
        return plan.scale_to(new, want);
    }
    let target = newrs::new_replicas(plan, &plan.rses[new]);
    plan.scale_to(new, target)
}

/// What a ReplicaSet can be counted on to keep available: its available
/// pods, but no more than it is asked to keep. (A status read before a
/// scale-down reached the ReplicaSet still counts pods about to go; KCM
/// counts them and can then take more than maxUnavailable down.)
fn kept_available(rs: &ReplicaSet) -> i32 {
    available(rs).min(replicas(rs)).max(0)
}

/// Scale old ReplicaSets down: first their pods that are not available
/// (removing those costs no availability), then, oldest ReplicaSet first,
/// as far as `replicas - maxUnavailable` available pods allow. True if any
/// changed size.
fn reconcile_old(plan: &mut Plan<'_>, new: usize) -> bool {
    let olds = plan.active_olds(Some(new));
    if sum(olds.iter().map(|i| replicas(&plan.rses[*i]))) == 0 {
        return false;
    }
    let all_pods = sum((0..plan.rses.len()).map(|i| replicas(&plan.rses[i])));
    let min_available = plan.p.min_available();
    let new_rs = &plan.rses[new];
    let new_unavailable = replicas(new_rs) - kept_available(new_rs);
    // Room to scale down: surge pods already made, and the allowed
    // unavailability, less what the new ReplicaSet has not made available
    // yet (so a crash-looping new ReplicaSet does not eat the old one).
    let max_scaled_down =
        i64::from(all_pods) - i64::from(min_available) - i64::from(new_unavailable);
    if max_scaled_down <= 0 {
        return false;
    }
    let max_scaled_down = i32::try_from(max_scaled_down).unwrap_or(i32::MAX);
    let Some(cleaned) = cleanup_unhealthy(plan, &olds, max_scaled_down) else {
        return false;
    };
    let scaled = scale_down_old(plan, &olds, new);
    cleaned > 0 || scaled > 0
}

/// `cleanupUnhealthyReplicas`: take up to `max` unavailable pods off the
/// old ReplicaSets, oldest first. `None` (and no further scaling this sync,
/// as in KCM) when a ReplicaSet reports more available pods than it wants,
/// a status from before its last scale-down.
fn cleanup_unhealthy(plan: &mut Plan<'_>, olds: &[usize], max: i32) -> Option<i32> {
    let mut total = 0i32;
    for &i in olds {
        if total >= max {
            break;
        }
        let rs = &plan.rses[i];
        let (want, avail) = (replicas(rs), available(rs));
        if want == 0 || want == avail {
            continue;
        }
        if avail > want {
            return None;
        }
        let count = (max - total).min(want - avail);
        plan.scale_to(i, want - count);
        total += count;
    }
    Some(total)
}

/// `scaleDownOldReplicaSetsForRollingUpdate`: scale old ReplicaSets down,
/// oldest first, by the available pods above `replicas - maxUnavailable`.
fn scale_down_old(plan: &mut Plan<'_>, olds: &[usize], new: usize) -> i32 {
    let min_available = plan.p.min_available();
    let available_now = sum(olds
        .iter()
        .chain([&new])
        .map(|i| kept_available(&plan.rses[*i])));
    if available_now <= min_available {
        return 0;
    }
    let to_scale_down = available_now - min_available;
    let mut total = 0i32;
    for &i in olds {
        if total >= to_scale_down {
            break;
        }
        let want = replicas(&plan.rses[i]);
        if want <= 0 {
            continue;
        }
        let count = want.min(to_scale_down - total);
        plan.scale_to(i, want - count);
        total += count;
    }
    total
}
