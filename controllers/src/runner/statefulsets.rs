//! The statefulset controller's sync: one StatefulSet's reconcile from the cache, then
//! its writes in order, stopping at the first failure (the sync is retried with
//! backoff and starts again from what the API then holds). Pod creates of one sync
//! (Parallel) go in slow-start batches; each create and delete is reported in the
//! set's events as kube-controller-manager words them. Pod names are fixed, so no
//! expectations are needed: a create the cache has not seen yet is refused by the API
//! as a name that exists.

use std::sync::Arc;
use std::time::Duration;

use apiserver::ApiError;
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, Preconditions};

use super::Cx;
use super::queue::Key;
use crate::statefulset::{self, events};
use crate::{Action, Status, controller_of};

/// The controller's name on its events.
const COMPONENT: &str = "statefulset-controller";

/// How many creates of one batch are in flight at once.
const IN_FLIGHT: usize = 64;

/// Syncs the StatefulSet `key`; returns when to look again without a change.
pub(super) async fn sync(cx: &Cx, key: &Key) -> Result<Option<Duration>, ApiError> {
    let now = super::timestamp(cx.api.now());
    let Some(set) = cx.caches.statefulsets.get(key) else {
        return Ok(None);
    };
    let all = cx.caches.pods.in_namespace(&key.0);
    let uid = set.metadata.uid.as_deref().unwrap_or_default();
    let pods: Vec<&Pod> = all
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| controller_of(&p.metadata).is_none_or(|r| r.uid == uid))
        .collect();
    let revisions: Vec<ControllerRevision> = cx
        .caches
        .revisions
        .in_namespace(&key.0)
        .iter()
        .map(|r| (**r).clone())
        .collect();
    let planned = match statefulset::reconcile(&set, &pods, &revisions, now) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(namespace = %key.0, statefulset = %key.1, error = %e, "cannot reconcile");
            return Ok(None);
        }
    };
    if planned.actions.iter().any(|a| {
        matches!(
            a,
            Action::AdoptPod { .. } | Action::AdoptControllerRevision { .. }
        )
    }) {
        // An adoption needs the owner as it is now, not as the cache last saw it.
        let live = cx.api.get_statefulset(&key.0, &key.1)?;
        if live.metadata.uid != set.metadata.uid || live.metadata.deletion_timestamp.is_some() {
            return Err(ApiError::Internal(
                "the statefulset changed; claiming again".into(),
            ));
        }
    }
    let mut actions = planned.actions.into_iter().peekable();
    while let Some(action) = actions.next() {
        match action {
            Action::CreatePod { pod } => {
                let mut batch = vec![pod];
                while let Some(Action::CreatePod { .. }) = actions.peek() {
                    if let Some(Action::CreatePod { pod }) = actions.next() {
                        batch.push(pod);
                    }
                }
                create_pods(cx, &set, batch).await?;
            }
            Action::DeletePod { name, uid } => delete_pod(cx, &set, &name, uid).await?,
            a @ (Action::AdoptPod { .. } | Action::ReleasePod { .. }) => {
                super::patch_pod(cx, &key.0, &a).await?;
            }
            Action::CreateControllerRevision { revision } => {
                cx.api.create_controller_revision(&key.0, revision).await?;
            }
            Action::UpdateControllerRevision { revision } => {
                let name = revision.metadata.name.clone().unwrap_or_default();
                cx.api
                    .replace_controller_revision(&key.0, &name, revision)
                    .await?;
            }
            Action::AdoptControllerRevision {
                name,
                uid,
                owner_ref,
            } => adopt_revision(cx, &key.0, &name, &uid, owner_ref).await?,
            Action::DeleteControllerRevision { name, .. } => {
                match cx.api.delete_controller_revision(&key.0, &name).await {
                    Ok(()) | Err(ApiError::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            Action::WriteStatus(Status::StatefulSet(status)) => {
                let mut new = (*set).clone();
                new.status = Some(status);
                cx.api
                    .replace_statefulset_status(&key.0, &key.1, new)
                    .await?;
            }
            Action::Event(e) => super::events::record(&cx.api, COMPONENT, set.as_ref(), &e).await,
            other => {
                tracing::warn!(namespace = %key.0, statefulset = %key.1, action = ?other, "not a statefulset controller's action");
            }
        }
    }
    Ok(planned.requeue_after)
}

/// Creates `pods` in slow-start batches (1, 2, 4, …); the first error stops what is
/// left. A name that exists is the cache lagging behind a create: no event, a retry.
async fn create_pods(cx: &Cx, set: &Arc<StatefulSet>, pods: Vec<Pod>) -> Result<(), ApiError> {
    let ns = set.metadata.namespace.clone().unwrap_or_default();
    let set_name = set.metadata.name.clone().unwrap_or_default();
    let mut left = pods.into_iter();
    let mut size = 1usize;
    loop {
        let batch: Vec<Pod> = left.by_ref().take(size).collect();
        if batch.is_empty() {
            return Ok(());
        }
        let results: Vec<(String, Result<Pod, ApiError>)> = futures::stream::iter(batch)
            .map(|pod| {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let ns = ns.clone();
                async move { (name, cx.api.create_pod(&ns, pod).await) }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        let mut failure = None;
        for (name, r) in results {
            let event = match r {
                Ok(_) => events::created(&name, &set_name),
                Err(e @ ApiError::AlreadyExists { .. }) => {
                    failure.get_or_insert(e);
                    continue;
                }
                Err(e) => {
                    let event = events::create_failed(&name, &set_name, &e.to_string());
                    failure.get_or_insert(e);
                    event
                }
            };
            super::events::record(&cx.api, COMPONENT, set.as_ref(), &event).await;
        }
        if let Some(e) = failure {
            return Err(e);
        }
        size = size.saturating_mul(2);
    }
}

/// Deletes one pod under its uid; one already gone is not a failure.
async fn delete_pod(
    cx: &Cx,
    set: &Arc<StatefulSet>,
    name: &str,
    uid: String,
) -> Result<(), ApiError> {
    let ns = set.metadata.namespace.clone().unwrap_or_default();
    let set_name = set.metadata.name.clone().unwrap_or_default();
    let opts = DeleteOptions {
        preconditions: Some(Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteOptions::default()
    };
    let (event, result) = match cx.api.delete_pod(&ns, name, &opts).await {
        Ok(_) => (events::deleted(name, &set_name), Ok(())),
        Err(ApiError::NotFound { .. }) => return Ok(()),
        Err(e) => (
            events::delete_failed(name, &set_name, &e.to_string()),
            Err(e),
        ),
    };
    super::events::record(&cx.api, COMPONENT, set.as_ref(), &event).await;
    result
}

/// Adopts an orphan revision: its live copy, if still the same orphan (same uid, no
/// controller), gets the set's controller reference, under the resourceVersion read.
async fn adopt_revision(
    cx: &Cx,
    ns: &str,
    name: &str,
    uid: &str,
    owner_ref: k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
) -> Result<(), ApiError> {
    let mut rev = match cx.api.get_controller_revision(ns, name) {
        Ok(r) => r,
        Err(ApiError::NotFound { .. }) => return Ok(()),
        Err(e) => return Err(e),
    };
    if rev.metadata.uid.as_deref() != Some(uid) || controller_of(&rev.metadata).is_some() {
        return Ok(());
    }
    rev.metadata
        .owner_references
        .get_or_insert_with(Vec::new)
        .push(owner_ref);
    match cx.api.replace_controller_revision(ns, name, rev).await {
        Ok(_) | Err(ApiError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}
