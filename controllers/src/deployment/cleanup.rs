//! Revision history (`cleanupDeployment`): beyond `revisionHistoryLimit`
//! old ReplicaSets, the oldest revisions that run nothing are deleted.

use k8s_openapi::api::apps::v1::ReplicaSet;

use super::plan::{Plan, replicas};
use super::revision::revision;

/// Delete old ReplicaSets past the limit, lowest revision first, skipping
/// any that still has pods, wants pods, has a spec change its controller
/// has not seen yet, or is already being deleted. `olds` are the old
/// ReplicaSets as the sync found them.
pub(crate) fn cleanup(plan: &mut Plan<'_>, olds: &[ReplicaSet]) {
    let Some(limit) = plan.p.revision_history_limit else {
        return;
    };
    let mut cleanable: Vec<&ReplicaSet> = olds
        .iter()
        .filter(|rs| rs.metadata.deletion_timestamp.is_none())
        .collect();
    let excess = cleanable
        .len()
        .saturating_sub(usize::try_from(limit).unwrap_or(0));
    if excess == 0 {
        return;
    }
    // An unparseable revision sorts as 0: KCM falls back to creation order
    // for it, which is not a total order; 0 puts it first, in creation
    // order among its kind.
    cleanable.sort_by(|a, b| {
        let key = |rs: &ReplicaSet| {
            (
                revision(&rs.metadata).unwrap_or(0),
                rs.metadata.creation_timestamp.clone(),
                rs.metadata.name.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    for rs in cleanable.into_iter().take(excess) {
        let status = rs.status.as_ref();
        let running = status.map_or(0, |s| s.replicas);
        let observed = status.and_then(|s| s.observed_generation).unwrap_or(0);
        if running != 0 || replicas(rs) != 0 || rs.metadata.generation.unwrap_or(0) > observed {
            continue;
        }
        plan.delete(rs);
    }
}
