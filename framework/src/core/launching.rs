//! Launching and killing: which tasks are on their way to Mesos, the KILLs
//! held back for them, and the KILLs sent and not yet answered. The launch
//! itself (bindings, ACCEPTs and what their outcomes mean) is `launch`.
//!
//! # Order, which makes launching safe
//!
//! 1. The core registers each task (Pending + Launched) and takes the
//!    offers it used *before* it asks for the bindings
//!    ([`Effect::Bind`](super::Effect::Bind)): no later round can place on
//!    them or place the same pod again.
//! 2. Only once [`Launch::Bound`] says a pod's binding is durable does the
//!    core build its `TaskInfo` and ask for the ACCEPT
//!    ([`Effect::Accept`](super::Effect::Accept)). Mesos can only say
//!    something about a task after its ACCEPT, so the core always reads the
//!    binding before any update of the task.
//! 3. Until [`Launch::Accepted`], the task is *launching*: a KILL for it
//!    would reach Mesos before the LAUNCH and be lost, and reconciling it
//!    would make Mesos call it unknown; so the core holds such KILLs back
//!    until the ACCEPT is answered and leaves launching tasks out of
//!    explicit reconciliation.
//! 4. At most [`MAX_LAUNCHING`] pods are launching at once (two rounds: one
//!    is placed while the previous launches), which bounds the memory a
//!    burst holds in flight.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use mesos::proto::scheduler::{Call, call};
use mesos::proto::{DurationInfo, KillPolicy, OfferId, TaskId};
use registry::PodTask;

use super::Core;
use super::effect::{Effect, Reply};
use crate::admission::Changes;

/// Pods that may be launching (placed, ACCEPT not yet answered) at once:
/// two full rounds, so one round is placed while the previous launches.
pub const MAX_LAUNCHING: usize = 2 * super::schedule::MAX_ROUND;

/// What the runner reports of a launch's effects.
#[derive(Debug)]
pub enum Launch {
    /// The bindings of one [`Effect::Bind`](super::Effect::Bind): each
    /// bound pod as stored, or the error's text.
    Bound(Vec<(TaskId, Result<BoundPod, String>)>),
    /// The ACCEPTs of one [`Effect::Accept`](super::Effect::Accept), each
    /// with its offer, its tasks and how the master answered.
    Accepted(Vec<(OfferId, Vec<TaskId>, AcceptOutcome)>),
}

/// A pod whose binding is durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundPod {
    /// The bound pod's JSON as stored.
    pub json: Vec<u8>,
    /// Its resourceVersion, for the Scheduled event of a relaunch.
    pub rv: Option<u64>,
}

/// How the master answered an ACCEPT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcceptOutcome {
    /// 202: the master took the call (it may still drop tasks, with
    /// TASK_DROPPED).
    Taken,
    /// The call did not reach the master, or the master answered with an
    /// error status (413, 400, 503...): none of its tasks launched.
    Refused(String),
    /// The call was sent and no answer came back (the connection broke):
    /// its tasks may or may not have launched.
    Unknown(String),
}

/// Why a task is being killed, for the pod's status once it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillReason {
    /// The pod's reason (`Deleted`, `StartDeadlineExceeded`, ...).
    pub reason: String,
    /// The pod's message.
    pub message: String,
}

/// A task on its way to Mesos: what its launch needs after placement.
#[derive(Debug, Clone)]
pub(crate) struct InFlight {
    /// The offer it was placed on.
    pub(crate) offer: OfferId,
    /// When its pod was queued, for the scheduling latency.
    pub(crate) queued: SystemTime,
    /// What the admission hooks changed (a spec change goes into the pod
    /// the executor runs).
    pub(crate) changes: Changes,
    /// Launched again on the node its pod is bound to.
    pub(crate) relaunch: bool,
    /// The bound pod's resourceVersion, once bound.
    pub(crate) rv: Option<u64>,
}

/// Tasks on their way to Mesos, and KILLs.
#[derive(Debug, Default)]
pub(crate) struct Launching {
    /// Tasks placed whose ACCEPT is not answered yet.
    launching: HashMap<TaskId, InFlight>,
    /// KILLs held back until the task's ACCEPT is answered.
    held: HashMap<TaskId, (Duration, KillReason)>,
    /// Tasks a KILL was sent for, with when: resent if nothing happens.
    pub(crate) killing: HashMap<TaskId, SystemTime>,
    /// Why each killed task was killed.
    pub(crate) reasons: HashMap<TaskId, KillReason>,
    /// Adoption launches whose executor has not spoken yet, with the KILL
    /// held for each: an agent kills a task its registering executor has
    /// not received yet, and the containers that executor was to adopt
    /// would be left to their shims. Sent once the executor reports.
    pub(crate) unheard: HashMap<TaskId, Option<(Duration, KillReason)>>,
}

/// A launch that ended: what it was, and the KILL held back for it.
pub(crate) type Ended = (Option<InFlight>, Option<(Duration, KillReason)>);

impl Launching {
    /// How many tasks are launching.
    pub(crate) fn len(&self) -> usize {
        self.launching.len()
    }

    /// Whether the task's ACCEPT is under way.
    pub(crate) fn contains(&self, id: &TaskId) -> bool {
        self.launching.contains_key(id)
    }

    /// The task's launch, while it is under way.
    pub(crate) fn get_mut(&mut self, id: &TaskId) -> Option<&mut InFlight> {
        self.launching.get_mut(id)
    }

    /// The task is on its way to Mesos.
    pub(crate) fn start(&mut self, id: TaskId, flight: InFlight) {
        self.launching.insert(id, flight);
    }

    /// Ends a task's launch; returns it, and the KILL held back for it.
    pub(crate) fn end(&mut self, id: &TaskId) -> Ended {
        (self.launching.remove(id), self.held.remove(id))
    }

    /// A task is done: nothing to kill any more.
    pub(crate) fn forget_kill(&mut self, id: &TaskId) {
        self.killing.remove(id);
        self.reasons.remove(id);
        self.unheard.remove(id);
    }
}

impl Core {
    /// Asks Mesos to kill a task with a grace period, and remembers why. A
    /// task whose ACCEPT is under way gets its KILL once the ACCEPT is
    /// answered: a KILL never overtakes its LAUNCH.
    pub(super) fn kill(
        &mut self,
        task: &PodTask,
        grace: Duration,
        why: KillReason,
        now: SystemTime,
    ) {
        let held = self.launching.contains(&task.id);
        if held {
            self.launching
                .held
                .insert(task.id.clone(), (grace, why.clone()));
        }
        self.launching.reasons.insert(task.id.clone(), why.clone());
        self.launching.killing.insert(task.id.clone(), now);
        if held {
            return;
        }
        if let Some(slot) = self.launching.unheard.get_mut(&task.id) {
            *slot = Some((grace, why));
            return;
        }
        let call = Call {
            r#type: Some(call::Type::Kill as i32),
            kill: Some(call::Kill {
                task_id: Some(task.id.clone()),
                agent_id: task.spec.as_ref().map(|s| s.agent_id.clone()),
                kill_policy: Some(KillPolicy {
                    grace_period: Some(DurationInfo::from_duration(grace)),
                }),
            }),
            ..Default::default()
        };
        self.emit(Effect::Call(call, Reply::None));
    }
}
