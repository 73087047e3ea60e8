//! The Mesos status → task state machine. Pure: no registry, no clock.
//!
//! # Mapping
//!
//! Each Mesos `TaskState`, with its source and reason, names a *target*
//! [`State`] ([`target_state`]):
//!
//! | Mesos | target |
//! |---|---|
//! | STAGING, STARTING | Pending |
//! | RUNNING | Running |
//! | KILLING | Killing |
//! | UNREACHABLE | Unreachable |
//! | LOST from the master, other reasons | Unreachable (it may come back) |
//! | LOST from the agent or executor | Finished (the agent is up and says it is gone) |
//! | LOST with a never-launched reason (invalid offers, invalid or unauthorized task, unknown resources, invalid framework id) or removed by the operator | Finished |
//! | UNKNOWN | Unknown |
//! | FINISHED, FAILED, KILLED, ERROR, DROPPED, GONE, GONE_BY_OPERATOR | Finished |
//!
//! # Transitions
//!
//! ```text
//!            STAGING, STARTING      RUNNING           KILLING
//!               ┌───┐               ┌───┐              ┌───┐
//!               ▼   │   RUNNING     ▼   │   KILLING    ▼   │
//!   new ───▶ Pending ──────────▶ Running ──────────▶ Killing
//!               │                                      ▲
//!               └─────────────── KILLING ──────────────┘
//!
//!   Pending, Running, Killing ── UNREACHABLE, LOST (partition) ──▶ Unreachable
//!   Pending, Running, Killing ── UNKNOWN ────────────────────────▶ Unknown
//!
//!   Unreachable ⇄ Unknown (UNKNOWN / UNREACHABLE, LOST)
//!   Unreachable, Unknown ── RUNNING ──▶ Running     the partition healed
//!   Unreachable, Unknown ── KILLING ──▶ Killing
//!   Unreachable, Unknown ── STAGING, STARTING ──▶ Pending   only if it never ran
//!
//!   any live state ── FINISHED, FAILED, KILLED, ERROR, DROPPED, GONE,
//!                     GONE_BY_OPERATOR, LOST (final) ──▶ Finished
//!   Finished ── anything ──▶ Finished (absorbed)
//!
//!   every other pair ──▶ refused: it would move the task backwards
//! ```
//!
//! - Any live state goes to Finished on a terminal update; Finished absorbs
//!   everything after (the earlier system panicked on FINISHED for a pending
//!   task: here that is an ordinary arrow).
//! - Any live state goes to Unreachable or Unknown. From there RUNNING
//!   brings it back: that is how Mesos reports a healed partition.
//! - A state the update repeats is a self-loop (every live state has one):
//!   applied, the state stays, the status details refresh.
//! - **Every other pair would move the task backwards** (RUNNING after
//!   KILLING, STARTING after RUNNING, STARTING after a partition of a task
//!   that had run) and is refused as stale, through one explicit arm of the
//!   transition function.
//!
//! # Order and duplicates
//!
//! Mesos has no per-task sequence number; the only order is the update's
//! `timestamp` (seconds since the epoch, set by whoever made the update:
//! the agent, or the master for reconciliation answers and partitions).
//!
//! - **Progress is a fact, whatever its timestamp.** A move forward
//!   (Pending → Running → Killing → Finished, and anything → Finished)
//!   is applied even when its timestamp is older than the newest applied
//!   one. It has to be: a master answers reconciliation with the *current*
//!   time, so an agent's FINISHED that waited for the acknowledgement of
//!   RUNNING can carry an older timestamp than a reconciliation RUNNING
//!   that overtook it. Refusing it would leave the task Running.
//! - **Every other move needs a timestamp no older than the newest
//!   applied**: into or out of Unreachable and Unknown, and self-loops. An
//!   old UNREACHABLE must not mark a running task partitioned, and an old
//!   RUNNING must not heal one. (Clocks of master and agents are compared
//!   here; they are assumed NTP-close.)
//! - Moves backwards are refused whatever their timestamp (see above).
//! - An update carrying the UUID of the last applied one is a redelivery
//!   (the agent retries until acknowledged), and so is a master update (no
//!   UUID) repeating the last applied state, reason and timestamp. Neither
//!   changes anything.

use std::time::SystemTime;

use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{TaskId, TaskState, TaskStatus};

use crate::state::State;
use crate::task::{LastStatus, PodTask, Progress, uuid_key};

/// The state an update of Mesos state `state`, from `source`, with `reason`,
/// asks for. Total: every combination has an answer.
pub fn target_state(state: TaskState, source: Option<Source>, reason: Option<Reason>) -> State {
    match state {
        TaskState::TaskStaging | TaskState::TaskStarting => State::Pending,
        TaskState::TaskRunning => State::Running,
        TaskState::TaskKilling => State::Killing,
        TaskState::TaskUnreachable => State::Unreachable,
        TaskState::TaskUnknown => State::Unknown,
        TaskState::TaskLost => lost_target(source, reason),
        TaskState::TaskFinished
        | TaskState::TaskFailed
        | TaskState::TaskKilled
        | TaskState::TaskError
        | TaskState::TaskDropped
        | TaskState::TaskGone
        | TaskState::TaskGoneByOperator => State::Finished,
    }
}

/// TASK_LOST is what a framework without PARTITION_AWARE gets in place of
/// UNREACHABLE, DROPPED, GONE and GONE_BY_OPERATOR alike; the reason and the
/// source tell them apart.
fn lost_target(source: Option<Source>, reason: Option<Reason>) -> State {
    let never_launched = matches!(
        reason,
        Some(
            Reason::ReasonInvalidOffers
                | Reason::ReasonTaskInvalid
                | Reason::ReasonTaskUnauthorized
                | Reason::ReasonTaskGroupInvalid
                | Reason::ReasonTaskGroupUnauthorized
                | Reason::ReasonResourcesUnknown
                | Reason::ReasonInvalidFrameworkid
        )
    );
    let removed_for_good = reason == Some(Reason::ReasonAgentRemovedByOperator);
    // An agent or executor reporting the loss is reachable by definition, so
    // this is not a partition: the task is gone (PARTITION_AWARE: GONE).
    let reported_by_agent = matches!(source, Some(Source::SourceAgent | Source::SourceExecutor));
    if never_launched || removed_for_good || reported_by_agent {
        State::Finished
    } else {
        State::Unreachable
    }
}

/// What the transition function decides for one (current state, target) pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Move to (or stay in) this state.
    To(State),
    /// The task is Finished: nothing moves it.
    Absorbed,
    /// The move would take the task back to where it has already been past.
    Regression,
}

/// The transition function. `progress` is the furthest the task has been
/// (see the diagram in the module docs).
pub(crate) fn step(current: State, progress: Progress, target: State) -> Step {
    use State::*;
    match (current, target) {
        (Finished, _) => Step::Absorbed,
        (_, Finished) => Step::To(Finished),
        (_, Unreachable) => Step::To(Unreachable),
        (_, Unknown) => Step::To(Unknown),
        (Pending, Pending) => Step::To(Pending),
        (Pending | Running, Running) => Step::To(Running),
        // The partition healed: the task is there after all, whatever it was
        // doing before (a kill that never arrived shows as RUNNING again).
        (Unreachable | Unknown, Running) => Step::To(Running),
        (Pending | Running | Killing | Unreachable | Unknown, Killing) => Step::To(Killing),
        // Partitioned while staging: it may still be staging.
        (Unreachable | Unknown, Pending) if progress == Progress::Pending => Step::To(Pending),
        // All other transitions move the task backwards: an old update that
        // arrived late or a master that lags the agent. Never applied.
        (Running | Killing | Unreachable | Unknown, Pending) | (Killing, Running) => {
            Step::Regression
        }
    }
}

/// Whether `from` → `next` is a move forward along Pending → Running →
/// Killing → Finished (which stays true of the task whenever it was seen).
fn is_progress(from: State, next: State) -> bool {
    next.is_terminal()
        || matches!((progress_of(from), progress_of(next)), (Some(a), Some(b)) if b > a)
}

fn progress_of(state: State) -> Option<Progress> {
    match state {
        State::Pending => Some(Progress::Pending),
        State::Running => Some(Progress::Running),
        State::Killing => Some(Progress::Killing),
        State::Unreachable | State::Unknown | State::Finished => None,
    }
}

/// A status update that cannot be applied to any task.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidStatus {
    /// `task_id` is absent or empty.
    #[error("status update without a task id")]
    MissingTaskId,
    /// `state` is a number this build does not know.
    #[error("status update for task {task_id} has unknown state number {number}")]
    UnknownState {
        /// The task it was for.
        task_id: TaskId,
        /// The number on the wire.
        number: i32,
    },
}

/// Why an update was not applied because of its order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StaleReason {
    /// Its timestamp is older than that of the newest applied update.
    OlderThanLastApplied {
        /// The newest applied timestamp (seconds since the epoch).
        last: f64,
        /// This update's timestamp.
        got: f64,
    },
    /// Applying it would move the task backwards.
    Regression {
        /// The task's state.
        from: State,
        /// The state the update asked for.
        to: State,
    },
}

/// A state change (or a self-loop) that was applied.
#[derive(Clone, Debug, PartialEq)]
pub struct Transition {
    /// The state before.
    pub previous: State,
    /// The state now.
    pub current: State,
    /// The task after the update.
    pub task: PodTask,
}

impl Transition {
    /// Whether the state moved (a self-loop still refreshes `last_status`).
    pub fn changed(&self) -> bool {
        self.previous != self.current
    }
}

/// What one status update did. Whatever it is, an update that carried a
/// UUID must still be acknowledged to Mesos, or the agent stops forwarding
/// that task's updates.
#[must_use]
#[derive(Clone, Debug, PartialEq)]
pub enum StatusOutcome {
    /// Applied: the state moved, or stayed with fresh status details.
    Applied(Transition),
    /// A redelivery of the update applied last. Nothing changed.
    Duplicate {
        /// The task, unchanged.
        task: PodTask,
    },
    /// Older than what was applied, or backwards. Nothing changed.
    Stale {
        /// The task, unchanged.
        task: PodTask,
        /// Why.
        why: StaleReason,
    },
    /// The task is Finished, which absorbs every update. Nothing changed.
    Absorbed {
        /// The task, unchanged.
        task: PodTask,
        /// The Mesos state the update reported.
        observed: TaskState,
    },
    /// The registry has no task with this id: the framework should reconcile
    /// (typically kill it). Nothing changed.
    UnknownTask {
        /// The id in the update.
        task_id: TaskId,
        /// The Mesos state the update reported.
        observed: TaskState,
    },
    /// The update is malformed. Nothing changed.
    Invalid(InvalidStatus),
}

impl StatusOutcome {
    /// The task the outcome is about, if the registry knows it.
    pub fn task(&self) -> Option<&PodTask> {
        match self {
            StatusOutcome::Applied(t) => Some(&t.task),
            StatusOutcome::Duplicate { task }
            | StatusOutcome::Stale { task, .. }
            | StatusOutcome::Absorbed { task, .. } => Some(task),
            StatusOutcome::UnknownTask { .. } | StatusOutcome::Invalid(_) => None,
        }
    }

    /// Whether the outcome changed the task's state.
    pub fn changed_state(&self) -> bool {
        matches!(self, StatusOutcome::Applied(t) if t.changed())
    }
}

/// A status update checked for shape: it names a task and a known state.
#[derive(Clone, Debug)]
pub(crate) struct Checked<'a> {
    pub(crate) task_id: &'a TaskId,
    pub(crate) state: TaskState,
    pub(crate) source: Option<Source>,
    pub(crate) reason: Option<Reason>,
    pub(crate) timestamp: Option<f64>,
    pub(crate) uuid: Option<&'a [u8]>,
    pub(crate) healthy: Option<bool>,
}

/// Checks the parts of `status` the machine depends on. Unknown sources and
/// reasons count as absent (newer masters add reasons; they must not make
/// an update unusable); an unknown state cannot be mapped and is invalid.
pub(crate) fn check(status: &TaskStatus) -> Result<Checked<'_>, InvalidStatus> {
    let task_id = status
        .task_id
        .as_ref()
        .filter(|id| !id.value.is_empty())
        .ok_or(InvalidStatus::MissingTaskId)?;
    let state = TaskState::try_from(status.state).map_err(|_| InvalidStatus::UnknownState {
        task_id: task_id.clone(),
        number: status.state,
    })?;
    Ok(Checked {
        task_id,
        state,
        source: status.source.and_then(|n| Source::try_from(n).ok()),
        reason: status.reason.and_then(|n| Reason::try_from(n).ok()),
        // NaN or infinity cannot be ordered: treat as no timestamp at all.
        timestamp: status.timestamp.filter(|t| t.is_finite()),
        uuid: status.uuid.as_deref().filter(|u| !u.is_empty()),
        healthy: status.healthy,
    })
}

/// What [`apply`] did to the task, without the task.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Applied {
    Moved { previous: State, current: State },
    Duplicate,
    Stale(StaleReason),
    Absorbed,
}

/// Applies one checked update to `task` in place. Only `Moved` changes it.
pub(crate) fn apply(task: &mut PodTask, update: &Checked<'_>, now: SystemTime) -> Applied {
    if is_duplicate(task, update) {
        return Applied::Duplicate;
    }
    if task.state.is_terminal() {
        return Applied::Absorbed;
    }
    let target = target_state(update.state, update.source, update.reason);
    let next = match step(task.state, task.order.progress, target) {
        Step::To(next) => next,
        Step::Absorbed => return Applied::Absorbed,
        Step::Regression => {
            return Applied::Stale(StaleReason::Regression {
                from: task.state,
                to: target,
            });
        }
    };
    // A reliable update that leaves the state as it is (fresh details: the
    // pod's readiness) is ordered against the other reliable ones only.
    // Master-made updates (reconciliation answers, a heal's
    // REASON_AGENT_REREGISTERED) carry the master's clock and no details:
    // an executor's report stamped a moment before such an answer, on
    // another host's clock, is still the newest word on its pod.
    let watermark = if update.uuid.is_some() && next == task.state {
        task.order.last_reliable_timestamp
    } else {
        task.order.last_timestamp
    };
    if let (Some(last), Some(got)) = (watermark, update.timestamp)
        && got < last
        && !is_progress(task.state, next)
    {
        return Applied::Stale(StaleReason::OlderThanLastApplied { last, got });
    }
    let previous = task.state;
    task.state = next;
    if let Some(p) = progress_of(next) {
        task.order.progress = task.order.progress.max(p);
    }
    if let Some(got) = update.timestamp {
        // Progress may carry an older timestamp; the watermark never goes back.
        task.order.last_timestamp = Some(task.order.last_timestamp.map_or(got, |l| l.max(got)));
        if update.uuid.is_some() {
            let last = task.order.last_reliable_timestamp;
            task.order.last_reliable_timestamp = Some(last.map_or(got, |l| l.max(got)));
        }
    }
    if let Some(uuid) = update.uuid {
        task.order.last_uuid = Some(uuid_key(uuid));
    }
    if next.is_terminal() {
        task.order.finished_at = Some(now);
    }
    task.last_status = Some(LastStatus {
        state: update.state,
        source: update.source,
        reason: update.reason,
        timestamp: update.timestamp,
        healthy: update.healthy,
    });
    task.updated = now;
    Applied::Moved {
        previous,
        current: next,
    }
}

fn is_duplicate(task: &PodTask, update: &Checked<'_>) -> bool {
    if let (Some(last), Some(got)) = (task.order.last_uuid, update.uuid) {
        return last == uuid_key(got);
    }
    // Master-made updates (reconciliation answers) carry no UUID: the same
    // state, reason and timestamp again is the same update again.
    match (&task.last_status, update.uuid) {
        (Some(last), None) => {
            update.timestamp.is_some()
                && last.timestamp == update.timestamp
                && last.state == update.state
                && last.reason == update.reason
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole pair table of [`step`]: every current state × every target
    /// × every progress, against the diagram.
    #[test]
    fn step_table_matches_the_diagram() {
        use State::*;
        let all_progress = [Progress::Pending, Progress::Running, Progress::Killing];
        for current in State::ALL {
            for target in State::ALL {
                for progress in all_progress {
                    let expected = match (current, target) {
                        (Finished, _) => Step::Absorbed,
                        (_, Finished | Unreachable | Unknown | Killing) => Step::To(target),
                        (Pending, Pending | Running) => Step::To(target),
                        (Running, Running) => Step::To(Running),
                        (Unreachable | Unknown, Running) => Step::To(Running),
                        (Unreachable | Unknown, Pending) if progress == Progress::Pending => {
                            Step::To(Pending)
                        }
                        _ => Step::Regression,
                    };
                    assert_eq!(
                        step(current, progress, target),
                        expected,
                        "{current} --{target}--> with progress {progress:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn lost_splits_by_source_and_reason() {
        use Reason::*;
        let master = Some(Source::SourceMaster);
        assert_eq!(
            target_state(TaskState::TaskLost, master, Some(ReasonAgentRemoved)),
            State::Unreachable
        );
        assert_eq!(
            target_state(TaskState::TaskLost, None, None),
            State::Unreachable
        );
        assert_eq!(
            target_state(TaskState::TaskLost, master, Some(ReasonReconciliation)),
            State::Unreachable
        );
        for r in [
            ReasonInvalidOffers,
            ReasonTaskInvalid,
            ReasonTaskUnauthorized,
            ReasonTaskGroupInvalid,
            ReasonTaskGroupUnauthorized,
            ReasonResourcesUnknown,
            ReasonInvalidFrameworkid,
            ReasonAgentRemovedByOperator,
        ] {
            assert_eq!(
                target_state(TaskState::TaskLost, master, Some(r)),
                State::Finished,
                "{r}"
            );
        }
        for s in [Source::SourceAgent, Source::SourceExecutor] {
            assert_eq!(
                target_state(TaskState::TaskLost, Some(s), Some(ReasonExecutorTerminated)),
                State::Finished
            );
        }
    }
}
