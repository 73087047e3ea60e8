//! A partitioned agent heals: every pod on it is Running and ready within
//! 10 s of the heal (the master sends TASK_RUNNING with
//! REASON_AGENT_REREGISTERED, mesopod reconciles that agent's tasks and
//! asks its executor for every pod's status), and while partitioned, no
//! pod on it claims to be ready.
//!
//! The 120 s partition is played as a 3 s one: nothing in
//! localmesos or mesopod acts between the two (localmesos removes no
//! unreachable agent on a timer; mesopod's only clocks are the start
//! deadline of pods not yet running, offer TTLs and the 15-minute implicit
//! reconciliation), so the heal meets the same state.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod faults;

use std::time::{Duration, Instant};

use faults::{Faults, Standalone, all_running, apply, count_faults, pods, pods_yaml};
use testkit::wait_until_blocking;

#[test]
fn pods_on_a_healed_agent_are_running_and_ready_within_ten_seconds() {
    const BASE: u32 = 91_775;
    const N: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let (cluster, lm, sched) = Standalone::start(dir.path());
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

    assert!(cluster.admin(&format!("agents/{agent}/partition"), ""));
    // Truthful while partitioned: still Running (the phase is kept), not ready.
    wait_until_blocking(
        "the partitioned agent's pods not ready",
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
    let started = Instant::now();
    wait_until_blocking(
        "the partition to last",
        Duration::from_secs(10),
        || started.elapsed(),
        |e| *e >= Duration::from_secs(3),
    );
    assert!(cluster.admin(&format!("agents/{agent}/heal"), ""));
    let healed = Instant::now();
    all_running(&cluster.api, "part", N - 1, Duration::from_secs(10));
    let took = healed.elapsed();
    eprintln!("every pod Running and ready {took:?} after the heal");
    assert!(took < Duration::from_secs(10), "{took:?}");
    wait_until_blocking(
        "the deleted pod's process killed after the heal",
        Duration::from_secs(20),
        || faults::copies(&faults::marker(BASE, doomed)),
        |n| *n == 0,
    );
    let mut kept = before.clone();
    kept.remove(doomed);
    assert_eq!(
        count_faults(&cluster.api, "part", BASE, &kept, &cluster.logs()),
        Faults::default(),
        "pods lost, duplicated, panics"
    );
    sched.sigterm();
    lm.sigterm();
}
