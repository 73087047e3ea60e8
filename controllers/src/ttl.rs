//! The TTL-after-finished controller (KCM's `ttlafterfinished`): a
//! finished Job with `spec.ttlSecondsAfterFinished` is deleted, with its
//! pods (Foreground), once that many seconds have passed since it
//! finished.
//!
//! A Job finished when a `Complete` or `Failed` condition turned `True`;
//! the condition's lastTransitionTime is the finish time (KCM's
//! `jobFinishTime`). `finish + ttl <= now` deletes it (a negative TTL, which
//! validation refuses, is already past); before that the Job is looked at
//! again at `finish + ttl`. A Job being deleted, unfinished, or without a
//! TTL is left alone.
//!
//! # The floor
//! A Job a CronJob scheduled (it carries
//! [`crate::cronjob::SCHEDULED_TIMESTAMP_ANNOTATION`] and a CronJob
//! controller) is the dedup guard of its tick, so its TTL respects the same
//! floor as the CronJob's history limits (see [`crate::cronjob`]): it is
//! kept until `floor` after the later of its slot and its creation, and,
//! when the runner knows the owning CronJob, until that CronJob's
//! `lastScheduleTime` has reached its slot. The TTL only ever comes later,
//! never sooner.
//!
//! # The runner
//! Calls [`reconcile`] with the Job from the cache and its owning CronJob
//! (its controller reference resolved in the cache, uid checked; `None` if
//! there is none or it is gone). On [`TtlDecision::Delete`] it reads the
//! Job again uncached and calls [`reconcile`] on that copy, as KCM does (the
//! TTL may have been changed since the cache saw it), and deletes only if
//! it still says so, with [`TtlDecision::action`]: Foreground, uid
//! precondition; `NotFound` and a failed precondition mean it is gone
//! already. No event is emitted (KCM's emits none). A Job's add and update
//! events enqueue it.

use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::jiff::Timestamp;

use crate::action::{Action, Propagation};
use crate::cronjob::{Hold, Recorded, finished, hold};
use crate::owner::controller_of;
use crate::time::{add_secs, until};

/// How often a Job held only because its CronJob has not recorded its tick
/// is looked at again: nothing else wakes the TTL controller when the
/// CronJob's status moves, and the CronJob controller records such a tick
/// on its next sync.
pub const UNRECORDED_RECHECK: Duration = Duration::from_secs(60);

/// What to do with a Job.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a decision does nothing until the runner acts on it"]
pub enum TtlDecision {
    /// Nothing to do until the Job changes: no TTL, not finished, or being
    /// deleted already.
    Keep,
    /// Look again after this long: the TTL, or the floor, runs out then.
    RequeueAfter(Duration),
    /// The TTL has run out: delete the Job ([`TtlDecision::action`]).
    Delete {
        /// Job name.
        name: String,
        /// Job uid, for the precondition.
        uid: String,
    },
    /// Finished, but its condition has no lastTransitionTime: KCM's error
    /// (this message), logged and retried with backoff.
    NoFinishTime(String),
}

impl TtlDecision {
    /// The delete the runner performs for [`TtlDecision::Delete`]:
    /// Foreground propagation and a uid precondition, as KCM's TTL
    /// controller sends it. `None` for the other decisions.
    pub fn action(&self) -> Option<Action> {
        match self {
            TtlDecision::Delete { name, uid } => Some(Action::DeleteJob {
                name: name.clone(),
                uid: uid.clone(),
                propagation: Propagation::Foreground,
            }),
            _ => None,
        }
    }
}

/// Decide for one Job at `now`. `owner`: the CronJob its controller
/// reference names, if the runner found it (only consulted for a Job a
/// CronJob scheduled). `floor`: normally
/// [`crate::cronjob::SCHEDULED_JOB_FLOOR`].
pub fn reconcile(
    job: &Job,
    owner: Option<&CronJob>,
    now: Timestamp,
    floor: Duration,
) -> TtlDecision {
    let Some(ttl) = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished) else {
        return TtlDecision::Keep;
    };
    if job.metadata.deletion_timestamp.is_some() {
        return TtlDecision::Keep;
    }
    let Some((_, finish)) = finished(job) else {
        return TtlDecision::Keep;
    };
    let Some(finish) = finish else {
        return TtlDecision::NoFinishTime(format!(
            "unable to find the time when the Job {}/{} finished",
            job.metadata.namespace.as_deref().unwrap_or_default(),
            job.metadata.name.as_deref().unwrap_or_default()
        ));
    };
    // Past the representable range: never.
    let Some(expire) = add_secs(finish, i64::from(ttl)) else {
        return TtlDecision::Keep;
    };
    if now < expire {
        return TtlDecision::RequeueAfter(until(now, expire));
    }
    let scheduled = controller_of(&job.metadata).is_some_and(|r| r.kind == "CronJob");
    if scheduled {
        let recorded = match owner {
            Some(cj) => Recorded::LastSchedule(
                cj.status
                    .as_ref()
                    .and_then(|s| s.last_schedule_time.as_ref())
                    .map(|t| t.0),
            ),
            None => Recorded::Unknown,
        };
        match hold(job, recorded, now, floor) {
            Hold::Free => {}
            Hold::Until(at) => return TtlDecision::RequeueAfter(until(now, at)),
            Hold::Unrecorded => return TtlDecision::RequeueAfter(UNRECORDED_RECHECK),
        }
    }
    TtlDecision::Delete {
        name: job.metadata.name.clone().unwrap_or_default(),
        uid: job.metadata.uid.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{CronJobStatus, JobCondition, JobSpec, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
    use std::collections::BTreeMap;

    const FLOOR: Duration = crate::cronjob::SCHEDULED_JOB_FLOOR;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("test timestamp")
    }

    /// A Job finished (`kind`) at `finished`, TTL `ttl`.
    fn job(ttl: Option<i32>, kind: &str, finished: Option<&str>) -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some("backup-1".into()),
                namespace: Some("ns".into()),
                uid: Some("job-uid".into()),
                creation_timestamp: Some(Time(ts("2024-06-01T11:00:00Z"))),
                ..Default::default()
            },
            spec: Some(JobSpec {
                ttl_seconds_after_finished: ttl,
                ..Default::default()
            }),
            status: Some(JobStatus {
                conditions: Some(vec![JobCondition {
                    type_: kind.into(),
                    status: "True".into(),
                    last_transition_time: finished.map(|f| Time(ts(f))),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    /// `job`, made by CronJob `backup` for the slot at `slot`.
    fn scheduled(mut j: Job, slot: &str, created: &str) -> Job {
        j.metadata.annotations = Some(BTreeMap::from([(
            crate::cronjob::SCHEDULED_TIMESTAMP_ANNOTATION.to_owned(),
            slot.to_owned(),
        )]));
        j.metadata.creation_timestamp = Some(Time(ts(created)));
        j.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "batch/v1".into(),
            kind: "CronJob".into(),
            name: "backup".into(),
            uid: "cj-uid".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]);
        j
    }

    fn cronjob(last_schedule: Option<&str>) -> CronJob {
        CronJob {
            metadata: ObjectMeta {
                name: Some("backup".into()),
                uid: Some("cj-uid".into()),
                ..Default::default()
            },
            spec: None,
            status: Some(CronJobStatus {
                last_schedule_time: last_schedule.map(|t| Time(ts(t))),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_finished_job_waits_for_its_ttl_then_is_deleted_in_foreground_with_its_uid() {
        let j = job(Some(100), "Complete", Some("2024-06-01T12:00:00Z"));
        assert_eq!(
            reconcile(&j, None, ts("2024-06-01T12:00:40Z"), FLOOR),
            TtlDecision::RequeueAfter(Duration::from_secs(60))
        );
        let at_expiry = reconcile(&j, None, ts("2024-06-01T12:01:40Z"), FLOOR);
        assert_eq!(
            at_expiry,
            TtlDecision::Delete {
                name: "backup-1".into(),
                uid: "job-uid".into()
            }
        );
        assert_eq!(
            at_expiry.action(),
            Some(Action::DeleteJob {
                name: "backup-1".into(),
                uid: "job-uid".into(),
                propagation: Propagation::Foreground,
            })
        );
        let failed = job(Some(0), "Failed", Some("2024-06-01T12:00:00Z"));
        assert!(matches!(
            reconcile(&failed, None, ts("2024-06-01T12:00:00Z"), FLOOR),
            TtlDecision::Delete { .. }
        ));
    }

    #[test]
    fn no_ttl_unfinished_interim_conditions_and_deleting_jobs_are_kept() {
        let now = ts("2024-06-02T00:00:00Z");
        assert_eq!(
            reconcile(
                &job(None, "Complete", Some("2024-06-01T12:00:00Z")),
                None,
                now,
                FLOOR
            ),
            TtlDecision::Keep
        );
        for interim in ["SuccessCriteriaMet", "FailureTarget", "Suspended"] {
            assert_eq!(
                reconcile(
                    &job(Some(0), interim, Some("2024-06-01T12:00:00Z")),
                    None,
                    now,
                    FLOOR
                ),
                TtlDecision::Keep,
                "{interim}"
            );
        }
        let mut not_true = job(Some(0), "Complete", Some("2024-06-01T12:00:00Z"));
        if let Some(c) = not_true
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .and_then(|c| c.first_mut())
        {
            c.status = "False".into();
        }
        assert_eq!(reconcile(&not_true, None, now, FLOOR), TtlDecision::Keep);
        let mut deleting = job(Some(0), "Complete", Some("2024-06-01T12:00:00Z"));
        deleting.metadata.deletion_timestamp = Some(Time(now));
        assert_eq!(reconcile(&deleting, None, now, FLOOR), TtlDecision::Keep);
        assert_eq!(
            reconcile(&Job::default(), None, now, FLOOR),
            TtlDecision::Keep
        );
    }

    #[test]
    fn odd_inputs_do_not_panic_a_negative_ttl_is_past_and_a_missing_time_is_kcms_error() {
        let now = ts("2024-06-01T12:00:00Z");
        let negative = job(Some(-30), "Complete", Some("2024-06-01T12:00:00Z"));
        assert!(matches!(
            reconcile(&negative, None, now, FLOOR),
            TtlDecision::Delete { .. }
        ));
        assert_eq!(
            reconcile(&job(Some(10), "Failed", None), None, now, FLOOR),
            TtlDecision::NoFinishTime(
                "unable to find the time when the Job ns/backup-1 finished".into()
            )
        );
        let far = job(Some(i32::MAX), "Complete", Some("9999-12-30T00:00:00Z"));
        assert_eq!(reconcile(&far, None, now, FLOOR), TtlDecision::Keep);
        // Finished "in the future" (clock skew): waits, as KCM does.
        let skewed = job(Some(0), "Complete", Some("2024-06-01T12:00:05Z"));
        assert_eq!(
            reconcile(&skewed, None, now, FLOOR),
            TtlDecision::RequeueAfter(Duration::from_secs(5))
        );
    }

    #[test]
    fn a_scheduled_jobs_ttl_waits_for_the_floor_after_its_slot() {
        let slot = "2024-06-01T12:00:00Z";
        let j = scheduled(
            job(Some(0), "Complete", Some("2024-06-01T12:00:30Z")),
            slot,
            slot,
        );
        let owner = cronjob(Some(slot));
        // TTL 0 has run out, but the tick's Job is its dedup guard.
        assert_eq!(
            reconcile(&j, Some(&owner), ts("2024-06-01T12:00:30Z"), FLOOR),
            TtlDecision::RequeueAfter(FLOOR - Duration::from_secs(30))
        );
        assert_eq!(
            reconcile(&j, Some(&owner), ts("2024-06-01T12:09:59Z"), FLOOR),
            TtlDecision::RequeueAfter(Duration::from_secs(1))
        );
        assert!(matches!(
            reconcile(&j, Some(&owner), ts("2024-06-01T12:10:00Z"), FLOOR),
            TtlDecision::Delete { .. }
        ));
        // Without the owner at hand, the floor alone.
        assert!(matches!(
            reconcile(&j, None, ts("2024-06-01T12:10:00Z"), FLOOR),
            TtlDecision::Delete { .. }
        ));
        // A long TTL past the floor is the TTL.
        let long = scheduled(
            job(Some(3600), "Complete", Some("2024-06-01T12:00:30Z")),
            slot,
            slot,
        );
        assert_eq!(
            reconcile(&long, Some(&owner), ts("2024-06-01T12:10:00Z"), FLOOR),
            TtlDecision::RequeueAfter(Duration::from_secs(3030))
        );
    }

    #[test]
    fn a_late_created_tick_job_counts_its_floor_from_its_creation() {
        let j = scheduled(
            job(Some(0), "Complete", Some("2024-06-01T12:31:00Z")),
            "2024-06-01T12:00:00Z",
            "2024-06-01T12:30:00Z",
        );
        let owner = cronjob(Some("2024-06-01T12:00:00Z"));
        assert_eq!(
            reconcile(&j, Some(&owner), ts("2024-06-01T12:31:00Z"), FLOOR),
            TtlDecision::RequeueAfter(Duration::from_secs(9 * 60))
        );
    }

    #[test]
    fn a_tick_its_cronjob_has_not_recorded_is_held_past_the_floor() {
        let slot = "2024-06-01T12:00:00Z";
        let j = scheduled(
            job(Some(0), "Complete", Some("2024-06-01T12:00:30Z")),
            slot,
            slot,
        );
        let now = ts("2024-06-01T13:00:00Z");
        for stale in [cronjob(None), cronjob(Some("2024-06-01T11:00:00Z"))] {
            assert_eq!(
                reconcile(&j, Some(&stale), now, FLOOR),
                TtlDecision::RequeueAfter(UNRECORDED_RECHECK)
            );
        }
        let moved_on = cronjob(Some("2024-06-01T13:00:00Z"));
        assert!(matches!(
            reconcile(&j, Some(&moved_on), now, FLOOR),
            TtlDecision::Delete { .. }
        ));
    }

    #[test]
    fn manual_jobs_and_jobs_of_other_owners_get_no_floor() {
        let now = ts("2024-06-01T12:00:30Z");
        let mut manual = scheduled(
            job(Some(0), "Complete", Some("2024-06-01T12:00:30Z")),
            "x",
            "2024-06-01T12:00:00Z",
        );
        manual.metadata.annotations = Some(BTreeMap::from([(
            crate::cronjob::INSTANTIATE_ANNOTATION.to_owned(),
            "manual".to_owned(),
        )]));
        assert!(matches!(
            reconcile(&manual, None, now, FLOOR),
            TtlDecision::Delete { .. }
        ));
        // The annotation without a CronJob controller is no tick either.
        let mut orphan = scheduled(
            job(Some(0), "Complete", Some("2024-06-01T12:00:30Z")),
            "2024-06-01T12:00:00Z",
            "2024-06-01T12:00:00Z",
        );
        orphan.metadata.owner_references = None;
        assert!(matches!(
            reconcile(&orphan, None, now, FLOOR),
            TtlDecision::Delete { .. }
        ));
    }

    #[test]
    fn an_unparseable_slot_annotation_falls_back_to_the_creation_time() {
        let j = scheduled(
            job(Some(0), "Complete", Some("2024-06-01T12:01:00Z")),
            "not a time",
            "2024-06-01T12:00:30Z",
        );
        assert_eq!(
            reconcile(&j, None, ts("2024-06-01T12:01:00Z"), FLOOR),
            TtlDecision::RequeueAfter(FLOOR - Duration::from_secs(30))
        );
    }
}
