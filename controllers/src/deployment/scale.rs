//! Scaling without a rollout (`sync`, `scale`): a paused Deployment, or one
//! whose `spec.replicas` changed (a ReplicaSet's `desired-replicas` no
//! longer matches). With several active ReplicaSets mid-rollout, the
//! change is spread over them in proportion to their sizes.

use std::cmp::Reverse;

use k8s_openapi::api::apps::v1::ReplicaSet;

use super::cleanup::cleanup;
use super::newrs;
use super::params::Strategy;
use super::plan::{Direction, Plan, available, replicas, sum};
use super::revision::{desired_replicas, max_replicas};
use super::status::calculate;
use crate::action::Reconciled;

/// Whether some active ReplicaSet was last scaled for another
/// `spec.replicas` than the Deployment's now (`isScalingEvent`).
pub(crate) fn is_scaling_event(plan: &mut Plan<'_>) -> bool {
    let new = newrs::get(plan, false);
    let mut active = plan.active_olds(new);
    active.extend(new.filter(|i| replicas(&plan.rses[*i]) > 0));
    active
        .iter()
        .filter_map(|i| desired_replicas(&plan.rses[*i]))
        .any(|desired| desired != plan.p.replicas)
}

/// A paused or scaling sync: scale, clean up old ReplicaSets if paused,
/// and write the plain status (no progress estimate while paused).
pub(crate) fn sync(mut plan: Plan<'_>) -> Reconciled {
    let new = newrs::get(&mut plan, false);
    let before = plan.rses.clone();
    scale(&mut plan, new);
    if plan.p.paused {
        let olds: Vec<ReplicaSet> = plan
            .olds(new)
            .into_iter()
            .map(|i| before[i].clone())
            .collect();
        cleanup(&mut plan, &olds);
    }
    let status = calculate(&plan, &before, new.map(|i| &before[i]));
    plan.finish(status, None)
}

/// `scale`: one active ReplicaSet (or none) takes `spec.replicas` whole; a
/// saturated new ReplicaSet retires the old ones; otherwise, in a rolling
/// update, the difference to `replicas + maxSurge` is shared out.
pub(crate) fn scale(plan: &mut Plan<'_>, new: Option<usize>) {
    let want = plan.p.replicas;
    if let Some(i) = active_or_latest(plan, new) {
        plan.scale_to(i, want);
        return;
    }
    // KCM's FindActiveOrLatest has sorted the old ReplicaSets newest first
    // by now; the calls below keep that order.
    if new.is_some_and(|i| is_saturated(plan, &plan.rses[i])) {
        for i in plan.active_olds(new).into_iter().rev() {
            plan.scale_to(i, 0);
        }
        return;
    }
    if plan.p.strategy != Strategy::RollingUpdate {
        return;
    }
    let mut active: Vec<usize> = plan.active_olds(new).into_iter().rev().collect();
    active.extend(new.filter(|i| replicas(&plan.rses[*i]) > 0));
    let current = sum(active.iter().map(|i| replicas(&plan.rses[*i])));
    let allowed = if want > 0 { plan.p.max_total() } else { 0 };
    let to_add = allowed.saturating_sub(current);
    let by_creation = |i: &usize| {
        let m = &plan.rses[*i].metadata;
        (m.creation_timestamp.clone(), m.name.clone())
    };
    // Bigger first; among equals, newer first when growing and older
    // first when shrinking.
    if to_add > 0 {
        active.sort_by_key(|i| (Reverse(replicas(&plan.rses[*i])), Reverse(by_creation(i))));
    } else if to_add < 0 {
        active.sort_by_key(|i| (Reverse(replicas(&plan.rses[*i])), by_creation(i)));
    }
    let mut added = 0i32;
    let mut sizes = Vec::with_capacity(active.len());
    for i in &active {
        let rs = &plan.rses[*i];
        if to_add == 0 {
            sizes.push(replicas(rs));
            continue;
        }
        let p = proportion(plan, rs, to_add, added);
        sizes.push(replicas(rs).saturating_add(p));
        added = added.saturating_add(p);
    }
    // Whatever rounding left over goes to the biggest.
    if let Some(first) = sizes.first_mut().filter(|_| to_add != 0) {
        *first = first.saturating_add(to_add.saturating_sub(added)).max(0);
    }
    let direction = if to_add > 0 {
        Direction::Up
    } else {
        Direction::Down
    };
    for (i, size) in active.into_iter().zip(sizes) {
        plan.scale(i, size, direction);
    }
}

/// `FindActiveOrLatest`: the only active ReplicaSet, or with none active
/// the new one (else the newest old one); `None` when several are active.
fn active_or_latest(plan: &Plan<'_>, new: Option<usize>) -> Option<usize> {
    let mut olds = plan.olds(new);
    if new.is_none() && olds.is_empty() {
        return None;
    }
    olds.reverse(); // newest first
    let mut active = olds
        .iter()
        .copied()
        .chain(new)
        .filter(|i| replicas(&plan.rses[*i]) > 0);
    match (active.next(), active.next()) {
        (None, _) => new.or_else(|| olds.first().copied()),
        (Some(only), None) => Some(only),
        _ => None,
    }
}

/// `IsSaturated`: the new ReplicaSet is at full size, was sized for this
/// `spec.replicas`, and all its pods are available.
fn is_saturated(plan: &Plan<'_>, rs: &ReplicaSet) -> bool {
    let want = plan.p.replicas;
    desired_replicas(rs) == Some(want) && replicas(rs) == want && available(rs) == want
}

/// `GetReplicaSetProportion`: this ReplicaSet's share of `to_add`, never
/// more than what is left to share.
///
/// Unlike KCM, a share is never against the direction of the change: a
/// hand-edited `max-replicas` could make KCM grow a ReplicaSet while
/// shrinking the Deployment, and overshoot `replicas + maxSurge`.
fn proportion(plan: &Plan<'_>, rs: &ReplicaSet, to_add: i32, added: i32) -> i32 {
    if replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = fraction(plan, rs);
    let allowed = to_add.saturating_sub(added);
    if to_add > 0 {
        fraction.min(allowed).max(0)
    } else {
        fraction.max(allowed).min(0)
    }
}

/// `getReplicaSetFraction`: round(size × (replicas + surge) /
/// max-replicas) − size, the size it would have if the whole Deployment
/// scaled by the same factor; `max-replicas` falls back to the
/// Deployment's `status.replicas`, and with neither the share is 0 (KCM
/// would divide by zero).
fn fraction(plan: &Plan<'_>, rs: &ReplicaSet) -> i32 {
    if plan.p.replicas == 0 {
        return replicas(rs).saturating_neg();
    }
    let size = i128::from(replicas(rs).max(0));
    let annotated = max_replicas(rs)
        .or(plan.status.replicas)
        .map(i128::from)
        .unwrap_or(0);
    if annotated <= 0 {
        return 0;
    }
    let target = i128::from(plan.p.max_total());
    // Round half away from zero (Go's math.Round), on non-negative values.
    let scaled = (2 * size * target + annotated) / (2 * annotated);
    i32::try_from(scaled - size).unwrap_or(0)
}
