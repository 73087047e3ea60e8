//! A Job's status written through `/status`, judged against the stored one as
//! kube-apiserver 1.33 judges it: `ValidateJobUpdateStatus`
//! (`pkg/apis/batch/validation/validation.go`) with the options
//! `getStatusValidationOptions` (`pkg/registry/batch/job/strategy.go`) picks while
//! `JobManagedBy` is on, as it is by default in 1.33.
//!
//! Contract: a status may only move the way a Job's life moves. Terminal conditions
//! (`Complete`, `Failed`, and the interim `FailureTarget` and `SuccessCriteriaMet`) are
//! never taken back; `Complete` comes after `SuccessCriteriaMet`, `Failed` after
//! `FailureTarget`; a finished Job has a `startTime`, no active, terminating or
//! uncounted pods, and a `completionTime` exactly when it is Complete; the counters
//! never go down; index lists are well formed and apart.
//!
//! Most rules are judged only when a field they read changes (kube's options are
//! "changed" flags), so a write that leaves a bad field alone passes, and a spec change
//! that makes the stored status stale (an Indexed Job scaled down) leaves the
//! controller a sync to repair it. The consequence: [`check`] needs the stored Job, and
//! the rules are not run on create or through the main endpoint, which keep the status.
//!
//! # Caveats
//! - Two exceptions kube added after 1.33.0 are kept, because mesopod's Job controller
//!   (a port of KCM 1.33's) writes both transitions: a suspended Job with
//!   `completions: 0` finishes without ever starting, and a resumed Job (`Suspended`
//!   True to False) gets a new `startTime`.
//! - `AllowForSuccessCriteriaMetInExtendedScope` is always on in 1.33, so the two rules
//!   it turns off (`SuccessCriteriaMet` only on Indexed Jobs with a success policy) are
//!   not here.
//!
//! Pure: functions over `k8s_openapi`'s Job; no clock, no I/O.

use k8s_openapi::api::batch::v1::{Job, JobSpec, JobStatus, UncountedTerminatedPods};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::indexes::{count_indexes, parse_interval};
use super::{INDEXED, go_json, invalid_omit, required};
use crate::CauseKind;
use crate::validation::Causes;

const COMPLETE: &str = "Complete";
const FAILED: &str = "Failed";
const FAILURE_TARGET: &str = "FailureTarget";
const SUCCESS_CRITERIA_MET: &str = "SuccessCriteriaMet";
const SUSPENDED: &str = "Suspended";

/// The status of `new`, written through `/status` over the stored `old`: kube's
/// `ValidateJobStatusUpdate` with the options of [`Rules::for_update`], each error at
/// kube's field path with kube's message.
pub(super) fn check(causes: &mut Causes, new: &Job, old: &Job) {
    let rules = Rules::for_update(new, old);
    check_status(causes, new, &rules);
    check_transitions(causes, new, old, &rules);
}

/// Which of kube's rules apply to one update (`JobStatusValidationOptions`, the
/// `JobManagedBy` branch of `getStatusValidationOptions`). A rule is on when a field it
/// reads changed, but for the few kube always applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)]
struct Rules {
    decreasing_succeeded: bool,
    decreasing_failed: bool,
    disabling_terminal_condition: bool,
    invalid_completed_indexes: bool,
    invalid_failed_indexes: bool,
    failed_indexes_overlapping_completed: bool,
    completed_indexes_for_non_indexed: bool,
    failed_indexes_without_backoff_limit_per_index: bool,
    failed_without_failure_target: bool,
    complete_without_success_criteria_met: bool,
    finished_with_active: bool,
    finished_without_start_time: bool,
    finished_with_uncounted: bool,
    start_time_update_unsuspended: bool,
    completion_time_before_start_time: bool,
    mutating_completion_time: bool,
    complete_without_completion_time: bool,
    completion_time_without_complete: bool,
    complete_with_failed: bool,
    complete_with_failure_target: bool,
    more_ready_than_active: bool,
    finished_with_terminating: bool,
}

impl Rules {
    /// kube's `getStatusValidationOptions(new, old)` with `JobManagedBy` on.
    fn for_update(new: &Job, old: &Job) -> Self {
        let (n, o) = (status(new), status(old));
        let spec = spec(new);
        let changed = |f: fn(&Job) -> bool| f(old) != f(new);
        let finished = changed(is_finished);
        let complete = changed(is_complete);
        let failed = changed(is_failed);
        let failure_target = changed(|j| is_true(j, FAILURE_TARGET));
        let success_criteria_met = changed(|j| is_true(j, SUCCESS_CRITERIA_MET));
        let completed_indexes = completed_indexes(n) != completed_indexes(o);
        let failed_indexes = n.failed_indexes != o.failed_indexes;
        let active = n.active.unwrap_or(0) != o.active.unwrap_or(0);
        let ready = n.ready != o.ready;
        let terminating = n.terminating != o.terminating;
        let start_time = n.start_time != o.start_time;
        let completion_time = n.completion_time != o.completion_time;
        let uncounted = uncounted(n) != uncounted(o);
        // kube's fixes after 1.33.0, which the Job controller needs (module docs).
        let suspended_with_zero_completions =
            spec.suspend == Some(true) && spec.completions == Some(0);
        let resuming = is_true(old, SUSPENDED) && condition_is(new, SUSPENDED, "False");
        Rules {
            // An Indexed Job whose completions move with its parallelism may be
            // scaled down, and its succeeded indexes with it.
            decreasing_succeeded: !is_indexed(spec) || spec.completions != spec.parallelism,
            decreasing_failed: true,
            disabling_terminal_condition: true,
            invalid_completed_indexes: completed_indexes,
            invalid_failed_indexes: failed_indexes,
            failed_indexes_overlapping_completed: failed_indexes || completed_indexes,
            completed_indexes_for_non_indexed: completed_indexes,
            failed_indexes_without_backoff_limit_per_index: failed_indexes,
            failed_without_failure_target: failed || failed_indexes,
            complete_without_success_criteria_met: complete || success_criteria_met,
            finished_with_active: finished || active,
            finished_without_start_time: (finished || start_time)
                && !suspended_with_zero_completions,
            finished_with_uncounted: finished || uncounted,
            start_time_update_unsuspended: start_time && !resuming,
            completion_time_before_start_time: start_time || completion_time,
            mutating_completion_time: true,
            completion_time_without_complete: complete || completion_time,
            complete_without_completion_time: complete || completion_time,
            complete_with_failed: complete || failed,
            complete_with_failure_target: complete || failure_target,
            more_ready_than_active: ready || active,
            finished_with_terminating: finished || terminating,
        }
    }
}

/// kube's `validateJobStatus`: the status on its own, in kube's order.
fn check_status(causes: &mut Causes, job: &Job, rules: &Rules) {
    let s = status(job);
    let spec = spec(job);
    // What holds whatever the status was before, as on create.
    super::job::check_status(causes, Some(s));
    let complete = is_complete(job);
    let failed = is_failed(job);
    let finished = complete || failed;
    let success_criteria_met = is_true(job, SUCCESS_CRITERIA_MET);
    let failure_target = is_true(job, FAILURE_TARGET);
    let conditions = "status.conditions";
    if rules.complete_with_failed && complete && failed {
        invalid_omit(
            causes,
            conditions,
            "cannot set Complete=True and Failed=true conditions",
        );
    }
    if rules.complete_with_failure_target && complete && failure_target {
        invalid_omit(
            causes,
            conditions,
            "cannot set Complete=True and FailureTarget=true conditions",
        );
    }
    if rules.completion_time_without_complete
        && !complete
        && let Some(t) = &s.completion_time
    {
        invalid_time(
            causes,
            "status.completionTime",
            t,
            "cannot set completionTime when there is no Complete=True condition",
        );
    }
    if rules.complete_without_completion_time && complete && s.completion_time.is_none() {
        required(
            causes,
            "status.completionTime",
            "completionTime is required for Complete jobs",
        );
    }
    if rules.completion_time_before_start_time
        && let (Some(start), Some(end)) = (&s.start_time, &s.completion_time)
        && end.0 < start.0
    {
        invalid_time(
            causes,
            "status.completionTime",
            end,
            "completionTime cannot be set before startTime",
        );
    }
    if rules.failed_without_failure_target && failed && !failure_target {
        invalid_omit(
            causes,
            conditions,
            "cannot set Failed=True condition without the FailureTarget=true condition",
        );
    }
    if rules.complete_without_success_criteria_met && complete && !success_criteria_met {
        invalid_omit(
            causes,
            conditions,
            "cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
        );
    }
    let active = s.active.unwrap_or(0);
    if rules.finished_with_active && finished && active > 0 {
        causes.invalid_number(
            "status.active",
            active.into(),
            "active>0 is invalid for finished job",
        );
    }
    if rules.finished_without_start_time && finished && s.start_time.is_none() {
        required(
            causes,
            "status.startTime",
            "startTime is required for finished job",
        );
    }
    if rules.finished_with_uncounted
        && finished
        && let Some(u) = s.uncounted_terminated_pods.as_ref()
        && uncounted_len(u) > 0
    {
        causes.push(
            CauseKind::Invalid,
            "status.uncountedTerminatedPods",
            format!(
                "Invalid value: {}: uncountedTerminatedPods needs to be empty for finished job",
                go_json(u)
            ),
        );
    }
    check_indexes(causes, job, rules);
    if rules.finished_with_terminating
        && finished
        && let Some(t) = s.terminating.filter(|t| *t > 0)
    {
        causes.invalid_number(
            "status.terminating",
            t.into(),
            "terminating>0 is invalid for finished job",
        );
    }
    if rules.more_ready_than_active
        && let Some(ready) = s.ready.filter(|r| *r > active)
    {
        causes.invalid_number(
            "status.ready",
            ready.into(),
            "cannot set more ready pods than active",
        );
    }
    if success_criteria_met && failed {
        invalid_omit(
            causes,
            conditions,
            "cannot set SuccessCriteriaMet=True and Failed=true conditions",
        );
    }
    if success_criteria_met && failure_target {
        invalid_omit(
            causes,
            conditions,
            "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions",
        );
    }
    if spec.success_policy.is_some() && !success_criteria_met && complete {
        invalid_omit(
            causes,
            conditions,
            "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True",
        );
    }
}

/// `completedIndexes` and `failedIndexes`: well formed, below `completions`, only where
/// the spec has them, and apart.
fn check_indexes(causes: &mut Causes, job: &Job, rules: &Rules) {
    let s = status(job);
    let spec = spec(job);
    let completed = completed_indexes(s);
    let failed = s.failed_indexes.as_deref();
    if rules.invalid_completed_indexes
        && let Some(c) = spec.completions
        && let Err(e) = count_indexes(completed, c)
    {
        causes.invalid(
            "status.completedIndexes",
            completed,
            &format!("error parsing completedIndexes: {e}"),
        );
    }
    if rules.invalid_failed_indexes
        && spec.backoff_limit_per_index.is_some()
        && let (Some(c), Some(f)) = (spec.completions, failed)
        && let Err(e) = count_indexes(f, c)
    {
        causes.invalid(
            "status.failedIndexes",
            f,
            &format!("error parsing failedIndexes: {e}"),
        );
    }
    if rules.completed_indexes_for_non_indexed && !completed.is_empty() && !is_indexed(spec) {
        causes.invalid(
            "status.completedIndexes",
            completed,
            "cannot set non-empty completedIndexes when non-indexed completion mode",
        );
    }
    // Also keeps failedIndexes off NonIndexed Jobs, which have no per-index limit.
    if rules.failed_indexes_without_backoff_limit_per_index
        && spec.backoff_limit_per_index.is_none()
        && let Some(f) = failed
    {
        causes.invalid(
            "status.failedIndexes",
            f,
            "cannot set non-null failedIndexes when backoffLimitPerIndex is null",
        );
    }
    if rules.failed_indexes_overlapping_completed
        && let (Some(c), Some(f)) = (spec.completions, failed)
        && let Some(at) = first_overlap(completed, f, c)
    {
        causes.invalid(
            "status.failedIndexes",
            f,
            &format!("failedIndexes and completedIndexes overlap at index: {at}"),
        );
    }
}

/// kube's `validateFailedIndexesNotOverlapCompleted`: the first index both lists name,
/// walking their intervals in step; an interval that does not parse is skipped (the
/// format checks report it).
fn first_overlap(completed: &str, failed: &str, completions: i32) -> Option<i64> {
    if completed.is_empty() || failed.is_empty() {
        return None;
    }
    let mut cs = completed
        .split(',')
        .filter_map(|i| parse_interval(i, completions).ok())
        .peekable();
    let mut fs = failed
        .split(',')
        .filter_map(|i| parse_interval(i, completions).ok())
        .peekable();
    while let (Some(&(cx, cy)), Some(&(fx, fy))) = (cs.peek(), fs.peek()) {
        if cx <= fy && fx <= cy {
            return Some(cx.max(fx));
        }
        if cx <= fx {
            cs.next();
        } else {
            fs.next();
        }
    }
    None
}

/// kube's `ValidateJobStatusUpdate` beyond `validateJobStatus`: what may not move
/// between the stored status and the new one.
fn check_transitions(causes: &mut Causes, new: &Job, old: &Job, rules: &Rules) {
    let (n, o) = (status(new), status(old));
    let conditions = "status.conditions";
    if rules.disabling_terminal_condition {
        for ty in [FAILED, COMPLETE, FAILURE_TARGET] {
            if is_true(old, ty) && !is_true(new, ty) {
                invalid_omit(
                    causes,
                    conditions,
                    &format!("cannot disable the terminal {ty}=True condition"),
                );
            }
        }
    }
    let failed = n.failed.unwrap_or(0);
    if rules.decreasing_failed && failed < o.failed.unwrap_or(0) {
        causes.invalid_number(
            "status.failed",
            failed.into(),
            "cannot decrease the failed counter",
        );
    }
    let succeeded = n.succeeded.unwrap_or(0);
    if rules.decreasing_succeeded && succeeded < o.succeeded.unwrap_or(0) {
        causes.invalid_number(
            "status.succeeded",
            succeeded.into(),
            "cannot decrease the succeeded counter",
        );
    }
    // Only a new value counts: a completionTime may go while the Job is not finished
    // (that it may not go from a Complete Job is the Complete rule's).
    if rules.mutating_completion_time
        && let (Some(now), Some(before)) = (&n.completion_time, &o.completion_time)
        && now != before
    {
        invalid_time(
            causes,
            "status.completionTime",
            now,
            "completionTime cannot be mutated",
        );
    }
    // Only a startTime once set: an unsuspended Job gets its first one.
    if rules.start_time_update_unsuspended
        && o.start_time.is_some()
        && n.start_time != o.start_time
        && spec(new).suspend != Some(true)
    {
        required(
            causes,
            "status.startTime",
            "startTime cannot be removed for unsuspended job",
        );
    }
    if is_true(old, SUCCESS_CRITERIA_MET) && !is_true(new, SUCCESS_CRITERIA_MET) {
        invalid_omit(
            causes,
            conditions,
            "cannot disable the SuccessCriteriaMet=True condition",
        );
    }
    if is_complete(old) && !is_true(old, SUCCESS_CRITERIA_MET) && is_true(new, SUCCESS_CRITERIA_MET)
    {
        invalid_omit(
            causes,
            conditions,
            "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions",
        );
    }
}

/// `field: Invalid value: T: detail`, T as Go prints a `metav1.Time`
/// (`2006-01-02 15:04:05.999999999 +0000 UTC`).
fn invalid_time(causes: &mut Causes, field: &str, t: &Time, detail: &str) {
    let shown = t.0.strftime("%Y-%m-%d %H:%M:%S%.f +0000 UTC");
    causes.push(
        CauseKind::Invalid,
        field,
        format!("Invalid value: {shown}: {detail}"),
    );
}

fn status(job: &Job) -> &JobStatus {
    static EMPTY: std::sync::OnceLock<JobStatus> = std::sync::OnceLock::new();
    job.status
        .as_ref()
        .unwrap_or_else(|| EMPTY.get_or_init(JobStatus::default))
}

fn spec(job: &Job) -> &JobSpec {
    static EMPTY: std::sync::OnceLock<JobSpec> = std::sync::OnceLock::new();
    job.spec
        .as_ref()
        .unwrap_or_else(|| EMPTY.get_or_init(JobSpec::default))
}

fn is_indexed(spec: &JobSpec) -> bool {
    spec.completion_mode.as_deref() == Some(INDEXED)
}

/// Go's string: unset and empty alike.
fn completed_indexes(s: &JobStatus) -> &str {
    s.completed_indexes.as_deref().unwrap_or_default()
}

/// The uncounted pods as Go's semantic equality sees them: an unset list is an empty
/// one, but no struct is not an empty struct.
fn uncounted(s: &JobStatus) -> Option<(&[String], &[String])> {
    s.uncounted_terminated_pods.as_ref().map(|u| {
        (
            u.succeeded.as_deref().unwrap_or_default(),
            u.failed.as_deref().unwrap_or_default(),
        )
    })
}

fn uncounted_len(u: &UncountedTerminatedPods) -> usize {
    u.succeeded.as_ref().map_or(0, Vec::len) + u.failed.as_ref().map_or(0, Vec::len)
}

/// kube's `IsConditionTrue`.
fn is_true(job: &Job, ty: &str) -> bool {
    condition_is(job, ty, "True")
}

/// Some condition of type `ty` has status `value`.
fn condition_is(job: &Job, ty: &str, value: &str) -> bool {
    status(job)
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == ty && c.status == value)
}

fn is_complete(job: &Job) -> bool {
    is_true(job, COMPLETE)
}

fn is_failed(job: &Job) -> bool {
    is_true(job, FAILED)
}

/// kube's `IsJobFinished`: Complete or Failed.
fn is_finished(job: &Job) -> bool {
    is_complete(job) || is_failed(job)
}

#[cfg(test)]
mod tests;
