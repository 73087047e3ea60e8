//! The StatefulSet controller's reconcile (KCM's `stateful_set_control.go`):
//! `reconcile(set, pods, revisions, now)`.
//!
//! # What one sync does, in order
//! 1. Claims the pods its selector selects whose names are its own (`<set>-<i>`),
//!    adopting orphans and releasing what no longer matches, and adopts the
//!    orphan ControllerRevisions it selects.
//! 2. Finds or makes the update revision ([`revisions`]), counting a name
//!    collision in `status.collisionCount` instead.
//! 3. Unless the set is being deleted: fills the ordinals `[start, start+replicas)`,
//!    lowest first, each missing pod made from the current revision below the
//!    partition and from the update revision at or above it; a Failed or
//!    Succeeded pod is deleted to be made again. Under `OrderedReady` it stops at
//!    the first pod it creates or that is not Running and Ready (and available,
//!    with `minReadySeconds`); under `Parallel` it never waits.
//! 4. Deletes the pods above the range, highest first: under `OrderedReady` one at
//!    a time, and only once every lower pod is healthy.
//! 5. `RollingUpdate`: from the highest ordinal down to the partition, deletes the
//!    first pod not at the update revision (it is made again at the update revision
//!    by a later sync), waiting on any that is not healthy; `OnDelete` only makes
//!    pods the user deleted anew.
//! 6. Writes the status when it changed (counts, revisions, observedGeneration),
//!    and once every pod is updated and ready, the update revision becomes the
//!    current one; then trims the history to `revisionHistoryLimit`, never deleting
//!    a revision in use.
//!
//! Pods have fixed names, so a cache that lags can at worst ask to create a pod
//! that exists (the API refuses it), never a second pod of one ordinal.

pub mod identity;
mod revisions;

use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::history;
use crate::owner::{controller_of, controller_ref};
use crate::pod_state::{becomes_available_at, is_available, is_ready};
use crate::selector::Selector;
use crate::time::requeue_at;
use crate::{Action, Event, ReconcileError, Reconciled, Status};
use identity::{new_pod, ordinal, revision};
use revisions::Plan;

/// The events a sync's pod writes give rise to, as KCM words them
/// (`recordPodEvent`).
pub mod events {
    use crate::Event;

    /// `SuccessfulCreate`: "create Pod web-0 in StatefulSet web successful".
    pub fn created(pod: &str, set: &str) -> Event {
        Event::normal(
            "SuccessfulCreate",
            format!("create Pod {pod} in StatefulSet {set} successful"),
        )
    }

    /// `FailedCreate`: "create Pod web-0 in StatefulSet web failed error: …".
    pub fn create_failed(pod: &str, set: &str, error: &str) -> Event {
        Event::warning(
            "FailedCreate",
            format!("create Pod {pod} in StatefulSet {set} failed error: {error}"),
        )
    }

    /// `SuccessfulDelete`: "delete Pod web-0 in StatefulSet web successful".
    pub fn deleted(pod: &str, set: &str) -> Event {
        Event::normal(
            "SuccessfulDelete",
            format!("delete Pod {pod} in StatefulSet {set} successful"),
        )
    }

    /// `FailedDelete`: "delete Pod web-0 in StatefulSet web failed error: …".
    pub fn delete_failed(pod: &str, set: &str, error: &str) -> Event {
        Event::warning(
            "FailedDelete",
            format!("delete Pod {pod} in StatefulSet {set} failed error: {error}"),
        )
    }
}

/// The phase of a pod (`None` before the API gave it one).
fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}

fn terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

fn running_and_ready(pod: &Pod) -> bool {
    phase(pod) == Some("Running") && is_ready(pod)
}

/// Running, Ready and not terminating (`isHealthy`).
fn healthy(pod: &Pod) -> bool {
    running_and_ready(pod) && !terminating(pod)
}

fn delete(pod: &Pod) -> Action {
    Action::DeletePod {
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
    }
}

/// One sync of `set`. `pods` are the candidates in its namespace (its own and
/// orphans; others' are ignored), `revisions` every ControllerRevision there.
///
/// # Errors
/// A selector or template validation would have refused (a stored object it never
/// saw): nothing is done.
pub fn reconcile(
    set: &StatefulSet,
    pods: &[&Pod],
    revisions: &[ControllerRevision],
    now: Timestamp,
) -> Result<Reconciled, ReconcileError> {
    let spec = set.spec.clone().unwrap_or_default();
    let old_status = set.status.clone().unwrap_or_default();
    let selector = Selector::new(&spec.selector)?;
    let name = set.metadata.name.as_deref().unwrap_or_default();
    let uid = set.metadata.uid.as_deref().unwrap_or_default();
    let deleting = set.metadata.deletion_timestamp.is_some();
    let mut actions = Vec::new();

    // 1. Claim.
    let mut claimed: Vec<&Pod> = Vec::new();
    for &pod in pods {
        let wanted =
            selector.matches(pod.metadata.labels.as_ref()) && identity::is_member(name, pod);
        match controller_of(&pod.metadata) {
            Some(r) if r.uid != uid => {}
            Some(_) if wanted => claimed.push(pod),
            Some(_) => {
                if !deleting {
                    actions.push(Action::ReleasePod {
                        name: pod.metadata.name.clone().unwrap_or_default(),
                        uid: pod.metadata.uid.clone().unwrap_or_default(),
                        owner_uid: uid.to_owned(),
                    });
                }
            }
            None => {
                if wanted && !deleting && !terminating(pod) {
                    actions.push(Action::AdoptPod {
                        name: pod.metadata.name.clone().unwrap_or_default(),
                        uid: pod.metadata.uid.clone().unwrap_or_default(),
                        owner_ref: controller_ref(set),
                    });
                    claimed.push(pod);
                }
            }
        }
    }
    // Its revisions, and the orphans its selector selects, which it adopts
    // (`adoptOrphanRevisions`): a set deleted with its dependents orphaned and made
    // again takes its history back, and its pods keep their revision.
    let mut owned: Vec<ControllerRevision> = Vec::new();
    for r in revisions {
        match controller_of(&r.metadata) {
            Some(c) if c.uid == uid => owned.push(r.clone()),
            None if !deleting && selector.matches(r.metadata.labels.as_ref()) => {
                actions.push(Action::AdoptControllerRevision {
                    name: r.metadata.name.clone().unwrap_or_default(),
                    uid: r.metadata.uid.clone().unwrap_or_default(),
                    owner_ref: controller_ref(set),
                });
                owned.push(r.clone());
            }
            _ => {}
        }
    }

    // 2. Revisions.
    let (current, update, write) = match revisions::plan(set, &owned, revisions) {
        Some(Plan {
            current,
            update,
            write,
        }) => (current, update, write),
        None => {
            let mut status = old_status.clone();
            status.collision_count =
                Some(old_status.collision_count.unwrap_or(0).saturating_add(1));
            actions.push(Action::WriteStatus(Status::StatefulSet(status)));
            return Ok(Reconciled {
                actions,
                requeue_after: None,
            });
        }
    };
    if deleting {
        let status = status_of(set, &claimed, &current, &update, now);
        if status != old_status {
            actions.push(Action::WriteStatus(Status::StatefulSet(status)));
        }
        return Ok(Reconciled {
            actions,
            requeue_after: None,
        });
    }
    actions.extend(write);
    let current_name = current.metadata.name.clone().unwrap_or_default();
    let update_name = update.metadata.name.clone().unwrap_or_default();

    // 3.–5. Pods.
    let mut pod_actions = Vec::new();
    manage_pods(set, &claimed, &current, &update, now, &mut pod_actions)?;
    actions.extend(pod_actions);

    // 6. Status and history.
    let status = status_of(set, &claimed, &current, &update, now);
    if status != old_status {
        actions.push(Action::WriteStatus(Status::StatefulSet(status.clone())));
    }
    let live = |rev: &str| {
        rev == current_name
            || rev == update_name
            || status.current_revision.as_deref() == Some(rev)
            || claimed.iter().any(|p| revision(p) == Some(rev))
    };
    for old in history::to_truncate(&owned, live, spec.revision_history_limit.unwrap_or(10)) {
        actions.push(Action::DeleteControllerRevision {
            name: old.metadata.name.clone().unwrap_or_default(),
            uid: old.metadata.uid.clone().unwrap_or_default(),
        });
    }
    Ok(Reconciled {
        actions,
        requeue_after: availability_requeue(&claimed, spec.min_ready_seconds.unwrap_or(0), now),
    })
}

/// Steps 3 to 5: the creates and deletes of this sync, in order.
fn manage_pods(
    set: &StatefulSet,
    claimed: &[&Pod],
    current: &ControllerRevision,
    update: &ControllerRevision,
    now: Timestamp,
    out: &mut Vec<Action>,
) -> Result<(), ReconcileError> {
    let spec = set.spec.clone().unwrap_or_default();
    let name = set.metadata.name.as_deref().unwrap_or_default();
    let ns = set.metadata.namespace.as_deref().unwrap_or_default();
    let ordered = spec.pod_management_policy.as_deref() != Some("Parallel");
    let start = spec
        .ordinals
        .as_ref()
        .and_then(|o| o.start)
        .unwrap_or(0)
        .max(0);
    let replicas = spec.replicas.unwrap_or(1).max(0);
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let rolling = spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("RollingUpdate")
        == "RollingUpdate";
    let partition = spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.partition)
        .unwrap_or(0);
    let current_name = current.metadata.name.clone().unwrap_or_default();
    let update_name = update.metadata.name.clone().unwrap_or_default();

    let slots = usize::try_from(replicas).unwrap_or(0);
    let mut replicas_at: Vec<Option<&Pod>> = vec![None; slots];
    let mut condemned: Vec<&Pod> = Vec::new();
    for &pod in claimed {
        let Some(o) = ordinal(pod) else { continue };
        match usize::try_from(o - start).ok().filter(|i| *i < slots) {
            Some(i) if o >= start => replicas_at[i] = Some(pod),
            _ => condemned.push(pod),
        }
    }
    condemned.sort_by_key(|p| std::cmp::Reverse(ordinal(p)));

    // A pod made for ordinal `i` (an index from `start`): the current revision's
    // template below the partition while an update is under way, else the update's.
    let make = |i: usize| -> Result<Pod, ReconcileError> {
        let o = start.saturating_add(i32::try_from(i).unwrap_or(i32::MAX));
        let keep_current = rolling
            && current_name != update_name
            && i32::try_from(i).unwrap_or(i32::MAX) < partition;
        let (rev, rev_name) = if keep_current {
            (current, &current_name)
        } else {
            (update, &update_name)
        };
        let template = revisions::template_or(rev, &spec.template);
        Ok(new_pod(set, &template, o, rev_name)?)
    };

    // 3. Fill the ordinals, lowest first.
    for (i, slot) in replicas_at.iter().enumerate() {
        let Some(pod) = *slot else {
            out.push(Action::CreatePod { pod: make(i)? });
            if ordered {
                return Ok(());
            }
            continue;
        };
        match phase(pod) {
            Some(p @ ("Failed" | "Succeeded")) if !terminating(pod) => {
                let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
                out.push(Action::Event(if p == "Failed" {
                    Event::warning(
                        "RecreatingFailedPod",
                        format!("StatefulSet {ns}/{name} is recreating failed Pod {pod_name}"),
                    )
                } else {
                    Event::normal(
                        "RecreatingTerminatedPod",
                        format!("StatefulSet {ns}/{name} is recreating terminated Pod {pod_name}"),
                    )
                }));
                out.push(delete(pod));
                if ordered {
                    return Ok(());
                }
                continue;
            }
            _ => {}
        }
        let blocked =
            terminating(pod) || !running_and_ready(pod) || !is_available(pod, min_ready, now);
        if ordered && blocked {
            return Ok(());
        }
    }

    // 4. Scale down, highest first.
    let first_unhealthy = replicas_at
        .iter()
        .flatten()
        .chain(condemned.iter().rev())
        .find(|p| !healthy(p) || !is_available(p, min_ready, now))
        .and_then(|p| p.metadata.name.clone());
    for pod in &condemned {
        if terminating(pod) {
            if ordered {
                return Ok(());
            }
            continue;
        }
        let unavailable = !running_and_ready(pod) || !is_available(pod, min_ready, now);
        if ordered && unavailable && pod.metadata.name != first_unhealthy {
            return Ok(());
        }
        out.push(delete(pod));
        if ordered {
            return Ok(());
        }
    }

    // 5. Rolling update, highest first down to the partition.
    if !rolling {
        return Ok(());
    }
    let low = usize::try_from(partition).unwrap_or(0);
    for i in (low..slots).rev() {
        let Some(pod) = replicas_at[i] else {
            // Made this sync (Parallel): not yet healthy.
            return Ok(());
        };
        if revision(pod) != Some(update_name.as_str()) && !terminating(pod) {
            out.push(delete(pod));
            return Ok(());
        }
        if !healthy(pod) || !is_available(pod, min_ready, now) {
            return Ok(());
        }
    }
    Ok(())
}

/// The status of `set` with these pods (`updateStatus`, `completeRollingUpdate`).
fn status_of(
    set: &StatefulSet,
    claimed: &[&Pod],
    current: &ControllerRevision,
    update: &ControllerRevision,
    now: Timestamp,
) -> StatefulSetStatus {
    let spec = set.spec.clone().unwrap_or_default();
    let old = set.status.clone().unwrap_or_default();
    let min_ready = spec.min_ready_seconds.unwrap_or(0);
    let current_name = current.metadata.name.clone();
    let update_name = update.metadata.name.clone();
    let (mut replicas, mut ready, mut available, mut currents, mut updated) = (0, 0, 0, 0, 0);
    for pod in claimed {
        let created = phase(pod).is_some();
        if created {
            replicas += 1;
        }
        if running_and_ready(pod) {
            ready += 1;
            if is_available(pod, min_ready, now) {
                available += 1;
            }
        }
        if created && !terminating(pod) {
            let rev = revision(pod).map(str::to_owned);
            if rev.is_some() && rev == current_name {
                currents += 1;
            }
            if rev.is_some() && rev == update_name {
                updated += 1;
            }
        }
    }
    let mut status = StatefulSetStatus {
        observed_generation: set.metadata.generation,
        replicas,
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        current_replicas: Some(currents),
        updated_replicas: Some(updated),
        current_revision: current_name,
        update_revision: update_name,
        collision_count: Some(old.collision_count.unwrap_or(0)),
        conditions: old.conditions,
    };
    let rolling = spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .unwrap_or("RollingUpdate")
        == "RollingUpdate";
    if rolling && updated == replicas && ready == replicas {
        status.current_replicas = Some(updated);
        status.current_revision.clone_from(&status.update_revision);
    }
    status
}

/// When the next pod becomes available (ready for `minReadySeconds`), if one will.
fn availability_requeue(pods: &[&Pod], min_ready: i32, now: Timestamp) -> Option<Duration> {
    pods.iter()
        .filter(|p| running_and_ready(p) && !is_available(p, min_ready, now))
        .filter_map(|p| becomes_available_at(p, min_ready))
        .min()
        .map(|at| requeue_at(now, at))
}

#[cfg(test)]
mod tests;
