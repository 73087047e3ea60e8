//! The history limits, within the floor: oldest first, never a tick's Job
//! younger than the floor or one whose tick is not recorded, and a tick
//! deleted after the floor never runs again.

use super::*;

/// Every-minute `backup` with a successful-history limit of 1, whose Jobs
/// of 12:00 to 12:03 ran 28 seconds each; then suspended.
fn four_done() -> World {
    let mut w = World::new(cronjob("* * * * *"));
    spec(&mut w.cj).successful_jobs_history_limit = Some(1);
    for m in 0..4 {
        w.tick(ts(&format!("2024-06-01T12:0{m}:01Z")));
        let name = job_name("backup", ts(&format!("2024-06-01T12:0{m}:00Z")));
        w.finish(
            &name,
            "Complete",
            &format!("2024-06-01T12:0{m}:02Z"),
            &format!("2024-06-01T12:0{m}:30Z"),
        );
    }
    spec(&mut w.cj).suspend = Some(true);
    w
}

#[test]
fn the_limit_deletes_the_oldest_first_but_never_a_tick_job_inside_the_floor() {
    let mut w = four_done();
    // Three over the limit, all inside the floor: nothing goes, and the
    // sync asks to run again when the oldest leaves it (created 12:00:01).
    let held = w.sync(ts("2024-06-01T12:04:10Z"));
    assert!(deletes(&held).is_empty(), "{held:?}");
    assert_eq!(
        requeue(&held),
        until_slot("2024-06-01T12:04:10Z", "2024-06-01T12:10:01Z")
    );
    assert_eq!(w.jobs.len(), 4);

    let first = w.sync(ts("2024-06-01T12:10:01Z"));
    assert_eq!(deletes(&first), ["backup-28620720"]);
    assert!(matches!(
        &first.actions[0],
        Action::DeleteJob { uid, propagation: Propagation::Background, .. } if uid == "job-uid-1"
    ));
    assert_eq!(
        events(&first),
        [(
            "SuccessfulDelete".into(),
            "Deleted job backup-28620720".into()
        )]
    );
    assert_eq!(
        requeue(&first),
        until_slot("2024-06-01T12:10:01Z", "2024-06-01T12:11:01Z")
    );

    let rest = w.sync(ts("2024-06-01T12:13:05Z"));
    assert_eq!(deletes(&rest), ["backup-28620721", "backup-28620722"]);
    assert_eq!(w.job_names(), ["backup-28620723"]);
    assert!(w.sync(ts("2024-06-01T12:14:00Z")).actions.is_empty());
}

#[test]
fn a_tick_deleted_after_the_floor_is_not_run_again() {
    let mut w = four_done();
    w.tick(ts("2024-06-01T12:13:05Z"));
    assert!(w.job("backup-28620720").is_none());
    // Resumed, and on every later sync: lastScheduleTime (12:03) is past
    // the deleted ticks, and only the most recent slot ever runs.
    spec(&mut w.cj).suspend = Some(false);
    for now in [
        "2024-06-01T12:13:10Z",
        "2024-06-01T12:13:50Z",
        "2024-06-01T12:14:00.1Z",
    ] {
        w.tick(ts(now));
    }
    assert_eq!(w.creates.get("backup-28620720"), Some(&1));
    assert_eq!(w.creates.values().max(), Some(&1));
    assert!(w.job("backup-28620720").is_none());
    assert_eq!(w.creates.len(), 6, "12:00-12:03, then 12:13 and 12:14");
}

#[test]
fn a_tick_the_status_has_not_recorded_is_kept_until_it_is() {
    // A crash between the POST and the status write: the 12:00 Job of an
    // hourly CronJob exists and finished; the status never heard of it.
    let mut w = World::new(cronjob("0 * * * *"));
    spec(&mut w.cj).successful_jobs_history_limit = Some(0);
    let planned = w.plan(ts("2024-06-01T12:00:01Z"));
    let Some(Action::CreateJob { job }) = planned.actions.first().cloned() else {
        panic!("{planned:?}");
    };
    w.store(job, ts("2024-06-01T12:00:01Z"));
    w.finish(
        "backup-28620720",
        "Complete",
        "2024-06-01T12:00:02Z",
        "2024-06-01T12:00:10Z",
    );
    // Past the floor, limit 0: but a fresh view still sees 12:00 as unmet,
    // so the Job is all that stops a second run. Kept; adopted instead.
    let r = w.sync(ts("2024-06-01T12:30:00Z"));
    assert!(deletes(&r).is_empty(), "{r:?}");
    assert!(created(&r).is_empty());
    assert_eq!(
        w.status().last_schedule_time,
        Some(Time(ts("2024-06-01T12:00:00Z")))
    );
    // Recorded now: it may go, and the tick stays done.
    let r = w.sync(ts("2024-06-01T12:30:05Z"));
    assert_eq!(deletes(&r), ["backup-28620720"]);
    assert_eq!(reasons(&r), ["SuccessfulDelete"]);
    for now in ["2024-06-01T12:30:10Z", "2024-06-01T12:59:59Z"] {
        assert!(w.sync(ts(now)).actions.is_empty());
    }
    assert!(
        w.creates.is_empty(),
        "the 12:00 Job was only ever created once, before"
    );
    assert_eq!(
        created(&w.sync(ts("2024-06-01T13:00:00.1Z"))),
        ["backup-28620780"]
    );
}

#[test]
fn manual_runs_are_no_ticks_and_get_no_floor() {
    let mut w = World::new(cronjob("0 0 1 1 *"));
    spec(&mut w.cj).failed_jobs_history_limit = Some(1);
    for (i, name) in ["backup-manual-a", "backup-manual-b"]
        .into_iter()
        .enumerate()
    {
        let mut job = children::job_for_slot(&w.cj, ts("2024-06-01T12:00:00Z"), &TimeZone::UTC);
        job.metadata.name = Some(name.into());
        job.metadata.annotations = Some(labels(&[(INSTANTIATE_ANNOTATION, "manual")]));
        w.store(job, ts("2024-06-01T12:00:00Z"));
        w.finish(
            name,
            "Failed",
            &format!("2024-06-01T12:00:0{i}Z"),
            "2024-06-01T12:00:20Z",
        );
    }
    let r = w.sync(ts("2024-06-01T12:00:30Z"));
    assert_eq!(deletes(&r), ["backup-manual-a"]);
}

#[test]
fn each_limit_counts_its_own_kind_unset_keeps_all_and_deletions_in_flight_do_not_count() {
    let mut w = World::new(cronjob("* * * * *"));
    spec(&mut w.cj).successful_jobs_history_limit = None;
    spec(&mut w.cj).failed_jobs_history_limit = Some(1);
    for m in 0..4 {
        w.tick(ts(&format!("2024-06-01T12:0{m}:01Z")));
        let name = job_name("backup", ts(&format!("2024-06-01T12:0{m}:00Z")));
        let kind = if m % 2 == 0 { "Complete" } else { "Failed" };
        w.finish(
            &name,
            kind,
            &format!("2024-06-01T12:0{m}:02Z"),
            &format!("2024-06-01T12:0{m}:30Z"),
        );
    }
    spec(&mut w.cj).suspend = Some(true);
    let r = w.sync(ts("2024-06-01T12:30:00Z"));
    // Two failed (12:01, 12:03), limit 1: the older goes; no limit on the
    // two successful.
    assert_eq!(deletes(&r), ["backup-28620721"]);

    let mut w = four_done();
    for j in &mut w.jobs[..2] {
        j.metadata.deletion_timestamp = Some(Time(ts("2024-06-01T12:20:00Z")));
    }
    let r = w.sync(ts("2024-06-01T12:30:00Z"));
    // 12:00 and 12:01 are going already: of the other two, the older.
    assert_eq!(deletes(&r), ["backup-28620722"]);
}

#[test]
fn unstarted_jobs_sort_last_and_names_break_ties() {
    let mut w = four_done();
    for j in &mut w.jobs {
        if let Some(s) = j.status.as_mut() {
            s.start_time = None;
        }
    }
    if let Some(s) = w.jobs[3].status.as_mut() {
        s.start_time = Some(Time(ts("2024-06-01T12:03:02Z")));
    }
    let r = w.sync(ts("2024-06-01T12:30:00Z"));
    assert_eq!(
        deletes(&r),
        ["backup-28620723", "backup-28620720", "backup-28620721"]
    );
}
