//! Starting what an ACCEPT launched, and the statuses that follows: command
//! tasks (run by the agent itself, as Mesos' command executor), custom
//! executors (a child process with the MESOS_* environment, then LAUNCH
//! events once it subscribes), and simulated tasks (no process at all).
//! The agent makes sandboxes and processes (`crate::agent::launch`); their
//! exits come back as [`Report::Exited`] through [`reports::apply`].

use std::time::Duration;

use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{ExecutorInfo, FrameworkId, TaskInfo, TaskState};
use mesos::resources::Resources;

use super::{Shared, State, checkpoints, executors, reports, tasks};
use crate::agent::executors::Executor;
use crate::agent::launch::{self as agent_launch, EnvOf};
use crate::agent::{ExecutorRef, Report, process};

/// What an ACCEPT asks an agent to start.
pub(crate) struct Launch {
    pub(crate) framework_id: String,
    pub(crate) agent_id: String,
    /// `None` for command tasks.
    pub(crate) executor: Option<ExecutorInfo>,
    pub(crate) tasks: Vec<TaskInfo>,
    pub(crate) group: bool,
}

/// Starts the tasks of one LAUNCH / LAUNCH_GROUP; they are registered
/// (STAGING, resources held) by the caller.
pub(crate) fn launch(cx: &Shared, st: &mut State, l: Launch) {
    let Some(agent) = st.agents.get(&l.agent_id) else {
        return;
    };
    let simulated = agent.simulated;
    let task_duration = agent.task_duration;
    if simulated {
        simulate(cx, st, &l, task_duration);
        return;
    }
    match &l.executor {
        Some(info) if info.command.is_some() => start_custom(cx, st, &l, info.clone()),
        // Command tasks, and task groups for Mesos' default executor, which
        // localmesos stands in for by running each task's command itself.
        _ => {
            for task in &l.tasks {
                start_command_task(cx, st, &l.framework_id, &l.agent_id, task);
            }
        }
    }
}

/// Simulated agents: RUNNING at once, FINISHED after the set duration.
fn simulate(cx: &Shared, st: &mut State, l: &Launch, duration: Option<Duration>) {
    if let Some(info) = &l.executor
        && let Some(exec_id) = &info.executor_id
        && let Some(agent) = st.agents.get_mut(&l.agent_id)
    {
        let key = (l.framework_id.clone(), exec_id.value.clone());
        let ex = agent.executors.entry(key).or_insert_with(|| {
            let resources = Resources::from_protos(info.resources.clone())
                .unwrap_or_default()
                .unallocated();
            let container = uuid::Uuid::new_v4().to_string();
            Executor::new(info.clone(), true, resources, container, None, None)
        });
        for t in &l.tasks {
            if let Some(id) = &t.task_id {
                ex.tasks.insert(id.value.clone());
            }
        }
    }
    for t in &l.tasks {
        let Some(task_id) = t.task_id.as_ref().map(|i| i.value.clone()) else {
            continue;
        };
        tasks::agent_update(
            cx,
            st,
            &l.framework_id,
            &task_id,
            TaskState::TaskRunning,
            Source::SourceExecutor,
            None,
            "simulated",
        );
        if let Some(d) = duration {
            let (epoch, fw) = (st.epoch, l.framework_id.clone());
            cx.after(d, move |cx, st| {
                if st.epoch == epoch {
                    tasks::agent_update(
                        cx,
                        st,
                        &fw,
                        &task_id,
                        TaskState::TaskFinished,
                        Source::SourceExecutor,
                        None,
                        "simulated task finished",
                    );
                }
            });
        }
    }
}

/// Makes the sandbox of a new container of `executor` and starts `command`
/// in it with the MESOS_* environment (plus `extra_env`); the process's exit
/// is reported to this master.
fn spawn(
    cx: &Shared,
    st: &State,
    executor: ExecutorRef<'_>,
    command: mesos::proto::CommandInfo,
    (extra_env, custom): (&[(&str, &str)], bool),
) -> (String, std::path::PathBuf, std::io::Result<process::Handle>) {
    let container = uuid::Uuid::new_v4().to_string();
    let sandbox = agent_launch::sandbox_for(&cx.work_dir, executor, &container);
    let checkpoint = st
        .frameworks
        .get(executor.framework_id)
        .is_some_and(super::Framework::checkpoints);
    let mut env = agent_launch::executor_env(EnvOf {
        executor,
        sandbox: &sandbox,
        endpoint: st.agents.get(executor.agent_id).and_then(|a| a.endpoint),
        checkpoint,
        shutdown_grace: cx.timing.executor_shutdown_grace,
        recovery: (
            cx.timing.recovery_timeout,
            cx.timing.executor_reregistration_timeout,
        ),
    });
    for (k, v) in extra_env {
        env.insert((*k).to_owned(), (*v).to_owned());
    }
    if let Some(key) = &cx.security().jwt_secret_key {
        let token =
            crate::agent::token::mint(key, executor.framework_id, executor.executor_id, &container);
        env.insert(crate::agent::token::TOKEN_ENV.to_owned(), token);
    }
    let me = cx.weak();
    let spawned = agent_launch::spawn_in_sandbox(
        &cx.rt,
        command,
        env,
        &sandbox,
        // A checkpointing framework's custom executor outlives this
        // process: the next start recovers it.
        (executor, &container, checkpoint && custom),
        move |report: Report<'_>| {
            if let Some(cx) = me.upgrade() {
                let mut st = cx.lock();
                reports::apply(&cx, &mut st, report);
            }
        },
    );
    (container, sandbox, spawned)
}

/// A command task: the agent runs it itself, as Mesos' command executor.
fn start_command_task(cx: &Shared, st: &mut State, fw: &str, agent_id: &str, task: &TaskInfo) {
    let Some(task_id) = task.task_id.as_ref().map(|t| t.value.clone()) else {
        return;
    };
    let executor = ExecutorRef::new(agent_id, fw, &task_id);
    let command = task.command.clone().unwrap_or_default();
    let (container, sandbox, spawned) = spawn(
        cx,
        st,
        executor,
        command,
        (&[("MESOS_TASK_ID", &task_id)], false),
    );
    let update = |cx: &Shared, st: &mut State, state, source, reason, message: &str| {
        tasks::agent_update(cx, st, fw, &task_id, state, source, reason, message);
    };
    match spawned {
        Ok(handle) => {
            if let Some(agent) = st.agents.get_mut(agent_id) {
                let info = agent_launch::command_executor_info(fw, task, &task_id);
                let mut ex = Executor::new(
                    info,
                    false,
                    Resources::new(),
                    container,
                    Some(handle),
                    Some(sandbox),
                );
                ex.tasks.insert(task_id.clone());
                agent.executors.insert(executor.key(), ex);
            }
            // Mesos' command executor reports TASK_STARTING before it
            // launches the command, then TASK_RUNNING; the second reaches
            // the scheduler once the first is acknowledged.
            let source = Source::SourceExecutor;
            let starting = "Starting the command";
            update(cx, st, TaskState::TaskStarting, source, None, starting);
            update(
                cx,
                st,
                TaskState::TaskRunning,
                source,
                None,
                "Command started",
            );
        }
        Err(e) => update(
            cx,
            st,
            TaskState::TaskFailed,
            Source::SourceAgent,
            Some(Reason::ReasonContainerLaunchFailed),
            &format!("Failed to launch container: {e}"),
        ),
    }
}

/// A custom executor: reuse a live one, or start its process.
fn start_custom(cx: &Shared, st: &mut State, l: &Launch, mut info: ExecutorInfo) {
    let Some(exec_id) = info.executor_id.as_ref().map(|e| e.value.clone()) else {
        return;
    };
    if info.framework_id.is_none() {
        info.framework_id = Some(FrameworkId::new(l.framework_id.clone()));
    }
    let executor = ExecutorRef::new(&l.agent_id, &l.framework_id, &exec_id);
    let key = executor.key();
    let events = agent_launch::launch_events(&l.tasks, l.group);
    let task_ids: Vec<String> = l
        .tasks
        .iter()
        .filter_map(|t| t.task_id.as_ref().map(|i| i.value.clone()))
        .collect();
    let live = st
        .agents
        .get(&l.agent_id)
        .and_then(|a| a.executors.get(&key))
        .is_some_and(|e| !e.shutting_down);
    if !live {
        let command = info.command.clone().unwrap_or_default();
        let (container, sandbox, spawned) = spawn(cx, st, executor, command, (&[], true));
        let handle = match spawned {
            Ok(h) => {
                if let Some(pid) = h.pid {
                    crate::agent::cgroups::enter(&container, pid);
                }
                h
            }
            Err(e) => {
                for t in &task_ids {
                    tasks::agent_update(
                        cx,
                        st,
                        &l.framework_id,
                        t,
                        TaskState::TaskFailed,
                        Source::SourceAgent,
                        Some(Reason::ReasonContainerLaunchFailed),
                        &format!("Failed to launch executor: {e}"),
                    );
                }
                return;
            }
        };
        let resources = Resources::from_protos(info.resources.clone())
            .unwrap_or_default()
            .unallocated();
        if let Some(agent) = st.agents.get_mut(&l.agent_id) {
            let ex = Executor::new(
                info.clone(),
                true,
                resources,
                container.clone(),
                Some(handle),
                Some(sandbox),
            );
            agent.executors.insert(key.clone(), ex);
        }
        checkpoints::executor_started(cx, st, executor, &container, handle.pid);
        registration_timeout(cx, st, executor, container);
    }
    if let Some(ex) = st
        .agents
        .get_mut(&l.agent_id)
        .and_then(|a| a.executors.get_mut(&key))
    {
        ex.tasks.extend(task_ids.iter().cloned());
        ex.unacked_launch.extend(task_ids.iter().cloned());
        for e in events {
            ex.deliver(e);
        }
    }
    for t in &task_ids {
        checkpoints::task_changed(cx, st, &l.framework_id, t, true);
    }
}

/// Kills a new executor (`container`) that has not subscribed within the
/// registration timeout.
fn registration_timeout(cx: &Shared, st: &State, executor: ExecutorRef<'_>, container: String) {
    let (epoch, agent, fw, eid) = (
        st.epoch,
        executor.agent_id.to_owned(),
        executor.framework_id.to_owned(),
        executor.executor_id.to_owned(),
    );
    cx.after(cx.timing.executor_registration_timeout, move |cx, st| {
        if st.epoch != epoch {
            return;
        }
        let executor = ExecutorRef::new(&agent, &fw, &eid);
        let waiting = st
            .agents
            .get(&agent)
            .and_then(|a| a.executors.get(&executor.key()))
            .is_some_and(|e| e.container_id == container && e.generation == 0);
        if waiting {
            tracing::info!(
                executor = eid,
                "executor did not subscribe in time; killing it"
            );
            executors::terminate(
                cx,
                st,
                executor,
                Reason::ReasonExecutorRegistrationTimeout,
                "Executor did not register in time",
                None,
            );
        }
    });
}
