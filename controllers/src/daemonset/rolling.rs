//! The DaemonSet's rolling update (KCM's `rollingUpdate`), run when `manage` had
//! nothing to do.
//!
//! Without surge: old pods are deleted on at most `maxUnavailable` nodes at a time,
//! counting every node whose pod is missing or not available as unavailable
//! (an old pod that is not available anyway is replaced at once); `manage` then
//! creates the new pods. With surge: a new pod is created beside the old one on at
//! most `maxSurge` nodes (at once where the old one is not available), and the old
//! pod is deleted once the new one is available. Deleted pods do not count, so a
//! rollout progresses while nodes are down. Nodes are taken in name order.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;

use super::{Revision, Work};
use crate::error::ReconcileError;
use crate::intstr::scaled_value;
use crate::pod_state::is_available;

/// Whether the update strategy is RollingUpdate (the default).
pub(super) fn is_rolling_update(ds: &DaemonSet) -> bool {
    ds.spec
        .as_ref()
        .and_then(|s| s.update_strategy.as_ref())
        .and_then(|u| u.type_.as_deref())
        .is_none_or(|t| t == "RollingUpdate")
}

/// `util.AllowsSurge`: a RollingUpdate whose `maxSurge` is not 0 (however many
/// nodes, so a percentage counts as given).
pub(super) fn allows_surge(ds: &DaemonSet) -> bool {
    is_rolling_update(ds)
        && rolling(ds)
            .and_then(|r| r.max_surge.as_ref())
            .and_then(|s| scaled_value(s, 100, true).ok())
            .is_some_and(|n| n > 0)
}

fn rolling(ds: &DaemonSet) -> Option<&k8s_openapi::api::apps::v1::RollingUpdateDaemonSet> {
    ds.spec
        .as_ref()?
        .update_strategy
        .as_ref()?
        .rolling_update
        .as_ref()
}

/// `maxSurge` and `maxUnavailable` against the nodes that should run a pod
/// (percentages rounded up; both 0 makes unavailability 1).
pub(super) fn limits(ds: &DaemonSet, desired: i32) -> Result<(i32, i32), ReconcileError> {
    let ru = rolling(ds);
    let scaled = |v: Option<&k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>,
                  field: &'static str| {
        v.map(|v| scaled_value(v, desired, true))
            .transpose()
            .map(Option::unwrap_or_default)
            .map_err(|source| ReconcileError::IntOrPercent { field, source })
    };
    let surge = scaled(
        ru.and_then(|r| r.max_surge.as_ref()),
        "spec.updateStrategy.rollingUpdate.maxSurge",
    )?;
    let mut unavailable = scaled(
        ru.and_then(|r| r.max_unavailable.as_ref()),
        "spec.updateStrategy.rollingUpdate.maxUnavailable",
    )?;
    if desired > 0 && surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Ok((surge, unavailable))
}

/// The node's one new and one old pod among those not being deleted, or `None`
/// when it has more of either (`manage` prunes those first).
fn updated_and_old<'p>(
    rev: &Revision,
    pods: &[&'p Pod],
) -> Option<(Option<&'p Pod>, Option<&'p Pod>)> {
    let (mut new, mut old) = (None, None);
    for p in pods.iter().copied() {
        if p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let slot = if rev.is_updated(p) {
            &mut new
        } else {
            &mut old
        };
        if slot.replace(p).is_some() {
            return None;
        }
    }
    Some((new, old))
}

/// The creates and deletes of one rolling-update step.
pub(super) fn rolling_update(
    ds: &DaemonSet,
    rev: &Revision,
    nodes: &[&Node],
    by_node: &BTreeMap<String, Vec<&Pod>>,
    now: Timestamp,
) -> Result<Work, ReconcileError> {
    // Pods that are terminal and deleted are gone as far as the update goes.
    let mut on_node: BTreeMap<String, Vec<&Pod>> = by_node
        .iter()
        .map(|(n, pods)| {
            let kept = pods
                .iter()
                .copied()
                .filter(|p| {
                    !(p.metadata.deletion_timestamp.is_some()
                        && matches!(super::phase(p), "Succeeded" | "Failed"))
                })
                .collect();
            (n.clone(), kept)
        })
        .collect();
    let mut desired = 0i32;
    let mut should_run = BTreeMap::new();
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let run = rev.eligibility(node).should_run;
        if run {
            desired += 1;
            on_node.entry(name.clone()).or_default();
        }
        should_run.insert(name, run);
    }
    let (max_surge, max_unavailable) = limits(ds, desired)?;
    let available = |p: &Pod| is_available(p, rev.min_ready_seconds, now);
    let mut work = Work::default();
    if max_surge == 0 {
        let mut unavailable = 0;
        let mut replace_now = Vec::new();
        let mut candidates = Vec::new();
        for pods in on_node.values() {
            let Some((new, old)) = updated_and_old(rev, pods) else {
                unavailable += 1;
                continue;
            };
            match (new, old) {
                (None, None) | (Some(_), Some(_)) => unavailable += 1,
                (Some(new), None) => {
                    if !available(new) {
                        unavailable += 1;
                    }
                }
                (None, Some(old)) => {
                    if !available(old) {
                        replace_now.push(old);
                        unavailable += 1;
                    } else if unavailable < max_unavailable {
                        candidates.push(old);
                    }
                }
            }
        }
        let room = usize::try_from(max_unavailable - unavailable).unwrap_or(0);
        for p in replace_now
            .into_iter()
            .chain(candidates.into_iter().take(room))
        {
            work.delete(p);
        }
        return Ok(work);
    }
    let mut surged = 0;
    let mut available_count = 0;
    let mut allowed_new = Vec::new();
    let mut candidate_new = Vec::new();
    let mut should_not_run = Vec::new();
    for (node, pods) in &on_node {
        let Some((new, old)) = updated_and_old(rev, pods) else {
            surged += 1;
            continue;
        };
        if let Some(p) = old.or(new)
            && available(p)
        {
            available_count += 1;
        }
        let runs_here = should_run.get(node).copied().unwrap_or(false);
        match (new, old) {
            (_, None) => {}
            (None, Some(old)) => {
                if !available(old) {
                    if runs_here {
                        allowed_new.push(node.clone());
                    } else {
                        work.delete(old);
                    }
                } else if !runs_here {
                    should_not_run.push(old);
                } else if surged < max_surge {
                    candidate_new.push(node.clone());
                }
            }
            (Some(new), Some(old)) => {
                if available(new) {
                    work.delete(old);
                } else {
                    surged += 1;
                }
            }
        }
    }
    // Surge promises full availability: a pod on a node that may no longer run it
    // goes only once as many pods are available elsewhere as are desired.
    let deletable = usize::try_from(available_count - desired).unwrap_or(0);
    for p in should_not_run.into_iter().take(deletable) {
        work.delete(p);
    }
    let room = usize::try_from(max_surge - surged).unwrap_or(0);
    work.create_on = allowed_new
        .into_iter()
        .chain(candidate_new.into_iter().take(room))
        .collect();
    Ok(work)
}
