//! The ReplicaSet controller (and the ReplicationController, same code with
//! a plain-map selector): keep `spec.replicas` active pods.
//!
//! One sync, as KCM's `syncReplicaSet`:
//! 1. active pods (not finished, not terminating) are claimed: own ones
//!    kept, matching orphans adopted, non-matching own ones released;
//! 2. if the runner's expectations are satisfied and the owner is not being
//!    deleted: diff = claimed − replicas; create |diff| pods from the
//!    template, or delete diff pods in [`rank`] order;
//! 3. the status is recomputed from the claimed pods and written if it
//!    changed; a ready pod not yet available requeues the owner for when it
//!    will be.
//!
//! A sync creates or deletes at most [`BURST_REPLICAS`] pods, as KCM's
//! does (with a larger burst). The runner batches creates (slow start 1, 2, 4… until an
//! owner's creates have gone through once), sets
//! expectations before the calls, emits the
//! per-pod events with [`events`] once the API answered (only then is the
//! pod's name known), and on a failed create/delete writes the status
//! from [`status_after_failure`].

pub mod rank;
mod status;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec, ReplicationController};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;

use crate::action::{Action, Reconciled, Status};
use crate::error::ReconcileError;
use crate::owner::{claim, controller_ref};
use crate::pod_state::{becomes_available_at, is_active, is_available};
use crate::selector::{Selector, SelectorError};
use crate::template::{TemplateError, pod_from_template};
use crate::time::requeue_at;

pub use status::{FailureReason, ManageFailure, REPLICA_FAILURE};

/// Most pods one sync creates or deletes (KCM's `BurstReplicas`, which is
/// 500 there): a ReplicaSet of a million replicas does not become a million
/// actions at once, and the next sync, once the watch has shown this one's
/// pods, does the next batch. Larger than KCM's because the calls are
/// in-process with no client rate limit: each batch ends in a wait for the
/// watch, and 500 made a 10,000-replica create twenty such waits.
pub const BURST_REPLICAS: usize = 5000;

/// What the runner knows beyond the owner and its pods.
#[derive(Clone, Copy, Debug)]
pub struct ReplicaContext<'a> {
    /// Pods of every ReplicaSet with the same controller as this one (its
    /// own included), for the "more pods of the family on this node"
    /// scale-down criterion; empty for an owner without a controller.
    pub related_pods: &'a [&'a Pod],
    /// The owner's expectations are satisfied: replica management may run.
    /// When false only the status is recomputed.
    pub expectations_satisfied: bool,
}

impl Default for ReplicaContext<'_> {
    fn default() -> Self {
        ReplicaContext {
            related_pods: &[],
            expectations_satisfied: true,
        }
    }
}

/// The parts of a ReplicaSet or ReplicationController the core needs.
struct View<'a> {
    meta: &'a ObjectMeta,
    owner_ref: OwnerReference,
    replicas: i32,
    selector: Selector,
    template: Option<&'a PodTemplateSpec>,
    min_ready_seconds: i32,
}

impl<'a> View<'a> {
    fn of_replicaset(rs: &'a ReplicaSet) -> Result<Self, ReconcileError> {
        let spec = rs.spec.as_ref();
        Ok(View {
            meta: &rs.metadata,
            owner_ref: controller_ref(rs),
            replicas: spec.and_then(|s| s.replicas).unwrap_or(1).max(0),
            selector: match spec {
                Some(s) => Selector::new(&s.selector)?,
                // No spec at all: select nothing rather than everything.
                None => return Err(ReconcileError::Selector(SelectorError::Missing)),
            },
            template: spec.and_then(|s| s.template.as_ref()),
            min_ready_seconds: spec.and_then(|s| s.min_ready_seconds).unwrap_or(0),
        })
    }

    fn of_rc(rc: &'a ReplicationController) -> Self {
        let spec = rc.spec.as_ref();
        let template = spec.and_then(|s| s.template.as_ref());
        // An RC without a selector is defaulted to its template's labels.
        let selector = spec
            .and_then(|s| s.selector.as_ref())
            .filter(|s| !s.is_empty())
            .or_else(|| template.and_then(|t| t.metadata.as_ref()?.labels.as_ref()))
            .map(Selector::from_map)
            .unwrap_or_default();
        View {
            meta: &rc.metadata,
            owner_ref: controller_ref(rc),
            replicas: spec.and_then(|s| s.replicas).unwrap_or(1).max(0),
            selector,
            template,
            min_ready_seconds: spec.and_then(|s| s.min_ready_seconds).unwrap_or(0),
        }
    }

    fn template_labels(&self) -> Option<&'a BTreeMap<String, String>> {
        self.template?.metadata.as_ref()?.labels.as_ref()
    }
}

/// The core's result, before the kind-specific status.
struct Managed<'p> {
    actions: Vec<Action>,
    claimed: Vec<&'p Pod>,
    failure: Option<ManageFailure>,
    requeue_after: Option<std::time::Duration>,
}

fn manage<'p>(
    v: &View<'_>,
    pods: &[&'p Pod],
    ctx: &ReplicaContext<'_>,
    now: Timestamp,
) -> Managed<'p> {
    let claim = claim(
        v.meta,
        &v.selector,
        pods.iter().copied().filter(|p| is_active(p)),
    );
    let mut actions = Vec::new();
    for p in &claim.adopt {
        actions.push(Action::AdoptPod {
            name: p.metadata.name.clone().unwrap_or_default(),
            uid: p.metadata.uid.clone().unwrap_or_default(),
            owner_ref: v.owner_ref.clone(),
        });
    }
    for p in &claim.release {
        actions.push(Action::ReleasePod {
            name: p.metadata.name.clone().unwrap_or_default(),
            uid: p.metadata.uid.clone().unwrap_or_default(),
            owner_uid: v.owner_ref.uid.clone(),
        });
    }
    let mut failure = None;
    let deleting = v.meta.deletion_timestamp.is_some();
    if ctx.expectations_satisfied && !deleting {
        let have = claim.claimed.len();
        let want = usize::try_from(v.replicas).unwrap_or(0);
        if have < want {
            match v
                .template
                .ok_or(TemplateError::NoLabels)
                .and_then(|t| pod_from_template(t, v.meta, v.owner_ref.clone()))
            {
                Ok(pod) => {
                    let count = (want - have).min(BURST_REPLICAS);
                    actions.extend((0..count).map(|_| Action::CreatePod { pod: pod.clone() }))
                }
                Err(e) => {
                    failure = Some(ManageFailure {
                        reason: FailureReason::FailedCreate,
                        message: e.to_string(),
                    })
                }
            }
        } else if have > want {
            let count = (have - want).min(BURST_REPLICAS);
            for p in rank::pods_to_delete(&claim.claimed, ctx.related_pods, count, now) {
                actions.push(Action::DeletePod {
                    name: p.metadata.name.clone().unwrap_or_default(),
                    uid: p.metadata.uid.clone().unwrap_or_default(),
                });
            }
        }
    }
    // A ready pod that is not yet available will be, without any watch
    // event: look again then.
    let requeue_after = claim
        .claimed
        .iter()
        .filter(|p| !is_available(p, v.min_ready_seconds, now))
        .filter_map(|p| becomes_available_at(p, v.min_ready_seconds))
        .min()
        .map(|at| requeue_at(now, at));
    Managed {
        actions,
        claimed: claim.claimed,
        failure,
        requeue_after,
    }
}

/// Reconcile a ReplicaSet.
///
/// `pods`: the pods of the ReplicaSet's namespace that it selects or
/// controls (more is fine: others are ignored).
///
/// # Errors
/// [`ReconcileError::Selector`] when the selector cannot be evaluated (KCM
/// then does nothing for this ReplicaSet).
pub fn reconcile(
    rs: &ReplicaSet,
    pods: &[&Pod],
    ctx: &ReplicaContext<'_>,
    now: Timestamp,
) -> Result<Reconciled, ReconcileError> {
    let v = View::of_replicaset(rs)?;
    let m = manage(&v, pods, ctx, now);
    let mut r = Reconciled {
        actions: m.actions,
        requeue_after: m.requeue_after,
    };
    r.actions
        .extend(rs_status_write(rs, &v, &m.claimed, m.failure.as_ref(), now));
    Ok(r)
}

/// The status write after the runner's create or delete failed (KCM writes
/// the `ReplicaFailure` condition in the same sync). Same inputs as the
/// [`reconcile`] that planned the failed call.
///
/// # Errors
/// As [`reconcile`].
pub fn status_after_failure(
    rs: &ReplicaSet,
    pods: &[&Pod],
    failure: &ManageFailure,
    now: Timestamp,
) -> Result<Option<Action>, ReconcileError> {
    let v = View::of_replicaset(rs)?;
    let ctx = ReplicaContext {
        related_pods: &[],
        expectations_satisfied: false,
    };
    let m = manage(&v, pods, &ctx, now);
    Ok(rs_status_write(rs, &v, &m.claimed, Some(failure), now))
}

fn rs_status_write(
    rs: &ReplicaSet,
    v: &View<'_>,
    claimed: &[&Pod],
    failure: Option<&ManageFailure>,
    now: Timestamp,
) -> Option<Action> {
    let current = rs.status.clone().unwrap_or_default();
    let counts = status::count(claimed, v.template_labels(), v.min_ready_seconds, now);
    let generation = rs.metadata.generation.unwrap_or(0);
    let new = status::replicaset_status(&current, counts, generation, failure, now);
    (status::normalized_rs(&new) != status::normalized_rs(&current))
        .then_some(Action::WriteStatus(Status::ReplicaSet(new)))
}

/// Reconcile a ReplicationController: the ReplicaSet rules, with its
/// plain-map selector (defaulted to the template's labels) and status type.
pub fn reconcile_replication_controller(
    rc: &ReplicationController,
    pods: &[&Pod],
    ctx: &ReplicaContext<'_>,
    now: Timestamp,
) -> Reconciled {
    let v = View::of_rc(rc);
    let m = manage(&v, pods, ctx, now);
    let mut r = Reconciled {
        actions: m.actions,
        requeue_after: m.requeue_after,
    };
    r.actions
        .extend(rc_status_write(rc, &v, &m.claimed, m.failure.as_ref(), now));
    r
}

/// [`status_after_failure`] for a ReplicationController.
pub fn rc_status_after_failure(
    rc: &ReplicationController,
    pods: &[&Pod],
    failure: &ManageFailure,
    now: Timestamp,
) -> Option<Action> {
    let v = View::of_rc(rc);
    let ctx = ReplicaContext {
        related_pods: &[],
        expectations_satisfied: false,
    };
    let m = manage(&v, pods, &ctx, now);
    rc_status_write(rc, &v, &m.claimed, Some(failure), now)
}

fn rc_status_write(
    rc: &ReplicationController,
    v: &View<'_>,
    claimed: &[&Pod],
    failure: Option<&ManageFailure>,
    now: Timestamp,
) -> Option<Action> {
    let current = rc.status.clone().unwrap_or_default();
    let counts = status::count(claimed, v.template_labels(), v.min_ready_seconds, now);
    let generation = rc.metadata.generation.unwrap_or(0);
    let new = status::rc_status(&current, counts, generation, failure, now);
    (status::normalized_rc(&new) != status::normalized_rc(&current))
        .then_some(Action::WriteStatus(Status::ReplicationController(new)))
}

/// The per-pod events, emitted by the runner once the API has answered
/// (component `replicaset-controller`, or `replication-controller`).
pub mod events {
    use crate::action::Event;

    /// `SuccessfulCreate` "Created pod: NAME".
    pub fn created(pod_name: &str) -> Event {
        Event::normal("SuccessfulCreate", format!("Created pod: {pod_name}"))
    }

    /// Warning `FailedCreate` "Error creating: ERR".
    pub fn create_failed(error: &str) -> Event {
        Event::warning("FailedCreate", format!("Error creating: {error}"))
    }

    /// `SuccessfulDelete` "Deleted pod: NAME".
    pub fn deleted(pod_name: &str) -> Event {
        Event::normal("SuccessfulDelete", format!("Deleted pod: {pod_name}"))
    }

    /// Warning `FailedDelete` "Error deleting: ERR".
    pub fn delete_failed(error: &str) -> Event {
        Event::warning("FailedDelete", format!("Error deleting: {error}"))
    }
}

#[cfg(test)]
mod tests;
