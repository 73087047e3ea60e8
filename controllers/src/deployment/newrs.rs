//! The new ReplicaSet: the one running the Deployment's current template
//! (`getNewReplicaSet`), found, brought up to date, or created.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::conditions::{
    FOUND_NEW_RS, NEW_RS_CREATED, PROGRESSING, RS_CREATE_ERROR, get_condition, new_condition,
    set_condition,
};
use super::hash::{POD_TEMPLATE_HASH_LABEL, pod_template_hash, templates_equal_ignoring_hash};
use super::params::Strategy;
use super::plan::{Plan, replicas, sum};
use super::revision::{REVISION_ANNOTATION, max_revision, set_new_rs_annotations};
use super::status::normalized;
use crate::action::{Action, Event, Status};
use crate::owner::{controller_ref, is_controlled_by};

/// The oldest ReplicaSet whose template is the Deployment's, ignoring the
/// hash label (more than one can exist after an upgrade; the oldest wins,
/// deterministically).
pub(crate) fn find(plan: &Plan<'_>) -> Option<usize> {
    let template = &plan.d.spec.as_ref()?.template;
    plan.rses.iter().position(|rs| {
        rs.spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .is_some_and(|t| templates_equal_ignoring_hash(t, template))
    })
}

/// Find the new ReplicaSet and sync its annotations (and the Deployment's
/// revision), or, with `create`, create it. `None` when there is none and
/// `create` is false.
pub(crate) fn get(plan: &mut Plan<'_>, create: bool) -> Option<usize> {
    let existing = find(plan);
    let new_revision =
        max_revision(plan.olds(existing).into_iter().map(|i| &plan.rses[i])).saturating_add(1);
    let d = plan.d;
    let (desired, max) = (plan.p.replicas, plan.p.max_total());
    if let Some(i) = existing {
        let mut rs = plan.rses[i].clone();
        let annotated = set_new_rs_annotations(d, &mut rs, new_revision, true, desired, max);
        let spec = rs.spec.get_or_insert_with(Default::default);
        let min_ready_differs = spec.min_ready_seconds.unwrap_or(0) != plan.p.min_ready_seconds;
        if annotated || min_ready_differs {
            spec.min_ready_seconds = omit_zero(plan.p.min_ready_seconds);
            plan.put(i, rs);
            // KCM returns here; the Deployment's revision follows on the
            // sync this update triggers.
            return Some(i);
        }
        let revision = rs
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REVISION_ANNOTATION))
            .cloned()
            .unwrap_or_default();
        plan.set_revision(revision);
        // Progress was never tracked (the deadline is new): count from the
        // first time the new ReplicaSet is seen.
        if plan.p.progress_deadline_seconds.is_some()
            && get_condition(&plan.status, PROGRESSING).is_none()
        {
            let msg = format!("Found new replica set \"{}\"", super::plan::name(&rs));
            set_condition(
                &mut plan.status,
                new_condition(PROGRESSING, "True", FOUND_NEW_RS, msg, plan.now),
            );
        }
        return Some(i);
    }
    if !create {
        return None;
    }
    let mut rs = new_replica_set(d, plan.status.collision_count);
    let count = new_replicas(plan, &rs);
    rs.spec.get_or_insert_with(Default::default).replicas = Some(count);
    set_new_rs_annotations(d, &mut rs, new_revision, false, desired, max);
    let rs_name = super::plan::name(&rs).to_owned();
    let i = plan.create(rs);
    if count > 0 {
        plan.event(Event::normal(
            "ScalingReplicaSet",
            format!("Scaled up replica set {rs_name} from 0 to {count}"),
        ));
    }
    plan.set_revision(new_revision.to_string());
    if plan.p.progress_deadline_seconds.is_some() {
        let msg = format!("Created new replica set \"{rs_name}\"");
        set_condition(
            &mut plan.status,
            new_condition(PROGRESSING, "True", NEW_RS_CREATED, msg, plan.now),
        );
    }
    Some(i)
}

/// The ReplicaSet for the Deployment's current template: named
/// `<deploy>-<hash>` (deterministic, so a retried create cannot make two),
/// the hash label on its labels, selector and template.
fn new_replica_set(d: &Deployment, collision_count: Option<i32>) -> ReplicaSet {
    let spec = d.spec.clone().unwrap_or_default();
    let hash = pod_template_hash(&spec.template, collision_count);
    let mut template = spec.template;
    let labels = with_hash(
        template.metadata.as_ref().and_then(|m| m.labels.as_ref()),
        &hash,
    );
    template
        .metadata
        .get_or_insert_with(Default::default)
        .labels = Some(labels.clone());
    let mut selector = spec.selector;
    selector.match_labels = Some(with_hash(selector.match_labels.as_ref(), &hash));
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}-{hash}",
                d.metadata.name.as_deref().unwrap_or_default()
            )),
            namespace: d.metadata.namespace.clone(),
            owner_references: Some(vec![controller_ref(d)]),
            labels: Some(labels),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(0),
            min_ready_seconds: spec.min_ready_seconds.filter(|s| *s != 0),
            selector,
            template: Some(template),
        }),
        status: None,
    }
}

fn with_hash(labels: Option<&BTreeMap<String, String>>, hash: &str) -> BTreeMap<String, String> {
    let mut l = labels.cloned().unwrap_or_default();
    l.insert(POD_TEMPLATE_HASH_LABEL.into(), hash.into());
    l
}

fn omit_zero(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

/// `NewRSNewReplicas`: how big the new ReplicaSet may be now. RollingUpdate:
/// grow toward `replicas` while all ReplicaSets together stay within
/// `replicas + maxSurge`. Recreate: `replicas` at once (old pods are gone
/// by then).
pub(crate) fn new_replicas(plan: &Plan<'_>, new: &ReplicaSet) -> i32 {
    let current_new = replicas(new);
    match plan.p.strategy {
        Strategy::Recreate => plan.p.replicas,
        Strategy::RollingUpdate => {
            let others = plan
                .rses
                .iter()
                .filter(|rs| rs.metadata.name != new.metadata.name)
                .map(replicas);
            let current = sum(others.chain([current_new]));
            let max_total = plan.p.max_total();
            if current >= max_total {
                return current_new;
            }
            let up = max_total
                .saturating_sub(current)
                .min(plan.p.replicas.saturating_sub(current_new));
            current_new.saturating_add(up)
        }
    }
}

/// The runner's POST of the new ReplicaSet failed with something other than
/// `AlreadyExists`: Progressing False `ReplicaSetCreateError` (when a
/// deadline is set) and a Warning event, both `Failed to create new replica
/// set "NAME": ERR`.
pub fn on_create_error(
    d: &Deployment,
    rs_name: &str,
    error: &str,
    now: k8s_openapi::jiff::Timestamp,
) -> Vec<Action> {
    let msg = format!("Failed to create new replica set \"{rs_name}\": {error}");
    let mut actions = Vec::new();
    let deadline = d.spec.as_ref().and_then(|s| s.progress_deadline_seconds);
    if deadline != Some(i32::MAX) {
        let current = d.status.clone().unwrap_or_default();
        let mut status = current.clone();
        set_condition(
            &mut status,
            new_condition(PROGRESSING, "False", RS_CREATE_ERROR, msg.clone(), now),
        );
        if normalized(&status) != normalized(&current) {
            actions.push(Action::WriteStatus(Status::Deployment(normalized(&status))));
        }
    }
    actions.push(Action::Event(Event::warning(RS_CREATE_ERROR, msg)));
    actions
}

/// The runner's POST of the new ReplicaSet got `AlreadyExists`; `existing`
/// is the ReplicaSet of that name. If it is this Deployment's and runs its
/// template, a slow cache just had not shown it yet: nothing to do. Else it
/// is a hash collision: `collisionCount` + 1, so the next sync hashes to
/// another name.
pub fn on_create_conflict(d: &Deployment, existing: &ReplicaSet) -> Option<Action> {
    let uid = d.metadata.uid.as_deref().unwrap_or_default();
    let ours = is_controlled_by(&existing.metadata, uid);
    let same = match (
        d.spec.as_ref(),
        existing.spec.as_ref().and_then(|s| s.template.as_ref()),
    ) {
        (Some(spec), Some(t)) => templates_equal_ignoring_hash(&spec.template, t),
        _ => false,
    };
    if ours && same {
        return None;
    }
    let mut status = d.status.clone().unwrap_or_default();
    status.collision_count = Some(status.collision_count.unwrap_or(0).saturating_add(1));
    Some(Action::WriteStatus(Status::Deployment(normalized(&status))))
}
