//! RECONCILE (and the answer to KILL of an unknown task), per the table of
//! the reference:
//!
//! | task / agent                         | answer                  |
//! |--------------------------------------|-------------------------|
//! | task known                           | its state (see below)   |
//! | agent re-registering                 | none                    |
//! | agent registered, task unknown       | TASK_GONE               |
//! | agent unreachable                    | TASK_UNREACHABLE        |
//! | agent removed by the operator        | TASK_GONE_BY_OPERATOR   |
//! | agent unknown                        | TASK_UNKNOWN            |
//!
//! Without PARTITION_AWARE, UNREACHABLE, GONE, GONE_BY_OPERATOR, UNKNOWN
//! and DROPPED become TASK_LOST. A known task answers the state of the
//! update in flight when there is one, as Mesos does, so a scheduler never
//! learns a terminal state before it acknowledged what came before. Every
//! answer is SOURCE_MASTER, REASON_RECONCILIATION, without uuid.

use mesos::proto::scheduler::call::reconcile;
use mesos::proto::task_status::Reason;
use mesos::proto::{AgentId, TaskId, TaskState, TaskStatus};

use super::task::{Task, master_status};
use super::{Framework, State};
use crate::agent::AgentStatus;

/// What a framework without PARTITION_AWARE is told instead.
pub(crate) fn for_framework(state: TaskState, partition_aware: bool) -> TaskState {
    use TaskState::*;
    match state {
        TaskUnreachable | TaskGone | TaskGoneByOperator | TaskUnknown | TaskDropped
            if !partition_aware =>
        {
            TaskLost
        }
        s => s,
    }
}

fn known(task: &Task, aware: bool) -> TaskStatus {
    let state = task
        .pending
        .front()
        .and_then(|p| TaskState::try_from(p.state).ok())
        .unwrap_or(task.state);
    let tid = task.info.task_id.clone().unwrap_or_default();
    let mut s = master_status(
        &tid,
        Some(&task.agent_id),
        for_framework(state, aware),
        Reason::ReasonReconciliation,
        "Reconciliation: Latest task state",
    );
    if task.custom_executor {
        s.executor_id = Some(task.executor_id.clone());
    }
    if state == TaskState::TaskUnreachable {
        s.unreachable_time = task.unreachable_time;
    }
    s
}

/// The explicit answer for one task, or `None` when Mesos stays silent.
pub(crate) fn explicit(
    st: &State,
    fw: &Framework,
    task_id: &TaskId,
    agent_id: Option<&AgentId>,
) -> Option<TaskStatus> {
    let aware = fw.partition_aware();
    if let Some(task) = fw.tasks.get(&task_id.value) {
        return Some(known(task, aware));
    }
    let (state, unreachable) = match agent_id {
        Some(a) => match st.agents.get(&a.value).map(|a| a.status) {
            Some(AgentStatus::Reregistering) => return None,
            Some(AgentStatus::Active) => (TaskState::TaskGone, None),
            Some(AgentStatus::Unreachable(t)) => (TaskState::TaskUnreachable, Some(t)),
            Some(AgentStatus::Gone) => (TaskState::TaskGoneByOperator, None),
            None => (TaskState::TaskUnknown, None),
        },
        None => {
            if st
                .agents
                .values()
                .any(|a| a.status == AgentStatus::Reregistering)
            {
                return None;
            }
            (TaskState::TaskUnknown, None)
        }
    };
    let mut s = master_status(
        task_id,
        agent_id,
        for_framework(state, aware),
        Reason::ReasonReconciliation,
        "Reconciliation: Task is unknown",
    );
    s.unreachable_time = unreachable;
    Some(s)
}

/// RECONCILE: implicit when `tasks` is empty.
pub(crate) fn reconcile(st: &State, fw_id: &str, tasks: &[reconcile::Task]) {
    let Some(fw) = st.frameworks.get(fw_id) else {
        return;
    };
    let aware = fw.partition_aware();
    if tasks.is_empty() {
        for task in fw.tasks.values() {
            fw.send_update(known(task, aware));
        }
        return;
    }
    for t in tasks {
        let Some(task_id) = &t.task_id else { continue };
        if let Some(status) = explicit(st, fw, task_id, t.agent_id.as_ref()) {
            fw.send_update(status);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_states_become_lost_without_partition_awareness() {
        for s in [
            TaskState::TaskUnreachable,
            TaskState::TaskGone,
            TaskState::TaskGoneByOperator,
            TaskState::TaskUnknown,
            TaskState::TaskDropped,
        ] {
            assert_eq!(for_framework(s, false), TaskState::TaskLost);
            assert_eq!(for_framework(s, true), s);
        }
        assert_eq!(
            for_framework(TaskState::TaskRunning, false),
            TaskState::TaskRunning
        );
    }
}
