//! Agents: their resources, their executors, their own HTTP endpoint
//! (`/api/v1/executor` and `/files/*`), and the agent-side faults.
//!
//! An agent that is not simulated binds `127.0.0.1:0` and runs executors
//! and command tasks as real child processes. A simulated agent binds
//! nothing and runs nothing: it moves tasks itself, which keeps it to a few
//! hundred bytes plus its resources.

pub(crate) mod api;
pub(crate) mod executors;
pub(crate) mod files;
pub(crate) mod launch;
pub(crate) mod process;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use mesos::proto::task_status::Reason;
use mesos::proto::{AgentId, AgentInfo, Attribute, TaskState, TimeInfo};
use mesos::resources::Resources;

use crate::config::AgentConfig;
use crate::error::Error;
use crate::master::tasks::{self, master_status};
use crate::master::{Shared, State, allocator, now_secs};
use executors::Executor;

/// Where an agent stands with the master.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum AgentStatus {
    /// Registered and offered.
    Active,
    /// After a master restart, until it re-registers: explicit
    /// reconciliation of its tasks gets no answer.
    Reregistering,
    /// Partitioned away (since that time).
    Unreachable(TimeInfo),
    /// Removed by the operator, for good.
    Gone,
}

impl AgentStatus {
    pub(crate) fn name(self) -> &'static str {
        match self {
            AgentStatus::Active => "active",
            AgentStatus::Reregistering => "re-registering",
            AgentStatus::Unreachable(_) => "unreachable",
            AgentStatus::Gone => "gone",
        }
    }
}

/// One agent.
pub(crate) struct Agent {
    pub(crate) id: AgentId,
    pub(crate) hostname: String,
    pub(crate) attributes: Vec<Attribute>,
    pub(crate) total: Resources,
    /// Held by tasks and executors (unallocated form).
    pub(crate) used: Resources,
    /// In outstanding offers (unallocated form).
    pub(crate) offered: Resources,
    pub(crate) status: AgentStatus,
    pub(crate) simulated: bool,
    pub(crate) task_duration: Option<Duration>,
    /// The executor endpoint (`None` for simulated agents).
    pub(crate) endpoint: Option<SocketAddr>,
    pub(crate) server: Option<tokio::task::AbortHandle>,
    /// Keyed by (framework id, executor id).
    pub(crate) executors: HashMap<(String, String), Executor>,
    pub(crate) registered_time: f64,
}

impl Agent {
    /// What neither tasks nor offers hold.
    pub(crate) fn available(&self) -> Resources {
        &(&self.total - &self.used) - &self.offered
    }

    pub(crate) fn info(&self) -> AgentInfo {
        AgentInfo {
            hostname: self.hostname.clone(),
            port: self.endpoint.map(|e| i32::from(e.port())),
            resources: self.total.to_protos(),
            attributes: self.attributes.clone(),
            id: Some(self.id.clone()),
        }
    }

    /// `slave(1)@127.0.0.1:port`, the libprocess pid Mesos shows in `/state`.
    pub(crate) fn pid(&self) -> String {
        match self.endpoint {
            Some(e) => format!("slave(1)@{e}"),
            None => format!("slave(1)@simulated:{}", self.hostname),
        }
    }
}

/// Registers a new agent; real agents bind their endpoint first.
pub(crate) async fn add(cx: &Arc<Shared>, config: AgentConfig) -> Result<AgentId, Error> {
    let (index, master_id) = {
        let mut st = cx.lock();
        let i = st.next_agent;
        st.next_agent += 1;
        (i, st.master_id.clone())
    };
    let id = AgentId::new(format!("{master_id}-S{index}"));
    let (endpoint, server) = if config.simulated {
        (None, None)
    } else {
        let (addr, handle) = api::serve(cx, id.clone()).await?;
        (Some(addr), Some(handle))
    };
    let agent = Agent {
        id: id.clone(),
        hostname: config.hostname.unwrap_or_else(|| format!("agent-{index}")),
        attributes: config.attributes,
        total: config.resources.unallocated(),
        used: Resources::new(),
        offered: Resources::new(),
        status: AgentStatus::Active,
        simulated: config.simulated,
        task_duration: config.task_duration,
        endpoint,
        server,
        executors: HashMap::new(),
        registered_time: now_secs(),
    };
    cx.lock().agents.insert(id.value.clone(), agent);
    cx.allocate_now.notify_one();
    Ok(id)
}

fn agent_mut<'a>(st: &'a mut State, id: &str) -> Result<&'a mut Agent, Error> {
    st.agents
        .get_mut(id)
        .ok_or_else(|| Error::UnknownAgent(id.to_owned()))
}

/// Partitions an agent: its offers are rescinded, its tasks become
/// TASK_UNREACHABLE for partition-aware frameworks and TASK_LOST for the
/// others (master-generated, REASON_AGENT_REMOVED... as Mesos marks
/// unreachable agents). Processes keep running.
pub(crate) fn partition(cx: &Shared, st: &mut State, id: &str) -> Result<(), Error> {
    let agent = agent_mut(st, id)?;
    if agent.status != AgentStatus::Active && agent.status != AgentStatus::Reregistering {
        return Err(Error::AgentState {
            agent: id.to_owned(),
            state: agent.status.name(),
            what: "partition",
        });
    }
    let since = TimeInfo {
        nanoseconds: (now_secs() * 1e9) as i64,
    };
    agent.status = AgentStatus::Unreachable(since);
    allocator::rescind_agent_offers(st, id);
    let agent_id = AgentId::new(id);
    for fw in st.frameworks.values_mut() {
        let aware = fw.partition_aware();
        let mut updates = Vec::new();
        for task in fw.tasks.values_mut() {
            if task.agent_id.value != id || task.state.is_terminal() {
                continue;
            }
            task.before_partition = Some(task.state);
            task.state = TaskState::TaskUnreachable;
            task.unreachable_time = Some(since);
            let state = if aware {
                TaskState::TaskUnreachable
            } else {
                TaskState::TaskLost
            };
            let mut status = master_status(
                task.info.task_id.as_ref().unwrap_or(&Default::default()),
                Some(&agent_id),
                state,
                Reason::ReasonAgentRemoved,
                format!("Agent {id} is unreachable"),
            );
            status.unreachable_time = Some(since);
            updates.push(status);
        }
        for u in updates {
            fw.send_update(u);
        }
    }
    let _ = cx;
    Ok(())
}

/// Heals a partition: the agent re-registers. Tasks of partition-aware
/// frameworks resume their state (reconciliation shows it); tasks of the
/// others were already reported LOST, so the agent kills them, as Mesos
/// shuts down non-partition-aware frameworks on a re-registering agent.
pub(crate) fn heal(cx: &Shared, st: &mut State, id: &str) -> Result<(), Error> {
    let agent = agent_mut(st, id)?;
    if !matches!(agent.status, AgentStatus::Unreachable(_)) {
        return Err(Error::AgentState {
            agent: id.to_owned(),
            state: agent.status.name(),
            what: "heal",
        });
    }
    agent.status = AgentStatus::Active;
    let mut doomed_tasks = Vec::new();
    for fw in st.frameworks.values_mut() {
        let aware = fw.partition_aware();
        for task in fw.tasks.values_mut() {
            if task.agent_id.value != id {
                continue;
            }
            if let Some(before) = task.before_partition.take() {
                task.unreachable_time = None;
                if task.state != TaskState::TaskUnreachable {
                    // It ended while partitioned; that update stands.
                } else if aware {
                    task.state = before;
                } else {
                    // Already reported LOST: it ends here, silently.
                    task.state = TaskState::TaskLost;
                    task.pending.clear();
                    doomed_tasks.push((
                        fw.id.value.clone(),
                        task.id().to_owned(),
                        task.executor_id.value.clone(),
                        task.resources.clone(),
                    ));
                }
            }
        }
    }
    // Updates held during the partition go out now.
    for fw in st.frameworks.values() {
        for task in fw.tasks.values() {
            if task.agent_id.value == id
                && let Some(head) = task.pending.front()
            {
                fw.send_update(head.clone());
            }
        }
    }
    for (fw, task_id, exec, resources) in doomed_tasks {
        if let Some(agent) = st.agents.get_mut(id) {
            agent.used -= &resources;
        }
        executors::shutdown(cx, st, id, &fw, &exec, true);
        if let Some(f) = st.frameworks.get_mut(&fw)
            && let Some(t) = f.tasks.remove(&task_id)
        {
            f.completed.push_back(t);
        }
    }
    cx.allocate_now.notify_one();
    Ok(())
}

/// Removes an agent for good (operator removal): its tasks become
/// TASK_GONE_BY_OPERATOR (TASK_LOST without PARTITION_AWARE), its processes
/// are killed and its resources leave the cluster.
pub(crate) fn remove(cx: &Shared, st: &mut State, id: &str) -> Result<(), Error> {
    let agent = agent_mut(st, id)?;
    if agent.status == AgentStatus::Gone {
        return Err(Error::AgentState {
            agent: id.to_owned(),
            state: "gone",
            what: "remove",
        });
    }
    agent.status = AgentStatus::Gone;
    if let Some(server) = agent.server.take() {
        server.abort();
    }
    allocator::rescind_agent_offers(st, id);
    let agent_id = AgentId::new(id);
    let keys: Vec<(String, String)> = st
        .agents
        .get(id)
        .map(|a| a.executors.keys().cloned().collect())
        .unwrap_or_default();
    for (fw, ex) in &keys {
        executors::kill_process_only(st, id, fw, ex);
    }
    if let Some(agent) = st.agents.get_mut(id) {
        agent.executors.clear();
        agent.used = Resources::new();
    }
    let fw_ids: Vec<String> = st.frameworks.keys().cloned().collect();
    for fw_id in fw_ids {
        let Some(fw) = st.frameworks.get_mut(&fw_id) else {
            continue;
        };
        let aware = fw.partition_aware();
        let on_agent: Vec<String> = fw
            .tasks
            .iter()
            .filter(|(_, t)| t.agent_id.value == id)
            .map(|(k, _)| k.clone())
            .collect();
        for task_id in on_agent {
            let Some(task) = fw.tasks.get_mut(&task_id) else {
                continue;
            };
            let was_terminal = task.state.is_terminal();
            task.state = TaskState::TaskGoneByOperator;
            task.pending.clear();
            if !was_terminal {
                let state = if aware {
                    TaskState::TaskGoneByOperator
                } else {
                    TaskState::TaskLost
                };
                let status = master_status(
                    task.info.task_id.as_ref().unwrap_or(&Default::default()),
                    Some(&agent_id),
                    state,
                    Reason::ReasonAgentRemovedByOperator,
                    format!("Agent {id} was removed by the operator"),
                );
                fw.send_update(status);
            }
        }
        let ids: Vec<String> = fw.tasks.keys().cloned().collect();
        for t in ids {
            tasks::complete_if_done(st, &fw_id, &t);
        }
    }
    let _ = cx;
    Ok(())
}
