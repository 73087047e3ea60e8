//! The DaemonSet's status, per node (KCM's `updateDaemonSetStatus`): of the nodes
//! that should run a pod, how many have one, how many of those (the oldest pod
//! on each) are ready, available and of the current template; and how many nodes
//! have a pod that should not. `observedGeneration` rises only in a sync that may
//! act (expectations satisfied).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;

use super::{DaemonContext, Revision, oldest_first, phase};
use crate::pod_state::{is_available, is_ready};

/// The new status if it differs from the stored one, and when to look again for a
/// ready pod to become available.
pub(super) fn compute(
    ds: &DaemonSet,
    rev: &Revision,
    nodes: &[&Node],
    by_node: &BTreeMap<String, Vec<&Pod>>,
    ctx: &DaemonContext<'_>,
    now: Timestamp,
) -> (Option<DaemonSetStatus>, Option<Duration>) {
    let (mut desired, mut current, mut misscheduled) = (0, 0, 0);
    let (mut ready, mut available, mut updated) = (0, 0, 0);
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let mut pods: Vec<&Pod> = by_node
            .get(name)
            .into_iter()
            .flatten()
            .copied()
            // A terminal pod already deleted is gone for the status.
            .filter(|p| {
                !(p.metadata.deletion_timestamp.is_some()
                    && matches!(phase(p), "Succeeded" | "Failed"))
            })
            .collect();
        let scheduled = !pods.is_empty();
        if !rev.eligibility(node).should_run {
            if scheduled {
                misscheduled += 1;
            }
            continue;
        }
        desired += 1;
        if !scheduled {
            continue;
        }
        current += 1;
        pods.sort_by(|a, b| oldest_first(a, b));
        let pod = pods[0];
        if is_ready(pod) {
            ready += 1;
            if is_available(pod, rev.min_ready_seconds, now) {
                available += 1;
            }
        }
        if rev.is_updated(pod) {
            updated += 1;
        }
    }
    let old = ds.status.clone().unwrap_or_default();
    let generation = ds.metadata.generation;
    let nonzero = |n: i32| (n != 0).then_some(n);
    let mut new = DaemonSetStatus {
        desired_number_scheduled: desired,
        current_number_scheduled: current,
        number_misscheduled: misscheduled,
        number_ready: ready,
        updated_number_scheduled: nonzero(updated),
        number_available: nonzero(available),
        number_unavailable: nonzero(desired - available),
        ..old.clone()
    };
    if ctx.expectations_satisfied {
        new.observed_generation = generation;
    }
    // Only the minReadySeconds wait changes without an event (KCM requeues after
    // minReadySeconds as its last line of defence).
    let min_ready = rev.min_ready_seconds;
    let requeue = (min_ready > 0 && ready != available)
        .then(|| Duration::from_secs(u64::try_from(min_ready).unwrap_or(0)));
    let same = new == old;
    (if same { None } else { Some(new) }, requeue)
}
