//! What the core reacts to besides its [`Input`]s (the results of effects
//! and the runner's ticks), and what it asks the runner to do.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{Event, Node, Pod, PodCondition, PodStatus};
use mesos::proto::scheduler::Call;
use mesos::proto::{OfferId, TaskStatus};
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

/// A round for a launch task: bind every pod, then ACCEPT.
#[derive(Debug, Clone)]
pub struct Round {
    /// The placements.
    pub placed: Vec<Placed>,
    /// The PodScheduled condition each binding sets: the core's, not the
    /// store's.
    pub condition: PodCondition,
    /// Executor infos to store (meta key, JSON), with the bindings.
    pub executors: BTreeMap<String, Vec<u8>>,
    /// When the round was placed.
    pub now: SystemTime,
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
    /// Hand a round to a launch task, which reports back as
    /// [`Input::Launch`].
    Launch(Round),
    /// Stop: another scheduler took over the framework.
    Stop(String),
    /// Stop: this replica lost the leader lease. Nothing else of the turn
    /// is performed.
    StepDown,
}
