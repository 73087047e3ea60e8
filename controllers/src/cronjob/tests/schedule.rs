//! Which slot runs: missed ticks, too many of them, the starting deadline,
//! time zones across DST, and schedules that cannot run.

use super::*;

#[test]
fn after_missed_ticks_only_the_most_recent_slot_runs() {
    let mut w = World::new(cronjob("*/5 * * * *"));
    w.tick(ts("2024-06-01T12:00:01Z"));
    // Down from 12:00:01 to 12:37:30: seven slots missed.
    let r = w.sync(ts("2024-06-01T12:37:30Z"));
    assert_eq!(
        created(&r),
        [job_name("backup", ts("2024-06-01T12:35:00Z"))]
    );
    assert_eq!(reasons(&r), ["SuccessfulCreate"]);
    assert_eq!(
        requeue(&r),
        until_slot("2024-06-01T12:37:30Z", "2024-06-01T12:40:00Z")
    );
    assert_eq!(
        w.status().last_schedule_time,
        Some(Time(ts("2024-06-01T12:35:00Z")))
    );
}

#[test]
fn never_run_counts_from_the_creation_time_and_waits_for_the_first_slot() {
    let w = World::new(cronjob("0 * * * *"));
    // Created 11:00:00: the 11:00 slot is not after it.
    let r = w.plan(ts("2024-06-01T11:30:00Z"));
    assert!(r.actions.is_empty());
    assert_eq!(
        requeue(&r),
        until_slot("2024-06-01T11:30:00Z", "2024-06-01T12:00:00Z")
    );
}

#[test]
fn more_than_a_hundred_missed_slots_warn_and_still_run_the_latest() {
    let mut cj = cronjob("* * * * *");
    cj.metadata.creation_timestamp = Some(Time(ts("2024-06-01T09:00:00Z")));
    let r = World::new(cj).plan(ts("2024-06-01T12:00:30Z"));
    assert_eq!(created(&r), ["backup-28620720"]);
    assert_eq!(
        events(&r),
        [
            ("SuccessfulCreate".into(), "Created job backup-28620720".into()),
            (
                "TooManyMissedTimes".into(),
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew".into()
            ),
        ]
    );
    // With a starting deadline, KCM counts only from now - deadline.
    let mut cj = cronjob("* * * * *");
    cj.metadata.creation_timestamp = Some(Time(ts("2024-06-01T09:00:00Z")));
    spec(&mut cj).starting_deadline_seconds = Some(200);
    let r = World::new(cj).plan(ts("2024-06-01T12:00:30Z"));
    assert_eq!(reasons(&r), ["SuccessfulCreate"]);
}

#[test]
fn a_slot_older_than_the_starting_deadline_is_not_run() {
    let mut w = World::new(cronjob("0 * * * *"));
    spec(&mut w.cj).starting_deadline_seconds = Some(60);
    w.cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(ts("2024-06-01T11:00:00Z"))),
        ..Default::default()
    });
    // 12:00 passed five minutes ago, the deadline is one: no Job. As in
    // KCM, no event either: it never looks before now - deadline, so its
    // `MissSchedule` branch cannot fire (its own test "never ran, is time,
    // past deadline" expects no warning).
    let late = w.plan(ts("2024-06-01T12:05:00Z"));
    assert!(late.actions.is_empty(), "{late:?}");
    assert_eq!(
        requeue(&late),
        until_slot("2024-06-01T12:05:00Z", "2024-06-01T13:00:00Z")
    );
    spec(&mut w.cj).starting_deadline_seconds = Some(600);
    assert_eq!(
        created(&w.plan(ts("2024-06-01T12:05:00Z"))),
        [job_name("backup", ts("2024-06-01T12:00:00Z"))]
    );
}

#[test]
fn time_zone_slots_follow_the_wall_clock_across_dst() {
    // 02:30 New York does not exist on 2024-03-10 (clocks jump 02:00 to
    // 03:00): robfig runs it at the shifted instant, 03:30 EDT = 07:30Z.
    let mut w = World::new(cronjob("30 2 * * *"));
    spec(&mut w.cj).time_zone = Some("America/New_York".into());
    w.cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(ts("2024-03-09T07:30:00Z"))),
        ..Default::default()
    });
    let r = w.sync(ts("2024-03-10T08:00:00Z"));
    assert_eq!(created(&r), ["backup-28500930"]);
    let job = w.job("backup-28500930").expect("job");
    assert_eq!(
        job.metadata.annotations.as_ref().expect("annotations")[SCHEDULED_TIMESTAMP_ANNOTATION],
        "2024-03-10T03:30:00-04:00"
    );
    // The next is 02:30 EDT on the 11th, 06:30Z: 23 hours later.
    assert_eq!(
        requeue(&r),
        until_slot("2024-03-10T08:00:00Z", "2024-03-11T06:30:00Z")
    );

    // 01:30 happens twice on 2024-11-03 (clocks fall back 02:00 to 01:00):
    // it runs once, at the first.
    let mut w = World::new(cronjob("30 1 * * *"));
    spec(&mut w.cj).time_zone = Some("America/New_York".into());
    w.cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(ts("2024-11-02T05:30:00Z"))),
        ..Default::default()
    });
    let first = w.sync(ts("2024-11-03T05:30:00.1Z"));
    assert_eq!(created(&first), ["backup-28843530"]);
    assert_eq!(
        w.job("backup-28843530")
            .expect("job")
            .metadata
            .annotations
            .as_ref()
            .expect("a")[SCHEDULED_TIMESTAMP_ANNOTATION],
        "2024-11-03T01:30:00-04:00"
    );
    let repeated_hour = w.sync(ts("2024-11-03T06:45:00Z"));
    assert!(repeated_hour.actions.is_empty(), "{repeated_hour:?}");
    assert_eq!(
        requeue(&repeated_hour),
        until_slot("2024-11-03T06:45:00Z", "2024-11-04T06:30:00Z")
    );
}

#[test]
fn a_zone_with_a_zero_offset_writes_z_as_go_does() {
    let mut cj = cronjob("0 12 * * *");
    spec(&mut cj).time_zone = Some("Europe/London".into());
    cj.metadata.creation_timestamp = Some(Time(ts("2024-01-14T00:00:00Z")));
    let r = World::new(cj).plan(ts("2024-01-15T12:00:05Z"));
    let Some(Action::CreateJob { job }) = r.actions.first() else {
        panic!("{r:?}");
    };
    assert_eq!(
        job.metadata.annotations.as_ref().expect("a")[SCHEDULED_TIMESTAMP_ANNOTATION],
        "2024-01-15T12:00:00Z"
    );
}

#[test]
fn an_unknown_zone_or_an_unparseable_schedule_warns_and_waits_for_a_change() {
    let mut w = World::new(cronjob("* * * * *"));
    spec(&mut w.cj).time_zone = Some("Mars/Olympus_Mons".into());
    let r = w.plan(ts("2024-06-01T12:00:30Z"));
    assert_eq!(
        events(&r),
        [(
            "UnknownTimeZone".into(),
            "invalid timeZone: \"Mars/Olympus_Mons\": unknown time zone Mars/Olympus_Mons".into()
        )]
    );
    assert_eq!(requeue(&r), None);

    let r = World::new(cronjob("* * *")).plan(ts("2024-06-01T12:00:30Z"));
    assert_eq!(
        events(&r),
        [(
            "UnparseableSchedule".into(),
            "unparseable schedule: \"* * *\" : expected exactly 5 fields, found 3: [* * *]".into()
        )]
    );
    assert_eq!(requeue(&r), None);
    assert!(r.events().all(|e| e.type_ == EventType::Warning));

    // Parses, but never fires: KCM's InvalidSchedule.
    let r = World::new(cronjob("0 0 30 2 *")).plan(ts("2024-06-01T12:00:30Z"));
    assert_eq!(
        events(&r),
        [(
            "InvalidSchedule".into(),
            "invalid schedule: 0 0 30 2 * : time difference between two schedules is less than 1 second".into()
        )]
    );
    assert_eq!(requeue(&r), None);
}

#[test]
fn a_legacy_tz_prefix_warns_and_runs_in_the_zone_it_names() {
    let mut cj = cronjob("CRON_TZ=Asia/Tokyo 0 21 * * *");
    cj.metadata.creation_timestamp = Some(Time(ts("2024-06-01T11:00:00Z")));
    // 21:00 Tokyo is 12:00Z.
    let r = World::new(cj).plan(ts("2024-06-01T12:00:10Z"));
    assert_eq!(created(&r), ["backup-28620720"]);
    assert_eq!(reasons(&r), ["SuccessfulCreate", "UnsupportedSchedule"]);
    let r = World::new(cronjob("TZ=Nowhere/Atlantis 0 21 * * *")).plan(ts("2024-06-01T12:00:10Z"));
    assert_eq!(reasons(&r), ["UnsupportedSchedule", "UnparseableSchedule"]);
}

#[test]
fn every_and_descriptor_schedules_run_from_their_own_slots() {
    let mut cj = cronjob("@every 90s");
    cj.metadata.creation_timestamp = Some(Time(ts("2024-06-01T12:00:00Z")));
    let mut w = World::new(cj);
    let first = w.sync(ts("2024-06-01T12:01:31Z"));
    assert_eq!(
        created(&first),
        [job_name("backup", ts("2024-06-01T12:01:30Z"))]
    );
    assert_eq!(
        requeue(&first),
        until_slot("2024-06-01T12:01:31Z", "2024-06-01T12:03:00Z")
    );
    let hourly = World::new(cronjob("@hourly")).plan(ts("2024-06-01T12:00:01Z"));
    assert_eq!(created(&hourly), ["backup-28620720"]);
}
