//! An agent's executors: custom ones, and the built-in command executor of
//! each command task. The record holds what the agent runs (process,
//! sandbox, subscription, events waiting for it); which tasks it runs is
//! bookkeeping the master keeps in it.

use std::collections::BTreeSet;
use std::path::PathBuf;

use mesos::proto::executor::{Event as ExecEvent, event as exev};
use mesos::proto::{ExecutorInfo, KillPolicy, TaskId};
use mesos::resources::Resources;
use tokio::sync::mpsc;

use super::process;

/// An executor's live subscription.
pub(crate) struct ExecSub {
    pub(crate) tx: mpsc::UnboundedSender<ExecEvent>,
    pub(crate) generation: u64,
}

/// An executor on an agent: a custom one, or the built-in command executor
/// of one command task.
pub(crate) struct Executor {
    pub(crate) info: ExecutorInfo,
    pub(crate) custom: bool,
    /// The executor's own resources (unallocated form).
    pub(crate) resources: Resources,
    /// Its live tasks (the master adds and removes them).
    pub(crate) tasks: BTreeSet<String>,
    pub(crate) sub: Option<ExecSub>,
    pub(crate) generation: u64,
    /// Events for a custom executor that has not subscribed yet.
    pub(crate) queued: Vec<ExecEvent>,
    pub(crate) process: Option<process::Handle>,
    pub(crate) sandbox: Option<PathBuf>,
    pub(crate) container_id: String,
    pub(crate) shutting_down: bool,
    /// Task ids whose LAUNCH the executor has not acknowledged by an update.
    pub(crate) unacked_launch: BTreeSet<String>,
    /// Recovered from a checkpoint after an agent restart, not yet
    /// re-subscribed.
    pub(crate) recovered: bool,
}

/// An executor event of this type, fields to be filled in.
pub(crate) fn exec_event(kind: exev::Type) -> ExecEvent {
    ExecEvent {
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

impl Executor {
    /// A new executor of `container_id`, running no task yet and not
    /// subscribed.
    pub(crate) fn new(
        info: ExecutorInfo,
        custom: bool,
        resources: Resources,
        container_id: String,
        process: Option<process::Handle>,
        sandbox: Option<PathBuf>,
    ) -> Self {
        Executor {
            info,
            custom,
            resources,
            tasks: BTreeSet::new(),
            sub: None,
            generation: 0,
            queued: Vec::new(),
            process,
            sandbox,
            container_id,
            shutting_down: false,
            unacked_launch: BTreeSet::new(),
            recovered: false,
        }
    }

    /// Delivers an event now, or queues it until the executor subscribes.
    pub(crate) fn deliver(&mut self, ev: ExecEvent) {
        match &self.sub {
            Some(sub) if sub.tx.send(ev.clone()).is_ok() => {}
            _ => self.queued.push(ev),
        }
    }

    /// Drops a queued LAUNCH of `task_id` the executor never received.
    pub(crate) fn forget_launch(&mut self, task_id: &str) {
        self.queued.retain(|e| {
            e.launch
                .as_ref()
                .and_then(|l| l.task.as_ref())
                .and_then(|t| t.task_id.as_ref())
                .is_none_or(|t| t.value != task_id)
        });
    }

    /// Sends KILL of `task_id` to the executor.
    pub(crate) fn send_kill(&mut self, task_id: &str, policy: Option<KillPolicy>) {
        let mut e = exec_event(exev::Type::Kill);
        e.kill = Some(exev::Kill {
            task_id: Some(TaskId::new(task_id)),
            kill_policy: policy,
        });
        self.deliver(e);
    }

    /// Sends ACKNOWLEDGED of the update `uuid` of `task_id`.
    pub(crate) fn send_acknowledged(&mut self, task_id: TaskId, uuid: Vec<u8>) {
        let mut e = exec_event(exev::Type::Acknowledged);
        e.acknowledged = Some(exev::Acknowledged {
            task_id: Some(task_id),
            uuid,
        });
        self.deliver(e);
    }
}
