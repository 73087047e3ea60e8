//! The disruption controller's sync: one PodDisruptionBudget's reconcile from the
//! caches (its namespace's pods, and the ReplicaSets, Deployments, ReplicationControllers
//! and StatefulSets that scale them), then its status, then its events; and which
//! budgets a pod's change concerns.

use std::time::Duration;

use apiserver::ApiError;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::Cx;
use super::cache::key_of;
use super::queue::Key;
use crate::{Action, Selector, Status, controller_of, disruption};

/// The controller's name on its events.
const COMPONENT: &str = "controllermanager";

/// Syncs the budget `key`; returns when to look again without a change (when an
/// eviction's hold on a pod runs out).
pub(super) async fn sync(cx: &Cx, key: &Key) -> Result<Option<Duration>, ApiError> {
    let Some(pdb) = cx.caches.pdbs.get(key) else {
        return Ok(None);
    };
    let now = super::timestamp(cx.api.now());
    let all = cx.caches.pods.in_namespace(&key.0);
    let pods: Vec<&Pod> = all.iter().map(AsRef::as_ref).collect();
    let scale_of = |r: &OwnerReference| scale_of(cx, &key.0, r);
    let planned = disruption::reconcile(&pdb, &pods, &scale_of, now);
    for action in planned.actions {
        match action {
            Action::WriteStatus(Status::PodDisruptionBudget(status)) => {
                let mut new = (*pdb).clone();
                new.status = Some(status);
                // Under the cached resourceVersion: an eviction that took a disruption
                // meanwhile is a conflict, and the sync runs again on its write.
                cx.api
                    .replace_poddisruptionbudget_status(&key.0, &key.1, new)
                    .await?;
            }
            Action::Event(e) => super::events::record(&cx.api, COMPONENT, pdb.as_ref(), &e).await,
            other => {
                tracing::warn!(pdb = ?key, action = ?other, "not a disruption controller's action");
            }
        }
    }
    Ok(planned.requeue_after)
}

/// What scales the pods that `controller` controls in `ns`, and by how much (KCM's
/// finders): a ReplicaSet's Deployment if it has one, else the ReplicaSet; a
/// ReplicationController; a StatefulSet. The object must still be the one the
/// reference names (same uid).
fn scale_of(cx: &Cx, ns: &str, controller: &OwnerReference) -> Option<(String, i32)> {
    let key = (ns.to_owned(), controller.name.clone());
    let same = |uid: Option<&String>| uid == Some(&controller.uid);
    match controller.kind.as_str() {
        "ReplicaSet" => {
            let rs = cx
                .caches
                .replicasets
                .get(&key)
                .filter(|r| same(r.metadata.uid.as_ref()))?;
            if let Some(d) = controller_of(&rs.metadata).filter(|d| d.kind == "Deployment") {
                let dep = cx
                    .caches
                    .deployments
                    .get(&(ns.to_owned(), d.name.clone()))
                    .filter(|dep| dep.metadata.uid.as_ref() == Some(&d.uid))?;
                let replicas = dep.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                return Some((d.uid.clone(), replicas));
            }
            let replicas = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            Some((controller.uid.clone(), replicas))
        }
        "ReplicationController" => {
            let rc = cx
                .caches
                .replicationcontrollers
                .get(&key)
                .filter(|r| same(r.metadata.uid.as_ref()))?;
            Some((
                controller.uid.clone(),
                rc.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            ))
        }
        "StatefulSet" => {
            let set = cx
                .caches
                .statefulsets
                .get(&key)
                .filter(|s| same(s.metadata.uid.as_ref()))?;
            Some((
                controller.uid.clone(),
                set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
            ))
        }
        _ => None,
    }
}

/// A pod changed (`old` and `new` as the cache saw it): every budget of its namespace
/// that selects it, before or after, looks again.
pub(super) fn pod_changed(cx: &Cx, old: Option<&Pod>, new: Option<&Pod>) {
    let Some(ns) = new.or(old).and_then(|p| p.metadata.namespace.clone()) else {
        return;
    };
    for pdb in cx.caches.pdbs.in_namespace(&ns) {
        let Some(Ok(selector)) = pdb
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .map(Selector::new)
        else {
            continue;
        };
        let selects =
            |p: Option<&Pod>| p.is_some_and(|p| selector.matches(p.metadata.labels.as_ref()));
        if selects(old) || selects(new) {
            cx.pdbs
                .add_within(key_of(&pdb.metadata), super::POD_EVENTS_WINDOW);
        }
    }
}

/// A budget changed: it looks again, and from now on the pods without owners are
/// cached too (a budget may select bare pods).
pub(super) fn pdb_changed(
    cx: &Cx,
    old: Option<&PodDisruptionBudget>,
    new: Option<&PodDisruptionBudget>,
) {
    if new.is_some() {
        cx.pods_wanted
            .send_if_modified(|wanted| !std::mem::replace(wanted, true));
    }
    if let Some(pdb) = new.or(old) {
        cx.pdbs.add(key_of(&pdb.metadata));
    }
}
