//! Launching and killing: which tasks are on their way to Mesos, the KILLs
//! held back for them, and the KILLs sent and not yet answered.
//!
//! # Order, which makes launching safe
//!
//! 1. The core registers each task (Pending + Launched) and takes the
//!    offers it used *before* it hands the round to a launch task: no later
//!    round can place on them or place the same pod again.
//! 2. The launch task binds every pod durably, then reports
//!    [`Launch::Bound`], then sends the ACCEPTs. Mesos can only say
//!    something about a task after its ACCEPT, so the core always reads
//!    the binding before any update of the task.
//! 3. Until [`Launch::Done`], the task is *launching*: a KILL for it would
//!    reach Mesos before the LAUNCH and be lost, and reconciling it would
//!    make Mesos call it unknown; so the core holds such KILLs back until
//!    the ACCEPT is answered and leaves launching tasks out of explicit
//!    reconciliation.
//! 4. At most [`MAX_LAUNCHING`] pods are launching at once (two rounds: one
//!    is placed while the previous launches), which bounds the memory a
//!    burst holds in flight (each carries its bound pod's JSON).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use mesos::proto::scheduler::{Call, call};
use mesos::proto::{DurationInfo, KillPolicy, TaskId, TaskStatus};
use registry::{Flag, PodTask, Registry};

use super::Core;
use super::effect::{Effect, Reply};

/// Pods that may be launching (placed, ACCEPT not yet answered) at once:
/// two full rounds, so one round is placed while the previous launches.
pub const MAX_LAUNCHING: usize = 2 * super::schedule::MAX_ROUND;

/// What a launch task reports to the core.
#[derive(Debug)]
pub enum Launch {
    /// The round's pods were bound, or could not be (the error's text).
    /// Sent before any ACCEPT of the round.
    Bound(Vec<(TaskId, Result<(), String>)>),
    /// The round's ACCEPTs were answered: none of its bound tasks is
    /// launching any more.
    Done {
        /// The tasks that were sent to Mesos and not refused.
        launched: Vec<TaskId>,
        /// TASK_DROPPED for the tasks of a failed ACCEPT.
        dropped: Vec<TaskStatus>,
    },
}

/// Why a task is being killed, for the pod's status once it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillReason {
    /// The pod's reason (`Deleted`, `StartDeadlineExceeded`, ...).
    pub reason: String,
    /// The pod's message.
    pub message: String,
}

/// Tasks on their way to Mesos, and KILLs.
#[derive(Debug, Default)]
pub(crate) struct Launching {
    /// Tasks placed whose ACCEPT is not answered yet.
    launching: HashSet<TaskId>,
    /// KILLs held back until the task's ACCEPT is answered.
    held: HashMap<TaskId, (Duration, KillReason)>,
    /// Tasks a KILL was sent for, with when: resent if nothing happens.
    pub(crate) killing: HashMap<TaskId, SystemTime>,
    /// Why each killed task was killed.
    pub(crate) reasons: HashMap<TaskId, KillReason>,
}

impl Launching {
    /// How many tasks are launching.
    pub(crate) fn len(&self) -> usize {
        self.launching.len()
    }

    /// Whether the task's ACCEPT is under way.
    pub(crate) fn contains(&self, id: &TaskId) -> bool {
        self.launching.contains(id)
    }

    /// The task is on its way to Mesos.
    pub(crate) fn start(&mut self, id: TaskId) {
        self.launching.insert(id);
    }

    /// Ends a task's launch; returns the KILL held back for it, if any.
    pub(crate) fn end(&mut self, id: &TaskId) -> Option<(Duration, KillReason)> {
        self.launching.remove(id);
        self.held.remove(id)
    }

    /// A task is done: nothing to kill any more.
    pub(crate) fn forget_kill(&mut self, id: &TaskId) {
        self.killing.remove(id);
        self.reasons.remove(id);
    }
}

impl Core {
    /// The bindings of a round: a bound task keeps only its pod's key, a
    /// pod that could not be bound loses its task and waits again as the
    /// store now has it (see `rebind`).
    pub(super) fn on_bound(&mut self, results: Vec<(TaskId, Result<(), String>)>, now: SystemTime) {
        for (id, result) in results {
            match result {
                Ok(()) => {
                    let Some(mut task) = self.registry.get(&id) else {
                        tracing::warn!(task = %id, "task vanished before launch");
                        continue;
                    };
                    // The executor gets the whole bound pod; the registry
                    // keeps what a launched task needs.
                    task.release_pod();
                    task.set(Flag::Bound);
                    if let Err(e) = self.registry.update(task) {
                        tracing::warn!(error = %e, "task vanished before launch");
                    }
                }
                Err(e) => {
                    tracing::info!(task = %id, error = %e, "pod could not be bound; not launching");
                    self.launching.end(&id);
                    let task = self.registry.get(&id);
                    self.registry.unregister(&id);
                    if let Some(task) = task {
                        self.rebind(&task, &e, now);
                    }
                }
            }
        }
    }

    /// A round's ACCEPTs were answered: its tasks are no longer launching,
    /// KILLs held back for the launched ones go out now, and those for
    /// dropped ones are moot (the drop ends the task, and is applied as an
    /// update).
    pub(super) fn on_launched(
        &mut self,
        launched: Vec<TaskId>,
        dropped: Vec<TaskStatus>,
        now: SystemTime,
    ) {
        for id in dropped.iter().filter_map(|s| s.task_id.as_ref()) {
            self.launching.end(id);
        }
        for id in launched {
            if let Some((grace, why)) = self.launching.end(&id)
                && let Some(task) = self.registry.get(&id)
            {
                self.kill(&task, grace, why, now);
            }
        }
        for status in dropped {
            self.on_update(status, now);
        }
    }

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
        self.launching.reasons.insert(task.id.clone(), why);
        self.launching.killing.insert(task.id.clone(), now);
        if held {
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
