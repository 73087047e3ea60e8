//! The Deployment controller: one ReplicaSet per pod template, rolled from
//! old to new by RollingUpdate or Recreate.
//!
//! One sync, as KCM's `syncDeployment`:
//! 1. a Deployment selecting everything gets a Warning `SelectingAll` and
//!    nothing else;
//! 2. one being deleted only gets its status;
//! 3. pausing or resuming sets Progressing Unknown;
//! 4. paused, or `spec.replicas` changed (a ReplicaSet's
//!    `desired-replicas` differs): scale only, proportionally across active
//!    ReplicaSets (`scale.rs`);
//! 5. otherwise roll out: `rolling.rs` or `recreate.rs`.
//!
//! # Inputs
//! The ReplicaSets the Deployment owns (already claimed by the runner with
//! [`crate::claim`], as KCM's `getReplicaSetsForDeployment` does), and the
//! pods its selector matches (only Recreate reads them; availability comes
//! from the ReplicaSets' statuses, which the ReplicaSet controller keeps).
//!
//! # The runner
//! Performs the actions in order. A `CreateReplicaSet` answered
//! `AlreadyExists` goes to [`on_create_conflict`], any other error to
//! [`on_create_error`]. A Recreate Deployment should be requeued when one
//! of its pods is deleted (KCM's `deletePod` handler), since that is what
//! it waits for.
//!
//! Not done: `deprecated.deployment.rollback.to` (the extensions/v1beta1
//! rollback; kubectl rolls back by patching the template) and the
//! alpha `terminatingReplicas` count.

mod cleanup;
mod conditions;
pub(crate) mod hash;
mod newrs;
mod params;
mod plan;
mod progress;
mod recreate;
mod revision;
mod rolling;
mod scale;
mod status;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::action::{Event, Reconciled};
use crate::error::ReconcileError;
use crate::selector::Selector;

pub use hash::{POD_TEMPLATE_HASH_LABEL, pod_template_hash, templates_equal_ignoring_hash};
pub use newrs::{on_create_conflict, on_create_error};
pub use params::resolve_fenceposts;
pub use revision::{
    DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, REVISION_ANNOTATION,
    REVISION_HISTORY_ANNOTATION,
};

use params::{Params, Strategy};
use plan::Plan;

/// Reconcile a Deployment.
///
/// `replica_sets`: the ReplicaSets it controls. `pods`: the pods its
/// selector matches (for Recreate).
///
/// # Errors
/// The selector cannot be evaluated, the strategy type is unknown, or a
/// RollingUpdate fencepost is not a usable int or percentage.
pub fn reconcile(
    d: &Deployment,
    replica_sets: &[ReplicaSet],
    pods: &[&Pod],
    now: Timestamp,
) -> Result<Reconciled, ReconcileError> {
    let selector = match d.spec.as_ref() {
        Some(spec) => Selector::new(&spec.selector)?,
        None => Selector::default(),
    };
    if selector.is_everything() {
        return Ok(selecting_all(d));
    }
    let p = Params::of(d)?;
    let mut plan = Plan::new(d, p, replica_sets, now);
    if d.metadata.deletion_timestamp.is_some() {
        let new = newrs::get(&mut plan, false);
        let all = plan.rses.clone();
        let status = status::calculate(&plan, &all, new.map(|i| &all[i]));
        return Ok(plan.finish(status, None));
    }
    progress::check_paused_conditions(&mut plan);
    if plan.p.paused || scale::is_scaling_event(&mut plan) {
        return Ok(scale::sync(plan));
    }
    Ok(match plan.p.strategy {
        Strategy::RollingUpdate => rolling::rollout(plan),
        Strategy::Recreate => recreate::rollout(plan, &selector, pods),
    })
}

/// An empty selector would take every pod of the namespace: refuse, and
/// only record that this generation was seen.
fn selecting_all(d: &Deployment) -> Reconciled {
    let mut actions = vec![crate::action::Action::Event(Event::warning(
        "SelectingAll",
        "This deployment is selecting all pods. A non-empty selector is required.".into(),
    ))];
    let mut status = d.status.clone().unwrap_or_default();
    let generation = d.metadata.generation.unwrap_or(0);
    if status.observed_generation.unwrap_or(0) < generation {
        status.observed_generation = Some(generation);
        actions.push(crate::action::Action::WriteStatus(
            crate::action::Status::Deployment(status::normalized(&status)),
        ));
    }
    Reconciled {
        actions,
        requeue_after: None,
    }
}
