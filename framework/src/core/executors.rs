//! A scheduler that subscribes (mesopod restarted, or a new leader) is new to the
//! executors already running its tasks: they registered their node keys and streaming
//! endpoints with the scheduler before it, whose API, node keys and stream key are gone.
//! So, on every SUBSCRIBED, each executor of a live task is asked to register again
//! ([`executor::apiclient::protocol::REGISTER_AGAIN_MESSAGE`]); exec, port-forward and
//! the executor's reads of ConfigMaps and Secrets then work as soon as it answers,
//! without waiting for a failed call. A message the master drops (an executor that is
//! not subscribed to its agent yet) is made up for by the executor itself, which sends
//! its key on every SUBSCRIBED to its agent and until it is answered.

use std::collections::BTreeSet;

use mesos::proto::AgentId;
use mesos::proto::scheduler::{Call, call};
use registry::{Flag, PodTask, Registry};

use super::Core;
use super::effect::{Effect, Reply};

impl Core {
    /// Asks every executor of a live, launched task to send its node key again.
    pub(super) fn ask_executors_to_register(&mut self) {
        let executors: BTreeSet<(String, String)> = self
            .registry
            .list(&|t: &PodTask| t.is_live() && t.has(Flag::Launched))
            .iter()
            .filter_map(|t| {
                let spec = t.spec.as_ref()?;
                Some((
                    spec.agent_id.value.clone(),
                    spec.executor_id()?.value.clone(),
                ))
            })
            .collect();
        if !executors.is_empty() {
            tracing::info!(
                executors = executors.len(),
                "asking the executors of running pods to register with this scheduler"
            );
        }
        for (agent, executor) in executors {
            let message = Call {
                r#type: Some(call::Type::Message as i32),
                message: Some(call::Message {
                    agent_id: Some(AgentId::new(agent)),
                    executor_id: Some(executor.into()),
                    data: executor::apiclient::protocol::REGISTER_AGAIN_MESSAGE.to_vec(),
                }),
                ..Default::default()
            };
            self.emit(Effect::Call(message, Reply::None));
        }
    }
}
