//! The deployment controller's sync: claim the ReplicaSets (adopting matching orphans,
//! releasing what no longer matches), reconcile from the cache, then create, scale and
//! delete ReplicaSets and write the Deployment's status, its revision annotation in
//! the same `/status` write (which keeps the generation, so `kubectl rollout status`
//! sees its own generation observed).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use apiserver::ApiError;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;

use super::Cx;
use super::queue::Key;
use crate::{Action, Selector, Status, claim, controller_ref, deployment};

/// The controller's name on its events.
const COMPONENT: &str = "deployment-controller";

/// Syncs the Deployment `key`; returns when to look again without a change.
pub(super) async fn sync(cx: &Cx, key: &Key) -> Result<Option<Duration>, ApiError> {
    let now = super::timestamp(cx.api.now());
    let Some(d) = cx.caches.deployments.get(key) else {
        return Ok(None);
    };
    let Some(spec) = d.spec.as_ref() else {
        return Ok(None);
    };
    let selector = match Selector::new(&spec.selector) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(namespace = %key.0, deployment = %key.1, error = %e, "cannot reconcile");
            return Ok(None);
        }
    };
    let rses = cx.caches.replicasets.in_namespace(&key.0);
    let owned = claim_replicasets(cx, &d, &selector, &rses).await?;
    // Only a Recreate rollout reads pods (it waits for the old ones to go).
    let recreate = spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) == Some("Recreate");
    let all = if recreate {
        cx.caches.pods.in_namespace(&key.0)
    } else {
        Vec::new()
    };
    let pods: Vec<&Pod> = all
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| selector.matches(p.metadata.labels.as_ref()))
        .collect();
    let planned = match deployment::reconcile(&d, &owned, &pods, now) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(namespace = %key.0, deployment = %key.1, error = %e, "cannot reconcile");
            return Ok(None);
        }
    };
    let mut annotations: BTreeMap<String, String> = BTreeMap::new();
    let mut status_written = false;
    for action in planned.actions {
        match action {
            Action::CreateReplicaSet { rs } => create(cx, &d, key, rs, now).await?,
            Action::UpdateReplicaSet { rs } => {
                let name = rs.metadata.name.clone().unwrap_or_default();
                cx.api.replace_replicaset(&key.0, &name, rs).await?;
            }
            Action::DeleteReplicaSet { name, .. } => {
                match cx.api.delete_replicaset(&key.0, &name).await {
                    Ok(()) | Err(ApiError::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            Action::SetOwnerAnnotation { key: k, value } => {
                annotations.insert(k, value);
            }
            Action::WriteStatus(Status::Deployment(status)) => {
                write_status(cx, &d, key, Some(status), &annotations).await?;
                status_written = true;
            }
            Action::Event(e) => {
                super::events::record(&cx.api, COMPONENT, d.as_ref(), &e).await;
            }
            other => {
                tracing::warn!(namespace = %key.0, deployment = %key.1, action = ?other, "not a deployment controller's action");
            }
        }
    }
    if !status_written && !annotations.is_empty() {
        write_status(cx, &d, key, None, &annotations).await?;
    }
    Ok(planned.requeue_after)
}

/// The ReplicaSets this Deployment controls, after adopting the orphans it selects
/// and releasing those it no longer does (kube-controller-manager's claim).
async fn claim_replicasets(
    cx: &Cx,
    d: &Arc<Deployment>,
    selector: &Selector,
    rses: &[Arc<ReplicaSet>],
) -> Result<Vec<ReplicaSet>, ApiError> {
    let all: Vec<&ReplicaSet> = rses.iter().map(AsRef::as_ref).collect();
    let claimed = claim(&d.metadata, selector, all.iter().copied());
    if !claimed.adopt.is_empty() {
        // An adoption needs the owner as it is now, not as the cache last saw it.
        let live = cx.api.get_deployment(
            d.metadata.namespace.as_deref().unwrap_or_default(),
            d.metadata.name.as_deref().unwrap_or_default(),
        )?;
        if live.metadata.uid != d.metadata.uid || live.metadata.deletion_timestamp.is_some() {
            return Err(ApiError::Internal(
                "the deployment changed; claiming again".into(),
            ));
        }
    }
    for rs in &claimed.adopt {
        let mut adopted = (*rs).clone();
        adopted
            .metadata
            .owner_references
            .get_or_insert_with(Vec::new)
            .push(controller_ref(d.as_ref()));
        set_owners(cx, adopted).await?;
    }
    for rs in &claimed.release {
        let mut released = (*rs).clone();
        let uid = d.metadata.uid.clone().unwrap_or_default();
        if let Some(refs) = released.metadata.owner_references.as_mut() {
            refs.retain(|r| r.uid != uid);
        }
        set_owners(cx, released).await?;
    }
    Ok(claimed.claimed.into_iter().cloned().collect())
}

/// Writes a ReplicaSet's new owner references under the resourceVersion it was read at.
async fn set_owners(cx: &Cx, rs: ReplicaSet) -> Result<(), ApiError> {
    let (ns, name) = super::cache::key_of(&rs.metadata);
    match cx.api.replace_replicaset(&ns, &name, rs).await {
        Ok(_) | Err(ApiError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates the new ReplicaSet; a name taken by another template is a hash collision
/// (the status counts it and the next sync picks another name), any other failure is
/// on the Deployment's Progressing condition and in a Warning event.
async fn create(
    cx: &Cx,
    d: &Arc<Deployment>,
    key: &Key,
    rs: ReplicaSet,
    now: k8s_openapi::jiff::Timestamp,
) -> Result<(), ApiError> {
    let name = rs.metadata.name.clone().unwrap_or_default();
    let failed = match cx.api.create_replicaset(&key.0, rs).await {
        Ok(_) => return Ok(()),
        Err(ApiError::AlreadyExists { .. }) => {
            let existing = cx.api.get_replicaset(&key.0, &name)?;
            match deployment::on_create_conflict(d, &existing) {
                None => return Ok(()),
                Some(action) => vec![action],
            }
        }
        Err(e) => deployment::on_create_error(d, &name, &e.to_string(), now),
    };
    for action in failed {
        match action {
            Action::WriteStatus(Status::Deployment(status)) => {
                write_status(cx, d, key, Some(status), &BTreeMap::new()).await?;
            }
            Action::Event(e) => super::events::record(&cx.api, COMPONENT, d.as_ref(), &e).await,
            _ => {}
        }
    }
    Err(ApiError::Internal(format!(
        "the new replica set {name:?} was not created"
    )))
}

/// `PUT …/status` of the Deployment as cached, with `status` (or its current one) and
/// `annotations` set.
async fn write_status(
    cx: &Cx,
    d: &Deployment,
    key: &Key,
    status: Option<k8s_openapi::api::apps::v1::DeploymentStatus>,
    annotations: &BTreeMap<String, String>,
) -> Result<(), ApiError> {
    let mut new = d.clone();
    if let Some(status) = status {
        new.status = Some(status);
    }
    if !annotations.is_empty() {
        new.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .extend(annotations.clone());
    }
    cx.api
        .replace_deployment_status(&key.0, &key.1, new)
        .await
        .map(|_| ())
}
