//! The Job controller (KCM 1.33's `syncJob`): run pods from the template
//! until enough succeed, or until the Job fails, and count every finished
//! pod exactly once.
//!
//! `reconcile(job, pods, ctx, now)` is pure: the runner gives it the Job,
//! the pods of its namespace it controls or selects, what it remembers
//! ([`JobContext`]: expectations, finalizer removals in flight, the
//! backoff record) and `now`; it gets back the calls to make, in order,
//! when to look again, and the next backoff record ([`JobSync`]).
//!
//! # One sync, in order
//! 1. A finished Job (`Complete` or `Failed` True) only has its pods'
//!    tracking finalizers removed. A Job another controller manages
//!    (`spec.managedBy`) is left alone; one with an unknown completion
//!    mode gets a Warning.
//! 2. Pods are claimed as ReplicaSets claim them: orphans it selects are
//!    adopted (the patch also adds the tracking finalizer), pods it
//!    controls but no longer selects are released (and lose the
//!    finalizer).
//! 3. Finished pods not yet counted are looked at: the Job fails
//!    (interim `FailureTarget`) on a podFailurePolicy `FailJob` rule, on
//!    `failed > backoffLimit`, past `activeDeadlineSeconds`, or with
//!    backoffLimitPerIndex past `maxFailedIndexes` or with every index
//!    finished and some failed; an Indexed Job meets its successPolicy
//!    (interim `SuccessCriteriaMet`).
//! 4. A Job that fails or met its successPolicy has its active pods
//!    deleted. Otherwise, with expectations satisfied and the Job not being
//!    deleted: a suspended Job deletes its active pods; else the active
//!    count is brought to `min(parallelism, completions − succeeded)` (no
//!    completions: `parallelism` until one pod succeeded, then no new
//!    pods), creating at most [`MAX_POD_CREATE_DELETE_PER_SYNC`] pods,
//!    none before the re-create backoff ([`BackoffRecord`]) ends. Enough
//!    successes with no pod active: interim `SuccessCriteriaMet`
//!    (`CompletionsReached`).
//! 5. Tracking (below), then the terminal condition (`Complete` or
//!    `Failed`, same reason and message as the interim one) once no pod is
//!    left uncounted or terminating, and its events.
//!
//! # Tracking with the finalizer
//! Every pod is created with the finalizer `batch.kubernetes.io/job-tracking`,
//! so it cannot vanish before the Job has counted it. A finished pod
//! (Succeeded; Failed; or being deleted unfinished, which counts as
//! failed) that still has the finalizer goes through three steps, each a
//! write the next sync can see:
//! 1. its uid is added to `status.uncountedTerminatedPods.{succeeded,failed}`
//!    (at most [`MAX_UNCOUNTED_PODS`] in the lists), in the status write;
//! 2. its finalizer is removed ([`Action::RemovePodFinalizer`], listed
//!    **after** that status write);
//! 3. a later sync that sees the uid in the lists and the pod without the
//!    finalizer (or gone) raises `succeeded`/`failed` and drops the uid.
//!
//! So a sync that stops anywhere (a failed call, a crash, a failover)
//! leaves either a pod with its finalizer that is not yet in the lists
//! (it will be added), or a uid in the lists (counted once its finalizer is
//! gone): never counted twice, never missed. An Indexed Job records its
//! successes as `status.completedIndexes` instead of uids.
//!
//! # Actions, in order
//! Adoptions and releases (each release followed by its finalizer
//! removal); then the pod writes: creates, or deletes (a scale-down or a
//! suspend removes the pod's finalizer just before deleting it, so the
//! pod is not counted; a failing Job deletes keeping the finalizer, and
//! counts the pod as failed); then the status write; then the tracking
//! finalizer removals; then the Job's events. A sync never both creates and
//! deletes pods.
//!
//! # The runner's duties
//! - Perform the actions in order and stop at the first failure (a
//!   `NotFound` answer to a delete or a finalizer removal is no failure).
//!   [`Action::patch`] gives the strategic-merge bodies of
//!   [`Action::AdoptPod`], [`Action::ReleasePod`] and
//!   [`Action::RemovePodFinalizer`]. Before adopting, re-read the Job live,
//!   as for ReplicaSets: a cache may show a Job already being deleted.
//!   The status write must go to `…/status` with the resourceVersion the
//!   reconciled Job was read at; on a conflict, requeue and reconcile
//!   again. Never put this status onto a newer Job: its uncounted lists
//!   would drop what another write added.
//! - Expectations ([`crate::Expectations`], keyed `namespace/name`):
//!   [`expect_creations`](crate::Expectations::expect_creations) with
//!   [`Reconciled::pod_creations`] before the creates, or
//!   [`expect_deletions`](crate::Expectations::expect_deletions) with
//!   [`Reconciled::pod_deletions`] before the deletes; lower them from the
//!   pod watch, and for calls that fail or are skipped. Pass
//!   [`Expectations::satisfied`](crate::Expectations::satisfied) as
//!   [`JobContext::expectations_satisfied`].
//! - Finalizer removals ([`FinalizerExpectations`]): before the patches,
//!   [`expect_removals`](FinalizerExpectations::expect_removals) with
//!   [`Reconciled::finalizer_removals`]; `removal_observed` when the pod
//!   watch shows the pod without the finalizer or deleted, and for patches
//!   that fail or are skipped. Pass
//!   [`pending`](FinalizerExpectations::pending) as
//!   [`JobContext::finalizer_removals_pending`].
//! - The backoff record: keep one [`BackoffRecord`] per Job; store
//!   [`JobSync::backoff`] once the sync's status write succeeded (at once
//!   if it has none). With no record (a restart, a new leader), start from
//!   [`BackoffRecord::rebuild`]. A finished Job's is [`BackoffRecord::NONE`];
//!   drop the record when the Job is gone.
//! - Requeue after [`Reconciled::requeue_after`] (the backoff's end, the
//!   activeDeadline), and on every change of the Job or of a pod it
//!   controls or selects.
//! - Events: after each successful POST [`events::created`] with the
//!   server's pod name, after each DELETE [`events::deleted`] (and
//!   `create_failed`/`delete_failed`); the [`Action::Event`]s as they come.
//!   Component `job-controller`.
//! - Orphans: a pod with the tracking finalizer whose controller is not a
//!   live, unfinished Job (deleted with `propagationPolicy: Orphan`, or the
//!   Job gone) has the finalizer removed: [`orphan_finalizer_removal`].
//!
//! # Deviations from KCM
//! - KCM writes the status twice in one sync (the uncounted uids, then the
//!   counters once the finalizers are gone); here the second write is the
//!   next sync's, which the pod updates trigger. Same writes, one per sync.
//! - While the backoff holds creates back, KCM writes `active: 0` whatever
//!   runs; here `active` stays the number of active pods.
//! - Pods to delete are ranked as ReplicaSets rank them
//!   ([`crate::replicaset::rank`]), a refinement of the order KCM's Job
//!   controller uses.
//! - The backoff record survives a restart ([`BackoffRecord::rebuild`]).
//! - A Job resumed after its `activeDeadlineSeconds` has its deadline
//!   counted from the resume; KCM 1.33 checks the old `startTime` first
//!   and fails it at once.

mod backoff;
pub mod conditions;
mod create;
mod decide;
mod expectations;
mod failure_policy;
mod indexed;
mod manage;
mod pods;
mod status;
mod success_policy;
mod tracking;
mod view;

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::action::{Action, Event, Reconciled};
use crate::error::ReconcileError;
use crate::owner::{claim, controller_ref, is_controlled_by};
use crate::pod_state::{is_active, is_ready};
use crate::time::wire_time;
use indexed::Intervals;
use pods::{has_tracking_finalizer, is_failed, is_terminating, name, phase, uid, valid_index};
use view::{Mode, View};

pub use backoff::{
    BackoffRecord, DEFAULT_POD_FAILURE_BACKOFF, MAX_POD_FAILURE_BACKOFF, delay_after,
};
pub use conditions::is_finished;
pub use expectations::FinalizerExpectations;

/// The finalizer on every pod a Job creates: the pod cannot go before the
/// Job counted it.
pub const JOB_TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// Annotation and label with an Indexed pod's completion index.
pub const COMPLETION_INDEX_ANNOTATION: &str = "batch.kubernetes.io/job-completion-index";
/// With backoffLimitPerIndex: failures of the pod's index before it.
pub const INDEX_FAILURE_COUNT_ANNOTATION: &str = "batch.kubernetes.io/job-index-failure-count";
/// With backoffLimitPerIndex: failures of the pod's index before it that a
/// podFailurePolicy Ignore rule matched.
pub const INDEX_IGNORED_FAILURE_COUNT_ANNOTATION: &str =
    "batch.kubernetes.io/job-index-ignored-failure-count";
/// The environment variable with an Indexed pod's completion index.
pub const COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
/// `spec.managedBy` of the Jobs this controller syncs (or unset).
pub const JOB_CONTROLLER_NAME: &str = "kubernetes.io/job-controller";

/// Most uids in `status.uncountedTerminatedPods` (KCM's `MaxUncountedPods`):
/// 500 uids keep the status near 20 KB, and cap the finalizer removals of
/// one sync so a big Job does not starve the others. The rest wait for the
/// next sync.
pub const MAX_UNCOUNTED_PODS: usize = 500;
/// Most pods one sync creates or deletes for scale (KCM's
/// `MaxPodCreateDeletePerSync`); a failing Job deletes all its active pods.
pub const MAX_POD_CREATE_DELETE_PER_SYNC: usize = 500;
/// The shortest requeue for a backoff (KCM's `syncJobBatchPeriod`).
const MIN_BACKOFF_REQUEUE: Duration = Duration::from_secs(1);

/// What the runner knows beyond the Job and its pods.
#[derive(Clone, Copy, Debug)]
pub struct JobContext<'a> {
    /// The Job's expectations are satisfied: pods may be created or
    /// deleted for scale. When false, the sync only tracks and writes the
    /// status (a failing Job's active pods are still deleted, but its
    /// interim condition waits).
    pub expectations_satisfied: bool,
    /// Uids of pods whose finalizer removal the pod watch has not shown
    /// yet ([`FinalizerExpectations::pending`]): taken as removed.
    pub finalizer_removals_pending: &'a BTreeSet<String>,
    /// The runner's backoff record of this Job (see [`BackoffRecord`]).
    pub backoff: &'a BackoffRecord,
}

static NO_UIDS: BTreeSet<String> = BTreeSet::new();

impl Default for JobContext<'_> {
    fn default() -> Self {
        JobContext {
            expectations_satisfied: true,
            finalizer_removals_pending: &NO_UIDS,
            backoff: &BackoffRecord::NONE,
        }
    }
}

/// What one Job sync returns.
#[must_use = "a reconcile's actions do nothing until the runner performs them"]
#[derive(Clone, Debug, PartialEq)]
pub struct JobSync {
    /// The calls, in order, and when to look again.
    pub reconciled: Reconciled,
    /// The backoff record after this sync: store it once the sync's status
    /// write succeeded (at once if there is none).
    pub backoff: BackoffRecord,
}

/// Reconcile a Job.
///
/// `pods`: the pods of the Job's namespace that it controls or that its
/// selector selects (more is fine: others are ignored), finished ones
/// included.
///
/// # Errors
/// A Job without a spec or a usable selector, or an Indexed Job without
/// completions ([`ReconcileError::InvalidSpec`]), or a template that cannot
/// make a pod: KCM errors on those too, and retrying the same spec gives
/// the same error.
pub fn reconcile(
    job: &Job,
    pods: &[&Pod],
    ctx: &JobContext<'_>,
    now: Timestamp,
) -> Result<JobSync, ReconcileError> {
    let only = |actions: Vec<Action>| JobSync {
        reconciled: Reconciled {
            actions,
            requeue_after: None,
        },
        backoff: *ctx.backoff,
    };
    let spec = job
        .spec
        .as_ref()
        .ok_or(ReconcileError::InvalidSpec("spec: Required value"))?;
    if spec
        .managed_by
        .as_deref()
        .is_some_and(|m| m != JOB_CONTROLLER_NAME)
    {
        return Ok(only(Vec::new()));
    }
    if is_finished(job) {
        // KCM drops a finished Job's backoff record.
        return Ok(JobSync {
            backoff: BackoffRecord::NONE,
            ..only(finished_cleanup(job, pods, ctx))
        });
    }
    let indexed = match view::mode(spec) {
        Mode::NonIndexed => false,
        Mode::Indexed => true,
        Mode::Unknown => {
            return Ok(only(vec![Action::Event(Event::warning(
                "UnknownCompletionMode",
                "Skipped Job sync because completion mode is unknown".into(),
            ))]));
        }
    };
    let v = View::of(job, spec, indexed)?;

    let claim = claim(&job.metadata, &v.selector, pods.iter().copied());
    let mut head = Vec::new();
    let owner_ref = controller_ref(job);
    for p in &claim.adopt {
        head.push(Action::AdoptPod {
            name: name(p).to_owned(),
            uid: uid(p).to_owned(),
            owner_ref: owner_ref.clone(),
        });
    }
    for p in &claim.release {
        head.push(Action::ReleasePod {
            name: name(p).to_owned(),
            uid: uid(p).to_owned(),
            owner_uid: owner_ref.uid.clone(),
        });
        if has_tracking_finalizer(p) {
            head.push(remove_finalizer(p));
        }
    }
    let adopted: BTreeSet<&str> = claim.adopt.iter().map(|p| uid(p)).collect();

    let mut s = Sync::new(v, claim.claimed, adopted, ctx, now);
    s.decide();
    let pod_writes = s.act(ctx.expectations_satisfied)?;
    let tracked = s.track();
    let mut actions = head;
    actions.extend(pod_writes);
    let stored = job.status.clone().unwrap_or_default();
    if status::differs(&tracked.status, &stored) {
        actions.push(Action::WriteStatus(crate::Status::Job(tracked.status)));
    }
    actions.extend(tracked.removals);
    actions.extend(s.events.into_iter().map(Action::Event));
    Ok(JobSync {
        reconciled: Reconciled {
            actions,
            requeue_after: s.requeue_after,
        },
        backoff: s.backoff,
    })
}

/// For a pod whose controller reference names a Job (or that has none):
/// the finalizer removal KCM's orphan worker makes when the pod still has
/// the tracking finalizer and its Job is gone (`controller` is `None`) or
/// finished. `controller` is the Job its controller reference names, as
/// the runner's cache has it (matched by uid). A pod controlled by
/// something other than a `batch/v1` Job is left alone.
pub fn orphan_finalizer_removal(pod: &Pod, controller: Option<&Job>) -> Option<Action> {
    if !has_tracking_finalizer(pod) {
        return None;
    }
    if let Some(r) = crate::owner::controller_of(&pod.metadata) {
        if r.kind != "Job" || r.api_version != "batch/v1" {
            return None;
        }
        let live = controller.filter(|j| j.metadata.uid.as_deref() == Some(r.uid.as_str()));
        if live.is_some_and(|j| !is_finished(j)) {
            return None;
        }
    }
    Some(remove_finalizer(pod))
}

/// The events the runner emits around the pod calls of a sync, as KCM's
/// pod control words them (the ReplicaSet's).
pub mod events {
    pub use crate::replicaset::events::{create_failed, created, delete_failed, deleted};
}

fn remove_finalizer(p: &Pod) -> Action {
    Action::RemovePodFinalizer {
        name: name(p).to_owned(),
        uid: uid(p).to_owned(),
    }
}

/// A finished Job only lets its pods go (KCM's `cleanupPodFinalizers`
/// through the orphan worker): pods it controls that still carry the
/// finalizer lose it, uncounted.
fn finished_cleanup(job: &Job, pods: &[&Pod], ctx: &JobContext<'_>) -> Vec<Action> {
    let job_uid = job.metadata.uid.as_deref().unwrap_or_default();
    pods.iter()
        .filter(|p| is_controlled_by(&p.metadata, job_uid))
        .filter(|p| has_tracking_finalizer(p))
        .filter(|p| !ctx.finalizer_removals_pending.contains(uid(p)))
        .map(|p| remove_finalizer(p))
        .collect()
}

/// How the Job will end, once decided (KCM's `finishedCondition`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Finish {
    /// Interim `SuccessCriteriaMet`, then `Complete`.
    Success { reason: String, message: String },
    /// Interim `FailureTarget` (`written`: already stored), then `Failed`.
    Failure {
        reason: String,
        message: String,
        written: bool,
    },
}

impl Finish {
    fn failure(reason: &str, message: &str) -> Self {
        Finish::Failure {
            reason: reason.to_owned(),
            message: message.to_owned(),
            written: false,
        }
    }
}

/// One sync's working state (KCM's `syncJobCtx`).
struct Sync<'a> {
    v: View<'a>,
    now: Timestamp,
    /// The pods the Job claims, finished ones included.
    pods: Vec<&'a Pod>,
    /// Uids adopted this sync: their patch adds the finalizer, so they are
    /// tracked as if they had it.
    adopted: BTreeSet<&'a str>,
    pending: &'a BTreeSet<String>,
    active: Vec<&'a Pod>,
    /// Active pods after this sync's creates and deletes.
    active_count: i32,
    ready: i32,
    terminating: i32,
    /// The stored status, with `startTime` and conditions as this sync
    /// sets them.
    status: JobStatus,
    uncounted_succeeded: BTreeSet<&'a str>,
    uncounted_failed: BTreeSet<&'a str>,
    /// Successes so far, counted or not (Indexed: succeeded indexes).
    succeeded: i32,
    /// Failures so far that count, counted or not.
    failed: i32,
    prev_succeeded_indexes: Intervals,
    succeeded_indexes: Intervals,
    /// With backoffLimitPerIndex.
    failed_indexes: Option<Intervals>,
    /// With backoffLimitPerIndex: per index, the failed pod whose
    /// finalizer waits for its replacement.
    delayed: std::collections::BTreeMap<i64, &'a Pod>,
    finish: Option<Finish>,
    backoff: BackoffRecord,
    requeue_after: Option<Duration>,
    events: Vec<Event>,
}

impl<'a> Sync<'a> {
    fn new(
        v: View<'a>,
        pods: Vec<&'a Pod>,
        adopted: BTreeSet<&'a str>,
        ctx: &JobContext<'a>,
        now: Timestamp,
    ) -> Self {
        let stored = v.job.status.as_ref();
        let mut status = stored.cloned().unwrap_or_default();
        if status.start_time.is_none() && !v.suspended {
            status.start_time = Some(wire_time(now));
        }
        let uncounted = stored.and_then(|s| s.uncounted_terminated_pods.as_ref());
        let set = |l: Option<&'a Vec<String>>| -> BTreeSet<&'a str> {
            l.into_iter().flatten().map(String::as_str).collect()
        };
        let uncounted_succeeded = set(uncounted.and_then(|u| u.succeeded.as_ref()));
        let uncounted_failed = set(uncounted.and_then(|u| u.failed.as_ref()));
        let active: Vec<&'a Pod> = pods.iter().copied().filter(|p| is_active(p)).collect();
        let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        let mut s = Sync {
            now,
            active_count: count(active.len()),
            ready: count(active.iter().filter(|p| is_ready(p)).count()),
            terminating: count(pods.iter().filter(|p| is_terminating(p)).count()),
            active,
            pods,
            adopted,
            pending: ctx.finalizer_removals_pending,
            status,
            uncounted_succeeded,
            uncounted_failed,
            succeeded: 0,
            failed: 0,
            prev_succeeded_indexes: Intervals::default(),
            succeeded_indexes: Intervals::default(),
            failed_indexes: None,
            delayed: Default::default(),
            finish: None,
            backoff: *ctx.backoff,
            requeue_after: None,
            events: Vec::new(),
            v,
        };
        // KCM's getNewFinishedPods: finished, still tracked, not yet in the
        // uncounted lists.
        let new_succeeded: Vec<&Pod> = s
            .pods
            .iter()
            .copied()
            .filter(|p| s.is_new(p, &s.uncounted_succeeded) && phase(p) == "Succeeded")
            .collect();
        let new_failed: Vec<&Pod> = s
            .pods
            .iter()
            .copied()
            .filter(|p| s.is_new(p, &s.uncounted_failed) && s.is_failed(p))
            .collect();
        let counted_failures = new_failed
            .iter()
            .filter(|p| failure_policy::failure_counts(s.v.pod_failure_policy, p))
            .count();
        s.succeeded = s
            .status
            .succeeded
            .unwrap_or(0)
            .saturating_add(count(new_succeeded.len()))
            .saturating_add(count(s.uncounted_succeeded.len()));
        s.failed = s
            .status
            .failed
            .unwrap_or(0)
            .saturating_add(count(counted_failures))
            .saturating_add(count(s.uncounted_failed.len()));
        s.backoff = ctx.backoff.advance(&new_succeeded, &new_failed);
        s
    }

    /// The pod carries the finalizer (or gets it by adoption now).
    fn tracked(&self, p: &Pod) -> bool {
        has_tracking_finalizer(p) || self.adopted.contains(uid(p))
    }

    /// Tracked and its finalizer removal not in flight: a previous sync
    /// has not finished with it (KCM's `hasJobTrackingFinalizer &&
    /// !expectedRmFinalizers.Has`).
    fn unprocessed(&self, p: &Pod) -> bool {
        self.tracked(p) && !self.pending.contains(uid(p))
    }

    /// KCM's `getValidPodsWithFilter`: unprocessed, not in `uncounted`,
    /// and with a valid index in an Indexed Job.
    fn is_new(&self, p: &Pod, uncounted: &BTreeSet<&str>) -> bool {
        self.unprocessed(p)
            && !uncounted.contains(uid(p))
            && (!self.v.indexed || valid_index(p, self.v.index_limit()).is_some())
    }

    fn is_failed(&self, p: &Pod) -> bool {
        is_failed(p, self.v.only_replace_failed)
    }

    /// Look again after `d` at the latest.
    fn requeue(&mut self, d: Duration) {
        self.requeue_after = Some(self.requeue_after.map_or(d, |r| r.min(d)));
    }
}

#[cfg(test)]
pub(crate) mod sim;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_lifecycle;
#[cfg(test)]
mod tests_policies;
