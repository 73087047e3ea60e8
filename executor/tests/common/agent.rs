//! An agent in the test's hands for the executor loop: the calls the
//! executor makes reach the test, and the test sends the events.

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

pub const WAIT: Duration = Duration::from_secs(20);

pub type Conn = UnboundedSender<Result<Event, AgentError>>;

/// An agent in the test's hands: every SUBSCRIBE hands the test the call and
/// the sending end of its event stream; every other call is recorded.
#[derive(Clone)]
pub struct FakeAgent {
    subscribes: UnboundedSender<(Call, Conn)>,
    calls: UnboundedSender<Call>,
    /// The executor's node-status messages, kept apart from its other calls.
    node_status: UnboundedSender<Call>,
    /// Calls made while the agent was unreachable.
    lost: UnboundedSender<Call>,
    reachable: Arc<AtomicBool>,
}

/// Whether the call is the executor's periodic node status.
fn is_node_status(call: &Call) -> bool {
    call.message
        .as_ref()
        .is_some_and(|m| m.data == executor::NODE_STATUS_MESSAGE)
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
        let node_status = is_node_status(&call);
        if !self.reachable.load(Ordering::SeqCst) {
            if !node_status {
                self.lost.send(call).unwrap();
            }
            return Err(AgentError::Unreachable("connection refused".into()));
        }
        if node_status {
            let _ = self.node_status.send(call);
        } else {
            self.calls.send(call).unwrap();
        }
        Ok(())
    }
}

pub struct Harness {
    pub subscribes: UnboundedReceiver<(Call, Conn)>,
    pub calls: UnboundedReceiver<Call>,
    pub node_status: UnboundedReceiver<Call>,
    pub lost: UnboundedReceiver<Call>,
    pub reachable: Arc<AtomicBool>,
    pub run: JoinHandle<Result<Exit, ExecutorError>>,
    pub _sandbox: tempfile::TempDir,
}

pub fn start(checkpoint: bool) -> Harness {
    start_with(checkpoint, executor::NODE_STATUS_UPDATE_FREQUENCY)
}

/// [`start`], reporting the node's status every `node_status`.
pub fn start_with(checkpoint: bool, node_status: Duration) -> Harness {
    testkit::init_crypto();
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
    let (status_tx, node_status_rx) = unbounded_channel();
    let (lost_tx, lost) = unbounded_channel();
    let reachable = Arc::new(AtomicBool::new(true));
    let agent = FakeAgent {
        subscribes: sub_tx,
        calls: call_tx,
        node_status: status_tx,
        lost: lost_tx,
        reachable: reachable.clone(),
    };
    let options = Options {
        restart_backoff: Backoff {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(200),
        },
        registration_timeout: Duration::from_secs(5),
        containers: Default::default(),
        node_status_update_frequency: node_status,
        ..Options::default()
    };
    let run = tokio::spawn(Executor::new(env, agent, options).run());
    Harness {
        subscribes,
        calls,
        node_status: node_status_rx,
        lost,
        reachable,
        run,
        _sandbox: sandbox,
    }
}

impl Harness {
    pub async fn subscribe(&mut self) -> (Call, Conn) {
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

    pub async fn next_status(&mut self) -> TaskStatus {
        let call = tokio::time::timeout(WAIT, self.calls.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(call.kind(), Some(call::Type::Update));
        assert_eq!(call.executor_id, Some(ExecutorId::new("ex")));
        call.update.unwrap().status.unwrap()
    }

    pub async fn status_until(&mut self, state: TaskState) -> TaskStatus {
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

pub fn launch(task: &str, pod: serde_json::Value) -> Event {
    launch_task(TaskInfo {
        name: task.into(),
        task_id: Some(TaskId::new(task)),
        data: Some(serde_json::to_vec(&pod).unwrap()),
        ..Default::default()
    })
}

pub fn launch_task(task: TaskInfo) -> Event {
    Event {
        r#type: Some(event::Type::Launch as i32),
        launch: Some(event::Launch { task: Some(task) }),
        ..Default::default()
    }
}

pub fn ack(status: &TaskStatus) -> Event {
    Event {
        r#type: Some(event::Type::Acknowledged as i32),
        acknowledged: Some(event::Acknowledged {
            task_id: status.task_id.clone(),
            uuid: status.uuid.clone().unwrap(),
        }),
        ..Default::default()
    }
}

pub fn simple_pod(name: &str, script: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": name, "namespace": "default", "uid": "u1"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "command": ["/bin/sh", "-c", script]}]}
    })
}

pub fn shutdown() -> Event {
    Event {
        r#type: Some(event::Type::Shutdown as i32),
        ..Default::default()
    }
}

/// What the executor loop returned, bounded by [`WAIT`].
pub async fn ended(run: JoinHandle<Result<Exit, ExecutorError>>) -> Result<Exit, ExecutorError> {
    tokio::time::timeout(WAIT, run)
        .await
        .expect("the executor loop ends in time")
        .expect("the executor loop does not panic")
}
