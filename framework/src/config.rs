//! The scheduler's settings, with the defaults a user gets from `mesopod`.

use std::time::Duration;

/// Mesos-side settings of the framework.
#[derive(Debug, Clone)]
pub struct FrameworkConfig {
    /// `FrameworkInfo.name`.
    pub name: String,
    /// `FrameworkInfo.user`: the user tasks run as.
    pub user: String,
    /// `FrameworkInfo.roles` (MULTI_ROLE).
    pub roles: Vec<String>,
    /// `FrameworkInfo.principal`.
    pub principal: Option<String>,
    /// How long the master keeps our tasks when we are gone.
    pub failover_timeout: Duration,
    /// Master URLs, tried in turn.
    pub masters: Vec<String>,
}

/// A week: long enough to survive a weekend outage of the scheduler
/// without Mesos killing every pod, which is what a failover timeout of 0
/// (Mesos' default) would do on the first disconnect.
pub const DEFAULT_FAILOVER_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

impl Default for FrameworkConfig {
    fn default() -> Self {
        Self {
            name: "mesopod".into(),
            user: std::env::var("USER").unwrap_or_else(|_| "root".into()),
            roles: vec!["*".into()],
            principal: None,
            failover_timeout: DEFAULT_FAILOVER_TIMEOUT,
            masters: Vec::new(),
        }
    }
}

/// Scheduling settings.
#[derive(Debug, Clone)]
pub struct SchedulingConfig {
    /// How long an unused offer is kept before it is declined.
    pub offer_ttl: Duration,
    /// The refuse filter sent with declines of expired offers.
    pub decline_refuse: Duration,
    /// Longest time a launched task may take to reach RUNNING.
    pub start_deadline: Duration,
    /// Period of implicit reconciliation.
    pub implicit_reconcile_interval: Duration,
    /// Least time between two REVIVE calls.
    pub revive_min_interval: Duration,
    /// Finished tasks kept in the registry.
    pub retain_finished: usize,
    /// Longest a finished task is kept in the registry.
    pub retain_finished_for: Duration,
    /// How often deadlines, offer TTLs and GC are checked.
    pub sweep_interval: Duration,
    /// The largest ACCEPT call mesopod sends, in bytes: below the master's
    /// limit on a call's body (localmesos refuses more than 4 MiB with 413).
    pub max_accept_bytes: usize,
    /// How long an agent's executor may go unheard before its Node is
    /// NotReady (kube-controller-manager's `--node-monitor-grace-period`).
    pub node_monitor_grace_period: Duration,
    /// While no pod is pending, offers are suppressed, so an agent that joins
    /// sends none and would have no Node: this often an idle framework revives
    /// offers for a moment, and the agents that offer become Nodes (a
    /// DaemonSet then places its pod there). Zero: never.
    pub node_discovery_interval: Duration,
}

/// Half of localmesos' 4 MiB limit on a call: room for a master with a
/// smaller one, and about 500 small pods per ACCEPT.
pub const DEFAULT_MAX_ACCEPT_BYTES: usize = 2 * 1024 * 1024;

/// A start deadline of five minutes covers a slow executor start and a
/// busy agent, yet a pod whose task never starts fails within minutes
/// instead of sitting in ContainerCreating forever.
pub const DEFAULT_START_DEADLINE: Duration = Duration::from_secs(5 * 60);

impl Default for SchedulingConfig {
    fn default() -> Self {
        Self {
            offer_ttl: crate::offers::DEFAULT_OFFER_TTL,
            decline_refuse: Duration::from_secs(5),
            start_deadline: DEFAULT_START_DEADLINE,
            implicit_reconcile_interval: crate::reconcile::DEFAULT_IMPLICIT_INTERVAL,
            revive_min_interval: Duration::from_secs(1),
            retain_finished: 1024,
            retain_finished_for: Duration::from_secs(3600),
            sweep_interval: Duration::from_millis(500),
            max_accept_bytes: DEFAULT_MAX_ACCEPT_BYTES,
            node_monitor_grace_period: crate::core::NODE_MONITOR_GRACE_PERIOD,
            node_discovery_interval: Duration::from_secs(30),
        }
    }
}
