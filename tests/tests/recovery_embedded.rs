//! The embedded default survives its own restarts: SIGTERM and SIGKILL of
//! `mesopod` leave 20 pods running; a restart on the same data dir
//! recovers the agents (each on its old port, from its checkpoint; this is
//! also localmesos' agent restart), re-subscribes as the same framework,
//! and every pod is Running and ready with one copy of its process; logs
//! and delete work. Then `mesopod --reset` stops everything.
//!
//! The pods run in containers, the default (embedded runtime, busybox
//! loaded with `mesopod image load`); a copy is a process in a container's
//! cgroup (`faults::copies`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::faults;

use std::time::Duration;

use faults::{
    Faults, MESOPOD, Mode, Proc, all_running, any_left, apply, count_faults, executor_pids,
    kubectl_ok, marker, pods_yaml, procs,
};
use testkit::wait_until_blocking;

const PODS: usize = 20;
const BASE: u32 = 91_771;
const C: Mode = Mode::Containers;

/// Loads the pods' image into the embedded cluster's store, `<data>/images`.
fn load_image(data: &str) {
    faults::image::load(&std::path::Path::new(data).join("images"));
}

fn start(data: &str, log: &std::path::Path) -> Proc {
    Proc::spawn(
        &[
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            data,
            "--agents",
            "2",
            "--offer-ttl",
            "1s",
            // Executors left behind by a failed run stop their pods soon.
            "--recovery-timeout",
            "2mins",
        ],
        "Kubernetes API",
        log,
    )
}

fn copies(marker: &str) -> usize {
    faults::copies(C, marker)
}

#[test]
fn sigterm_and_sigkill_of_mesopod_keep_every_pod_running_once() {
    if !C.possible("sigterm_and_sigkill_of_mesopod_keep_every_pod_running_once") {
        return;
    }
    let scratch = faults::Scratch::new();
    let (data_s, log) = (scratch.data_s.clone(), scratch.log.clone());
    load_image(&data_s);

    let first = start(&data_s, &log);
    let api = first.url();
    apply(&api, &pods_yaml("keep", BASE, PODS));
    let before = all_running(&api, "keep", PODS, Duration::from_secs(120));
    let framework = faults::get_json(&format!("{api}/debug/framework"))["framework_id"].clone();
    assert!(framework.is_string());
    assert_eq!(
        count_faults(C, &api, "keep", BASE, &before, &[&log]),
        Faults::default()
    );

    let mut current = first;
    for (how, stop) in [
        ("SIGTERM", Proc::sigterm as fn(Proc)),
        ("SIGKILL", Proc::sigkill as fn(Proc)),
    ] {
        stop(current);
        // Nothing stopped the pods.
        for i in 0..PODS {
            assert_eq!(
                copies(&marker(BASE, i)),
                1,
                "after {how}, pod {i} still runs once"
            );
        }
        let next = start(&data_s, &log);
        let api = next.url();
        let fw = wait_until_blocking(
            "mesopod subscribed again",
            Duration::from_secs(30),
            || faults::get_json(&format!("{api}/debug/framework")),
            |f| f["subscribed"] == true,
        );
        assert_eq!(
            fw["framework_id"], framework,
            "after {how}: the same framework"
        );
        let after = all_running(&api, "keep", PODS, Duration::from_secs(60));
        // The master answered the reconciliation from the recovered agents.
        wait_until_blocking(
            "a completed reconciliation round",
            Duration::from_secs(30),
            || faults::get_json(&format!("{api}/debug/reconciliation")),
            |r| {
                r["rounds_completed"].as_u64().unwrap_or(0) >= 1
                    && r["waiting"].as_array().is_some_and(|w| w.is_empty())
            },
        );
        assert_eq!(
            count_faults(C, &api, "keep", BASE, &before, &[&log]),
            Faults::default(),
            "after {how} and a restart: pods lost, duplicated, panics"
        );
        assert_eq!(
            after.iter().map(|p| &p.3).collect::<Vec<_>>(),
            before.iter().map(|p| &p.3).collect::<Vec<_>>(),
            "after {how}: the same tasks, none launched again"
        );
        // Logs are read through the agent, whose address mesopod learns
        // from its first offer, once it finished recovering.
        wait_until_blocking(
            "the log of a recovered pod",
            Duration::from_secs(20),
            || {
                faults::request(
                    "GET",
                    &format!("{api}/api/v1/namespaces/default/pods/keep-3/log"),
                    "",
                )
            },
            |l| l.as_ref().is_some_and(|l| l.contains("hello from keep-3")),
        );
        let logs = kubectl_ok(&api, &["logs", "keep-3"]);
        assert!(logs.contains("hello from keep-3"), "{logs}");
        current = next;
    }

    // Delete works on a recovered pod.
    let api = current.url();
    kubectl_ok(&api, &["delete", "pod", "keep-0", "--timeout=60s"]);
    wait_until_blocking(
        "keep-0's process gone",
        Duration::from_secs(30),
        || copies(&marker(BASE, 0)),
        |n| *n == 0,
    );
    assert_eq!(faults::panics(&[&log]), 0);
    current.sigterm();
    reset(&data_s, BASE, PODS);
}

/// `mesopod --reset` stops every pod (kept by the SIGTERM before) and
/// wipes the data dir.
fn reset(data: &str, base: u32, pods: usize) {
    let out = std::process::Command::new(MESOPOD)
        .args(["--reset", "--data-dir", data])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!std::path::Path::new(data).exists());
    assert_eq!(any_left(base, pods), 0, "reset stopped every pod");
}

/// SIGKILL of mesopod, never restarted: past `--recovery-timeout` each
/// executor stops its pods and exits, so nothing outlives the cluster.
#[test]
fn executors_left_without_their_agent_stop_their_pods_past_the_recovery_timeout() {
    const BASE: u32 = 91_772;
    const N: usize = 4;
    if !C.possible("executors_left_without_their_agent_stop_their_pods_past_the_recovery_timeout") {
        return;
    }
    let scratch = faults::Scratch::new();
    let (data, log) = (&scratch.data, scratch.log.clone());
    load_image(data.to_str().unwrap());
    let mesopod = Proc::spawn(
        &[
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            data.to_str().unwrap(),
            "--agents",
            "2",
            "--recovery-timeout",
            "3secs",
        ],
        "Kubernetes API",
        &log,
    );
    let api = mesopod.url();
    apply(&api, &pods_yaml("orphan", BASE, N));
    let before = all_running(&api, "orphan", N, Duration::from_secs(60));
    assert_eq!(
        count_faults(C, &api, "orphan", BASE, &before, &[&log]),
        Faults::default()
    );
    let executors = executor_pids(data);
    assert!(!executors.is_empty());
    mesopod.sigkill();
    // Within the timeout the pods still run...
    assert!((0..N).all(|i| copies(&marker(BASE, i)) == 1));
    // ...and past it every copy and every executor is gone.
    let left = wait_until_blocking(
        "pods and executors gone past the recovery timeout",
        Duration::from_secs(30),
        || {
            let pods = any_left(BASE, N);
            let execs = executors.iter().filter(|p| procs::alive(**p)).count();
            (pods, execs)
        },
        |(pods, execs)| *pods == 0 && *execs == 0,
    );
    assert_eq!(left, (0, 0), "orphan pods, orphan executors");
    assert_eq!(faults::panics(&[&log]), 0);
}

/// An executor that is gone when mesopod starts again (killed while its
/// agent was down) does not re-subscribe: past the re-registration timeout
/// the agent gives its tasks up (REASON_EXECUTOR_REREGISTRATION_TIMEOUT),
/// and, its containers having outlived it, the next executor adopts the
/// pods: Running and ready again under new tasks, the same process each,
/// none twice.
#[test]
fn an_executor_that_does_not_come_back_has_its_pods_adopted() {
    const BASE: u32 = 91_776;
    const N: usize = 3;
    if !C.possible("an_executor_that_does_not_come_back_has_its_pods_adopted") {
        return;
    }
    let scratch = faults::Scratch::new();
    let (data, data_s, log) = (&scratch.data, scratch.data_s.clone(), scratch.log.clone());
    load_image(&data_s);
    let args = [
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        &data_s,
        "--agents",
        "1",
        "--recovery-timeout",
        "2mins",
    ];
    let mesopod = Proc::spawn(&args, "Kubernetes API", &log);
    apply(&mesopod.url(), &pods_yaml("gone", BASE, N));
    let before = all_running(&mesopod.url(), "gone", N, Duration::from_secs(60));
    let processes: Vec<Vec<u32>> = (0..N)
        .map(|i| procs::sleepers(&faults::marker(BASE, i)))
        .collect();
    let executors = executor_pids(data);
    assert_eq!(executors.len(), 1);
    mesopod.sigkill();
    assert!(
        std::process::Command::new("kill")
            .args(["-KILL", &executors[0].to_string()])
            .status()
            .unwrap()
            .success()
    );
    let mesopod = Proc::spawn(&args, "Kubernetes API", &log);
    let api = mesopod.url();
    let old: Vec<&String> = before.iter().map(|p| &p.3).collect();
    let after = wait_until_blocking(
        "the pods adopted: Running and ready under new tasks",
        Duration::from_secs(60),
        || faults::pods(&api, "gone"),
        |p| {
            p.len() == N
                && p.iter().all(|(_, phase, ready, task)| {
                    phase == "Running" && *ready && !old.contains(&task)
                })
                && executor_pids(data).len() == 1
        },
    );
    // The pods' status is the old task's until the new executor reports:
    // adopted once it said RUNNING for every new task.
    let new: Vec<String> = after.iter().map(|p| p.3.clone()).collect();
    wait_until_blocking(
        "the new executor reporting every new task RUNNING",
        Duration::from_secs(60),
        || faults::get_json(&format!("{api}/debug/registry/tasks?state=running")),
        |running| {
            let ids: Vec<&str> = running
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["id"].as_str())
                .collect();
            new.iter().all(|t| ids.contains(&t.as_str()))
        },
    );
    assert_eq!(after.len(), N);
    let now: Vec<Vec<u32>> = (0..N)
        .map(|i| procs::sleepers(&faults::marker(BASE, i)))
        .collect();
    assert_eq!(now, processes, "the same process for every pod, none twice");
    assert_eq!(faults::panics(&[&log]), 0);
    mesopod.sigterm();
    reset(&data_s, BASE, N);
}
