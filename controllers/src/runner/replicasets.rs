//! The replicaset controller's sync (and the replication controller's, the same code
//! over ReplicationControllers, as in kube-controller-manager): one owner's reconcile
//! from the cache, with expectations set before its creates and deletes, creates in
//! slow-start batches (1, 2, 4, … each concurrent, stopping at the first error as
//! kube-controller-manager does, so a quota or an admission refusal costs one failed
//! call, not thousands) until the owner's creates have gone through once, then
//! streamed, then its status.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use apiserver::ApiError;
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta};
use k8s_openapi::jiff::Timestamp;

use super::Cx;
use super::cache::{Objects, Watched};
use super::queue::Key;
use crate::replicaset::{self, FailureReason, ManageFailure, ReplicaContext, events};
use crate::{Action, ReconcileError, Reconciled, Status, controller_of};

/// An owner whose pods the runner creates and deletes, and about which it records
/// events.
pub(super) trait Owner:
    k8s_openapi::Resource + k8s_openapi::Metadata<Ty = ObjectMeta> + Sync
{
}

impl<K: k8s_openapi::Resource + k8s_openapi::Metadata<Ty = ObjectMeta> + Sync> Owner for K {}

/// What differs between a ReplicaSet and a ReplicationController for the runner.
pub(super) trait Replicated: Watched + k8s_openapi::Resource {
    /// The controller's name on its events.
    const COMPONENT: &'static str;
    /// What its expectations keys start with, so that a ReplicaSet and a
    /// ReplicationController of one name keep apart.
    const EXPECTATIONS_PREFIX: &'static str;

    fn objects(cx: &Cx) -> &Objects<Self>;
    /// The owner as stored now, read live (not from the cache).
    fn live(cx: &Cx, key: &Key) -> Result<Self, ApiError>
    where
        Self: Sized;
    fn replicas(&self) -> i32;
    fn reconcile(
        &self,
        pods: &[&Pod],
        ctx: &ReplicaContext<'_>,
        now: Timestamp,
    ) -> Result<Reconciled, ReconcileError>;
    fn status_after_failure(
        &self,
        pods: &[&Pod],
        failure: &ManageFailure,
        now: Timestamp,
    ) -> Option<Action>;
    /// `self` with `status`, if the status is of this kind.
    fn with_status(&self, status: Status) -> Option<Self>
    where
        Self: Sized;
    /// `PUT …/status` of `self`, with its resourceVersion as the precondition.
    async fn put_status(self, cx: &Cx) -> Result<(), ApiError>;
    /// The pods of the owner's family, for the scale-down rank.
    fn related<'a>(&self, _cx: &Cx, _pods: &'a [Arc<Pod>]) -> Vec<&'a Pod> {
        Vec::new()
    }
}

impl Replicated for ReplicaSet {
    const COMPONENT: &'static str = "replicaset-controller";
    const EXPECTATIONS_PREFIX: &'static str = "";

    fn objects(cx: &Cx) -> &Objects<Self> {
        &cx.caches.replicasets
    }
    fn live(cx: &Cx, key: &Key) -> Result<Self, ApiError> {
        cx.api.get_replicaset(&key.0, &key.1)
    }
    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }
    fn reconcile(
        &self,
        pods: &[&Pod],
        ctx: &ReplicaContext<'_>,
        now: Timestamp,
    ) -> Result<Reconciled, ReconcileError> {
        replicaset::reconcile(self, pods, ctx, now)
    }
    fn status_after_failure(
        &self,
        pods: &[&Pod],
        failure: &ManageFailure,
        now: Timestamp,
    ) -> Option<Action> {
        replicaset::status_after_failure(self, pods, failure, now)
            .ok()
            .flatten()
    }
    fn with_status(&self, status: Status) -> Option<Self> {
        let Status::ReplicaSet(status) = status else {
            return None;
        };
        let mut new = self.clone();
        new.status = Some(status);
        Some(new)
    }
    async fn put_status(self, cx: &Cx) -> Result<(), ApiError> {
        let (ns, name) = super::cache::key_of(&self.metadata);
        cx.api.replace_replicaset_status(&ns, &name, self).await?;
        Ok(())
    }
    fn related<'a>(&self, cx: &Cx, pods: &'a [Arc<Pod>]) -> Vec<&'a Pod> {
        related_pods(cx, self, pods)
    }
}

impl Replicated for ReplicationController {
    const COMPONENT: &'static str = "replication-controller";
    const EXPECTATIONS_PREFIX: &'static str = "rc:";

    fn objects(cx: &Cx) -> &Objects<Self> {
        &cx.caches.replicationcontrollers
    }
    fn live(cx: &Cx, key: &Key) -> Result<Self, ApiError> {
        cx.api.get_replicationcontroller(&key.0, &key.1)
    }
    fn replicas(&self) -> i32 {
        self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
    }
    fn reconcile(
        &self,
        pods: &[&Pod],
        ctx: &ReplicaContext<'_>,
        now: Timestamp,
    ) -> Result<Reconciled, ReconcileError> {
        Ok(replicaset::reconcile_replication_controller(
            self, pods, ctx, now,
        ))
    }
    fn status_after_failure(
        &self,
        pods: &[&Pod],
        failure: &ManageFailure,
        now: Timestamp,
    ) -> Option<Action> {
        replicaset::rc_status_after_failure(self, pods, failure, now)
    }
    fn with_status(&self, status: Status) -> Option<Self> {
        let Status::ReplicationController(status) = status else {
            return None;
        };
        let mut new = self.clone();
        new.status = Some(status);
        Some(new)
    }
    async fn put_status(self, cx: &Cx) -> Result<(), ApiError> {
        let (ns, name) = super::cache::key_of(&self.metadata);
        cx.api
            .replace_replicationcontroller_status(&ns, &name, self)
            .await?;
        Ok(())
    }
}

/// Writes `status` onto the owner `rs` (cached, `key`) through `/status`. When the
/// cache lags this controller's own last write, once more on the stored object, as
/// KCM's `updateReplicaSetStatus` (`statusUpdateRetries` = 1).
async fn write_status<K: Replicated>(
    cx: &Cx,
    key: &Key,
    rs: &K,
    status: Status,
) -> Result<(), ApiError> {
    let Some(new) = rs.with_status(status.clone()) else {
        return Ok(());
    };
    match new.put_status(cx).await {
        Err(ApiError::Conflict { .. }) => {
            let live = K::live(cx, key)?;
            if live.metadata().uid != rs.metadata().uid {
                return Ok(());
            }
            match live.with_status(status) {
                Some(live) => live.put_status(cx).await,
                None => Ok(()),
            }
        }
        r => r,
    }
}

/// How many create or delete calls are in flight at once.
const IN_FLIGHT: usize = 1024;

/// The largest slow-start batch: past it, creates stream.
const SLOW_START_MAX: usize = 64;

/// Syncs the owner `key` of kind `K`; returns when to look again without a change.
pub(super) async fn sync<K: Replicated>(cx: &Cx, key: &Key) -> Result<Option<Duration>, ApiError> {
    // For the debug log only: how long a sync of this many pods took.
    let started = std::time::Instant::now();
    let now = super::timestamp(cx.api.now());
    let owner = owner_key::<K>(key);
    let Some(rs) = K::objects(cx).get(key) else {
        cx.expectations().forget(&owner);
        cx.proven_creators().remove(&owner);
        return Ok(None);
    };
    // Its own pods and the orphans it may adopt, by reference: a sync of a
    // 10,000-replica set copies no pod.
    let uid = rs.metadata().uid.as_deref().unwrap_or_default();
    let mine = cx.caches.pods.controlled_or_orphans(&key.0, uid);
    let pods: Vec<&Pod> = mine.iter().map(AsRef::as_ref).collect();
    // Only a scale-down ranks by the family's pods per node, and only a sync whose
    // expectations are met scales (the others, most of a rollout's, only count).
    let replicas = usize::try_from(rs.replicas()).unwrap_or(0);
    let satisfied = cx.expectations().satisfied(&owner, now);
    let ranking = satisfied && pods.len() > replicas;
    let all = match ranking {
        true => cx.caches.pods.in_namespace(&key.0),
        false => Vec::new(),
    };
    let related = match ranking {
        true => rs.related(cx, &all),
        false => Vec::new(),
    };
    let ctx = ReplicaContext {
        related_pods: &related,
        expectations_satisfied: satisfied,
    };
    let planned = match rs.reconcile(&pods, &ctx, now) {
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
    let deleting = deletions.len();
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
                create_pods(cx, K::COMPONENT, rs.as_ref(), &owner, batch).await
            }
            Action::DeletePod { name, uid } => {
                let mut batch = vec![(name, uid)];
                while let Some(Action::DeletePod { .. }) = actions.peek() {
                    if let Some(Action::DeletePod { name, uid }) = actions.next() {
                        batch.push((name, uid));
                    }
                }
                delete_pods(cx, K::COMPONENT, rs.as_ref(), &owner, batch).await
            }
            a @ (Action::AdoptPod { .. } | Action::ReleasePod { .. }) => {
                if matches!(a, Action::AdoptPod { .. }) && !owner_checked {
                    can_adopt(cx, rs.as_ref(), key)?;
                    owner_checked = true;
                }
                super::patch_pod(cx, &key.0, &a).await?;
                None
            }
            Action::WriteStatus(status) => {
                write_status(cx, key, rs.as_ref(), status).await?;
                None
            }
            Action::Event(e) => {
                super::events::record(&cx.api, K::COMPONENT, rs.as_ref(), &e).await;
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
            if let Some(Action::WriteStatus(status)) = rs.status_after_failure(&pods, &failure, now)
            {
                let _ = write_status(cx, key, rs.as_ref(), status).await;
            }
            return Err(ApiError::Internal(failure.message));
        }
    }
    tracing::debug!(
        replicaset = %owner,
        pods = pods.len(),
        satisfied,
        creations,
        deletions = deleting,
        ms = started.elapsed().as_secs_f64() * 1000.0,
        "synced"
    );
    Ok(planned.requeue_after)
}

/// Creates `pods`: first in slow-start batches (1, 2, 4, … up to [`SLOW_START_MAX`],
/// each awaited whole, as kube-controller-manager's), so a template that the API
/// refuses costs one call; once a full batch has gone through, the rest streams with
/// [`IN_FLIGHT`] calls in flight and no barrier between batches. An owner whose last
/// creates all went through streams from the start (kube-controller-manager slow-starts
/// every sync; seven round trips per burst bought nothing once the template was known to
/// be accepted). The first error stops what is left (those creations are no longer
/// expected). Events about `rs` (the owner, whose expectations key is `owner`) are
/// recorded as `component`.
pub(super) async fn create_pods<K: Owner>(
    cx: &Cx,
    component: &str,
    rs: &K,
    owner: &str,
    pods: Vec<Pod>,
) -> Option<ManageFailure> {
    let ns = rs.metadata().namespace.clone().unwrap_or_default();
    let total = pods.len();
    let mut left = pods.into_iter();
    // A spec change (a new template) is tried slowly again.
    let uid = format!(
        "{}/{}",
        rs.metadata().uid.as_deref().unwrap_or_default(),
        rs.metadata().generation.unwrap_or_default()
    );
    let proven = cx.proven_creators().get(owner) == Some(&uid);
    let mut size = if proven { SLOW_START_MAX + 1 } else { 1 };
    let mut started = 0usize;
    let mut failure = None;
    while failure.is_none() && size <= SLOW_START_MAX {
        let batch: Vec<Pod> = left.by_ref().take(size).collect();
        if batch.is_empty() {
            break;
        }
        started += batch.len();
        let mut results = futures::stream::iter(batch)
            .map(|pod| cx.api.create_pod(&ns, pod))
            .buffer_unordered(IN_FLIGHT);
        while let Some(r) = results.next().await {
            created(cx, component, rs, owner, r, &mut failure).await;
        }
        size = size.saturating_mul(2);
    }
    if failure.is_none() {
        // A shared flag, not the stream's end: calls already in flight still finish
        // (and are counted), no new one starts after the first error.
        let stop = std::sync::atomic::AtomicBool::new(false);
        let stop = &stop;
        let mut results = futures::stream::iter(left.by_ref())
            .take_while(|_| std::future::ready(!stop.load(std::sync::atomic::Ordering::Relaxed)))
            .map(|pod| cx.api.create_pod(&ns, pod))
            .buffer_unordered(IN_FLIGHT);
        while let Some(r) = results.next().await {
            started += 1;
            created(cx, component, rs, owner, r, &mut failure).await;
            if failure.is_some() {
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
    if failure.is_some() {
        cx.expectations().lower_creations(owner, total - started);
        cx.proven_creators().remove(owner);
    } else {
        cx.proven_creators().insert(owner.to_owned(), uid);
    }
    failure
}

/// Takes one create's answer: its event, or on an error the creation is no longer
/// expected and the first failure is kept.
async fn created<K: Owner>(
    cx: &Cx,
    component: &str,
    rs: &K,
    owner: &str,
    result: Result<Pod, ApiError>,
    failure: &mut Option<ManageFailure>,
) {
    match result {
        Ok(pod) => {
            let name = pod.metadata.name.unwrap_or_default();
            super::events::record(&cx.api, component, rs, &events::created(&name)).await;
        }
        Err(e) => {
            cx.expectations().creation_observed(owner);
            let message = e.to_string();
            super::events::record(&cx.api, component, rs, &events::create_failed(&message)).await;
            failure.get_or_insert(ManageFailure {
                reason: FailureReason::FailedCreate,
                message,
            });
        }
    }
}

/// Deletes the pods (named, with their uids as preconditions); one already gone is
/// not a failure.
pub(super) async fn delete_pods<K: Owner>(
    cx: &Cx,
    component: &str,
    rs: &K,
    owner: &str,
    pods: Vec<(String, String)>,
) -> Option<ManageFailure> {
    let ns = rs.metadata().namespace.clone().unwrap_or_default();
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
                super::events::record(&cx.api, component, rs, &events::deleted(&name)).await;
            }
            Err(ApiError::NotFound { .. }) => {
                cx.expectations()
                    .deletion_observed(owner, &format!("{ns}/{name}"));
            }
            Err(e) => {
                cx.expectations()
                    .deletion_observed(owner, &format!("{ns}/{name}"));
                let message = e.to_string();
                super::events::record(&cx.api, component, rs, &events::delete_failed(&message))
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

/// The expectations key of an owner of kind `K`: `namespace/name` after its prefix.
pub(super) fn owner_key<K: Replicated>(key: &Key) -> String {
    format!("{}{}/{}", K::EXPECTATIONS_PREFIX, key.0, key.1)
}

/// kube-controller-manager's `canAdopt`: an adoption needs the owner as it is now, not
/// as the cache last saw it; one being deleted (an Orphan delete releasing its pods,
/// say) adopts nothing.
fn can_adopt<K: Replicated>(cx: &Cx, rs: &K, key: &Key) -> Result<(), ApiError> {
    let live = K::live(cx, key)?;
    let live = live.metadata();
    if live.uid != rs.metadata().uid {
        return Err(ApiError::Internal(format!(
            "original {} {}/{} is gone: got uid {}, wanted {}",
            K::KIND,
            key.0,
            key.1,
            live.uid.as_deref().unwrap_or_default(),
            rs.metadata().uid.clone().unwrap_or_default()
        )));
    }
    if let Some(t) = &live.deletion_timestamp {
        return Err(ApiError::Internal(format!(
            "{}/{} has just been deleted at {}",
            key.0, key.1, t.0
        )));
    }
    Ok(())
}
