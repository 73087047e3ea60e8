//! The master's side of executors: what their subscriptions, updates,
//! kills, shutdowns and ends do to tasks. The agent runs the processes and
//! streams (`crate::agent`); every task status decided here goes through
//! [`tasks::agent_update`] or [`tasks::status_update`], so the state machine
//! and reliable delivery apply to it as to an executor's own updates.

use mesos::proto::executor::{Event as ExecEvent, event as exev};
use mesos::proto::scheduler::{Event, event};
use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{
    AgentId, ContainerId, ExecutorId, FrameworkId, KillPolicy, TaskState, TaskStatus,
};
use tokio::sync::mpsc;

use super::{Shared, State, tasks};
use crate::agent::ExecutorRef;
use crate::agent::executors::{ExecSub, exec_event};
use crate::agent::process::Exit;
use crate::clock::now_secs;

/// Ends a custom executor: its live tasks fail (or are killed, when a kill
/// was asked), its resources return, the scheduler gets FAILURE.
pub(crate) fn terminate(
    cx: &Shared,
    st: &mut State,
    executor: ExecutorRef<'_>,
    reason: Reason,
    message: &str,
    exit: Option<Exit>,
) {
    let ExecutorRef {
        agent_id,
        framework_id: fw,
        executor_id: exec,
    } = executor;
    let Some(agent) = st.agents.get_mut(agent_id) else {
        return;
    };
    let Some(ex) = agent.executors.remove(&executor.key()) else {
        return;
    };
    if let Some(p) = ex.process {
        // Whatever is left of it: its process group, and its cgroup subtree
        // (the pods it started), as Mesos destroys a container.
        p.kill();
    }
    crate::agent::cgroups::destroy(&cx.rt, &ex.container_id);
    super::checkpoints::executor_ended(cx, executor);
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
        tasks::agent_update(
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
                agent_id: Some(AgentId::new(agent_id)),
                executor_id: Some(ExecutorId::new(exec)),
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
    let killed =
        |cx: &Shared, st: &mut State, source: Source, reason: Option<Reason>, message: &str| {
            tasks::agent_update(
                cx,
                st,
                fw,
                task_id,
                TaskState::TaskKilled,
                source,
                reason,
                message,
            );
        };
    let Some(ex) = agent.executors.get_mut(&key) else {
        // Simulated command tasks, or a task whose executor is gone.
        killed(cx, st, Source::SourceAgent, None, "Task killed");
        return;
    };
    if simulated {
        ex.tasks.remove(task_id);
        killed(cx, st, Source::SourceExecutor, None, "Task killed");
        return;
    }
    if ex.custom {
        if ex.sub.is_none() {
            // Not yet registered: drop the queued launch, the agent answers.
            ex.forget_launch(task_id);
            ex.tasks.remove(task_id);
            killed(
                cx,
                st,
                Source::SourceAgent,
                Some(Reason::ReasonTaskKilledDuringLaunch),
                "Killed before the executor registered",
            );
        } else {
            ex.send_kill(task_id, policy);
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
        tasks::agent_update(
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
pub(crate) fn shutdown(cx: &Shared, st: &mut State, executor: ExecutorRef<'_>, quiet: bool) {
    let Some(agent) = st.agents.get_mut(executor.agent_id) else {
        return;
    };
    let key = executor.key();
    if quiet {
        if let Some(ex) = agent.executors.remove(&key) {
            agent.used -= &ex.resources;
            if let Some(p) = ex.process {
                p.kill();
            }
            crate::agent::cgroups::destroy(&cx.rt, &ex.container_id);
            super::checkpoints::executor_ended(cx, executor);
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
            executor,
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
            if let Some(task) = st
                .frameworks
                .get_mut(executor.framework_id)
                .and_then(|f| f.tasks.get_mut(&t))
            {
                task.kill_requested = true;
            }
        }
        p.terminate();
    }
    let Some(handle) = st
        .agents
        .get(executor.agent_id)
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

/// A status from an executor, after validation: stored, acknowledged to the
/// executor, and queued for the scheduler.
pub(crate) fn executor_update(
    cx: &Shared,
    st: &mut State,
    executor: ExecutorRef<'_>,
    mut status: TaskStatus,
) {
    status.agent_id = Some(AgentId::new(executor.agent_id));
    if status.executor_id.is_none() {
        status.executor_id = Some(ExecutorId::new(executor.executor_id));
    }
    if status.timestamp.is_none() {
        status.timestamp = Some(now_secs());
    }
    let task_id = status.task_id.clone().unwrap_or_default();
    let uuid = status.uuid.clone().unwrap_or_default();
    let terminal = TaskState::try_from(status.state).is_ok_and(TaskState::is_terminal);
    tasks::status_update(cx, st, executor.framework_id, status);
    if let Some(ex) = st
        .agents
        .get_mut(executor.agent_id)
        .and_then(|a| a.executors.get_mut(&executor.key()))
    {
        ex.unacked_launch.remove(&task_id.value);
        if terminal {
            ex.tasks.remove(&task_id.value);
        }
        ex.send_acknowledged(task_id, uuid);
    }
}

/// An executor's SUBSCRIBE: SUBSCRIBED, then the events queued before it
/// came, then the updates it says it sent but the master never stored
/// (`replay`; unacknowledged tasks already launched need nothing more).
/// Returns the stream and its generation, or why there is none.
pub(crate) fn subscribe(
    cx: &Shared,
    st: &mut State,
    executor: ExecutorRef<'_>,
    replay: Vec<TaskStatus>,
) -> Result<(mpsc::UnboundedReceiver<ExecEvent>, u64), &'static str> {
    let framework_info = st
        .frameworks
        .get(executor.framework_id)
        .map(|f| f.info.clone());
    let Some(agent) = st.agents.get_mut(executor.agent_id) else {
        return Err("Agent cannot be found");
    };
    let agent_info = agent.info();
    let Some(ex) = agent.executors.get_mut(&executor.key()) else {
        return Err("Executor cannot be found");
    };
    let (tx, rx) = mpsc::unbounded_channel();
    ex.generation += 1;
    let generation = ex.generation;
    let mut subscribed_exec = ex.info.clone();
    if subscribed_exec.framework_id.is_none() {
        subscribed_exec.framework_id = Some(FrameworkId::new(executor.framework_id));
    }
    let _ = tx.send(ExecEvent {
        r#type: Some(exev::Type::Subscribed as i32),
        subscribed: Some(exev::Subscribed {
            executor_info: Some(subscribed_exec),
            framework_info,
            agent_info: Some(agent_info),
            container_id: Some(ContainerId {
                value: ex.container_id.clone(),
                parent: None,
            }),
        }),
        ..Default::default()
    });
    for ev in ex.queued.drain(..) {
        let _ = tx.send(ev);
    }
    ex.sub = Some(ExecSub { tx, generation });
    ex.recovered = false;
    super::checkpoints::executor_subscribed(cx, st, executor);
    for status in replay {
        executor_update(cx, st, executor, status);
    }
    Ok((rx, generation))
}
