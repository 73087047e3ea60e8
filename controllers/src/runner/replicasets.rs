//! The replicaset controller's sync: one ReplicaSet's reconcile from the cache, with
//! expectations set before its creates and deletes, creates in slow-start batches (1,
//! 2, 4, … each concurrent, stopping at the first error as kube-controller-manager
//! does, so a quota or an admission refusal costs one failed call, not thousands),
//! then its status.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use apiserver::ApiError;
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;

use super::Cx;
use super::queue::Key;
use crate::replicaset::{self, FailureReason, ManageFailure, ReplicaContext, events};
use crate::{Action, Status, controller_of};

/// The controller's name on its events.
const COMPONENT: &str = "replicaset-controller";

/// How many calls of one batch are in flight at once.
const IN_FLIGHT: usize = 64;

/// Syncs the ReplicaSet `key`; returns when to look again without a change.
pub(super) async fn sync(cx: &Cx, key: &Key) -> Result<Option<Duration>, ApiError> {
    let now = super::timestamp(cx.api.now());
    let owner = owner_key(key);
    let Some(rs) = cx.caches.replicasets.get(key) else {
        cx.expectations().forget(&owner);
        return Ok(None);
    };
    // Its own pods and the orphans it may adopt, by reference: a sync of a
    // 10,000-replica set copies no pod.
    let all = cx.caches.pods.in_namespace(&key.0);
    let uid = rs.metadata.uid.as_deref().unwrap_or_default();
    let pods: Vec<&Pod> = all
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| controller_of(&p.metadata).is_none_or(|r| r.uid == uid))
        .collect();
    // Only a scale-down ranks by the family's pods per node.
    let replicas =
        usize::try_from(rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)).unwrap_or(0);
    let related = if pods.len() > replicas {
        related_pods(cx, &rs, &all)
    } else {
        Vec::new()
    };
    let satisfied = cx.expectations().satisfied(&owner, now);
    let ctx = ReplicaContext {
        related_pods: &related,
        expectations_satisfied: satisfied,
    };
    let planned = match replicaset::reconcile(&rs, &pods, &ctx, now) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(replicaset = %owner, error = %e, "cannot reconcile");
            return Ok(None);
        }
    };
    let creations = planned.pod_creations();
    let deletions: Vec<String> = planned
        .pod_deletions()
        .map(|n| format!("{}/{n}", key.0))
        .collect();
    if creations > 0 {
        cx.expectations().expect_creations(&owner, creations, now);
    }
    if !deletions.is_empty() {
        cx.expectations().expect_deletions(&owner, deletions, now);
    }
    let mut actions = planned.actions.into_iter().peekable();
    let mut owner_checked = false;
    while let Some(action) = actions.next() {
        let failure = match action {
            Action::CreatePod { pod } => {
                let mut batch = vec![pod];
                while let Some(Action::CreatePod { .. }) = actions.peek() {
                    if let Some(Action::CreatePod { pod }) = actions.next() {
                        batch.push(pod);
                    }
                }
                create_pods(cx, &rs, &owner, batch).await
            }
            Action::DeletePod { name, uid } => {
                let mut batch = vec![(name, uid)];
                while let Some(Action::DeletePod { .. }) = actions.peek() {
                    if let Some(Action::DeletePod { name, uid }) = actions.next() {
                        batch.push((name, uid));
                    }
                }
                delete_pods(cx, &rs, &owner, batch).await
            }
            a @ (Action::AdoptPod { .. } | Action::ReleasePod { .. }) => {
                if matches!(a, Action::AdoptPod { .. }) && !owner_checked {
                    can_adopt(cx, &rs, key)?;
                    owner_checked = true;
                }
                super::patch_pod(cx, &key.0, &a).await?;
                None
            }
            Action::WriteStatus(Status::ReplicaSet(status)) => {
                let mut new = (*rs).clone();
                new.status = Some(status);
                cx.api
                    .replace_replicaset_status(&key.0, &key.1, new)
                    .await?;
                None
            }
            Action::Event(e) => {
                super::events::record(&cx.api, COMPONENT, rs.as_ref(), &e).await;
                None
            }
            other => {
                tracing::warn!(replicaset = %owner, action = ?other, "not a replicaset controller's action");
                None
            }
        };
        if let Some(failure) = failure {
            // The status says why, as kube-controller-manager's does, and the sync is
            // retried with backoff.
            if let Ok(Some(Action::WriteStatus(Status::ReplicaSet(status)))) =
                replicaset::status_after_failure(&rs, &pods, &failure, now)
            {
                let mut new = (*rs).clone();
                new.status = Some(status);
                let _ = cx.api.replace_replicaset_status(&key.0, &key.1, new).await;
            }
            return Err(ApiError::Internal(failure.message));
        }
    }
    Ok(planned.requeue_after)
}

/// Creates `pods` in slow-start batches; the first error stops what is left (those
/// creations are no longer expected).
async fn create_pods(
    cx: &Cx,
    rs: &Arc<ReplicaSet>,
    owner: &str,
    pods: Vec<Pod>,
) -> Option<ManageFailure> {
    let ns = rs.metadata.namespace.clone().unwrap_or_default();
    let mut left = pods.into_iter();
    let mut size = 1usize;
    loop {
        let batch: Vec<Pod> = left.by_ref().take(size).collect();
        if batch.is_empty() {
            return None;
        }
        let results: Vec<Result<Pod, ApiError>> = futures::stream::iter(batch)
            .map(|pod| cx.api.create_pod(&ns, pod))
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        let mut failure = None;
        for r in results {
            match r {
                Ok(pod) => {
                    let name = pod.metadata.name.unwrap_or_default();
                    super::events::record(&cx.api, COMPONENT, rs.as_ref(), &events::created(&name))
                        .await;
                }
                Err(e) => {
                    cx.expectations().creation_observed(owner);
                    let message = e.to_string();
                    super::events::record(
                        &cx.api,
                        COMPONENT,
                        rs.as_ref(),
                        &events::create_failed(&message),
                    )
                    .await;
                    failure.get_or_insert(ManageFailure {
                        reason: FailureReason::FailedCreate,
                        message,
                    });
                }
            }
        }
        if failure.is_some() {
            let skipped = left.count();
            cx.expectations().lower_creations(owner, skipped);
            return failure;
        }
        size = size.saturating_mul(2);
    }
}

/// Deletes the pods (named, with their uids as preconditions); one already gone is
/// not a failure.
async fn delete_pods(
    cx: &Cx,
    rs: &Arc<ReplicaSet>,
    owner: &str,
    pods: Vec<(String, String)>,
) -> Option<ManageFailure> {
    let ns = rs.metadata.namespace.clone().unwrap_or_default();
    let results: Vec<(String, Result<Pod, ApiError>)> = futures::stream::iter(pods)
        .map(|(name, uid)| {
            let ns = ns.clone();
            async move {
                let opts = DeleteOptions {
                    preconditions: Some(
                        k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions {
                            uid: Some(uid),
                            resource_version: None,
                        },
                    ),
                    ..DeleteOptions::default()
                };
                let r = cx.api.delete_pod(&ns, &name, &opts).await;
                (name, r)
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let mut failure = None;
    for (name, r) in results {
        match r {
            Ok(_) => {
                super::events::record(&cx.api, COMPONENT, rs.as_ref(), &events::deleted(&name))
                    .await;
            }
            Err(ApiError::NotFound { .. }) => {
                cx.expectations()
                    .deletion_observed(owner, &format!("{ns}/{name}"));
            }
            Err(e) => {
                cx.expectations()
                    .deletion_observed(owner, &format!("{ns}/{name}"));
                let message = e.to_string();
                super::events::record(
                    &cx.api,
                    COMPONENT,
                    rs.as_ref(),
                    &events::delete_failed(&message),
                )
                .await;
                failure.get_or_insert(ManageFailure {
                    reason: FailureReason::FailedDelete,
                    message,
                });
            }
        }
    }
    failure
}

/// The pods of every ReplicaSet that shares this one's controller (a Deployment's
/// ReplicaSets), for the "more of the family on its node" rank of a scale-down.
fn related_pods<'a>(cx: &Cx, rs: &ReplicaSet, pods: &'a [Arc<Pod>]) -> Vec<&'a Pod> {
    let Some(controller) = controller_of(&rs.metadata) else {
        return Vec::new();
    };
    let ns = rs.metadata.namespace.as_deref().unwrap_or_default();
    let family: HashSet<String> = cx
        .caches
        .replicasets
        .in_namespace(ns)
        .iter()
        .filter(|r| controller_of(&r.metadata).is_some_and(|c| c.uid == controller.uid))
        .filter_map(|r| r.metadata.uid.clone())
        .collect();
    pods.iter()
        .map(AsRef::as_ref)
        .filter(|p| controller_of(&p.metadata).is_some_and(|c| family.contains(&c.uid)))
        .collect()
}

/// The expectations key of an owner: `namespace/name`.
pub(super) fn owner_key(key: &Key) -> String {
    format!("{}/{}", key.0, key.1)
}

/// kube-controller-manager's `canAdopt`: an adoption needs the owner as it is now, not
/// as the cache last saw it; one being deleted (an Orphan delete releasing its pods,
/// say) adopts nothing.
fn can_adopt(cx: &Cx, rs: &ReplicaSet, key: &Key) -> Result<(), ApiError> {
    let live = cx.api.get_replicaset(&key.0, &key.1)?;
    if live.metadata.uid != rs.metadata.uid {
        return Err(ApiError::Internal(format!(
            "original ReplicaSet {}/{} is gone: got uid {}, wanted {}",
            key.0,
            key.1,
            live.metadata.uid.unwrap_or_default(),
            rs.metadata.uid.clone().unwrap_or_default()
        )));
    }
    if let Some(t) = live.metadata.deletion_timestamp {
        return Err(ApiError::Internal(format!(
            "{}/{} has just been deleted at {}",
            key.0, key.1, t.0
        )));
    }
    Ok(())
}
