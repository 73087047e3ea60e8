//! Helpers for task states and filters.

use super::{Filters, TaskState};

impl TaskState {
    /// Whether Mesos counts the state as terminal. LOST is not on the list:
    /// a lost task may turn up again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::TaskFinished
                | TaskState::TaskFailed
                | TaskState::TaskKilled
                | TaskState::TaskError
                | TaskState::TaskDropped
                | TaskState::TaskGone
                | TaskState::TaskGoneByOperator
        )
    }
}

impl Filters {
    /// Mesos' default refusal when no filter is given.
    pub const DEFAULT_REFUSE_SECONDS: f64 = 5.0;
    /// Mesos caps refusals at 365 days.
    pub const MAX_REFUSE_SECONDS: f64 = 31_536_000.0;

    /// The effective refusal, with Mesos' default and cap applied.
    pub fn effective_refuse_seconds(&self) -> f64 {
        match self.refuse_seconds {
            Some(s) if s.is_finite() && s >= 0.0 => s.min(Self::MAX_REFUSE_SECONDS),
            _ => Self::DEFAULT_REFUSE_SECONDS,
        }
    }
}
