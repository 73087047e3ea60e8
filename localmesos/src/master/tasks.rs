//! The task state machine and reliable status updates.
//!
//! ```text
//!   STAGING ──▶ STARTING ──▶ RUNNING ──▶ KILLING ──▶ FINISHED | FAILED | KILLED
//!      │            │           │           │        ERROR | DROPPED | GONE…
//!      └────────────┴───────────┴───────────┴──▶ (any terminal state)
//!   any live state ──▶ UNREACHABLE ──▶ (back to that state on heal)
//! ```
//!
//! A terminal task takes no further update: all other transitions are
//! refused and the update is dropped, as Mesos' status update manager does.
//!
//! # Reliable delivery
//!
//! Updates that carry a uuid (from executors and agents) queue per task.
//! Only the head is in flight; it is resent with doubling backoff
//! (`status_update_retry_min` up to `_max`) until the scheduler
//! acknowledges its uuid, then the next goes out. Master-generated updates
//! (reconciliation, invalid offers, partitions) carry no uuid and are sent
//! once, outside the queue.

use std::collections::VecDeque;
use std::time::Duration;

use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{TaskState, TaskStatus};

use super::task::agent_status;
use super::{Framework, MAX_COMPLETED, Shared, State};
use crate::clock::now_secs;
use crate::faults::Action;

/// Whether a task in `from` may move to `to`.
pub(crate) fn transition_allowed(from: TaskState, to: TaskState) -> bool {
    use TaskState::*;
    match (from, to) {
        (f, _) if f.is_terminal() => false,
        // LOST is final for the framework; only terminal cleanup follows.
        (TaskLost, t) => t.is_terminal(),
        (_, TaskStaging) => false,
        _ => true,
    }
}

/// A status the agent (or its command executor) produces for a task: a new
/// reliable update, fed to [`status_update`]. Agents never call this; the
/// master does, for what they reported or what it runs on their behalf.
#[allow(clippy::too_many_arguments)]
pub(crate) fn agent_update(
    cx: &Shared,
    st: &mut State,
    framework_id: &str,
    task_id: &str,
    state: TaskState,
    source: Source,
    reason: Option<Reason>,
    message: &str,
) {
    let Some(task) = st
        .frameworks
        .get(framework_id)
        .and_then(|f| f.tasks.get(task_id))
    else {
        return;
    };
    let status = agent_status(task, state, source, reason, message);
    status_update(cx, st, framework_id, status);
}

/// Takes a status update from an agent or executor: moves the task, frees
/// its resources when terminal, and queues the update for reliable delivery.
/// Returns false when the update was refused (unknown task, or a move the
/// state machine forbids).
pub(crate) fn status_update(
    cx: &Shared,
    st: &mut State,
    framework_id: &str,
    mut status: TaskStatus,
) -> bool {
    super::drain::decorate(st, framework_id, &mut status);
    let Some(task_id) = status.task_id.as_ref().map(|t| t.value.clone()) else {
        return false;
    };
    let Ok(next) = TaskState::try_from(status.state) else {
        return false;
    };
    let Some(fw) = st.frameworks.get_mut(framework_id) else {
        return false;
    };
    let Some(task) = fw.tasks.get_mut(&task_id) else {
        return false;
    };
    // A retransmission of an update we already hold is not a new transition.
    if status.uuid.is_some() && task.pending.iter().any(|p| p.uuid == status.uuid) {
        return true;
    }
    if !transition_allowed(task.state, next) {
        tracing::debug!(task = task_id, from = %task.state, to = %next, "update refused");
        return false;
    }
    let was_terminal = task.state.is_terminal();
    task.state = next;
    task.statuses
        .push((next, status.timestamp.unwrap_or_else(now_secs)));
    task.last_status = Some(status.clone());
    let agent_id = task.agent_id.value.clone();
    let executor_id = task.executor_id.value.clone();
    let resources = task.resources.clone();
    let reliable = status.uuid.is_some();
    if reliable {
        task.pending.push_back(status.clone());
    }
    let first_in_queue = task.pending.len() == 1;
    // Freed resources wait for the next allocation round, as in Mesos.
    if next.is_terminal()
        && !was_terminal
        && let Some(agent) = st.agents.get_mut(&agent_id)
    {
        agent.used -= &resources;
        if let Some(ex) = agent
            .executors
            .get_mut(&(framework_id.to_owned(), executor_id))
        {
            ex.tasks.remove(&task_id);
        }
    }
    super::checkpoints::task_changed(cx, st, framework_id, &task_id, false);
    if reliable {
        if first_in_queue {
            forward_head(cx, st, framework_id, &task_id);
        }
    } else if let Some(fw) = st.frameworks.get(framework_id) {
        fw.send_update(status);
        complete_if_done(st, framework_id, &task_id);
        super::drain::check(cx, st, &agent_id);
    }
    true
}

/// Sends the head of a task's queue (fault injection applies here) and
/// arms its retry.
pub(crate) fn forward_head(cx: &Shared, st: &mut State, framework_id: &str, task_id: &str) {
    let epoch = st.epoch;
    // A partitioned agent cannot reach the master: its updates wait (the
    // retry timer keeps running) until the partition heals.
    let reachable = st
        .frameworks
        .get(framework_id)
        .and_then(|f| f.tasks.get(task_id))
        .and_then(|t| st.agents.get(&t.agent_id.value))
        .is_none_or(crate::agent::Agent::reachable);
    let fault = if reachable {
        st.update_fault.take_one()
    } else {
        Action::Drop
    };
    let Some(fw) = st.frameworks.get_mut(framework_id) else {
        return;
    };
    let Some(task) = fw.tasks.get_mut(task_id) else {
        return;
    };
    let Some(head) = task.pending.front().cloned() else {
        return;
    };
    if task.backoff.is_zero() {
        task.backoff = cx.timing.status_update_retry_min;
    }
    let backoff = task.backoff;
    deliver(cx, fw, head.clone(), fault);
    let (fw_id, t_id) = (framework_id.to_owned(), task_id.to_owned());
    cx.after(backoff, move |cx, st| {
        if st.epoch != epoch {
            return;
        }
        let Some(task) = st
            .frameworks
            .get_mut(&fw_id)
            .and_then(|f| f.tasks.get_mut(&t_id))
        else {
            return;
        };
        if task.pending.front().map(|p| &p.uuid) != Some(&head.uuid) {
            return;
        }
        task.backoff = (task.backoff * 2).min(cx.timing.status_update_retry_max);
        forward_head(cx, st, &fw_id, &t_id);
    });
}

/// Sends one update, unless a fault says otherwise.
fn deliver(cx: &Shared, fw: &Framework, status: TaskStatus, fault: Action) {
    match fault {
        Action::Deliver => {
            fw.send_update(status);
        }
        Action::Drop => tracing::info!(framework = %fw.id, "fault: status update dropped"),
        Action::Duplicate => {
            fw.send_update(status.clone());
            fw.send_update(status);
        }
        Action::Delay(d) => {
            let fw_id = fw.id.value.clone();
            cx.after(d, move |_, st| {
                if let Some(fw) = st.frameworks.get(&fw_id) {
                    fw.send_update(status);
                }
            });
        }
    }
}

/// The scheduler acknowledged `uuid` for a task: pop it, send the next.
pub(crate) fn acknowledge(
    cx: &Shared,
    st: &mut State,
    framework_id: &str,
    task_id: &str,
    uuid: &[u8],
) {
    let agent_id = super::drain::agent_of(st, framework_id, task_id);
    let Some(task) = st
        .frameworks
        .get_mut(framework_id)
        .and_then(|f| f.tasks.get_mut(task_id))
    else {
        return;
    };
    if task.pending.front().and_then(|p| p.uuid.as_deref()) != Some(uuid) {
        tracing::debug!(
            task = task_id,
            "acknowledgement for an update not in flight, ignored"
        );
        return;
    }
    task.pending.pop_front();
    task.backoff = Duration::ZERO;
    let emptied = task.pending.is_empty();
    super::checkpoints::task_changed(cx, st, framework_id, task_id, false);
    let Some(task) = st
        .frameworks
        .get_mut(framework_id)
        .and_then(|f| f.tasks.get_mut(task_id))
    else {
        return;
    };
    if emptied {
        // Most tasks sit acknowledged for their whole life: an emptied
        // queue's room for four updates was a kilobyte per task.
        task.pending = VecDeque::new();
        complete_if_done(st, framework_id, task_id);
        // Mesos checks a draining agent after every acknowledgement.
        if let Some(agent_id) = agent_id {
            super::drain::check(cx, st, &agent_id);
        }
    } else {
        forward_head(cx, st, framework_id, task_id);
    }
}

/// Moves a terminal task whose updates are all acknowledged to the
/// completed list.
pub(crate) fn complete_if_done(st: &mut State, framework_id: &str, task_id: &str) {
    let Some(fw) = st.frameworks.get_mut(framework_id) else {
        return;
    };
    let done = fw
        .tasks
        .get(task_id)
        .is_some_and(|t| t.state.is_terminal() && t.pending.is_empty());
    if done && let Some(task) = fw.tasks.remove(task_id) {
        fw.completed.push_back(task);
        while fw.completed.len() > MAX_COMPLETED {
            fw.completed.pop_front();
        }
    }
}

/// Resends the in-flight head of every task of a framework (after it
/// re-subscribed, so it does not wait for the next retry).
pub(crate) fn resend_in_flight(st: &State, framework_id: &str) {
    let ids: Vec<String> = st
        .frameworks
        .get(framework_id)
        .map(|f| {
            f.tasks
                .iter()
                .filter(|(_, t)| !t.pending.is_empty())
                .map(|(id, _)| id.clone())
                .collect()
        })
        .unwrap_or_default();
    for id in ids {
        if let Some(fw) = st.frameworks.get(framework_id)
            && let Some(head) = fw.tasks.get(&id).and_then(|t| t.pending.front())
        {
            fw.send_update(head.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_states_take_no_further_update() {
        assert!(!transition_allowed(
            TaskState::TaskFinished,
            TaskState::TaskRunning
        ));
        assert!(!transition_allowed(
            TaskState::TaskKilled,
            TaskState::TaskFailed
        ));
        assert!(transition_allowed(
            TaskState::TaskStaging,
            TaskState::TaskRunning
        ));
        assert!(transition_allowed(
            TaskState::TaskRunning,
            TaskState::TaskFinished
        ));
        assert!(transition_allowed(
            TaskState::TaskUnreachable,
            TaskState::TaskRunning
        ));
        assert!(!transition_allowed(
            TaskState::TaskRunning,
            TaskState::TaskStaging
        ));
        assert!(!transition_allowed(
            TaskState::TaskLost,
            TaskState::TaskRunning
        ));
    }
}
