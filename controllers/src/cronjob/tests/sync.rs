//! One Job per tick, restarts, the Job's shape, the concurrency policies,
//! suspend, and `status.active`.

use super::*;

#[test]
fn every_minute_creates_one_job_per_tick_named_from_the_slot_however_often_it_syncs() {
    let mut w = World::new(cronjob("* * * * *"));
    w.cj.metadata.creation_timestamp = Some(Time(ts("2024-06-01T11:59:30Z")));
    let first = w.sync(ts("2024-06-01T12:00:00.1Z"));
    assert_eq!(created(&first), ["backup-28620720"]);
    assert_eq!(
        events(&first),
        [(
            "SuccessfulCreate".into(),
            "Created job backup-28620720".into()
        )]
    );
    assert_eq!(
        requeue(&first),
        until_slot("2024-06-01T12:00:00.1Z", "2024-06-01T12:01:00Z")
    );
    let status = w.status();
    assert_eq!(
        status.last_schedule_time,
        Some(Time(ts("2024-06-01T12:00:00Z")))
    );
    let active = status.active.expect("active");
    assert_eq!(active.len(), 1);
    // The reference carries the uid the API gave the Job.
    assert_eq!(active[0].uid.as_deref(), Some("job-uid-1"));
    assert_eq!(active[0].kind.as_deref(), Some("Job"));
    assert_eq!(active[0].namespace.as_deref(), Some("ns"));

    for s in (5..60).step_by(5) {
        let now = format!("2024-06-01T12:00:{s:02}Z");
        let again = w.sync(ts(&now));
        assert!(again.actions.is_empty(), "{now}: {again:?}");
        assert_eq!(requeue(&again), until_slot(&now, "2024-06-01T12:01:00Z"));
    }
    let next = w.sync(ts("2024-06-01T12:01:00.1Z"));
    assert_eq!(created(&next), ["backup-28620721"]);
    assert_eq!(w.creates.values().max(), Some(&1));
    assert_eq!(w.active_names(), ["backup-28620720", "backup-28620721"]);
}

#[test]
fn a_restart_resumes_from_the_stored_status_and_the_jobs_without_a_second_create() {
    let mut w = World::new(cronjob("* * * * *"));
    w.tick(ts("2024-06-01T12:00:01Z"));
    // A fresh replica: the stored CronJob and the Jobs, nothing else.
    let restarted = w.plan(ts("2024-06-01T12:00:30Z"));
    assert!(restarted.actions.is_empty(), "{restarted:?}");

    // A crash between the POST and the status write: the Job exists, the
    // status knows nothing of it.
    let mut w = World::new(cronjob("* * * * *"));
    let planned = w.plan(ts("2024-06-01T12:00:01Z"));
    let Some(Action::CreateJob { job }) = planned.actions.first().cloned() else {
        panic!("expected a create first: {planned:?}");
    };
    w.store(job, ts("2024-06-01T12:00:01Z"));
    let after_crash = w.sync(ts("2024-06-01T12:00:20Z"));
    assert!(created(&after_crash).is_empty());
    assert_eq!(
        events(&after_crash),
        [(
            "UnexpectedJob".into(),
            "Saw a job that the controller did not create or forgot: backup-28620720".into()
        )]
    );
    // Adopted, as KCM does after its POST is refused: the tick is recorded.
    assert_eq!(w.active_names(), ["backup-28620720"]);
    assert_eq!(
        w.status().last_schedule_time,
        Some(Time(ts("2024-06-01T12:00:00Z")))
    );
    assert!(w.sync(ts("2024-06-01T12:00:40Z")).actions.is_empty());
}

#[test]
fn a_cache_behind_the_api_posts_again_and_already_exists_adopts_the_job() {
    let mut w = World::new(cronjob("* * * * *"));
    let planned = w.plan(ts("2024-06-01T12:00:01Z"));
    let Some(Action::CreateJob { job }) = planned.actions.first().cloned() else {
        panic!("expected a create");
    };
    w.store(job, ts("2024-06-01T12:00:01Z"));
    // The replica's cache has not seen the Job: it plans the same create.
    let blind = reconcile(&w.cj, &[], ts("2024-06-01T12:00:02Z"), FLOOR).expect("reconcile");
    assert_eq!(created(&blind), ["backup-28620720"]);
    w.perform(blind.actions, ts("2024-06-01T12:00:02Z"));
    assert!(
        w.creates.is_empty(),
        "the POST was refused, nothing created"
    );
    assert_eq!(w.active_names(), ["backup-28620720"]);
    assert_eq!(w.active_names().len(), 1);
    assert!(
        w.events.iter().all(|e| e.reason != "SuccessfulCreate"),
        "{:?}",
        w.events
    );
    assert_eq!(
        w.status().active.expect("active")[0].uid.as_deref(),
        Some("job-uid-1")
    );
}

#[test]
fn a_name_held_by_a_job_of_someone_else_leaves_the_status_alone() {
    let cj = cronjob("* * * * *");
    let planned = reconcile(&cj, &[], ts("2024-06-01T12:00:01Z"), FLOOR).expect("reconcile");
    let mut rest = planned.actions.clone();
    let Action::CreateJob { job } = rest.remove(0) else {
        panic!("expected a create first");
    };
    let mut stranger = job.clone();
    stranger.metadata.owner_references = None;
    stranger.metadata.uid = Some("other".into());
    let after = after_create(&cj, CreateAnswer::AlreadyExists(&stranger), rest.clone());
    assert!(after.is_empty(), "{after:?}");
    // Created: the same list, the reference now has the uid.
    let mut mine = job;
    mine.metadata.uid = Some("new-uid".into());
    let after = after_create(&cj, CreateAnswer::Created(&mine), rest);
    let Some(Action::Event(e)) = after.first() else {
        panic!("{after:?}");
    };
    assert_eq!(e.message, "Created job backup-28620720");
    let Some(Action::WriteStatus(Status::CronJob(s))) = after.get(1) else {
        panic!("{after:?}");
    };
    assert_eq!(
        s.active.as_ref().expect("active")[0].uid.as_deref(),
        Some("new-uid")
    );
}

#[test]
fn the_job_carries_the_template_the_slot_and_the_cronjob_as_controller() {
    let cj = cronjob("* * * * *");
    let r = reconcile(&cj, &[], ts("2024-06-01T12:00:01Z"), FLOOR).expect("reconcile");
    let Some(Action::CreateJob { job }) = r.actions.first() else {
        panic!("{r:?}");
    };
    assert_eq!(job.metadata.name.as_deref(), Some("backup-28620720"));
    assert_eq!(job.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(job.metadata.labels, Some(labels(&[("app", "backup")])));
    assert_eq!(
        job.metadata.annotations,
        Some(labels(&[
            ("team", "ops"),
            (SCHEDULED_TIMESTAMP_ANNOTATION, "2024-06-01T12:00:00Z")
        ]))
    );
    let owner = &job.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str()
        ),
        ("batch/v1", "CronJob", "backup", "cj-uid")
    );
    assert_eq!(owner.controller, Some(true));
    assert_eq!(owner.block_owner_deletion, Some(true));
    assert_eq!(
        job.spec,
        cj.spec.as_ref().and_then(|s| s.job_template.spec.clone())
    );
    assert!(job.status.is_none() && job.metadata.uid.is_none());
}

#[test]
fn forbid_skips_a_tick_while_a_job_runs_and_runs_the_next_one_after() {
    let mut w = World::new(cronjob("* * * * *"));
    spec(&mut w.cj).concurrency_policy = Some("Forbid".into());
    w.tick(ts("2024-06-01T12:00:01Z"));
    let skipped = w.sync(ts("2024-06-01T12:01:00.1Z"));
    assert!(created(&skipped).is_empty());
    assert_eq!(
        events(&skipped),
        [(
            "JobAlreadyActive".into(),
            "Not starting job because prior execution is running and concurrency policy is Forbid"
                .into()
        )]
    );
    assert_eq!(
        requeue(&skipped),
        until_slot("2024-06-01T12:01:00.1Z", "2024-06-01T12:02:00Z")
    );
    // lastScheduleTime stays: the skipped slot was not run.
    assert_eq!(
        w.status().last_schedule_time,
        Some(Time(ts("2024-06-01T12:00:00Z")))
    );
    w.finish(
        "backup-28620720",
        "Complete",
        "2024-06-01T12:00:02Z",
        "2024-06-01T12:01:30Z",
    );
    let next = w.sync(ts("2024-06-01T12:02:00.1Z"));
    assert_eq!(created(&next), ["backup-28620722"]);
    assert_eq!(reasons(&next), ["SuccessfulCreate", "SawCompletedJob"]);
    assert_eq!(w.active_names(), ["backup-28620722"]);
}

#[test]
fn replace_deletes_the_running_job_in_background_then_creates() {
    let mut w = World::new(cronjob("* * * * *"));
    spec(&mut w.cj).concurrency_policy = Some("Replace".into());
    w.tick(ts("2024-06-01T12:00:01Z"));
    let r = w.sync(ts("2024-06-01T12:01:00.1Z"));
    assert!(matches!(
        &r.actions[0],
        Action::DeleteJob { name, uid, propagation: Propagation::Background }
            if name == "backup-28620720" && uid == "job-uid-1"
    ));
    assert!(matches!(&r.actions[2], Action::CreateJob { .. }));
    assert_eq!(
        events(&r),
        [
            (
                "SuccessfulDelete".into(),
                "Deleted job backup-28620720".into()
            ),
            (
                "SuccessfulCreate".into(),
                "Created job backup-28620721".into()
            )
        ]
    );
    assert_eq!(w.active_names(), ["backup-28620721"]);
    assert_eq!(w.job_names(), ["backup-28620721"]);
}

#[test]
fn suspend_stops_new_runs_only() {
    let mut w = World::new(cronjob("* * * * *"));
    w.tick(ts("2024-06-01T12:00:01Z"));
    spec(&mut w.cj).suspend = Some(true);
    w.finish(
        "backup-28620720",
        "Complete",
        "2024-06-01T12:00:02Z",
        "2024-06-01T12:00:30Z",
    );
    let r = w.sync(ts("2024-06-01T12:05:00Z"));
    assert!(created(&r).is_empty());
    assert_eq!(reasons(&r), ["SawCompletedJob"]);
    assert_eq!(requeue(&r), None);
    assert!(w.active_names().is_empty());
    assert_eq!(
        w.status().last_successful_time,
        Some(Time(ts("2024-06-01T12:00:30Z")))
    );
    // Resumed: the most recent slot runs, not the five missed.
    spec(&mut w.cj).suspend = Some(false);
    let resumed = w.sync(ts("2024-06-01T12:05:10Z"));
    assert_eq!(created(&resumed), ["backup-28620725"]);
}

#[test]
fn active_follows_the_jobs_completed_missing_and_unexpected() {
    let mut w = World::new(cronjob("* * * * *"));
    w.tick(ts("2024-06-01T12:00:01Z"));
    w.tick(ts("2024-06-01T12:01:01Z"));
    w.finish(
        "backup-28620720",
        "Failed",
        "2024-06-01T12:00:02Z",
        "2024-06-01T12:00:50Z",
    );
    // The second Job vanished behind the controller's back.
    w.jobs
        .retain(|j| j.metadata.name.as_deref() != Some("backup-28620721"));
    // A `kubectl create job --from=cronjob/backup` run.
    let mut job = children::job_for_slot(&w.cj, ts("2024-06-01T12:01:30Z"), &TimeZone::UTC);
    job.metadata.name = Some("backup-manual-x7k".into());
    job.metadata.annotations = Some(labels(&[(INSTANTIATE_ANNOTATION, "manual")]));
    w.store(job, ts("2024-06-01T12:01:30Z"));
    let r = w.sync(ts("2024-06-01T12:01:40Z"));
    assert_eq!(
        events(&r),
        [
            (
                "SawCompletedJob".into(),
                "Saw completed job: backup-28620720, condition: Failed".into()
            ),
            (
                "UnexpectedJob".into(),
                "Saw a job that the controller did not create or forgot: backup-manual-x7k".into()
            ),
            (
                "MissingJob".into(),
                "Active job went missing: backup-28620721".into()
            ),
        ]
    );
    let warnings: Vec<_> = r
        .events()
        .filter(|e| e.type_ == EventType::Warning)
        .map(|e| e.reason.as_str())
        .collect();
    assert_eq!(warnings, ["UnexpectedJob"]);
    assert!(w.active_names().is_empty());
    // A Failed Job is no success.
    assert_eq!(w.status().last_successful_time, None);
    assert!(w.status().active.is_none(), "an empty list is omitted");
}

#[test]
fn last_successful_time_is_the_newest_completion_of_a_complete_job() {
    let mut w = World::new(cronjob("* * * * *"));
    for m in 0..3 {
        w.tick(ts(&format!("2024-06-01T12:0{m}:01Z")));
    }
    w.finish(
        "backup-28620720",
        "Complete",
        "2024-06-01T12:00:02Z",
        "2024-06-01T12:02:40Z",
    );
    w.finish(
        "backup-28620721",
        "Complete",
        "2024-06-01T12:01:02Z",
        "2024-06-01T12:01:40Z",
    );
    w.finish(
        "backup-28620722",
        "Failed",
        "2024-06-01T12:02:02Z",
        "2024-06-01T12:02:50Z",
    );
    w.tick(ts("2024-06-01T12:02:55Z"));
    assert_eq!(
        w.status().last_successful_time,
        Some(Time(ts("2024-06-01T12:02:40Z")))
    );
}

#[test]
fn a_cronjob_being_deleted_only_keeps_its_status() {
    let mut w = World::new(cronjob("* * * * *"));
    w.tick(ts("2024-06-01T12:00:01Z"));
    w.cj.metadata.deletion_timestamp = Some(Time(ts("2024-06-01T12:00:30Z")));
    w.finish(
        "backup-28620720",
        "Complete",
        "2024-06-01T12:00:02Z",
        "2024-06-01T12:00:40Z",
    );
    let r = w.sync(ts("2024-06-01T12:05:00Z"));
    assert!(created(&r).is_empty());
    assert_eq!(reasons(&r), ["SawCompletedJob"]);
    assert_eq!(requeue(&r), None);
}

#[test]
fn the_runner_confirms_active_references_the_cache_lacks() {
    let mut w = World::new(cronjob("* * * * *"));
    w.tick(ts("2024-06-01T12:00:01Z"));
    let jobs: Vec<&Job> = w.jobs.iter().collect();
    assert!(unconfirmed_active(&w.cj, &jobs).is_empty());
    let unconfirmed = unconfirmed_active(&w.cj, &[]);
    assert_eq!(unconfirmed.len(), 1);
    assert_eq!(unconfirmed[0].name.as_deref(), Some("backup-28620720"));
    // Jobs of other owners, and the same Job twice, change nothing.
    let mut other = w.jobs[0].clone();
    other.metadata.name = Some("unrelated".into());
    other.metadata.owner_references = None;
    let twice: Vec<&Job> = vec![&w.jobs[0], &other, &w.jobs[0]];
    assert!(
        reconcile(&w.cj, &twice, ts("2024-06-01T12:00:30Z"), FLOOR)
            .expect("reconcile")
            .actions
            .is_empty()
    );
}
