//! Where agents' [`Report`]s become task state: the one door from the
//! agent side into the master. Each report is applied through the task
//! state machine and the reliable-update queue (`master::tasks`).

use mesos::proto::scheduler::{Event, event};
use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{AgentId, ExecutorId, TaskState};

use super::{Shared, State, executors, tasks};
use crate::agent::process::Exit;
use crate::agent::{ExecutorRef, Report};

/// Applies what an agent reported.
pub(crate) fn apply(cx: &Shared, st: &mut State, report: Report<'_>) {
    match report {
        Report::Update { executor, status } => executors::executor_update(cx, st, executor, status),
        Report::Message { executor, data } => message(st, executor, data),
        Report::Exited {
            executor,
            container_id,
            exit,
        } => exited(cx, st, executor, container_id, exit),
        Report::Killed { executor } => executors::terminate(
            cx,
            st,
            executor,
            Reason::ReasonExecutorTerminated,
            "Executor killed",
            Some(Exit::Signal(9)),
        ),
        Report::Disconnected {
            executor,
            generation,
        } => {
            if let Some(ex) = st
                .agents
                .get_mut(executor.agent_id)
                .and_then(|a| a.executors.get_mut(&executor.key()))
                && ex.sub.as_ref().is_some_and(|s| s.generation == generation)
            {
                ex.sub = None;
            }
        }
    }
}

/// An executor's MESSAGE goes to its scheduler.
fn message(st: &State, executor: ExecutorRef<'_>, data: Vec<u8>) {
    if let Some(f) = st.frameworks.get(executor.framework_id) {
        f.send(Event {
            r#type: Some(event::Type::Message as i32),
            message: Some(event::Message {
                agent_id: Some(AgentId::new(executor.agent_id)),
                executor_id: Some(ExecutorId::new(executor.executor_id)),
                data,
            }),
            ..Default::default()
        });
    }
}

/// A child ended: an executor or a command task.
fn exited(cx: &Shared, st: &mut State, executor: ExecutorRef<'_>, container: &str, exit: Exit) {
    let Some(ex) = st
        .agents
        .get(executor.agent_id)
        .and_then(|a| a.executors.get(&executor.key()))
    else {
        return;
    };
    if ex.container_id != container {
        return;
    }
    if ex.custom {
        let msg = format!("Executor terminated: {}", exit.describe());
        let reason = Reason::ReasonExecutorTerminated;
        executors::terminate(cx, st, executor, reason, &msg, Some(exit));
        return;
    }
    // The command executor: the task's fate is the command's exit.
    let (fw, task_id) = (executor.framework_id, executor.executor_id);
    let killed = st
        .frameworks
        .get(fw)
        .and_then(|f| f.tasks.get(task_id))
        .is_some_and(|t| t.kill_requested);
    let (state, reason) = match exit {
        _ if killed => (TaskState::TaskKilled, None),
        Exit::Code(0) => (TaskState::TaskFinished, None),
        _ => (
            TaskState::TaskFailed,
            Some(Reason::ReasonCommandExecutorFailed),
        ),
    };
    if let Some(agent) = st.agents.get_mut(executor.agent_id) {
        agent.executors.remove(&executor.key());
    }
    tasks::agent_update(
        cx,
        st,
        fw,
        task_id,
        state,
        Source::SourceExecutor,
        reason,
        &exit.describe(),
    );
}
