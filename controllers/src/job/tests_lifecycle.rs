//! Suspend and resume, activeDeadlineSeconds, deleted pods,
//! podReplacementPolicy, work queues, adoption, finished Jobs and bad
//! input, driven through the simulated world.

#![allow(unused_must_use)] // `step()` applies what it returns.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::sim::{World, job, spec, ts};
use super::*;

fn cond(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> (String, String, String, String) {
    (type_.into(), status.into(), reason.into(), message.into())
}

#[test]
fn suspend_deletes_the_active_pods_uncounted_and_resume_restarts_the_clock() {
    let mut w = World::new(job(Some(4), 2));
    w.step();
    w.run_all();
    let started = w.status().start_time;
    spec(&mut w.job).suspend = Some(true);
    w.advance(30);
    let s = w.step();
    // Each pod loses its finalizer, then is deleted: not a failure.
    let kinds: Vec<&str> = s
        .reconciled
        .actions
        .iter()
        .map(|a| match a {
            Action::RemovePodFinalizer { .. } => "unfinalize",
            Action::DeletePod { .. } => "delete",
            Action::WriteStatus(_) => "status",
            Action::Event(_) => "event",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "unfinalize",
            "delete",
            "unfinalize",
            "delete",
            "status",
            "event"
        ]
    );
    assert_eq!(
        w.conditions(),
        [cond("Suspended", "True", "JobSuspended", "Job suspended")]
    );
    assert_eq!(w.status().start_time, started, "suspending keeps startTime");
    w.kill_terminating();
    w.settle(3);
    let st = w.status();
    assert_eq!(
        (st.active, st.failed, st.terminating),
        (None, None, Some(0))
    );
    assert!(w.pods.is_empty());

    spec(&mut w.job).suspend = Some(false);
    w.advance(60);
    let s = w.step();
    assert_eq!(s.reconciled.pod_creations(), 2);
    assert_eq!(
        w.conditions(),
        [cond("Suspended", "False", "JobResumed", "Job resumed")]
    );
    assert_eq!(w.status().start_time.map(|t| t.0), Some(w.now));
    assert_eq!(
        w.event_log(),
        [
            ("Suspended".to_owned(), "Job suspended".to_owned()),
            ("Resumed".to_owned(), "Job resumed".to_owned())
        ]
    );
}

#[test]
fn a_job_resumed_after_its_deadline_gets_the_whole_deadline_again() {
    let mut j = job(Some(1), 1);
    spec(&mut j).active_deadline_seconds = Some(60);
    let mut w = World::new(j);
    w.step();
    w.advance(30);
    spec(&mut w.job).suspend = Some(true);
    w.step();
    w.kill_terminating();
    w.settle(3);
    w.advance(3600);
    spec(&mut w.job).suspend = Some(false);
    let s = w.step();
    assert!(
        w.condition("FailureTarget").is_none(),
        "{:?}",
        w.conditions()
    );
    assert_eq!(s.reconciled.pod_creations(), 1);
    assert_eq!(s.reconciled.requeue_after, Some(Duration::from_secs(60)));
    w.advance(60);
    w.step();
    assert_eq!(
        w.condition("FailureTarget").and_then(|c| c.reason),
        Some("DeadlineExceeded".into())
    );
}

#[test]
fn a_job_created_suspended_has_no_start_time_until_resumed() {
    let mut j = job(Some(1), 1);
    spec(&mut j).suspend = Some(true);
    spec(&mut j).active_deadline_seconds = Some(5);
    let mut w = World::new(j);
    let s = w.step();
    assert_eq!(s.reconciled.pod_creations(), 0);
    assert_eq!(
        s.reconciled.requeue_after, None,
        "no deadline while suspended"
    );
    assert_eq!(w.status().start_time, None);
    assert!(w.condition("Suspended").is_some());
    w.advance(100);
    assert_eq!(w.settle(2), 0);
    spec(&mut w.job).suspend = Some(false);
    let s = w.step();
    assert_eq!(s.reconciled.pod_creations(), 1);
    assert_eq!(s.reconciled.requeue_after, Some(Duration::from_secs(5)));
}

#[test]
fn active_deadline_seconds_fails_the_job_and_requeues_for_it() {
    let mut j = job(Some(3), 1);
    spec(&mut j).active_deadline_seconds = Some(100);
    let mut w = World::new(j);
    let s = w.step();
    assert_eq!(s.reconciled.requeue_after, Some(Duration::from_secs(100)));
    w.run_all();
    w.advance(40);
    assert_eq!(
        w.sync().reconciled.requeue_after,
        Some(Duration::from_secs(60))
    );
    w.advance(60);
    let s = w.step();
    assert_eq!(s.reconciled.pod_deletions().count(), 1);
    assert_eq!(
        w.conditions(),
        [cond(
            "FailureTarget",
            "True",
            "DeadlineExceeded",
            "Job was active longer than specified deadline"
        )]
    );
    w.kill_terminating();
    w.settle(4);
    assert_eq!(
        w.condition("Failed").and_then(|c| c.reason),
        Some("DeadlineExceeded".into())
    );
    assert_eq!(
        w.status().failed,
        Some(1),
        "the pod it deleted counts as failed"
    );
}

#[test]
fn a_pod_deleted_before_it_finished_counts_as_failed() {
    let mut w = World::new(job(Some(2), 2));
    w.step();
    w.run_all();
    let victim = w.created[0].clone();
    w.user_delete(&victim);
    let s = w.step();
    // Its replacement is made at once (TerminatingOrFailed), and it is
    // recorded as failed and let go.
    assert_eq!(s.reconciled.pod_creations(), 1);
    let st = w.status();
    assert_eq!(st.terminating, Some(1));
    let uid = w.pod(&victim).metadata.uid.clone().unwrap_or_default();
    assert_eq!(
        st.uncounted_terminated_pods.and_then(|u| u.failed),
        Some(vec![uid])
    );
    w.step();
    assert_eq!(w.status().failed, Some(1));
    w.kill_terminating();
    w.step();
    assert_eq!(w.status().failed, Some(1), "counted once");
    assert_eq!(w.status().terminating, Some(0));
}

#[test]
fn replacement_policy_failed_waits_for_the_deleted_pod_to_end() {
    let mut j = job(Some(2), 2);
    spec(&mut j).pod_replacement_policy = Some("Failed".into());
    let mut w = World::new(j);
    w.step();
    w.run_all();
    let victim = w.created[0].clone();
    w.user_delete(&victim);
    let s = w.step();
    assert_eq!(s.reconciled.pod_creations(), 0, "not while it terminates");
    assert_eq!(w.status().terminating, Some(1));
    assert_eq!(
        w.status().uncounted_terminated_pods.and_then(|u| u.failed),
        None
    );
    w.kill_terminating();
    w.step();
    w.step();
    w.advance(10);
    let s = w.step();
    assert_eq!(s.reconciled.pod_creations(), 1);
    assert_eq!(w.status().failed, Some(1));
}

#[test]
fn without_completions_the_job_is_done_when_one_pod_succeeded_and_none_runs() {
    let mut w = World::new(job(None, 3));
    assert_eq!(w.step().reconciled.pod_creations(), 3);
    w.run_all();
    let a = w.created[0].clone();
    w.exit(&a, 0);
    let s = w.step();
    assert_eq!(
        s.reconciled.pod_creations(),
        0,
        "no new pods after a success"
    );
    w.step();
    assert!(!w.finished(), "two still run");
    let b = w.created[1].clone();
    let c = w.created[2].clone();
    w.exit(&b, 0);
    w.exit(&c, 1);
    w.settle(4);
    let st = w.status();
    assert!(w.finished());
    assert_eq!((st.succeeded, st.failed), (Some(2), Some(1)));
    assert_eq!(w.created.len(), 3);
}

#[test]
fn lowering_parallelism_deletes_pods_without_counting_them() {
    let mut w = World::new(job(Some(10), 4));
    w.step();
    w.run_all();
    spec(&mut w.job).parallelism = Some(1);
    let s = w.step();
    assert_eq!(s.reconciled.pod_deletions().count(), 3);
    assert_eq!(s.reconciled.finalizer_removals().count(), 3);
    w.kill_terminating();
    w.settle(3);
    assert_eq!(w.status().failed, None);
    assert_eq!(w.active().len(), 1);
}

fn orphan(name: &str, phase: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(format!("{name}-uid")),
            labels: Some(super::sim::labels()),
            creation_timestamp: Some(Time(ts(super::sim::T0))),
            ..Default::default()
        },
        spec: None,
        status: Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some(phase.into()),
            ..Default::default()
        }),
    }
}

#[test]
fn orphans_are_adopted_with_the_finalizer_and_strays_released_without_it() {
    let mut w = World::new(job(Some(2), 1));
    w.pods.push(orphan("adopt-me", "Succeeded"));
    let mut stray = orphan("stray", "Running");
    stray.metadata.labels = Some(BTreeMap::from([("app".to_owned(), "x".to_owned())]));
    stray.metadata.owner_references = Some(vec![crate::controller_ref(&w.job)]);
    stray.metadata.finalizers = Some(vec![JOB_TRACKING_FINALIZER.into()]);
    w.pods.push(stray);
    let s = w.sync();
    let adopt = s.reconciled.actions.first().cloned();
    assert!(matches!(adopt, Some(Action::AdoptPod { ref name, .. }) if name == "adopt-me"));
    assert_eq!(
        adopt
            .and_then(|a| a.patch())
            .map(|p| p["metadata"]["finalizers"].clone()),
        Some(serde_json::json!([JOB_TRACKING_FINALIZER]))
    );
    assert!(matches!(&s.reconciled.actions[1], Action::ReleasePod { name, .. } if name == "stray"));
    assert!(
        matches!(&s.reconciled.actions[2], Action::RemovePodFinalizer { name, .. } if name == "stray")
    );
    w.apply(&s);
    w.settle(4);
    // The adopted pod's success counts: one more pod completes the Job.
    assert_eq!(w.status().succeeded, Some(1));
    w.run_all();
    let n = w.created[0].clone();
    w.exit(&n, 0);
    w.settle(4);
    assert!(w.finished());
    assert_eq!(w.status().succeeded, Some(2));
}

#[test]
fn a_finished_job_only_lets_its_pods_go_and_orphans_lose_the_finalizer() {
    let mut w = World::new(job(Some(1), 1));
    w.step();
    w.run_all();
    let n = w.created[0].clone();
    w.exit(&n, 0);
    w.settle(4);
    assert!(w.finished());
    // A pod that kept its finalizer (made by a lagging sync) is let go.
    let mut late = orphan("late", "Running");
    late.metadata.owner_references = Some(vec![crate::controller_ref(&w.job)]);
    late.metadata.finalizers = Some(vec![JOB_TRACKING_FINALIZER.into()]);
    w.pods.push(late.clone());
    let s = w.sync();
    assert_eq!(
        s.reconciled.finalizer_removals().collect::<Vec<_>>(),
        ["late-uid"]
    );
    assert_eq!(s.reconciled.actions.len(), 1);
    assert_eq!(s.backoff, BackoffRecord::NONE);

    assert!(
        orphan_finalizer_removal(&late, Some(&w.job)).is_some(),
        "its Job finished"
    );
    assert!(
        orphan_finalizer_removal(&late, None).is_some(),
        "its Job is gone"
    );
    let mut running = w.job.clone();
    running.status = None;
    assert_eq!(orphan_finalizer_removal(&late, Some(&running)), None);
    let mut bare = late.clone();
    bare.metadata.owner_references = None;
    assert!(orphan_finalizer_removal(&bare, Some(&running)).is_some());
    let mut theirs = late.clone();
    if let Some(r) = theirs.metadata.owner_references.as_mut() {
        r[0].kind = "ReplicaSet".into();
        r[0].api_version = "apps/v1".into();
    }
    assert_eq!(orphan_finalizer_removal(&theirs, None), None);
    bare.metadata.finalizers = None;
    assert_eq!(orphan_finalizer_removal(&bare, None), None);
}

#[test]
fn unsatisfied_expectations_only_track() {
    let mut w = World::new(job(Some(3), 2));
    w.expectations_satisfied = false;
    let s = w.step();
    assert_eq!(s.reconciled.pod_creations(), 0);
    assert_eq!(w.status().start_time.map(|t| t.0), Some(w.now));
    w.expectations_satisfied = true;
    assert_eq!(w.step().reconciled.pod_creations(), 2);
}

#[test]
fn a_job_being_deleted_creates_nothing_and_lets_every_pod_go() {
    let mut w = World::new(job(Some(3), 2));
    w.step();
    w.run_all();
    w.job.metadata.deletion_timestamp = Some(Time(w.now));
    let s = w.step();
    assert_eq!(s.reconciled.pod_creations(), 0);
    assert_eq!(s.reconciled.finalizer_removals().count(), 2);
}

#[test]
fn one_sync_records_at_most_500_finished_pods() {
    let mut w = World::new(job(Some(600), 600));
    assert_eq!(
        w.step().reconciled.pod_creations(),
        MAX_POD_CREATE_DELETE_PER_SYNC
    );
    w.step();
    w.run_all();
    for n in w.active() {
        w.exit(&n, 0);
    }
    let s = w.step();
    assert_eq!(
        s.reconciled.finalizer_removals().count(),
        MAX_UNCOUNTED_PODS
    );
    let unc = w
        .status()
        .uncounted_terminated_pods
        .and_then(|u| u.succeeded);
    assert_eq!(unc.map(|u| u.len()), Some(MAX_UNCOUNTED_PODS));
    w.settle(10);
    w.run_all();
    for n in w.active() {
        w.exit(&n, 0);
    }
    w.settle(10);
    assert_eq!(w.status().succeeded, Some(600));
    assert!(w.finished());
}

#[test]
fn a_steady_job_writes_nothing() {
    let mut w = World::new(job(Some(2), 2));
    w.step();
    w.run_all();
    w.step(); // ready: 2
    let writes = w.status_writes;
    assert_eq!(w.sync().reconciled, Reconciled::default());
    w.advance(3600);
    assert_eq!(w.sync().reconciled, Reconciled::default());
    assert_eq!(w.status_writes, writes);
    assert_eq!(w.status().ready, Some(2));
}

#[test]
fn jobs_of_other_controllers_and_unknown_modes_are_skipped() {
    let mut j = job(Some(1), 1);
    spec(&mut j).managed_by = Some("example.com/mine".into());
    assert_eq!(World::new(j).sync().reconciled, Reconciled::default());
    let mut j = job(Some(1), 1);
    spec(&mut j).managed_by = Some(JOB_CONTROLLER_NAME.into());
    assert_eq!(World::new(j).sync().reconciled.pod_creations(), 1);
    let mut j = job(Some(1), 1);
    spec(&mut j).completion_mode = Some("Sideways".into());
    let events: Vec<Event> = World::new(j).sync().reconciled.events().cloned().collect();
    assert_eq!(
        events,
        [Event::warning(
            "UnknownCompletionMode",
            "Skipped Job sync because completion mode is unknown".into()
        )]
    );
}

#[test]
fn bad_specs_are_errors_not_panics() {
    let ctx = JobContext::default();
    let now = ts(super::sim::T0);
    let mut no_spec = job(Some(1), 1);
    no_spec.spec = None;
    assert!(reconcile(&no_spec, &[], &ctx, now).is_err());
    let mut indexed = job(None, 1);
    spec(&mut indexed).completion_mode = Some("Indexed".into());
    assert_eq!(
        reconcile(&indexed, &[], &ctx, now).map(|_| ()),
        Err(ReconcileError::InvalidSpec(
            "spec.completions: Required value: when completion mode is Indexed"
        ))
    );
    let mut no_selector = job(Some(1), 1);
    spec(&mut no_selector).selector = None;
    assert!(reconcile(&no_selector, &[], &ctx, now).is_err());

    // Values validation refuses, and a status nobody wrote: no panic.
    let mut odd = job(Some(-3), -5);
    spec(&mut odd).backoff_limit = Some(i32::MIN);
    spec(&mut odd).active_deadline_seconds = Some(i64::MAX);
    spec(&mut odd).completion_mode = Some("Indexed".into());
    spec(&mut odd).backoff_limit_per_index = Some(-1);
    spec(&mut odd).max_failed_indexes = Some(i32::MIN);
    odd.status = Some(k8s_openapi::api::batch::v1::JobStatus {
        succeeded: Some(i32::MAX),
        failed: Some(i32::MAX),
        completed_indexes: Some("9-1,x,-,2147483647-99999999999".into()),
        failed_indexes: Some(",,,".into()),
        ..Default::default()
    });
    let mut p = orphan("p", "Failed");
    p.metadata.annotations = Some(BTreeMap::from([
        (
            COMPLETION_INDEX_ANNOTATION.to_owned(),
            "99999999999999999999".to_owned(),
        ),
        (INDEX_FAILURE_COUNT_ANNOTATION.to_owned(), "-4".to_owned()),
    ]));
    assert!(reconcile(&odd, &[&p], &ctx, now).is_ok());
    let mut huge = job(Some(i32::MAX), i32::MAX);
    spec(&mut huge).completion_mode = Some("Indexed".into());
    let r = reconcile(&huge, &[&p], &ctx, now).map(|s| s.reconciled.pod_creations());
    assert_eq!(r, Ok(MAX_POD_CREATE_DELETE_PER_SYNC));
}
