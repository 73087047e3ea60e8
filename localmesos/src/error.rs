//! Errors of the embedding API and the admin routes.

use mesos::resources::ResourceError;

/// What can go wrong when starting or steering a local cluster.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A socket could not be bound or a directory created.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Bad resources or attributes in an agent's configuration.
    #[error("invalid agent configuration: {0}")]
    Resources(#[from] ResourceError),
    /// An agent's endpoint could not be bound (a recovered agent needs its
    /// old port back, so its executors find it).
    #[error("cannot bind the endpoint of agent '{agent}' (port {port}; 0 = any): {source}")]
    AgentBind {
        /// The agent's hostname.
        agent: String,
        /// The port asked for.
        port: u16,
        /// Why.
        source: std::io::Error,
    },
    /// No agent has this id.
    #[error("unknown agent '{0}'")]
    UnknownAgent(String),
    /// No such executor on that agent.
    #[error("unknown executor '{executor}' of framework '{framework}' on agent '{agent}'")]
    UnknownExecutor {
        /// The agent.
        agent: String,
        /// The framework.
        framework: String,
        /// The executor.
        executor: String,
    },
    /// The agent's machine is DOWN for maintenance: Mesos refuses its
    /// registration until STOP_MAINTENANCE brings the machine up.
    #[error("agent '{0}' cannot register: its machine is DOWN for maintenance")]
    MachineDown(String),
    /// The agent is not in a state that allows this (e.g. healing an agent
    /// that is not partitioned, or touching a removed one).
    #[error("agent '{agent}' is {state}: {what} is not possible")]
    AgentState {
        /// The agent.
        agent: String,
        /// Its state.
        state: &'static str,
        /// What was asked.
        what: &'static str,
    },
}
