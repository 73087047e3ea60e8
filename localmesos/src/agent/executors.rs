//! The agent's side of running tasks: delivering events to executors,
//! executor updates, kills, shutdowns and exits (starting them is `launch`).
//!
//! Every status an agent produces here goes through
//! [`tasks::status_update`], so the state machine and reliable delivery
//! apply to it as to an executor's own updates.

use std::collections::BTreeSet;
use std::path::PathBuf;

use mesos::proto::executor::{Event as ExecEvent, event as exev};
use mesos::proto::scheduler::{Event, event};
use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{ExecutorInfo, KillPolicy, TaskState, TaskStatus};
use mesos::resources::Resources;
use tokio::sync::mpsc;

use super::process::{self, Exit};
use crate::master::tasks::{self, agent_status};
use crate::master::{Shared, State};

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
}

/// An executor event of this type, fields to be filled in.
pub(crate) fn exec_event(kind: exev::Type) -> ExecEvent {
    ExecEvent {
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

impl Executor {
    /// Delivers an event now, or queues it until the executor subscribes.
    pub(crate) fn deliver(&mut self, ev: ExecEvent) {
        match &self.sub {
            Some(sub) if sub.tx.send(ev.clone()).is_ok() => {}
            _ => self.queued.push(ev),
        }
    }
}

/// Builds a status for a task and feeds it to the state machine.
#[allow(clippy::too_many_arguments)]
pub(crate) fn report(
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
    tasks::status_update(cx, st, framework_id, status);
}

/// A child ended: an executor or a command task.
pub(super) fn exited(
    cx: &Shared,
    st: &mut State,
    agent: &str,
    fw: &str,
    exec: &str,
    container: &str,
    exit: Exit,
) {
    let Some(ex) = st
        .agents
        .get(agent)
        .and_then(|a| a.executors.get(&(fw.to_owned(), exec.to_owned())))
    else {
        return;
    };
    if ex.container_id != container {
        return;
    }
    if ex.custom {
        let shutting_down = ex.shutting_down;
        let msg = format!("Executor terminated: {}", exit.describe());
        let reason = Reason::ReasonExecutorTerminated;
        let _ = shutting_down;
        terminate(cx, st, agent, fw, exec, reason, &msg, Some(exit));
        return;
    }
    // The command executor: the task's fate is the command's exit.
    let task_id = exec.to_owned();
    let killed = st
        .frameworks
        .get(fw)
        .and_then(|f| f.tasks.get(&task_id))
        .is_some_and(|t| t.kill_requested);
    let (state, reason) = match exit {
        _ if killed => (TaskState::TaskKilled, None),
        Exit::Code(0) => (TaskState::TaskFinished, None),
        _ => (
            TaskState::TaskFailed,
            Some(Reason::ReasonCommandExecutorFailed),
        ),
    };
    if let Some(agent) = st.agents.get_mut(agent) {
        agent.executors.remove(&(fw.to_owned(), exec.to_owned()));
    }
    report(
        cx,
        st,
        fw,
        &task_id,
        state,
        Source::SourceExecutor,
        reason,
        &exit.describe(),
    );
}

/// Ends a custom executor: its live tasks fail (or are killed, when a kill
/// was asked), its resources return, the scheduler gets FAILURE.
#[allow(clippy::too_many_arguments)]
pub(crate) fn terminate(
    cx: &Shared,
    st: &mut State,
    agent_id: &str,
    fw: &str,
    exec: &str,
    reason: Reason,
    message: &str,
    exit: Option<Exit>,
) {
    let Some(agent) = st.agents.get_mut(agent_id) else {
        return;
    };
    let Some(ex) = agent.executors.remove(&(fw.to_owned(), exec.to_owned())) else {
        return;
    };
    if exit.is_none()
        && let Some(p) = ex.process
    {
        p.kill();
    }
    agent.used -= &ex.resources;
    for task_id in &ex.tasks {
        let kill = st
            .frameworks
            .get(fw)
            .and_then(|f| f.tasks.get(task_id))
            .is_some_and(|t| t.kill_requested || ex.shutting_down);
        let state = if kill {
            TaskState::TaskKilled
        } else {
            TaskState::TaskFailed
        };
        report(
            cx,
            st,
            fw,
            task_id,
            state,
            Source::SourceAgent,
            Some(reason),
            message,
        );
    }
    if let Some(f) = st.frameworks.get(fw) {
        f.send(Event {
            r#type: Some(event::Type::Failure as i32),
            failure: Some(event::Failure {
                agent_id: Some(mesos::proto::AgentId::new(agent_id)),
                executor_id: Some(mesos::proto::ExecutorId::new(exec)),
                status: exit.map(Exit::wait_status),
            }),
            ..Default::default()
        });
    }
}

/// KILL for a live task.
pub(crate) fn kill_task(
    cx: &Shared,
    st: &mut State,
    fw: &str,
    task_id: &str,
    policy: Option<KillPolicy>,
) {
    let Some(task) = st
        .frameworks
        .get_mut(fw)
        .and_then(|f| f.tasks.get_mut(task_id))
    else {
        return;
    };
    task.kill_requested = true;
    let agent_id = task.agent_id.value.clone();
    let exec_id = task.executor_id.value.clone();
    let policy = policy.or(task.info.kill_policy);
    let Some(agent) = st.agents.get_mut(&agent_id) else {
        return;
    };
    let simulated = agent.simulated;
    let key = (fw.to_owned(), exec_id);
    let Some(ex) = agent.executors.get_mut(&key) else {
        // Simulated command tasks, or a task whose executor is gone.
        let _ = simulated;
        report(
            cx,
            st,
            fw,
            task_id,
            TaskState::TaskKilled,
            Source::SourceAgent,
            None,
            "Task killed",
        );
        return;
    };
    if simulated {
        ex.tasks.remove(task_id);
        report(
            cx,
            st,
            fw,
            task_id,
            TaskState::TaskKilled,
            Source::SourceExecutor,
            None,
            "Task killed",
        );
        return;
    }
    if ex.custom {
        if ex.sub.is_none() {
            // Not yet registered: drop the queued launch, the agent answers.
            ex.queued.retain(|e| {
                e.launch
                    .as_ref()
                    .and_then(|l| l.task.as_ref())
                    .and_then(|t| t.task_id.as_ref())
                    .is_none_or(|t| t.value != task_id)
            });
            ex.tasks.remove(task_id);
            report(
                cx,
                st,
                fw,
                task_id,
                TaskState::TaskKilled,
                Source::SourceAgent,
                Some(Reason::ReasonTaskKilledDuringLaunch),
                "Killed before the executor registered",
            );
        } else {
            let mut e = exec_event(exev::Type::Kill);
            e.kill = Some(exev::Kill {
                task_id: Some(mesos::proto::TaskId::new(task_id)),
                kill_policy: policy,
            });
            ex.deliver(e);
        }
        return;
    }
    // Command task: TERM, then KILL after the grace period.
    let Some(handle) = ex.process else { return };
    handle.terminate();
    let grace = policy
        .and_then(|p| p.grace_period)
        .map(|g| g.to_duration())
        .unwrap_or(cx.timing.task_kill_grace);
    let killing_state = st.frameworks.get(fw).is_some_and(|f| {
        f.info
            .has_capability(mesos::proto::framework_info::capability::Type::TaskKillingState)
    });
    if killing_state {
        report(
            cx,
            st,
            fw,
            task_id,
            TaskState::TaskKilling,
            Source::SourceExecutor,
            None,
            "Killing the task",
        );
    }
    let epoch = st.epoch;
    cx.after(grace, move |_, st| {
        if st.epoch == epoch {
            handle.kill();
        }
    });
}

/// SHUTDOWN of an executor: the event, then its process is killed after
/// the grace period. `quiet` removes it at once without task updates (for
/// tasks the framework was already told are lost).
pub(crate) fn shutdown(
    cx: &Shared,
    st: &mut State,
    agent_id: &str,
    fw: &str,
    exec: &str,
    quiet: bool,
) {
    let Some(agent) = st.agents.get_mut(agent_id) else {
        return;
    };
    let key = (fw.to_owned(), exec.to_owned());
    if quiet {
        if let Some(ex) = agent.executors.remove(&key) {
            agent.used -= &ex.resources;
            if let Some(p) = ex.process {
                p.kill();
            }
        }
        return;
    }
    let simulated = agent.simulated;
    let Some(ex) = agent.executors.get_mut(&key) else {
        return;
    };
    ex.shutting_down = true;
    if simulated || ex.process.is_none() {
        terminate(
            cx,
            st,
            agent_id,
            fw,
            exec,
            Reason::ReasonExecutorTerminated,
            "Executor shut down",
            None,
        );
        return;
    }
    if ex.custom {
        ex.deliver(exec_event(exev::Type::Shutdown));
    } else if let Some(p) = ex.process {
        for t in ex.tasks.clone() {
            if let Some(task) = st.frameworks.get_mut(fw).and_then(|f| f.tasks.get_mut(&t)) {
                task.kill_requested = true;
            }
        }
        p.terminate();
    }
    let Some(handle) = st
        .agents
        .get(agent_id)
        .and_then(|a| a.executors.get(&key))
        .and_then(|e| e.process)
    else {
        return;
    };
    let epoch = st.epoch;
    cx.after(cx.timing.executor_shutdown_grace, move |_, st| {
        if st.epoch == epoch {
            handle.kill();
        }
    });
}

/// Kills an executor's process with no grace (fault injection, agent
/// removal). The exit path reports its tasks unless the record is gone.
pub(crate) fn kill_process_only(st: &mut State, agent_id: &str, fw: &str, exec: &str) {
    if let Some(p) = st
        .agents
        .get(agent_id)
        .and_then(|a| a.executors.get(&(fw.to_owned(), exec.to_owned())))
        .and_then(|e| e.process)
    {
        p.kill();
    }
}

/// A status from an executor, after validation: stored, acknowledged to the
/// executor, and queued for the scheduler.
pub(crate) fn executor_update(
    cx: &Shared,
    st: &mut State,
    agent_id: &str,
    fw: &str,
    exec: &str,
    mut status: TaskStatus,
) {
    status.agent_id = Some(mesos::proto::AgentId::new(agent_id));
    if status.executor_id.is_none() {
        status.executor_id = Some(mesos::proto::ExecutorId::new(exec));
    }
    if status.timestamp.is_none() {
        status.timestamp = Some(crate::master::now_secs());
    }
    let task_id = status.task_id.clone().unwrap_or_default();
    let uuid = status.uuid.clone().unwrap_or_default();
    let terminal = TaskState::try_from(status.state).is_ok_and(TaskState::is_terminal);
    tasks::status_update(cx, st, fw, status);
    if let Some(ex) = st
        .agents
        .get_mut(agent_id)
        .and_then(|a| a.executors.get_mut(&(fw.to_owned(), exec.to_owned())))
    {
        ex.unacked_launch.remove(&task_id.value);
        if terminal {
            ex.tasks.remove(&task_id.value);
        }
        let mut e = exec_event(exev::Type::Acknowledged);
        e.acknowledged = Some(exev::Acknowledged {
            task_id: Some(task_id),
            uuid,
        });
        ex.deliver(e);
    }
}
