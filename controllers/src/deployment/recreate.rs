//! Recreate (`rolloutRecreate`): old ReplicaSets to 0, wait until no old
//! pod is left running, then the new ReplicaSet to `replicas`. Old and new
//! pods never run side by side (what applications that cannot share a
//! volume or a schema need).

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;

use super::cleanup::cleanup;
use super::newrs;
use super::plan::{Plan, status_counts};
use super::progress::rollout_status;
use super::status::is_complete;
use crate::action::Reconciled;
use crate::owner::controller_of;
use crate::selector::Selector;

/// One Recreate sync. `pods`: the pods the Deployment's selector matches.
pub(crate) fn rollout(mut plan: Plan<'_>, selector: &Selector, pods: &[&Pod]) -> Reconciled {
    // Not created yet: the new ReplicaSet must not start before the old
    // pods are gone.
    let new = newrs::get(&mut plan, false);
    let before = plan.rses.clone();
    let mut scaled_down = false;
    for i in plan.active_olds(new) {
        scaled_down |= plan.scale_to(i, 0);
    }
    if scaled_down || old_pods_running(&plan, &before, new, selector, pods) {
        let (status, requeue) = rollout_status(&plan, &before, new.map(|i| &before[i]));
        return plan.finish(status, requeue);
    }
    let new = match new {
        Some(i) => Some(i),
        None => newrs::get(&mut plan, true),
    };
    let found = plan.rses.clone();
    if let Some(i) = new {
        plan.scale_to(i, plan.p.replicas);
    }
    if is_complete(&plan, &plan.status) {
        let olds: Vec<ReplicaSet> = plan
            .olds(new)
            .into_iter()
            .map(|i| found[i].clone())
            .collect();
        cleanup(&mut plan, &olds);
    }
    let (status, requeue) = rollout_status(&plan, &found, new.map(|i| &found[i]));
    plan.finish(status, requeue)
}

/// `oldPodsRunning`: an old ReplicaSet still reports pods, or a pod of one
/// (matched by the selector and controlled by one of the Deployment's
/// ReplicaSets other than the new one) is not Succeeded or Failed. A
/// terminating pod still counts: its containers may still run.
fn old_pods_running(
    plan: &Plan<'_>,
    rses: &[ReplicaSet],
    new: Option<usize>,
    selector: &Selector,
    pods: &[&Pod],
) -> bool {
    let olds = plan.olds(new);
    if olds.iter().any(|i| status_counts(&rses[*i]).0 > 0) {
        return true;
    }
    let old_uids: Vec<&str> = olds
        .iter()
        .filter_map(|i| rses[*i].metadata.uid.as_deref())
        .collect();
    pods.iter()
        .filter(|p| selector.matches(p.metadata.labels.as_ref()))
        .filter(|p| controller_of(&p.metadata).is_some_and(|r| old_uids.contains(&r.uid.as_str())))
        .any(|p| {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            !matches!(phase, Some("Succeeded" | "Failed"))
        })
}
