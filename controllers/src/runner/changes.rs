//! What each watched change means to the controllers: which keys it queues, and
//! which expectations it lowers. Called from the caches' reflectors, so nothing here
//! blocks or calls the API.

use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod, ReplicationController};

use k8s_openapi::Metadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::cache::{Change, key_of};
use super::queue::Queue;
use super::{Cx, POD_EVENTS_WINDOW, cronjobs, daemonsets, jobs, replicasets};
use crate::{Selector, controller_of};

/// A pod changed: its ReplicaSet (or, an orphan, the ReplicaSets that select it) is
/// queued, and its expectations lowered.
pub(super) fn pod_changed(cx: &Cx, c: &Change<Pod>) {
    jobs::pod_changed(cx, c.old.as_deref(), c.new.as_deref());
    super::disruption::pod_changed(cx, c.old.as_deref(), c.new.as_deref());
    for pod in [c.old.as_deref(), c.new.as_deref()].into_iter().flatten() {
        let meta = &pod.metadata;
        let (ns, _) = key_of(meta);
        match controller_of(meta) {
            Some(r) if r.kind == "ReplicaSet" => {
                cx.replicasets
                    .add_within((ns.clone(), r.name.clone()), POD_EVENTS_WINDOW);
            }
            Some(r) if r.kind == "ReplicationController" => {
                cx.replicationcontrollers.add((ns.clone(), r.name.clone()));
            }
            Some(r) if r.kind == "DaemonSet" => {
                cx.daemonsets.add((ns.clone(), r.name.clone()));
            }
            Some(r) if r.kind == "StatefulSet" => {
                cx.statefulsets.add((ns.clone(), r.name.clone()));
            }
            Some(_) => {}
            None => {
                for rs in cx.caches.replicasets.in_namespace(&ns) {
                    if selects(rs.spec.as_ref().map(|s| &s.selector), pod) {
                        cx.replicasets
                            .add_within(key_of(&rs.metadata), POD_EVENTS_WINDOW);
                    }
                }
                for rc in cx.caches.replicationcontrollers.in_namespace(&ns) {
                    if rc_selects(&rc, pod) {
                        cx.replicationcontrollers.add(key_of(&rc.metadata));
                    }
                }
                for ds in daemonsets::selecting(cx, &ns, pod) {
                    cx.daemonsets.add(ds);
                }
                for set in cx.caches.statefulsets.in_namespace(&ns) {
                    if selects(set.spec.as_ref().map(|s| &s.selector), pod) {
                        cx.statefulsets.add(key_of(&set.metadata));
                    }
                }
            }
        }
    }
    // A pod going: its ReplicaSet's Deployment (a Recreate rollout waits for it).
    let going = c.new.is_none()
        || c.new
            .as_ref()
            .is_some_and(|n| n.metadata.deletion_timestamp.is_some());
    if going
        && let Some(pod) = c.old.as_deref().or(c.new.as_deref())
        && let Some(r) = controller_of(&pod.metadata).filter(|r| r.kind == "ReplicaSet")
    {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        if let Some(rs) = cx.caches.replicasets.get(&(ns.clone(), r.name.clone()))
            && let Some(d) = controller_of(&rs.metadata).filter(|d| d.kind == "Deployment")
        {
            cx.deployments.add((ns, d.name.clone()));
        }
    }
    // Expectations: a pod of a ReplicaSet, ReplicationController, DaemonSet or Job seen created,
    // or seen going.
    let owner = |p: &Pod| {
        let r = controller_of(&p.metadata)?;
        let prefix = match r.kind.as_str() {
            "ReplicaSet" => <ReplicaSet as replicasets::Replicated>::EXPECTATIONS_PREFIX,
            "ReplicationController" => {
                <ReplicationController as replicasets::Replicated>::EXPECTATIONS_PREFIX
            }
            "DaemonSet" => daemonsets::EXPECTATIONS_PREFIX,
            "Job" => jobs::EXPECTATIONS_PREFIX,
            _ => return None,
        };
        Some(format!(
            "{prefix}{}/{}",
            p.metadata.namespace.as_deref().unwrap_or(""),
            r.name
        ))
    };
    match (&c.old, &c.new) {
        (None, Some(new)) => {
            if let Some(o) = owner(new) {
                cx.expectations().creation_observed(&o);
            }
        }
        (Some(old), new) => {
            let gone = new.is_none()
                || (old.metadata.deletion_timestamp.is_none()
                    && new
                        .as_ref()
                        .is_some_and(|n| n.metadata.deletion_timestamp.is_some()));
            if gone && let Some(o) = owner(old) {
                let (ns, name) = key_of(&old.metadata);
                cx.expectations()
                    .deletion_observed(&o, &format!("{ns}/{name}"));
            }
        }
        (None, None) => {}
    }
}

/// A ReplicaSet changed: it is queued, and its Deployment (or, an orphan, the
/// Deployments that select it).
pub(super) fn replicaset_changed(cx: &Cx, c: &Change<ReplicaSet>) {
    pod_owner_changed(cx, c, &cx.replicasets);
    for rs in [c.old.as_deref(), c.new.as_deref()].into_iter().flatten() {
        let ns = rs.metadata.namespace.clone().unwrap_or_default();
        match controller_of(&rs.metadata) {
            Some(r) if r.kind == "Deployment" => cx.deployments.add((ns, r.name.clone())),
            Some(_) => {}
            None => {
                for d in cx.caches.deployments.in_namespace(&ns) {
                    let selected = d
                        .spec
                        .as_ref()
                        .and_then(|s| Selector::new(&s.selector).ok())
                        .is_some_and(|s| s.matches(rs.metadata.labels.as_ref()));
                    if selected {
                        cx.deployments.add(key_of(&d.metadata));
                    }
                }
            }
        }
    }
}

/// A ReplicationController changed: it is queued.
pub(super) fn rc_changed(cx: &Cx, c: &Change<ReplicationController>) {
    pod_owner_changed(cx, c, &cx.replicationcontrollers);
}

/// A DaemonSet changed: it is queued.
pub(super) fn daemonset_changed(cx: &Cx, c: &Change<DaemonSet>) {
    pod_owner_changed(cx, c, &cx.daemonsets);
}

/// A node came, went, or changed its labels or taints: every DaemonSet looks again.
pub(super) fn node_changed(cx: &Cx, c: &Change<Node>) {
    if !daemonsets::node_matters(c.old.as_deref(), c.new.as_deref()) {
        return;
    }
    for ns_sets in cx.caches.daemonsets.all() {
        cx.daemonsets.add(key_of(&ns_sets.metadata));
    }
}

/// Whether a ReplicationController's selector (a plain map, its template's labels
/// when empty) selects `pod`.
pub(super) fn rc_selects(rc: &ReplicationController, pod: &Pod) -> bool {
    let spec = rc.spec.as_ref();
    let map = spec
        .and_then(|s| s.selector.as_ref())
        .filter(|m| !m.is_empty())
        .or_else(|| {
            spec.and_then(|s| s.template.as_ref())
                .and_then(|t| t.metadata.as_ref())
                .and_then(|m| m.labels.as_ref())
        });
    map.is_some_and(|m| Selector::from_map(m).matches(pod.metadata.labels.as_ref()))
}

/// A Deployment changed: it is queued.
pub(super) fn deployment_changed(cx: &Cx, c: &Change<Deployment>) {
    if let Some(d) = c.new.as_deref().or(c.old.as_deref()) {
        cx.deployments.add(key_of(&d.metadata));
    }
}

/// A StatefulSet changed: it is queued (and, once one exists, pods without owners are
/// cached, so that it can adopt them).
pub(super) fn statefulset_changed(cx: &Cx, c: &Change<StatefulSet>) {
    pod_owner_changed(cx, c, &cx.statefulsets);
}

/// A Job changed: it is queued (and, once one exists, pods without owners are cached,
/// so that a Job with a manual selector can adopt them), with its CronJob and the TTL
/// controller.
pub(super) fn job_changed(cx: &Cx, c: &Change<Job>) {
    pod_owner_changed(cx, c, &cx.jobs);
    cronjobs::job_changed(cx, c.old.as_deref(), c.new.as_deref());
}

/// A ControllerRevision changed: its StatefulSet or DaemonSet is queued.
pub(super) fn revision_changed(cx: &Cx, c: &Change<ControllerRevision>) {
    let Some(rev) = c.new.as_deref().or(c.old.as_deref()) else {
        return;
    };
    let (ns, _) = key_of(&rev.metadata);
    match controller_of(&rev.metadata) {
        Some(r) if r.kind == "StatefulSet" => cx.statefulsets.add((ns, r.name.clone())),
        Some(r) if r.kind == "DaemonSet" => cx.daemonsets.add((ns, r.name.clone())),
        _ => {}
    }
}

/// Whether `selector` (an owner's) selects `pod`.
pub(super) fn selects(
    selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    pod: &Pod,
) -> bool {
    selector
        .and_then(|s| Selector::new(s).ok())
        .is_some_and(|s| s.matches(pod.metadata.labels.as_ref()))
}

/// An owner of pods changed: it is queued, and once one exists, pods without owners
/// are cached too (it may adopt them).
fn pod_owner_changed<K: Metadata<Ty = ObjectMeta>>(cx: &Cx, c: &Change<K>, queue: &Queue) {
    if c.new.is_some() {
        cx.pods_wanted
            .send_if_modified(|wanted| !std::mem::replace(wanted, true));
    }
    if let Some(owner) = c.new.as_deref().or(c.old.as_deref()) {
        queue.add(key_of(owner.metadata()));
    }
}
