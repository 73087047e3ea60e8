//! Rules of one StatefulSet sync, one at a time.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    ControllerRevision, StatefulSet, StatefulSetSpec, StatefulSetStatus, StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{
    Container, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::jiff::Timestamp;

use super::identity::{POD_INDEX_LABEL, POD_NAME_LABEL, REVISION_LABEL};
use super::reconcile;
use crate::{Action, Reconciled, Status, controller_ref};

fn now() -> Timestamp {
    "2024-06-01T12:00:00Z".parse().expect("now")
}

fn app() -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_owned(), "web".to_owned())])
}

fn set(replicas: i32, policy: &str, strategy: &str) -> StatefulSet {
    StatefulSet {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            uid: Some("set-uid".into()),
            generation: Some(2),
            ..Default::default()
        },
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            service_name: Some("nginx".into()),
            pod_management_policy: Some(policy.into()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some(strategy.into()),
                rolling_update: None,
            }),
            selector: LabelSelector {
                match_labels: Some(app()),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(app()),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "c".into(),
                        image: Some("nginx:1".into()),
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

/// The revision the first sync of `s` creates (its template's).
fn first_revision(s: &StatefulSet) -> ControllerRevision {
    let r = reconcile(s, &[], &[], now()).expect("reconciles");
    r.actions
        .into_iter()
        .find_map(|a| match a {
            Action::CreateControllerRevision { mut revision } => {
                revision.metadata.uid = Some("rev-uid".into());
                Some(revision)
            }
            _ => None,
        })
        .expect("a revision")
}

fn pod(name: &str, revision: &str, phase: &str, ready: bool) -> Pod {
    let mut labels = app();
    labels.insert(REVISION_LABEL.into(), revision.into());
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(format!("{name}-uid")),
            labels: Some(labels),
            owner_references: Some(vec![controller_ref(&set(
                1,
                "OrderedReady",
                "RollingUpdate",
            ))]),
            ..Default::default()
        },
        spec: None,
        status: Some(PodStatus {
            phase: Some(phase.into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                last_transition_time: Some(Time(now())),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

fn created(r: &Reconciled) -> Vec<Pod> {
    r.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreatePod { pod } => Some(pod.clone()),
            _ => None,
        })
        .collect()
}

fn deleted(r: &Reconciled) -> Vec<String> {
    r.pod_deletions().map(str::to_owned).collect()
}

#[test]
fn a_pod_has_its_ordinal_name_stable_labels_dns_identity_and_controller_ref() {
    let s = set(1, "OrderedReady", "RollingUpdate");
    let r = reconcile(&s, &[], &[], now()).expect("reconciles");
    let rev = first_revision(&s);
    let rev_name = rev.metadata.name.clone().expect("named");
    assert!(rev_name.starts_with("web-"));
    assert!(
        matches!(&r.actions[0], Action::CreateControllerRevision { .. }),
        "the revision comes before the pods made from it"
    );
    let pods = created(&r);
    assert_eq!(pods.len(), 1);
    let p = &pods[0];
    assert_eq!(p.metadata.name.as_deref(), Some("web-0"));
    assert_eq!(p.metadata.generate_name.as_deref(), Some("web-"));
    let labels = p.metadata.labels.clone().expect("labels");
    assert_eq!(labels[POD_NAME_LABEL], "web-0");
    assert_eq!(labels[POD_INDEX_LABEL], "0");
    assert_eq!(labels[REVISION_LABEL], rev_name);
    assert_eq!(labels["app"], "web");
    let spec = p.spec.clone().expect("spec");
    assert_eq!(spec.hostname.as_deref(), Some("web-0"));
    assert_eq!(
        spec.subdomain, None,
        "no cluster DNS: mesopod refuses subdomain"
    );
    let owner = &p.metadata.owner_references.as_ref().expect("owned")[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        ("StatefulSet", "web", Some(true), Some(true))
    );
    let Some(Status::StatefulSet(st)) = r.status() else {
        panic!("a status")
    };
    assert_eq!(st.observed_generation, Some(2));
    assert_eq!(st.update_revision.as_deref(), Some(rev_name.as_str()));
    assert_eq!(st.current_revision.as_deref(), Some(rev_name.as_str()));
}

#[test]
fn events_are_worded_as_kube_controller_manager_words_them() {
    use super::events::*;
    assert_eq!(
        created("web-0", "web").message,
        "create Pod web-0 in StatefulSet web successful"
    );
    assert_eq!(created("web-0", "web").reason, "SuccessfulCreate");
    assert_eq!(
        deleted("web-2", "web").message,
        "delete Pod web-2 in StatefulSet web successful"
    );
    assert_eq!(deleted("web-2", "web").reason, "SuccessfulDelete");
    assert_eq!(
        create_failed("web-0", "web", "boom").message,
        "create Pod web-0 in StatefulSet web failed error: boom"
    );
}

#[test]
fn parallel_creates_every_missing_ordinal_at_once() {
    let s = set(3, "Parallel", "RollingUpdate");
    let rev = first_revision(&s);
    let name = rev.metadata.name.clone().expect("named");
    let p1 = pod("web-1", &name, "Pending", false);
    let r = reconcile(&s, &[&p1], &[rev], now()).expect("reconciles");
    let names: Vec<_> = created(&r)
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(names, ["web-0", "web-2"]);
}

#[test]
fn on_delete_leaves_outdated_pods_alone_and_makes_deleted_ones_at_the_new_revision() {
    let mut s = set(2, "OrderedReady", "OnDelete");
    let old = first_revision(&s);
    let old_name = old.metadata.name.clone().expect("named");
    s.status = Some(StatefulSetStatus {
        current_revision: Some(old_name.clone()),
        update_revision: Some(old_name.clone()),
        ..Default::default()
    });
    s.spec
        .as_mut()
        .expect("spec")
        .template
        .spec
        .as_mut()
        .expect("pod spec")
        .containers[0]
        .image = Some("nginx:2".into());
    let p0 = pod("web-0", &old_name, "Running", true);
    let r = reconcile(&s, &[&p0], std::slice::from_ref(&old), now()).expect("reconciles");
    assert!(deleted(&r).is_empty(), "OnDelete deletes nothing itself");
    let new = r
        .actions
        .iter()
        .find_map(|a| match a {
            Action::CreateControllerRevision { revision } => Some(revision.clone()),
            _ => None,
        })
        .expect("a new revision");
    assert_eq!(new.revision, 2);
    let made = created(&r);
    assert_eq!(made.len(), 1);
    assert_eq!(
        made[0].metadata.labels.as_ref().expect("labels")[REVISION_LABEL],
        new.metadata.name.clone().expect("named"),
        "a pod made anew is made at the update revision"
    );
}

#[test]
fn a_failed_pod_is_deleted_to_be_made_again_with_a_warning() {
    let s = set(1, "OrderedReady", "RollingUpdate");
    let rev = first_revision(&s);
    let name = rev.metadata.name.clone().expect("named");
    let p0 = pod("web-0", &name, "Failed", false);
    let r = reconcile(&s, &[&p0], &[rev], now()).expect("reconciles");
    assert_eq!(deleted(&r), ["web-0"]);
    let e = r.events().next().expect("an event");
    assert_eq!(e.reason, "RecreatingFailedPod");
    assert_eq!(
        e.message,
        "StatefulSet ns/web is recreating failed Pod web-0"
    );
    assert!(created(&r).is_empty(), "made again once it is gone");
}

#[test]
fn a_revision_name_taken_by_other_data_counts_a_collision() {
    let s = set(1, "OrderedReady", "RollingUpdate");
    let mut squatter = first_revision(&s);
    squatter.data = Some(RawExtension(serde_json::json!({"other": true})));
    squatter.metadata.owner_references = None;
    let r = reconcile(&s, &[], std::slice::from_ref(&squatter), now()).expect("reconciles");
    assert!(created(&r).is_empty());
    let Some(Status::StatefulSet(st)) = r.status() else {
        panic!("a status")
    };
    assert_eq!(st.collision_count, Some(1));
    let mut s = s;
    s.status = Some(st.clone());
    let next = first_revision(&s);
    assert_ne!(next.metadata.name, squatter.metadata.name);
}

#[test]
fn a_set_being_deleted_only_writes_its_status() {
    let mut s = set(3, "OrderedReady", "RollingUpdate");
    s.metadata.deletion_timestamp = Some(Time(now()));
    let r = reconcile(&s, &[], &[], now()).expect("reconciles");
    assert!(
        r.actions
            .iter()
            .all(|a| matches!(a, Action::WriteStatus(_))),
        "{:?}",
        r.actions
    );
}

#[test]
fn orphans_with_its_names_are_adopted_and_pods_of_other_names_are_not() {
    let s = set(2, "OrderedReady", "RollingUpdate");
    let rev = first_revision(&s);
    let name = rev.metadata.name.clone().expect("named");
    let mut orphan = pod("web-0", &name, "Running", true);
    orphan.metadata.owner_references = None;
    let mut stranger = pod("other-0", &name, "Running", true);
    stranger.metadata.owner_references = None;
    let mut gone = pod("web-1", &name, "Running", true);
    gone.metadata.labels = Some(BTreeMap::new());
    let r = reconcile(&s, &[&orphan, &stranger, &gone], &[rev], now()).expect("reconciles");
    let adopted: Vec<_> = r
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::AdoptPod { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(adopted, ["web-0"]);
    assert!(
        r.actions
            .iter()
            .any(|a| matches!(a, Action::ReleasePod { name, .. } if name == "web-1")),
        "a pod it no longer selects is released"
    );
}

#[test]
fn orphan_revisions_it_selects_are_adopted_and_count_as_its_history() {
    let s = set(1, "OrderedReady", "RollingUpdate");
    let mut orphan = first_revision(&s);
    orphan.metadata.owner_references = None;
    let name = orphan.metadata.name.clone().expect("named");
    let p0 = pod("web-0", &name, "Running", true);
    let r = reconcile(&s, &[&p0], std::slice::from_ref(&orphan), now()).expect("reconciles");
    assert!(
        r.actions
            .iter()
            .any(|a| matches!(a, Action::AdoptControllerRevision { name: n, .. } if *n == name)),
        "{:?}",
        r.actions
    );
    assert!(
        !r.actions
            .iter()
            .any(|a| matches!(a, Action::CreateControllerRevision { .. })),
        "its template's revision exists: none is made"
    );
    assert!(deleted(&r).is_empty(), "its pod is at the update revision");
}
