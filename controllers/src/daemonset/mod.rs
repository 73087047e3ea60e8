//! The DaemonSet controller (kube's `pkg/controller/daemon`): one pod of the
//! template on every node that should run it.
//!
//! One sync, as KCM's `syncDaemonSet`:
//! 1. a DaemonSet being deleted is left alone (its pods go with it through the
//!    garbage collector);
//! 2. pods are claimed by selector (matching orphans adopted, non-matching own
//!    ones released) and grouped by the node they are on or pinned to;
//! 3. if the runner's expectations are satisfied, `manage`: a pod is created for
//!    each node that should run one and has none ([`nodes::eligibility`]); failed
//!    pods are deleted (a `FailedDaemonPod` warning, backed off per node); surplus
//!    pods on a node are deleted, the oldest kept (with `maxSurge`, one old and one
//!    new may overlap); pods on nodes that may no longer keep them are deleted, and
//!    unscheduled pods pinned to nodes that no longer exist;
//! 4. when `manage` had nothing to do, the rolling update ([`rolling`]) replaces old
//!    pods within `maxUnavailable` (or surges within `maxSurge`); `OnDelete` waits
//!    for the user to delete them;
//! 5. the status is recomputed per node and written if it changed.
//!
//! Pods carry no `nodeName`: each is pinned to its node by required node affinity
//! ([`pod`]), so it is placed as every pod is and waits for its own node's offer.
//! A sync creates or deletes at most [`BURST_REPLICAS`] pods.
//!
//! Revisions are told apart by the `controller-revision-hash` label (the template's
//! hash) and `pod-template-generation` (the DaemonSet's template generation, which
//! kube-apiserver keeps in the annotation `deprecated.daemonset.template.generation`).
//! Each template is recorded in a ControllerRevision ([`history`]), for `kubectl
//! rollout history` and `undo`.

mod history;
pub mod nodes;
pub mod pod;
mod rolling;
mod status;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;

use crate::action::{Action, Event, Reconciled};
use crate::deployment::pod_template_hash;
use crate::error::ReconcileError;
use crate::owner::{claim, controller_ref};
use crate::selector::{Selector, SelectorError};
use crate::time::requeue_at;
use nodes::{Eligibility, eligibility, target_node};

pub use nodes::tolerates;
pub use pod::{CONTROLLER_REVISION_HASH_LABEL, POD_TEMPLATE_GENERATION_LABEL};

/// Most pods one sync creates or deletes (KCM's DaemonSet `BurstReplicas`).
pub const BURST_REPLICAS: usize = 250;

/// The annotation in which kube-apiserver shows a DaemonSet's template generation.
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";

/// What the runner knows beyond the DaemonSet, the nodes and the pods.
#[derive(Clone, Copy, Debug)]
pub struct DaemonContext<'a> {
    /// The DaemonSet's expectations are satisfied: pods may be created and
    /// deleted. When false only the status is recomputed (its observedGeneration
    /// not raised).
    pub expectations_satisfied: bool,
    /// Per node, the time before which a failed pod there is not killed again
    /// (KCM's `failedPodsBackoff`), so a pod that always fails does not make the
    /// controller fight the node in a hot loop.
    pub failed_pod_backoff: &'a BTreeMap<String, Timestamp>,
    /// The ControllerRevisions the DaemonSet controls.
    pub revisions: &'a [ControllerRevision],
}

/// One sync's result.
#[must_use = "a reconcile's actions do nothing until the runner performs them"]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DaemonReconciled {
    /// The calls, in order, and when to look again.
    pub reconciled: Reconciled,
    /// The nodes whose failed pod this sync deletes: the runner backs each off.
    pub failed_pods_killed_on: Vec<String>,
}

/// What one sync works from: the DaemonSet's template as its pods get it, its
/// hash and generation.
struct Revision {
    template: k8s_openapi::api::core::v1::PodTemplateSpec,
    hash: String,
    generation: Option<i64>,
    min_ready_seconds: i32,
}

impl Revision {
    fn eligibility(&self, node: &Node) -> Eligibility {
        match &self.template.spec {
            Some(spec) => eligibility(spec, node),
            None => Eligibility {
                should_run: false,
                should_continue_running: false,
            },
        }
    }

    fn is_updated(&self, pod: &Pod) -> bool {
        pod::is_updated(pod, &self.hash, self.generation)
    }
}

/// The DaemonSet's template generation (from the annotation).
pub fn template_generation(ds: &DaemonSet) -> Option<i64> {
    ds.metadata
        .annotations
        .as_ref()?
        .get(TEMPLATE_GENERATION_ANNOTATION)?
        .parse()
        .ok()
}

/// The `controller-revision-hash` of the DaemonSet's current template.
pub fn revision_hash(ds: &DaemonSet) -> String {
    let template = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let collisions = ds.status.as_ref().and_then(|s| s.collision_count);
    pod_template_hash(&template, collisions)
}

/// Reconcile a DaemonSet.
///
/// `nodes`: every node. `pods`: the pods of its namespace that it controls or
/// might adopt (more is fine: pods controlled by others are ignored).
///
/// # Errors
/// [`ReconcileError::Selector`] when the selector cannot be evaluated, and
/// [`ReconcileError::IntOrPercent`] for a `maxSurge`/`maxUnavailable` that is
/// not a usable number (validation refuses both at create).
pub fn reconcile(
    ds: &DaemonSet,
    nodes: &[&Node],
    pods: &[&Pod],
    ctx: &DaemonContext<'_>,
    now: Timestamp,
) -> Result<DaemonReconciled, ReconcileError> {
    let Some(spec) = ds.spec.as_ref() else {
        return Err(ReconcileError::Selector(SelectorError::Missing));
    };
    if ds.metadata.deletion_timestamp.is_some() {
        return Ok(DaemonReconciled::default());
    }
    let selector = Selector::new(&spec.selector)?;
    let generation = template_generation(ds);
    let hash = revision_hash(ds);
    let rev = Revision {
        template: pod::daemon_template(&spec.template, generation, &hash),
        hash,
        generation,
        min_ready_seconds: spec.min_ready_seconds.unwrap_or(0).max(0),
    };
    let owner_ref = controller_ref(ds);
    let claim = claim(&ds.metadata, &selector, pods.iter().copied());
    let mut actions = history::construct(ds, ctx.revisions, &rev.hash);
    for p in &claim.adopt {
        actions.push(Action::AdoptPod {
            name: p.metadata.name.clone().unwrap_or_default(),
            uid: p.metadata.uid.clone().unwrap_or_default(),
            owner_ref: owner_ref.clone(),
        });
    }
    for p in &claim.release {
        actions.push(Action::ReleasePod {
            name: p.metadata.name.clone().unwrap_or_default(),
            uid: p.metadata.uid.clone().unwrap_or_default(),
            owner_uid: owner_ref.uid.clone(),
        });
    }
    let by_node = group_by_node(&claim.claimed);
    let mut out = DaemonReconciled::default();
    let mut requeue: Option<Duration> = None;
    if ctx.expectations_satisfied {
        let plan = manage(ds, &rev, nodes, &by_node, ctx, now);
        let mut work = plan.work;
        if work.is_empty() && rolling::is_rolling_update(ds) {
            work = rolling::rolling_update(ds, &rev, nodes, &by_node, now)?;
        }
        requeue = plan.requeue;
        out.failed_pods_killed_on = plan.failed_on;
        actions.extend(plan.events.into_iter().map(Action::Event));
        actions.extend(work.into_actions(ds, &rev, &owner_ref));
        let live_hashes = claim
            .claimed
            .iter()
            .filter_map(|p| {
                p.metadata
                    .labels
                    .as_ref()?
                    .get(CONTROLLER_REVISION_HASH_LABEL)
            })
            .map(String::as_str)
            .collect();
        actions.extend(history::cleanup(ds, ctx.revisions, &rev.hash, &live_hashes));
    }
    let (status, status_requeue) = status::compute(ds, &rev, nodes, &by_node, ctx, now);
    if let Some(s) = status {
        actions.push(Action::WriteStatus(crate::action::Status::DaemonSet(s)));
    }
    out.reconciled = Reconciled {
        actions,
        requeue_after: [requeue, status_requeue].into_iter().flatten().min(),
    };
    Ok(out)
}

/// The claimed pods by the node they are on or pinned to (pods pinned nowhere are
/// not the controller's to place, and are left out as KCM leaves them).
fn group_by_node<'p>(pods: &[&'p Pod]) -> BTreeMap<String, Vec<&'p Pod>> {
    let mut by_node: BTreeMap<String, Vec<&'p Pod>> = BTreeMap::new();
    for p in pods {
        if let Some(n) = target_node(p) {
            by_node.entry(n.to_owned()).or_default().push(p);
        }
    }
    by_node
}

/// Creates and deletes of one sync.
#[derive(Debug, Default)]
struct Work {
    /// Nodes that get a new pod, in order.
    create_on: Vec<String>,
    /// Pods to delete: (name, uid), in order, no repeats.
    delete: Vec<(String, String)>,
    /// The names in `delete`, so that a repeat costs no scan.
    deleting: std::collections::HashSet<String>,
}

impl Work {
    fn is_empty(&self) -> bool {
        self.create_on.is_empty() && self.delete.is_empty()
    }

    fn delete(&mut self, pod: &Pod) {
        let name = pod.metadata.name.clone().unwrap_or_default();
        if self.deleting.insert(name.clone()) {
            self.delete
                .push((name, pod.metadata.uid.clone().unwrap_or_default()));
        }
    }

    /// The creates (each pod pinned to its node) and deletes, at most
    /// [`BURST_REPLICAS`] of each, as `syncNodes` caps them.
    fn into_actions(
        self,
        ds: &DaemonSet,
        rev: &Revision,
        owner_ref: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    ) -> Vec<Action> {
        let mut actions = Vec::new();
        for node in self.create_on.iter().take(BURST_REPLICAS) {
            // A template without labels cannot be (validation makes the selector
            // match them); such a DaemonSet gets no pods rather than a panic.
            if let Ok(pod) = pod::pod_for_node(&rev.template, &ds.metadata, owner_ref.clone(), node)
            {
                actions.push(Action::CreatePod { pod });
            }
        }
        for (name, uid) in self.delete.into_iter().take(BURST_REPLICAS) {
            actions.push(Action::DeletePod { name, uid });
        }
        actions
    }
}

/// What `manage` decided.
struct Managed {
    work: Work,
    events: Vec<Event>,
    failed_on: Vec<String>,
    requeue: Option<Duration>,
}

/// KCM's `manage`: the pods each node should have.
fn manage(
    ds: &DaemonSet,
    rev: &Revision,
    nodes: &[&Node],
    by_node: &BTreeMap<String, Vec<&Pod>>,
    ctx: &DaemonContext<'_>,
    now: Timestamp,
) -> Managed {
    let mut m = Managed {
        work: Work::default(),
        events: Vec::new(),
        failed_on: Vec::new(),
        requeue: None,
    };
    let surge = rolling::allows_surge(ds);
    for node in nodes {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let e = rev.eligibility(node);
        let on_node = by_node.get(name).filter(|p| !p.is_empty());
        match on_node {
            None if e.should_run => m.work.create_on.push(name.to_owned()),
            Some(pods) if e.should_continue_running => {
                let mut running = Vec::new();
                for p in pods.iter().copied() {
                    if p.metadata.deletion_timestamp.is_some() {
                        continue;
                    }
                    match phase(p) {
                        "Failed" => match ctx.failed_pod_backoff.get(name) {
                            Some(until) if *until > now => {
                                let after = requeue_at(now, *until);
                                m.requeue = Some(m.requeue.map_or(after, |r| r.min(after)));
                            }
                            _ => {
                                let ns = p.metadata.namespace.as_deref().unwrap_or_default();
                                let pod_name = p.metadata.name.as_deref().unwrap_or_default();
                                m.events.push(Event::warning(
                                    "FailedDaemonPod",
                                    format!(
                                        "Found failed daemon pod {ns}/{pod_name} on node {name}, will try to kill it"
                                    ),
                                ));
                                m.failed_on.push(name.to_owned());
                                m.work.delete(p);
                            }
                        },
                        "Succeeded" => m.work.delete(p),
                        _ => running.push(p),
                    }
                }
                running.sort_by(|a, b| oldest_first(a, b));
                if !surge {
                    for p in running.iter().skip(1) {
                        m.work.delete(p);
                    }
                } else if running.len() >= 2 {
                    surge_dedupe(rev, &running, &mut m.work, now);
                }
            }
            Some(pods) if !e.should_continue_running => {
                for p in pods
                    .iter()
                    .filter(|p| p.metadata.deletion_timestamp.is_none())
                {
                    m.work.delete(p);
                }
            }
            _ => {}
        }
    }
    // Unscheduled pods pinned to nodes that no longer exist: nothing else would
    // ever delete them (they are bound nowhere, so pod GC does not see them).
    let existing: std::collections::HashSet<&str> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    for (node, pods) in by_node {
        if existing.contains(node.as_str()) {
            continue;
        }
        for p in pods {
            let unbound = p
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_none_or(str::is_empty);
            if unbound && p.metadata.deletion_timestamp.is_none() {
                m.work.delete(p);
            }
        }
    }
    m
}

/// With surge, a node may keep the oldest new pod and the oldest old one, and the
/// old one only while the new one is not available and the old one is ready.
fn surge_dedupe(rev: &Revision, running: &[&Pod], work: &mut Work, now: Timestamp) {
    let mut oldest_new: Option<&Pod> = None;
    let mut oldest_old: Option<&Pod> = None;
    for p in running.iter().copied() {
        let slot = if rev.is_updated(p) {
            &mut oldest_new
        } else {
            &mut oldest_old
        };
        if slot.is_none() {
            *slot = Some(p);
        } else {
            work.delete(p);
        }
    }
    if let (Some(new), Some(old)) = (oldest_new, oldest_old)
        && (!crate::pod_state::is_ready(old)
            || crate::pod_state::is_available(new, rev.min_ready_seconds, now))
    {
        work.delete(old);
    }
}

fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// `podByCreationTimestampAndPhase`: scheduled pods first, then older, then by
/// name.
fn oldest_first(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    let bound = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
    };
    bound(b)
        .cmp(&bound(a))
        .then_with(|| {
            let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(a).cmp(&created(b))
        })
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

#[cfg(test)]
mod tests;
