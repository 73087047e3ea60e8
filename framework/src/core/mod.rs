//! The scheduler core: one task that owns every decision and every write of
//! a pod's status or a task's state.
//!
//! # Contract
//!
//! - **One writer.** Mesos updates, pod watch events, kubectl deletes,
//!   deadlines and debug actions all arrive as [`Input`]s on one channel;
//!   the core applies them one at a time. Sweeps (offer TTLs, start
//!   deadlines, reconciliation, GC) run inside the same loop and only turn
//!   time into work for it.
//! - **Nothing launched twice.** A task is registered (Pending + Launched)
//!   and its pod bound durably *before* the ACCEPT is sent; the registry
//!   refuses a second live task for a pod, and a bound pod is never queued.
//! - **ACK after durability.** A status update with a uuid is acknowledged
//!   only once the pod status it implies is in the store, so a crash in
//!   between makes Mesos resend it instead of losing it.
//! - **Idempotent.** Every handler can see the same input twice (replayed
//!   watch events, duplicate updates, restarts) and reach the same state.
//!
//! Within one turn of the loop the core drains every queued input, then
//! runs the sweeps, then places one scheduling round and hands it to a
//! launch task (bind, then ACCEPT) that reports back as an input, then
//! publishes a snapshot for the debug handlers. Store writes of one turn
//! run concurrently, so a burst of pods costs one group commit, not one
//! fsync per pod.

mod admit;
mod executors;
mod launching;
mod pods;
mod recover;
mod schedule;
mod status;
mod sweep;

pub use launching::{Launch, MAX_LAUNCHING};

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::SystemTime;

use apiserver::{Api, Clock};
use k8s_openapi::api::core::v1::Pod;
use mesos::proto::{FrameworkId, TaskId};
use procurement::{Cursor, Placer};
use registry::{InMemoryRegistry, PodKey};
use tokio::sync::mpsc;

use crate::admission::Admission;
use crate::config::SchedulingConfig;
use crate::driver::{DriverEvent, MesosHandle};
use crate::logs::AgentDirectory;
use crate::observe::Observed;
use crate::offers::OfferStore;
use crate::queue::PodQueue;
use crate::reconcile::Reconciler;

/// Schedulers whose pods mesopod places: its own name and Kubernetes'
/// default, so pods written for any cluster run unchanged.
pub const SCHEDULER_NAMES: [&str; 2] = ["mesopod", "default-scheduler"];

/// What the core reacts to.
#[derive(Debug)]
pub enum Input {
    /// From the Mesos driver.
    Driver(DriverEvent),
    /// A pod was added or changed in the store.
    PodUpsert(Arc<Pod>),
    /// A pod left the store.
    PodDeleted(Arc<Pod>),
    /// A pod that is bound and not being deleted changed (its status, most
    /// likely): only its identity is decoded.
    PodSettled(PodKey),
    /// The pod watch broke and was restarted from a fresh list.
    PodResync(Vec<Arc<Pod>>),
    /// A round's launch task reports its progress.
    Launch(Launch),
    /// An operator asked for reconciliation (debug action).
    Reconcile {
        /// Explicit (every live task) or implicit.
        explicit: bool,
    },
}

/// Why the core stopped.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// Another scheduler took over the framework id.
    #[error("another mesopod took over this framework ({0}); this one stops")]
    FailedOver(String),
    /// The store could not be read at start.
    #[error("cannot read the store: {0}")]
    Store(#[from] apiserver::ApiError),
    /// The core's task panicked (a bug).
    #[error("the scheduler core stopped unexpectedly: {0}")]
    Panicked(String),
}

/// Everything the core needs from outside.
pub struct CoreParts {
    /// The API shim (store).
    pub api: Api,
    /// Calls to Mesos.
    pub mesos: MesosHandle,
    /// The task registry, which the core owns: it is its one writer, and
    /// everyone else reads it through a [`registry::RegistryReader`].
    pub registry: InMemoryRegistry,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// The procurement pipeline with its scoring: where pods go.
    pub placer: Placer,
    /// Admission hooks.
    pub admission: Admission,
    /// Pod resource rules (to show hooks what a pod will be charged).
    pub needs: procurement::PodResourcesProcurement,
    /// Scheduling settings.
    pub config: SchedulingConfig,
    /// Agent addresses for the log source.
    pub directory: Arc<AgentDirectory>,
    /// Where the core publishes what the debug handlers show.
    pub observed: Arc<Observed>,
    /// The sending side of the core's own input channel (for the pod watch).
    pub inputs: mpsc::UnboundedSender<Input>,
}

/// What the core remembers of an agent.
#[derive(Debug, Clone)]
struct AgentInfo {
    hostname: String,
    /// The most of each scalar the agent has offered: its capacity, as far
    /// as offers tell.
    capacity: std::collections::BTreeMap<&'static str, f64>,
    /// Whether its Node has been written.
    written: bool,
}

/// Why a task is being killed, for the pod's status once it is.
#[derive(Debug, Clone)]
struct KillReason {
    reason: String,
    message: String,
}

/// The scheduler core.
pub struct Core {
    api: Api,
    mesos: MesosHandle,
    registry: InMemoryRegistry,
    clock: Arc<dyn Clock>,
    placer: Placer,
    admission: Admission,
    needs: procurement::PodResourcesProcurement,
    config: SchedulingConfig,
    directory: Arc<AgentDirectory>,
    observed: Arc<Observed>,
    inputs: mpsc::UnboundedSender<Input>,

    offers: OfferStore,
    queue: PodQueue<PodKey>,
    /// Unbound pods waiting in the queue, by key.
    waiting: HashMap<PodKey, Arc<Pod>>,
    reconciler: Reconciler,
    framework_id: Option<FrameworkId>,
    subscribed: bool,
    suppressed: bool,
    last_revive: Option<SystemTime>,
    agents: HashMap<String, AgentInfo>,
    kill_reasons: HashMap<TaskId, KillReason>,
    /// Tasks a KILL was sent for, with when: resent if nothing happens.
    killing: HashMap<TaskId, SystemTime>,
    /// Tasks placed whose ACCEPT is not answered yet (see `launching.rs`).
    launching: HashSet<TaskId>,
    /// KILLs held back until the task's ACCEPT is answered.
    held_kills: HashMap<TaskId, (std::time::Duration, KillReason)>,
    /// Where the next scheduling scan starts, so pods spread over offers.
    cursor: Cursor,
    /// The exact `ExecutorInfo` each agent's executor was launched with:
    /// Mesos refuses a task whose executor info differs from the running
    /// executor's, so a reused executor must be named identically.
    executors: HashMap<String, Arc<mesos::proto::ExecutorInfo>>,
    /// When the sweeps run next (they scan the registry: not every turn).
    next_sweep: std::time::Instant,
    /// When the debug snapshot is refreshed next.
    next_publish: std::time::Instant,
}

/// Prefix of the meta keys (one per agent) holding the info each agent's
/// executor was launched with.
pub const EXECUTORS_KEY: &str = "mesopod/executor";

impl Core {
    /// A core over `parts`.
    pub fn new(parts: CoreParts) -> Self {
        let reconciler = Reconciler::new(parts.config.implicit_reconcile_interval);
        Self {
            offers: OfferStore::new(parts.config.offer_ttl),
            queue: PodQueue::default(),
            waiting: HashMap::new(),
            reconciler,
            framework_id: None,
            subscribed: false,
            suppressed: false,
            last_revive: None,
            agents: HashMap::new(),
            kill_reasons: HashMap::new(),
            killing: HashMap::new(),
            launching: HashSet::new(),
            held_kills: HashMap::new(),
            cursor: Cursor::default(),
            executors: HashMap::new(),
            next_sweep: std::time::Instant::now(),
            next_publish: std::time::Instant::now(),
            api: parts.api,
            mesos: parts.mesos,
            registry: parts.registry,
            clock: parts.clock,
            placer: parts.placer,
            admission: parts.admission,
            needs: parts.needs,
            config: parts.config,
            directory: parts.directory,
            observed: parts.observed,
            inputs: parts.inputs,
        }
    }

    /// Runs until the input channel closes or the framework is taken over.
    ///
    /// # Errors
    /// [`CoreError::FailedOver`] when another scheduler took over;
    /// [`CoreError::Store`] when the store cannot be read at start.
    pub async fn run(
        mut self,
        mut inputs: mpsc::UnboundedReceiver<Input>,
    ) -> Result<(), CoreError> {
        self.recover().await?;
        self.publish();
        // Turn at least as often as the snapshot is due, so the debug
        // pages trail the core by one publish interval at most.
        let mut tick = tokio::time::interval(self.config.sweep_interval.min(PUBLISH_EVERY));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut batch = Vec::new();
        loop {
            tokio::select! {
                input = inputs.recv() => match input {
                    None => return Ok(()),
                    Some(first) => {
                        batch.push(first);
                        while batch.len() < MAX_BATCH {
                            match inputs.try_recv() {
                                Ok(more) => batch.push(more),
                                Err(_) => break,
                            }
                        }
                    }
                },
                _ = tick.tick() => {}
            }
            let t0 = std::time::Instant::now();
            let inputs_handled = batch.len();
            let mut updates = Vec::new();
            for input in batch.drain(..) {
                self.handle(input, &mut updates).await?;
            }
            let updates_applied = updates.len();
            let t1 = std::time::Instant::now();
            if !updates.is_empty() {
                self.apply_updates(updates).await;
            }
            let t2 = std::time::Instant::now();
            // Pacing is about CPU, not about the business clock: it reads
            // the monotonic clock, so a test's frozen clock cannot stop it.
            let pace = std::time::Instant::now();
            if pace >= self.next_sweep {
                self.next_sweep = pace + self.config.sweep_interval;
                self.sweep().await;
            }
            let t3 = std::time::Instant::now();
            let (queued, offers) = (self.queue.len(), self.offers.len());
            self.schedule().await;
            let t4 = std::time::Instant::now();
            // Where a turn's time went: the first thing to read when the
            // loop falls behind (RUST_LOG=mesopod::turns=trace).
            tracing::trace!(
                target: "mesopod::turns",
                inputs_handled,
                updates_applied,
                queued,
                offers,
                handle_us = (t1 - t0).as_micros() as u64,
                apply_us = (t2 - t1).as_micros() as u64,
                sweep_us = (t3 - t2).as_micros() as u64,
                schedule_us = (t4 - t3).as_micros() as u64,
                "turn"
            );
            if pace >= self.next_publish {
                self.next_publish = pace + PUBLISH_EVERY;
                self.publish();
            }
        }
    }

    async fn handle(
        &mut self,
        input: Input,
        updates: &mut Vec<mesos::proto::TaskStatus>,
    ) -> Result<(), CoreError> {
        match input {
            Input::Driver(DriverEvent::FailedOver { message }) => {
                return Err(CoreError::FailedOver(message));
            }
            Input::Driver(DriverEvent::Subscribed {
                framework_id,
                heartbeat,
                master,
            }) => self.on_subscribed(framework_id, heartbeat, master).await,
            Input::Driver(DriverEvent::Disconnected { reason }) => self.on_disconnected(&reason),
            Input::Driver(DriverEvent::Event(event)) => self.on_event(*event, updates).await,
            Input::PodUpsert(pod) => self.on_pod(pod).await,
            Input::PodDeleted(pod) => self.on_pod_deleted(&pod).await,
            Input::PodSettled(key) => self.forget_waiting(&key),
            Input::PodResync(pods) => self.on_resync(pods).await,
            Input::Launch(Launch::Bound(results)) => self.on_bound(results),
            Input::Launch(Launch::Done { launched, dropped }) => {
                self.on_launched(launched, &dropped).await;
                updates.extend(dropped);
            }
            Input::Reconcile { explicit } => {
                if explicit {
                    self.start_explicit_reconciliation();
                } else {
                    self.reconciler.request_implicit();
                }
            }
        }
        Ok(())
    }

    fn now(&self) -> SystemTime {
        self.clock.now()
    }

    /// Refreshes what the debug handlers and metrics show.
    fn publish(&self) {
        self.observed.publish(crate::observe::Snapshot::take(self));
    }
}

/// How often the debug snapshot is refreshed: a snapshot copies every
/// offer and queued pod, too much to do on every turn at scale, and a
/// person reading `/debug/` cannot tell 200 ms apart.
const PUBLISH_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// Inputs handled per turn of the loop before the sweeps and a scheduling
/// round run; bounds the latency a flood of updates adds to scheduling.
const MAX_BATCH: usize = 4096;

impl crate::observe::Source for Core {
    fn offers(&self) -> &OfferStore {
        &self.offers
    }
    fn queue(&self) -> &PodQueue<PodKey> {
        &self.queue
    }
    fn reconciler(&self) -> &Reconciler {
        &self.reconciler
    }
    fn framework_id(&self) -> Option<&FrameworkId> {
        self.framework_id.as_ref()
    }
    fn subscribed(&self) -> bool {
        self.subscribed
    }
    fn suppressed(&self) -> bool {
        self.suppressed
    }
    fn now(&self) -> SystemTime {
        Core::now(self)
    }
}
