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
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::{Value, json};

    use super::*;

    /// A Job of `spec` (NonIndexed, one completion unless told) with `status`.
    fn job(spec: Value, status: Value) -> Job {
        let mut s = json!({"completions": 1, "parallelism": 1, "completionMode": "NonIndexed",
            "template": {}});
        s.as_object_mut()
            .unwrap()
            .extend(spec.as_object().unwrap().clone());
        serde_json::from_value(json!({"metadata": {"name": "j"}, "spec": s, "status": status}))
            .expect("a Job")
    }

    /// The causes of writing `new` over `old`, both of `spec`, as kube prints them.
    fn check_spec(spec: Value, old: Value, new: Value) -> Vec<String> {
        let (old, new) = (job(spec.clone(), old), job(spec, new));
        let mut causes = Causes::default();
        check(&mut causes, &new, &old);
        causes
            .0
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    fn check_update(old: Value, new: Value) -> Vec<String> {
        check_spec(json!({}), old, new)
    }

    fn conds(types: &[&str]) -> Value {
        types
            .iter()
            .map(|t| json!({"type": t, "status": "True"}))
            .collect()
    }

    const START: &str = "2025-01-01T00:00:00Z";
    const END: &str = "2025-01-01T00:01:00Z";

    #[test]
    fn the_controllers_success_sequence_passes() {
        let running = json!({"startTime": START, "active": 1, "ready": 1});
        let met = json!({"startTime": START, "succeeded": 1,
            "conditions": conds(&["SuccessCriteriaMet"])});
        let complete = json!({"startTime": START, "completionTime": END, "succeeded": 1,
            "conditions": conds(&["SuccessCriteriaMet", "Complete"])});
        assert_eq!(
            check_update(json!({}), running.clone()),
            Vec::<String>::new()
        );
        assert_eq!(check_update(running, met.clone()), Vec::<String>::new());
        assert_eq!(check_update(met, complete), Vec::<String>::new());
    }

    #[test]
    fn the_controllers_failure_sequence_passes() {
        let target = json!({"startTime": START, "failed": 7,
            "conditions": conds(&["FailureTarget"])});
        let failed = json!({"startTime": START, "failed": 7,
            "conditions": conds(&["FailureTarget", "Failed"])});
        assert_eq!(
            check_update(json!({"startTime": START, "failed": 6}), target.clone()),
            Vec::<String>::new()
        );
        assert_eq!(check_update(target, failed), Vec::<String>::new());
    }

    #[test]
    fn complete_needs_success_criteria_met_and_a_completion_time_and_a_start_time() {
        assert_eq!(
            check_update(json!({}), json!({"conditions": conds(&["Complete"])})),
            [
                "status.completionTime: Required value: completionTime is required for Complete jobs",
                "status.conditions: Invalid value: cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
                "status.startTime: Required value: startTime is required for finished job",
            ]
        );
    }

    #[test]
    fn failed_needs_failure_target() {
        assert_eq!(
            check_update(
                json!({"startTime": START}),
                json!({"startTime": START, "conditions": conds(&["Failed"])})
            ),
            [
                "status.conditions: Invalid value: cannot set Failed=True condition without the FailureTarget=true condition"
            ]
        );
    }

    #[test]
    fn terminal_conditions_cannot_be_disabled() {
        let old = json!({"startTime": START, "completionTime": END,
            "conditions": conds(&["SuccessCriteriaMet", "Complete"])});
        let flipped = json!({"startTime": START, "completionTime": END, "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True"},
            {"type": "Complete", "status": "False"}]});
        assert_eq!(
            check_update(old.clone(), flipped),
            [
                "status.completionTime: Invalid value: 2025-01-01 00:01:00 +0000 UTC: cannot set completionTime when there is no Complete=True condition",
                "status.conditions: Invalid value: cannot disable the terminal Complete=True condition",
            ]
        );
        assert_eq!(
            check_update(old, json!({"startTime": START})),
            [
                "status.conditions: Invalid value: cannot disable the terminal Complete=True condition",
                "status.conditions: Invalid value: cannot disable the SuccessCriteriaMet=True condition",
            ]
        );
        let target = json!({"startTime": START, "conditions": conds(&["FailureTarget"])});
        assert_eq!(
            check_update(target, json!({"startTime": START})),
            [
                "status.conditions: Invalid value: cannot disable the terminal FailureTarget=True condition"
            ]
        );
    }

    #[test]
    fn complete_and_failed_exclude_each_other() {
        let old = json!({"startTime": START, "conditions": conds(&["FailureTarget"])});
        let both = json!({"startTime": START, "completionTime": END,
            "conditions": conds(&["FailureTarget", "Failed", "Complete"])});
        assert_eq!(
            check_update(old, both),
            [
                "status.conditions: Invalid value: cannot set Complete=True and Failed=true conditions",
                "status.conditions: Invalid value: cannot set Complete=True and FailureTarget=true conditions",
                "status.conditions: Invalid value: cannot set Complete=True condition without the SuccessCriteriaMet=true condition",
            ]
        );
        let met = json!({"startTime": START, "conditions": conds(&["SuccessCriteriaMet", "FailureTarget"])});
        assert_eq!(
            check_update(json!({"startTime": START}), met),
            [
                "status.conditions: Invalid value: cannot set SuccessCriteriaMet=True and FailureTarget=true conditions"
            ]
        );
        let met = json!({"startTime": START, "conditions": conds(&["SuccessCriteriaMet", "FailureTarget", "Failed"])});
        assert_eq!(
            check_update(
                json!({"startTime": START, "conditions": conds(&["FailureTarget"])}),
                met
            ),
            [
                "status.conditions: Invalid value: cannot set SuccessCriteriaMet=True and Failed=true conditions",
                "status.conditions: Invalid value: cannot set SuccessCriteriaMet=True and FailureTarget=true conditions",
            ]
        );
    }

    #[test]
    fn a_complete_job_without_success_criteria_met_cannot_get_it_later() {
        // A Job completed before the rule (its Complete stored without the interim).
        let old =
            json!({"startTime": START, "completionTime": END, "conditions": conds(&["Complete"])});
        let new = json!({"startTime": START, "completionTime": END,
            "conditions": conds(&["Complete", "SuccessCriteriaMet"])});
        assert_eq!(
            check_update(old, new),
            [
                "status.conditions: Invalid value: cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions"
            ]
        );
    }

    #[test]
    fn completion_time_only_with_complete_not_before_start_and_never_moved() {
        assert_eq!(
            check_update(
                json!({"startTime": START}),
                json!({"startTime": START, "completionTime": END})
            ),
            [
                "status.completionTime: Invalid value: 2025-01-01 00:01:00 +0000 UTC: cannot set completionTime when there is no Complete=True condition"
            ]
        );
        let met = json!({"startTime": END, "conditions": conds(&["SuccessCriteriaMet"])});
        let early = json!({"startTime": END, "completionTime": START,
            "conditions": conds(&["SuccessCriteriaMet", "Complete"])});
        assert_eq!(
            check_update(met, early),
            [
                "status.completionTime: Invalid value: 2025-01-01 00:00:00 +0000 UTC: completionTime cannot be set before startTime"
            ]
        );
        let done = json!({"startTime": START, "completionTime": END,
            "conditions": conds(&["SuccessCriteriaMet", "Complete"])});
        let moved = json!({"startTime": START, "completionTime": "2025-01-01T00:02:00.5Z",
            "conditions": conds(&["SuccessCriteriaMet", "Complete"])});
        assert_eq!(
            check_update(done, moved),
            [
                "status.completionTime: Invalid value: 2025-01-01 00:02:00.5 +0000 UTC: completionTime cannot be mutated"
            ]
        );
    }

    #[test]
    fn a_finished_job_has_no_active_terminating_or_uncounted_pods() {
        let target = json!({"startTime": START, "conditions": conds(&["FailureTarget"])});
        let failed = json!({"startTime": START, "active": 1, "terminating": 2,
            "uncountedTerminatedPods": {"failed": ["u1"]},
            "conditions": conds(&["FailureTarget", "Failed"])});
        assert_eq!(
            check_update(target, failed),
            [
                "status.active: Invalid value: 1: active>0 is invalid for finished job",
                "status.uncountedTerminatedPods: Invalid value: {\"failed\":[\"u1\"]}: uncountedTerminatedPods needs to be empty for finished job",
                "status.terminating: Invalid value: 2: terminating>0 is invalid for finished job",
            ]
        );
    }

    #[test]
    fn counters_are_not_negative_and_ready_is_not_above_active() {
        assert_eq!(
            check_update(
                json!({}),
                json!({"active": -1, "succeeded": -2, "failed": -3, "ready": -4, "terminating": -5})
            ),
            [
                "status.active: Invalid value: -1: must be greater than or equal to 0",
                "status.succeeded: Invalid value: -2: must be greater than or equal to 0",
                "status.failed: Invalid value: -3: must be greater than or equal to 0",
                "status.ready: Invalid value: -4: must be greater than or equal to 0",
                "status.terminating: Invalid value: -5: must be greater than or equal to 0",
                // Below the stored zeros, too.
                "status.failed: Invalid value: -3: cannot decrease the failed counter",
                "status.succeeded: Invalid value: -2: cannot decrease the succeeded counter",
            ]
        );
        assert_eq!(
            check_update(json!({"active": 2}), json!({"active": 2, "ready": 3})),
            ["status.ready: Invalid value: 3: cannot set more ready pods than active"]
        );
    }

    #[test]
    fn counters_do_not_decrease_but_an_elastic_indexed_jobs_succeeded_may() {
        assert_eq!(
            check_update(
                json!({"succeeded": 2, "failed": 2}),
                json!({"succeeded": 1, "failed": 1})
            ),
            [
                "status.failed: Invalid value: 1: cannot decrease the failed counter",
                "status.succeeded: Invalid value: 1: cannot decrease the succeeded counter",
            ]
        );
        let elastic = json!({"completionMode": "Indexed", "completions": 2, "parallelism": 2});
        assert_eq!(
            check_spec(
                elastic,
                json!({"succeeded": 3, "completedIndexes": "0-2"}),
                json!({"succeeded": 2, "completedIndexes": "0-1"})
            ),
            Vec::<String>::new()
        );
    }

    #[test]
    fn uncounted_pods_are_named_once() {
        assert_eq!(
            check_update(
                json!({}),
                json!({"uncountedTerminatedPods": {"succeeded": ["a", ""], "failed": ["a"]}})
            ),
            [
                "status.uncountedTerminatedPods.succeeded[1]: Invalid value: \"\": must not be empty",
                "status.uncountedTerminatedPods.failed[0]: Duplicate value: \"a\"",
            ]
        );
    }

    #[test]
    fn start_time_stays_once_set_unless_suspended_or_resumed() {
        let later = "2025-01-01T00:05:00Z";
        assert_eq!(
            check_update(json!({"startTime": START}), json!({"startTime": later})),
            ["status.startTime: Required value: startTime cannot be removed for unsuspended job"]
        );
        assert_eq!(
            check_update(json!({"startTime": START}), json!({})),
            ["status.startTime: Required value: startTime cannot be removed for unsuspended job"]
        );
        assert_eq!(
            check_spec(
                json!({"suspend": true}),
                json!({"startTime": START}),
                json!({})
            ),
            Vec::<String>::new()
        );
        // The controller's resume: Suspended True to False and the clock anew.
        let suspended = json!({"startTime": START,
            "conditions": [{"type": "Suspended", "status": "True"}]});
        let resumed = json!({"startTime": later,
            "conditions": [{"type": "Suspended", "status": "False"}]});
        assert_eq!(check_update(suspended, resumed), Vec::<String>::new());
    }

    #[test]
    fn a_suspended_job_of_no_completions_finishes_without_starting() {
        let spec = json!({"suspend": true, "completions": 0});
        let met = json!({"conditions": conds(&["SuccessCriteriaMet"])});
        let done = json!({"completionTime": END, "conditions": conds(&["SuccessCriteriaMet", "Complete"])});
        assert_eq!(
            check_spec(spec.clone(), json!({}), met.clone()),
            Vec::<String>::new()
        );
        assert_eq!(check_spec(spec, met, done), Vec::<String>::new());
    }

    #[test]
    fn completed_indexes_are_well_formed_within_completions_and_only_indexed() {
        let indexed = json!({"completionMode": "Indexed", "completions": 4, "parallelism": 1});
        assert_eq!(
            check_spec(
                indexed.clone(),
                json!({}),
                json!({"completedIndexes": "0,2-7"})
            ),
            [
                "status.completedIndexes: Invalid value: \"0,2-7\": error parsing completedIndexes: too large index: \"7\""
            ]
        );
        assert_eq!(
            check_spec(
                indexed.clone(),
                json!({}),
                json!({"completedIndexes": "2,1"})
            ),
            [
                "status.completedIndexes: Invalid value: \"2,1\": error parsing completedIndexes: non-increasing order, previous: 2, current: 1"
            ]
        );
        assert_eq!(
            check_update(json!({}), json!({"completedIndexes": "0"})),
            [
                "status.completedIndexes: Invalid value: \"0\": cannot set non-empty completedIndexes when non-indexed completion mode"
            ]
        );
        // A stale list the write leaves alone is not judged (a scale-down's).
        assert_eq!(
            check_spec(
                indexed,
                json!({"completedIndexes": "0-7"}),
                json!({"completedIndexes": "0-7", "active": 1})
            ),
            Vec::<String>::new()
        );
    }

    #[test]
    fn failed_indexes_need_a_backoff_limit_per_index_and_stay_apart_from_completed() {
        assert_eq!(
            check_update(json!({}), json!({"failedIndexes": ""})),
            [
                "status.failedIndexes: Invalid value: \"\": cannot set non-null failedIndexes when backoffLimitPerIndex is null"
            ]
        );
        let per_index = json!({"completionMode": "Indexed", "completions": 6, "parallelism": 1,
            "backoffLimitPerIndex": 1});
        assert_eq!(
            check_spec(per_index.clone(), json!({}), json!({"failedIndexes": "x"})),
            [
                "status.failedIndexes: Invalid value: \"x\": error parsing failedIndexes: cannot convert string to integer for index: \"x\""
            ]
        );
        assert_eq!(
            check_spec(
                per_index.clone(),
                json!({"completedIndexes": "0,3-4", "failedIndexes": "1"}),
                json!({"completedIndexes": "0,3-4", "failedIndexes": "1,4-5"})
            ),
            [
                "status.failedIndexes: Invalid value: \"1,4-5\": failedIndexes and completedIndexes overlap at index: 4"
            ]
        );
        assert_eq!(
            check_spec(
                per_index,
                json!({}),
                json!({"completedIndexes": "0,2", "failedIndexes": "1,3-5"})
            ),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_success_policy_job_completes_only_after_success_criteria_met() {
        let policy = json!({"completionMode": "Indexed", "completions": 2, "parallelism": 2,
            "successPolicy": {"rules": [{"succeededCount": 1}]}});
        // Already Complete without it (stored before the rules): the policy's rule holds
        // whatever changed.
        let old =
            json!({"startTime": START, "completionTime": END, "conditions": conds(&["Complete"])});
        assert_eq!(
            check_spec(policy, old.clone(), old),
            [
                "status.conditions: Invalid value: cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True"
            ]
        );
    }

    #[test]
    fn a_write_that_leaves_a_bad_status_alone_passes() {
        // Stored before the rules: Failed with active pods and no FailureTarget.
        let bad = json!({"active": 1, "conditions": conds(&["Failed"])});
        let mut touched = bad.clone();
        touched["ready"] = json!(0);
        assert_eq!(check_update(bad, touched), Vec::<String>::new());
    }
}
