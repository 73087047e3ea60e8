//! When the agent side checkpoints (`crate::agent::checkpoint`): the
//! master, the one writer of task state, calls these at each change a
//! restarted agent must know of, as Mesos' agent checkpoints before it acts
//! (an update is checkpointed before the executor gets its ACKNOWLEDGED).
//!
//! Only real agents of a persistent work dir checkpoint, and only for
//! frameworks with `FrameworkInfo.checkpoint`. A failed write is logged and
//! costs only recovery of that task or executor; the cluster goes on.

use mesos::proto::TaskStatus;

use super::{Shared, State};
use crate::agent::ExecutorRef;
use crate::agent::checkpoint::{self, CheckpointError, TaskRecord};
use crate::agent::process::ProcessId;

fn enabled(cx: &Shared, st: &State, agent_id: &str, framework_id: &str) -> bool {
    cx.persistent
        && st.agents.get(agent_id).is_some_and(|a| !a.simulated)
        && st
            .frameworks
            .get(framework_id)
            .is_some_and(super::Framework::checkpoints)
}

fn logged(what: &str, r: Result<(), CheckpointError>) {
    if let Err(e) = r {
        tracing::warn!(error = %e, "checkpointing {what} failed; it will not survive an agent restart");
    }
}

/// A custom executor was started: the framework, the executor, its process.
pub(crate) fn executor_started(
    cx: &Shared,
    st: &State,
    executor: ExecutorRef<'_>,
    container_id: &str,
    pid: Option<u32>,
) {
    if !enabled(cx, st, executor.agent_id, executor.framework_id) {
        return;
    }
    let (Some(fw), Some(ex)) = (
        st.frameworks.get(executor.framework_id),
        st.agents
            .get(executor.agent_id)
            .and_then(|a| a.executors.get(&executor.key())),
    ) else {
        return;
    };
    logged(
        "a framework",
        checkpoint::write_framework(&cx.work_dir, executor.agent_id, &fw.info),
    );
    let pid = pid.and_then(ProcessId::of);
    logged(
        "an executor",
        checkpoint::write_executor(&cx.work_dir, executor, container_id, &ex.info, pid),
    );
}

/// The executor subscribed (`http.marker`).
pub(crate) fn executor_subscribed(cx: &Shared, st: &State, executor: ExecutorRef<'_>) {
    if !enabled(cx, st, executor.agent_id, executor.framework_id) {
        return;
    }
    if let Some(ex) = st
        .agents
        .get(executor.agent_id)
        .and_then(|a| a.executors.get(&executor.key()))
        && ex.custom
    {
        logged(
            "a subscription",
            checkpoint::mark_subscribed(&cx.work_dir, executor, &ex.container_id),
        );
    }
}

/// The executor ended: its checkpoint goes.
pub(crate) fn executor_ended(cx: &Shared, executor: ExecutorRef<'_>) {
    if cx.persistent {
        logged(
            "an executor's end",
            checkpoint::remove_executor(&cx.work_dir, executor),
        );
    }
}

/// A task was given to its custom executor (`task.info`), or its updates
/// changed (`task.updates`); a finished, fully acknowledged task is
/// forgotten.
pub(crate) fn task_changed(cx: &Shared, st: &State, framework_id: &str, task_id: &str, new: bool) {
    // Every status update passes here: a cluster that checkpoints nothing
    // (tests, the benchmark) pays one branch.
    if !cx.persistent {
        return;
    }
    let Some(task) = st
        .frameworks
        .get(framework_id)
        .and_then(|f| f.tasks.get(task_id))
    else {
        return;
    };
    if !task.custom_executor || !enabled(cx, st, &task.agent_id.value, framework_id) {
        return;
    }
    let executor = ExecutorRef::new(&task.agent_id.value, framework_id, &task.executor_id.value);
    let Some(ex) = st
        .agents
        .get(executor.agent_id)
        .and_then(|a| a.executors.get(&executor.key()))
    else {
        return;
    };
    let cid = &ex.container_id;
    if new {
        let record = TaskRecord {
            task: task.info.clone(),
            role: task.role.clone(),
            resources: task.resources.to_protos(),
        };
        logged(
            "a task",
            checkpoint::write_task(&cx.work_dir, executor, cid, &record),
        );
    }
    if task.state.is_terminal() && task.pending.is_empty() {
        logged(
            "a finished task",
            checkpoint::remove_task(&cx.work_dir, executor, cid, task_id),
        );
        return;
    }
    let pending: Vec<TaskStatus> = task.pending.iter().cloned().collect();
    let acked = task
        .last_status
        .as_ref()
        .filter(|l| l.uuid.is_some() && !pending.iter().any(|p| p.uuid == l.uuid));
    logged(
        "a task's updates",
        checkpoint::write_updates(&cx.work_dir, executor, cid, task_id, acked, &pending),
    );
}
