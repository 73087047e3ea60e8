//! The task registry: the framework's record of every pod task.
//!
//! # Guarantees
//!
//! - At most one *live* (not Finished) task per pod ([`PodKey`]), enforced
//!   atomically by [`Registry::register`], not by a check-then-insert.
//! - A task's state changes only through [`Registry::update_status`], which
//!   applies the state machine of [`crate::machine`]: total, idempotent,
//!   never backwards, Finished absorbing.
//! - Tasks go in and out as values: what a caller holds never changes
//!   under it, and a caller's copy never overwrites a newer state.
//!
//! # Caveats
//!
//! Reads may be stale the moment they return: another thread may apply a
//! status update right after. Decide on the outcome values the writes
//! return, not on an earlier read.

use std::time::SystemTime;

use mesos::proto::{TaskId, TaskStatus};

use crate::machine::StatusOutcome;
use crate::task::{PodKey, PodTask};

/// Why a task was not registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// The pod already has a live task.
    #[error("pod {pod} already has live task {existing}")]
    AlreadyLive {
        /// The pod.
        pod: PodKey,
        /// Its live task.
        existing: TaskId,
    },
    /// A task with this id is registered already.
    #[error("task {0} is registered already")]
    DuplicateTaskId(TaskId),
}

/// Why an update was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpdateError {
    /// No task with this id is registered.
    #[error("task {0} is not registered")]
    NotFound(TaskId),
    /// The update would move the task to another pod.
    #[error("task {id} belongs to pod {registered}, not {given}")]
    PodMismatch {
        /// The task.
        id: TaskId,
        /// The pod it is registered for.
        registered: Box<PodKey>,
        /// The pod the update named.
        given: Box<PodKey>,
    },
}

/// The store of pod tasks. Safe to share between threads (`Arc<dyn Registry>`).
pub trait Registry: Send + Sync {
    /// Adds `task` and returns it as stored.
    ///
    /// # Errors
    /// [`RegisterError::AlreadyLive`] if the pod has a live task (checked
    /// and claimed in one step), [`RegisterError::DuplicateTaskId`] if the id
    /// is taken. Nothing changes on error.
    fn register(&self, task: PodTask) -> Result<PodTask, RegisterError>;

    /// Removes the task; returns it if it was there.
    fn unregister(&self, id: &TaskId) -> Option<PodTask>;

    /// Stores the caller's changes to a registered task and returns the
    /// result. Taken from `task`: pod (same [`PodKey`]), roles, spec, offer,
    /// and `updated` if later. Flags are merged (a set flag stays set).
    /// The state and the status bookkeeping stay as stored: they belong to
    /// [`Registry::update_status`], and the caller's copy may be older.
    ///
    /// # Errors
    /// [`UpdateError::NotFound`], [`UpdateError::PodMismatch`]; nothing
    /// changes on error.
    fn update(&self, task: PodTask) -> Result<PodTask, UpdateError>;

    /// The task with this id.
    fn get(&self, id: &TaskId) -> Option<PodTask>;

    /// The pod's live task, if it has one.
    fn for_pod(&self, pod: &PodKey) -> Option<PodTask>;

    /// Every task `filter` accepts. The filter runs while part of the
    /// registry is locked: it must not call back into the registry.
    fn list(&self, filter: &dyn Fn(&PodTask) -> bool) -> Vec<PodTask>;

    /// Applies one Mesos status update (see [`StatusOutcome`]). Total: every
    /// input, however malformed or out of order, yields an outcome.
    fn update_status(&self, status: &TaskStatus, now: SystemTime) -> StatusOutcome;

    /// Removes finished tasks beyond the retention limits and returns them.
    fn gc(&self, now: SystemTime) -> Vec<PodTask>;

    /// How many tasks are registered, live or finished.
    fn len(&self) -> usize;

    /// Whether no task is registered.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
