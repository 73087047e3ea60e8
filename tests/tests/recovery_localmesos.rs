//! A standalone localmesos (`mesopod localmesos --work-dir`) under faults:
//! SIGKILL and a restart on the same port and work dir recover its agents
//! and every pod, and never show a pod ready whose process is gone; so does
//! a SIGKILL and restart of the scheduler (`--master`) after it; SIGKILL
//! of an executor restarts no container: the next executor adopts them,
//! and nothing runs twice.
//!
//! Pods run in containers (the default). The executor kill runs in process
//! mode too: there the agent's cgroup of the executor (v2, or v1
//! freezer/pids) takes the pods with it, nothing can be adopted, and the
//! pods end Failed, `ExecutorTerminated`, with no orphan.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::faults;

use std::time::Duration;

use faults::{
    Faults, Mode, Standalone, all_running, any_left, apply, cgroups_usable, copies, count_faults,
    marker, pods, pods_yaml,
};
use testkit::wait_until_blocking;

const C: Mode = Mode::Containers;

#[test]
fn sigkill_and_restart_of_localmesos_recovers_every_pod_truthfully() {
    const BASE: u32 = 91_773;
    const N: usize = 20;
    if !C.possible("sigkill_and_restart_of_localmesos_recovers_every_pod_truthfully") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mut cluster, lm, sched) = Standalone::start(dir.path(), C);
    let _reset = cluster.reset();
    apply(&cluster.api, &pods_yaml("lm", BASE, N));
    let before = all_running(&cluster.api, "lm", N, Duration::from_secs(120));
    let tasks_before = cluster.tasks();
    assert_eq!(tasks_before.len(), N);

    lm.sigkill();
    assert!(
        (0..N).all(|i| copies(C, &marker(BASE, i)) == 1),
        "the pods outlive the agent"
    );
    let lm = cluster.localmesos();
    // While it recovers, a pod shown ready must have its process.
    let after = wait_until_blocking(
        "every pod Running and ready again",
        Duration::from_secs(60),
        || {
            let now = pods(&cluster.api, "lm");
            for (i, (name, _, ready, _)) in before.iter().enumerate() {
                let shown = now.iter().any(|p| &p.0 == name && p.2);
                assert!(
                    !shown || copies(C, &marker(BASE, i)) == 1,
                    "{name} ready: {ready}"
                );
            }
            now
        },
        |p| {
            p.len() == N
                && p.iter()
                    .all(|(_, phase, ready, _)| phase == "Running" && *ready)
        },
    );
    assert_eq!(after.len(), N);
    let tasks_after = cluster.tasks();
    let ids = |t: &[[String; 5]]| t.iter().map(|t| t[0].clone()).collect::<Vec<_>>();
    assert_eq!(
        ids(&tasks_after),
        ids(&tasks_before),
        "no task launched again"
    );
    assert!(
        tasks_after.iter().all(|t| t[4] == "TASK_RUNNING"),
        "{tasks_after:?}"
    );
    assert_eq!(
        count_faults(C, &cluster.api, "lm", BASE, &before, &cluster.logs()),
        Faults::default()
    );
    // The scheduler (`--master`) killed and started again on its data dir:
    // the same tasks, every pod Running and ready, once each.
    sched.sigkill();
    let sched = cluster.scheduler();
    wait_until_blocking(
        "the restarted scheduler reconciled every task",
        Duration::from_secs(30),
        || faults::get_json(&format!("{}/debug/reconciliation", cluster.api)),
        |r| {
            r["rounds_completed"].as_u64().unwrap_or(0) >= 1
                && r["waiting"].as_array().is_some_and(|w| w.is_empty())
        },
    );
    all_running(&cluster.api, "lm", N, Duration::from_secs(60));
    let logs = faults::kubectl_ok(&cluster.api, &["logs", "lm-2"]);
    assert!(logs.contains("hello from lm-2"), "{logs}");
    assert_eq!(
        ids(&cluster.tasks()),
        ids(&tasks_before),
        "no task launched again"
    );
    assert_eq!(
        count_faults(C, &cluster.api, "lm", BASE, &before, &cluster.logs()),
        Faults::default(),
        "after a scheduler restart: pods lost, duplicated, panics"
    );
    sched.sigterm();
    lm.sigterm();
    // SIGTERM left them too; `--recover=cleanup` stops them and wipes the dir.
    assert!((0..N).all(|i| copies(C, &marker(BASE, i)) == 1));
    let out = std::process::Command::new(faults::MESOPOD)
        .args(["localmesos", "--recover=cleanup", "--work-dir"])
        .arg(&cluster.work)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!cluster.work.exists());
    assert_eq!(any_left(BASE, N), 0);
}

#[test]
fn sigkill_of_an_executor_restarts_no_container() {
    if C.possible("sigkill_of_an_executor_restarts_no_container") {
        executor_kill(C, 91_774);
    }
}

#[test]
fn sigkill_of_an_executor_leaves_no_orphan_in_process_mode() {
    if !cgroups_usable() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true: this test needs root and a cgroup v2 mount or a v1 freezer or pids hierarchy (executors' cgroups)"
        );
        eprintln!(
            "SKIPPED: needs root and a cgroup v2 mount or a v1 freezer or pids hierarchy, for executors' cgroups"
        );
        return;
    }
    executor_kill(Mode::Process, 91_777);
}

/// Kills every executor. In containers, the next executors adopt every
/// pod: Running and ready under new tasks, the same process each, none
/// twice. In process mode, the executors' cgroups take the pods' processes
/// with them and the pods go Failed, none twice.
fn executor_kill(mode: Mode, base: u32) {
    const N: usize = 6;
    let dir = tempfile::tempdir().unwrap();
    let (cluster, lm, sched) = Standalone::start(dir.path(), mode);
    let _reset = cluster.reset();
    apply(&cluster.api, &pods_yaml("ex", base, N));
    let before = all_running(&cluster.api, "ex", N, Duration::from_secs(120));
    assert_eq!(
        count_faults(mode, &cluster.api, "ex", base, &before, &cluster.logs()),
        Faults::default()
    );
    let processes: Vec<Vec<u32>> = (0..N)
        .map(|i| faults::procs::sleepers(&marker(base, i)))
        .collect();
    let mut executors: Vec<(String, String, String)> = cluster
        .tasks()
        .into_iter()
        .map(|[_, agent, fw, exec, _]| (agent, fw, exec))
        .collect();
    executors.sort();
    executors.dedup();
    for (agent, fw, exec) in &executors {
        let body =
            format!(r#"{{"agent_id":"{agent}","framework_id":"{fw}","executor_id":"{exec}"}}"#);
        assert!(
            cluster.admin("executors/kill", &body),
            "kill {exec} on {agent}"
        );
    }
    let now = match mode {
        Mode::Process => {
            // The executors' cgroups took their pods with them.
            let left = wait_until_blocking(
                "no pod process left",
                Duration::from_secs(30),
                || any_left(base, N),
                |n| *n == 0,
            );
            assert_eq!(left, 0, "orphans");
            wait_until_blocking(
                "every pod Failed",
                Duration::from_secs(30),
                || pods(&cluster.api, "ex"),
                |p| {
                    p.len() == N
                        && p.iter()
                            .all(|(_, phase, ready, _)| phase == "Failed" && !*ready)
                },
            )
        }
        _ => {
            // Adopted: every task a new one, RUNNING on a new executor.
            let old: Vec<&String> = before.iter().map(|p| &p.3).collect();
            let adopted = |p: &[(String, String, bool, String)]| {
                let running: Vec<[String; 5]> = cluster.tasks();
                p.len() == N
                    && p.iter().all(|(_, phase, ready, task)| {
                        phase == "Running"
                            && *ready
                            && !old.contains(&task)
                            && running
                                .iter()
                                .any(|t| &t[0] == task && t[4] == "TASK_RUNNING")
                    })
            };
            let now = wait_until_blocking(
                "every pod adopted",
                Duration::from_secs(60),
                || pods(&cluster.api, "ex"),
                |p| adopted(p),
            );
            let after: Vec<Vec<u32>> = (0..N)
                .map(|i| faults::procs::sleepers(&marker(base, i)))
                .collect();
            assert_eq!(after, processes, "the same process for every pod");
            now
        }
    };
    // Every pod accounted for, none running twice, no panic.
    let lost = N - now.len();
    let duplicates = (0..N)
        .filter(|i| copies(mode, &marker(base, *i)) > 1)
        .count();
    let panics = faults::panics(&cluster.logs());
    assert_eq!(
        (lost, duplicates, panics),
        (0, 0, 0),
        "lost, duplicates, panics"
    );
    sched.sigterm();
    lm.sigterm();
}
