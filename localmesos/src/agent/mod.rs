//! Agents: their records (resources, executors, child processes), their
//! sandboxes, and the [`Report`]s through which they tell the master what
//! happened.
//!
//! An agent that is not simulated runs executors and command tasks as real
//! child processes, and has its own endpoint (`http::agent`). A simulated
//! agent binds nothing and runs nothing, which keeps it to a few hundred
//! bytes plus its resources.
//!
//! # Invariant
//!
//! Nothing here knows the master: no task record, no status update queue.
//! An agent never moves a task; it runs processes and event streams and
//! reports what they did ([`Report`]), and the master applies that through
//! its task state machine (`master::reports`).

pub(crate) mod cgroups;
pub(crate) mod checkpoint;
pub(crate) mod executors;
pub(crate) mod files;
pub(crate) mod launch;
pub(crate) mod mounts;
pub(crate) mod process;
pub(crate) mod token;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use mesos::proto::{AgentId, AgentInfo, Attribute, TaskStatus, TimeInfo};
use mesos::resources::Resources;

use crate::clock::now_secs;
use crate::config::AgentConfig;
use executors::Executor;
use process::Exit;

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
    /// Recovering from its checkpoint (`--recover=reconnect`): executors
    /// may re-subscribe; their other calls get 503 until it is over.
    pub(crate) recovering: bool,
    /// Cut off from the master (partitioned) since this reading of the
    /// master's clock: it answers no ping, and its updates wait.
    pub(crate) silent_since: Option<Duration>,
}

impl Agent {
    /// A newly registered agent `id`, the `index`th of the cluster, serving
    /// `endpoint` (real agents) until `server` is aborted.
    pub(crate) fn new(
        id: AgentId,
        index: u64,
        config: AgentConfig,
        endpoint: Option<SocketAddr>,
        server: Option<tokio::task::AbortHandle>,
    ) -> Self {
        Agent {
            id,
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
            recovering: false,
            silent_since: None,
        }
    }

    /// Whether the master hears from it: not partitioned, not unreachable.
    pub(crate) fn reachable(&self) -> bool {
        self.silent_since.is_none() && !matches!(self.status, AgentStatus::Unreachable(_))
    }

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

/// Which executor: of framework `framework_id` on agent `agent_id`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ExecutorRef<'a> {
    pub(crate) agent_id: &'a str,
    pub(crate) framework_id: &'a str,
    pub(crate) executor_id: &'a str,
}

impl<'a> ExecutorRef<'a> {
    /// Executor `executor_id` of framework `framework_id` on `agent_id`.
    pub(crate) fn new(agent_id: &'a str, framework_id: &'a str, executor_id: &'a str) -> Self {
        ExecutorRef {
            agent_id,
            framework_id,
            executor_id,
        }
    }

    /// The key of [`Agent::executors`].
    pub(crate) fn key(self) -> (String, String) {
        (self.framework_id.to_owned(), self.executor_id.to_owned())
    }
}

/// What happened on an agent, for the master to apply: the only way agent
/// code changes a task. Borrowed, so reporting allocates nothing.
// A report is built and applied at once, never stored or queued: its size
// costs one move, where boxing the status would cost an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Report<'a> {
    /// The executor sent UPDATE (or replayed one it holds unacknowledged
    /// when it re-subscribed).
    Update {
        executor: ExecutorRef<'a>,
        status: TaskStatus,
    },
    /// The executor sent MESSAGE for its scheduler.
    Message {
        executor: ExecutorRef<'a>,
        data: Vec<u8>,
    },
    /// A child ended: a custom executor, or a command task's process
    /// (`executor` is then named after the task), of `container_id`.
    Exited {
        executor: ExecutorRef<'a>,
        container_id: &'a str,
        exit: Exit,
    },
    /// An executor with no process to signal (on a simulated agent) was
    /// killed: it ends as one that died of SIGKILL.
    Killed { executor: ExecutorRef<'a> },
    /// The event stream of subscription `generation` ended.
    Disconnected {
        executor: ExecutorRef<'a>,
        generation: u64,
    },
}

#[cfg(test)]
mod tests {
    /// Agent code knows nothing of the master or the HTTP layer (the
    /// one-way rule of the crate doc): it reports, the master applies. This
    /// fails if an import of either creeps back.
    #[test]
    fn agent_code_imports_neither_the_master_nor_http() {
        let files = [
            ("mod.rs", include_str!("mod.rs")),
            ("cgroups.rs", include_str!("cgroups.rs")),
            ("checkpoint.rs", include_str!("checkpoint.rs")),
            ("executors.rs", include_str!("executors.rs")),
            ("files.rs", include_str!("files.rs")),
            ("launch.rs", include_str!("launch.rs")),
            ("process.rs", include_str!("process.rs")),
        ];
        let forbidden = [
            concat!("crate::", "master"),
            concat!("crate::", "http"),
            concat!("crate::", "faults"),
        ];
        for (file, src) in files {
            for path in forbidden {
                assert!(!src.contains(path), "agent/{file} uses {path}");
            }
        }
    }
}
