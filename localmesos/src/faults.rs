//! Fault injection: what tests can break, and how.
//!
//! Agent faults (remove, partition, heal), executor kills and master
//! restarts live with the code they break (`agent`, `master::subscribe`);
//! this module holds the knobs they share with the `/admin/` routes.

use std::sync::Arc;
use std::time::Duration;

use mesos::proto::task_status::Reason;
use serde::{Deserialize, Serialize};

use crate::agent::{self, executors, process::Exit};
use crate::error::Error;
use crate::master::Shared;

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

/// Partitions an agent (see [`agent::partition`]).
pub(crate) fn partition(cx: &Arc<Shared>, id: &str) -> Result<(), Error> {
    let mut st = cx.lock();
    agent::partition(cx, &mut st, id)
}

/// Heals an agent's partition.
pub(crate) fn heal(cx: &Arc<Shared>, id: &str) -> Result<(), Error> {
    let mut st = cx.lock();
    agent::heal(cx, &mut st, id)
}

/// Removes an agent for good.
pub(crate) fn remove(cx: &Arc<Shared>, id: &str) -> Result<(), Error> {
    let mut st = cx.lock();
    agent::remove(cx, &mut st, id)
}

/// Executor `exec` of framework `fw` on the agent, or which of them is unknown.
fn executor_mut<'a>(
    st: &'a mut crate::master::State,
    agent_id: &str,
    fw: &str,
    exec: &str,
) -> Result<&'a mut crate::agent::executors::Executor, Error> {
    st.agents
        .get_mut(agent_id)
        .ok_or_else(|| Error::UnknownAgent(agent_id.to_owned()))?
        .executors
        .get_mut(&(fw.to_owned(), exec.to_owned()))
        .ok_or_else(|| Error::UnknownExecutor {
            agent: agent_id.to_owned(),
            framework: fw.to_owned(),
            executor: exec.to_owned(),
        })
}

/// Kills an executor (or a command task's process) with SIGKILL; the agent
/// then reports its tasks as it does for any executor that dies.
pub(crate) fn kill_executor(
    cx: &Arc<Shared>,
    agent_id: &str,
    fw: &str,
    exec: &str,
) -> Result<(), Error> {
    let mut st = cx.lock();
    match executor_mut(&mut st, agent_id, fw, exec)?.process {
        Some(p) => p.kill(),
        None => executors::terminate(
            cx,
            &mut st,
            agent_id,
            fw,
            exec,
            Reason::ReasonExecutorTerminated,
            "Executor killed",
            Some(Exit::Signal(9)),
        ),
    }
    Ok(())
}

/// Drops an executor's event stream, as a broken agent connection would:
/// the executor sees its subscription end, and (with checkpointing)
/// re-subscribes with its unacknowledged tasks and updates.
pub(crate) fn disconnect_executor(
    cx: &Arc<Shared>,
    agent_id: &str,
    fw: &str,
    exec: &str,
) -> Result<(), Error> {
    let mut st = cx.lock();
    let ex = executor_mut(&mut st, agent_id, fw, exec)?;
    // Dropping the sender ends the HTTP stream.
    ex.sub = None;
    Ok(())
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
