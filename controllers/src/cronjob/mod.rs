//! The CronJob controller: one Job per slot of the schedule, as KCM's
//! `cronjob_controllerv2` (`syncCronJob`, `cleanupFinishedJobs`).
//!
//! One sync:
//! 1. the history limits delete the oldest finished Jobs beyond
//!    `successfulJobsHistoryLimit` / `failedJobsHistoryLimit`, within the
//!    floor below;
//! 2. `status.active` follows the Jobs: a finished one leaves it
//!    (`SawCompletedJob`), one that no longer exists too (`MissingJob`), an
//!    unfinished one it does not list is reported (`UnexpectedJob`, e.g. a
//!    `kubectl create job --from` run); `lastSuccessfulTime` is the newest
//!    completion of a Complete Job;
//! 3. unless the CronJob is being deleted, its zone is unknown, it is
//!    suspended, or its schedule does not parse (each a Warning event but
//!    `suspend`, no requeue): the most recent slot not yet run, only that
//!    one, gets its Job, subject to `startingDeadlineSeconds` and
//!    `concurrencyPolicy` (Forbid skips while a Job is active, Replace
//!    deletes the active ones first);
//! 4. the status is written if it changed, and the sync asks to run again
//!    at the next slot + 100 ms.
//!
//! # The contract: the Job's existence is the tick's dedup guard
//! A slot's Job is named from the slot ([`job_name`],
//! `<cronjob>-<unix minutes>`), so every replica derives the same name and
//! the POST is a create-if-absent: a replica that restarted, or sat out a
//! partition, and evaluates a tick again gets `AlreadyExists`, never a
//! second Job. A tick is evaluated again by anyone whose view of the
//! CronJob still has `lastScheduleTime` before it; the Job's existence is
//! all that stops them.
//!
//! The consequence: **retention never deletes a tick's Job while a replica
//! could still evaluate its tick.** Deleting it too early brings the tick
//! back to life. So the history limits here and `ttlSecondsAfterFinished`
//! ([`crate::ttl`]) both keep a Job that carries
//! [`SCHEDULED_TIMESTAMP_ANNOTATION`] and a CronJob controller:
//! - until the floor ([`SCHEDULED_JOB_FLOOR`], or the runner's value) has
//!   passed since the later of its slot and its creation, whatever the
//!   limit or the TTL says: a replica's view lags the store by at most its
//!   lease plus a partition it could sit out, and past the floor that view
//!   shows the Job, or a status that records its tick;
//! - and after that, until the CronJob's stored `lastScheduleTime` is at or
//!   past its slot, since a Job created but not yet recorded (a crash
//!   between the POST and the status write) is, for a fresh view, a tick
//!   still to run.
//!
//! A Job spared this way keeps the count over the limit until it may go
//! (the sync requeues for the end of its floor); a younger Job is not
//! deleted in its place. Manually created Jobs (no scheduled-timestamp
//! annotation) are no tick and get no floor. A tick's Job deleted after
//! the floor is not created again: `lastScheduleTime` has moved past it,
//! and only the most recent slot after it is ever run.
//!
//! # Inputs
//! `jobs`: the Jobs of the CronJob's namespace from the cache (more is
//! fine: only those whose controller reference names this CronJob count,
//! as in KCM's `getJobsToBeReconciled`), **plus** each Job that
//! `status.active` lists but the cache lacks, read live
//! ([`unconfirmed_active`]), so that a reference missing from `jobs` means
//! the Job is gone: KCM GETs those uncached before dropping them as
//! `MissingJob`, lest a slow watch lose a running Job from the status.
//! `cj`: the CronJob as last written by this controller or read since, so
//! that a Job it just recorded is not called unexpected (KCM re-reads it
//! uncached before saying `UnexpectedJob`). `floor`: normally
//! [`SCHEDULED_JOB_FLOOR`].
//!
//! # The runner
//! Performs the actions in order and stops at the first failure
//! ([`crate::Action`]). Deletes come first (each followed by its
//! `SuccessfulDelete` event), then the [`Action::CreateJob`] and its
//! `SuccessfulCreate`, then the status write, then the events of what the
//! sync saw. On the create's answer it calls [`after_create`] with the
//! rest of the list:
//!
//! ```text
//! let mut actions = reconcile(&cj, &jobs, now, floor)?.actions.into_iter();
//! while let Some(action) = actions.next() {
//!     match action {
//!         Action::CreateJob { job } => {
//!             let answer = match api.create_job(job).await {
//!                 Ok(created) => CreateAnswer::Created(created),
//!                 Err(AlreadyExists) => CreateAnswer::AlreadyExists(api.get_job(name).await?),
//!                 Err(e) => { event(FailedCreate, "Error creating job: {e}"); return Err(e) }
//!             };
//!             actions = after_create(&cj, answer, actions.collect()).into_iter();
//!         }
//!         // DeleteJob: DELETE with its propagation and uid precondition;
//!         // NotFound is fine, another error is Warning FailedDelete
//!         // "Deleted job: {e}" and the end of the sync.
//!         ...
//!     }
//! }
//! ```
//!
//! and requeues after `requeue_after` (with backoff after a failure). A
//! Job event (add, update, delete) of a Job whose controller is a CronJob,
//! and any update of the CronJob, enqueues the CronJob, as in KCM.
//!
//! # Where this differs from KCM
//! - A Job of the slot that the cache already shows under the derived name
//!   is adopted without a POST (KCM POSTs, is told `AlreadyExists`, GETs it
//!   and adopts it: the same outcome, one round trip less, and a view that
//!   shows the Job never depends on the API to refuse a second one).
//! - When the name is held by a Job the CronJob does not control, KCM
//!   gives up until the next change of the CronJob; this sync still
//!   requeues for the next slot.
//! - The floor above (KCM has none), and Jobs being deleted do not count
//!   towards the history limits (KCM deletes them again each sync).
//! - A CronJob without `spec.timeZone` runs in UTC, not in KCM's local
//!   zone ([`apiserver::cron`]).

mod children;
mod retention;
mod schedule;

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::action::{Action, Event, Propagation, Reconciled, Status};
use crate::error::ReconcileError;
use crate::owner::is_controlled_by;
use crate::time::until;

pub use children::{INSTANTIATE_ANNOTATION, SCHEDULED_TIMESTAMP_ANNOTATION};
pub use schedule::{NEXT_SCHEDULE_DELTA, job_name};

pub(crate) use children::finished;
pub(crate) use retention::{Hold, Recorded, hold};

use children::{controlled_by_name, job_for_slot, job_ref, name, pending_ref, succeeded, uid};
use schedule::{Missed, Resolved};

/// How long a tick's Job is kept at least, from the later of its slot and
/// its creation, whatever the history limits or its TTL say.
///
/// A correctness bound, not a tuning knob (see the module doc). It must
/// exceed the longest a replica can act on a view that predates the Job:
/// the leader lease (15 s here, `framework::leader`) that fences a frozen
/// leader, plus the watch lag and a partition a replica could sit out
/// before it notices it lost the lease. Ten minutes is forty times the
/// lease: a margin for a replica stalled in a long GC pause or a slow
/// store, while a Job that wants to be gone at once (`ttlSecondsAfterFinished:
/// 0`, a history limit of 0) still goes within minutes. It is far below
/// any useful history, so the limits behave as documented for everything
/// but the last few minutes' ticks.
pub const SCHEDULED_JOB_FLOOR: Duration = Duration::from_secs(10 * 60);

/// How the API answered an [`Action::CreateJob`].
#[derive(Clone, Copy, Debug)]
pub enum CreateAnswer<'a> {
    /// 201: the Job as created (it has its uid now).
    Created(&'a Job),
    /// 409 `AlreadyExists`, and the Job the runner then GOT under the name.
    /// (If that GET says `NotFound`, it was deleted in between: a failure
    /// of the sync, retried with backoff.)
    AlreadyExists(&'a Job),
}

/// Reconcile a CronJob. See the module doc for the inputs and the runner.
///
/// # Errors
/// None at present: everything KCM reports about a CronJob it reports as an
/// event, and so does this. The `Result` is the crate's reconcile shape.
pub fn reconcile(
    cj: &CronJob,
    jobs: &[&Job],
    now: Timestamp,
    floor: Duration,
) -> Result<Reconciled, ReconcileError> {
    let mut ours: Vec<&Job> = jobs
        .iter()
        .copied()
        .filter(|j| controlled_by_name(j, cj))
        .collect();
    // Deterministic event order, and one entry per Job however the runner
    // assembled the list.
    ours.sort_by(|a, b| (name(a), uid(a)).cmp(&(name(b), uid(b))));
    ours.dedup_by(|a, b| name(a) == name(b) && uid(a) == uid(b));

    let stored = normalized(cj.status.clone().unwrap_or_default());
    let mut sync = Sync {
        cj,
        status: stored.clone(),
        writes: Vec::new(),
        events: Vec::new(),
    };

    let history = retention::plan(cj, &ours, now, floor);
    for job in &history.delete {
        sync.delete(name(job), uid(job));
    }
    sync.follow_children(&ours);
    let next_slot = sync.schedule(&ours, now);
    let recheck = history
        .recheck_at
        .map(|at| until(now, at) + NEXT_SCHEDULE_DELTA);
    let requeue_after = match (next_slot, recheck) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };

    let Sync {
        status,
        mut writes,
        events,
        ..
    } = sync;
    let status = normalized(status);
    if status != stored {
        writes.push(Action::WriteStatus(Status::CronJob(status)));
    }
    writes.extend(events.into_iter().map(Action::Event));
    Ok(Reconciled {
        actions: writes,
        requeue_after,
    })
}

/// The rest of a sync's actions (those after its [`Action::CreateJob`]),
/// adjusted to the API's answer:
/// - [`CreateAnswer::Created`]: the status write's reference to the new
///   Job gets its uid and resourceVersion;
/// - [`CreateAnswer::AlreadyExists`] of a Job this CronJob controls: the
///   reference is that Job's (KCM's adoption of a Job it created but did
///   not record), and no `SuccessfulCreate` is reported; of a Job it does
///   not control (or one `status.active` already lists): the reference
///   and the new `lastScheduleTime` are dropped, with the event, and the
///   status write too if nothing else changed.
///
/// `cj` is the CronJob given to [`reconcile`].
pub fn after_create(cj: &CronJob, answer: CreateAnswer<'_>, rest: Vec<Action>) -> Vec<Action> {
    let (job, adopt, report) = match answer {
        CreateAnswer::Created(job) => (job, true, true),
        CreateAnswer::AlreadyExists(job) => {
            let cj_uid = cj.metadata.uid.as_deref().unwrap_or_default();
            let listed = cj
                .status
                .as_ref()
                .and_then(|s| s.active.as_ref())
                .is_some_and(|a| a.iter().any(|r| r.uid.as_deref() == Some(uid(job))));
            (
                job,
                is_controlled_by(&job.metadata, cj_uid) && !listed,
                false,
            )
        }
    };
    let stored = normalized(cj.status.clone().unwrap_or_default());
    let created_event = format!("Created job {}", name(job));
    rest.into_iter()
        .filter_map(|action| match action {
            Action::Event(e)
                if !report && e.reason == "SuccessfulCreate" && e.message == created_event =>
            {
                None
            }
            Action::WriteStatus(Status::CronJob(mut status)) => {
                let active = status.active.get_or_insert_with(Vec::new);
                let pending = active
                    .iter()
                    .position(|r| r.uid.is_none() && r.name.as_deref() == Some(name(job)));
                if let Some(i) = pending {
                    if adopt {
                        active[i] = job_ref(job);
                    } else {
                        active.remove(i);
                        status.last_schedule_time = stored.last_schedule_time.clone();
                    }
                }
                let status = normalized(status);
                (status != stored).then_some(Action::WriteStatus(Status::CronJob(status)))
            }
            other => Some(other),
        })
        .collect()
}

/// The `status.active` references whose Job is not among `jobs` (by uid):
/// the runner GETs each live and adds the Jobs it finds to what it passes
/// to [`reconcile`] (KCM's uncached GET before `MissingJob`).
pub fn unconfirmed_active<'a>(cj: &'a CronJob, jobs: &[&Job]) -> Vec<&'a ObjectReference> {
    let known: HashSet<&str> = jobs.iter().map(|j| uid(j)).collect();
    cj.status
        .as_ref()
        .and_then(|s| s.active.as_ref())
        .into_iter()
        .flatten()
        .filter(|r| !known.contains(r.uid.as_deref().unwrap_or_default()))
        .collect()
}

/// One sync in progress: the status as it is becoming, the writes so far,
/// and the events to report after the status write.
struct Sync<'a> {
    cj: &'a CronJob,
    status: CronJobStatus,
    writes: Vec<Action>,
    events: Vec<Event>,
}

impl Sync<'_> {
    fn active(&self) -> &[ObjectReference] {
        self.status.active.as_deref().unwrap_or_default()
    }

    fn in_active(&self, job_uid: &str) -> bool {
        self.active()
            .iter()
            .any(|r| r.uid.as_deref().unwrap_or_default() == job_uid)
    }

    /// KCM's `deleteFromActiveList`: every reference with this uid.
    fn forget(&mut self, job_uid: &str) {
        if let Some(active) = self.status.active.as_mut() {
            active.retain(|r| r.uid.as_deref().unwrap_or_default() != job_uid);
        }
    }

    /// KCM's `deleteJob`: DELETE (Background), `SuccessfulDelete`, and the
    /// Job leaves `status.active`.
    fn delete(&mut self, job_name: &str, job_uid: &str) {
        self.writes.push(Action::DeleteJob {
            name: job_name.to_owned(),
            uid: job_uid.to_owned(),
            propagation: Propagation::Background,
        });
        self.writes.push(Action::Event(Event::normal(
            "SuccessfulDelete",
            format!("Deleted job {job_name}"),
        )));
        self.forget(job_uid);
    }

    /// `status.active` and `lastSuccessfulTime` from the Jobs.
    fn follow_children(&mut self, ours: &[&Job]) {
        for job in ours {
            let found = self.in_active(uid(job));
            match finished(job) {
                None if !found => self.events.push(Event::warning(
                    "UnexpectedJob",
                    format!(
                        "Saw a job that the controller did not create or forgot: {}",
                        name(job)
                    ),
                )),
                None => {}
                Some((condition, _)) => {
                    if found {
                        self.forget(uid(job));
                        self.events.push(Event::normal(
                            "SawCompletedJob",
                            format!("Saw completed job: {}, condition: {condition}", name(job)),
                        ));
                    }
                    let completed = job.status.as_ref().and_then(|s| s.completion_time.as_ref());
                    if succeeded(job)
                        && let Some(at) = completed
                        && self
                            .status
                            .last_successful_time
                            .as_ref()
                            .is_none_or(|last| at.0 > last.0)
                    {
                        self.status.last_successful_time = Some(at.clone());
                    }
                }
            }
        }
        let present: HashSet<&str> = ours.iter().map(|j| uid(j)).collect();
        let missing: Vec<ObjectReference> = self
            .active()
            .iter()
            .filter(|r| !present.contains(r.uid.as_deref().unwrap_or_default()))
            .cloned()
            .collect();
        for r in missing {
            self.events.push(Event::normal(
                "MissingJob",
                format!(
                    "Active job went missing: {}",
                    r.name.as_deref().unwrap_or_default()
                ),
            ));
            self.forget(r.uid.as_deref().unwrap_or_default());
        }
    }

    /// The scheduling half of `syncCronJob`; returns the requeue for the
    /// next slot (`None`: wait for a change of the CronJob).
    fn schedule(&mut self, ours: &[&Job], now: Timestamp) -> Option<Duration> {
        let cj = self.cj;
        if cj.metadata.deletion_timestamp.is_some() {
            return None;
        }
        if let Some(e) = schedule::unknown_time_zone(cj) {
            self.events.push(e);
            return None;
        }
        let spec = cj.spec.as_ref()?;
        if spec.suspend == Some(true) {
            return None;
        }
        let r = match schedule::resolve(cj, &mut self.events) {
            Ok(r) => r,
            Err(e) => {
                self.events.push(e);
                return None;
            }
        };
        let last = self.status.last_schedule_time.as_ref().map(|t| t.0);
        let most_recent = match schedule::most_recent(cj, last, &r, now, true) {
            Ok(m) => m,
            Err(err) => {
                self.events.push(Event::warning(
                    "InvalidSchedule",
                    format!("invalid schedule: {} : {err}", spec.schedule),
                ));
                return None;
            }
        };
        let next = |sync: &Self, r: &Resolved| {
            let last = sync.status.last_schedule_time.as_ref().map(|t| t.0);
            schedule::requeue_after(cj, last, r, now)
        };
        let Some(slot) = most_recent.slot.filter(|s| *s <= now) else {
            return next(self, &r);
        };
        if most_recent.missed == Missed::Many {
            self.events.push(Event::warning(
                "TooManyMissedTimes",
                "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew".into(),
            ));
        }
        // Unreachable as KCM computes the slot (it never looks before
        // now - deadline), kept as KCM keeps it.
        if let Some(deadline) = spec.starting_deadline_seconds
            && crate::time::add_secs(slot, deadline).is_some_and(|end| end < now)
        {
            self.events.push(Event::warning(
                "MissSchedule",
                format!(
                    "Missed scheduled time to start a job: {}",
                    schedule::rfc1123z(slot)
                ),
            ));
            return next(self, &r);
        }
        let cj_name = cj.metadata.name.as_deref().unwrap_or_default();
        let slot_job = job_name(cj_name, slot);
        let namespace = cj.metadata.namespace.as_deref().unwrap_or_default();
        let already = self.active().iter().any(|r| {
            r.name.as_deref() == Some(slot_job.as_str())
                && r.namespace.as_deref().unwrap_or_default() == namespace
        }) || last == Some(slot);
        if already {
            return next(self, &r);
        }
        let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
        if policy == "Forbid" && !self.active().is_empty() {
            self.events.push(Event::normal(
                "JobAlreadyActive",
                "Not starting job because prior execution is running and concurrency policy is Forbid".into(),
            ));
            return next(self, &r);
        }
        if policy == "Replace" {
            for r in self.active().to_vec() {
                self.delete(
                    r.name.as_deref().unwrap_or_default(),
                    r.uid.as_deref().unwrap_or_default(),
                );
            }
        }
        match ours.iter().find(|j| name(j) == slot_job) {
            // The cache shows the slot's Job: KCM would POST, be told
            // AlreadyExists, GET it, and adopt it if it is this CronJob's.
            Some(existing) => {
                let cj_uid = cj.metadata.uid.as_deref().unwrap_or_default();
                if is_controlled_by(&existing.metadata, cj_uid) && !self.in_active(uid(existing)) {
                    self.status
                        .active
                        .get_or_insert_with(Vec::new)
                        .push(job_ref(existing));
                    self.status.last_schedule_time = Some(Time(slot));
                }
            }
            None => {
                let job = job_for_slot(cj, slot, &r.annotation_zone);
                self.status
                    .active
                    .get_or_insert_with(Vec::new)
                    .push(pending_ref(&job));
                self.status.last_schedule_time = Some(Time(slot));
                self.writes.push(Action::CreateJob { job });
                self.writes.push(Action::Event(Event::normal(
                    "SuccessfulCreate",
                    format!("Created job {slot_job}"),
                )));
            }
        }
        next(self, &r)
    }
}

/// An empty `active` is omitted on the wire, as KCM's status has it.
fn normalized(mut status: CronJobStatus) -> CronJobStatus {
    if status.active.as_ref().is_some_and(Vec::is_empty) {
        status.active = None;
    }
    status
}

#[cfg(test)]
mod tests;
