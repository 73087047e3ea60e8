//! The real `mesopod executor` on a localmesos agent, driven by a minimal
//! scheduler: pods that finish, fail, are killed, restart, have init
//! containers, or cannot be decoded; logs read back through `/files/read`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::harness::{pod_dir, pod_status, sh_pod, start};
use executor::logs::cri::{self, Stream};
use mesos::proto::TaskState;
use mesos::proto::task_status::{Reason, Source};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_runs_finishes_and_its_logs_are_served_by_the_agent() {
    let mut s = start().await;
    s.launch(
        "ok",
        sh_pod("ok", "Never", "echo hello from $HOSTNAME; echo oops >&2"),
    )
    .await;
    let updates = s.until_terminal("ok").await;
    let states: Vec<TaskState> = updates.iter().map(|u| u.state()).collect();
    assert_eq!(
        states,
        vec![
            TaskState::TaskStarting,
            TaskState::TaskRunning,
            TaskState::TaskFinished
        ]
    );
    let last = updates.last().unwrap();
    assert_eq!(last.source, Some(Source::SourceExecutor as i32));
    let status = pod_status(last);
    assert_eq!(status["phase"], "Succeeded");
    assert_eq!(status["hostIP"], "127.0.0.1");
    assert_eq!(status["podIP"], "127.0.0.1");
    assert_eq!(
        status["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        0
    );
    let dir = pod_dir(last);
    assert!(dir.ends_with("/pods/e2e_ok_uid-ok"), "{dir}");
    let log = s.read_file(&format!("{dir}/main/0.log")).await;
    assert_eq!(
        cri::texts(log.as_bytes(), Some(Stream::Stdout)),
        "hello from ok\n"
    );
    assert_eq!(cri::texts(log.as_bytes(), Some(Stream::Stderr)), "oops\n");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_pod_reports_task_failed_with_the_exit_code() {
    let mut s = start().await;
    s.launch("bad", sh_pod("bad", "Never", "exit 3")).await;
    let last = s.until("bad", TaskState::TaskFailed).await;
    assert!(
        last.message.as_deref().unwrap().contains("main=3"),
        "{:?}",
        last.message
    );
    let status = pod_status(&last);
    assert_eq!(status["phase"], "Failed");
    assert_eq!(
        status["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        3
    );
    assert_eq!(status["containerStatuses"][0]["restartCount"], 0);
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_pod_gets_sigterm_and_its_grace_period() {
    let mut s = start().await;
    // The trap takes 0.5 s: only a real grace period lets it finish.
    let script = "trap 'sleep 0.5; echo TERM > saw-term; exit 0' TERM; echo ready; while true; do sleep 0.05; done";
    s.launch_raw(
        "k",
        serde_json::to_vec(&sh_pod("k", "Always", script)).unwrap(),
        Some(Duration::from_secs(10)),
    )
    .await;
    let running = s.until("k", TaskState::TaskRunning).await;
    let dir = pod_dir(&running);
    s.wait_file(&format!("{dir}/main/0.log"), |d| d.contains("ready"))
        .await;
    s.kill("k", None).await;
    let killed = s.until("k", TaskState::TaskKilled).await;
    assert!(
        killed.message.as_deref().unwrap().contains("SIGTERM"),
        "{:?}",
        killed.message
    );
    assert_eq!(s.read_file(&format!("{dir}/main/saw-term")).await, "TERM\n");
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_policies_on_failure_always_and_never() {
    let mut s = start().await;
    // OnFailure: fails twice (counting in its own directory), then succeeds.
    let flaky = "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; [ $n -ge 3 ]";
    s.launch("onfailure", sh_pod("onfailure", "OnFailure", flaky))
        .await;
    // Always: restarts even after exit 0, in CrashLoopBackOff between runs.
    s.launch("always", sh_pod("always", "Always", "echo run"))
        .await;
    // Never: one run only.
    s.launch("never", sh_pod("never", "Never", "exit 1")).await;

    let done = s.until("onfailure", TaskState::TaskFinished).await;
    assert_eq!(pod_status(&done)["containerStatuses"][0]["restartCount"], 2);

    let backoff = loop {
        let u = s.until("always", TaskState::TaskRunning).await;
        let c = &pod_status(&u)["containerStatuses"][0];
        if c["state"]["waiting"]["reason"] == "CrashLoopBackOff"
            && c["restartCount"].as_i64() >= Some(1)
        {
            break u;
        }
    };
    assert_eq!(
        pod_status(&backoff)["containerStatuses"][0]["lastState"]["terminated"]["exitCode"],
        0
    );
    // Each run has its own log, as kubelet keeps them.
    for run in ["0.log", "1.log"] {
        let log = s
            .read_file(&format!("{}/main/{run}", pod_dir(&backoff)))
            .await;
        assert_eq!(cri::texts(log.as_bytes(), None), "run\n", "{run}: {log:?}");
    }
    s.kill("always", Some(Duration::ZERO)).await;
    s.until("always", TaskState::TaskKilled).await;

    let never = s.until("never", TaskState::TaskFailed).await;
    assert_eq!(
        pod_status(&never)["containerStatuses"][0]["restartCount"],
        0
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_containers_run_first_in_order_and_each_must_succeed() {
    let mut s = start().await;
    let pod = |name: &str, second_init: &str| {
        json!({
            "metadata": {"name": name, "namespace": "e2e", "uid": format!("uid-{name}")},
            "spec": {
                "restartPolicy": "Never",
                "initContainers": [
                    {"name": "one", "command": ["/bin/sh", "-c", "echo one >> ../order"]},
                    {"name": "two", "command": ["/bin/sh", "-c", second_init]}
                ],
                "containers": [{"name": "main", "command": ["/bin/sh", "-c", "echo main >> ../order"]}]
            }
        })
    };
    s.launch("init", pod("init", "echo two >> ../order")).await;
    let done = s.until("init", TaskState::TaskFinished).await;
    assert_eq!(
        s.read_file(&format!("{}/order", pod_dir(&done))).await,
        "one\ntwo\nmain\n"
    );

    s.launch("initfail", pod("initfail", "echo two >> ../order; exit 4"))
        .await;
    let failed = s.until("initfail", TaskState::TaskFailed).await;
    assert!(
        failed.message.as_deref().unwrap().contains("two=4"),
        "{:?}",
        failed.message
    );
    assert_eq!(
        s.read_file(&format!("{}/order", pod_dir(&failed))).await,
        "one\ntwo\n"
    );
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_pod_data_gets_task_error_with_a_clear_message() {
    let mut s = start().await;
    s.launch_raw("garbage", b"this is not a pod".to_vec(), None)
        .await;
    let e = s.next_update("garbage").await;
    assert_eq!(e.state(), TaskState::TaskError);
    assert_eq!(e.reason, Some(Reason::ReasonTaskInvalid as i32));
    assert!(
        e.message
            .as_deref()
            .unwrap()
            .contains("not a Kubernetes Pod"),
        "{:?}",
        e.message
    );

    let no_command = json!({"metadata": {"name": "img"}, "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}});
    s.launch("img", no_command).await;
    let e = s.next_update("img").await;
    assert_eq!(e.state(), TaskState::TaskError);
    assert!(
        e.message
            .as_deref()
            .unwrap()
            .contains("cannot be run without a container runtime"),
        "{:?}",
        e.message
    );

    // The executor is still healthy: the next pod runs.
    s.launch("after", sh_pod("after", "Never", "true")).await;
    s.until("after", TaskState::TaskFinished).await;
    s.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_running_pods_reports_them_killed_and_the_executor_exits() {
    let mut s = start().await;
    let script =
        "trap 'echo TERM > saw-term; exit 0' TERM; echo ready; while true; do sleep 0.05; done";
    s.launch("long", sh_pod("long", "Always", script)).await;
    let running = s.until("long", TaskState::TaskRunning).await;
    let dir = pod_dir(&running);
    s.wait_file(&format!("{dir}/main/0.log"), |d| d.contains("ready"))
        .await;
    s.shutdown_executor().await;
    let killed = s.until("long", TaskState::TaskKilled).await;
    assert!(
        killed.message.as_deref().unwrap().contains("SIGTERM"),
        "{:?}",
        killed.message
    );
    assert_eq!(s.read_file(&format!("{dir}/main/saw-term")).await, "TERM\n");
    // finish() asserts the executor exited by itself after SHUTDOWN.
    s.finish().await;
}
