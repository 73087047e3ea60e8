//! The pod runtime with real processes, no agent: restart policies, crash
//! loop backoff, init containers and the active deadline.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::pods::*;
use executor::PodState;
use executor::logs::cri::Stream as LogStream;
use mesos::proto::TaskId;
use serde_json::json;

#[tokio::test]
async fn always_restarts_with_crash_loop_backoff_and_counts_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = runtime(dir.path());
    let plan = pod("loop", "Always", json!([sh("c", "echo run; exit 0")]));
    rt.launch(TaskId::new("t-loop"), plan).unwrap();
    let backoff = until(&mut rx, |u| {
        let c = container(status(u), "c");
        c.state
            .as_ref()
            .unwrap()
            .waiting
            .as_ref()
            .and_then(|w| w.reason.as_deref())
            == Some("CrashLoopBackOff")
            && c.restart_count >= 2
    })
    .await;
    assert_eq!(backoff.state, PodState::Running);
    let c = container(status(&backoff), "c");
    assert_eq!(
        c.last_state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        0
    );
    assert!(
        read_log(dir.path(), "loop", "c", LogStream::Stdout)
            .matches("run")
            .count()
            >= 3
    );
    assert!(rt.kill(&TaskId::new("t-loop"), Some(Duration::ZERO)));
    assert_eq!(
        until_terminal(&mut rx).await.pop().unwrap().state,
        PodState::Killed
    );
}

#[tokio::test]
async fn on_failure_restarts_until_success_then_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("count");
    let (mut rt, mut rx) = runtime(dir.path());
    // Fails twice, then succeeds.
    let script = format!(
        "n=$(cat {c} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {c}; [ $n -ge 3 ]",
        c = counter.display()
    );
    let plan = pod("flaky", "OnFailure", json!([sh("c", &script)]));
    rt.launch(TaskId::new("t-flaky"), plan).unwrap();
    let last = until_terminal(&mut rx).await.pop().unwrap();
    assert_eq!(last.state, PodState::Finished, "{:?}", last.message);
    assert_eq!(container(status(&last), "c").restart_count, 2);
}

#[tokio::test]
async fn never_does_not_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = runtime(dir.path());
    let plan = pod("once", "Never", json!([sh("c", "echo run; exit 1")]));
    rt.launch(TaskId::new("t-once"), plan).unwrap();
    let last = until_terminal(&mut rx).await.pop().unwrap();
    assert_eq!(last.state, PodState::Failed);
    assert_eq!(container(status(&last), "c").restart_count, 0);
    assert_eq!(
        read_log(dir.path(), "once", "c", LogStream::Stdout),
        "run\n"
    );
}

#[tokio::test]
async fn init_containers_run_first_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let order = dir.path().join("order");
    let (mut rt, mut rx) = runtime(dir.path());
    let o = order.display();
    let plan = pod_with(
        "init",
        json!({
            "restartPolicy": "Never",
            "initContainers": [sh("first", &format!("echo first >> {o}")), sh("second", &format!("echo second >> {o}"))],
            "containers": [sh("main", &format!("echo main >> {o}"))]
        }),
    );
    rt.launch(TaskId::new("t-init"), plan).unwrap();
    let updates = until_terminal(&mut rx).await;
    let last = updates.last().unwrap();
    assert_eq!(last.state, PodState::Finished);
    assert_eq!(
        std::fs::read_to_string(&order).unwrap(),
        "first\nsecond\nmain\n"
    );
    let inits = status(last).init_container_statuses.clone().unwrap();
    assert_eq!(inits.len(), 2);
    assert!(inits.iter().all(|c| {
        c.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code
            == 0
    }));
    // While init containers ran, the pod was Pending and not Initialized.
    let first = &updates[0];
    assert_eq!(status(first).phase.as_deref(), Some("Pending"));
}

#[tokio::test]
async fn a_failed_init_container_stops_the_pod_under_never() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("main-ran");
    let (mut rt, mut rx) = runtime(dir.path());
    let plan = pod_with(
        "initfail",
        json!({
            "restartPolicy": "Never",
            "initContainers": [sh("setup", "exit 7")],
            "containers": [sh("main", &format!("touch {}", marker.display()))]
        }),
    );
    rt.launch(TaskId::new("t-initfail"), plan).unwrap();
    let last = until_terminal(&mut rx).await.pop().unwrap();
    assert_eq!(last.state, PodState::Failed);
    assert!(last.message.unwrap().contains("setup=7"));
    assert!(
        !marker.exists(),
        "the main container must not run after a failed init"
    );
}

#[tokio::test]
async fn a_failed_init_container_is_retried_under_on_failure() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("count");
    let (mut rt, mut rx) = runtime(dir.path());
    let script = format!(
        "n=$(cat {c} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {c}; [ $n -ge 2 ]",
        c = counter.display()
    );
    let plan = pod_with(
        "initretry",
        json!({"restartPolicy": "OnFailure", "initContainers": [sh("setup", &script)], "containers": [sh("main", "exit 0")]}),
    );
    rt.launch(TaskId::new("t-initretry"), plan).unwrap();
    let last = until_terminal(&mut rx).await.pop().unwrap();
    assert_eq!(last.state, PodState::Finished);
    assert_eq!(
        status(&last).init_container_statuses.as_ref().unwrap()[0].restart_count,
        1
    );
}

#[tokio::test]
async fn active_deadline_stops_the_pod_as_failed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = runtime(dir.path());
    let plan = pod_with(
        "late",
        json!({"activeDeadlineSeconds": 1, "terminationGracePeriodSeconds": 0, "containers": [sh("c", "sleep 30")]}),
    );
    rt.launch(TaskId::new("t-late"), plan).unwrap();
    let last = until_terminal(&mut rx).await.pop().unwrap();
    assert_eq!(last.state, PodState::Failed);
    assert!(last.deadline_exceeded);
    assert_eq!(status(&last).reason.as_deref(), Some("DeadlineExceeded"));
}
