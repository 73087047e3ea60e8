//! The real `mesopod executor` binary against an agent the test controls
//! (a loopback HTTP server speaking the v1 executor API in protobuf), so the
//! agent connection can be dropped at a chosen moment: with checkpointing
//! the executor re-subscribes and no update is lost; without, it stops its
//! pods and exits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use common::MESOPOD;
use mesos::codec::Codec;
use mesos::proto::executor::{Call, Event, call, event};
use mesos::proto::{AgentId, AgentInfo, TaskId, TaskInfo, TaskState, TaskStatus};
use testkit::{ProcessGuard, wait_until};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

const WAIT: Duration = Duration::from_secs(30);

/// The open event stream of one subscription; dropping it closes the
/// connection, as an agent restart would.
type Conn = UnboundedSender<Event>;

#[derive(Clone)]
struct Agent {
    subscribes: UnboundedSender<(Call, Conn)>,
    updates: UnboundedSender<(TaskStatus, bool)>,
    down: Arc<AtomicBool>,
}

async fn executor_api(State(agent): State<Agent>, body: Bytes) -> Response {
    let Ok(call) = Codec::Protobuf.decode::<Call>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let down = agent.down.load(Ordering::SeqCst);
    match call.kind() {
        Some(call::Type::Subscribe) if down => StatusCode::SERVICE_UNAVAILABLE.into_response(),
        Some(call::Type::Subscribe) => {
            let (tx, rx) = unbounded_channel::<Event>();
            agent.subscribes.send((call, tx)).unwrap();
            let stream = futures::stream::unfold(rx, |mut rx| async move {
                let ev = rx.recv().await?;
                let frame = mesos::recordio::encode(&Codec::Protobuf.encode(&ev));
                Some((Ok::<_, std::convert::Infallible>(Bytes::from(frame)), rx))
            });
            (
                [(header::CONTENT_TYPE, Codec::Protobuf.content_type())],
                Body::from_stream(stream),
            )
                .into_response()
        }
        Some(call::Type::Update) => {
            let status = call.update.and_then(|u| u.status).unwrap();
            agent.updates.send((status, !down)).unwrap();
            if down {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::ACCEPTED
            }
            .into_response()
        }
        _ => StatusCode::ACCEPTED.into_response(),
    }
}

struct Harness {
    subscribes: UnboundedReceiver<(Call, Conn)>,
    /// Every UPDATE call, and whether the agent accepted it.
    updates: UnboundedReceiver<(TaskStatus, bool)>,
    down: Arc<AtomicBool>,
    child: ProcessGuard<tokio::process::Child>,
    sandbox: tempfile::TempDir,
    server: tokio::task::JoinHandle<()>,
}

async fn start(checkpoint: bool) -> Harness {
    let (sub_tx, subscribes) = unbounded_channel();
    let (upd_tx, updates) = unbounded_channel();
    let down = Arc::new(AtomicBool::new(false));
    let agent = Agent {
        subscribes: sub_tx,
        updates: upd_tx,
        down: down.clone(),
    };
    let app = Router::new()
        .route("/api/v1/executor", post(executor_api))
        .with_state(agent);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    let sandbox = tempfile::tempdir().unwrap();
    let stderr = std::fs::File::create(sandbox.path().join("executor.stderr")).unwrap();
    let child = ProcessGuard::spawn(
        tokio::process::Command::new(MESOPOD)
            .arg("executor")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("MESOS_AGENT_ENDPOINT", addr.to_string())
            .env("MESOS_FRAMEWORK_ID", "fw")
            .env("MESOS_EXECUTOR_ID", "ex")
            .env("MESOS_SANDBOX", sandbox.path())
            .env("MESOS_CHECKPOINT", if checkpoint { "1" } else { "0" })
            .env("MESOS_SUBSCRIPTION_BACKOFF_MAX", "100ms")
            .env("MESOS_RECOVERY_TIMEOUT", "20secs")
            .env("MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD", "3secs")
            // The pods here are host commands; containers have their own tests.
            .env("MESOPOD_CONTAINER_RUNTIME", "process")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr),
    )
    .unwrap();
    Harness {
        subscribes,
        updates,
        down,
        child,
        sandbox,
        server,
    }
}

impl Harness {
    async fn subscribe(&mut self) -> (Call, Conn) {
        let (call, conn) = tokio::time::timeout(WAIT, self.subscribes.recv())
            .await
            .unwrap()
            .unwrap();
        conn.send(Event {
            r#type: Some(event::Type::Subscribed as i32),
            subscribed: Some(event::Subscribed {
                agent_info: Some(AgentInfo {
                    hostname: "fake-agent".into(),
                    id: Some(AgentId::new("a1")),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
        .unwrap();
        (call, conn)
    }

    async fn next_update(&mut self) -> (TaskStatus, bool) {
        tokio::time::timeout(WAIT, self.updates.recv())
            .await
            .expect("an update in time")
            .unwrap()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self.sandbox.path().join("executor.stderr")).unwrap_or_default()
    }

    /// Waits for the executor to exit; kills it if it does not.
    async fn exit_status(&mut self) -> std::process::ExitStatus {
        match tokio::time::timeout(WAIT, self.child.wait()).await {
            Ok(status) => status.unwrap(),
            Err(_) => {
                let _ = self.child.kill().await;
                panic!("the executor did not exit; stderr:\n{}", self.stderr());
            }
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        // The executor's guard ends its process group.
        self.server.abort();
    }
}

fn launch(task: &str, script: &str) -> Event {
    let pod = serde_json::json!({
        "metadata": {"name": task, "namespace": "default", "uid": "u"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "command": ["/bin/sh", "-c", script]}]}
    });
    Event {
        r#type: Some(event::Type::Launch as i32),
        launch: Some(event::Launch {
            task: Some(TaskInfo {
                name: task.into(),
                task_id: Some(TaskId::new(task)),
                data: Some(serde_json::to_vec(&pod).unwrap()),
                ..Default::default()
            }),
        }),
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

async fn wait_for(path: &Path) {
    let what = format!("{} to appear", path.display());
    wait_until(&what, WAIT, async || path.exists(), |e| *e).await;
}

fn pid_alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.split_whitespace().nth(2) != Some("Z"))
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_checkpointing_a_dropped_connection_loses_no_update() {
    let mut h = start(true).await;
    let (first, conn) = h.subscribe().await;
    assert!(first.subscribe.unwrap().unacknowledged_updates.is_empty());
    let go: PathBuf = h.sandbox.path().join("go");
    let done: PathBuf = h.sandbox.path().join("done");
    let script = format!(
        "while [ ! -e {} ]; do sleep 0.05; done; touch {}; exit 0",
        go.display(),
        done.display()
    );
    conn.send(launch("t", &script)).unwrap();
    let (starting, _) = h.next_update().await;
    assert_eq!(starting.state(), TaskState::TaskStarting);
    conn.send(ack(&starting)).unwrap();
    let (running, _) = h.next_update().await;
    assert_eq!(running.state(), TaskState::TaskRunning);

    // The agent goes away before acknowledging RUNNING, and the pod
    // finishes while it is away.
    h.down.store(true, Ordering::SeqCst);
    drop(conn);
    std::fs::write(&go, "").unwrap();
    wait_for(&done).await;
    h.down.store(false, Ordering::SeqCst);

    let (again, conn) = h.subscribe().await;
    let resent = again.subscribe.unwrap().unacknowledged_updates;
    let mut delivered: Vec<TaskStatus> = resent.into_iter().filter_map(|u| u.status).collect();
    assert_eq!(
        delivered[0].uuid, running.uuid,
        "RUNNING is resent with its own uuid"
    );
    // FINISHED arrives in the SUBSCRIBE or, if it was produced after it, as
    // an accepted UPDATE; refused attempts while the agent was down do not count.
    while !delivered
        .iter()
        .any(|s| s.state() == TaskState::TaskFinished)
    {
        let (status, accepted) = h.next_update().await;
        if accepted {
            delivered.push(status);
        }
    }
    let finished: Vec<&TaskStatus> = delivered
        .iter()
        .filter(|s| s.state() == TaskState::TaskFinished)
        .collect();
    assert_eq!(finished.len(), 1);
    for s in &delivered {
        conn.send(ack(s)).unwrap();
    }
    conn.send(Event {
        r#type: Some(event::Type::Shutdown as i32),
        ..Default::default()
    })
    .unwrap();
    let status = h.exit_status().await;
    assert!(status.success(), "exit {status:?}; stderr:\n{}", h.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_checkpointing_a_dropped_connection_stops_pods_and_exits() {
    let mut h = start(false).await;
    let (_, conn) = h.subscribe().await;
    let pidfile = h.sandbox.path().join("pid");
    // `$$$$`: Kubernetes reduces `$$` to `$` in commands, so the shell sees `$$`.
    conn.send(launch(
        "t",
        &format!(
            "echo $$$$ > {}.tmp; mv {0}.tmp {0}; exec sleep 60",
            pidfile.display()
        ),
    ))
    .unwrap();
    loop {
        let (s, _) = h.next_update().await;
        if s.state() == TaskState::TaskRunning {
            break;
        }
    }
    wait_for(&pidfile).await;
    let pid = std::fs::read_to_string(&pidfile).unwrap().trim().to_owned();
    assert!(
        pid_alive(&pid),
        "pid {pid:?}: {:?}; stderr:\n{}",
        std::fs::read_to_string(format!("/proc/{pid}/stat")),
        h.stderr()
    );
    drop(conn);
    let status = h.exit_status().await;
    assert!(
        !status.success(),
        "an executor that lost its agent exits with an error"
    );
    assert!(
        h.stderr().contains("checkpointing is off"),
        "{}",
        h.stderr()
    );
    // A signalled process dies when next scheduled: poll, bounded.
    let what = format!("container process {pid} to end with the executor");
    wait_until(&what, WAIT, async || pid_alive(&pid), |alive| !alive).await;
}
