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
    let met =
        json!({"startTime": START, "conditions": conds(&["SuccessCriteriaMet", "FailureTarget"])});
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
    let done =
        json!({"completionTime": END, "conditions": conds(&["SuccessCriteriaMet", "Complete"])});
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
