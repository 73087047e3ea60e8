//! The scheduler core: a state machine that owns every decision and every
//! change of a task's state, and a thin runner that does its I/O.
//!
//! # Contract
//!
//! - **One writer.** Mesos updates, pod watch events, kubectl deletes,
//!   deadlines and debug actions all arrive as [`Input`]s on one channel;
//!   the [`Runner`] feeds them to [`Core::step`] one at a time. The core
//!   owns the registry (everyone else holds a [`registry::RegistryReader`])
//!   and decides every pod status; the runner only performs what it asks.
//! - **Sans-IO.** [`Core::step`] takes a [`Step`] and the time and returns
//!   the [`Effect`]s to perform: store writes, Mesos calls, admission, a
//!   round to launch. It awaits nothing, opens nothing and reads no clock;
//!   the results of effects come back as steps ([`Step::StatusWritten`],
//!   [`Step::Admitted`], [`Step::Called`], [`Input::Launch`]). The launch
//!   protocol is decided here too (`launch`): the runner binds and sends
//!   the ACCEPTs it is given, and reports what came back. So every
//!   behaviour can be tested by feeding steps and reading effects
//!   (`core/tests/`). Besides effects it updates in-memory observers only
//!   (metrics, the debug history, the agent directory).
//! - **Nothing launched twice.** A task is registered (Pending + Launched)
//!   and its pod bound durably *before* the ACCEPT is sent (see
//!   `launching`), and a pod whose launch may still land is launched again
//!   only once the master says it did not (see `launch`); the registry refuses a second live task for a pod, and a
//!   bound pod is queued only when Mesos says its task never reached it
//!   (see `relaunch`): then it goes back to its node, its new task's
//!   recovery annotations durable before the ACCEPT, with no second Binding.
//! - **ACK after durability.** A status update with a uuid is acknowledged
//!   only once the pod status it implies is in the store
//!   ([`Step::StatusWritten`]), so a crash in between makes Mesos resend it
//!   instead of losing it.
//! - **A KILL never overtakes its LAUNCH.** KILLs for a task whose ACCEPT
//!   is under way are held until [`Launch::Accepted`]; at most
//!   [`MAX_LAUNCHING`] pods (two rounds) are launching at once.
//! - **Idempotent.** Every handler can see the same input twice (replayed
//!   watch events, duplicate updates, restarts) and reach the same state.
//!
//! # A turn
//!
//! The runner drains up to [`MAX_BATCH`] queued inputs, steps each, steps
//! [`Step::Tick`] when the sweeps are due and [`Step::Schedule`], then
//! performs every effect of the turn at once: the store writes of one turn
//! run concurrently, so a burst of pods costs one group commit, not one
//! fsync per pod. Results are stepped as they come back until the turn is
//! quiet; a round's bindings and ACCEPTs run off the loop, and report back
//! as inputs, while the loop turns again.
//!
//! # Leadership
//!
//! Leader election fits as one more input and one guard, not a new code
//! path: losing the lease becomes [`Input::LeaseLost`], after which the core
//! asks for nothing but [`Effect::StepDown`], and [`Runner`]'s `perform`
//! (the one place effects leave the core) drops every effect of the turn
//! that saw it and ends the core ([`CoreError::LostLease`]). The fence
//! guards what was already in flight.

mod admit;
mod agents;
mod effect;
mod executors;
mod heal;
mod images;
mod launch;
mod launching;
mod leadership;
mod liveness;
mod maintenance;
mod node_images;
mod pending;
mod pods;
mod preempt;
mod recover;
mod relaunch;
mod runner;
mod schedule;
mod status;
mod subscription;
mod sweep;
#[cfg(test)]
mod tests;

pub use effect::{Accept, Bind, Effect, Placed, Reply, StatusWrite, Step, Write, Written};
pub(crate) use images::stale_json;
pub use launching::{AcceptOutcome, BoundPod, KillReason, Launch, MAX_LAUNCHING};
pub use liveness::NODE_MONITOR_GRACE_PERIOD;
pub use maintenance::EVICTION_RETRY;
pub use preempt::NOMINATION_SLACK;
pub use runner::{CoreParts, Runner};

use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;
use mesos::proto::FrameworkId;
use procurement::{Cursor, Placer};
use registry::{InMemoryRegistry, PodKey};

use crate::admission::Admission;
use crate::config::SchedulingConfig;
use crate::driver::DriverEvent;
use crate::logs::AgentDirectory;
use crate::observe::Observed;
use crate::offers::OfferStore;
use crate::queue::PodQueue;
use crate::reconcile::Reconciler;
use admit::Attempt;
use agents::Agents;
use images::ImageOrders;
use launching::Launching;
use liveness::Liveness;
use pending::Pending;
use subscription::Subscription;

/// Schedulers whose pods mesopod places: its own name and Kubernetes'
/// default, so pods written for any cluster run unchanged.
pub const SCHEDULER_NAMES: [&str; 2] = ["mesopod", "default-scheduler"];

/// Prefix of the meta keys (one per agent) holding the info each agent's
/// executor was launched with.
pub const EXECUTORS_KEY: &str = "mesopod/executor";

/// Inputs handled per turn of the loop before the sweeps and a scheduling
/// round run; bounds the latency a flood of updates adds to scheduling.
pub const MAX_BATCH: usize = 4096;

/// What the core reacts to, from outside.
#[derive(Debug)]
pub enum Input {
    /// From the Mesos driver.
    Driver(DriverEvent),
    /// A pod was added or changed in the store.
    PodUpsert(Arc<Pod>),
    /// A pod left the store.
    PodDeleted(Arc<Pod>),
    /// A pod that is bound and not being deleted changed (its status, most
    /// likely), and its containers' images are as its executor reports them:
    /// only its identity is decoded.
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
    /// This replica lost the leader lease (see `leadership`): the core
    /// answers [`Effect::StepDown`] and nothing, ever again.
    LeaseLost,
    /// A Node was cordoned (`spec.unschedulable`) or uncordoned, or its
    /// Mesos maintenance mark came or went: by name, which is its agent's
    /// hostname.
    NodeCordoned {
        /// The Node's name.
        node: String,
        /// Whether it is cordoned now.
        cordoned: bool,
        /// Whether it carries the maintenance taint (see `maintenance`).
        maintenance: bool,
    },
    /// A PodDisruptionBudget was written, or deleted: preemption spares the
    /// pods it protects where it can.
    DisruptionBudget {
        /// The budget as stored (its status says how many may go).
        budget: Arc<k8s_openapi::api::policy::v1::PodDisruptionBudget>,
        /// Whether it was deleted.
        deleted: bool,
    },
}

/// Why the core stopped.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// Another scheduler took over the framework id.
    #[error("another mesopod took over this framework ({0}); this one stops")]
    FailedOver(String),
    /// This replica lost the leader lease and stepped down.
    #[error("lost the leader lease; this replica stepped down")]
    LostLease,
    /// The store could not be read at start.
    #[error("cannot read the store: {0}")]
    Store(#[from] apiserver::ApiError),
    /// The core's task panicked (a bug).
    #[error("the scheduler core stopped unexpectedly: {0}")]
    Panicked(String),
}

/// What the core may read synchronously from the store: data that is
/// already there, never a write. The runner reads the real store; tests
/// give a fixed one.
pub trait Lookup: Send + Sync {
    /// A meta value (an executor info stored by an earlier mesopod).
    fn meta(&self, key: &str) -> Option<Vec<u8>>;
    /// Every pod, to find the pod that names a task Mesos reports and the
    /// registry does not know.
    fn pods(&self) -> Vec<Pod>;
    /// One pod as stored, if it is there (and is that pod, by uid).
    fn pod(&self, key: &PodKey) -> Option<Pod> {
        self.pods()
            .into_iter()
            .find(|p| PodKey::of(p).is_ok_and(|k| k == *key))
    }
}

/// What the core decides with: its settings and the parts it owns.
pub struct CoreConfig {
    /// The task registry; the core is its one writer.
    pub registry: InMemoryRegistry,
    /// The procurement pipeline with its scoring: where pods go.
    pub placer: Placer,
    /// Admission hooks (the core reads their settings; the runner runs them).
    pub admission: Admission,
    /// Pod resource rules (to show hooks what a pod will be charged).
    pub needs: procurement::PodResourcesProcurement,
    /// Scheduling settings.
    pub config: SchedulingConfig,
    /// Synchronous reads of the store.
    pub lookup: Box<dyn Lookup>,
    /// Agent addresses for the log source.
    pub directory: Arc<AgentDirectory>,
    /// Where the core's metrics and status history go.
    pub observed: Arc<Observed>,
}

/// The scheduler core: every decision, as a state machine (see the module
/// docs). Its state is split by job: the pending queue, launching and
/// kills, agents and executors, the subscription, the offers.
pub struct Core {
    registry: InMemoryRegistry,
    placer: Placer,
    admission: Admission,
    needs: procurement::PodResourcesProcurement,
    config: SchedulingConfig,
    lookup: Box<dyn Lookup>,
    directory: Arc<AgentDirectory>,
    observed: Arc<Observed>,

    pending: Pending,
    launching: Launching,
    agents: Agents,
    liveness: Liveness,
    /// The hostnames of cordoned Nodes: their agents take no pod that does not
    /// tolerate the cordon's taint.
    cordoned: std::collections::HashSet<String>,
    /// New images sent to executors of running pods.
    images: ImageOrders,
    subscription: Subscription,
    offers: OfferStore,
    /// Where the next placement scan starts, so pods spread over offers.
    cursor: Cursor,
    /// The round waiting for its admission answers.
    admitting: Option<Vec<Attempt>>,
    /// Nominations, budgets and the floor of running priorities.
    preemption: preempt::Preemption,
    /// Machines Mesos has scheduled for maintenance, being drained.
    maintenance: maintenance::Maintenance,
    /// What this step asks for.
    out: Vec<Effect>,
    /// The leader lease was lost: every step is ignored.
    stepped_down: bool,
}

impl Core {
    /// A core with an empty state.
    pub fn new(parts: CoreConfig) -> Self {
        let reconciler = Reconciler::new(parts.config.implicit_reconcile_interval);
        Core {
            offers: OfferStore::new(parts.config.offer_ttl),
            pending: Pending::default(),
            launching: Launching::default(),
            agents: Agents::default(),
            liveness: Liveness::default(),
            cordoned: std::collections::HashSet::new(),
            images: ImageOrders::default(),
            subscription: Subscription::new(reconciler),
            cursor: Cursor::default(),
            admitting: None,
            preemption: preempt::Preemption::default(),
            maintenance: maintenance::Maintenance::default(),
            out: Vec::new(),
            stepped_down: false,
            registry: parts.registry,
            placer: parts.placer,
            admission: parts.admission,
            needs: parts.needs,
            config: parts.config,
            lookup: parts.lookup,
            directory: parts.directory,
            observed: parts.observed,
        }
    }

    /// Applies one step at time `now` and returns what to do about it.
    #[must_use = "the effects are what the step decided"]
    pub fn step(&mut self, step: Step, now: SystemTime) -> Vec<Effect> {
        if self.stepped_down {
            // No longer the leader: whatever comes (a launch reporting back,
            // a late update, a tick) is another replica's business now.
            return Vec::new();
        }
        match step {
            Step::Input(input) => self.input(input, now),
            Step::Recovered(pods) => self.recover(pods, now),
            Step::Tick => self.sweep(now),
            Step::Schedule => self.schedule(now),
            Step::Admitted(outcomes) => self.admitted(outcomes, now),
            Step::StatusWritten { task, written, ack } => {
                self.on_status_written(&task, written, ack, now);
            }
            Step::Called { call, ok } => self.on_called(call, ok),
        }
        std::mem::take(&mut self.out)
    }

    fn input(&mut self, input: Input, now: SystemTime) {
        match input {
            Input::Driver(DriverEvent::FailedOver { message }) => self.emit(Effect::Stop(message)),
            Input::Driver(DriverEvent::Subscribed {
                framework_id,
                heartbeat,
                master,
            }) => self.on_subscribed(framework_id, heartbeat, master, now),
            Input::Driver(DriverEvent::Disconnected { reason }) => self.on_disconnected(&reason),
            Input::Driver(DriverEvent::Event(event)) => self.on_event(*event, now),
            Input::PodUpsert(pod) => self.on_pod(pod, now),
            Input::PodDeleted(pod) => self.on_pod_deleted(&pod, now),
            Input::PodSettled(key) => {
                self.pending.settled(&key);
                self.images_settled(&key);
            }
            Input::PodResync(pods) => self.on_resync(pods, now),
            Input::Launch(Launch::Bound(results)) => self.on_bound(results, now),
            Input::Launch(Launch::Accepted(results)) => self.on_accepted(results, now),
            Input::LeaseLost => self.on_lease_lost(),
            Input::DisruptionBudget { budget, deleted } => {
                self.preemption.budget(&budget, deleted);
            }
            Input::NodeCordoned {
                node,
                cordoned,
                maintenance,
            } => {
                if cordoned {
                    self.cordoned.insert(node.clone());
                } else {
                    self.cordoned.remove(&node);
                }
                self.node_marked(node, maintenance);
            }
            Input::Reconcile { explicit } => {
                if explicit {
                    self.start_explicit_reconciliation(now);
                } else {
                    self.subscription.reconciler.request_implicit();
                }
            }
        }
    }

    fn emit(&mut self, effect: Effect) {
        self.out.push(effect);
    }

    /// Pods queued, and live offers: for the turn's trace.
    pub fn load(&self) -> (usize, usize) {
        (self.pending.queue().len(), self.offers.len())
    }

    /// What the debug handlers and metrics show, as of `now`.
    pub fn snapshot(&self, now: SystemTime) -> crate::observe::Snapshot {
        crate::observe::Snapshot::take(&Observing { core: self, now })
    }
}

/// The core as the snapshot reads it.
struct Observing<'c> {
    core: &'c Core,
    now: SystemTime,
}

impl crate::observe::Source for Observing<'_> {
    fn offers(&self) -> &OfferStore {
        &self.core.offers
    }
    fn queue(&self) -> &PodQueue<PodKey> {
        self.core.pending.queue()
    }
    fn reconciler(&self) -> &Reconciler {
        &self.core.subscription.reconciler
    }
    fn framework_id(&self) -> Option<&FrameworkId> {
        self.core.subscription.framework_id.as_ref()
    }
    fn subscribed(&self) -> bool {
        self.core.subscription.subscribed
    }
    fn suppressed(&self) -> bool {
        self.core.subscription.suppressed
    }
    fn now(&self) -> SystemTime {
        self.now
    }
}
