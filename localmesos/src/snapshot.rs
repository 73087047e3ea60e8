//! A consistent, owned copy of the cluster for embedders and `/state`.

use std::net::SocketAddr;
use std::path::PathBuf;

use mesos::proto::{Attribute, TaskState};
use mesos::resources::Resources;

use crate::agent::AgentStatus;
use crate::master::State;

/// The whole cluster at one instant.
#[derive(Debug, Clone)]
pub struct ClusterState {
    /// The master's id (changes never; restarts keep it).
    pub master_id: String,
    /// True while scheduler calls get 503.
    pub recovering: bool,
    /// Every agent, in id order.
    pub agents: Vec<AgentSnapshot>,
    /// Known frameworks, in id order.
    pub frameworks: Vec<FrameworkSnapshot>,
    /// Ids of removed (torn down or timed out) frameworks.
    pub removed_frameworks: Vec<String>,
}

/// One agent.
#[derive(Debug, Clone)]
pub struct AgentSnapshot {
    /// The agent id.
    pub id: String,
    /// Its hostname.
    pub hostname: String,
    /// `active`, `re-registering`, `unreachable` or `gone`.
    pub status: &'static str,
    /// Its executor endpoint (`None` when simulated or gone).
    pub endpoint: Option<SocketAddr>,
    /// Whether tasks are simulated.
    pub simulated: bool,
    /// Everything it has.
    pub total: Resources,
    /// What tasks and executors hold.
    pub used: Resources,
    /// What outstanding offers hold.
    pub offered: Resources,
    /// Its attributes.
    pub attributes: Vec<Attribute>,
    /// Its executors.
    pub executors: Vec<ExecutorSnapshot>,
}

/// One executor (custom, or the command executor of a command task).
#[derive(Debug, Clone)]
pub struct ExecutorSnapshot {
    /// The framework.
    pub framework_id: String,
    /// The executor id (the task id for command tasks).
    pub executor_id: String,
    /// True for `TaskInfo.executor` executors.
    pub custom: bool,
    /// Whether it has an open subscription.
    pub subscribed: bool,
    /// Its sandbox directory (real agents only).
    pub sandbox: Option<PathBuf>,
    /// Its process id, if one runs.
    pub pid: Option<u32>,
    /// Its live tasks.
    pub tasks: Vec<String>,
}

/// One framework.
#[derive(Debug, Clone)]
pub struct FrameworkSnapshot {
    /// The framework id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its roles.
    pub roles: Vec<String>,
    /// Whether a stream is open.
    pub connected: bool,
    /// Roles it suppressed.
    pub suppressed_roles: Vec<String>,
    /// Number of outstanding offers.
    pub offers: usize,
    /// Live tasks and terminal ones with unacknowledged updates.
    pub tasks: Vec<TaskSnapshot>,
    /// Finished tasks, oldest first (bounded).
    pub completed_tasks: Vec<TaskSnapshot>,
}

/// One task.
#[derive(Debug, Clone)]
pub struct TaskSnapshot {
    /// The task id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its agent.
    pub agent_id: String,
    /// Its executor (the task id for command tasks).
    pub executor_id: String,
    /// Its latest state.
    pub state: TaskState,
    /// Its resources.
    pub resources: Resources,
    /// Reliable updates not yet acknowledged by the scheduler.
    pub unacknowledged_updates: usize,
}

impl ClusterState {
    /// A task of any framework by id.
    pub fn task(&self, task_id: &str) -> Option<&TaskSnapshot> {
        self.frameworks
            .iter()
            .flat_map(|f| f.tasks.iter().chain(f.completed_tasks.iter()))
            .find(|t| t.id == task_id)
    }
}

fn task_snapshot(t: &crate::master::task::Task) -> TaskSnapshot {
    TaskSnapshot {
        id: t.id().to_owned(),
        name: t.info.name.clone(),
        agent_id: t.agent_id.value.clone(),
        executor_id: t.executor_id.value.clone(),
        state: t.state,
        resources: t.resources.clone(),
        unacknowledged_updates: t.pending.len(),
    }
}

pub(crate) fn take(st: &State) -> ClusterState {
    let agents = st
        .agents
        .values()
        .map(|a| AgentSnapshot {
            id: a.id.value.clone(),
            hostname: a.hostname.clone(),
            status: a.status.name(),
            endpoint: if a.status == AgentStatus::Gone {
                None
            } else {
                a.endpoint
            },
            simulated: a.simulated,
            total: a.total.clone(),
            used: a.used.clone(),
            offered: a.offered.clone(),
            attributes: a.attributes.clone(),
            executors: {
                let mut v: Vec<ExecutorSnapshot> = a
                    .executors
                    .iter()
                    .map(|((f, e), ex)| ExecutorSnapshot {
                        framework_id: f.clone(),
                        executor_id: e.clone(),
                        custom: ex.custom,
                        subscribed: ex.sub.is_some(),
                        sandbox: ex.sandbox.clone(),
                        pid: ex.process.and_then(|p| p.pid),
                        tasks: ex.tasks.iter().cloned().collect(),
                    })
                    .collect();
                v.sort_by(|x, y| {
                    (&x.framework_id, &x.executor_id).cmp(&(&y.framework_id, &y.executor_id))
                });
                v
            },
        })
        .collect();
    let mut frameworks: Vec<FrameworkSnapshot> = st
        .frameworks
        .values()
        .map(|f| {
            let mut tasks: Vec<TaskSnapshot> = f.tasks.values().map(task_snapshot).collect();
            tasks.sort_by(|a, b| a.id.cmp(&b.id));
            FrameworkSnapshot {
                id: f.id.value.clone(),
                name: f.info.name.clone(),
                roles: f.roles(),
                connected: f.conn.is_some(),
                suppressed_roles: f.suppressed.iter().cloned().collect(),
                offers: st
                    .offers
                    .values()
                    .filter(|o| o.framework_id == f.id.value)
                    .count(),
                tasks,
                completed_tasks: f.completed.iter().map(task_snapshot).collect(),
            }
        })
        .collect();
    frameworks.sort_by(|a, b| a.id.cmp(&b.id));
    ClusterState {
        master_id: st.master_id.clone(),
        recovering: st.recovering,
        agents,
        frameworks,
        removed_frameworks: st.removed_frameworks.iter().map(|f| f.id.clone()).collect(),
    }
}
