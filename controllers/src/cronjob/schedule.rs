//! When a CronJob runs: its schedule in its zone, the most recent slot it
//! missed (kube's `mostRecentScheduleTime`), and when to look again
//! (`nextScheduleTimeDuration`).

use std::time::Duration;

use apiserver::cron::{Schedule, time_zone};
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::jiff::tz::TimeZone;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::action::Event;

/// Added to every requeue for the next slot (KCM's `nextScheduleDelta`), so
/// a timer that fires a little early, or a clock a little behind the one
/// that computed the slot, does not wake the controller just before it.
pub const NEXT_SCHEDULE_DELTA: Duration = Duration::from_millis(100);

/// More missed slots than this (since `lastScheduleTime`, or creation) is
/// reported as `TooManyMissedTimes` (KCM's number: "more than 80, but less
/// than lots").
const MANY_MISSED: i64 = 100;

/// Slots visited at most when searching the most recent one: the search
/// starts one interval before `now`, so this only bounds a pathological
/// schedule, never a real one.
const MAX_STEPS: usize = 10_000;

/// How many slots were missed (KCM's `missedSchedulesType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Missed {
    None,
    Few,
    Many,
}

/// `mostRecentScheduleTime`'s answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MostRecent {
    /// `lastScheduleTime`, else the creation time (raised to `now -
    /// startingDeadlineSeconds` when that is later and asked for).
    pub(crate) earliest: Timestamp,
    /// The latest slot at or before `now` after `earliest`, if any.
    pub(crate) slot: Option<Timestamp>,
    pub(crate) missed: Missed,
}

/// A CronJob's schedule and the zone it runs in, or the event that says
/// why it has none.
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    pub(crate) schedule: Schedule,
    pub(crate) zone: TimeZone,
    /// The zone of `spec.timeZone` (UTC when unset), in which the Job's
    /// scheduled-timestamp annotation is written. It differs from `zone`
    /// only for a legacy `TZ=`/`CRON_TZ=` schedule, which robfig reads in
    /// the zone it names.
    pub(crate) annotation_zone: TimeZone,
}

/// Why a CronJob cannot be scheduled, with KCM's Warning event. KCM does
/// not requeue any of these: only a change of the CronJob helps.
pub(crate) fn unknown_time_zone(cj: &CronJob) -> Option<Event> {
    // Go's `time.LoadLocation("")` is UTC, so KCM accepts an empty zone.
    let name = cj
        .spec
        .as_ref()?
        .time_zone
        .as_deref()
        .filter(|n| !n.is_empty())?;
    time_zone(Some(name)).err().map(|err| {
        Event::warning(
            "UnknownTimeZone",
            format!("invalid timeZone: {name:?}: {err}"),
        )
    })
}

/// Parses the schedule as KCM's `formatSchedule` + `cron.ParseStandard`:
/// `spec.timeZone` (checked already) names the zone, unless the schedule
/// carries a `TZ=`/`CRON_TZ=` prefix, which API validation refuses today
/// but KCM still honours, with a Warning `UnsupportedSchedule` pushed to
/// `events`. An unparseable schedule is Warning `UnparseableSchedule`.
pub(crate) fn resolve(cj: &CronJob, events: &mut Vec<Event>) -> Result<Resolved, Event> {
    let spec = cj.spec.as_ref();
    let text = spec.map(|s| s.schedule.as_str()).unwrap_or_default();
    let annotation_zone =
        time_zone(spec.and_then(|s| s.time_zone.as_deref())).unwrap_or(TimeZone::UTC);
    let unparseable = |err: String| {
        Event::warning(
            "UnparseableSchedule",
            format!("unparseable schedule: {text:?} : {err}"),
        )
    };
    if text.contains("TZ") {
        events.push(Event::warning(
            "UnsupportedSchedule",
            format!(
                "CRON_TZ or TZ used in schedule {text:?} is not officially supported, see \
                 https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details"
            ),
        ));
        let (zone, rest) = zone_prefix(text).map_err(unparseable)?;
        let schedule = Schedule::parse(rest).map_err(unparseable)?;
        return Ok(Resolved {
            schedule,
            zone,
            annotation_zone,
        });
    }
    let schedule = Schedule::parse(text).map_err(unparseable)?;
    Ok(Resolved {
        schedule,
        zone: annotation_zone.clone(),
        annotation_zone,
    })
}

/// robfig's `TZ=<zone> <spec>` / `CRON_TZ=<zone> <spec>` prefix. A schedule
/// that merely contains "TZ" elsewhere is parsed as it stands (and refused).
fn zone_prefix(text: &str) -> Result<(TimeZone, &str), String> {
    if !(text.starts_with("TZ=") || text.starts_with("CRON_TZ=")) {
        return Ok((TimeZone::UTC, text));
    }
    let (head, rest) = text
        .split_once(' ')
        .ok_or_else(|| format!("provided bad location {text}: no schedule after it"))?;
    let name = head.split_once('=').map(|(_, n)| n).unwrap_or_default();
    let zone =
        time_zone(Some(name)).map_err(|err| format!("provided bad location {name}: {err}"))?;
    Ok((zone, rest.trim()))
}

/// KCM's `mostRecentScheduleTime`, step for step (its arithmetic decides
/// which slot a late controller runs, and every replica must pick the same).
/// `last_schedule` is `status.lastScheduleTime` as this sync has it.
///
/// # Errors
/// KCM's text when the schedule has no two activations to measure an
/// interval by (`0 0 30 2 *`), which it reports as `InvalidSchedule`.
pub(crate) fn most_recent(
    cj: &CronJob,
    last_schedule: Option<Timestamp>,
    r: &Resolved,
    now: Timestamp,
    include_deadline: bool,
) -> Result<MostRecent, String> {
    const NO_INTERVAL: &str = "time difference between two schedules is less than 1 second";
    let mut earliest = last_schedule
        .or(cj.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .unwrap_or(now);
    if include_deadline
        && let Some(deadline) = cj.spec.as_ref().and_then(|s| s.starting_deadline_seconds)
        && let Ok(cutoff) = now.checked_sub(SignedDuration::from_secs(deadline))
        && cutoff > earliest
    {
        earliest = cutoff;
    }
    let none = |missed| MostRecent {
        earliest,
        slot: None,
        missed,
    };
    let next = |t: Timestamp| r.schedule.next_after(t, &r.zone);
    let t1 = next(earliest).ok_or(NO_INTERVAL)?;
    if now < t1 {
        return Ok(none(Missed::None));
    }
    let t2 = next(t1).ok_or(NO_INTERVAL)?;
    if now < t2 {
        return Ok(MostRecent {
            earliest,
            slot: Some(t1),
            missed: Missed::None,
        });
    }
    // Go's `Duration.Round(time.Second)`: halves away from zero.
    let gap = t2.duration_since(t1);
    let interval = (gap.as_millis() + 500) / 1000;
    let interval = i64::try_from(interval).unwrap_or(i64::MAX);
    if interval < 1 {
        return Err(NO_INTERVAL.into());
    }
    let elapsed = now.duration_since(t1).as_secs();
    let missed_count = elapsed / interval + 1;
    // Start one interval before the last multiple of it, and let the
    // schedule find the real slots from there (irregular schedules).
    let back = (missed_count - 2).saturating_mul(interval);
    let mut t = t1
        .checked_add(SignedDuration::from_secs(back))
        .ok()
        .and_then(next);
    let mut slot = None;
    for _ in 0..MAX_STEPS {
        match t {
            Some(at) if at <= now => {
                slot = Some(at);
                t = next(at);
            }
            _ => break,
        }
    }
    let missed = match missed_count {
        n if n > MANY_MISSED => Missed::Many,
        n if n > 0 => Missed::Few,
        _ => Missed::None,
    };
    Ok(MostRecent {
        earliest,
        slot,
        missed,
    })
}

/// KCM's `nextScheduleTimeDuration`: from the slot last run (or due), to
/// the one after it, plus [`NEXT_SCHEDULE_DELTA`]. `last_schedule` is the
/// `lastScheduleTime` this sync leaves. `None` when the schedule has no next
/// activation.
pub(crate) fn requeue_after(
    cj: &CronJob,
    last_schedule: Option<Timestamp>,
    r: &Resolved,
    now: Timestamp,
) -> Option<Duration> {
    let from = match most_recent(cj, last_schedule, r, now, false) {
        Err(_) => now,
        Ok(MostRecent {
            slot: Some(slot), ..
        }) => slot,
        Ok(MostRecent {
            earliest,
            slot: None,
            missed: Missed::None,
        }) => earliest,
        Ok(_) => now,
    };
    let at = r.schedule.next_after(from, &r.zone)?;
    Some(crate::time::until(now, at) + NEXT_SCHEDULE_DELTA)
}

/// The Job of the slot at `scheduled`: `<cronjob>-<unix minutes>` (KCM's
/// `getJobName`). Every replica derives the same name for a slot, which
/// makes the POST a create-if-absent.
pub fn job_name(cronjob: &str, scheduled: Timestamp) -> String {
    // Go's integer division truncates toward zero; so does Rust's.
    format!("{cronjob}-{}", scheduled.as_second() / 60)
}

/// `t` as Go's `time.RFC3339` prints it in `zone`: whole seconds, `Z` for a
/// zero offset, else `±hh:mm`.
pub(crate) fn rfc3339_in(t: Timestamp, zone: &TimeZone) -> String {
    let z = t.to_zoned(zone.clone());
    if z.offset().seconds() == 0 {
        z.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        z.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
    }
}

/// `t` in UTC as Go's `time.RFC1123Z`, the form of KCM's `MissSchedule`.
pub(crate) fn rfc1123z(t: Timestamp) -> String {
    t.to_zoned(TimeZone::UTC)
        .strftime("%a, %d %b %Y %H:%M:%S %z")
        .to_string()
}
