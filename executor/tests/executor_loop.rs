//! The executor loop against an in-process agent: the wire calls it makes,
//! reliability across dropped connections, kill and shutdown.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use executor::agent::{Agent, AgentError, EventStream};
use executor::backoff::Backoff;
use executor::{Executor, ExecutorEnv, ExecutorError, Exit, Options};
use mesos::proto::executor::{Call, Event, call, event};
use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{
    AgentId, AgentInfo, DurationInfo, ExecutorId, KillPolicy, TaskId, TaskInfo, TaskState,
    TaskStatus,
};
use serde_json::json;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(20);

type Conn = UnboundedSender<Result<Event, AgentError>>;

/// An agent in the test's hands: every SUBSCRIBE hands the test the call and
/// the sending end of its event stream; every other call is recorded.
#[derive(Clone)]
struct FakeAgent {
    subscribes: UnboundedSender<(Call, Conn)>,
    calls: UnboundedSender<Call>,
    /// Calls made while the agent was unreachable.
    lost: UnboundedSender<Call>,
    reachable: Arc<AtomicBool>,
}

impl Agent for FakeAgent {
    async fn subscribe(&self, call: Call) -> Result<EventStream, AgentError> {
        if !self.reachable.load(Ordering::SeqCst) {
            return Err(AgentError::Unreachable("connection refused".into()));
        }
        let (tx, rx) = unbounded_channel();
        self.subscribes.send((call, tx)).unwrap();
        Ok(Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|e| (e, rx))
        })))
    }

    async fn call(&self, call: Call) -> Result<(), AgentError> {
        if !self.reachable.load(Ordering::SeqCst) {
            self.lost.send(call).unwrap();
            return Err(AgentError::Unreachable("connection refused".into()));
        }
        self.calls.send(call).unwrap();
        Ok(())
    }
}

struct Harness {
    subscribes: UnboundedReceiver<(Call, Conn)>,
    calls: UnboundedReceiver<Call>,
    lost: UnboundedReceiver<Call>,
    reachable: Arc<AtomicBool>,
    run: JoinHandle<Result<Exit, ExecutorError>>,
    _sandbox: tempfile::TempDir,
}

fn start(checkpoint: bool) -> Harness {
    let sandbox = tempfile::tempdir().unwrap();
    let env = ExecutorEnv::from_vars([
        ("MESOS_AGENT_ENDPOINT", "127.0.0.1:5051".to_string()),
        ("MESOS_FRAMEWORK_ID", "fw".into()),
        ("MESOS_EXECUTOR_ID", "ex".into()),
        ("MESOS_SANDBOX", sandbox.path().display().to_string()),
        (
            "MESOS_CHECKPOINT",
            if checkpoint { "1" } else { "0" }.into(),
        ),
        ("MESOS_SUBSCRIPTION_BACKOFF_MAX", "50ms".into()),
        ("MESOS_RECOVERY_TIMEOUT", "5secs".into()),
        ("MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD", "2secs".into()),
    ])
    .unwrap();
    let (sub_tx, subscribes) = unbounded_channel();
    let (call_tx, calls) = unbounded_channel();
    let (lost_tx, lost) = unbounded_channel();
    let reachable = Arc::new(AtomicBool::new(true));
    let agent = FakeAgent {
        subscribes: sub_tx,
        calls: call_tx,
        lost: lost_tx,
        reachable: reachable.clone(),
    };
    let options = Options {
        restart_backoff: Backoff {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(200),
        },
        registration_timeout: Duration::from_secs(5),
    };
    let run = tokio::spawn(Executor::new(env, agent, options).run());
    Harness {
        subscribes,
        calls,
        lost,
        reachable,
        run,
        _sandbox: sandbox,
    }
}

impl Harness {
    async fn subscribe(&mut self) -> (Call, Conn) {
        let (call, conn) = tokio::time::timeout(WAIT, self.subscribes.recv())
            .await
            .unwrap()
            .unwrap();
        conn.send(Ok(Event {
            r#type: Some(event::Type::Subscribed as i32),
            subscribed: Some(event::Subscribed {
                agent_info: Some(AgentInfo {
                    hostname: "agent-1".into(),
                    id: Some(AgentId::new("a1")),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }))
        .unwrap();
        (call, conn)
    }

    async fn next_status(&mut self) -> TaskStatus {
        let call = tokio::time::timeout(WAIT, self.calls.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(call.kind(), Some(call::Type::Update));
        assert_eq!(call.executor_id, Some(ExecutorId::new("ex")));
        call.update.unwrap().status.unwrap()
    }

    async fn status_until(&mut self, state: TaskState) -> TaskStatus {
        loop {
            let s = self.next_status().await;
            if s.state() == state {
                return s;
            }
            assert!(
                !s.state().is_terminal(),
                "ended in {:?}: {:?}",
                s.state(),
                s.message
            );
        }
    }
}

fn launch(task: &str, pod: serde_json::Value) -> Event {
    launch_task(TaskInfo {
        name: task.into(),
        task_id: Some(TaskId::new(task)),
        data: Some(serde_json::to_vec(&pod).unwrap()),
        ..Default::default()
    })
}

fn launch_task(task: TaskInfo) -> Event {
    Event {
        r#type: Some(event::Type::Launch as i32),
        launch: Some(event::Launch { task: Some(task) }),
        ..Default::default()
    }
}

fn ack(status: &TaskStatus) -> Event {
    Event {
        r#type: Some(event::Type::Acknowledged as i32),
        acknowledged: Some(event::Acknowledged {
            task_id: status.task_id.clone(),
            uuid: status.uuid.clone().unwrap(),
        }),
        ..Default::default()
    }
}

fn simple_pod(name: &str, script: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": name, "namespace": "default", "uid": "u1"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "command": ["/bin/sh", "-c", script]}]}
    })
}

fn shutdown() -> Event {
    Event {
        r#type: Some(event::Type::Shutdown as i32),
        ..Default::default()
    }
}

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
    assert_eq!(
        tokio::time::timeout(WAIT, h.run).await.unwrap().unwrap(),
        Ok(Exit::Shutdown)
    );
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
    tokio::time::timeout(WAIT, h.run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
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
    tokio::time::timeout(WAIT, h.run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
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
    let log = h._sandbox.path().join("pods/default_k_u1/c/stdout");
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
    tokio::time::timeout(WAIT, h.run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn an_update_whose_call_failed_is_resent_in_the_next_subscribe() {
    let mut h = start(true);
    let (_, conn) = h.subscribe().await;
    let marker = h._sandbox.path().join("go");
    let script = format!(
        "while [ ! -e {} ]; do sleep 0.05; done; exit 0",
        marker.display()
    );
    conn.send(Ok(launch("t", simple_pod("r", &script))))
        .unwrap();
    let starting = h.next_status().await;
    conn.send(Ok(ack(&starting))).unwrap();
    let running = h.next_status().await;
    assert_eq!(running.state(), TaskState::TaskRunning);
    // RUNNING is never acknowledged; then calls start failing and FINISHED
    // cannot be delivered; then the stream drops.
    h.reachable.store(false, Ordering::SeqCst);
    std::fs::write(&marker, "").unwrap();
    loop {
        let call = tokio::time::timeout(WAIT, h.lost.recv())
            .await
            .unwrap()
            .unwrap();
        if call.update.unwrap().status.unwrap().state() == TaskState::TaskFinished {
            break;
        }
    }
    drop(conn);
    h.reachable.store(true, Ordering::SeqCst);

    let (sub, conn) = h.subscribe().await;
    let sub = sub.subscribe.unwrap();
    let resent: Vec<TaskState> = sub
        .unacknowledged_updates
        .iter()
        .map(|u| u.status.as_ref().unwrap().state())
        .collect();
    assert_eq!(
        resent,
        vec![TaskState::TaskRunning, TaskState::TaskFinished]
    );
    assert_eq!(
        sub.unacknowledged_updates[0].status.as_ref().unwrap().uuid,
        running.uuid
    );
    assert!(
        sub.unacknowledged_tasks.is_empty(),
        "STARTING's ack acknowledged the task"
    );

    for u in &sub.unacknowledged_updates {
        conn.send(Ok(ack(u.status.as_ref().unwrap()))).unwrap();
    }
    conn.send(Ok(shutdown())).unwrap();
    assert_eq!(
        tokio::time::timeout(WAIT, h.run).await.unwrap().unwrap(),
        Ok(Exit::Shutdown)
    );
    assert!(
        h.calls.try_recv().is_err(),
        "updates resent in SUBSCRIBE are not sent twice"
    );
}

#[tokio::test]
async fn a_failed_update_is_retried_in_order_while_the_subscription_stays_up() {
    let mut h = start(true);
    let (_, conn) = h.subscribe().await;
    let done = h._sandbox.path().join("done");
    // Every UPDATE call fails from now on; the stream stays open.
    h.reachable.store(false, Ordering::SeqCst);
    conn.send(Ok(launch(
        "t",
        simple_pod("q", &format!("touch {}", done.display())),
    )))
    .unwrap();
    // The queue blocks on its head: only STARTING is tried, again and again.
    for _ in 0..2 {
        let call = tokio::time::timeout(WAIT, h.lost.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            call.update.unwrap().status.unwrap().state(),
            TaskState::TaskStarting
        );
    }
    tokio::time::timeout(WAIT, async {
        while !done.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    h.reachable.store(true, Ordering::SeqCst);
    assert_eq!(h.next_status().await.state(), TaskState::TaskStarting);
    assert_eq!(h.next_status().await.state(), TaskState::TaskRunning);
    assert_eq!(h.next_status().await.state(), TaskState::TaskFinished);
    assert!(
        h.subscribes.try_recv().is_err(),
        "delivered without a new SUBSCRIBE"
    );
    conn.send(Ok(shutdown())).unwrap();
    tokio::time::timeout(WAIT, h.run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn updates_made_while_disconnected_arrive_exactly_once_after_reconnecting() {
    let mut h = start(true);
    let (_, conn) = h.subscribe().await;
    let go = h._sandbox.path().join("go");
    let done = h._sandbox.path().join("done");
    let script = format!(
        "while [ ! -e {go} ]; do sleep 0.05; done; touch {done}; exit 0",
        go = go.display(),
        done = done.display()
    );
    conn.send(Ok(launch("t", simple_pod("w", &script))))
        .unwrap();
    h.status_until(TaskState::TaskRunning).await;
    h.reachable.store(false, Ordering::SeqCst);
    drop(conn);
    std::fs::write(&go, "").unwrap();
    tokio::time::timeout(WAIT, async {
        while !done.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    h.reachable.store(true, Ordering::SeqCst);

    // FINISHED comes either inside SUBSCRIBE or as a call right after,
    // depending on when the exit was reaped; never both, never neither.
    let (sub, conn) = h.subscribe().await;
    let mut seen: Vec<TaskState> = sub
        .subscribe
        .unwrap()
        .unacknowledged_updates
        .iter()
        .map(|u| u.status.as_ref().unwrap().state())
        .collect();
    while !seen.contains(&TaskState::TaskFinished) {
        seen.push(h.next_status().await.state());
    }
    assert!(seen.contains(&TaskState::TaskRunning), "{seen:?}");
    conn.send(Ok(shutdown())).unwrap();
    assert_eq!(
        tokio::time::timeout(WAIT, h.run).await.unwrap().unwrap(),
        Ok(Exit::Shutdown)
    );
    while let Ok(call) = h.calls.try_recv() {
        seen.push(call.update.unwrap().status.unwrap().state());
    }
    assert_eq!(
        seen.iter()
            .filter(|s| **s == TaskState::TaskFinished)
            .count(),
        1,
        "{seen:?}"
    );
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
    assert_eq!(
        tokio::time::timeout(WAIT, h.run).await.unwrap().unwrap(),
        Ok(Exit::Shutdown)
    );
}

#[tokio::test]
async fn without_checkpointing_a_drop_stops_the_pods_and_exits() {
    let mut h = start(false);
    let (_, conn) = h.subscribe().await;
    let pidfile = h._sandbox.path().join("pid");
    conn.send(Ok(launch(
        "t",
        simple_pod(
            "d",
            &format!("echo $$ > {}; exec sleep 30", pidfile.display()),
        ),
    )))
    .unwrap();
    h.status_until(TaskState::TaskRunning).await;
    tokio::time::timeout(WAIT, async {
        while std::fs::read_to_string(&pidfile)
            .unwrap_or_default()
            .trim()
            .is_empty()
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap();
    let pid = std::fs::read_to_string(&pidfile).unwrap().trim().to_owned();
    drop(conn);
    let result = tokio::time::timeout(WAIT, h.run).await.unwrap().unwrap();
    assert!(
        matches!(result, Err(ExecutorError::Disconnected(_))),
        "{result:?}"
    );
    // A signalled process dies when next scheduled: poll, bounded.
    let alive = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.split_whitespace().nth(2) != Some("Z"))
            .unwrap_or(false)
    };
    let gone = tokio::time::timeout(WAIT, async {
        while alive(&pid) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        gone.is_ok(),
        "the container process {pid} outlived the executor"
    );
}

#[tokio::test]
async fn with_checkpointing_it_gives_up_after_the_recovery_timeout() {
    let mut h = start(true);
    let (_, conn) = h.subscribe().await;
    h.reachable.store(false, Ordering::SeqCst);
    drop(conn);
    let started = std::time::Instant::now();
    let result = tokio::time::timeout(WAIT, h.run).await.unwrap().unwrap();
    assert!(
        matches!(result, Err(ExecutorError::RecoveryTimeout { .. })),
        "{result:?}"
    );
    assert!(started.elapsed() >= Duration::from_secs(5));
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
    assert_eq!(
        tokio::time::timeout(WAIT, h.run).await.unwrap().unwrap(),
        Ok(Exit::Shutdown)
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
}
