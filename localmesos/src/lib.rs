//! A local Mesos master with agents, faithful to the v1 scheduler and
//! executor HTTP APIs, for development, mesopod's embedded default, and
//! tests.
//!
//! # Contract
//!
//! Whatever a scheduler sees through `/api/v1/scheduler` is what Apache
//! Mesos (1.11) would show it: status codes, event order, offers,
//! reliable status updates, reconciliation answers, failover. A
//! third-party scheduler library runs against it unchanged. Custom
//! executors are real child processes that subscribe to their agent's
//! `/api/v1/executor` with the `MESOS_*` environment of a real agent.
//!
//! ```no_run
//! # async fn demo() -> Result<(), localmesos::Error> {
//! use localmesos::{AgentConfig, Config, LocalMesos};
//! let mut config = Config::default();
//! for i in 0..3 {
//!     config.agents.push(AgentConfig::from_flags("cpus:4;mem:8192;ports:[31000-32000]", "rack:r{i}", i)?);
//! }
//! let cluster = LocalMesos::start(config).await?;
//! println!("{}", cluster.master_url()); // http://127.0.0.1:PORT
//! let state = cluster.state();
//! assert_eq!(state.agents.len(), 3);
//! cluster.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! # Rust API
//!
//! - [`LocalMesos::start`]`(Config) -> Result<LocalMesos, Error>` binds the
//!   master, registers [`Config::agents`], starts the allocator;
//!   [`LocalMesos::master_url`], [`LocalMesos::master_addr`],
//!   [`LocalMesos::work_dir`], [`LocalMesos::state`] (a typed
//!   [`ClusterState`]), [`LocalMesos::state_json`] (what `/state` serves),
//!   [`LocalMesos::shutdown`]`.await`.
//! - [`AgentConfig`]: hostname (default `agent-{i}`), resources with static
//!   per-role reservations, attributes, `simulated`, `task_duration`;
//!   [`AgentConfig::from_flags`] parses Mesos' flag syntax;
//!   [`LocalMesos::add_agent`] adds one later.
//! - [`Timing`]: heartbeat (15 s), allocation interval (1 s), offer timeout
//!   (none), status update retry (10 s doubling to 10 min), executor
//!   registration timeout (1 min), shutdown and kill grace periods. Tests
//!   shorten these instead of sleeping.
//! - Agent recovery: with [`Config::work_dir`] set, real agents checkpoint
//!   for frameworks with `FrameworkInfo.checkpoint` (Mesos' `meta/` layout),
//!   [`LocalMesos::shutdown`] leaves those executors running, and the next
//!   [`LocalMesos::start`] on that dir recovers each agent (same id, same
//!   port) and its executors and tasks (`--recover=reconnect`); executors
//!   not back within [`Timing::executor_reregistration_timeout`] are
//!   destroyed, their tasks TASK_GONE (TASK_LOST). [`LocalMesos::reset`]
//!   stops what the checkpoints name and removes the dir. Executors run in
//!   their own cgroup (`mesos/<container id>`, cgroup v2, as root), killed
//!   with their subtree when they end.
//! - Faults: [`LocalMesos::partition_agent`] (the agent goes silent; the
//!   master marks it unreachable after [`Timing::agent_ping_timeout`] ×
//!   [`Timing::max_agent_ping_timeouts`] on its clock, which
//!   [`LocalMesos::advance_clock`] moves), [`LocalMesos::heal_agent`],
//!   [`LocalMesos::remove_agent`], [`LocalMesos::restart_master`]
//!   ([`RestartOptions`]), [`LocalMesos::kill_executor`],
//!   [`LocalMesos::set_update_fault`] ([`UpdateFault`]: drop, duplicate or
//!   delay the next status updates), [`LocalMesos::hold_accepts`] (a slow
//!   master: ACCEPTs wait until released). [`Config::redirect_to`] plays a
//!   non-leading master (307).
//!
//! # Endpoints
//!
//! Master (on [`Config::listen`]): `POST /api/v1/scheduler`, `GET /version`,
//! `GET /state` (also `/master/state`: agents with total/used/offered
//! resources, frameworks, tasks, offers). Maintenance, as Mesos serves it
//! (each also under `/master/`): `POST /api/v1` (the v1 operator API:
//! GET_MAINTENANCE_SCHEDULE, GET_MAINTENANCE_STATUS,
//! UPDATE_MAINTENANCE_SCHEDULE, START_MAINTENANCE, STOP_MAINTENANCE, the
//! agent draining calls DRAIN_AGENT, DEACTIVATE_AGENT, REACTIVATE_AGENT,
//! and GET_AGENTS, in JSON or protobuf; any other call type 501), `GET
//! /slaves` (also `/master/slaves`), `GET|POST
//! /maintenance/schedule`, `GET /maintenance/status`, `POST /machine/down`
//! and `/machine/up` (a JSON array of `MachineID`s). Machines in a schedule
//! are DRAINING: their agents' offers carry `unavailability`, and
//! frameworks holding anything there get INVERSE_OFFERS (answered with
//! ACCEPT_/DECLINE_INVERSE_OFFERS); DOWN machines' agents are removed and
//! refused ([`Error::MachineDown`]) until brought up. Every agent
//! advertises the IP `127.0.0.1`, so a machine is `{"hostname":
//! "<agent hostname>", "ip": "127.0.0.1"}`. Each real agent, on its own
//! `127.0.0.1:0` (`AgentSnapshot::endpoint`, `Offer.url`): `POST
//! /api/v1/executor`, `GET /state` (executors with their sandbox
//! `directory`), `GET /files/read?path=&offset=&length=`,
//! `GET /files/browse?path=`.
//!
//! Fault routes on the master, same effects as the methods above (404
//! unknown agent/executor, 409 wrong agent state, 400 bad body):
//!
//! | route | body |
//! |---|---|
//! | `POST /admin/agents` | `{"resources","attributes","hostname","simulated","task_duration_ms"}` → `{"agent_id"}` |
//! | `POST /admin/agents/{id}/partition` · `/heal` · `/remove` | |
//! | `POST /admin/clock/advance` | `{"seconds"}` |
//! | `POST /admin/master/restart` | `{"keep_state","recovery_ms","agent_reregistration_ms"}` |
//! | `POST /admin/executors/kill` | `{"agent_id","framework_id","executor_id"}` |
//! | `POST` / `DELETE /admin/faults/status-updates` | `{"drop","duplicate","delay","delay_ms"}` |
//!
//! # Invariants
//!
//! - Bad input gets Mesos' status code and changes nothing; nothing from
//!   the network panics.
//! - The master is the only writer of task state: task records, their
//!   reliable-update queues, and the resources and task lists agents keep
//!   for them. Agents, real or simulated, and fault injection never move a
//!   task; they report what happened (`agent::Report`: an executor sent
//!   UPDATE or MESSAGE, a process exited, an executor was killed or its
//!   stream ended) and the master applies it (`master::reports`).
//! - Every task update an agent or executor produces goes through one state
//!   machine (`master::tasks`): terminal tasks take no more updates, and
//!   reliable updates reach the scheduler in order, one at a time.
//! - Modules depend one way, `http` → `master` → `agent`: agent code knows
//!   nothing of the master, and no module imports one that imports it.
//! - An agent's used + offered resources never exceed its total.
//! - Only loopback is bound; child processes lead their own process groups
//!   and are killed on shutdown, except checkpointing frameworks' executors
//!   on a persistent work dir, which the next start recovers.
//! - Checkpoint files are written whole (temporary file, then rename); a
//!   corrupt one costs its framework's recovery, with an error naming it.
//! - [`Security`] says what is enforced, as Mesos' flags do: framework HTTP
//!   basic authentication against [`Credentials`] (401 with
//!   `WWW-Authenticate` before any other check; a FrameworkInfo.principal
//!   other than the authenticated one refused), the read-only and the
//!   read-write operator endpoints against the same credentials
//!   (`authenticate_http_readonly`, `authenticate_http_readwrite`), executor JWTs
//!   (`MESOS_EXECUTOR_AUTHENTICATION_TOKEN`, required with
//!   `authenticate_http_executors`), the `/admin/` fault routes only with
//!   `enable_faults` on a loopback address, and a connection cap with a
//!   header-read timeout on every server.
//!
//! # What it must not know
//!
//! Nothing of pods, Kubernetes or the mesopod framework: it speaks Mesos
//! only, through `mesos`' types, codecs and resource arithmetic.
//!
//! # Caveats
//!
//! - RESERVE/UNRESERVE/CREATE/DESTROY operations are not applied (logged,
//!   their resources left unused); `CommandInfo.uris` are not fetched.
//! - The DEFAULT executor of a LAUNCH_GROUP is stood in for by running each
//!   task's command directly (no nested containers, no group kill).
//! - An executor that exits fails its live tasks (TASK_FAILED,
//!   REASON_EXECUTOR_TERMINATED); TASK_LOST is never chosen there.
//! - Only the master's ping timeouts and inverse-offer filters read the
//!   injectable clock ([`LocalMesos::advance_clock`]); every other interval
//!   and timeout is a [`Timing`] field on real time, and tests shorten them.
//! - The maintenance schedule and modes survive [`LocalMesos::restart_master`]
//!   with or without `keep_state`, as Mesos keeps them in its registry;
//!   outstanding inverse offers, answers and filters do not (the allocator
//!   starts afresh). Re-registration after a master restart is not checked
//!   against DOWN machines (their agents were removed when the machine
//!   went down). The operator API serves only the maintenance
//!   calls; there are no per-machine authorization ACLs.
//! - A partitioned agent is offered nothing from the moment it is cut off
//!   (Mesos would keep offering it until its pings time out, and lose what
//!   it launched there), and a KILL for a task on it before it is marked
//!   unreachable still reaches its executor (Mesos would lose it); the
//!   TASK_KILLED waits for the heal like every update from it.
//! - Only custom executors are recovered: command tasks (which localmesos
//!   runs itself, standing in for Mesos' command executor) do not survive
//!   a restart. No fsync: checkpoints survive the process, not the machine.
//! - Simulated agents skip TASK_STARTING (real command tasks send it).

mod agent;
mod clock;
mod config;
mod error;
mod faults;
mod http;
mod master;
pub mod security;
mod snapshot;
mod validation;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

pub use config::{
    AgentConfig, Config, DEFAULT_AGENT_PING_TIMEOUT, DEFAULT_ALLOCATION_INTERVAL,
    DEFAULT_EXECUTOR_REGISTRATION_TIMEOUT, DEFAULT_EXECUTOR_REREGISTRATION_TIMEOUT,
    DEFAULT_EXECUTOR_SHUTDOWN_GRACE, DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_MAX_AGENT_PING_TIMEOUTS,
    DEFAULT_RECOVERY_TIMEOUT, DEFAULT_STATUS_UPDATE_RETRY_MAX, DEFAULT_STATUS_UPDATE_RETRY_MIN,
    DEFAULT_TASK_KILL_GRACE, Timing,
};
pub use error::Error;
pub use faults::{RestartOptions, UpdateFault};
pub use mesos::proto::{AgentId, ExecutorId, FrameworkId};
pub use security::{Credentials, Security};
pub use snapshot::{
    AgentSnapshot, ClusterState, ExecutorSnapshot, FrameworkSnapshot, TaskSnapshot,
};

use agent::ExecutorRef;
use master::{Shared, State, agents};

/// A running local cluster. Dropping it without [`LocalMesos::shutdown`]
/// stops its tasks too, but without waiting.
pub struct LocalMesos {
    shared: Arc<Shared>,
    addr: SocketAddr,
    url: String,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _work_dir: Option<tempfile::TempDir>,
}

impl LocalMesos {
    /// Binds the master, registers the configured agents (binding each real
    /// agent's endpoint), and starts the allocator. Needs a tokio runtime.
    ///
    /// # Errors
    /// A bind or work-directory failure.
    pub async fn start(config: Config) -> Result<LocalMesos, Error> {
        let (work_dir, temp) = match &config.work_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)?;
                (dir.clone(), None)
            }
            None => {
                let t = tempfile::Builder::new().prefix("localmesos-").tempdir()?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let listener = tokio::net::TcpListener::bind(config.listen).await?;
        let addr = listener.local_addr()?;
        let persistent = temp.is_none();
        let shared = Shared::new(
            State::new(),
            config.timing.clone(),
            addr,
            (work_dir, persistent),
            config.redirect_to.clone(),
            tokio::runtime::Handle::current(),
        );
        let _ = shared.security.set(config.security.clone());
        for agent in config.agents {
            http::agent::add(&shared, agent).await?;
        }
        let router = http::router(shared.clone());
        let limits = shared.security().conn_limits();
        let server = tokio::spawn(async move {
            if let Err(e) =
                connlimits::serve_with_shutdown(listener, router, limits, std::future::pending())
                    .await
            {
                tracing::error!(error = %e, "master HTTP server stopped");
            }
        });
        let allocator = tokio::spawn(master::allocator::run(shared.clone()));
        let pings = tokio::spawn(master::pings::run(shared.clone()));
        tracing::info!(%addr, "localmesos master started");
        Ok(LocalMesos {
            shared,
            addr,
            url: format!("http://{addr}"),
            tasks: vec![server, allocator, pings],
            _work_dir: temp,
        })
    }

    /// Stops every executor that the agent checkpoints under `work_dir`
    /// name (SIGTERM, which they pass on to their pods; SIGKILL and their
    /// cgroups after `grace`), then removes `work_dir`: what
    /// `--recover=cleanup` and `mesopod --reset` do. Returns how many
    /// executors were running. Needs a tokio runtime.
    ///
    /// # Errors
    /// The directory could not be removed.
    pub async fn reset(work_dir: &Path, grace: std::time::Duration) -> Result<usize, Error> {
        let stopped = master::recover::cleanup(work_dir, grace).await;
        match std::fs::remove_dir_all(work_dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::Io(e)),
            _ => Ok(stopped),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn master_url(&self) -> &str {
        &self.url
    }

    /// The master's socket address.
    pub fn master_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where sandboxes live.
    pub fn work_dir(&self) -> &Path {
        &self.shared.work_dir
    }

    /// A consistent copy of the whole cluster.
    pub fn state(&self) -> ClusterState {
        snapshot::take(&self.shared.lock())
    }

    /// The operator JSON `/state` serves.
    pub fn state_json(&self) -> serde_json::Value {
        http::operator::state_json(&self.shared, &self.shared.lock())
    }

    /// Registers one more agent.
    ///
    /// # Errors
    /// A bind failure for a real agent's endpoint.
    pub async fn add_agent(&self, config: AgentConfig) -> Result<AgentId, Error> {
        http::agent::add(&self.shared, config).await
    }

    /// Partitions an agent: from now on it answers no ping and its updates
    /// wait (its offers are rescinded). Once the master's clock has run
    /// [`Timing::agent_ping_timeout`] × [`Timing::max_agent_ping_timeouts`]
    /// past this (see [`LocalMesos::advance_clock`]), the master marks it
    /// unreachable: TASK_UNREACHABLE (TASK_LOST without PARTITION_AWARE)
    /// for its tasks.
    ///
    /// # Errors
    /// Unknown agent, or one that is not active or already partitioned.
    pub fn partition_agent(&self, agent_id: &str) -> Result<(), Error> {
        agents::partition(&self.shared, agent_id)
    }

    /// Moves the master's clock `by` forward, as if that much time had
    /// passed for its own timeouts (agent pings); what falls due happens
    /// before this returns. Real time, and timers of executors, agents'
    /// update retries and schedulers, are not moved.
    pub fn advance_clock(&self, by: std::time::Duration) {
        master::pings::advance(&self.shared, by);
    }

    /// Heals a partition: an agent not yet unreachable just answers again;
    /// an unreachable one re-registers and is offered again.
    ///
    /// # Errors
    /// Unknown agent, or one that is not partitioned.
    pub fn heal_agent(&self, agent_id: &str) -> Result<(), Error> {
        agents::heal(&self.shared, agent_id)
    }

    /// Removes an agent for good: TASK_GONE_BY_OPERATOR (TASK_LOST without
    /// PARTITION_AWARE), its processes killed.
    ///
    /// # Errors
    /// Unknown agent, or one already removed.
    pub fn remove_agent(&self, agent_id: &str) -> Result<(), Error> {
        agents::remove(&self.shared, agent_id)
    }

    /// Restarts the master: every stream drops, calls get 503 while it
    /// recovers, state is kept or lost (see [`RestartOptions`]).
    pub fn restart_master(&self, options: RestartOptions) {
        master::subscribe::restart(&self.shared, options);
    }

    /// Kills an executor's process (SIGKILL); its tasks fail as when an
    /// executor dies.
    ///
    /// # Errors
    /// Unknown agent or executor.
    pub fn kill_executor(
        &self,
        agent_id: &str,
        framework_id: &str,
        executor_id: &str,
    ) -> Result<(), Error> {
        agents::kill_executor(
            &self.shared,
            ExecutorRef::new(agent_id, framework_id, executor_id),
        )
    }

    /// Drops an executor's connection to its agent (its event stream ends);
    /// a checkpointing executor reconnects.
    ///
    /// # Errors
    /// [`Error::UnknownAgent`] or [`Error::UnknownExecutor`].
    pub fn disconnect_executor(
        &self,
        agent_id: &str,
        framework_id: &str,
        executor_id: &str,
    ) -> Result<(), Error> {
        agents::disconnect_executor(
            &self.shared,
            ExecutorRef::new(agent_id, framework_id, executor_id),
        )
    }

    /// Sets faults on the next reliable status updates sent to schedulers.
    pub fn set_update_fault(&self, fault: UpdateFault) {
        self.shared.lock().update_fault = fault;
    }

    /// Plays a slow master: ACCEPT calls wait, unanswered and not yet
    /// applied, until [`LocalMesos::release_accepts`].
    pub fn hold_accepts(&self) {
        self.shared.accept_gate.send_replace(false);
    }

    /// Lets held and later ACCEPT calls through.
    pub fn release_accepts(&self) {
        self.shared.accept_gate.send_replace(true);
    }

    /// Stops serving: asks every executor to stop (SIGTERM), waits up to
    /// the executor shutdown grace period, kills every child process left,
    /// and waits for the server tasks to end.
    pub async fn shutdown(mut self) {
        // As a Mesos agent does on shutdown: ask every executor to stop
        // (SIGTERM, which executors treat as SHUTDOWN and pass on to their
        // tasks), give them the shutdown grace period, then kill what is
        // left. Killing at once would orphan the executors' own children.
        let pids = agents::terminate_processes(&self.shared, &self.shared.lock());
        let deadline = tokio::time::Instant::now() + self.shared.timing.executor_shutdown_grace;
        while pids
            .iter()
            .any(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        self.stop();
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
    }

    fn stop(&mut self) {
        agents::stop_all(&self.shared, &mut self.shared.lock());
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Drop for LocalMesos {
    fn drop(&mut self) {
        self.stop();
        // The temporary work dir goes next: what killed executors left
        // mounted there would keep it, and the mounts, on the host.
        if let Some(dir) = &self._work_dir {
            agent::mounts::unmount_under(dir.path());
        }
    }
}

#[cfg(test)]
mod tests {
    /// Embedders keep the handle in an `Arc` shared across tasks; this
    /// stops compiling if a field ever makes that impossible.
    #[test]
    fn the_handle_and_snapshots_are_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<super::LocalMesos>();
        assert_send_sync::<super::ClusterState>();
        assert_send_sync::<super::Error>();
    }
}
