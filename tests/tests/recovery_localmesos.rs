//! A standalone localmesos (`mesopod localmesos --work-dir`) under faults:
//! SIGKILL and a restart on the same port and work dir recover its agents
//! and every pod, and never show a pod ready whose process is gone; SIGKILL
//! of an executor leaves no orphan (its cgroup is destroyed) and no copy.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod faults;

use std::time::Duration;

use faults::{
    Faults, Standalone, all_running, apply, cgroups_usable, copies, count_faults, marker, pods,
    pods_yaml,
};
use testkit::wait_until_blocking;

#[test]
fn sigkill_and_restart_of_localmesos_recovers_every_pod_truthfully() {
    const BASE: u32 = 91_773;
    const N: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let (cluster, lm, sched) = Standalone::start(dir.path());
    let _reset = cluster.reset();
    apply(&cluster.api, &pods_yaml("lm", BASE, N));
    let before = all_running(&cluster.api, "lm", N, Duration::from_secs(120));
    let tasks_before = cluster.tasks();
    assert_eq!(tasks_before.len(), N);

    lm.sigkill();
    assert!(
        (0..N).all(|i| copies(&marker(BASE, i)) == 1),
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
                    !shown || copies(&marker(BASE, i)) == 1,
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
        count_faults(&cluster.api, "lm", BASE, &before, &cluster.logs()),
        Faults::default()
    );
    sched.sigterm();
    lm.sigterm();
    // SIGTERM left them too; `--recover=cleanup` stops them and wipes the dir.
    assert!((0..N).all(|i| copies(&marker(BASE, i)) == 1));
    let out = std::process::Command::new(faults::MESOPOD)
        .args(["localmesos", "--recover=cleanup", "--work-dir"])
        .arg(&cluster.work)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!cluster.work.exists());
    assert!((0..N).all(|i| copies(&marker(BASE, i)) == 0));
}

#[test]
fn sigkill_of_an_executor_leaves_no_orphan_and_no_second_copy() {
    if !cgroups_usable() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true: this test needs root and cgroup v2 (executors' cgroups)"
        );
        eprintln!("skipped: needs root and a writable cgroup v2 mount, for executors' cgroups");
        return;
    }
    const BASE: u32 = 91_774;
    const N: usize = 6;
    let dir = tempfile::tempdir().unwrap();
    let (cluster, lm, sched) = Standalone::start(dir.path());
    let _reset = cluster.reset();
    apply(&cluster.api, &pods_yaml("ex", BASE, N));
    let before = all_running(&cluster.api, "ex", N, Duration::from_secs(120));
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
    // The executors' cgroups took their pods with them.
    let left = wait_until_blocking(
        "no pod process left",
        Duration::from_secs(30),
        || (0..N).map(|i| copies(&marker(BASE, i))).sum::<usize>(),
        |n| *n == 0,
    );
    assert_eq!(left, 0, "orphans");
    // Their pods say so, and none runs twice.
    let now = wait_until_blocking(
        "every pod Failed",
        Duration::from_secs(30),
        || pods(&cluster.api, "ex"),
        |p| {
            p.len() == N
                && p.iter()
                    .all(|(_, phase, ready, _)| phase == "Failed" && !*ready)
        },
    );
    let duplicates = (0..N).filter(|i| copies(&marker(BASE, *i)) > 1).count()
        + now.iter().zip(&before).filter(|(a, b)| a.3 != b.3).count();
    assert_eq!(duplicates, 0);
    assert_eq!(faults::panics(&cluster.logs()), 0);
    sched.sigterm();
    lm.sigterm();
}
