//! Retention of finished Jobs, within the floor: the history limits
//! (`cleanupFinishedJobs`) here, `ttlSecondsAfterFinished` in
//! [`crate::ttl`], both through [`hold`].

use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::children::{annotated_slot, finished};

/// What the owning CronJob's stored status says of the ticks it ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// The CronJob is not known (gone, or not looked up): only the floor
    /// protects its Jobs, since no controller re-creates a tick of a CronJob
    /// that does not exist.
    Unknown,
    /// Its `status.lastScheduleTime`.
    LastSchedule(Option<Timestamp>),
}

/// Whether retention may delete a Job now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hold {
    /// Not a tick's Job, or one no replica can evaluate again.
    Free,
    /// A tick's Job inside the floor: not before this time.
    Until(Timestamp),
    /// A tick's Job past the floor whose tick the CronJob's status has not
    /// recorded (`lastScheduleTime` before it): a replica reading that
    /// status still takes the tick for unmet, so the Job's existence is
    /// the only thing between it and a second run. Held until the status
    /// moves past it, with no time to look again at.
    Unrecorded,
}

/// The floor rule, shared by the history limits and the TTL.
///
/// A Job with the scheduled-timestamp annotation (the caller has checked
/// that a CronJob controls it) is a tick's Job. It is held:
/// - until `floor` after the later of its slot and its creation. The
///   creation counts because a Job created late (a controller catching up
///   on the most recent slot of an hourly schedule) is exactly as young,
///   for a replica whose view lags, as one created on time;
/// - after that, until `recorded` is at or past its slot.
///
/// An annotation that does not parse falls back to the creation time for
/// both (later than the slot, so the hold only lasts longer); with neither
/// time the Job is held, unrecorded.
pub(crate) fn hold(job: &Job, recorded: Recorded, now: Timestamp, floor: Duration) -> Hold {
    let Some(slot) = annotated_slot(job) else {
        return Hold::Free;
    };
    let created = job.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let (slot, anchor) = match (slot, created) {
        (Some(s), Some(c)) => (s, s.max(c)),
        (Some(s), None) => (s, s),
        (None, Some(c)) => (c, c),
        (None, None) => return Hold::Unrecorded,
    };
    let floor = SignedDuration::try_from(floor).unwrap_or(SignedDuration::MAX);
    // Past the representable range: held for good (a floor is never short).
    let Ok(end) = anchor.checked_add(floor) else {
        return Hold::Unrecorded;
    };
    if now < end {
        return Hold::Until(end);
    }
    match recorded {
        Recorded::LastSchedule(last) if last.is_none_or(|l| l < slot) => Hold::Unrecorded,
        _ => Hold::Free,
    }
}

/// What the history limits delete this sync, and when a Job they spared
/// for the floor may go.
#[derive(Debug, Default)]
pub(crate) struct History<'a> {
    /// Oldest first, within each of successful and failed.
    pub(crate) delete: Vec<&'a Job>,
    /// The earliest end of a floor that spared a Job the limits would
    /// delete: the sync should run again then.
    pub(crate) recheck_at: Option<Timestamp>,
}

/// KCM's `cleanupFinishedJobs`: beyond `successfulJobsHistoryLimit`
/// Complete Jobs and `failedJobsHistoryLimit` Failed ones, the oldest (by
/// `status.startTime`, unset last, then name) are deleted; an unset limit
/// keeps everything of its kind. A Job already being deleted is going and
/// counts for neither. Of the Jobs the limits pick, those [`hold`] keeps
/// are skipped, not replaced by younger ones: the count is over the limit
/// until the floor lets them go.
pub(crate) fn plan<'a>(
    cj: &CronJob,
    jobs: &[&'a Job],
    now: Timestamp,
    floor: Duration,
) -> History<'a> {
    let spec = cj.spec.as_ref();
    let recorded = Recorded::LastSchedule(
        cj.status
            .as_ref()
            .and_then(|s| s.last_schedule_time.as_ref())
            .map(|t| t.0),
    );
    let mut out = History::default();
    for (kind, limit) in [
        (
            "Complete",
            spec.and_then(|s| s.successful_jobs_history_limit),
        ),
        ("Failed", spec.and_then(|s| s.failed_jobs_history_limit)),
    ] {
        let Some(limit) = limit else { continue };
        let mut of_kind: Vec<&'a Job> = jobs
            .iter()
            .copied()
            .filter(|j| j.metadata.deletion_timestamp.is_none())
            .filter(|j| finished(j).is_some_and(|(k, _)| k == kind))
            .collect();
        let excess = of_kind
            .len()
            .saturating_sub(usize::try_from(limit).unwrap_or(0));
        if excess == 0 {
            continue;
        }
        of_kind.sort_by(|a, b| by_start_time(a, b));
        for job in of_kind.into_iter().take(excess) {
            match hold(job, recorded, now, floor) {
                Hold::Free => out.delete.push(job),
                Hold::Until(at) => {
                    out.recheck_at = Some(out.recheck_at.map_or(at, |r| r.min(at)));
                }
                // The status write that records the tick wakes the sync.
                Hold::Unrecorded => {}
            }
        }
    }
    out
}

/// KCM's `byJobStartTime`: started before unstarted, then by start time,
/// then by name.
fn by_start_time(a: &Job, b: &Job) -> std::cmp::Ordering {
    let start = |j: &Job| {
        j.status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0)
    };
    let name = |j: &Job| j.metadata.name.clone().unwrap_or_default();
    match (start(a), start(b)) {
        (Some(x), Some(y)) if x != y => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        _ => name(a).cmp(&name(b)),
    }
}
