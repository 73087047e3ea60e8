//! The executor each agent runs for mesopod, remembered exactly: Mesos
//! refuses a task whose executor info differs from the running executor's.

use std::sync::Arc;

use futures::future::join_all;

use super::Core;
use super::launching::Placed;

impl Core {
    /// Notes the executor info each placed task launches with on its agent,
    /// and returns the durable write of the ones that changed (one key per
    /// agent), so later pods, and a restarted mesopod, name the executor
    /// identically. The write runs with the bindings, before the ACCEPT:
    /// awaiting one write per new agent after it cost one commit each.
    /// Recording an info whose launch then fails is harmless: the info is
    /// consulted only for an agent whose offers show the executor running,
    /// and a fresh launch there overwrites it.
    pub(super) fn remember_executors(
        &mut self,
        placed: &[Placed],
    ) -> impl Future<Output = ()> + Send + use<> {
        let mut writes = Vec::new();
        for spec in placed.iter().filter_map(|p| p.task.spec.as_ref()) {
            let Some(info) = spec.executor.as_ref() else {
                continue;
            };
            let agent = &spec.agent_id.value;
            if self
                .executors
                .get(agent)
                .is_some_and(|known| Arc::ptr_eq(known, info) || **known == **info)
            {
                continue;
            }
            match serde_json::to_vec(info.as_ref()) {
                Ok(bytes) => writes.push((executor_key(agent), bytes)),
                Err(e) => tracing::warn!(error = %e, "could not encode an executor info"),
            }
            self.executors.insert(agent.clone(), Arc::clone(info));
        }
        let api = self.api.clone();
        async move {
            // Concurrent writes share the store's group commits.
            join_all(writes.into_iter().map(|(key, bytes)| {
                let api = api.clone();
                async move {
                    if let Err(e) = api.put_meta(&key, bytes).await {
                        tracing::warn!(error = %e, "could not store an executor info");
                    }
                }
            }))
            .await;
        }
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
