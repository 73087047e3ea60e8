//! The v1 executor API loop: subscribe, take the agent's events, report the
//! runtime's updates reliably, and survive (or not) a dropped connection.
//!
//! ```text
//! connect ─SUBSCRIBE(unacked tasks+updates)─▶ session ─stream ends─▶ checkpoint?
//!    ▲                                          │ SHUTDOWN            │ yes: backoff, retry
//!    └───────────── until recovery_timeout ─────┼─────────────────────┘ no: stop pods, exit
//!                                               ▼
//!                     stop every pod (within the shutdown grace), report, exit
//! ```
//!
//! # Guarantees
//!
//! - Every update gets a fresh v4 uuid, is kept in [`Unacknowledged`] before
//!   it is sent, and leaves only on ACKNOWLEDGED; updates produced while
//!   disconnected go out in the next SUBSCRIBE instead of as calls.
//! - Every way out of [`Executor::run`] stops every container first.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use mesos::proto::executor::{Call, Event, call, event};
use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{AgentId, Label, Labels, TaskId, TaskInfo, TaskState, TaskStatus};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::agent::{Agent, AgentError, EventStream};
use crate::backoff::{self, Backoff};
use crate::env::ExecutorEnv;
use crate::pod::PodPlan;
use crate::reliable::Unacknowledged;
use crate::runtime::{PodState, PodUpdate, Runtime, RuntimeConfig};

mod node_reports;
mod updates;

/// `TaskStatus.labels` key holding the pod's directory (absolute) in the
/// sandbox: the shim joins `<container>/<restartCount>.log` to it for `/files/read`.
pub const POD_DIR_LABEL: &str = "mesopod.io/pod-dir";

/// `TaskInfo.labels` key the scheduler sets on a pod it launches again
/// after its executor died: the new executor adopts the pod's containers
/// ([`crate::shim`]) or, with nothing to adopt, fails the task
/// (REASON_EXECUTOR_TERMINATED); it never starts them afresh.
pub const ADOPT_LABEL: &str = "mesopod.io/adopt";

/// The MESSAGE data that asks the executor to report every pod's current
/// status again (fresh uuids): the scheduler sends it when an agent comes
/// back from a partition, since the master's own TASK_RUNNING then carries
/// no pod status.
pub const RESEND_STATUS_MESSAGE: &[u8] = b"mesopod.io/resend-status";

/// Mesos' default `--executor_registration_timeout`: an executor that has not
/// subscribed by then is killed by the agent, so trying longer is pointless.
pub const REGISTRATION_TIMEOUT: Duration = Duration::from_secs(60);

/// First wait between subscription attempts; doubled up to
/// `MESOS_SUBSCRIPTION_BACKOFF_MAX`. Short, because an agent restart is
/// usually over in well under a second on loopback.
const SUBSCRIBE_BACKOFF_INITIAL: Duration = Duration::from_millis(100);

/// Wait before sending again an update whose UPDATE call failed while the
/// subscription stayed up (say, a 503 while the agent recovers). The agent
/// drops duplicates by uuid, so retrying often is safe; once a second keeps
/// a local agent's load negligible.
const UPDATE_RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// How an executor run ended, when it ended in an orderly way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The agent said SHUTDOWN; every pod was stopped and reported.
    Shutdown,
    /// The stop signal given to [`Executor::with_stop`] fired (SIGTERM);
    /// every pod was stopped as on SHUTDOWN.
    Stopped,
}

/// Why the executor stopped without a SHUTDOWN.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecutorError {
    /// The first SUBSCRIBE never succeeded.
    #[error("could not subscribe to the agent within {timeout:?}: {last}")]
    NeverSubscribed {
        /// How long we tried.
        timeout: Duration,
        /// The last error.
        last: String,
    },
    /// The connection dropped and the framework does not checkpoint.
    #[error("the agent connection dropped and checkpointing is off: {0}")]
    Disconnected(String),
    /// The connection dropped and could not be re-established in time.
    #[error("could not re-subscribe within the recovery timeout ({timeout:?}): {last}")]
    RecoveryTimeout {
        /// `MESOS_RECOVERY_TIMEOUT`.
        timeout: Duration,
        /// The last error.
        last: String,
    },
}

/// Tunables of the loop that are not in the agent's environment.
#[derive(Debug, Clone)]
pub struct Options {
    /// Crash-loop backoff for containers.
    pub restart_backoff: Backoff,
    /// How long to wait for the first subscription.
    pub registration_timeout: Duration,
    /// How containers run.
    pub containers: crate::oci::ContainerSettings,
    /// Where the ConfigMaps, Secrets and tokens pods reference come from
    /// ([`crate::objects::NoObjects`] unless the executor has a credential).
    pub objects: crate::objects::SharedObjects,
    /// The node credential whose public key goes to the scheduler after every
    /// SUBSCRIBED ([`crate::apiclient`]); `None`: no API access.
    pub credential: Option<std::sync::Arc<crate::apiclient::Credential>>,
    /// How often the executor tells the scheduler it is alive
    /// ([`NODE_STATUS_MESSAGE`]), as kubelet posts its node status.
    pub node_status_update_frequency: Duration,
    /// How often running containers' cgroups are sampled and pushed to the
    /// API for `kubectl top` ([`crate::metrics`]), metrics-server's
    /// `--metric-resolution`.
    pub metric_resolution: Duration,
}

/// kubelet's `--node-status-update-frequency` default.
pub const NODE_STATUS_UPDATE_FREQUENCY: Duration = Duration::from_secs(10);

/// Executor → scheduler (executor MESSAGE), every
/// [`Options::node_status_update_frequency`] while subscribed: this
/// executor, and so its node, is alive. An executor that stops sending it
/// (hung, stopped, cut off) makes its Node NotReady.
pub const NODE_STATUS_MESSAGE: &[u8] = b"mesopod.io/node-status";

impl Default for Options {
    fn default() -> Self {
        Options {
            restart_backoff: backoff::CRASH_LOOP,
            registration_timeout: REGISTRATION_TIMEOUT,
            containers: crate::oci::ContainerSettings::default(),
            objects: std::sync::Arc::new(crate::objects::NoObjects),
            credential: None,
            node_status_update_frequency: NODE_STATUS_UPDATE_FREQUENCY,
            metric_resolution: crate::metrics::METRIC_RESOLUTION,
        }
    }
}

enum SessionEnd {
    Shutdown,
    Stopped,
    Dropped(String),
}

type StopSignal = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// The executor: one per agent, many pods.
pub struct Executor<A: Agent> {
    env: ExecutorEnv,
    agent: A,
    options: Options,
    runtime: Runtime,
    updates: mpsc::UnboundedReceiver<PodUpdate>,
    unacked: Unacknowledged,
    /// Updates whose UPDATE call has not succeeded yet, oldest first; later
    /// updates queue behind them so the agent sees each task's in order.
    undelivered: VecDeque<call::Update>,
    retry_at: Option<Instant>,
    /// Each launched task's own kill grace period (`TaskInfo.kill_policy`).
    kill_policies: HashMap<TaskId, Duration>,
    /// The last update of each live task, for [`RESEND_STATUS_MESSAGE`].
    latest: HashMap<TaskId, call::Update>,
    agent_id: Option<AgentId>,
    stop: StopSignal,
    stop_fired: bool,
    /// The streaming endpoint (exec, attach, port-forward), once subscribed.
    streaming: Option<crate::streaming::server::StreamServer>,
    /// The node key registration the scheduler has not answered yet.
    key_resend: crate::apiclient::resend::KeyResend,
    /// The image store's listing for the Node ([`crate::node_images`]).
    node_images: Option<NodeImagesWatch>,
}

type NodeImagesWatch =
    tokio::sync::watch::Receiver<Option<std::sync::Arc<crate::node_images::NodeImages>>>;

/// The listing's next change; never, without a store or once it is gone.
async fn images_changed(watch: Option<&mut NodeImagesWatch>) {
    let changed = match watch {
        Some(w) => w.changed().await.is_ok(),
        None => false,
    };
    if !changed {
        std::future::pending::<()>().await;
    }
}

impl<A: Agent> Executor<A> {
    /// An executor for the agent described by `env`.
    pub fn new(env: ExecutorEnv, agent: A, options: Options) -> Self {
        let host_ip = env
            .agent_ip()
            .map(|ip| ip.to_string())
            .unwrap_or_else(|| "127.0.0.1".into());
        let (runtime, updates) = Runtime::new(RuntimeConfig {
            sandbox: env.sandbox.clone(),
            host_ip,
            node_name: String::new(),
            backoff: options.restart_backoff,
            containers: crate::oci::ContainerSettings {
                adoption_timeout: env.recovery_timeout,
                ..options.containers.clone()
            },
            objects: options.objects.clone(),
        });
        let node_images = runtime.node_images();
        Executor {
            node_images,
            env,
            agent,
            options,
            runtime,
            updates,
            unacked: Unacknowledged::default(),
            undelivered: VecDeque::new(),
            retry_at: None,
            kill_policies: HashMap::new(),
            latest: HashMap::new(),
            agent_id: None,
            stop: Box::pin(std::future::pending()),
            stop_fired: false,
            streaming: None,
            key_resend: Default::default(),
        }
    }

    /// Stops every pod (as on SHUTDOWN) and returns [`Exit::Stopped`] when
    /// `stop` completes: the binary passes SIGTERM here.
    pub fn with_stop(
        mut self,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Self {
        self.stop = Box::pin(stop);
        self
    }

    /// Runs until SHUTDOWN (`Ok`) or until the agent is gone for good.
    pub async fn run(mut self) -> Result<Exit, ExecutorError> {
        // Process mode's pods have no cgroups of their own: no metrics at all,
        // rather than a node whose usage would read 0.
        let sampled = !matches!(
            self.options.containers.runtime,
            crate::oci::RuntimeKind::Process
        );
        let metrics = (sampled && self.options.credential.is_some()).then(|| {
            tokio::spawn(crate::metrics::run(
                self.options.objects.clone(),
                self.env.executor_id.value.clone(),
                self.options.metric_resolution,
            ))
        });
        let result = self.run_inner().await;
        if let Some(task) = metrics {
            task.abort();
        }
        // Whatever happened, no container outlives the executor.
        self.runtime.kill_all(Duration::ZERO);
        self.runtime.wait_all().await;
        result
    }

    async fn run_inner(&mut self) -> Result<Exit, ExecutorError> {
        let retry = Backoff {
            initial: SUBSCRIBE_BACKOFF_INITIAL.min(self.env.subscription_backoff_max),
            max: self.env.subscription_backoff_max,
        };
        let mut ever_subscribed = false;
        let mut lost_at = Instant::now();
        let mut attempt = 0u32;
        loop {
            self.drain_updates();
            let call = self.subscribe_call();
            let last = match self.agent.subscribe(call).await {
                Ok(stream) => {
                    tracing::info!(
                        unacked_updates = self.unacked.pending_updates(),
                        "subscribed to the agent"
                    );
                    ever_subscribed = true;
                    attempt = 0;
                    // The SUBSCRIBE carried every unacknowledged update.
                    self.undelivered.clear();
                    self.retry_at = None;
                    match self.session(stream).await {
                        SessionEnd::Shutdown => return Ok(Exit::Shutdown),
                        SessionEnd::Stopped => return Ok(Exit::Stopped),
                        SessionEnd::Dropped(why) => {
                            if !self.env.checkpoint {
                                return Err(ExecutorError::Disconnected(why));
                            }
                            tracing::warn!(%why, "agent connection dropped; reconnecting");
                            lost_at = Instant::now();
                            why
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "subscribe failed");
                    e.to_string()
                }
            };
            let limit = if ever_subscribed {
                self.env.recovery_timeout
            } else {
                self.options.registration_timeout
            };
            if lost_at.elapsed() >= limit {
                return Err(if ever_subscribed {
                    ExecutorError::RecoveryTimeout {
                        timeout: limit,
                        last,
                    }
                } else {
                    ExecutorError::NeverSubscribed {
                        timeout: limit,
                        last,
                    }
                });
            }
            tokio::select! {
                () = tokio::time::sleep(jittered(retry.delay(attempt))) => {}
                () = &mut self.stop, if !self.stop_fired => {
                    self.stop_fired = true;
                    return Ok(Exit::Stopped);
                }
            }
            attempt = attempt.saturating_add(1);
        }
    }

    fn subscribe_call(&self) -> Call {
        Call {
            executor_id: Some(self.env.executor_id.clone()),
            framework_id: Some(self.env.framework_id.clone()),
            r#type: Some(call::Type::Subscribe as i32),
            subscribe: Some(self.unacked.subscribe()),
            ..Default::default()
        }
    }

    /// Moves updates produced while disconnected into the unacknowledged set:
    /// they travel in the next SUBSCRIBE.
    fn drain_updates(&mut self) {
        while let Ok(update) = self.updates.try_recv() {
            let update = self.status_update(update);
            self.unacked.add_update(update);
        }
    }

    async fn session(&mut self, mut stream: EventStream) -> SessionEnd {
        let mut shutdown_by: Option<Instant> = None;
        let credential = self.options.credential.clone();
        let mut node_status = tokio::time::interval(self.options.node_status_update_frequency);
        node_status.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if let Some(by) = shutdown_by
                && self.runtime.is_empty()
                && self.updates.is_empty()
                && (self.unacked.is_empty() || Instant::now() >= by)
            {
                return if self.stop_fired {
                    SessionEnd::Stopped
                } else {
                    SessionEnd::Shutdown
                };
            }
            tokio::select! {
                event = stream.next() => match event {
                    None => return SessionEnd::Dropped("the event stream ended".into()),
                    Some(Err(e)) => return SessionEnd::Dropped(e.to_string()),
                    Some(Ok(event)) => {
                        if self.handle(event).await && shutdown_by.is_none() {
                            shutdown_by = Some(self.begin_shutdown());
                        }
                    }
                },
                () = &mut self.stop, if !self.stop_fired => {
                    self.stop_fired = true;
                    tracing::info!("stop signal: stopping every pod");
                    if shutdown_by.is_none() {
                        shutdown_by = Some(self.begin_shutdown());
                    }
                }
                Some(update) = self.updates.recv() => self.send(update).await,
                () = sleep_until(self.retry_at), if self.retry_at.is_some() => self.flush().await,
                () = reregister_wanted(credential.as_deref()) => self.send_node_key().await,
                () = sleep_until(self.key_resend.due()), if self.key_resend.due().is_some() => {
                    let answers = credential.as_ref().map_or(0, |c| c.answers());
                    if self.key_resend.fire(answers) {
                        tracing::debug!("the scheduler has not answered the node key yet; sending it again");
                        self.call_node_key().await;
                    }
                }
                _ = node_status.tick() => self.send_node_status().await,
                () = images_changed(self.node_images.as_mut()) => self.send_node_images().await,
                () = sleep_until(shutdown_by), if shutdown_by.is_some() => {
                    return if self.stop_fired { SessionEnd::Stopped } else { SessionEnd::Shutdown };
                }
            }
        }
    }

    /// Stops every pod within the shutdown grace period; returns when to
    /// give up waiting for acknowledgements.
    fn begin_shutdown(&mut self) -> Instant {
        let grace = self.env.shutdown_grace_period;
        // Pods get three quarters of the agent's grace period, which leaves
        // time for their terminal updates to reach the agent before it kills us.
        self.runtime.kill_all(grace.mul_f64(0.75));
        Instant::now() + grace.mul_f64(0.9)
    }

    /// Handles one event; returns true on SHUTDOWN.
    async fn handle(&mut self, event: Event) -> bool {
        match event.kind() {
            Some(event::Type::Subscribed) => {
                if let Some(sub) = event.subscribed {
                    self.agent_id = sub.agent_info.as_ref().and_then(|a| a.id.clone());
                    if let Some(agent) = &sub.agent_info {
                        self.runtime.set_node_name(&agent.hostname);
                    }
                    if self.streaming.is_none()
                        && let Some(credential) = &self.options.credential
                    {
                        self.streaming = crate::streaming::start(
                            &self.env,
                            sub.executor_info.as_ref(),
                            credential,
                            &self.options.containers,
                        );
                    }
                }
                self.send_node_key().await;
                self.send_node_images().await;
            }
            Some(event::Type::Launch) => match event.launch.and_then(|l| l.task) {
                Some(task) => self.launch(task),
                None => tracing::warn!("LAUNCH without a task"),
            },
            Some(event::Type::LaunchGroup) => {
                let tasks = event
                    .launch_group
                    .and_then(|g| g.task_group)
                    .map(|g| g.tasks);
                for task in tasks.unwrap_or_default() {
                    self.launch(task);
                }
            }
            Some(event::Type::Kill) => {
                if let Some(kill) = event.kill {
                    self.kill(kill);
                }
            }
            Some(event::Type::Acknowledged) => {
                if let Some(ack) = event.acknowledged {
                    self.unacked.acknowledge(ack.task_id.as_ref(), &ack.uuid);
                }
            }
            Some(event::Type::Shutdown) => {
                tracing::info!("SHUTDOWN: stopping every pod");
                return true;
            }
            Some(event::Type::Message) => {
                let data = event.message.map(|m| m.data).unwrap_or_default();
                let credential = self.options.credential.as_deref();
                if data == RESEND_STATUS_MESSAGE {
                    self.resend_statuses().await;
                } else if let Some(update) = crate::images_message::ImageUpdate::decode(&data) {
                    let task = update.task_id.clone();
                    if !self.runtime.update_images(update) {
                        tracing::info!(%task, "new images for a task that is not running here");
                    }
                } else if data == crate::apiclient::protocol::REGISTER_AGAIN_MESSAGE {
                    tracing::info!("a new scheduler asked for the node key");
                    self.send_node_key().await;
                    // Its Nodes know no images yet.
                    self.send_node_images().await;
                } else if !credential.is_some_and(|c| c.on_message(&data)) {
                    tracing::info!("MESSAGE from the scheduler (ignored)");
                }
            }
            Some(event::Type::Error) => {
                let message = event.error.map(|e| e.message).unwrap_or_default();
                tracing::error!(%message, "ERROR event from the agent");
            }
            Some(event::Type::Heartbeat) | Some(event::Type::Unknown) | None => {}
        }
        false
    }

    fn launch(&mut self, task: TaskInfo) {
        let Some(task_id) = task.task_id.clone() else {
            tracing::warn!("LAUNCH of a task without an id");
            return;
        };
        self.unacked.add_task(task.clone());
        if let Some(grace) = task.kill_policy.and_then(|k| k.grace_period) {
            self.kill_policies
                .insert(task_id.clone(), grace.to_duration());
        }
        let adopt = task
            .labels
            .as_ref()
            .is_some_and(|l| l.labels.iter().any(|l| l.key == ADOPT_LABEL));
        match PodPlan::from_task_data(task.data.as_deref()) {
            Ok(plan) => {
                let launched = if adopt {
                    self.runtime.adopt(task_id, plan)
                } else {
                    self.runtime.launch(task_id, plan)
                };
                if let Err(e) = launched {
                    tracing::warn!(error = %e, "duplicate LAUNCH ignored");
                }
            }
            Err(e) => {
                tracing::warn!(task = %task_id, error = %e, "refusing pod");
                self.runtime.reject(task_id, e.to_string());
            }
        }
    }

    fn kill(&mut self, kill: event::Kill) {
        let Some(task_id) = kill.task_id else {
            return;
        };
        let grace = kill
            .kill_policy
            .and_then(|k| k.grace_period)
            .map(|g| g.to_duration())
            .or_else(|| self.kill_policies.get(&task_id).copied());
        if !self.runtime.kill(&task_id, grace) {
            tracing::info!(task = %task_id, "KILL for a task that is not running here");
        }
    }
}

/// A random wait in `[0, d]`, as Mesos' executor library retries SUBSCRIBE
/// every random interval up to `MESOS_SUBSCRIPTION_BACKOFF_MAX`: executors
/// of one agent do not reconnect in lockstep, and one that slept while its
/// agent restarted still comes back within the agent's re-registration
/// timeout (the same value).
/// Completes when the credential wants its key sent again; never without one.
async fn reregister_wanted(credential: Option<&crate::apiclient::Credential>) {
    match credential {
        Some(c) => c.reregister_wanted().await,
        None => std::future::pending().await,
    }
}

fn jittered(d: Duration) -> Duration {
    let random = uuid::Uuid::new_v4().as_u128() as u64;
    d.mul_f64((random % 1_000_000) as f64 / 1_000_000.0)
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
