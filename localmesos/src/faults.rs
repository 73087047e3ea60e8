//! Fault injection: the knobs tests turn, shared by the Rust API and the
//! `/admin/` routes.
//!
//! The faults themselves are applied by the master (`master::agents` for
//! agents and executors, `master::subscribe::restart`, `master::tasks` for
//! status updates), which stays the only writer of task state: a fault
//! changes what an agent does or reports, never a task directly.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Faults applied to the next reliable status updates sent to schedulers.
/// Counters are consumed in the order drop, duplicate, delay.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpdateFault {
    /// Drop this many sends (the retry delivers them later).
    pub drop: u32,
    /// Send this many updates twice.
    pub duplicate: u32,
    /// Hold this many sends back by `delay_ms`.
    pub delay: u32,
    /// How long a delayed send waits, in milliseconds.
    pub delay_ms: u64,
}

/// What to do with one send.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Action {
    Deliver,
    Drop,
    Duplicate,
    Delay(Duration),
}

impl UpdateFault {
    /// Consumes one unit of the first active fault.
    pub(crate) fn take_one(&mut self) -> Action {
        if self.drop > 0 {
            self.drop -= 1;
            Action::Drop
        } else if self.duplicate > 0 {
            self.duplicate -= 1;
            Action::Duplicate
        } else if self.delay > 0 {
            self.delay -= 1;
            Action::Delay(Duration::from_millis(self.delay_ms))
        } else {
            Action::Deliver
        }
    }
}

/// How a simulated master restart goes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RestartOptions {
    /// Keep frameworks, tasks and agents (as Mesos' replicated registry and
    /// re-registering agents do). `false`: a fresh cluster with the same
    /// agents (same ids), every task and executor gone, frameworks forgotten.
    pub keep_state: bool,
    /// How long scheduler calls get `503` after the restart, in milliseconds.
    pub recovery_ms: u64,
    /// After recovery, how long agents stay "re-registering" (explicit
    /// reconciliation of their tasks gets no answer meanwhile), in ms.
    pub agent_reregistration_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_are_consumed_one_send_at_a_time() {
        let mut f = UpdateFault {
            drop: 1,
            duplicate: 1,
            delay: 1,
            delay_ms: 5,
        };
        assert_eq!(f.take_one(), Action::Drop);
        assert_eq!(f.take_one(), Action::Duplicate);
        assert_eq!(f.take_one(), Action::Delay(Duration::from_millis(5)));
        assert_eq!(f.take_one(), Action::Deliver);
    }
}
