//! Properties of a Job driven to its end through random pod outcomes
//! (successes, exit codes, pods lost with their agent, pods deleted by a
//! user), runner restarts, syncs cut short by a failed call or a crash, and
//! a lagging pod cache, in the simulated world
//! the unit tests use (`controllers/src/job/sim.rs`):
//!
//! - the loop ends, with `Complete` or `Failed` and the conditions that go
//!   with it;
//! - never more than `parallelism` pods are active;
//! - every finished pod is recorded exactly once (in the uncounted lists,
//!   or, for an Indexed success, in `completedIndexes`), unless a
//!   podFailurePolicy Ignore rule matched it, it still ran when the Job
//!   met its success criteria, or the controller deleted it for scale (as
//!   KCM, which lets those go uncounted), and the counters equal what was
//!   recorded;
//! - every sync is idempotent: the same inputs ask for the same calls.

use std::collections::BTreeSet;

use controllers::job::{COMPLETION_INDEX_ANNOTATION, JOB_TRACKING_FINALIZER};
use k8s_openapi::api::batch::v1::{
    PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement,
    PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule,
};
use k8s_openapi::api::core::v1::Pod;
use proptest::prelude::*;

// The world names the crate's items as `crate::job` and `crate::{…}`.
#[allow(unused_imports)]
use controllers::{Action, Event, Status, is_active};
mod job {
    pub(crate) use controllers::job::*;
}
#[path = "../src/job/sim.rs"]
mod sim;

use sim::{World, phase, spec};

#[derive(Clone, Debug)]
struct Config {
    completions: Option<i32>,
    parallelism: i32,
    indexed: bool,
    backoff_limit: i32,
    /// 0: none; 1: Ignore DisruptionTarget, FailJob on exit 42.
    policy: u8,
    replace_failed: bool,
}

fn config() -> impl Strategy<Value = Config> {
    (
        prop::option::weighted(0.8, 1..8i32),
        1..4i32,
        any::<bool>(),
        0..5i32,
        0..2u8,
        any::<bool>(),
    )
        .prop_map(
            |(completions, parallelism, indexed, backoff_limit, policy, replace_failed)| Config {
                completions: if indexed {
                    Some(completions.unwrap_or(3))
                } else {
                    completions
                },
                parallelism,
                indexed,
                backoff_limit,
                policy,
                replace_failed,
            },
        )
}

#[derive(Clone, Copy, Debug)]
enum Op {
    /// The kubelet starts the pending pods.
    Run,
    /// The `n`-th active pod exits with this code.
    Exit(usize, i32),
    /// The `n`-th active pod is lost with its agent.
    Lose(usize),
    /// A user deletes the `n`-th active pod.
    Delete(usize),
    /// The kubelet kills the pods being deleted.
    Kill,
    /// Time passes.
    Wait(i64),
    /// The runner restarts.
    Restart,
    /// A sync stops after its `n`-th call (modulo its length), and the
    /// runner restarts.
    Crash(usize),
    /// A sync over the pod cache as it was `n` steps ago (just before
    /// that step's sync).
    Lag(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Run),
        4 => (0..4usize, prop::sample::select(vec![0, 0, 1, 42])).prop_map(|(n, c)| Op::Exit(n, c)),
        1 => (0..4usize).prop_map(Op::Lose),
        1 => (0..4usize).prop_map(Op::Delete),
        1 => Just(Op::Kill),
        2 => prop::sample::select(vec![1i64, 10, 60, 700]).prop_map(Op::Wait),
        1 => Just(Op::Restart),
        2 => (0..8usize).prop_map(Op::Crash),
        2 => (1..4usize).prop_map(Op::Lag),
    ]
}

fn world(c: &Config) -> World {
    let mut j = sim::job(c.completions, c.parallelism);
    let s = spec(&mut j);
    s.backoff_limit = Some(c.backoff_limit);
    if c.indexed {
        s.completion_mode = Some("Indexed".into());
    }
    if c.replace_failed {
        s.pod_replacement_policy = Some("Failed".into());
    }
    if c.policy == 1 {
        s.pod_failure_policy = Some(PodFailurePolicy {
            rules: vec![
                PodFailurePolicyRule {
                    action: "Ignore".into(),
                    on_exit_codes: None,
                    on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                        type_: "DisruptionTarget".into(),
                        status: "True".into(),
                    }]),
                },
                PodFailurePolicyRule {
                    action: "FailJob".into(),
                    on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                        container_name: None,
                        operator: "In".into(),
                        values: vec![42],
                    }),
                    on_pod_conditions: None,
                },
            ],
        });
    }
    World::new(j)
}

fn nth_active(w: &World, n: usize) -> Option<String> {
    let active = w.active();
    (!active.is_empty()).then(|| active[n % active.len()].clone())
}

fn perform(w: &mut World, op: Op, history: &[Vec<Pod>]) {
    match op {
        Op::Run => w.run_all(),
        Op::Exit(n, code) => {
            w.run_all();
            if let Some(p) = nth_active(w, n) {
                w.exit(&p, code);
            }
        }
        Op::Lose(n) => {
            if let Some(p) = nth_active(w, n) {
                w.lose(&p);
            }
        }
        Op::Delete(n) => {
            if let Some(p) = nth_active(w, n) {
                w.user_delete(&p);
            }
        }
        Op::Kill => w.kill_terminating(),
        Op::Wait(s) => w.advance(s),
        Op::Restart => w.restart(),
        Op::Crash(n) => {
            let s = w.sync();
            let len = s.reconciled.actions.len();
            w.apply_prefix(&s, n % (len + 1));
            w.restart();
        }
        Op::Lag(n) => {
            if let Some(stale) = history.iter().rev().nth(n - 1) {
                let _ = w.lagging_step(stale);
            }
        }
    }
}

fn has_finalizer(p: &Pod) -> bool {
    p.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == JOB_TRACKING_FINALIZER)
}

fn disrupted(p: &Pod) -> bool {
    p.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "DisruptionTarget" && c.status == "True")
}

fn check_step(w: &World, c: &Config) -> Result<(), TestCaseError> {
    let active = w.active().len();
    prop_assert!(
        active <= usize::try_from(c.parallelism).unwrap_or(0),
        "{} active, parallelism {}",
        active,
        c.parallelism
    );
    let st = w.status();
    prop_assert!(st.active.unwrap_or(0) <= c.parallelism);
    prop_assert!(
        w.recorded_twice.is_empty(),
        "recorded twice: {:?}",
        w.recorded_twice
    );
    let again = w.sync();
    prop_assert_eq!(&again, &w.sync(), "a sync is not idempotent");
    Ok(())
}

fn check_end(w: &World, c: &Config) -> Result<(), TestCaseError> {
    let st = w.status();
    let conds = w.conditions();
    let has = |t: &str| conds.iter().any(|x| x.0 == t && x.1 == "True");
    prop_assert!(has("Complete") != has("Failed"), "{:?}", conds);
    if has("Complete") {
        prop_assert!(
            has("SuccessCriteriaMet") && !has("FailureTarget"),
            "{:?}",
            conds
        );
        prop_assert!(st.completion_time.is_some());
        prop_assert!(st.succeeded.unwrap_or(0) >= c.completions.unwrap_or(1));
        let (interim, terminal) = (w.condition("SuccessCriteriaMet"), w.condition("Complete"));
        prop_assert_eq!(
            interim.map(|c| (c.reason, c.message)),
            terminal.map(|c| (c.reason, c.message))
        );
    } else {
        prop_assert!(has("FailureTarget"), "{:?}", conds);
        prop_assert!(st.completion_time.is_none());
        let (interim, terminal) = (w.condition("FailureTarget"), w.condition("Failed"));
        prop_assert_eq!(
            interim.map(|c| (c.reason, c.message)),
            terminal.map(|c| (c.reason, c.message))
        );
    }
    let uncounted = st.uncounted_terminated_pods.clone().unwrap_or_default();
    prop_assert!(uncounted.succeeded.is_none() && uncounted.failed.is_none());
    prop_assert_eq!(st.active, None);
    prop_assert_eq!(st.terminating, Some(0));

    // Counters are what was recorded, each pod once.
    prop_assert_eq!(
        st.failed.unwrap_or(0),
        i32::try_from(w.recorded_failed.len()).unwrap_or(i32::MAX)
    );
    let pods = w.all_pods();
    prop_assert!(
        pods.iter().all(|p| !has_finalizer(p)),
        "a pod kept its finalizer"
    );
    let recorded: BTreeSet<&String> = w
        .recorded_succeeded
        .iter()
        .chain(&w.recorded_failed)
        .collect();
    let completed = st.completed_indexes.clone().unwrap_or_default();
    for p in &pods {
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let succeeded = phase(p) == "Succeeded";
        let finished = succeeded || phase(p) == "Failed" || p.metadata.deletion_timestamp.is_some();
        let ignored = c.policy == 1 && disrupted(p);
        // Still running when the Job met its success criteria: KCM lets
        // it go uncounted.
        // Or deleted uncounted for scale (a lagging cache can show more
        // pods active than there are).
        let excused = w.unfinished_at_success.contains(&uid) || w.scaled_down.contains(&uid);
        if c.indexed && succeeded {
            let ix = p
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(COMPLETION_INDEX_ANNOTATION))
                .cloned()
                .unwrap_or_default();
            prop_assert!(
                completed.split(',').any(|r| {
                    let mut it = r.split('-').map(|x| x.parse::<i64>().unwrap_or(-1));
                    let a = it.next().unwrap_or(-1);
                    let b = it.next().unwrap_or(a);
                    ix.parse::<i64>().is_ok_and(|i| a <= i && i <= b)
                }),
                "index {} succeeded but is not in {:?}",
                ix,
                completed
            );
        } else if finished && !ignored && !excused {
            prop_assert!(
                recorded.contains(&uid),
                "pod {} finished but was never counted",
                uid
            );
        } else if ignored && p.metadata.deletion_timestamp.is_none() {
            prop_assert!(!recorded.contains(&uid), "an ignored failure was counted");
        }
    }
    if !c.indexed {
        prop_assert_eq!(
            st.succeeded.unwrap_or(0),
            i32::try_from(w.recorded_succeeded.len()).unwrap_or(i32::MAX)
        );
        let succeeded_pods = pods.iter().filter(|p| phase(p) == "Succeeded").count();
        prop_assert_eq!(w.recorded_succeeded.len(), succeeded_pods);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn a_job_ends_consistently_and_counts_every_finished_pod_once(
        c in config(),
        ops in proptest::collection::vec(op(), 0..60),
    ) {
        let mut w = world(&c);
        // The pods as each step's sync saw them.
        let mut history: Vec<Vec<Pod>> = Vec::new();
        for op in ops {
            if w.finished() {
                break;
            }
            perform(&mut w, op, &history);
            history.push(w.pods.clone());
            let _ = w.step();
            check_step(&w, &c)?;
        }
        // Drain: every pod succeeds, the deleted ones are killed, time
        // passes past any backoff.
        let mut rounds = 0;
        while !w.finished() {
            rounds += 1;
            prop_assert!(rounds < 200, "no end: {:?}", w.status());
            w.run_all();
            for p in w.active() {
                w.exit(&p, 0);
            }
            w.kill_terminating();
            w.advance(601);
            let _ = w.step();
            check_step(&w, &c)?;
        }
        prop_assert_eq!(w.settle(5), 0, "a finished Job rests");
        check_end(&w, &c)?;
        let _ = is_active;
    }
}
