//! The executor loop against an in-process agent: the wire calls it makes,
//! kill and shutdown.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::agent::*;
use executor::Exit;
use mesos::proto::executor::{Event, call, event};
use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{AgentId, DurationInfo, KillPolicy, TaskId, TaskInfo, TaskState};
use serde_json::json;

#[tokio::test]
async fn updates_are_v4_from_the_executor_with_the_pod_status_as_json() {
    let mut h = start(false);
    let (sub, conn) = h.subscribe().await;
    assert_eq!(sub.kind(), Some(call::Type::Subscribe));
    assert_eq!(sub.framework_id.unwrap().value, "fw");
    conn.send(Ok(launch("t1", simple_pod("p1", "echo hi"))))
        .unwrap();

    let starting = h.next_status().await;
    assert_eq!(starting.state(), TaskState::TaskStarting);
    let running = h.next_status().await;
    assert_eq!(running.state(), TaskState::TaskRunning);
    let finished = h.status_until(TaskState::TaskFinished).await;
    for s in [&starting, &running, &finished] {
        let uuid = uuid::Uuid::from_slice(s.uuid.as_deref().unwrap()).unwrap();
        assert_eq!(uuid.get_version_num(), 4);
        assert_eq!(s.source, Some(Source::SourceExecutor as i32));
        assert_eq!(s.agent_id, Some(AgentId::new("a1")));
        assert_eq!(s.task_id, Some(TaskId::new("t1")));
    }
    let pod_status: serde_json::Value =
        serde_json::from_slice(finished.data.as_deref().unwrap()).unwrap();
    assert_eq!(pod_status["phase"], "Succeeded");
    assert_eq!(
        pod_status["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        0
    );
    let label = &finished.labels.as_ref().unwrap().labels[0];
    assert_eq!(label.key, executor::executor::POD_DIR_LABEL);
    assert!(
        label
            .value
            .as_deref()
            .unwrap()
            .ends_with("pods/default_p1_u1")
    );

    conn.send(Ok(shutdown())).unwrap();
    assert_eq!(ended(h.run).await, Ok(Exit::Shutdown));
}

#[tokio::test]
async fn a_bad_pod_gets_task_error_with_a_clear_message() {
    let mut h = start(false);
    let (_, conn) = h.subscribe().await;
    conn.send(Ok(launch_task(TaskInfo {
        name: "bad".into(),
        task_id: Some(TaskId::new("bad")),
        data: Some(b"{\"metadata\": 42}".to_vec()),
        ..Default::default()
    })))
    .unwrap();
    let s = h.next_status().await;
    assert_eq!(s.state(), TaskState::TaskError);
    assert_eq!(s.reason, Some(Reason::ReasonTaskInvalid as i32));
    assert!(s.message.unwrap().contains("not a Kubernetes Pod"));

    conn.send(Ok(launch("nocmd", json!({"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))))
        .unwrap();
    let s = h.next_status().await;
    assert_eq!(s.state(), TaskState::TaskError);
    assert!(s.message.unwrap().contains("without a container runtime"));
    conn.send(Ok(shutdown())).unwrap();
    ended(h.run).await.unwrap();
}

#[tokio::test]
async fn a_failing_pod_reports_its_exit_code() {
    let mut h = start(false);
    let (_, conn) = h.subscribe().await;
    conn.send(Ok(launch("t", simple_pod("f", "exit 42"))))
        .unwrap();
    let failed = h.status_until(TaskState::TaskFailed).await;
    assert!(failed.message.unwrap().contains("c=42"));
    let pod_status: serde_json::Value =
        serde_json::from_slice(failed.data.as_deref().unwrap()).unwrap();
    assert_eq!(
        pod_status["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        42
    );
    conn.send(Ok(shutdown())).unwrap();
    ended(h.run).await.unwrap();
}

#[tokio::test]
async fn kill_uses_the_task_kill_policy_then_reports_killed() {
    let mut h = start(false);
    let (_, conn) = h.subscribe().await;
    // Ignores SIGTERM: only SIGKILL after the 200 ms grace period stops it.
    let pod = simple_pod(
        "k",
        "trap '' TERM; echo up; while true; do sleep 0.05; done",
    );
    conn.send(Ok(launch_task(TaskInfo {
        name: "k".into(),
        task_id: Some(TaskId::new("k")),
        data: Some(serde_json::to_vec(&pod).unwrap()),
        kill_policy: Some(KillPolicy {
            grace_period: Some(DurationInfo::from_duration(Duration::from_millis(200))),
        }),
        ..Default::default()
    })))
    .unwrap();
    h.status_until(TaskState::TaskRunning).await;
    // The shell prints "up" once its trap is installed.
    let log = h._sandbox.path().join("pods/default_k_u1/c/0.log");
    tokio::time::timeout(WAIT, async {
        while std::fs::read_to_string(&log).unwrap_or_default().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    conn.send(Ok(Event {
        r#type: Some(event::Type::Kill as i32),
        kill: Some(event::Kill {
            task_id: Some(TaskId::new("k")),
            kill_policy: None,
        }),
        ..Default::default()
    }))
    .unwrap();
    let killed = h.status_until(TaskState::TaskKilled).await;
    let msg = killed.message.unwrap();
    assert!(msg.contains("SIGKILL") && msg.contains("200ms"), "{msg}");
    conn.send(Ok(shutdown())).unwrap();
    ended(h.run).await.unwrap();
}

#[tokio::test]
async fn a_launched_task_stays_unacknowledged_until_an_update_is_acked() {
    let mut h = start(true);
    let (_, conn) = h.subscribe().await;
    conn.send(Ok(launch("t", simple_pod("u", "sleep 30"))))
        .unwrap();
    h.status_until(TaskState::TaskRunning).await;
    drop(conn);
    let (sub, conn) = h.subscribe().await;
    let sub = sub.subscribe.unwrap();
    assert_eq!(sub.unacknowledged_tasks.len(), 1);
    assert_eq!(sub.unacknowledged_tasks[0].task_id, Some(TaskId::new("t")));
    conn.send(Ok(shutdown())).unwrap();
    let killed = h.status_until(TaskState::TaskKilled).await;
    conn.send(Ok(ack(&killed))).unwrap();
    assert_eq!(ended(h.run).await, Ok(Exit::Shutdown));
}

#[tokio::test]
async fn shutdown_kills_every_pod_reports_and_exits_within_the_grace_period() {
    let mut h = start(false);
    let (_, conn) = h.subscribe().await;
    for t in ["a", "b"] {
        // 60 s of their own grace: SHUTDOWN must cap it.
        let mut pod = simple_pod(t, "trap '' TERM; while true; do sleep 0.05; done");
        pod["spec"]["terminationGracePeriodSeconds"] = json!(60);
        conn.send(Ok(launch(t, pod))).unwrap();
    }
    let mut running = 0;
    while running < 2 {
        if h.next_status().await.state() == TaskState::TaskRunning {
            running += 1;
        }
    }
    let started = std::time::Instant::now();
    conn.send(Ok(shutdown())).unwrap();
    let mut killed = Vec::new();
    while killed.len() < 2 {
        let s = h.next_status().await;
        if s.state() == TaskState::TaskKilled {
            conn.send(Ok(ack(&s))).unwrap();
            killed.push(s.task_id.unwrap().value);
        }
    }
    killed.sort();
    assert_eq!(killed, vec!["a", "b"]);
    assert_eq!(ended(h.run).await, Ok(Exit::Shutdown));
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
}

/// The executor says it is alive every `--node-status-update-frequency`,
/// as kubelet posts its node status, whether or not it runs a pod.
#[tokio::test]
async fn the_executor_reports_its_node_status_every_period() {
    let mut h = start_with(false, Duration::from_millis(100));
    let (_sub, _conn) = h.subscribe().await;
    for _ in 0..3 {
        let call = tokio::time::timeout(Duration::from_secs(5), h.node_status.recv())
            .await
            .expect("a node status within the period")
            .unwrap();
        assert_eq!(call.kind(), Some(call::Type::Message));
        assert_eq!(call.executor_id.unwrap().value, "ex");
        assert_eq!(call.framework_id.unwrap().value, "fw");
    }
}
