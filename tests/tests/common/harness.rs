//! A minimal scheduler for the executor's end-to-end tests: it subscribes to
//! a localmesos master, launches pods on the real `mesopod executor` binary,
//! and acknowledges every update it reads.

use std::collections::VecDeque;
use std::time::Duration;

use futures::StreamExt;
use localmesos::{AgentConfig, Config, LocalMesos, Timing};
use mesos::client::EventStream;
use mesos::client::{SchedulerClient, SubscriptionHandle};
use mesos::codec::Codec;
use mesos::proto::environment::Variable;
use mesos::proto::executor_info;
use mesos::proto::offer::{Operation, operation};
use mesos::proto::scheduler::{Call, Event, call, event};
use mesos::proto::{
    CommandInfo, DurationInfo, Environment, ExecutorId, ExecutorInfo, FrameworkId, FrameworkInfo,
    KillPolicy, Offer, TaskId, TaskInfo, TaskState, TaskStatus,
};
use mesos::resources::scalar;
use testkit::wait_until;

/// Bounds every wait; generous for a loaded two-core CI machine.
pub const WAIT: Duration = Duration::from_secs(30);

pub const EXECUTOR_ID: &str = "mesopod-executor";

pub struct Sched {
    pub cluster: LocalMesos,
    client: SchedulerClient,
    handle: SubscriptionHandle,
    events: EventStream<Event>,
    pub framework_id: FrameworkId,
    offers: VecDeque<Offer>,
    /// Every update read, in order.
    pub seen: Vec<TaskStatus>,
    /// Updates read while waiting for another task's, not yet consumed.
    backlog: VecDeque<TaskStatus>,
}

pub async fn start() -> Sched {
    start_with(localmesos::Security::default()).await
}

/// [`start`] with a cluster enforcing `security` (the scheduler itself
/// sends no credentials: use it with executor authentication only).
pub async fn start_with(security: localmesos::Security) -> Sched {
    testkit::init_crypto();
    let mut agent = AgentConfig::from_flags("cpus:16;mem:65536;disk:10000", "", 0).unwrap();
    agent.hostname = Some("agent-e2e".into());
    let cluster = LocalMesos::start(Config {
        agents: vec![agent],
        timing: Timing {
            allocation_interval: Duration::from_millis(50),
            status_update_retry_min: Duration::from_millis(500),
            status_update_retry_max: Duration::from_secs(2),
            executor_shutdown_grace: Duration::from_secs(3),
            ..Timing::default()
        },
        security,
        ..Config::default()
    })
    .await
    .unwrap();
    let client =
        SchedulerClient::new(vec![cluster.master_url().to_owned()], Codec::Protobuf).unwrap();
    let info = FrameworkInfo {
        user: "nobody".into(),
        name: "executor-e2e".into(),
        checkpoint: Some(true),
        failover_timeout: Some(60.0),
        ..Default::default()
    };
    let sub = client
        .subscribe(Call {
            r#type: Some(call::Type::Subscribe as i32),
            subscribe: Some(call::Subscribe {
                framework_info: Some(info),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut events = sub.events;
    let first = tokio::time::timeout(WAIT, events.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.kind(), Some(event::Type::Subscribed));
    let framework_id = first.subscribed.unwrap().framework_id.unwrap();
    Sched {
        cluster,
        client,
        handle: sub.handle,
        events,
        framework_id,
        offers: VecDeque::new(),
        seen: Vec::new(),
        backlog: VecDeque::new(),
    }
}

/// The executor every pod runs on: the freshly built `mesopod` binary.
/// Crash-loop backoff is shortened so restart tests take milliseconds.
pub fn executor_info(framework_id: &FrameworkId) -> ExecutorInfo {
    let var = |name: &str, value: &str| Variable {
        name: name.into(),
        value: Some(value.into()),
        ..Default::default()
    };
    ExecutorInfo {
        r#type: Some(executor_info::Type::Custom as i32),
        executor_id: Some(ExecutorId::new(EXECUTOR_ID)),
        framework_id: Some(framework_id.clone()),
        name: Some("mesopod executor".into()),
        command: Some(CommandInfo {
            value: Some(format!("exec '{}' executor", super::MESOPOD)),
            shell: Some(true),
            environment: Some(Environment {
                variables: vec![
                    var("MESOPOD_RESTART_BACKOFF", "100ms"),
                    var("MESOPOD_RESTART_BACKOFF_MAX", "400ms"),
                    // These tests are about the executor's protocol and
                    // supervision; containers have their own tests.
                    var("MESOPOD_CONTAINER_RUNTIME", "process"),
                    var("RUST_LOG", "info"),
                ],
            }),
            ..Default::default()
        }),
        resources: vec![scalar("cpus", 0.1, None), scalar("mem", 32.0, None)],
        ..Default::default()
    }
}

impl Sched {
    async fn next_event(&mut self) -> Event {
        tokio::time::timeout(WAIT, self.events.next())
            .await
            .expect("an event in time")
            .expect("the stream is open")
            .expect("a valid event")
    }

    async fn call(&self, call: Call) {
        let call = Call {
            framework_id: Some(self.framework_id.clone()),
            ..call
        };
        self.client.call(&self.handle, call).await.unwrap();
    }

    /// Launches a task whose `data` is `data` on the first offer.
    pub async fn launch_raw(&mut self, task_id: &str, data: Vec<u8>, grace: Option<Duration>) {
        let offer = loop {
            if let Some(o) = self.offers.pop_front() {
                break o;
            }
            if let Some(status) = self.pump().await {
                self.backlog.push_back(status);
            }
        };
        let task = TaskInfo {
            name: task_id.into(),
            task_id: Some(TaskId::new(task_id)),
            agent_id: offer.agent_id.clone(),
            resources: vec![scalar("cpus", 0.1, None), scalar("mem", 16.0, None)],
            executor: Some(executor_info(&self.framework_id)),
            data: Some(data),
            kill_policy: grace.map(|g| KillPolicy {
                grace_period: Some(DurationInfo::from_duration(g)),
            }),
            ..Default::default()
        };
        self.call(Call {
            r#type: Some(call::Type::Accept as i32),
            accept: Some(call::Accept {
                offer_ids: vec![offer.id.clone().unwrap()],
                operations: vec![Operation {
                    r#type: Some(operation::Type::Launch as i32),
                    launch: Some(operation::Launch {
                        task_infos: vec![task],
                    }),
                    ..Default::default()
                }],
                filters: None,
            }),
            ..Default::default()
        })
        .await;
        // Offers made before this ACCEPT are stale now.
        self.offers.clear();
    }

    pub async fn launch(&mut self, task_id: &str, pod: serde_json::Value) {
        self.launch_raw(task_id, serde_json::to_vec(&pod).unwrap(), None)
            .await;
    }

    /// Reads one event: offers are kept, updates acknowledged and recorded.
    async fn pump(&mut self) -> Option<TaskStatus> {
        let ev = self.next_event().await;
        match ev.kind() {
            Some(event::Type::Offers) => {
                self.offers.extend(ev.offers.unwrap().offers);
                None
            }
            Some(event::Type::Update) => {
                let status = ev.update.unwrap().status.unwrap();
                if let Some(uuid) = status.uuid.clone() {
                    self.call(Call {
                        r#type: Some(call::Type::Acknowledge as i32),
                        acknowledge: Some(call::Acknowledge {
                            agent_id: status.agent_id.clone(),
                            task_id: status.task_id.clone(),
                            uuid,
                        }),
                        ..Default::default()
                    })
                    .await;
                }
                self.seen.push(status.clone());
                Some(status)
            }
            _ => None,
        }
    }

    /// The next update of `task_id`; other tasks' updates wait their turn.
    pub async fn next_update(&mut self, task_id: &str) -> TaskStatus {
        let is_ours =
            |s: &TaskStatus| s.task_id.as_ref().map(|t| t.value.as_str()) == Some(task_id);
        if let Some(pos) = self.backlog.iter().position(is_ours) {
            return self.backlog.remove(pos).unwrap();
        }
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let Ok(pumped) = tokio::time::timeout_at(deadline, self.pump()).await else {
                let seen: Vec<String> = self
                    .seen
                    .iter()
                    .map(|s| format!("{}:{:?}", s.task_id.as_ref().unwrap().value, s.state()))
                    .collect();
                panic!(
                    "no update of {task_id} in time; seen {seen:?}; cluster {:#?}",
                    self.cluster.state_json()
                );
            };
            match pumped {
                Some(s) if is_ours(&s) => return s,
                Some(s) => self.backlog.push_back(s),
                None => {}
            }
        }
    }

    /// Updates of `task_id` up to the first in `state`; fails on another
    /// terminal state.
    pub async fn until(&mut self, task_id: &str, state: TaskState) -> TaskStatus {
        loop {
            let s = self.next_update(task_id).await;
            if s.state() == state {
                return s;
            }
            assert!(
                !s.state().is_terminal(),
                "{task_id} ended in {:?} ({:?}) while waiting for {state:?}",
                s.state(),
                s.message
            );
        }
    }

    /// Updates of `task_id` up to and including its terminal one.
    pub async fn until_terminal(&mut self, task_id: &str) -> Vec<TaskStatus> {
        let mut all = Vec::new();
        loop {
            let s = self.next_update(task_id).await;
            let done = s.state().is_terminal();
            all.push(s);
            if done {
                return all;
            }
        }
    }

    pub async fn kill(&mut self, task_id: &str, grace: Option<Duration>) {
        self.call(Call {
            r#type: Some(call::Type::Kill as i32),
            kill: Some(call::Kill {
                task_id: Some(TaskId::new(task_id)),
                agent_id: None,
                kill_policy: grace.map(|g| KillPolicy {
                    grace_period: Some(DurationInfo::from_duration(g)),
                }),
            }),
            ..Default::default()
        })
        .await;
    }

    /// The agent's `ip:port`.
    pub fn agent_endpoint(&self) -> String {
        self.cluster.state().agents[0].endpoint.unwrap().to_string()
    }

    /// Reads a file through the agent's `/files/read`, as the shim does.
    pub async fn read_file(&self, path: &str) -> String {
        let url = format!(
            "http://{}/files/read?path={path}&offset=0&length=65536",
            self.agent_endpoint()
        );
        let resp = reqwest::get(url).await.unwrap();
        assert!(resp.status().is_success(), "{}", resp.status());
        let body: serde_json::Value = resp.json().await.unwrap();
        body["data"].as_str().unwrap_or_default().to_owned()
    }

    /// Waits until `path`, read through the agent, satisfies `pred`.
    pub async fn wait_file(&self, path: &str, pred: impl Fn(&str) -> bool) -> String {
        let url = format!(
            "http://{}/files/read?path={path}&offset=0&length=65536",
            self.agent_endpoint()
        );
        let read = async || {
            let resp = reqwest::get(&url).await.ok()?;
            let body: serde_json::Value = resp.error_for_status().ok()?.json().await.ok()?;
            Some(body["data"].as_str().unwrap_or_default().to_owned())
        };
        wait_until(
            "the file to reach the expected content",
            WAIT,
            read,
            |data| data.as_deref().is_some_and(&pred),
        )
        .await
        .unwrap_or_default()
    }

    /// Sends SHUTDOWN for the executor on every agent.
    pub async fn shutdown_executor(&self) {
        let agents: Vec<String> = self
            .cluster
            .state()
            .agents
            .iter()
            .map(|a| a.id.clone())
            .collect();
        for agent in agents {
            self.call(Call {
                r#type: Some(call::Type::Shutdown as i32),
                shutdown: Some(call::Shutdown {
                    executor_id: Some(ExecutorId::new(EXECUTOR_ID)),
                    agent_id: Some(mesos::proto::AgentId::new(agent)),
                }),
                ..Default::default()
            })
            .await;
        }
    }

    /// Shuts the executor down (SHUTDOWN: it must stop its pods and exit
    /// on its own), waits for its process to go, then tears the framework
    /// down and stops the cluster.
    pub async fn finish(self) {
        let sandboxes: Vec<std::path::PathBuf> = self
            .cluster
            .state()
            .agents
            .iter()
            .flat_map(|a| a.executors.iter().filter_map(|e| e.sandbox.clone()))
            .collect();
        self.shutdown_executor().await;
        // Polled, not awaited with wait_until: on a timeout the framework and
        // the cluster are still torn down before the test fails.
        let gone = tokio::time::timeout(WAIT, async {
            loop {
                if self
                    .cluster
                    .state()
                    .agents
                    .iter()
                    .all(|a| a.executors.is_empty())
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        self.call(Call {
            r#type: Some(call::Type::Teardown as i32),
            ..Default::default()
        })
        .await;
        // Read before the cluster removes its work directory.
        let logs: Vec<String> = sandboxes
            .iter()
            .map(|d| std::fs::read_to_string(d.join("stderr")).unwrap_or_default())
            .collect();
        self.cluster.shutdown().await;
        gone.expect("the executor exited after SHUTDOWN");
        for log in logs {
            assert!(
                log.contains("mesopod executor exiting exit=Shutdown"),
                "the executor did not exit on its own after SHUTDOWN:\n{log}"
            );
        }
    }
}

/// The pod's directory, from the label every update carries.
pub fn pod_dir(status: &TaskStatus) -> String {
    status
        .labels
        .as_ref()
        .and_then(|l| l.labels.iter().find(|l| l.key == executor::POD_DIR_LABEL))
        .and_then(|l| l.value.clone())
        .expect("the pod-dir label")
}

/// The pod status JSON an update carries.
pub fn pod_status(status: &TaskStatus) -> serde_json::Value {
    serde_json::from_slice(status.data.as_deref().expect("pod status in data")).unwrap()
}

pub fn sh_pod(name: &str, restart: &str, script: &str) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"name": name, "namespace": "e2e", "uid": format!("uid-{name}")},
        "spec": {
            "restartPolicy": restart,
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["/bin/sh", "-c", script]}]
        }
    })
}
