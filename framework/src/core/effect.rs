//! What the core reacts to besides its [`Input`]s (the results of effects
//! and the runner's ticks), and what it asks the runner to do.

use std::sync::Arc;
use std::time::SystemTime;

use apiserver::Binding;
use k8s_openapi::api::core::v1::{Event, Node, Pod, PodStatus};
use mesos::proto::scheduler::Call;
use mesos::proto::{OfferId, TaskId, TaskStatus};
use registry::{PodKey, PodTask};

use super::Input;
use super::launching::KillReason;
use crate::admission::{Changes, Outcome, Request};

/// One input to [`super::Core::step`].
#[derive(Debug)]
pub enum Step {
    /// Something from outside (Mesos, the pod watch, a launch task, an operator).
    Input(Input),
    /// The pods in the store at start, with the recovery annotations that
    /// rebuild the registry.
    Recovered(Vec<Arc<Pod>>),
    /// Time for the sweeps (offer TTLs, deadlines, kill retries,
    /// reconciliation, retention, REVIVE/SUPPRESS).
    Tick,
    /// Time to place a scheduling round.
    Schedule,
    /// The admission hooks answered for the round asked for in
    /// [`Effect::Admit`], one outcome per request, in order.
    Admitted(Vec<Outcome>),
    /// A status write asked for in [`Effect::WriteStatus`] ended.
    StatusWritten {
        /// The task.
        task: Box<PodTask>,
        /// What came of it; `None` when the write failed (not durable).
        written: Option<Written>,
        /// The ACKNOWLEDGE to send now that the status is durable.
        ack: Option<Box<Call>>,
    },
    /// A REVIVE or SUPPRESS call ended.
    Called {
        /// Which call.
        call: Reply,
        /// Whether Mesos took it.
        ok: bool,
    },
}

/// Calls whose outcome the core wants back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Nothing: the runner logs a failure.
    None,
    /// A REVIVE: on success the core knows offers flow.
    Revive,
    /// A SUPPRESS: on success the core knows offers stop.
    Suppress,
}

/// What came of a durable status write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The pod is terminating and its task is done: it may go.
    pub finalize: bool,
    /// The pod just started RUNNING: when it was created.
    pub running_since: Option<SystemTime>,
}

/// One store write of an [`Effect::Store`] sequence.
#[derive(Debug, Clone)]
pub enum Write {
    /// Records an event; a failure is logged.
    Event(Box<Event>),
    /// Replaces a pod's status.
    PodStatus {
        /// The pod.
        key: PodKey,
        /// Its new status.
        status: Box<PodStatus>,
    },
    /// Removes a terminating pod once nothing runs for it.
    Finalize(PodKey),
    /// Creates or updates an agent's Node.
    Node(Box<Node>),
    /// Sets the pod's `Ready` condition False, keeping the rest of its
    /// status: its node stopped reporting (see `liveness`), at that time.
    PodNotReady(PodKey, SystemTime),
    /// Marks a preemption victim `DisruptionTarget` and deletes it with its
    /// own grace period (see `preempt`); its KILL follows from the delete.
    Preempt {
        /// The victim (its uid guards against a pod recreated by name).
        key: PodKey,
        /// The preemptor's scheduler, for the condition's message.
        scheduler: String,
    },
    /// Evicts a pod through the Eviction API, so its PodDisruptionBudget may
    /// refuse (see `maintenance`); a refusal is recorded on the Node.
    Evict {
        /// The pod (its uid guards against a pod recreated by name).
        key: PodKey,
        /// The Node being drained.
        node: String,
    },
    /// Marks a Node as under Mesos maintenance in the window, or clears the
    /// mark (`None`).
    NodeMaintenance {
        /// The Node.
        node: String,
        /// The window.
        window: Option<apiserver::MaintenanceWindow>,
    },
}

/// The pod status a Mesos update implies, to be written before the ACK.
#[derive(Debug, Clone)]
pub struct StatusWrite {
    /// The task, as the registry holds it after the update.
    pub task: Box<PodTask>,
    /// The update.
    pub status: TaskStatus,
    /// Why mesopod killed the task, for a Failed pod's reason.
    pub kill: Option<KillReason>,
    /// The ACKNOWLEDGE, once the write is durable.
    pub ack: Option<Box<Call>>,
}

/// A task placed this round, on its way to Mesos.
#[derive(Debug, Clone)]
pub struct Placed {
    /// The task, registered (Pending + Launched).
    pub task: PodTask,
    /// The offer it was placed on.
    pub offer: OfferId,
    /// When its pod was queued, for the scheduling latency.
    pub queued: SystemTime,
    /// What the admission hooks changed, persisted with the binding.
    pub changes: Changes,
    /// The pod is bound to this node already: its first task never reached
    /// Mesos (see `relaunch`). The launch writes the new task's recovery
    /// annotations instead of a second Binding.
    pub bound: bool,
}

/// One pod's durable binding, the first step of its launch.
#[derive(Debug, Clone)]
pub struct Bind {
    /// The task being launched.
    pub task: TaskId,
    /// The offer it goes on (for the record: only the core's ACCEPT uses it).
    pub offer: OfferId,
    /// Its pod.
    pub key: PodKey,
    /// What to write, with its preconditions (the pod's uid; for a pod
    /// launched again on its node, that it is bound there).
    pub binding: Binding,
}

/// One ACCEPT, for one offer: every task the core launches on it.
#[derive(Debug, Clone)]
pub struct Accept {
    /// The offer.
    pub offer: OfferId,
    /// The tasks it launches.
    pub tasks: Vec<TaskId>,
    /// The call, within the master's size limit.
    pub call: Call,
}

/// What the core asks the runner to do.
#[derive(Debug)]
pub enum Effect {
    /// Store writes in this order; separate `Store` effects of one turn run
    /// concurrently, so they share the store's group commits.
    Store(Vec<Write>),
    /// A pod status implied by a Mesos update. Writes for one pod run in
    /// the order given; the result comes back as [`Step::StatusWritten`].
    WriteStatus(Box<StatusWrite>),
    /// A call to Mesos (DECLINE, KILL, REVIVE, SUPPRESS, RECONCILE).
    Call(Call, Reply),
    /// An ACKNOWLEDGE: the status it acknowledges is durable. Sent without
    /// waiting; a lost one makes Mesos resend the update.
    Acknowledge(Call),
    /// Run the admission hooks, one request per pod; answer with
    /// [`Step::Admitted`].
    Admit(Vec<Request>),
    /// Bind these pods durably, concurrently, off the loop; report every
    /// outcome at once as [`Launch::Bound`](super::Launch::Bound). Each
    /// binding's `meta` is durable by then, with its binding or, if the
    /// binding failed, on its own: other pods on that agent may launch with
    /// it.
    Bind(Vec<Bind>),
    /// Send these ACCEPTs, concurrently, off the loop; report every outcome
    /// at once as [`Launch::Accepted`](super::Launch::Accepted).
    Accept(Vec<Accept>),
    /// Stop: another scheduler took over the framework.
    Stop(String),
    /// Stop: this replica lost the leader lease. Nothing else of the turn
    /// is performed.
    StepDown,
}
