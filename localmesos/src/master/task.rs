//! The record the master keeps of a task, and the statuses it sends about
//! one. Only the master writes these records (`master::tasks` moves them).

use std::collections::VecDeque;
use std::time::Duration;

use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{AgentId, ExecutorId, TaskInfo, TaskState, TaskStatus, TimeInfo};
use mesos::resources::Resources;

use crate::clock::now_secs;

/// A task the master tracks.
pub(crate) struct Task {
    pub(crate) info: TaskInfo,
    pub(crate) agent_id: AgentId,
    /// The executor running it (for command tasks, an internal one named
    /// after the task, as Mesos' command executor is).
    pub(crate) executor_id: ExecutorId,
    /// Whether the framework gave an executor (custom) or a command.
    pub(crate) custom_executor: bool,
    /// Unallocated form.
    pub(crate) resources: Resources,
    pub(crate) role: String,
    pub(crate) state: TaskState,
    /// The state before a partition, restored on heal.
    pub(crate) before_partition: Option<TaskState>,
    pub(crate) unreachable_time: Option<TimeInfo>,
    pub(crate) statuses: Vec<(TaskState, f64)>,
    pub(crate) last_status: Option<TaskStatus>,
    /// Reliable updates not yet acknowledged; the head is in flight.
    pub(crate) pending: VecDeque<TaskStatus>,
    pub(crate) backoff: Duration,
    pub(crate) kill_requested: bool,
}

impl Task {
    pub(crate) fn id(&self) -> &str {
        self.info.task_id.as_ref().map_or("", |t| t.value.as_str())
    }
}

/// The status the agent (or an executor) reports; `uuid` set means reliable.
pub(crate) fn agent_status(
    task: &Task,
    state: TaskState,
    source: Source,
    reason: Option<Reason>,
    message: impl Into<String>,
) -> TaskStatus {
    TaskStatus {
        task_id: task.info.task_id.clone(),
        state: state as i32,
        message: Some(message.into()),
        source: Some(source as i32),
        reason: reason.map(|r| r as i32),
        agent_id: Some(task.agent_id.clone()),
        executor_id: task.custom_executor.then(|| task.executor_id.clone()),
        timestamp: Some(now_secs()),
        uuid: Some(uuid::Uuid::new_v4().as_bytes().to_vec()),
        ..Default::default()
    }
}

/// A master-generated status: no uuid, never retried.
pub(crate) fn master_status(
    task_id: &mesos::proto::TaskId,
    agent_id: Option<&AgentId>,
    state: TaskState,
    reason: Reason,
    message: impl Into<String>,
) -> TaskStatus {
    TaskStatus {
        task_id: Some(task_id.clone()),
        state: state as i32,
        message: Some(message.into()),
        source: Some(Source::SourceMaster as i32),
        reason: Some(reason as i32),
        agent_id: agent_id.cloned(),
        timestamp: Some(now_secs()),
        ..Default::default()
    }
}
