//! The Deployment controller's status, conditions, history and error
//! paths, one sync at a time, with KCM's exact reasons and messages.

mod common;

use std::time::Duration;

use common::*;
use controllers::deployment::{REVISION_ANNOTATION, on_create_conflict, on_create_error};
use controllers::{Action, Reconciled, Status};
use k8s_openapi::api::apps::v1::{DeploymentStatus, ReplicaSetCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};

#[test]
fn a_finished_rollout_reports_success_and_then_costs_nothing() {
    let mut d = deployment(10, "nginx:1");
    let old = rs_for(&d, 1, 0, 0, 3600);
    set_image(&mut d, "nginx:2");
    let new = rs_for(&d, 2, 10, 10, 60);
    let rses = [old, new.clone()];
    let r = run(&d, &rses);
    let s = deployment_status(&r).expect("status");
    assert_eq!(
        (
            s.replicas,
            s.updated_replicas,
            s.ready_replicas,
            s.available_replicas
        ),
        (Some(10), Some(10), Some(10), Some(10))
    );
    assert_eq!(s.unavailable_replicas, None);
    assert_eq!(s.observed_generation, Some(2));
    assert_eq!(
        reason_message(&condition(&s, "Progressing")),
        (
            "True".into(),
            "NewReplicaSetAvailable".into(),
            format!(
                "ReplicaSet \"{}\" has successfully progressed.",
                rs_name(&new)
            )
        )
    );
    assert_eq!(
        reason_message(&condition(&s, "Available")),
        (
            "True".into(),
            "MinimumReplicasAvailable".into(),
            "Deployment has minimum availability.".into()
        )
    );
    assert_eq!(r.requeue_after, None);

    // The same state again, with what was written: nothing to do.
    d.status = Some(s);
    let mut annotations = d.metadata.annotations.clone().unwrap_or_default();
    annotations.insert(REVISION_ANNOTATION.into(), "2".into());
    d.metadata.annotations = Some(annotations);
    assert_eq!(run(&d, &rses), Reconciled::default());
}

#[test]
fn progress_moves_last_update_time_and_keeps_transition_time() {
    let mut d = deployment(10, "nginx:1");
    let old = rs_for(&d, 1, 8, 8, 3600);
    set_image(&mut d, "nginx:2");
    let new = rs_for(&d, 2, 5, 5, 60);
    d.status = Some(DeploymentStatus {
        replicas: Some(13),
        updated_replicas: Some(5),
        available_replicas: Some(10),
        ready_replicas: Some(10),
        conditions: Some(vec![progressing("NewReplicaSetCreated", "True", 120)]),
        ..Default::default()
    });
    // More available than the stored status says: progress.
    let mut new_more = new.clone();
    if let Some(s) = new_more.status.as_mut() {
        s.available_replicas = Some(5);
    }
    let mut old_more = old.clone();
    if let Some(s) = old_more.status.as_mut() {
        s.available_replicas = Some(8);
        s.ready_replicas = Some(8);
    }
    let r = run(&d, &[old_more, new_more]);
    let s = deployment_status(&r).expect("status");
    let c = condition(&s, "Progressing");
    assert_eq!(
        reason_message(&c),
        (
            "True".into(),
            "ReplicaSetUpdated".into(),
            format!("ReplicaSet \"{}\" is progressing.", rs_name(&new))
        )
    );
    assert_eq!(c.last_update_time, Some(Time(at(0))));
    assert_eq!(c.last_transition_time, Some(Time(at(-3600))));
}

#[test]
fn no_progress_past_the_deadline_times_out_and_before_it_requeues() {
    let mut d = deployment(10, "nginx:1");
    let old = rs_for(&d, 1, 8, 8, 3600);
    set_image(&mut d, "nginx:2");
    let new = rs_for(&d, 2, 5, 0, 60);
    let stored = DeploymentStatus {
        observed_generation: Some(2),
        replicas: Some(13),
        updated_replicas: Some(5),
        ready_replicas: Some(8),
        available_replicas: Some(8),
        unavailable_replicas: Some(5),
        conditions: Some(vec![progressing("ReplicaSetUpdated", "True", 300)]),
        ..Default::default()
    };
    d.status = Some(stored.clone());
    let r = run(&d, &[old.clone(), new.clone()]);
    assert_eq!(r.requeue_after, Some(Duration::from_secs(301)));

    d.status = Some(DeploymentStatus {
        conditions: Some(vec![progressing("ReplicaSetUpdated", "True", 601)]),
        ..stored
    });
    let r = run(&d, &[old, new.clone()]);
    let s = deployment_status(&r).expect("status");
    let c = condition(&s, "Progressing");
    assert_eq!(
        reason_message(&c),
        (
            "False".into(),
            "ProgressDeadlineExceeded".into(),
            format!(
                "ReplicaSet \"{}\" has timed out progressing.",
                rs_name(&new)
            )
        )
    );
    assert_eq!(c.last_transition_time, Some(Time(at(0))));
    assert_eq!(r.requeue_after, None);
}

#[test]
fn pausing_and_resuming_mark_progressing_unknown() {
    let mut d = deployment(3, "nginx:1");
    let rs = rs_for(&d, 1, 3, 3, 3600);
    set_image(&mut d, "nginx:2");
    spec(&mut d).paused = Some(true);
    let r = run(&d, std::slice::from_ref(&rs));
    assert!(written_rses(&r).is_empty(), "paused: no rollout");
    let s = deployment_status(&r).expect("status");
    assert_eq!(
        reason_message(&condition(&s, "Progressing")),
        (
            "Unknown".into(),
            "DeploymentPaused".into(),
            "Deployment is paused".into()
        )
    );
    d.status = Some(s);
    spec(&mut d).paused = Some(false);
    let r = run(&d, &[rs]);
    let s = deployment_status(&r).expect("status");
    let c = condition(&s, "Progressing");
    assert_eq!(c.reason.as_deref(), Some("NewReplicaSetCreated"));
    assert!(
        r.actions
            .iter()
            .any(|a| matches!(a, Action::CreateReplicaSet { .. }))
    );
}

#[test]
fn resuming_says_resumed_while_the_rollout_waits() {
    let mut d = deployment(3, "nginx:1");
    let rs = rs_for(&d, 1, 3, 3, 3600);
    d.status = Some(DeploymentStatus {
        conditions: Some(vec![progressing("DeploymentPaused", "Unknown", 60)]),
        ..Default::default()
    });
    let r = run(&d, &[rs]);
    let s = deployment_status(&r).expect("status");
    // Resumed, then the complete rollout is recognised in the same sync.
    assert_eq!(
        condition(&s, "Progressing").reason.as_deref(),
        Some("NewReplicaSetAvailable")
    );
}

#[test]
fn old_sets_beyond_the_history_limit_are_deleted_lowest_revision_first() {
    let mut d = deployment(2, "v1");
    spec(&mut d).revision_history_limit = Some(1);
    let r1 = rs_for(&d, 1, 0, 0, 4000);
    set_image(&mut d, "v2");
    let r2 = rs_for(&d, 2, 0, 0, 3000);
    set_image(&mut d, "v3");
    let mut r3 = rs_for(&d, 3, 0, 0, 2000);
    if let Some(s) = r3.status.as_mut() {
        s.replicas = 1; // a pod still terminating: kept for now
    }
    set_image(&mut d, "v4");
    let r4 = rs_for(&d, 4, 2, 2, 1000);
    d.status = Some(DeploymentStatus {
        observed_generation: Some(4),
        replicas: Some(2),
        updated_replicas: Some(2),
        available_replicas: Some(2),
        ready_replicas: Some(2),
        ..Default::default()
    });
    let r = run(&d, &[r3.clone(), r1.clone(), r4, r2.clone()]);
    let deleted: Vec<String> = r
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::DeleteReplicaSet { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, [rs_name(&r1), rs_name(&r2)]);
}

#[test]
fn an_existing_new_set_without_progress_tracking_is_found() {
    let mut d = deployment(2, "v1");
    let rs = rs_for(&d, 1, 2, 0, 60);
    // Counts as stored: no progress to report over the found condition.
    d.status = Some(DeploymentStatus {
        replicas: Some(2),
        updated_replicas: Some(2),
        ..Default::default()
    });
    let r = run(&d, std::slice::from_ref(&rs));
    assert!(r.actions.contains(&Action::SetOwnerAnnotation {
        key: REVISION_ANNOTATION.into(),
        value: "1".into()
    }));
    let s = deployment_status(&r).expect("status");
    assert_eq!(
        reason_message(&condition(&s, "Progressing")),
        (
            "True".into(),
            "FoundNewReplicaSet".into(),
            format!("Found new replica set \"{}\"", rs_name(&rs))
        )
    );
}

#[test]
fn replica_set_failures_are_promoted_to_the_deployment() {
    let d = deployment(2, "v1");
    let mut rs = rs_for(&d, 1, 2, 0, 60);
    if let Some(s) = rs.status.as_mut() {
        s.conditions = Some(vec![ReplicaSetCondition {
            type_: "ReplicaFailure".into(),
            status: "True".into(),
            reason: Some("FailedCreate".into()),
            message: Some("pods \"web-\" is forbidden: exceeded quota".into()),
            last_transition_time: Some(Time(at(-30))),
        }]);
    }
    let s = deployment_status(&run(&d, &[rs])).expect("status");
    let c = condition(&s, "ReplicaFailure");
    assert_eq!(
        reason_message(&c),
        (
            "True".into(),
            "FailedCreate".into(),
            "pods \"web-\" is forbidden: exceeded quota".into()
        )
    );
    assert_eq!(c.last_update_time, Some(Time(at(-30))));
}

#[test]
fn a_deployment_being_deleted_only_gets_its_status() {
    let mut d = deployment(5, "v1");
    let rs = rs_for(&d, 1, 2, 2, 60);
    d.metadata.deletion_timestamp = Some(Time(at(-1)));
    let r = run(&d, &[rs]);
    assert!(written_rses(&r).is_empty());
    assert_eq!(
        r.actions
            .iter()
            .filter(|a| matches!(a, Action::WriteStatus(_)))
            .count(),
        1
    );
}

#[test]
fn a_selector_of_everything_is_refused() {
    let mut d = deployment(1, "v1");
    spec(&mut d).selector = LabelSelector::default();
    let r = run(&d, &[]);
    let e = r.events().next().expect("event");
    assert_eq!(e.reason, "SelectingAll");
    assert_eq!(
        e.message,
        "This deployment is selecting all pods. A non-empty selector is required."
    );
    assert_eq!(
        deployment_status(&r).and_then(|s| s.observed_generation),
        Some(1)
    );
}

#[test]
fn create_errors_and_conflicts_are_reported_as_kcm_does() {
    let d = deployment(2, "v1");
    let actions = on_create_error(&d, "web-abc", "quota exceeded", at(0));
    let Action::WriteStatus(Status::Deployment(s)) = &actions[0] else {
        panic!("status first");
    };
    let c = condition(s, "Progressing");
    assert_eq!(
        reason_message(&c),
        (
            "False".into(),
            "ReplicaSetCreateError".into(),
            "Failed to create new replica set \"web-abc\": quota exceeded".into()
        )
    );
    let Action::Event(e) = &actions[1] else {
        panic!("then the event");
    };
    assert_eq!(e.reason, "ReplicaSetCreateError");
    assert_eq!(
        e.message,
        "Failed to create new replica set \"web-abc\": quota exceeded"
    );

    // Ours, same template: a slow cache, nothing to do.
    let ours = rs_for(&d, 1, 0, 0, 1);
    assert_eq!(on_create_conflict(&d, &ours), None);
    // Someone else's object of that name: a collision.
    let mut theirs = ours.clone();
    theirs.metadata.owner_references = None;
    let Some(Action::WriteStatus(Status::Deployment(s))) = on_create_conflict(&d, &theirs) else {
        panic!("collision bump");
    };
    assert_eq!(s.collision_count, Some(1));
    // With collisionCount 1 the next ReplicaSet gets another name.
    let mut bumped = d.clone();
    bumped.status = Some(s);
    let first = written_rses(&run(&d, &[])).remove(0);
    let second = written_rses(&run(&bumped, &[])).remove(0);
    assert_ne!(rs_name(&first), rs_name(&second));
}
