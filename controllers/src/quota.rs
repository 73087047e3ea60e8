//! The resource quota controller (kube-controller-manager's `ResourceQuotaController`):
//! a ResourceQuota's status recounted from its namespace. `status.hard` is `spec.hard`;
//! `status.used` holds, for each of its names, what the namespace's pods use (those
//! its scopes select, finished ones and ones past their deletion's grace left out)
//! and how many objects of each counted resource there are.
//!
//! The quota admission charges each create to `status.used` as it is admitted, so a
//! burst cannot pass `hard` between two recounts; this recount gives back what deletes
//! and finished pods free, and corrects a charge whose create then failed. Both write
//! under the resourceVersion they read, as in Kubernetes: the second writer of a
//! status that the crate's contract allows besides a disruption budget's.

use std::time::SystemTime;

use apiserver::quota::{self, Usage};
use k8s_openapi::api::core::v1::{Pod, ResourceQuota, ResourceQuotaStatus};
use k8s_openapi::jiff::Timestamp;

use crate::{Action, Reconciled, Status};

/// Recounts quota `q` over the namespace's `pods` and `count_of` (the number of
/// objects of a resource there; `None` for one mesopod does not serve); asks for a
/// status write only when a value differs from the stored one.
pub fn reconcile(
    q: &ResourceQuota,
    pods: &[&Pod],
    count_of: &dyn Fn(&str) -> Option<usize>,
    now: Timestamp,
) -> Reconciled {
    let (hard, used) = quota::recount(q, pods, count_of, SystemTime::from(now));
    let (stored_hard, stored_used) = quota::hard_and_used(q);
    let same =
        |a: &Usage, b: &Usage| a.len() == b.len() && a.iter().all(|(k, v)| b.get(k) == Some(v));
    let unchanged = stored_used.is_some_and(|u| same(&u, &used))
        && same(&stored_hard, &hard)
        && q.status.as_ref().and_then(|s| s.hard.as_ref()).is_some();
    if unchanged {
        return Reconciled::default();
    }
    let status = ResourceQuotaStatus {
        hard: Some(quota::to_quantities(&hard)),
        used: Some(quota::to_quantities(&used)),
    };
    Reconciled {
        actions: vec![Action::WriteStatus(Status::ResourceQuota(status))],
        requeue_after: None,
    }
}

#[cfg(test)]
mod tests;
