//! A partitioned agent heals after 120 s: every pod on it is Running and
//! ready within 10 s of the heal (the master sends TASK_RUNNING with
//! REASON_AGENT_REREGISTERED, mesopod reconciles that agent's tasks and
//! asks its executor for every pod's status), and while it is unreachable
//! no pod on it claims to be ready. The test prints how long the heal took.
//!
//! Under CPU load it once failed: the executor's reports, stamped a moment
//! before the master's reconciliation answers, reached mesopod after them
//! and were dropped as older, so those pods stayed not ready. The registry
//! now orders an executor's same-state report against the executor's own
//! reports only (see `registry`'s `an_executor_report_overtaken_by_a_
//! reconciliation_answer_still_applies`); reproduce with the test beside
//! a loaded machine (`nice stress-ng --cpu 4` or a `cargo build`).
//!
//! The 120 s pass on the master's clock, which localmesos' fault route
//! advances: its agent ping timeouts (`--agent-ping-timeout` 15 s ×
//! `--max-agent-ping-timeouts` 5) are the only thing that acts on time
//! during a partition, on either side (mesopod's clocks are the start
//! deadline of pods not yet running, offer TTLs and the 15-minute implicit
//! reconciliation; executors keep their agent). Pods run in containers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::faults;

use std::time::{Duration, Instant};

use faults::{Faults, Mode, Standalone, all_running, apply, count_faults, pods, pods_yaml};
use testkit::wait_until_blocking;

const C: Mode = Mode::Containers;

#[test]
fn pods_on_an_agent_healed_after_120_s_are_running_and_ready_within_ten_seconds() {
    const BASE: u32 = 91_775;
    const N: usize = 20;
    if !C.possible("pods_on_an_agent_healed_after_120_s_are_running_and_ready_within_ten_seconds") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (cluster, lm, sched) = Standalone::start(dir.path(), C);
    let _reset = cluster.reset();
    apply(&cluster.api, &pods_yaml("part", BASE, N));
    let before = all_running(&cluster.api, "part", N, Duration::from_secs(120));
    let tasks = cluster.tasks();
    let agent = tasks[0][1].clone();
    let on_agent: Vec<String> = tasks
        .iter()
        .filter(|t| t[1] == agent)
        .map(|t| t[0].clone())
        .collect();
    assert!(!on_agent.is_empty());
    let task_of = |p: &(String, String, bool, String)| p.3.clone();
    let active = |c: &Standalone| c.agents().iter().any(|(id, a)| id == &agent && *a);
    let advance = |secs: u32| {
        assert!(cluster.admin("clock/advance", &format!(r#"{{"seconds":{secs}}}"#)));
    };

    assert!(cluster.admin(&format!("agents/{agent}/partition"), ""));
    // 74 s of silence: within its ping timeouts, the master still counts on
    // the agent, and nothing changed for its pods.
    advance(74);
    assert!(active(&cluster), "active before its pings time out");
    assert!(
        pods(&cluster.api, "part")
            .iter()
            .all(|(_, phase, ready, _)| phase == "Running" && *ready)
    );
    // Past 75 s it is unreachable: its tasks TASK_UNREACHABLE, its pods
    // still Running (the phase is kept) and not ready.
    advance(46);
    assert!(!active(&cluster), "unreachable after 120 s");
    let unreachable = cluster
        .unreachable_tasks()
        .into_iter()
        .filter(|t| on_agent.contains(&t[0]))
        .filter(|t| t[4] == "TASK_UNREACHABLE")
        .count();
    assert_eq!(unreachable, on_agent.len());
    wait_until_blocking(
        "the unreachable agent's pods not ready",
        Duration::from_secs(10),
        || pods(&cluster.api, "part"),
        |p| {
            p.iter()
                .filter(|x| on_agent.contains(&task_of(x)))
                .all(|(_, phase, ready, _)| phase == "Running" && !*ready)
        },
    );
    // Deleting a pod of the unreachable agent completes at once; its
    // process is killed once the agent is back.
    let doomed = before.iter().position(|p| on_agent.contains(&p.3)).unwrap();
    let doomed_name = before[doomed].0.clone();
    let asked = Instant::now();
    faults::kubectl_ok(
        &cluster.api,
        &["delete", "pod", &doomed_name, "--timeout=10s"],
    );
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    assert!(cluster.admin(&format!("agents/{agent}/heal"), ""));
    let healed = Instant::now();
    // Waits past the promise, so that a slow heal says how slow it was.
    let after = all_running(&cluster.api, "part", N - 1, Duration::from_secs(60));
    let took = healed.elapsed();
    eprintln!("every pod Running and ready {took:?} after the heal");
    assert!(
        took < Duration::from_secs(10),
        "every pod Running and ready only {took:?} after the heal: {after:?}"
    );
    wait_until_blocking(
        "the deleted pod's process killed after the heal",
        Duration::from_secs(20),
        || faults::procs::sleepers(&faults::marker(BASE, doomed)).len(),
        |n| *n == 0,
    );
    let mut kept = before.clone();
    kept.remove(doomed);
    assert_eq!(
        count_faults(C, &cluster.api, "part", BASE, &kept, &cluster.logs()),
        Faults::default(),
        "pods lost, duplicated, panics"
    );
    sched.sigterm();
    lm.sigterm();
}

/// A partition shorter than the ping timeouts is not one the master sees:
/// the agent stays active and its pods ready throughout, and they are
/// ready right after the heal.
#[test]
fn a_partition_shorter_than_the_ping_timeouts_changes_nothing() {
    const BASE: u32 = 91_778;
    const N: usize = 4;
    if !C.possible("a_partition_shorter_than_the_ping_timeouts_changes_nothing") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (cluster, lm, sched) = Standalone::start(dir.path(), C);
    let _reset = cluster.reset();
    apply(&cluster.api, &pods_yaml("blip", BASE, N));
    let before = all_running(&cluster.api, "blip", N, Duration::from_secs(120));
    let agent = cluster.tasks()[0][1].clone();
    assert!(cluster.admin(&format!("agents/{agent}/partition"), ""));
    assert!(cluster.admin("clock/advance", r#"{"seconds":60}"#));
    assert!(
        cluster.agents().iter().any(|(id, a)| id == &agent && *a),
        "still active"
    );
    assert!(cluster.admin(&format!("agents/{agent}/heal"), ""));
    assert!(
        cluster.tasks().iter().all(|t| t[4] == "TASK_RUNNING"),
        "{:?}",
        cluster.tasks()
    );
    all_running(&cluster.api, "blip", N, Duration::from_secs(10));
    assert_eq!(
        count_faults(C, &cluster.api, "blip", BASE, &before, &cluster.logs()),
        Faults::default(),
        "pods lost, duplicated, panics"
    );
    sched.sigterm();
    lm.sigterm();
}
