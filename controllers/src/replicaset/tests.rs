use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ReplicaSetSpec, ReplicaSetStatus};
use k8s_openapi::api::core::v1::{
    Container, PodCondition, PodSpec, PodStatus, ReplicationControllerSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};

use super::*;

const NOW: &str = "2024-01-01T12:00:00Z";

fn ts(s: &str) -> Timestamp {
    s.parse().expect("test timestamp")
}

fn web() -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_owned(), "web".to_owned())])
}

fn template() -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(web()),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: Some("nginx".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
    }
}

fn rs(replicas: i32) -> ReplicaSet {
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            uid: Some("rs-uid".into()),
            generation: Some(2),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(web()),
                match_expressions: None,
            },
            template: Some(template()),
            min_ready_seconds: None,
        }),
        status: None,
    }
}

/// A running, ready pod owned by the ReplicaSet, ready since `ready_at`.
fn pod(name: &str, ready_at: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(format!("{name}-uid")),
            labels: Some(web()),
            creation_timestamp: Some(Time(ts("2024-01-01T10:00:00Z"))),
            owner_references: Some(vec![controller_ref(&rs(0))]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some("n1".into()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_transition_time: Some(Time(ts(ready_at))),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

fn run(rs: &ReplicaSet, pods: &[Pod]) -> Reconciled {
    let pods: Vec<&Pod> = pods.iter().collect();
    reconcile(rs, &pods, &ReplicaContext::default(), ts(NOW)).expect("reconcile")
}

fn rs_status(r: &Reconciled) -> Option<ReplicaSetStatus> {
    match r.status() {
        Some(Status::ReplicaSet(s)) => Some(s.clone()),
        _ => None,
    }
}

#[test]
fn creates_the_missing_pods_from_the_template() {
    let r = run(&rs(3), &[pod("a", "2024-01-01T11:00:00Z")]);
    assert_eq!(r.pod_creations(), 2);
    let Some(Action::CreatePod { pod }) = r.actions.first() else {
        panic!("first action is a create: {:?}", r.actions);
    };
    assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-"));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(pod.metadata.labels, Some(web()));
    assert_eq!(
        pod.metadata.owner_references,
        Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web".into(),
            uid: "rs-uid".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }])
    );
    let s = rs_status(&r).expect("status written");
    assert_eq!(s.replicas, 1);
    assert_eq!(s.ready_replicas, Some(1));
    assert_eq!(s.available_replicas, Some(1));
    assert_eq!(s.fully_labeled_replicas, Some(1));
    assert_eq!(s.observed_generation, Some(2));
}

#[test]
fn one_sync_creates_at_most_burst_replicas() {
    let r = run(&rs(i32::MAX), &[]);
    assert_eq!(r.pod_creations(), BURST_REPLICAS);
}

#[test]
fn replicas_default_to_one() {
    let mut one = rs(0);
    if let Some(s) = one.spec.as_mut() {
        s.replicas = None;
    }
    assert_eq!(run(&one, &[]).pod_creations(), 1);
}

#[test]
fn deletes_the_surplus_in_rank_order() {
    let mut pending = pod("pending", "2024-01-01T11:00:00Z");
    if let Some(s) = pending.status.as_mut() {
        s.phase = Some("Pending".into());
        s.conditions = None;
    }
    let pods = [
        pod("old", "2024-01-01T10:00:00Z"),
        pod("recent", "2024-01-01T11:59:00Z"),
        pending,
    ];
    let r = run(&rs(1), &pods);
    assert_eq!(r.pod_deletions().collect::<Vec<_>>(), ["pending", "recent"]);
    assert!(r.actions.contains(&Action::DeletePod {
        name: "pending".into(),
        uid: "pending-uid".into()
    }));
}

#[test]
fn terminating_and_finished_pods_are_not_counted() {
    let mut terminating = pod("t", "2024-01-01T11:00:00Z");
    terminating.metadata.deletion_timestamp = Some(Time(ts(NOW)));
    let mut done = pod("d", "2024-01-01T11:00:00Z");
    if let Some(s) = done.status.as_mut() {
        s.phase = Some("Succeeded".into());
    }
    let r = run(
        &rs(2),
        &[terminating, done, pod("a", "2024-01-01T11:00:00Z")],
    );
    assert_eq!(r.pod_creations(), 1);
    assert_eq!(rs_status(&r).map(|s| s.replicas), Some(1));
}

#[test]
fn adopts_orphans_and_releases_strays_before_managing() {
    let mut orphan = pod("orphan", "2024-01-01T11:00:00Z");
    orphan.metadata.owner_references = None;
    let mut stray = pod("stray", "2024-01-01T11:00:00Z");
    stray.metadata.labels = Some(BTreeMap::from([("app".to_owned(), "db".to_owned())]));
    let r = run(&rs(1), &[orphan, stray]);
    assert_eq!(
        r.actions[0],
        Action::AdoptPod {
            name: "orphan".into(),
            uid: "orphan-uid".into(),
            owner_ref: controller_ref(&rs(0)),
        }
    );
    assert_eq!(
        r.actions[1],
        Action::ReleasePod {
            name: "stray".into(),
            uid: "stray-uid".into(),
            owner_uid: "rs-uid".into(),
        }
    );
    assert_eq!(r.pod_creations(), 0);
    assert_eq!(r.pod_deletions().count(), 0);
}

#[test]
fn unsatisfied_expectations_or_deletion_only_update_status() {
    let ctx = ReplicaContext {
        related_pods: &[],
        expectations_satisfied: false,
    };
    let r = reconcile(&rs(3), &[], &ctx, ts(NOW)).expect("reconcile");
    assert_eq!(r.pod_creations(), 0);
    assert_eq!(rs_status(&r).map(|s| s.observed_generation), Some(Some(2)));

    let mut deleting = rs(3);
    deleting.metadata.deletion_timestamp = Some(Time(ts(NOW)));
    let r = run(&deleting, &[]);
    assert_eq!(r.pod_creations(), 0);
}

#[test]
fn an_unchanged_status_is_not_written() {
    let mut steady = rs(1);
    steady.status = Some(ReplicaSetStatus {
        replicas: 1,
        fully_labeled_replicas: Some(1),
        ready_replicas: Some(1),
        available_replicas: Some(1),
        observed_generation: Some(2),
        ..Default::default()
    });
    let r = run(&steady, &[pod("a", "2024-01-01T11:00:00Z")]);
    assert_eq!(r, Reconciled::default());
}

#[test]
fn a_ready_pod_below_min_ready_seconds_requeues_for_when_it_is_available() {
    let mut slow = rs(1);
    if let Some(s) = slow.spec.as_mut() {
        s.min_ready_seconds = Some(30);
    }
    let r = run(&slow, &[pod("a", "2024-01-01T11:59:50Z")]);
    let s = rs_status(&r).expect("status");
    assert_eq!(s.ready_replicas, Some(1));
    assert_eq!(s.available_replicas, None);
    assert_eq!(r.requeue_after, Some(std::time::Duration::from_secs(21)));
}

#[test]
fn a_template_without_labels_fails_with_replica_failure() {
    let mut bad = rs(1);
    if let Some(t) = bad.spec.as_mut().and_then(|s| s.template.as_mut()) {
        t.metadata = None;
    }
    let r = run(&bad, &[]);
    assert_eq!(r.pod_creations(), 0);
    let conds = rs_status(&r).and_then(|s| s.conditions).unwrap_or_default();
    assert_eq!(conds.len(), 1);
    assert_eq!(conds[0].type_, "ReplicaFailure");
    assert_eq!(conds[0].reason.as_deref(), Some("FailedCreate"));
    assert_eq!(
        conds[0].message.as_deref(),
        Some("unable to create pods, no labels")
    );
}

#[test]
fn a_failed_create_is_reported_and_a_clean_sync_clears_it() {
    let failure = ManageFailure {
        reason: FailureReason::FailedCreate,
        message: "quota exceeded".into(),
    };
    let Some(Action::WriteStatus(Status::ReplicaSet(s))) =
        status_after_failure(&rs(2), &[], &failure, ts(NOW)).expect("status")
    else {
        panic!("a status write");
    };
    let conds = s.conditions.clone().unwrap_or_default();
    assert_eq!(conds[0].reason.as_deref(), Some("FailedCreate"));
    assert_eq!(conds[0].message.as_deref(), Some("quota exceeded"));

    let mut failed = rs(0);
    failed.status = Some(s);
    let cleared = rs_status(&run(&failed, &[])).expect("status");
    assert_eq!(cleared.conditions, None);
}

#[test]
fn an_invalid_selector_is_an_error() {
    let mut bad = rs(1);
    if let Some(s) = bad.spec.as_mut() {
        s.selector.match_expressions = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                key: "a".into(),
                operator: "Near".into(),
                values: None,
            },
        ]);
    }
    let err = reconcile(&bad, &[], &ReplicaContext::default(), ts(NOW)).expect_err("invalid");
    assert_eq!(
        err.to_string(),
        "invalid selector: \"Near\" is not a valid label selector operator"
    );
}

#[test]
fn replication_controllers_use_the_same_rules_and_their_own_status() {
    let rc = ReplicationController {
        metadata: ObjectMeta {
            name: Some("legacy".into()),
            namespace: Some("ns".into()),
            uid: Some("rc-uid".into()),
            ..Default::default()
        },
        spec: Some(ReplicationControllerSpec {
            replicas: Some(2),
            selector: None, // defaulted from the template's labels
            template: Some(template()),
            min_ready_seconds: None,
        }),
        status: None,
    };
    let mut orphan = pod("a", "2024-01-01T11:00:00Z");
    orphan.metadata.owner_references = None;
    let r = reconcile_replication_controller(&rc, &[&orphan], &ReplicaContext::default(), ts(NOW));
    let Some(Action::AdoptPod { owner_ref, .. }) = r.actions.first() else {
        panic!("adopts first");
    };
    assert_eq!(owner_ref.api_version, "v1");
    assert_eq!(owner_ref.kind, "ReplicationController");
    assert_eq!(r.pod_creations(), 1);
    let Some(Status::ReplicationController(s)) = r.status() else {
        panic!("rc status");
    };
    assert_eq!(s.replicas, 1);
}

#[test]
fn event_messages_are_kcms() {
    assert_eq!(
        events::created("web-x2v9k").message,
        "Created pod: web-x2v9k"
    );
    assert_eq!(events::created("p").reason, "SuccessfulCreate");
    assert_eq!(events::deleted("p").message, "Deleted pod: p");
    assert_eq!(
        events::create_failed("boom").message,
        "Error creating: boom"
    );
    assert_eq!(events::create_failed("boom").type_.as_str(), "Warning");
    assert_eq!(
        events::delete_failed("boom").message,
        "Error deleting: boom"
    );
    assert_eq!(events::delete_failed("boom").reason, "FailedDelete");
}
