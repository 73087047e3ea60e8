//! A StatefulSet driven by its reconcile against an in-memory cluster, under random
//! interleavings of pods starting, pods going, template changes, partition changes
//! and scaling. What must hold at every step: no pod is created under a name that
//! exists, OrderedReady creates ordinal i only once every lower ordinal is Running
//! and Ready and never has more than one pod not ready, no pod below the partition is
//! deleted for an update, and once the cluster settles every ordinal runs, the
//! ordinals at or above the partition at the update revision.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use controllers::statefulset::identity::{REVISION_LABEL, parent_and_ordinal};
use controllers::statefulset::reconcile;
use controllers::{Action, Status};
use k8s_openapi::api::apps::v1::{
    ControllerRevision, RollingUpdateStatefulSetStrategy, StatefulSet, StatefulSetSpec,
    StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{
    Container, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

fn now() -> Timestamp {
    "2024-06-01T12:00:00Z".parse().expect("now")
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_owned(), "web".to_owned())])
}

fn set(replicas: i32, parallel: bool, partition: i32, image: &str) -> StatefulSet {
    StatefulSet {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            uid: Some("set-uid".into()),
            generation: Some(1),
            ..Default::default()
        },
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            service_name: Some("web".into()),
            pod_management_policy: Some(if parallel { "Parallel" } else { "OrderedReady" }.into()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateStatefulSetStrategy {
                    partition: Some(partition),
                    max_unavailable: None,
                }),
            }),
            revision_history_limit: Some(2),
            selector: LabelSelector {
                match_labels: Some(labels()),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels()),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "c".into(),
                        image: Some(image.into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

/// What the cluster holds.
struct World {
    set: StatefulSet,
    pods: BTreeMap<String, Pod>,
    revisions: BTreeMap<String, ControllerRevision>,
    next_uid: u64,
}

#[derive(Clone, Debug)]
enum Step {
    /// The pending pod at this position (of the pending ones) starts and is ready.
    Start(usize),
    /// The terminating pod at this position goes.
    Gone(usize),
    /// A new template.
    Image(u8),
    Partition(i32),
    Scale(i32),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0usize..8).prop_map(Step::Start),
        3 => (0usize..8).prop_map(Step::Gone),
        1 => (0u8..3).prop_map(Step::Image),
        1 => (0i32..6).prop_map(Step::Partition),
        1 => (0i32..6).prop_map(Step::Scale),
    ]
}

fn healthy(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

fn ordinal(name: &str) -> i32 {
    parent_and_ordinal(name).expect("an ordinal name").1
}

impl World {
    fn new(set: StatefulSet) -> Self {
        World {
            set,
            pods: BTreeMap::new(),
            revisions: BTreeMap::new(),
            next_uid: 0,
        }
    }

    fn uid(&mut self) -> String {
        self.next_uid += 1;
        format!("uid-{}", self.next_uid)
    }

    fn spec_mut(&mut self) -> &mut StatefulSetSpec {
        self.set.metadata.generation = Some(self.set.metadata.generation.unwrap_or(1) + 1);
        self.set.spec.as_mut().expect("spec")
    }

    fn apply(&mut self, s: &Step) {
        match s {
            Step::Start(i) => {
                let pending: Vec<String> = self
                    .pods
                    .iter()
                    .filter(|(_, p)| p.metadata.deletion_timestamp.is_none() && !healthy(p))
                    .map(|(n, _)| n.clone())
                    .collect();
                if let Some(name) = pending.get(i % pending.len().max(1)) {
                    let pod = self.pods.get_mut(name).expect("pod");
                    pod.status = Some(PodStatus {
                        phase: Some("Running".into()),
                        conditions: Some(vec![PodCondition {
                            type_: "Ready".into(),
                            status: "True".into(),
                            last_transition_time: Some(Time(now())),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    });
                }
            }
            Step::Gone(i) => {
                let going: Vec<String> = self
                    .pods
                    .iter()
                    .filter(|(_, p)| p.metadata.deletion_timestamp.is_some())
                    .map(|(n, _)| n.clone())
                    .collect();
                if let Some(name) = going.get(i % going.len().max(1)) {
                    self.pods.remove(name);
                }
            }
            Step::Image(n) => {
                let image = format!("img:{n}");
                self.spec_mut()
                    .template
                    .spec
                    .as_mut()
                    .expect("pod spec")
                    .containers[0]
                    .image = Some(image);
            }
            Step::Partition(p) => {
                let p = *p;
                let ru = self
                    .spec_mut()
                    .update_strategy
                    .as_mut()
                    .and_then(|s| s.rolling_update.as_mut())
                    .expect("rolling update");
                ru.partition = Some(p);
            }
            Step::Scale(n) => self.spec_mut().replicas = Some(*n),
        }
    }

    fn spec(&self) -> &StatefulSetSpec {
        self.set.spec.as_ref().expect("spec")
    }

    /// One sync, its actions checked and applied; returns how many there were.
    fn sync(&mut self) -> usize {
        let pods: Vec<Pod> = self.pods.values().cloned().collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let revisions: Vec<ControllerRevision> = self.revisions.values().cloned().collect();
        let r = reconcile(&self.set, &refs, &revisions, now()).expect("reconciles");
        let ordered = self.spec().pod_management_policy.as_deref() == Some("OrderedReady");
        let replicas = self.spec().replicas.unwrap_or(1);
        let partition = self
            .spec()
            .update_strategy
            .as_ref()
            .and_then(|s| s.rolling_update.as_ref())
            .and_then(|r| r.partition)
            .unwrap_or(0);
        if ordered {
            assert!(
                r.pod_creations() <= 1,
                "OrderedReady creates one pod at a time"
            );
            assert!(
                r.pod_deletions().count() <= 1,
                "OrderedReady deletes one pod at a time"
            );
        }
        let n = r.actions.len();
        for a in r.actions {
            match a {
                Action::CreatePod { pod } => {
                    let name = pod.metadata.name.clone().expect("named");
                    assert!(!self.pods.contains_key(&name), "{name} created twice");
                    let o = ordinal(&name);
                    assert!(o < replicas, "{name} is beyond {replicas} replicas");
                    if ordered {
                        for lower in 0..o {
                            let p = self.pods.get(&format!("web-{lower}"));
                            assert!(
                                p.is_some_and(healthy),
                                "{name} created before web-{lower} is Running and Ready"
                            );
                        }
                    }
                    let mut pod = pod;
                    pod.metadata.uid = Some(self.uid());
                    pod.status = Some(PodStatus {
                        phase: Some("Pending".into()),
                        ..Default::default()
                    });
                    self.pods.insert(name, pod);
                }
                Action::DeletePod { name, uid } => {
                    let o = ordinal(&name);
                    assert!(
                        o >= replicas || o >= partition,
                        "{name} deleted below partition {partition} with {replicas} replicas"
                    );
                    let pod = self.pods.get_mut(&name).expect("deletes a pod that exists");
                    assert_eq!(pod.metadata.uid.as_deref(), Some(uid.as_str()));
                    pod.metadata.deletion_timestamp = Some(Time(now()));
                }
                Action::CreateControllerRevision { revision } => {
                    let name = revision.metadata.name.clone().expect("named");
                    assert!(
                        !self.revisions.contains_key(&name),
                        "revision {name} exists"
                    );
                    let mut revision = revision;
                    revision.metadata.uid = Some(self.uid());
                    self.revisions.insert(name, revision);
                }
                Action::UpdateControllerRevision { revision } => {
                    let name = revision.metadata.name.clone().expect("named");
                    let old = self.revisions.get(&name).expect("exists");
                    assert_eq!(old.data, revision.data, "data never changes");
                    self.revisions.insert(name, revision);
                }
                Action::DeleteControllerRevision { name, .. } => {
                    let in_use = self.pods.values().any(|p| {
                        p.metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get(REVISION_LABEL))
                            == Some(&name)
                    });
                    assert!(!in_use, "revision {name} deleted while a pod runs it");
                    self.revisions.remove(&name);
                }
                Action::WriteStatus(Status::StatefulSet(s)) => self.set.status = Some(s),
                Action::Event(_) => {}
                other => panic!("unexpected action {other:?}"),
            }
        }
        if ordered {
            // Scaling down during an update may have two pods terminating, as in kube;
            // but of the pods being started, at most one is not ready.
            let starting = self
                .pods
                .values()
                .filter(|p| p.metadata.deletion_timestamp.is_none() && !healthy(p))
                .count();
            assert!(
                starting <= 1,
                "{starting} pods starting at once under OrderedReady"
            );
        }
        n
    }

    /// Lets the cluster settle: every pending pod starts, every terminating one goes,
    /// until a sync asks for nothing.
    fn settle(&mut self) {
        for _ in 0..200 {
            let n = self.sync();
            let mut moved = false;
            for pod in self.pods.values_mut() {
                if pod.metadata.deletion_timestamp.is_none() && !healthy(pod) {
                    pod.status = Some(PodStatus {
                        phase: Some("Running".into()),
                        conditions: Some(vec![PodCondition {
                            type_: "Ready".into(),
                            status: "True".into(),
                            last_transition_time: Some(Time(now())),
                            ..Default::default()
                        }]),
                        ..Default::default()
                    });
                    moved = true;
                }
            }
            let before = self.pods.len();
            self.pods
                .retain(|_, p| p.metadata.deletion_timestamp.is_none());
            moved |= self.pods.len() != before;
            if n == 0 && !moved {
                return;
            }
        }
        panic!("the set never settles");
    }
}

fn check_settled(w: &World) {
    let replicas = w.spec().replicas.unwrap_or(1);
    let partition = w
        .spec()
        .update_strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.partition)
        .unwrap_or(0);
    let names: Vec<String> = w.pods.keys().cloned().collect();
    let mut want: Vec<String> = (0..replicas).map(|i| format!("web-{i}")).collect();
    want.sort();
    assert_eq!(names, want);
    let status = w.set.status.clone().expect("a status");
    assert_eq!(status.replicas, replicas);
    assert_eq!(status.ready_replicas, Some(replicas));
    let update = status.update_revision.clone().expect("an update revision");
    for (name, pod) in &w.pods {
        let rev = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(REVISION_LABEL));
        if ordinal(name) >= partition {
            assert_eq!(
                rev,
                Some(&update),
                "{name} at or above the partition is updated"
            );
        }
        assert!(w.revisions.contains_key(rev.expect("labelled")));
    }
    if partition == 0 {
        assert_eq!(status.current_revision, status.update_revision);
    }
    assert_eq!(status.observed_generation, w.set.metadata.generation);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn ordered_and_parallel_sets_keep_their_invariants_and_settle(
        parallel in any::<bool>(),
        replicas in 0i32..5,
        steps in proptest::collection::vec(step(), 0..40),
    ) {
        let mut w = World::new(set(replicas, parallel, 0, "img:0"));
        for s in &steps {
            w.sync();
            w.apply(s);
        }
        w.settle();
        check_settled(&w);
    }
}

#[test]
fn ordered_ready_starts_web_0_then_web_1_then_web_2() {
    let mut w = World::new(set(3, false, 0, "img:0"));
    let mut created = Vec::new();
    for _ in 0..10 {
        w.sync();
        for (name, pod) in w.pods.iter_mut() {
            if !created.contains(name) {
                created.push(name.clone());
            }
            pod.status = Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(now())),
                    ..Default::default()
                }]),
                ..Default::default()
            });
        }
    }
    assert_eq!(created, ["web-0", "web-1", "web-2"]);
}

#[test]
fn a_partitioned_update_touches_only_the_ordinals_at_or_above_it() {
    let mut w = World::new(set(3, false, 0, "img:0"));
    w.settle();
    let first = w.set.status.clone().unwrap().current_revision.unwrap();
    w.apply(&Step::Partition(2));
    w.apply(&Step::Image(1));
    w.settle();
    let status = w.set.status.clone().unwrap();
    let update = status.update_revision.clone().unwrap();
    assert_ne!(update, first);
    let rev =
        |w: &World, n: &str| w.pods[n].metadata.labels.as_ref().unwrap()[REVISION_LABEL].clone();
    assert_eq!(
        [rev(&w, "web-0"), rev(&w, "web-1"), rev(&w, "web-2")],
        [first.clone(), first.clone(), update.clone()]
    );
    assert_eq!(
        status.current_revision,
        Some(first),
        "not all updated: current stays"
    );
    assert_eq!(
        (status.current_replicas, status.updated_replicas),
        (Some(2), Some(1))
    );
    w.apply(&Step::Partition(0));
    w.settle();
    let status = w.set.status.clone().unwrap();
    assert_eq!(status.current_revision, Some(update.clone()));
    assert!(
        ["web-0", "web-1", "web-2"]
            .iter()
            .all(|n| rev(&w, n) == update)
    );
}

#[test]
fn scale_down_deletes_the_highest_ordinal_first_and_one_at_a_time() {
    let mut w = World::new(set(4, false, 0, "img:0"));
    w.settle();
    w.apply(&Step::Scale(1));
    w.sync();
    let going: Vec<&String> = w
        .pods
        .iter()
        .filter(|(_, p)| p.metadata.deletion_timestamp.is_some())
        .map(|(n, _)| n)
        .collect();
    assert_eq!(going, ["web-3"]);
    w.sync();
    assert_eq!(
        w.pods
            .values()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .count(),
        1,
        "waits for web-3 to go"
    );
    w.settle();
    assert_eq!(w.pods.keys().collect::<Vec<_>>(), ["web-0"]);
}

#[test]
fn rolling_back_renumbers_the_old_revision_instead_of_making_a_new_one() {
    let mut w = World::new(set(2, true, 0, "img:0"));
    w.settle();
    let first = w.set.status.clone().unwrap().update_revision.unwrap();
    w.apply(&Step::Image(1));
    w.settle();
    w.apply(&Step::Image(0));
    w.settle();
    let status = w.set.status.clone().unwrap();
    assert_eq!(status.update_revision, Some(first.clone()));
    assert_eq!(w.revisions.len(), 2);
    assert_eq!(w.revisions[&first].revision, 3);
}
