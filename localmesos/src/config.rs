//! What a cluster is made of and how fast its clocks tick.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use mesos::proto::Attribute;
use mesos::resources::{ResourceError, Resources, parse_attributes};

/// Mesos' `--heartbeat_interval` default: schedulers give up after ~5 missed.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(15);
/// Mesos' `--allocation_interval` default.
pub const DEFAULT_ALLOCATION_INTERVAL: Duration = Duration::from_secs(1);
/// The agent's first status update retry (`STATUS_UPDATE_RETRY_INTERVAL_MIN`).
pub const DEFAULT_STATUS_UPDATE_RETRY_MIN: Duration = Duration::from_secs(10);
/// The agent's retry cap (`STATUS_UPDATE_RETRY_INTERVAL_MAX`, 10 minutes).
pub const DEFAULT_STATUS_UPDATE_RETRY_MAX: Duration = Duration::from_secs(600);
/// Mesos' `--executor_registration_timeout` default.
pub const DEFAULT_EXECUTOR_REGISTRATION_TIMEOUT: Duration = Duration::from_secs(60);
/// Mesos' `--executor_shutdown_grace_period` default (`5secs`).
pub const DEFAULT_EXECUTOR_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Mesos' agent `--recovery_timeout` default: how long a checkpointing
/// executor keeps trying to reach its agent before it stops its tasks.
pub const DEFAULT_RECOVERY_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// Mesos' agent `--executor_reregistration_timeout` default: how long a
/// recovered agent waits for its executors to re-subscribe.
pub const DEFAULT_EXECUTOR_REREGISTRATION_TIMEOUT: Duration = Duration::from_secs(2);
/// Mesos' master `--agent_ping_timeout` default: between pings to an agent.
pub const DEFAULT_AGENT_PING_TIMEOUT: Duration = Duration::from_secs(15);
/// Mesos' master `--max_agent_ping_timeouts` default: unanswered pings in a
/// row before an agent is unreachable (75 s of silence with the timeout).
pub const DEFAULT_MAX_AGENT_PING_TIMEOUTS: u32 = 5;
/// How long Mesos' command executor waits between SIGTERM and SIGKILL when
/// the task has no kill policy (3 s in Mesos).
pub const DEFAULT_TASK_KILL_GRACE: Duration = Duration::from_secs(3);

/// A whole cluster: the master's address, its agents and its timings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the master listens; port 0 picks a free port.
    pub listen: SocketAddr,
    /// The agents registered at start, in index order (`agent-0`, `agent-1`…).
    pub agents: Vec<AgentConfig>,
    /// Intervals and timeouts.
    pub timing: Timing,
    /// Where sandboxes and agent checkpoints live. `None`: a temporary
    /// directory removed on shutdown. With a directory, agents checkpoint
    /// for frameworks with `checkpoint` set, leave those executors running
    /// on shutdown, and recover them on the next start.
    pub work_dir: Option<PathBuf>,
    /// Play a master that is not the leader: every scheduler call is
    /// answered `307 Temporary Redirect` to `//<this host:port>/api/v1/scheduler`,
    /// as Mesos redirects to the leading master.
    pub redirect_to: Option<String>,
    /// Authentication, fault routes and connection limits.
    pub security: crate::security::Security,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            agents: Vec::new(),
            timing: Timing::default(),
            work_dir: None,
            redirect_to: None,
            security: crate::security::Security::default(),
        }
    }
}

/// Every interval and timeout of the cluster. Tests shorten them instead of
/// sleeping through Mesos' production values.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// Between HEARTBEAT events (announced in SUBSCRIBED).
    pub heartbeat_interval: Duration,
    /// Between allocation rounds.
    pub allocation_interval: Duration,
    /// Outstanding offers are rescinded after this long; `None`: never.
    pub offer_timeout: Option<Duration>,
    /// First retry of an unacknowledged status update; doubles each time.
    pub status_update_retry_min: Duration,
    /// Cap of the status update retry backoff.
    pub status_update_retry_max: Duration,
    /// An executor that has not subscribed by then is killed.
    pub executor_registration_timeout: Duration,
    /// Between SHUTDOWN to an executor and killing its process.
    pub executor_shutdown_grace: Duration,
    /// Between SIGTERM and SIGKILL for a command task without a kill policy.
    pub task_kill_grace: Duration,
    /// `--recovery_timeout`: given to checkpointing executors as
    /// `MESOS_RECOVERY_TIMEOUT`.
    pub recovery_timeout: Duration,
    /// `--executor_reregistration_timeout`: a recovered agent's wait for its
    /// executors (also their `MESOS_SUBSCRIPTION_BACKOFF_MAX`).
    pub executor_reregistration_timeout: Duration,
    /// `--agent_ping_timeout`: how long the master waits for an agent's
    /// answer to each ping (on its clock, which tests advance).
    pub agent_ping_timeout: Duration,
    /// `--max_agent_ping_timeouts`: unanswered pings in a row before the
    /// master marks an agent unreachable.
    pub max_agent_ping_timeouts: u32,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            allocation_interval: DEFAULT_ALLOCATION_INTERVAL,
            offer_timeout: None,
            status_update_retry_min: DEFAULT_STATUS_UPDATE_RETRY_MIN,
            status_update_retry_max: DEFAULT_STATUS_UPDATE_RETRY_MAX,
            executor_registration_timeout: DEFAULT_EXECUTOR_REGISTRATION_TIMEOUT,
            executor_shutdown_grace: DEFAULT_EXECUTOR_SHUTDOWN_GRACE,
            task_kill_grace: DEFAULT_TASK_KILL_GRACE,
            recovery_timeout: DEFAULT_RECOVERY_TIMEOUT,
            executor_reregistration_timeout: DEFAULT_EXECUTOR_REREGISTRATION_TIMEOUT,
            agent_ping_timeout: DEFAULT_AGENT_PING_TIMEOUT,
            max_agent_ping_timeouts: DEFAULT_MAX_AGENT_PING_TIMEOUTS,
        }
    }
}

/// One agent.
#[derive(Debug, Clone, Default)]
pub struct AgentConfig {
    /// The agent's hostname; `None`: `agent-{i}` with `i` its index.
    pub hostname: Option<String>,
    /// Everything the agent has, static per-role reservations included
    /// (`cpus(prod):2` reserves two cpus to role `prod`).
    pub resources: Resources,
    /// The agent's attributes.
    pub attributes: Vec<Attribute>,
    /// No process runs: tasks go RUNNING at once (and FINISHED after
    /// `task_duration`). No executor endpoint is served, so thousands fit.
    pub simulated: bool,
    /// In simulated mode, how long a task runs before FINISHED; `None`: forever.
    pub task_duration: Option<Duration>,
}

impl AgentConfig {
    /// An agent from Mesos flag syntax: `resources` as `--resources`
    /// (`cpus:4;mem:8192;ports:[31000-32000];cpus(prod):2`) and
    /// `attributes` as `--attributes` (`rack:r1;zone:z`). `{i}` in either is
    /// replaced by `index`.
    ///
    /// # Errors
    /// The parser's error, naming the bad item.
    pub fn from_flags(
        resources: &str,
        attributes: &str,
        index: usize,
    ) -> Result<Self, ResourceError> {
        let i = index.to_string();
        let resources = Resources::parse(&resources.replace("{i}", &i))?;
        let attributes = if attributes.trim().is_empty() {
            Vec::new()
        } else {
            parse_attributes(&attributes.replace("{i}", &i))?
        };
        Ok(Self {
            resources,
            attributes,
            ..Self::default()
        })
    }

    /// The same agent, simulated, with tasks finishing after `task_duration`.
    pub fn simulated(mut self, task_duration: Option<Duration>) -> Self {
        self.simulated = true;
        self.task_duration = task_duration;
        self
    }

    /// The same agent with this hostname.
    pub fn with_hostname(mut self, hostname: impl Into<String>) -> Self {
        self.hostname = Some(hostname.into());
        self
    }
}
