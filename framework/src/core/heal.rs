//! An agent back from a partition. Mesos (≥ 1.5) tells every framework
//! each of its tasks' state with REASON_AGENT_REREGISTERED; mesopod then
//! reconciles that agent's tasks explicitly and asks its executor to report
//! every pod's status again ([`executor::RESEND_STATUS_MESSAGE`]), since
//! the master's update carries no pod status and the pods' readiness must
//! come back within seconds, not at the next implicit reconciliation.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use mesos::proto::scheduler::{Call, call};
use mesos::proto::{AgentId, TaskStatus};
use registry::{PodTask, Registry};

use super::Core;
use super::effect::{Effect, Reply};
use super::launching::KillReason;
use crate::launch::grace_period;

/// One heal is handled once, although every task of the agent reports it.
const SAME_HEAL: Duration = Duration::from_secs(5);

impl Core {
    /// `status` says its agent re-registered after a partition.
    pub(super) fn on_agent_reregistered(&mut self, status: &TaskStatus, now: SystemTime) {
        let Some(agent) = status.agent_id.as_ref().map(|a| a.value.clone()) else {
            return;
        };
        let recent = self
            .subscription
            .healed
            .get(&agent)
            .and_then(|t| now.duration_since(*t).ok())
            .is_some_and(|d| d < SAME_HEAL);
        if recent {
            return;
        }
        self.subscription.healed.insert(agent.clone(), now);
        let on_agent = self.registry.list(&|t: &PodTask| {
            t.is_live() && t.spec.as_ref().is_some_and(|s| s.agent_id.value == agent)
        });
        tracing::info!(%agent, tasks = on_agent.len(), "agent back from a partition: reconciling its tasks");
        let executors: BTreeSet<String> = on_agent
            .iter()
            .filter_map(|t| t.spec.as_ref()?.executor_id().map(|e| e.value.clone()))
            .collect();
        let tasks = on_agent
            .iter()
            .map(|t| call::reconcile::Task {
                task_id: Some(t.id.clone()),
                agent_id: Some(AgentId::new(agent.clone())),
            })
            .collect();
        let reconcile = Call {
            r#type: Some(call::Type::Reconcile as i32),
            reconcile: Some(call::Reconcile { tasks }),
            ..Default::default()
        };
        self.emit(Effect::Call(reconcile, Reply::None));
        // KILLs the master could not pass on while the agent was
        // unreachable (it answered TASK_UNREACHABLE) go again now, not at
        // the next retry.
        let killing: Vec<&PodTask> = on_agent
            .iter()
            .filter(|t| self.launching.killing.contains_key(&t.id))
            .collect();
        for task in killing {
            let why = self
                .launching
                .reasons
                .get(&task.id)
                .cloned()
                .unwrap_or(KillReason {
                    reason: "Killed".into(),
                    message: "killed by mesopod".into(),
                });
            self.kill(task, grace_period(task), why, now);
        }
        for executor in executors {
            let message = Call {
                r#type: Some(call::Type::Message as i32),
                message: Some(call::Message {
                    agent_id: Some(AgentId::new(agent.clone())),
                    executor_id: Some(executor.into()),
                    data: executor::RESEND_STATUS_MESSAGE.to_vec(),
                }),
                ..Default::default()
            };
            self.emit(Effect::Call(message, Reply::None));
        }
    }
}
