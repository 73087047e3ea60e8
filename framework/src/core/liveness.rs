//! Executor liveness, judged as kube-controller-manager's node lifecycle
//! controller judges kubelets: an agent's executor says it is alive every
//! `--node-status-update-frequency` (10 s, [`executor::NODE_STATUS_MESSAGE`]
//! through Mesos), and one not heard from for
//! `--node-monitor-grace-period` (40 s) makes its Node NotReady:
//!
//! - the Node's `Ready` condition goes `Unknown`, reason
//!   `NodeStatusUnknown`, "Kubelet stopped posting node status.", with the
//!   `node.kubernetes.io/unreachable:NoSchedule` taint, and no pod is
//!   placed on the agent meanwhile;
//! - every pod running there gets `Ready=False` and a `NodeNotReady`
//!   event, as the node lifecycle controller's `MarkPodsNotReady` does. The
//!   phase and container statuses stay what the executor last said.
//!
//! When the executor is heard again, the Node is Ready, and the executor is
//! asked to report every pod again ([`executor::RESEND_STATUS_MESSAGE`]),
//! which makes each pod's conditions true again.
//!
//! Only an agent where a pod of ours runs needs an executor, and only an
//! executor this core has heard at least once is judged: one that never
//! reports (a simulated agent's, or an executor from before reports
//! existed, still running after an upgrade) would otherwise make a healthy
//! Node NotReady. Time is the core's: a restarted mesopod, or a new
//! leader, gives every executor a full grace period from when it first
//! hears it, as the node lifecycle controller uses its own observation
//! times. So an executor already hung when this core started is judged
//! only once it has been heard (a limit, for now).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::SystemTime;

use mesos::proto::scheduler::{Call, call, event};
use mesos::proto::{AgentId, ExecutorId};
use registry::{PodTask, Registry, State};

use super::Core;
use super::effect::{Effect, Reply, Write};
use crate::objects::{PodRef, event_about};

/// kube-controller-manager's `--node-monitor-grace-period` default.
pub const NODE_MONITOR_GRACE_PERIOD: std::time::Duration = std::time::Duration::from_secs(40);

/// How often the sweep looks for quiet executors
/// (kube-controller-manager's `--node-monitor-period`): a look lists every
/// running task, too much for every sweep at tens of thousands of pods.
const NODE_MONITOR_PERIOD: std::time::Duration = std::time::Duration::from_secs(5);

/// What the core knows of each agent's executor.
#[derive(Debug, Default)]
pub(crate) struct Liveness {
    /// When the sweep last looked.
    checked: Option<SystemTime>,
    /// When each agent's executor was last heard from.
    heard: HashMap<String, SystemTime>,
    /// The agents whose Node is NotReady, with the executor to ask for a
    /// report once heard again.
    not_ready: HashSet<String>,
}

impl Liveness {
    /// Whether the agent's Node is NotReady now (no pod is placed there).
    pub(crate) fn is_not_ready(&self, agent: &str) -> bool {
        self.not_ready.contains(agent)
    }
}

impl Core {
    /// A message from an executor: its agent's executor is alive.
    pub(super) fn on_executor_message(&mut self, message: &event::Message, now: SystemTime) {
        let Some(agent) = message.agent_id.as_ref().map(|a| a.value.clone()) else {
            return;
        };
        self.liveness.heard.insert(agent.clone(), now);
        if self.liveness.not_ready.remove(&agent) {
            tracing::info!(%agent, "the agent's executor is heard again: its Node is Ready");
            self.write_readiness(&agent, true, now);
            if let Some(executor) = &message.executor_id {
                self.ask_to_report(&agent, executor);
            }
        }
    }

    /// The sweep's part: Nodes whose executor went quiet become NotReady,
    /// and one that no pod needs any more is Ready again.
    pub(super) fn check_liveness(&mut self, now: SystemTime) {
        let grace = self.config.node_monitor_grace_period;
        let period = NODE_MONITOR_PERIOD.min(grace / 2);
        let due = (self.liveness.checked)
            .is_none_or(|t| now.duration_since(t).unwrap_or_default() >= period);
        if !due {
            return;
        }
        self.liveness.checked = Some(now);
        let mut running: BTreeMap<String, Vec<PodTask>> = BTreeMap::new();
        for task in self.registry.list(&|t: &PodTask| t.state == State::Running) {
            if let Some(agent) = task.spec.as_ref().map(|s| s.agent_id.value.clone()) {
                running.entry(agent).or_default().push(task);
            }
        }
        // What was heard of an executor no pod needs any more is stale by
        // the time one does again: it is judged from its next report.
        (self.liveness.heard).retain(|agent, _| running.contains_key(agent));
        let idle: Vec<String> = (self.liveness.not_ready.iter())
            .filter(|a| !running.contains_key(*a))
            .cloned()
            .collect();
        for agent in idle {
            self.liveness.not_ready.remove(&agent);
            self.write_readiness(&agent, true, now);
        }
        for (agent, tasks) in running {
            let Some(&since) = self.liveness.heard.get(&agent) else {
                continue;
            };
            let quiet = now.duration_since(since).unwrap_or_default();
            if quiet <= grace || self.liveness.not_ready.contains(&agent) {
                continue;
            }
            tracing::warn!(%agent, quiet_s = quiet.as_secs(), pods = tasks.len(), "the agent's executor stopped reporting: its Node is NotReady");
            self.liveness.not_ready.insert(agent.clone());
            self.write_readiness(&agent, false, now);
            let mut writes = Vec::with_capacity(2 * tasks.len());
            for task in &tasks {
                let key = task.pod_key();
                writes.push(Write::PodNotReady(key.clone(), now));
                let about = PodRef {
                    namespace: &key.namespace,
                    name: &key.name,
                    uid: Some(key.uid.as_str()).filter(|u| !u.is_empty()),
                    resource_version: None,
                };
                let event = event_about(
                    &about,
                    "Warning",
                    "NodeNotReady",
                    "Node is not ready".into(),
                    now,
                );
                writes.push(Write::Event(Box::new(event)));
            }
            self.emit(Effect::Store(writes));
        }
    }

    /// Writes the agent's Node as Ready or NotReady.
    fn write_readiness(&mut self, agent: &str, ready: bool, now: SystemTime) {
        if let Some(node) = self.agents.set_ready(agent, ready, now) {
            self.emit(Effect::Store(vec![Write::Node(Box::new(node))]));
        }
    }

    /// Asks the executor to report every pod's status again.
    fn ask_to_report(&mut self, agent: &str, executor: &ExecutorId) {
        let message = Call {
            r#type: Some(call::Type::Message as i32),
            message: Some(call::Message {
                agent_id: Some(AgentId::new(agent)),
                executor_id: Some(executor.clone()),
                data: executor::RESEND_STATUS_MESSAGE.to_vec(),
            }),
            ..Default::default()
        };
        self.emit(Effect::Call(message, Reply::None));
    }
}
