//! podFailurePolicy, backoffLimitPerIndex and successPolicy, driven
//! through the simulated world.

#![allow(unused_must_use)] // `step()` applies what it returns.

use k8s_openapi::api::batch::v1::{
    PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement,
    PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule, SuccessPolicy, SuccessPolicyRule,
};

use super::sim::{World, job, phase, spec};
use super::*;

fn cond(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> (String, String, String, String) {
    (type_.into(), status.into(), reason.into(), message.into())
}

fn exit_rule(action: &str, codes: &[i32]) -> PodFailurePolicyRule {
    PodFailurePolicyRule {
        action: action.into(),
        on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
            container_name: Some("main".into()),
            operator: "In".into(),
            values: codes.to_vec(),
        }),
        on_pod_conditions: None,
    }
}

fn disruption_rule(action: &str) -> PodFailurePolicyRule {
    PodFailurePolicyRule {
        action: action.into(),
        on_exit_codes: None,
        on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
        }]),
    }
}

fn with_policy(rules: Vec<PodFailurePolicyRule>, completions: i32, parallelism: i32) -> World {
    let mut j = job(Some(completions), parallelism);
    spec(&mut j).pod_failure_policy = Some(PodFailurePolicy { rules });
    spec(&mut j).pod_replacement_policy = Some("Failed".into());
    World::new(j)
}

#[test]
fn a_fail_job_exit_code_ends_the_job_at_once_and_deletes_the_active_pods() {
    let mut w = with_policy(vec![exit_rule("FailJob", &[42])], 4, 3);
    w.step();
    w.run_all();
    let bad = w.created[0].clone();
    w.exit(&bad, 42);
    let s = w.step();
    let msg = format!(
        "Container main for pod ns/{bad} failed with exit code 42 matching FailJob rule at index 0"
    );
    assert_eq!(s.reconciled.pod_deletions().count(), 2, "the other two");
    assert_eq!(s.reconciled.pod_creations(), 0);
    assert_eq!(
        w.conditions(),
        [cond("FailureTarget", "True", "PodFailurePolicy", &msg)]
    );
    // The deleted pods were running: counted as failed with the Job.
    let st = w.status();
    assert_eq!(st.terminating, Some(2));
    assert_eq!(st.active, None);
    assert_eq!(
        st.uncounted_terminated_pods
            .and_then(|u| u.failed)
            .map(|f| f.len()),
        Some(3)
    );
    assert!(!w.finished(), "not while pods terminate");
    w.step();
    assert!(!w.finished());
    w.kill_terminating();
    w.settle(5);
    assert_eq!(
        w.conditions(),
        [
            cond("FailureTarget", "True", "PodFailurePolicy", &msg),
            cond("Failed", "True", "PodFailurePolicy", &msg),
        ]
    );
    assert_eq!(w.status().failed, Some(3));
    assert_eq!(w.status().terminating, Some(0));
    assert_eq!(w.event_log(), [("PodFailurePolicy".to_owned(), msg)]);
    assert!(w.pods.iter().all(|p| !pods::has_tracking_finalizer(p)));
}

#[test]
fn a_pod_lost_with_its_agent_does_not_count_under_an_ignore_rule() {
    let mut j = job(Some(1), 1);
    spec(&mut j).backoff_limit = Some(0);
    spec(&mut j).pod_failure_policy = Some(PodFailurePolicy {
        rules: vec![disruption_rule("Ignore")],
    });
    let mut w = World::new(j);
    w.step();
    for _ in 0..3 {
        w.run_all();
        let p = w.active()[0].clone();
        w.lose(&p);
        w.step();
        assert!(w.condition("FailureTarget").is_none());
        // KCM's backoff record counts ignored failures too: the
        // replacement comes once the delay has passed.
        w.advance(600);
        assert_eq!(w.step().reconciled.pod_creations(), 1);
    }
    let st = w.status();
    assert_eq!(st.failed, None, "ignored failures are not counted");
    assert_eq!(
        st.uncounted_terminated_pods.unwrap_or_default().failed,
        None
    );
    assert!(
        w.pods
            .iter()
            .filter(|p| phase(p) == "Failed")
            .all(|p| !pods::has_tracking_finalizer(p))
    );
    w.run_all();
    let p = w.active()[0].clone();
    w.exit(&p, 0);
    w.settle(5);
    assert!(w.condition("Complete").is_some());
}

#[test]
fn without_a_policy_a_lost_pod_counts_as_failed() {
    let mut j = job(Some(1), 1);
    spec(&mut j).backoff_limit = Some(0);
    let mut w = World::new(j);
    w.step();
    w.run_all();
    let p = w.created[0].clone();
    w.lose(&p);
    w.settle(5);
    assert_eq!(w.status().failed, Some(1));
    assert_eq!(
        w.condition("Failed").and_then(|c| c.reason),
        Some("BackoffLimitExceeded".into())
    );
}

#[test]
fn a_count_rule_counts_and_an_unmatched_failure_counts() {
    let mut w = with_policy(
        vec![exit_rule("Ignore", &[3]), exit_rule("Count", &[4])],
        1,
        1,
    );
    w.step();
    for code in [3, 4, 5, 3] {
        w.run_all();
        let p = w.active()[0].clone();
        w.exit(&p, code);
        w.step();
        w.step();
        w.advance(700);
        w.step();
    }
    assert_eq!(w.status().failed, Some(2));
}

#[test]
fn backoff_limit_per_index_fails_an_index_and_keeps_the_others_running() {
    let mut j = job(Some(3), 3);
    spec(&mut j).completion_mode = Some("Indexed".into());
    spec(&mut j).backoff_limit_per_index = Some(1);
    spec(&mut j).backoff_limit = None;
    let mut w = World::new(j);
    let s = w.step();
    for a in &s.reconciled.actions {
        if let Action::CreatePod { pod } = a {
            let ann = pod.metadata.annotations.clone().unwrap_or_default();
            assert_eq!(
                ann.get(INDEX_FAILURE_COUNT_ANNOTATION).map(String::as_str),
                Some("0")
            );
        }
    }
    assert_eq!(w.status().failed_indexes.as_deref(), Some(""));
    w.run_all();
    let first = w.created[1].clone();
    w.exit(&first, 1);
    // The failed pod keeps its finalizer until its replacement exists.
    let s = w.step();
    assert_eq!(s.reconciled.finalizer_removals().count(), 0);
    assert_eq!(
        s.reconciled.requeue_after,
        Some(std::time::Duration::from_secs(10))
    );
    w.advance(10);
    let s = w.step();
    let Some(Action::CreatePod { pod }) = s
        .reconciled
        .actions
        .iter()
        .find(|a| matches!(a, Action::CreatePod { .. }))
    else {
        panic!("index 1 again: {s:?}");
    };
    let ann = pod.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        ann.get(COMPLETION_INDEX_ANNOTATION).map(String::as_str),
        Some("1")
    );
    assert_eq!(
        ann.get(INDEX_FAILURE_COUNT_ANNOTATION).map(String::as_str),
        Some("1")
    );
    w.settle(5);
    assert_eq!(w.status().failed, Some(1));
    // The second failure of index 1 fails the index, not the Job.
    w.run_all();
    let again = w.created[3].clone();
    w.exit(&again, 1);
    w.settle(5);
    let st = w.status();
    assert_eq!(st.failed_indexes.as_deref(), Some("1"));
    assert_eq!(st.failed, Some(2));
    assert!(w.condition("FailureTarget").is_none());
    assert_eq!(w.active().len(), 2);
    assert_eq!(w.created.len(), 4, "a failed index is not run again");
    // The other indexes finish: every index is done, one failed.
    for n in w.active() {
        w.exit(&n, 0);
    }
    w.settle(6);
    assert_eq!(w.status().completed_indexes.as_deref(), Some("0,2"));
    assert_eq!(
        w.conditions(),
        [
            cond(
                "FailureTarget",
                "True",
                "FailedIndexes",
                "Job has failed indexes"
            ),
            cond("Failed", "True", "FailedIndexes", "Job has failed indexes"),
        ]
    );
}

#[test]
fn max_failed_indexes_fails_the_job_and_fail_index_fails_at_once() {
    let mut j = job(Some(4), 4);
    spec(&mut j).completion_mode = Some("Indexed".into());
    spec(&mut j).backoff_limit_per_index = Some(3);
    spec(&mut j).max_failed_indexes = Some(1);
    spec(&mut j).pod_failure_policy = Some(PodFailurePolicy {
        rules: vec![exit_rule("FailIndex", &[7])],
    });
    let mut w = World::new(j);
    w.step();
    w.run_all();
    let a = w.created[0].clone();
    w.exit(&a, 7);
    w.step();
    assert_eq!(w.status().failed_indexes.as_deref(), Some("0"));
    assert!(w.condition("FailureTarget").is_none());
    let b = w.created[1].clone();
    w.exit(&b, 7);
    let s = w.step();
    assert_eq!(
        w.condition("FailureTarget").and_then(|c| c.reason),
        Some("MaxFailedIndexesExceeded".into())
    );
    assert_eq!(s.reconciled.pod_deletions().count(), 2);
    w.kill_terminating();
    w.settle(5);
    assert_eq!(
        w.condition("Failed").and_then(|c| c.message),
        Some("Job has exceeded the specified maximal number of failed indexes".into())
    );
}

#[test]
fn a_success_policy_completes_the_job_early_and_deletes_the_rest_uncounted() {
    let mut j = job(Some(5), 5);
    spec(&mut j).completion_mode = Some("Indexed".into());
    spec(&mut j).success_policy = Some(SuccessPolicy {
        rules: vec![SuccessPolicyRule {
            succeeded_indexes: Some("0-2".into()),
            succeeded_count: Some(2),
        }],
    });
    let mut w = World::new(j);
    w.step();
    w.run_all();
    let a = w.created[0].clone();
    w.exit(&a, 0);
    w.step();
    assert!(w.condition("SuccessCriteriaMet").is_none());
    let b = w.created[2].clone();
    w.exit(&b, 0);
    let s = w.step();
    assert_eq!(s.reconciled.pod_deletions().count(), 3);
    assert_eq!(
        w.conditions(),
        [cond(
            "SuccessCriteriaMet",
            "True",
            "SuccessPolicy",
            "Matched rules at index 0"
        )]
    );
    w.kill_terminating();
    w.settle(5);
    let st = w.status();
    assert_eq!(
        w.conditions(),
        [
            cond(
                "SuccessCriteriaMet",
                "True",
                "SuccessPolicy",
                "Matched rules at index 0"
            ),
            cond(
                "Complete",
                "True",
                "SuccessPolicy",
                "Matched rules at index 0"
            ),
        ]
    );
    assert_eq!(st.completed_indexes.as_deref(), Some("0,2"));
    assert_eq!(st.succeeded, Some(2));
    assert_eq!(
        st.failed, None,
        "pods deleted after success are not failures"
    );
    assert!(st.completion_time.is_some());
}

#[test]
fn with_restart_policy_on_failure_container_restarts_count_towards_the_backoff_limit() {
    let mut j = job(Some(1), 1);
    spec(&mut j).backoff_limit = Some(2);
    if let Some(ps) = spec(&mut j).template.spec.as_mut() {
        ps.restart_policy = Some("OnFailure".into());
    }
    let mut w = World::new(j);
    w.step();
    w.run_all();
    let p = w.created[0].clone();
    let restart = |w: &mut World, n: i32| {
        if let Some(pod) = w
            .pods
            .iter_mut()
            .find(|x| x.metadata.name.as_deref() == Some(p.as_str()))
            && let Some(st) = pod.status.as_mut()
        {
            st.container_statuses = Some(vec![k8s_openapi::api::core::v1::ContainerStatus {
                name: "main".into(),
                restart_count: n,
                ..Default::default()
            }]);
        }
    };
    restart(&mut w, 1);
    w.step();
    assert!(w.condition("FailureTarget").is_none());
    restart(&mut w, 2);
    let s = w.step();
    assert_eq!(s.reconciled.pod_deletions().count(), 1);
    assert_eq!(
        w.condition("FailureTarget").and_then(|c| c.reason),
        Some("BackoffLimitExceeded".into())
    );
}
