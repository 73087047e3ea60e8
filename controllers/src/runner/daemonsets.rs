//! The daemon controller's sync: one DaemonSet's reconcile from the caches (every
//! Node, the namespace's pods), with expectations set before its creates and
//! deletes, the pods created in slow-start batches and deleted as the replicaset
//! controller does (the same events, `daemonset-controller` as their source), a
//! per-node backoff for killing failed pods, then its status.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use apiserver::ApiError;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;

use super::Cx;
use super::queue::Key;
use super::replicasets::{create_pods, delete_pods};
use crate::daemonset::{self, DaemonContext};
use crate::{Action, Status, controller_of};

/// The controller's name on its events.
const COMPONENT: &str = "daemonset-controller";

/// What its expectations keys start with (beside the ReplicaSets' and the
/// ReplicationControllers').
pub(super) const EXPECTATIONS_PREFIX: &str = "ds:";

/// The first wait before a node's failed pod is killed again, and the longest (KCM's
/// `failedPodsBackoff`: 1 s doubling to 15 min).
const BACKOFF_INITIAL: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(15 * 60);

/// Per DaemonSet and node: when its failed pod was last killed, and the wait before
/// the next kill.
#[derive(Default)]
pub(super) struct FailedPodBackoff(Mutex<HashMap<Key, NodeBackoffs>>);

/// Per node: when its failed pod was last killed, and the wait before the next kill.
type NodeBackoffs = BTreeMap<String, (Timestamp, Duration)>;

impl FailedPodBackoff {
    fn lock(&self) -> MutexGuard<'_, HashMap<Key, NodeBackoffs>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Per node, the time before which its failed pod is not killed.
    fn until(&self, key: &Key) -> BTreeMap<String, Timestamp> {
        self.lock()
            .get(key)
            .into_iter()
            .flatten()
            .map(|(node, (at, wait))| (node.clone(), *at + *wait))
            .collect()
    }

    /// A failed pod on `node` was killed `now`: the next wait doubles (or starts
    /// again once the last one is long past).
    fn killed(&self, key: &Key, node: &str, now: Timestamp) {
        let mut all = self.lock();
        let nodes = all.entry(key.clone()).or_default();
        let wait = match nodes.get(node) {
            Some((at, wait))
                if now.duration_since(*at) < (2 * BACKOFF_MAX).try_into().unwrap_or_default() =>
            {
                (*wait * 2).min(BACKOFF_MAX)
            }
            _ => BACKOFF_INITIAL,
        };
        nodes.insert(node.to_owned(), (now, wait));
    }

    pub(super) fn forget(&self, key: &Key) {
        self.lock().remove(key);
    }
}

/// Syncs the DaemonSet `key`; returns when to look again without a change.
pub(super) async fn sync(cx: &Cx, key: &Key) -> Result<Option<Duration>, ApiError> {
    let now = super::timestamp(cx.api.now());
    let owner = format!("{EXPECTATIONS_PREFIX}{}/{}", key.0, key.1);
    let Some(ds) = cx.caches.daemonsets.get(key) else {
        cx.expectations().forget(&owner);
        cx.proven_creators().remove(&owner);
        cx.failed_pod_backoff.forget(key);
        return Ok(None);
    };
    let nodes = cx.caches.nodes.in_namespace("");
    let nodes: Vec<&Node> = nodes.iter().map(AsRef::as_ref).collect();
    let all = cx.caches.pods.in_namespace(&key.0);
    let uid = ds.metadata.uid.as_deref().unwrap_or_default();
    let pods: Vec<&Pod> = all
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| controller_of(&p.metadata).is_none_or(|r| r.uid == uid))
        .collect();
    let backoff = cx.failed_pod_backoff.until(key);
    let revisions: Vec<ControllerRevision> = cx
        .caches
        .revisions
        .in_namespace(&key.0)
        .iter()
        .filter(|r| controller_of(&r.metadata).is_some_and(|c| c.uid == uid))
        .map(|r| (**r).clone())
        .collect();
    let ctx = DaemonContext {
        expectations_satisfied: cx.expectations().satisfied(&owner, now),
        failed_pod_backoff: &backoff,
        revisions: &revisions,
    };
    let planned = match daemonset::reconcile(&ds, &nodes, &pods, &ctx, now) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(daemonset = %owner, error = %e, "cannot reconcile");
            return Ok(None);
        }
    };
    for node in &planned.failed_pods_killed_on {
        cx.failed_pod_backoff.killed(key, node, now);
    }
    let planned = planned.reconciled;
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
    while let Some(action) = actions.next() {
        let failure = match action {
            Action::CreatePod { pod } => {
                let mut batch = vec![pod];
                while let Some(Action::CreatePod { .. }) = actions.peek() {
                    if let Some(Action::CreatePod { pod }) = actions.next() {
                        batch.push(pod);
                    }
                }
                create_pods(cx, COMPONENT, ds.as_ref(), &owner, batch).await
            }
            Action::DeletePod { name, uid } => {
                let mut batch = vec![(name, uid)];
                while let Some(Action::DeletePod { .. }) = actions.peek() {
                    if let Some(Action::DeletePod { name, uid }) = actions.next() {
                        batch.push((name, uid));
                    }
                }
                delete_pods(cx, COMPONENT, ds.as_ref(), &owner, batch).await
            }
            a @ (Action::AdoptPod { .. } | Action::ReleasePod { .. }) => {
                super::patch_pod(cx, &key.0, &a).await?;
                None
            }
            Action::CreateControllerRevision { revision } => {
                match cx.api.create_controller_revision(&key.0, revision).await {
                    // Another sync made it, or the name is taken: the next sync reads
                    // what is there from the cache.
                    Ok(_) | Err(ApiError::AlreadyExists { .. }) => None,
                    Err(e) => return Err(e),
                }
            }
            Action::UpdateControllerRevision { revision } => {
                let name = revision.metadata.name.clone().unwrap_or_default();
                cx.api
                    .replace_controller_revision(&key.0, &name, revision)
                    .await?;
                None
            }
            Action::DeleteControllerRevision { name, .. } => {
                match cx.api.delete_controller_revision(&key.0, &name).await {
                    Ok(()) | Err(ApiError::NotFound { .. }) => None,
                    Err(e) => return Err(e),
                }
            }
            Action::WriteStatus(Status::DaemonSet(status)) => {
                let mut new = (*ds).clone();
                new.status = Some(status);
                cx.api.replace_daemonset_status(&key.0, &key.1, new).await?;
                None
            }
            Action::Event(e) => {
                super::events::record(&cx.api, COMPONENT, ds.as_ref(), &e).await;
                None
            }
            other => {
                tracing::warn!(daemonset = %owner, action = ?other, "not a daemon controller's action");
                None
            }
        };
        if let Some(failure) = failure {
            // KCM's daemon controller has no failure condition: the events say why,
            // and the sync is retried with backoff.
            return Err(ApiError::Internal(failure.message));
        }
    }
    Ok(planned.requeue_after)
}

/// Whether a node change can change where a DaemonSet runs: it came, went, or its
/// labels or taints changed.
pub(super) fn node_matters(old: Option<&Node>, new: Option<&Node>) -> bool {
    match (old, new) {
        (Some(o), Some(n)) => {
            o.metadata.labels != n.metadata.labels
                || o.spec.as_ref().and_then(|s| s.taints.as_ref())
                    != n.spec.as_ref().and_then(|s| s.taints.as_ref())
        }
        _ => true,
    }
}

/// The DaemonSets of the namespace that select an orphan pod.
pub(super) fn selecting(cx: &Cx, ns: &str, pod: &Pod) -> Vec<Key> {
    cx.caches
        .daemonsets
        .in_namespace(ns)
        .iter()
        .filter(|d| super::changes::selects(d.spec.as_ref().map(|s| &s.selector), pod))
        .map(|d| super::cache::key_of(&d.metadata))
        .collect()
}
