//! A Deployment rolled out end to end over an in-memory API: the
//! Deployment and ReplicaSet reconciles run in turn, their actions are
//! applied one at a time (pods are scheduled and Ready the moment they are
//! created, and gone the moment they are deleted), and the rollout's
//! invariants are checked after every single action.

mod common;

use std::collections::BTreeMap;

use common::*;
use controllers::deployment::{POD_TEMPLATE_HASH_LABEL, REVISION_ANNOTATION, reconcile};
use controllers::replicaset::{self, ReplicaContext};
use controllers::{Action, Status, is_controlled_by, is_ready};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// What the API server would hold.
struct World {
    d: Deployment,
    rses: Vec<ReplicaSet>,
    pods: Vec<Pod>,
    now: Timestamp,
    serial: u64,
    /// Checked after every applied action.
    invariant: fn(&World),
    /// Calls (not events, not status writes) made so far.
    calls: usize,
    /// The Deployment's events, in order.
    events: Vec<String>,
}

impl World {
    fn new(d: Deployment, invariant: fn(&World)) -> Self {
        World {
            d,
            rses: Vec::new(),
            pods: Vec::new(),
            now: at(0),
            serial: 0,
            invariant,
            calls: 0,
            events: Vec::new(),
        }
    }

    fn next(&mut self) -> u64 {
        self.serial += 1;
        self.serial
    }

    /// One round: the Deployment's sync, then each ReplicaSet's, then each
    /// ReplicaSet's again so statuses catch up with the pods. True if any
    /// call was made.
    fn round(&mut self) -> bool {
        let before = self.calls;
        let pods: Vec<Pod> = self.pods.clone();
        let refs: Vec<&Pod> = pods.iter().collect();
        let r = reconcile(&self.d, &self.rses, &refs, self.now).expect("deployment sync");
        for a in r.actions {
            self.apply_deployment_action(a);
        }
        for _ in 0..2 {
            for i in 0..self.rses.len() {
                let rs = self.rses[i].clone();
                let pods: Vec<Pod> = self.pods.clone();
                let refs: Vec<&Pod> = pods.iter().collect();
                let ctx = ReplicaContext {
                    related_pods: &refs,
                    expectations_satisfied: true,
                };
                let r = replicaset::reconcile(&rs, &refs, &ctx, self.now).expect("rs sync");
                for a in r.actions {
                    self.apply_rs_action(i, a);
                }
            }
        }
        self.now = self
            .now
            .checked_add(SignedDuration::from_secs(1))
            .expect("time");
        self.calls > before
    }

    fn apply_deployment_action(&mut self, a: Action) {
        match a {
            Action::CreateReplicaSet { mut rs } => {
                let n = self.next();
                rs.metadata.uid = Some(format!("rs-uid-{n}"));
                rs.metadata.creation_timestamp = Some(Time(self.now));
                rs.metadata.generation = Some(1);
                self.rses.push(rs);
                self.calls += 1;
            }
            Action::UpdateReplicaSet { rs } => {
                let slot = self
                    .rses
                    .iter_mut()
                    .find(|r| r.metadata.name == rs.metadata.name)
                    .expect("updated ReplicaSet exists");
                let generation =
                    slot.metadata.generation.unwrap_or(1) + i64::from(slot.spec != rs.spec);
                *slot = ReplicaSet {
                    status: slot.status.clone(),
                    ..rs
                };
                slot.metadata.generation = Some(generation);
                self.calls += 1;
            }
            Action::DeleteReplicaSet { name, .. } => {
                self.rses
                    .retain(|r| r.metadata.name.as_deref() != Some(name.as_str()));
                self.calls += 1;
            }
            Action::SetOwnerAnnotation { key, value } => {
                self.d
                    .metadata
                    .annotations
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key, value);
            }
            Action::WriteStatus(Status::Deployment(s)) => self.d.status = Some(s),
            Action::Event(e) => self.events.push(e.message),
            other => panic!("unexpected Deployment action {other:?}"),
        }
        (self.invariant)(self);
    }

    fn apply_rs_action(&mut self, i: usize, a: Action) {
        match a {
            Action::CreatePod { mut pod } => {
                let n = self.next();
                let prefix = pod.metadata.generate_name.clone().unwrap_or_default();
                pod.metadata.name = Some(format!("{prefix}{n:05}"));
                pod.metadata.uid = Some(format!("pod-uid-{n}"));
                pod.metadata.creation_timestamp = Some(Time(self.now));
                pod.spec.get_or_insert_with(Default::default).node_name =
                    Some(format!("node-{}", n % 3));
                pod.status = Some(PodStatus {
                    phase: Some("Running".into()),
                    conditions: Some(vec![PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(Time(self.now)),
                        ..Default::default()
                    }]),
                    ..Default::default()
                });
                self.pods.push(pod);
                self.calls += 1;
            }
            Action::DeletePod { uid, .. } => {
                self.pods
                    .retain(|p| p.metadata.uid.as_deref() != Some(uid.as_str()));
                self.calls += 1;
            }
            Action::WriteStatus(Status::ReplicaSet(s)) => self.rses[i].status = Some(s),
            other => panic!("unexpected ReplicaSet action {other:?}"),
        }
        (self.invariant)(self);
    }

    /// Rounds until one makes no call (at most `limit`); returns how many.
    fn settle(&mut self, limit: usize) -> usize {
        for n in 1..=limit {
            if !self.round() {
                return n;
            }
        }
        panic!("no steady state after {limit} rounds");
    }

    fn pods_of(&self, rs: &ReplicaSet) -> usize {
        let uid = rs.metadata.uid.as_deref().unwrap_or_default();
        self.pods
            .iter()
            .filter(|p| is_controlled_by(&p.metadata, uid))
            .count()
    }

    fn hash_of(pod: &Pod) -> Option<String> {
        pod.metadata
            .labels
            .as_ref()?
            .get(POD_TEMPLATE_HASH_LABEL)
            .cloned()
    }
}

/// RollingUpdate of 10 replicas, 25%/25%: at most 13 pods and 13 desired,
/// at least 8 available, at every step.
fn rolling_invariant(w: &World) {
    let desired: i32 = w.rses.iter().map(rs_replicas).sum();
    assert!(desired <= 13, "ReplicaSets want {desired} pods");
    assert!(w.pods.len() <= 13, "{} pods exist", w.pods.len());
    let available = w.pods.iter().filter(|p| is_ready(p)).count();
    let started = w.d.metadata.generation.unwrap_or(1) > 1;
    if started {
        assert!(available >= 8, "only {available} pods available");
    }
}

/// Recreate: pods of two templates never run at once.
fn recreate_invariant(w: &World) {
    let mut hashes: Vec<String> = w.pods.iter().filter_map(World::hash_of).collect();
    hashes.sort();
    hashes.dedup();
    assert!(hashes.len() <= 1, "old and new pods together: {hashes:?}");
}

#[test]
fn a_rolling_update_of_ten_replicas_converges_within_surge_and_availability() {
    let mut w = World::new(deployment(10, "app:A"), rolling_invariant);
    w.settle(20);
    assert_eq!(w.pods.len(), 10);
    let first = w.rses[0].clone();

    set_image(&mut w.d, "app:B");
    w.events.clear();
    w.settle(60);

    let new = w
        .rses
        .iter()
        .find(|rs| rs.metadata.name != first.metadata.name)
        .cloned()
        .expect("a new ReplicaSet");
    // KCM's familiar sequence for 10 replicas at 25%/25% (+3/-2).
    let (n, o) = (rs_name(&new), rs_name(&first));
    assert_eq!(
        w.events,
        [
            format!("Scaled up replica set {n} from 0 to 3"),
            format!("Scaled down replica set {o} from 10 to 8"),
            format!("Scaled up replica set {n} from 3 to 5"),
            format!("Scaled down replica set {o} from 8 to 3"),
            format!("Scaled up replica set {n} from 5 to 10"),
            format!("Scaled down replica set {o} from 3 to 0"),
        ]
    );
    assert_eq!(w.pods.len(), 10);
    assert_eq!(w.pods_of(&new), 10);
    let new_hash = new
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(POD_TEMPLATE_HASH_LABEL))
        .cloned();
    assert!(w.pods.iter().all(|p| World::hash_of(p) == new_hash));
    let old = w
        .rses
        .iter()
        .find(|rs| rs.metadata.name == first.metadata.name)
        .expect("old ReplicaSet kept for history");
    assert_eq!(rs_replicas(old), 0);

    let s = w.d.status.clone().expect("status");
    assert_eq!(
        (
            s.replicas,
            s.updated_replicas,
            s.available_replicas,
            s.ready_replicas
        ),
        (Some(10), Some(10), Some(10), Some(10))
    );
    assert_eq!(s.observed_generation, w.d.metadata.generation);
    assert_eq!(
        condition(&s, "Progressing").reason.as_deref(),
        Some("NewReplicaSetAvailable")
    );
    assert_eq!(
        annotation(&w.d.metadata, REVISION_ANNOTATION).as_deref(),
        Some("2")
    );
}

#[test]
fn a_recreate_rollout_never_runs_old_and_new_pods_together() {
    let mut d = deployment(4, "app:A");
    set_recreate(&mut d);
    let mut w = World::new(d, recreate_invariant);
    w.settle(20);
    set_image(&mut w.d, "app:B");
    w.settle(20);
    assert_eq!(w.pods.len(), 4);
    let s = w.d.status.clone().expect("status");
    assert_eq!(s.updated_replicas, Some(4));
    assert_eq!(
        condition(&s, "Progressing").reason.as_deref(),
        Some("NewReplicaSetAvailable")
    );
}

#[test]
fn scaling_during_a_rollout_reaches_the_new_size_on_the_new_template() {
    let mut w = World::new(deployment(10, "app:A"), |_| {});
    w.settle(20);
    set_image(&mut w.d, "app:B");
    w.round();
    spec(&mut w.d).replicas = Some(20);
    w.settle(80);
    assert_eq!(w.pods.len(), 20);
    let hashes: Vec<Option<String>> = w.pods.iter().map(World::hash_of).collect();
    assert!(hashes.windows(2).all(|p| p[0] == p[1]), "one template left");
}
