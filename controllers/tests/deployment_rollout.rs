//! The Deployment controller rolling out and scaling, one sync at a time:
//! which ReplicaSet goes to what size, with KCM's events.

mod common;

use std::time::Duration;

use common::*;
use controllers::deployment::{
    DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, POD_TEMPLATE_HASH_LABEL,
    REVISION_ANNOTATION, REVISION_HISTORY_ANNOTATION, reconcile,
};
use controllers::{Action, ReconcileError};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

#[test]
fn a_new_deployment_creates_its_first_replica_set() {
    let d = deployment(10, "nginx:1");
    let r = run(&d, &[]);
    let Some(Action::CreateReplicaSet { rs }) = r.actions.first() else {
        panic!("creates first: {:?}", r.actions);
    };
    let hash = rs
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(POD_TEMPLATE_HASH_LABEL))
        .cloned()
        .expect("hash label");
    let name = format!("web-{hash}");
    assert_eq!(rs.metadata.name.as_deref(), Some(name.as_str()));
    assert_eq!(rs.metadata.namespace.as_deref(), Some("default"));
    let owner = rs.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owner.len(), 1);
    assert_eq!(
        (
            owner[0].api_version.as_str(),
            owner[0].kind.as_str(),
            owner[0].uid.as_str()
        ),
        ("apps/v1", "Deployment", "d-uid")
    );
    assert_eq!(owner[0].controller, Some(true));
    assert_eq!(owner[0].block_owner_deletion, Some(true));
    let spec = rs.spec.as_ref().expect("spec");
    assert_eq!(spec.replicas, Some(10));
    let with_hash = labels(&[("app", "web"), (POD_TEMPLATE_HASH_LABEL, &hash)]);
    assert_eq!(spec.selector.match_labels.as_ref(), Some(&with_hash));
    assert_eq!(
        spec.template
            .as_ref()
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.labels.as_ref()),
        Some(&with_hash)
    );
    assert_eq!(rs.metadata.labels.as_ref(), Some(&with_hash));
    assert_eq!(
        annotation(&rs.metadata, REVISION_ANNOTATION).as_deref(),
        Some("1")
    );
    assert_eq!(
        annotation(&rs.metadata, DESIRED_REPLICAS_ANNOTATION).as_deref(),
        Some("10")
    );
    assert_eq!(
        annotation(&rs.metadata, MAX_REPLICAS_ANNOTATION).as_deref(),
        Some("13")
    );

    assert_eq!(
        event_messages(&r),
        [format!("Scaled up replica set {name} from 0 to 10")]
    );
    assert!(r.actions.contains(&Action::SetOwnerAnnotation {
        key: REVISION_ANNOTATION.into(),
        value: "1".into()
    }));
    let s = deployment_status(&r).expect("status");
    assert_eq!(s.observed_generation, Some(1));
    assert_eq!(s.unavailable_replicas, Some(10));
    assert_eq!(s.replicas, None);
    assert_eq!(
        reason_message(&condition(&s, "Progressing")),
        (
            "True".into(),
            "NewReplicaSetCreated".into(),
            format!("Created new replica set \"{name}\"")
        )
    );
    assert_eq!(
        reason_message(&condition(&s, "Available")),
        (
            "False".into(),
            "MinimumReplicasUnavailable".into(),
            "Deployment does not have minimum availability.".into()
        )
    );
    let p = condition(&s, "Progressing");
    assert_eq!(p.last_update_time, Some(Time(at(0))));
    assert_eq!(r.requeue_after, Some(Duration::from_secs(601)));
}

#[test]
fn a_template_change_surges_the_new_set_and_trims_the_old_within_max_unavailable() {
    let mut d = deployment(10, "nginx:1");
    let old = rs_for(&d, 1, 10, 10, 3600);
    set_image(&mut d, "nginx:2");
    let r = run(&d, std::slice::from_ref(&old));
    let written = written_rses(&r);
    assert_eq!(written.len(), 2, "{:?}", r.actions);
    let new = &written[0];
    assert!(matches!(r.actions[0], Action::CreateReplicaSet { .. }));
    assert_eq!(rs_replicas(new), 3, "10 + 25% surge rounds up to 13");
    assert_eq!(
        annotation(&new.metadata, REVISION_ANNOTATION).as_deref(),
        Some("2")
    );
    assert_eq!(rs_name(&written[1]), rs_name(&old));
    assert_eq!(
        rs_replicas(&written[1]),
        8,
        "25% unavailable rounds down to 2"
    );
    assert_eq!(
        event_messages(&r),
        [
            format!("Scaled up replica set {} from 0 to 3", rs_name(new)),
            format!("Scaled down replica set {} from 10 to 8", rs_name(&old)),
        ]
    );
    assert!(r.actions.contains(&Action::SetOwnerAnnotation {
        key: REVISION_ANNOTATION.into(),
        value: "2".into()
    }));
}

#[test]
fn the_new_set_grows_only_within_max_surge() {
    let mut d = deployment(10, "nginx:1");
    let old = rs_for(&d, 1, 8, 8, 3600);
    set_image(&mut d, "nginx:2");
    let new = rs_for(&d, 2, 3, 3, 60);
    let r = run(&d, &[old, new.clone()]);
    assert_eq!(
        event_messages(&r),
        [format!(
            "Scaled up replica set {} from 3 to 5",
            rs_name(&new)
        )]
    );
}

#[test]
fn old_sets_are_not_trimmed_below_min_available() {
    let mut d = deployment(10, "nginx:1");
    let old = rs_for(&d, 1, 8, 8, 3600);
    set_image(&mut d, "nginx:2");
    let new = rs_for(&d, 2, 5, 0, 60);
    let r = run(&d, &[old, new]);
    assert!(written_rses(&r).is_empty(), "{:?}", r.actions);
}

#[test]
fn unavailable_old_pods_are_removed_first() {
    let mut d = deployment(10, "nginx:1");
    // Old set wants 8 but only 5 are available: 3 are unhealthy.
    let old = rs_for(&d, 1, 8, 5, 3600);
    set_image(&mut d, "nginx:2");
    let new = rs_for(&d, 2, 5, 5, 60);
    let r = run(&d, &[old.clone(), new]);
    // Room: 13 - 8 - 0 = 5; the 3 unhealthy go, then available 10 > 8
    // allows 2 more.
    assert_eq!(
        event_messages(&r),
        [
            format!("Scaled down replica set {} from 8 to 5", rs_name(&old)),
            format!("Scaled down replica set {} from 5 to 3", rs_name(&old)),
        ]
    );
    assert_eq!(written_rses(&r).len(), 1, "one PUT for both steps");
    assert_eq!(rs_replicas(&written_rses(&r)[0]), 3);
}

#[test]
fn recreate_scales_old_to_zero_waits_for_old_pods_then_creates_new_at_full_size() {
    let mut d = deployment(3, "nginx:1");
    set_recreate(&mut d);
    let old = rs_for(&d, 1, 3, 3, 3600);
    set_image(&mut d, "nginx:2");
    let r = reconcile(&d, std::slice::from_ref(&old), &[], at(0)).expect("reconcile");
    assert_eq!(
        event_messages(&r),
        [format!(
            "Scaled down replica set {} from 3 to 0",
            rs_name(&old)
        )]
    );
    assert!(
        !r.actions
            .iter()
            .any(|a| matches!(a, Action::CreateReplicaSet { .. }))
    );

    // Old set at 0 but one of its pods is still terminating: wait.
    let mut drained = old.clone();
    drained.spec.as_mut().expect("spec").replicas = Some(0);
    drained.status = Some(Default::default());
    let mut terminating = pod_of(&old, "old-1", Some(600));
    terminating.metadata.deletion_timestamp = Some(Time(at(-5)));
    let r =
        reconcile(&d, std::slice::from_ref(&drained), &[&terminating], at(0)).expect("reconcile");
    assert!(written_rses(&r).is_empty(), "{:?}", r.actions);

    // A finished old pod does not hold the rollout back.
    if let Some(s) = terminating.status.as_mut() {
        s.phase = Some("Succeeded".into());
    }
    let r = reconcile(&d, &[drained], &[&terminating], at(0)).expect("reconcile");
    let Some(Action::CreateReplicaSet { rs }) = r.actions.first() else {
        panic!("creates: {:?}", r.actions);
    };
    assert_eq!(rs_replicas(rs), 3);
    assert_eq!(
        annotation(&rs.metadata, MAX_REPLICAS_ANNOTATION).as_deref(),
        Some("3")
    );
    assert_eq!(
        event_messages(&r),
        [format!("Scaled up replica set {} from 0 to 3", rs_name(rs))]
    );
}

#[test]
fn scaling_mid_rollout_is_proportional() {
    let mut d = deployment(10, "nginx:1");
    let old = rs_for(&d, 1, 8, 8, 3600);
    set_image(&mut d, "nginx:2");
    let new = rs_for(&d, 2, 5, 0, 60);
    spec(&mut d).replicas = Some(20);
    let r = run(&d, &[old.clone(), new.clone()]);
    // 20 + 25% = 25 allowed, 13 now: +12, split 8:5 of 13 -> +7 and +5.
    assert_eq!(
        event_messages(&r),
        [
            format!("Scaled up replica set {} from 8 to 15", rs_name(&old)),
            format!("Scaled up replica set {} from 5 to 10", rs_name(&new)),
        ]
    );
    for rs in written_rses(&r) {
        assert_eq!(
            annotation(&rs.metadata, DESIRED_REPLICAS_ANNOTATION).as_deref(),
            Some("20")
        );
        assert_eq!(
            annotation(&rs.metadata, MAX_REPLICAS_ANNOTATION).as_deref(),
            Some("25")
        );
    }
}

#[test]
fn a_single_active_set_takes_a_scale_whole() {
    let mut d = deployment(3, "nginx:1");
    let rs = rs_for(&d, 1, 3, 3, 3600);
    spec(&mut d).replicas = Some(5);
    let r = run(&d, std::slice::from_ref(&rs));
    assert_eq!(
        event_messages(&r),
        [format!(
            "Scaled up replica set {} from 3 to 5",
            rs_name(&rs)
        )]
    );
}

#[test]
fn rolling_back_reuses_the_old_set_with_a_new_revision() {
    let mut d = deployment(2, "v1");
    let v1 = rs_for(&d, 1, 0, 0, 4000);
    set_image(&mut d, "v2");
    let v2 = rs_for(&d, 2, 2, 2, 3000);
    set_image(&mut d, "v1"); // kubectl rollout undo patches the template back
    let r = run(&d, &[v1.clone(), v2]);
    let first = written_rses(&r).into_iter().next().expect("v1 updated");
    assert_eq!(rs_name(&first), rs_name(&v1));
    assert_eq!(
        annotation(&first.metadata, REVISION_ANNOTATION).as_deref(),
        Some("3")
    );
    assert_eq!(
        annotation(&first.metadata, REVISION_HISTORY_ANNOTATION).as_deref(),
        Some("1")
    );
    assert!(rs_replicas(&first) > 0, "scaled up in the same PUT");
    assert!(
        !r.actions
            .iter()
            .any(|a| matches!(a, Action::CreateReplicaSet { .. }))
    );
}

#[test]
fn malformed_fenceposts_are_errors_not_panics() {
    let mut d = deployment(4, "v1");
    set_rolling(
        &mut d,
        IntOrString::String("abc%".into()),
        IntOrString::Int(1),
    );
    assert!(matches!(
        reconcile(&d, &[], &[], at(0)),
        Err(ReconcileError::IntOrPercent { .. })
    ));
}

#[test]
fn both_fenceposts_zero_still_rolls_one_pod_at_a_time() {
    let mut d = deployment(4, "v1");
    set_rolling(
        &mut d,
        IntOrString::Int(0),
        IntOrString::String("10%".into()),
    );
    let old = rs_for(&d, 1, 4, 4, 3600);
    set_image(&mut d, "v2");
    let r = run(&d, std::slice::from_ref(&old));
    // No surge: the new set starts at 0, the old one loses one pod.
    let written = written_rses(&r);
    assert_eq!(rs_replicas(&written[0]), 0);
    assert_eq!(
        event_messages(&r),
        [format!(
            "Scaled down replica set {} from 4 to 3",
            rs_name(&old)
        )]
    );
}
