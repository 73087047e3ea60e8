//! What a reconcile asks the runner to do: data, not side effects.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSetStatus, DeploymentStatus, ReplicaSet, ReplicaSetStatus,
    StatefulSetStatus,
};
use k8s_openapi::api::batch::v1::{CronJobStatus, Job, JobStatus};
use k8s_openapi::api::core::v1::{Pod, ReplicationControllerStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::{Value, json};

/// One API call (or event) for the runner, about the reconciled owner or
/// what it owns.
///
/// # Ordering
/// Actions are listed in the order kube-controller-manager issues them:
/// adoptions and releases, then creates/updates/deletes of children, then
/// the owner's annotation and status (a Job's finalizer removals come
/// after its status, which must record the pods first: see
/// [`crate::job`]), then events. The runner performs them in order
/// and **stops at the first failure** (dropping the rest, events included,
/// since an event reports a write that succeeded), then requeues with
/// backoff; the next reconcile starts again from what the API then holds.
/// Creates of pods are the exception KCM makes: they may go in slow-start
/// batches, and a `NotFound` answer to an adopt, release or delete is not
/// a failure.
// A Job is the largest payload (its template); actions are built once per
// sync and moved, never stored in bulk, so boxing would only add noise to
// every match.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// POST the pod (it carries `generateName`, so the server names it).
    /// The runner emits `SuccessfulCreate` / `FailedCreate` once the API
    /// answers (see [`crate::replicaset::events`]).
    CreatePod {
        /// The pod, built from the owner's template.
        pod: Pod,
    },
    /// DELETE the pod (the uid is for a precondition).
    DeletePod {
        /// Pod name.
        name: String,
        /// Pod uid.
        uid: String,
    },
    /// Strategic merge patch of the orphan pod that makes the owner its
    /// controller ([`Action::patch`] gives the body; a Job's also adds its
    /// tracking finalizer, as KCM's `ClaimPods` does for Jobs).
    AdoptPod {
        /// Pod name.
        name: String,
        /// Pod uid.
        uid: String,
        /// The controller reference to add.
        owner_ref: OwnerReference,
    },
    /// Strategic merge patch removing the owner's reference from a pod it
    /// controls but no longer selects ([`Action::patch`] gives the body).
    ReleasePod {
        /// Pod name.
        name: String,
        /// Pod uid.
        uid: String,
        /// The owner whose reference goes.
        owner_uid: String,
    },
    /// Remove the Job's tracking finalizer (`batch.kubernetes.io/job-tracking`)
    /// from the pod, under its uid (KCM sends a strategic merge patch; the
    /// runner edits the pod's metadata alone, to the same effect). A pod gone
    /// is as good: not a failure. See [`crate::job`] for why the order around
    /// it matters.
    RemovePodFinalizer {
        /// Pod name.
        name: String,
        /// Pod uid.
        uid: String,
    },
    /// POST the ReplicaSet (fixed name: an `AlreadyExists` answer goes to
    /// [`crate::deployment::on_create_conflict`]; any other error to
    /// [`crate::deployment::on_create_error`]).
    CreateReplicaSet {
        /// The new ReplicaSet.
        rs: ReplicaSet,
    },
    /// PUT the ReplicaSet: the full desired object (replicas and
    /// annotations), with the resourceVersion it was read at.
    UpdateReplicaSet {
        /// The ReplicaSet as it should be.
        rs: ReplicaSet,
    },
    /// DELETE the ReplicaSet (default propagation, Background for apps/v1).
    DeleteReplicaSet {
        /// ReplicaSet name.
        name: String,
        /// ReplicaSet uid, for a precondition.
        uid: String,
    },
    /// POST the ControllerRevision (fixed name: an `AlreadyExists` answer means the
    /// cache had not seen it yet, or a collision the next sync counts).
    CreateControllerRevision {
        /// The new revision.
        revision: ControllerRevision,
    },
    /// PUT the ControllerRevision with a new `revision` number (a template seen
    /// before, rolled back to), under the resourceVersion it was read at.
    UpdateControllerRevision {
        /// The revision as it should be.
        revision: ControllerRevision,
    },
    /// Make the owner the controller of an orphan ControllerRevision it selects
    /// (written under the revision's uid, so a revision made anew under the name is
    /// not taken).
    AdoptControllerRevision {
        /// Revision name.
        name: String,
        /// Revision uid.
        uid: String,
        /// The controller reference to add.
        owner_ref: OwnerReference,
    },
    /// DELETE the ControllerRevision (history beyond `revisionHistoryLimit`).
    DeleteControllerRevision {
        /// Revision name.
        name: String,
        /// Revision uid, for a precondition.
        uid: String,
    },
    /// POST the Job (a CronJob's run). Its name is fixed, derived from the
    /// scheduled time (`<cronjob>-<unix minutes>`), so the create is a
    /// create-if-absent and `AlreadyExists` is the dedup guard of the tick.
    ///
    /// The runner hands the API's answer to [`crate::cronjob::after_create`]
    /// before it goes on with the rest of the list: on 201 that puts the new
    /// Job's uid into the `status.active` reference the status write carries;
    /// on `AlreadyExists` the runner GETs the Job under that name, and
    /// `after_create` adopts it into `status.active` (with `lastScheduleTime`)
    /// if the CronJob controls it, as KCM does, and otherwise drops the
    /// reference and the `SuccessfulCreate` event (someone else's Job holds the
    /// name; KCM leaves the status alone then). Any other error: Warning
    /// `FailedCreate` "Error creating job: ERR", then requeue with backoff.
    CreateJob {
        /// The Job, built from the CronJob's `jobTemplate`.
        job: Job,
    },
    /// DELETE the Job with this propagation policy and a uid precondition,
    /// so a Job made anew under the name is not taken. `NotFound` is not a
    /// failure (it is gone already); another error is, and the runner emits
    /// Warning `FailedDelete` "Deleted job: ERR" (KCM's text) for it.
    DeleteJob {
        /// Job name.
        name: String,
        /// Job uid, for the precondition (empty: a `status.active` reference
        /// written without one; delete by name only).
        uid: String,
        /// Background (a CronJob's history and Replace, as KCM's cronjob
        /// controller) or Foreground (the TTL-after-finished controller).
        propagation: Propagation,
    },
    /// Set an annotation on the reconciled owner (the Deployment's
    /// `deployment.kubernetes.io/revision`). KCM writes it in the same
    /// `PUT …/status` as the status: the status strategy keeps the body's
    /// annotations and bumps no generation, while the main endpoint would
    /// bump it (Deployment annotations count as spec) and so stall
    /// `kubectl rollout status`.
    SetOwnerAnnotation {
        /// Annotation key.
        key: String,
        /// Annotation value.
        value: String,
    },
    /// `PUT …/status` with this status. Listed only when it differs from the
    /// owner's current status.
    WriteStatus(Status),
    /// Record an event whose involved object is the reconciled owner.
    Event(Event),
}

impl Action {
    /// The strategic-merge-patch body for [`Action::AdoptPod`] and
    /// [`Action::ReleasePod`], as KCM
    /// sends it (the pod's uid makes the patch fail if the name now belongs
    /// to another pod); `None` for the other actions.
    ///
    /// A pod adopted by a `batch/v1` Job also gets the Job's tracking
    /// finalizer in the same patch (KCM's `NewPodControllerRefManager` is
    /// given `batch.kubernetes.io/job-tracking` for Jobs only), so the Job
    /// counts it once it finishes.
    pub fn patch(&self) -> Option<Value> {
        match self {
            Action::AdoptPod { uid, owner_ref, .. } => {
                let mut body = adopt_patch(owner_ref, uid);
                if owner_ref.api_version == "batch/v1"
                    && owner_ref.kind == "Job"
                    && let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut)
                {
                    meta.insert(
                        "finalizers".into(),
                        json!([crate::job::JOB_TRACKING_FINALIZER]),
                    );
                }
                Some(body)
            }
            Action::ReleasePod { uid, owner_uid, .. } => Some(release_patch(owner_uid, uid)),
            _ => None,
        }
    }
}

/// `{"metadata":{"ownerReferences":[<ref>],"uid":CHILD}}`: adopt an orphan
/// (pods, and ReplicaSets adopted by a Deployment).
pub fn adopt_patch(owner_ref: &OwnerReference, child_uid: &str) -> Value {
    json!({
        "metadata": {
            "ownerReferences": [{
                "apiVersion": owner_ref.api_version,
                "kind": owner_ref.kind,
                "name": owner_ref.name,
                "uid": owner_ref.uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
            "uid": child_uid,
        }
    })
}

/// `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":OWNER}],"uid":CHILD}}`:
/// release a child the owner no longer selects.
pub fn release_patch(owner_uid: &str, child_uid: &str) -> Value {
    json!({
        "metadata": {
            "ownerReferences": [{"$patch": "delete", "uid": owner_uid}],
            "uid": child_uid,
        }
    })
}

/// `DeleteOptions.propagationPolicy` of a [`Action::DeleteJob`]. (A Job
/// deleted with none is orphaning its pods, which no controller wants.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    /// The Job goes at once; the garbage collector deletes its pods after.
    Background,
    /// The Job stays, with the `foregroundDeletion` finalizer, until the
    /// garbage collector has deleted its pods.
    Foreground,
}

impl Propagation {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
        }
    }
}

/// The new status of the reconciled owner, of the owner's own kind (one
/// writer per status: a controller writes only its own kind's status).
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    /// A ReplicaSet's status.
    ReplicaSet(ReplicaSetStatus),
    /// A ReplicationController's status.
    ReplicationController(ReplicationControllerStatus),
    /// A Deployment's status.
    Deployment(DeploymentStatus),
    /// A DaemonSet's status.
    DaemonSet(DaemonSetStatus),
    /// A StatefulSet's status.
    StatefulSet(StatefulSetStatus),
    /// A Job's status.
    Job(JobStatus),
    /// A CronJob's status.
    CronJob(CronJobStatus),
    /// A PodDisruptionBudget's status.
    PodDisruptionBudget(k8s_openapi::api::policy::v1::PodDisruptionBudgetStatus),
    /// A ResourceQuota's status.
    ResourceQuota(k8s_openapi::api::core::v1::ResourceQuotaStatus),
}

/// `Normal` or `Warning`, the core/v1 Event `type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Routine.
    Normal,
    /// Something went wrong.
    Warning,
}

impl EventType {
    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// An event about the reconciled owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Normal or Warning.
    pub type_: EventType,
    /// CamelCase reason, e.g. `ScalingReplicaSet`.
    pub reason: String,
    /// Human-readable message, exactly as KCM words it.
    pub message: String,
}

impl Event {
    /// A `Normal` event.
    pub fn normal(reason: &str, message: String) -> Self {
        Event {
            type_: EventType::Normal,
            reason: reason.to_owned(),
            message,
        }
    }

    /// A `Warning` event.
    pub fn warning(reason: &str, message: String) -> Self {
        Event {
            type_: EventType::Warning,
            reason: reason.to_owned(),
            message,
        }
    }
}

/// What one reconcile returns: the actions in order, and when to look
/// again if no watch event comes first.
#[must_use = "a reconcile's actions do nothing until the runner performs them"]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reconciled {
    /// The calls to make, in order (see [`Action`]).
    pub actions: Vec<Action>,
    /// Requeue after this long: the earliest time something changes without
    /// a watch event (a pod passing minReadySeconds, a progress deadline).
    /// `None`: wait for a change.
    pub requeue_after: Option<Duration>,
}

impl Reconciled {
    /// How many pods this sync creates (the runner sets its creation
    /// expectations to this before the first POST, and may cap it, as KCM
    /// caps a sync at 500).
    pub fn pod_creations(&self) -> usize {
        self.actions
            .iter()
            .filter(|a| matches!(a, Action::CreatePod { .. }))
            .count()
    }

    /// The names of the pods this sync deletes, in deletion-rank order (the
    /// runner records them as expected deletions, keyed `ns/name`).
    pub fn pod_deletions(&self) -> impl Iterator<Item = &str> {
        self.actions.iter().filter_map(|a| match a {
            Action::DeletePod { name, .. } => Some(name.as_str()),
            _ => None,
        })
    }

    /// The uids of the pods whose tracking finalizer this sync removes, in
    /// order (the Job runner records them as expected removals before the
    /// patches: see [`crate::job::FinalizerExpectations`]).
    pub fn finalizer_removals(&self) -> impl Iterator<Item = &str> {
        self.actions.iter().filter_map(|a| match a {
            Action::RemovePodFinalizer { uid, .. } => Some(uid.as_str()),
            _ => None,
        })
    }

    /// The status write, if any.
    pub fn status(&self) -> Option<&Status> {
        self.actions.iter().find_map(|a| match a {
            Action::WriteStatus(s) => Some(s),
            _ => None,
        })
    }

    /// The events, in order.
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.actions.iter().filter_map(|a| match a {
            Action::Event(e) => Some(e),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner_ref() -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web-abc".into(),
            uid: "rs-uid".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    #[test]
    fn adopt_patch_is_kcms_strategic_merge_body() {
        let a = Action::AdoptPod {
            name: "p".into(),
            uid: "pod-uid".into(),
            owner_ref: owner_ref(),
        };
        assert_eq!(
            a.patch(),
            Some(
                json!({"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet",
                "name":"web-abc","uid":"rs-uid","controller":true,"blockOwnerDeletion":true}],
                "uid":"pod-uid"}})
            )
        );
    }

    #[test]
    fn release_patch_deletes_the_owner_reference_by_uid() {
        let a = Action::ReleasePod {
            name: "p".into(),
            uid: "pod-uid".into(),
            owner_uid: "rs-uid".into(),
        };
        assert_eq!(
            a.patch(),
            Some(
                json!({"metadata":{"ownerReferences":[{"$patch":"delete","uid":"rs-uid"}],"uid":"pod-uid"}})
            )
        );
        assert_eq!(
            Action::DeletePod {
                name: "p".into(),
                uid: "u".into()
            }
            .patch(),
            None
        );
    }

    #[test]
    fn a_finalizer_removal_is_listed_by_its_pods_uid() {
        let a = Action::RemovePodFinalizer {
            name: "p".into(),
            uid: "pod-uid".into(),
        };
        let r = Reconciled {
            actions: vec![a],
            requeue_after: None,
        };
        assert_eq!(r.finalizer_removals().collect::<Vec<_>>(), ["pod-uid"]);
    }

    #[test]
    fn a_job_adopting_a_pod_adds_its_tracking_finalizer() {
        let mut job_ref = owner_ref();
        job_ref.api_version = "batch/v1".into();
        job_ref.kind = "Job".into();
        let a = Action::AdoptPod {
            name: "p".into(),
            uid: "pod-uid".into(),
            owner_ref: job_ref,
        };
        let body = a.patch().unwrap_or_default();
        assert_eq!(
            body["metadata"]["finalizers"],
            json!(["batch.kubernetes.io/job-tracking"])
        );
        assert_eq!(body["metadata"]["uid"], json!("pod-uid"));
    }
}
