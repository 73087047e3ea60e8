//! The executor each agent runs for mesopod, remembered exactly: Mesos
//! refuses a task whose executor info differs from the running executor's.

use std::sync::Arc;

use super::Core;
use super::schedule::Placed;

impl Core {
    /// Records the executor info a launch used on its agent, durably (one
    /// key per agent), so later pods, and a restarted mesopod, name the
    /// executor identically.
    pub(super) async fn remember_executor(&mut self, tasks: &[Placed]) {
        let Some(spec) = tasks.first().and_then(|p| p.task.spec.clone()) else {
            return;
        };
        let Some(info) = spec.executor.clone() else {
            return;
        };
        let agent = spec.agent_id.value.clone();
        if self
            .executors
            .get(&agent)
            .is_some_and(|known| **known == info)
        {
            return;
        }
        match serde_json::to_vec(&info) {
            Ok(bytes) => {
                if let Err(e) = self.api.put_meta(&executor_key(&agent), bytes).await {
                    tracing::warn!(error = %e, "could not store an executor info");
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not encode an executor info"),
        }
        self.executors.insert(agent, Arc::new(info));
    }

    /// The info the agent's running executor was launched with: remembered,
    /// or stored by an earlier mesopod.
    pub(super) fn executor_on(&mut self, agent: &str) -> Option<Arc<mesos::proto::ExecutorInfo>> {
        if let Some(info) = self.executors.get(agent) {
            return Some(info.clone());
        }
        let raw = self.api.get_meta(&executor_key(agent))?;
        let info = Arc::new(serde_json::from_slice::<mesos::proto::ExecutorInfo>(&raw).ok()?);
        self.executors.insert(agent.to_owned(), info.clone());
        Some(info)
    }
}

/// The meta key of the executor info launched on `agent`.
fn executor_key(agent: &str) -> String {
    format!("{}/{agent}", super::EXECUTORS_KEY)
}
