//! The job controller's sync: one Job's reconcile ([`crate::job`]) from the cache, its
//! writes in order (stopping at the first failure; the sync is retried with backoff
//! and starts again from what the API then holds), and the memory the reconcile asks
//! the runner to keep: pod expectations, expected finalizer removals and the re-create
//! backoff record. Also the orphan worker: a pod that still holds the tracking
//! finalizer after its Job is gone or finished loses it.
//!
//! # Invariants
//! - The Job's status is written under the resourceVersion the reconcile read, never
//!   onto a newer Job: its `uncountedTerminatedPods` must not drop what another write
//!   added. A conflict is a retry.
//! - A finalizer removal is expected before it is written, and the expectation is
//!   lowered by the pod watch (or at once for a write that failed, or a pod gone), so
//!   a pod is counted once whatever order the watches deliver in.

use std::collections::HashMap;
use std::time::Duration;

use apiserver::resource::Resource;
use apiserver::{ApiError, MetadataEdit};
use futures::StreamExt as _;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;

use super::Cx;
use super::queue::Key;
use crate::job::{self, BackoffRecord, FinalizerExpectations, JobContext};
use crate::{Action, Status, controller_of};

/// The controller's name on its events.
const COMPONENT: &str = "job-controller";

/// What the expectations keys of Jobs start with (pods of a ReplicaSet and a Job of
/// one name keep apart).
pub(super) const EXPECTATIONS_PREFIX: &str = "job/";

/// Finalizer patches of one sync in flight at once.
const IN_FLIGHT: usize = 256;

/// What the job controller remembers between syncs.
#[derive(Default)]
pub(super) struct Memory {
    finalizers: FinalizerExpectations,
    backoff: HashMap<String, BackoffRecord>,
}

/// The expectations key of a Job: `job/namespace/name`.
pub(super) fn job_key(ns: &str, name: &str) -> String {
    format!("{EXPECTATIONS_PREFIX}{ns}/{name}")
}

/// Syncs the Job `key`; returns when to look again without a change.
pub(super) async fn sync(cx: &Cx, key: &Key) -> Result<Option<Duration>, ApiError> {
    let now = super::timestamp(cx.api.now());
    let owner = job_key(&key.0, &key.1);
    let Some(cached) = cx.caches.jobs.get(key) else {
        cx.jobs_written.forget(key);
        cx.expectations().forget(&owner);
        let mut memory = cx.job_memory();
        memory.finalizers.forget(&owner);
        memory.backoff.remove(&owner);
        return Ok(None);
    };
    let job = cx.jobs_written.newest(key, cached);
    let uid = job.metadata.uid.as_deref().unwrap_or_default();
    let mine = cx.caches.pods.controlled_or_orphans(&key.0, uid);
    let pods: Vec<&Pod> = mine.iter().map(AsRef::as_ref).collect();
    let satisfied = cx.expectations().satisfied(&owner, now);
    let (pending, backoff) = {
        let mut memory = cx.job_memory();
        let backoff = *memory
            .backoff
            .entry(owner.clone())
            .or_insert_with(|| BackoffRecord::rebuild(&job, &pods));
        (memory.finalizers.pending(&owner).clone(), backoff)
    };
    let ctx = JobContext {
        expectations_satisfied: satisfied,
        finalizer_removals_pending: &pending,
        backoff: &backoff,
    };
    let synced = match job::reconcile(&job, &pods, &ctx, now) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(namespace = %key.0, job = %key.1, error = %e, "cannot reconcile");
            return Ok(None);
        }
    };
    let planned = synced.reconciled;
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
    let has_status = planned.status().is_some();
    if !has_status {
        cx.job_memory()
            .backoff
            .insert(owner.clone(), synced.backoff);
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
                let failure =
                    super::replicasets::create_pods(cx, COMPONENT, job.as_ref(), &owner, batch)
                        .await;
                if let Some(f) = failure {
                    return Err(ApiError::Internal(f.message));
                }
            }
            Action::DeletePod { name, uid } => {
                let mut batch = vec![(name, uid)];
                while let Some(Action::DeletePod { .. }) = actions.peek() {
                    if let Some(Action::DeletePod { name, uid }) = actions.next() {
                        batch.push((name, uid));
                    }
                }
                let failure =
                    super::replicasets::delete_pods(cx, COMPONENT, job.as_ref(), &owner, batch)
                        .await;
                if let Some(f) = failure {
                    return Err(ApiError::Internal(f.message));
                }
            }
            a @ Action::RemovePodFinalizer { .. } => {
                let mut batch = vec![a];
                while let Some(Action::RemovePodFinalizer { .. }) = actions.peek() {
                    if let Some(a) = actions.next() {
                        batch.push(a);
                    }
                }
                remove_finalizers(cx, &key.0, &owner, batch).await?;
            }
            a @ (Action::AdoptPod { .. } | Action::ReleasePod { .. }) => {
                if matches!(a, Action::AdoptPod { .. }) {
                    can_adopt(cx, &job, key)?;
                }
                super::patch_pod(cx, &key.0, &a).await?;
            }
            Action::WriteStatus(Status::Job(status)) => {
                // Under the resourceVersion the reconcile read (the cached Job's).
                let mut new = (*job).clone();
                new.status = Some(status);
                let written = cx.api.replace_job_status(&key.0, &key.1, new).await?;
                cx.jobs_written.store(key.clone(), written);
                cx.job_memory()
                    .backoff
                    .insert(owner.clone(), synced.backoff);
            }
            Action::Event(e) => {
                super::events::record(&cx.api, COMPONENT, job.as_ref(), &e).await;
            }
            other => {
                tracing::warn!(namespace = %key.0, job = %key.1, action = ?other, "not a job controller's action");
            }
        }
    }
    Ok(planned.requeue_after)
}

/// Removes the tracking finalizer from the pods of `batch` (all
/// [`Action::RemovePodFinalizer`]), expected first; a pod already gone is no failure.
async fn remove_finalizers(
    cx: &Cx,
    ns: &str,
    owner: &str,
    batch: Vec<Action>,
) -> Result<(), ApiError> {
    let uids: Vec<String> = batch
        .iter()
        .filter_map(|a| match a {
            Action::RemovePodFinalizer { uid, .. } => Some(uid.clone()),
            _ => None,
        })
        .collect();
    cx.job_memory()
        .finalizers
        .expect_removals(owner, uids.iter().map(String::as_str));
    let results: Vec<(String, Result<(), ApiError>)> = futures::stream::iter(batch)
        .map(|a| async move {
            let uid = match &a {
                Action::RemovePodFinalizer { uid, .. } => uid.clone(),
                _ => String::new(),
            };
            (uid, remove_one_finalizer(cx, ns, owner, &a).await)
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let mut failure = None;
    for (uid, r) in results {
        if let Err(e) = r {
            // No change will come for it: no longer expected.
            cx.job_memory().finalizers.removal_observed(owner, &uid);
            failure.get_or_insert(e);
        }
    }
    failure.map_or(Ok(()), Err)
}

/// One finalizer removal, as KCM's strategic merge patch under the pod's uid does it
/// but through [`apiserver::Api::edit_metadata`] (the pod's metadata alone is read and
/// written). A pod gone, or its name another pod's now, is as good as one without the
/// finalizer; as no change of it will come, its removal is no longer expected.
async fn remove_one_finalizer(
    cx: &Cx,
    ns: &str,
    owner: &str,
    action: &Action,
) -> Result<(), ApiError> {
    let Action::RemovePodFinalizer { name, uid } = action else {
        return Ok(());
    };
    let edit = cx
        .api
        .edit_metadata(Resource::Pods, ns, name, uid, |m| {
            if let Some(f) = m.finalizers.as_mut() {
                f.retain(|x| x != job::JOB_TRACKING_FINALIZER);
            }
        })
        .await?;
    if edit == MetadataEdit::Gone && !owner.is_empty() {
        cx.job_memory().finalizers.removal_observed(owner, uid);
    }
    Ok(())
}

/// kube-controller-manager's `canAdopt`: the Job as stored now, not as cached, must
/// still be this one and not being deleted.
fn can_adopt(cx: &Cx, job: &Job, key: &Key) -> Result<(), ApiError> {
    let live = cx.api.get_job(&key.0, &key.1)?;
    if live.metadata.uid != job.metadata.uid || live.metadata.deletion_timestamp.is_some() {
        return Err(ApiError::Internal(format!(
            "job {}/{} changed or is being deleted; claiming again",
            key.0, key.1
        )));
    }
    Ok(())
}

/// The orphan worker's sync (KCM's `orphanQueue`): the pod `key` loses the tracking
/// finalizer if its Job is gone or finished.
pub(super) async fn sync_orphan(cx: &Cx, key: &Key) -> Result<Option<Duration>, ApiError> {
    let Some(pod) = cx.caches.pods.get(key) else {
        return Ok(None);
    };
    let controller = controller_of(&pod.metadata).and_then(|r| {
        cx.caches
            .jobs
            .get(&(key.0.clone(), r.name.clone()))
            .filter(|j| j.metadata.uid.as_deref() == Some(r.uid.as_str()))
    });
    match job::orphan_finalizer_removal(&pod, controller.as_deref()) {
        Some(a) => remove_one_finalizer(cx, &key.0, "", &a)
            .await
            .map(|()| None),
        None => Ok(None),
    }
}

/// What a pod's change means to the job controller: its Job is queued (or, for a
/// pod whose Job is gone or finished and that still holds the tracking finalizer,
/// the orphan worker), and the Job's expectations are lowered.
pub(super) fn pod_changed(cx: &Cx, old: Option<&Pod>, new: Option<&Pod>) {
    for pod in [old, new].into_iter().flatten() {
        let (ns, name) = super::cache::key_of(&pod.metadata);
        match controller_of(&pod.metadata) {
            Some(r) if r.kind == "Job" => {
                let job = cx
                    .caches
                    .jobs
                    .get(&(ns.clone(), r.name.clone()))
                    .filter(|j| j.metadata.uid.as_deref() == Some(r.uid.as_str()));
                match job {
                    Some(j) if !job::is_finished(&j) => {
                        cx.jobs
                            .add_within((ns.clone(), r.name.clone()), super::POD_EVENTS_WINDOW);
                    }
                    _ if has_tracking_finalizer(pod) => cx.job_orphans.add((ns, name)),
                    _ => {}
                }
            }
            None if has_tracking_finalizer(pod) => cx.job_orphans.add((ns, name)),
            _ => {}
        }
    }
    // The creation and deletion expectations are lowered with the other owners'
    // (`changes::pod_changed`); a finalizer removal is seen here.
    if let Some(old) = old
        && new.is_none_or(|n| !has_tracking_finalizer(n))
        && let Some(r) = controller_of(&old.metadata).filter(|r| r.kind == "Job")
    {
        let owner = job_key(old.metadata.namespace.as_deref().unwrap_or(""), &r.name);
        let uid = old.metadata.uid.as_deref().unwrap_or_default();
        cx.job_memory().finalizers.removal_observed(&owner, uid);
    }
}

fn has_tracking_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == job::JOB_TRACKING_FINALIZER)
}

impl Cx {
    pub(super) fn job_memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.job_memory
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
