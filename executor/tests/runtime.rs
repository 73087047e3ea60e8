//! The pod runtime with real processes (`/bin/sh` scripts), no agent: what
//! a pod reports as it runs and ends, kill, and shutdown.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::pods::*;
use executor::PodState;
use executor::logs::cri::Stream as LogStream;
use mesos::proto::TaskId;
use serde_json::json;

#[tokio::test]
async fn a_pod_runs_reports_starting_running_finished_and_keeps_its_logs() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = runtime(dir.path());
    let plan = pod(
        "hello",
        "Never",
        json!([{
            "name": "main", "image": "busybox:1.36",
            "command": ["/bin/sh", "-c"],
            "args": ["echo out $GREETING $POD $NS $IP $NODE; echo err >&2; pwd"],
            "env": [
                {"name": "GREETING", "value": "hi"},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
            ],
            "workingDir": "/tmp"
        }]),
    );
    rt.launch(TaskId::new("t-hello"), plan).unwrap();
    let updates = until_terminal(&mut rx).await;
    let states: Vec<PodState> = updates.iter().map(|u| u.state).collect();
    assert_eq!(states.first(), Some(&PodState::Starting));
    assert_eq!(states.last(), Some(&PodState::Finished), "{updates:?}");
    let last = updates.last().unwrap();
    let s = status(last);
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    assert_eq!(s.pod_ip.as_deref(), Some("127.0.0.1"));
    assert_eq!(s.host_ip.as_deref(), Some("127.0.0.1"));
    let term = container(s, "main")
        .state
        .as_ref()
        .unwrap()
        .terminated
        .as_ref()
        .unwrap();
    assert_eq!(term.exit_code, 0);
    assert_eq!(term.reason.as_deref(), Some("Completed"));
    assert!(term.started_at.is_some() && term.finished_at.is_some());
    assert_eq!(container(s, "main").image, "busybox:1.36");
    assert_eq!(
        read_log(dir.path(), "hello", "main", LogStream::Stdout),
        "out hi hello ns 127.0.0.1 agent-host\n/tmp\n"
    );
    assert_eq!(
        read_log(dir.path(), "hello", "main", LogStream::Stderr),
        "err\n"
    );
    assert_eq!(
        last.pod_dir.as_deref(),
        Some(dir.path().join("pods/ns_hello_uid-hello").as_path())
    );
}

#[tokio::test]
async fn running_is_reported_once_every_container_started() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = runtime(dir.path());
    let plan = pod(
        "two",
        "Never",
        json!([sh("a", "sleep 30"), sh("b", "sleep 30")]),
    );
    rt.launch(TaskId::new("t-two"), plan).unwrap();
    let running = until(&mut rx, |u| u.state == PodState::Running).await;
    let s = status(&running);
    assert_eq!(s.phase.as_deref(), Some("Running"));
    for name in ["a", "b"] {
        let c = container(s, name);
        assert!(
            c.state
                .as_ref()
                .unwrap()
                .running
                .as_ref()
                .unwrap()
                .started_at
                .is_some()
        );
        assert!(c.ready);
    }
    let ready = s
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.status, "True");
    assert!(rt.kill(&TaskId::new("t-two"), Some(Duration::ZERO)));
    assert_eq!(
        until_terminal(&mut rx).await.last().unwrap().state,
        PodState::Killed
    );
}

#[tokio::test]
async fn a_failing_container_fails_the_pod_with_its_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = runtime(dir.path());
    let plan = pod(
        "bad",
        "Never",
        json!([sh("ok", "exit 0"), sh("broken", "exit 3")]),
    );
    rt.launch(TaskId::new("t-bad"), plan).unwrap();
    let last = until_terminal(&mut rx).await.pop().unwrap();
    assert_eq!(last.state, PodState::Failed);
    let msg = last.message.clone().unwrap();
    assert!(msg.contains("broken=3") && msg.contains("ok=0"), "{msg}");
    let s = status(&last);
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    let term = container(s, "broken")
        .state
        .as_ref()
        .unwrap()
        .terminated
        .clone()
        .unwrap();
    assert_eq!(term.exit_code, 3);
    assert_eq!(term.reason.as_deref(), Some("Error"));
}

#[tokio::test]
async fn a_missing_program_is_a_start_error_that_names_the_unpulled_image() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = runtime(dir.path());
    let plan = pod(
        "nope",
        "Never",
        json!([{"name": "c", "image": "example/app:2", "command": ["/definitely/not/here"]}]),
    );
    rt.launch(TaskId::new("t-nope"), plan).unwrap();
    let last = until_terminal(&mut rx).await.pop().unwrap();
    assert_eq!(last.state, PodState::Failed);
    let term = container(status(&last), "c")
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(term.reason.as_deref(), Some("StartError"));
    let msg = term.message.unwrap();
    assert!(
        msg.contains("example/app:2") && msg.contains("not pulled"),
        "{msg}"
    );
    assert!(last.message.unwrap().contains("not pulled"));
}

#[tokio::test]
async fn kill_sends_sigterm_to_the_group_and_waits_for_the_trap() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("saw-term");
    let (mut rt, mut rx) = runtime(dir.path());
    // The trap needs a moment (sleep 0.3) so a missing grace period would show.
    let script = format!(
        "trap 'sleep 0.3; echo term > {}; exit 0' TERM; echo ready; while true; do sleep 0.05; done",
        marker.display()
    );
    let plan = pod_with(
        "graceful",
        json!({"terminationGracePeriodSeconds": 10, "containers": [sh("c", &script)]}),
    );
    rt.launch(TaskId::new("t-graceful"), plan).unwrap();
    until(&mut rx, |u| u.state == PodState::Running).await;
    wait_for_file(&dir.path().join("pods/ns_graceful_uid-graceful/c/0.log")).await;
    wait_for_output(dir.path(), "graceful", "c").await;
    assert!(rt.kill(&TaskId::new("t-graceful"), None));
    let last = until_terminal(&mut rx).await.pop().unwrap();
    assert_eq!(last.state, PodState::Killed);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "term\n");
    assert!(last.message.unwrap().contains("SIGTERM"));
}

#[tokio::test]
async fn kill_escalates_to_sigkill_after_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = runtime(dir.path());
    let task = launch_ignoring_term(&mut rt, &mut rx, dir.path(), "stubborn", "Always").await;
    let started = std::time::Instant::now();
    assert!(rt.kill(&task, Some(Duration::from_millis(300))));
    let last = until_terminal(&mut rx).await.pop().unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(last.state, PodState::Killed);
    assert!(last.message.clone().unwrap().contains("SIGKILL"));
    let term = container(status(&last), "c")
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(term.exit_code, 128 + 9);
}

#[tokio::test]
async fn kill_all_stops_every_pod_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = runtime(dir.path());
    for name in ["p1", "p2"] {
        // A background child in the same group must go too.
        let plan = pod(
            name,
            "Always",
            json!([sh("c", "sleep 30 & echo $! > pid; wait")]),
        );
        rt.launch(TaskId::new(format!("t-{name}")), plan).unwrap();
    }
    let mut running = 0;
    while running < 2 {
        if next(&mut rx).await.state == PodState::Running {
            running += 1;
        }
    }
    let pidfile = dir.path().join("pods/ns_p1_uid-p1/c/pid");
    wait_for_file(&pidfile).await;
    let bg: i32 = tokio::time::timeout(WAIT, async {
        loop {
            if let Ok(n) = std::fs::read_to_string(&pidfile)
                .unwrap_or_default()
                .trim()
                .parse()
            {
                return n;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    rt.kill_all(Duration::from_millis(200));
    rt.wait_all().await;
    let mut killed = 0;
    while let Ok(u) = rx.try_recv() {
        if u.state == PodState::Killed {
            killed += 1;
        }
    }
    assert_eq!(killed, 2);
    // A signalled process dies when next scheduled: poll, bounded.
    let gone = tokio::time::timeout(WAIT, async {
        while Path::new(&format!("/proc/{bg}")).exists() && !is_zombie(bg) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(gone.is_ok(), "background child {bg} survived");
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.split_whitespace().nth(2) == Some("Z"))
        .unwrap_or(true)
}

#[tokio::test]
async fn a_duplicate_task_id_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = runtime(dir.path());
    rt.launch(
        TaskId::new("t-dup"),
        pod("dup", "Never", json!([sh("c", "sleep 30")])),
    )
    .unwrap();
    assert!(
        rt.launch(
            TaskId::new("t-dup"),
            pod("dup", "Never", json!([sh("c", "sleep 30")]))
        )
        .is_err()
    );
    until(&mut rx, |u| u.state == PodState::Running).await;
    rt.kill_all(Duration::ZERO);
    rt.wait_all().await;
}

#[tokio::test]
async fn a_later_shorter_kill_moves_sigkill_earlier() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = runtime(dir.path());
    let task = launch_ignoring_term(&mut rt, &mut rx, dir.path(), "slow", "Never").await;
    // A KILL with an hour of grace, then a shutdown that allows none.
    assert!(rt.kill(&task, Some(Duration::from_secs(3600))));
    rt.kill_all(Duration::ZERO);
    let last = until_terminal(&mut rx).await.pop().unwrap();
    assert_eq!(last.state, PodState::Killed);
    assert!(last.message.unwrap().contains("SIGKILL"));
}
