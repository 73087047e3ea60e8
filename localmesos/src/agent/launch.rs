//! Starting what an ACCEPT launched: command tasks (run by the agent
//! itself, as Mesos' command executor), custom executors (a child process
//! with the MESOS_* environment, then LAUNCH events once it subscribes), and
//! simulated tasks (no process at all).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use mesos::proto::executor::event as exev;
use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{ExecutorInfo, FrameworkId, TaskGroupInfo, TaskInfo, TaskState};
use mesos::resources::Resources;

use super::executors::{Executor, exec_event, exited, report, terminate};
use super::process;
use crate::master::{Shared, State};

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
        let ex = agent.executors.entry(key).or_insert_with(|| Executor {
            info: info.clone(),
            custom: true,
            resources: Resources::from_protos(info.resources.clone())
                .unwrap_or_default()
                .unallocated(),
            tasks: BTreeSet::new(),
            sub: None,
            generation: 0,
            queued: Vec::new(),
            process: None,
            sandbox: None,
            container_id: uuid::Uuid::new_v4().to_string(),
            shutting_down: false,
            unacked_launch: BTreeSet::new(),
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
        report(
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
                    report(
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

fn sandbox_for(cx: &Shared, agent_id: &str, fw: &str, exec: &str, container: &str) -> PathBuf {
    cx.work_dir
        .join("slaves")
        .join(agent_id)
        .join("frameworks")
        .join(fw)
        .join("executors")
        .join(exec)
        .join("runs")
        .join(container)
}

/// The MESOS_* environment of the reference (executor API docs).
fn executor_env(
    cx: &Shared,
    st: &State,
    agent_id: &str,
    fw: &str,
    exec: &str,
    sandbox: &Path,
) -> BTreeMap<String, String> {
    let checkpoint = st
        .frameworks
        .get(fw)
        .and_then(|f| f.info.checkpoint)
        .unwrap_or(false);
    let endpoint = st
        .agents
        .get(agent_id)
        .and_then(|a| a.endpoint)
        .map(|e| e.to_string())
        .unwrap_or_default();
    let dir = sandbox.display().to_string();
    let grace = cx.timing.executor_shutdown_grace;
    let mut env = BTreeMap::from([
        ("MESOS_FRAMEWORK_ID".to_owned(), fw.to_owned()),
        ("MESOS_EXECUTOR_ID".to_owned(), exec.to_owned()),
        ("MESOS_AGENT_ID".to_owned(), agent_id.to_owned()),
        ("MESOS_SLAVE_ID".to_owned(), agent_id.to_owned()),
        ("MESOS_DIRECTORY".to_owned(), dir.clone()),
        ("MESOS_SANDBOX".to_owned(), dir),
        ("MESOS_AGENT_ENDPOINT".to_owned(), endpoint),
        (
            "MESOS_CHECKPOINT".to_owned(),
            if checkpoint { "1" } else { "0" }.to_owned(),
        ),
        (
            "MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD".to_owned(),
            format!("{}ms", grace.as_millis()),
        ),
    ]);
    if checkpoint {
        env.insert("MESOS_RECOVERY_TIMEOUT".into(), "15mins".into());
        env.insert("MESOS_SUBSCRIPTION_BACKOFF_MAX".into(), "2secs".into());
    }
    env
}

/// Makes the sandbox and starts `command` in it; the agent hears of the
/// process's exit as executor `exec` (a command task's executor is named
/// after the task) of `container`.
#[allow(clippy::too_many_arguments)]
fn spawn_in_sandbox(
    cx: &Shared,
    command: mesos::proto::CommandInfo,
    env: BTreeMap<String, String>,
    sandbox: &Path,
    agent_id: &str,
    fw: &str,
    exec: &str,
    container: &str,
) -> std::io::Result<process::Handle> {
    process::make_sandbox(sandbox)?;
    let (agent, fw, exec, container) = (
        agent_id.to_owned(),
        fw.to_owned(),
        exec.to_owned(),
        container.to_owned(),
    );
    let me = cx.weak();
    process::spawn(
        &cx.rt,
        process::Spec {
            command,
            env,
            sandbox: sandbox.to_path_buf(),
        },
        move |exit| {
            if let Some(cx) = me.upgrade() {
                let mut st = cx.lock();
                exited(&cx, &mut st, &agent, &fw, &exec, &container, exit);
            }
        },
    )
}

/// A command task: the agent runs it itself, as Mesos' command executor.
fn start_command_task(cx: &Shared, st: &mut State, fw: &str, agent_id: &str, task: &TaskInfo) {
    let Some(task_id) = task.task_id.as_ref().map(|t| t.value.clone()) else {
        return;
    };
    let container_id = uuid::Uuid::new_v4().to_string();
    let sandbox = sandbox_for(cx, agent_id, fw, &task_id, &container_id);
    let mut env = executor_env(cx, st, agent_id, fw, &task_id, &sandbox);
    env.insert("MESOS_TASK_ID".into(), task_id.clone());
    let command = task.command.clone().unwrap_or_default();
    let spawned = spawn_in_sandbox(
        cx,
        command,
        env,
        &sandbox,
        agent_id,
        fw,
        &task_id,
        &container_id,
    );
    match spawned {
        Ok(handle) => {
            if let Some(agent) = st.agents.get_mut(agent_id) {
                agent.executors.insert(
                    (fw.to_owned(), task_id.clone()),
                    Executor {
                        info: ExecutorInfo {
                            executor_id: Some(mesos::proto::ExecutorId::new(task_id.clone())),
                            framework_id: Some(FrameworkId::new(fw)),
                            command: task.command.clone(),
                            name: Some(format!("Command Executor (Task: {task_id})")),
                            ..Default::default()
                        },
                        custom: false,
                        resources: Resources::new(),
                        tasks: BTreeSet::from([task_id.clone()]),
                        sub: None,
                        generation: 0,
                        queued: Vec::new(),
                        process: Some(handle),
                        sandbox: Some(sandbox),
                        container_id,
                        shutting_down: false,
                        unacked_launch: BTreeSet::new(),
                    },
                );
            }
            // Mesos' command executor reports TASK_STARTING before it
            // launches the command, then TASK_RUNNING; the second reaches
            // the scheduler once the first is acknowledged.
            report(
                cx,
                st,
                fw,
                &task_id,
                TaskState::TaskStarting,
                Source::SourceExecutor,
                None,
                "Starting the command",
            );
            report(
                cx,
                st,
                fw,
                &task_id,
                TaskState::TaskRunning,
                Source::SourceExecutor,
                None,
                "Command started",
            );
        }
        Err(e) => {
            report(
                cx,
                st,
                fw,
                &task_id,
                TaskState::TaskFailed,
                Source::SourceAgent,
                Some(Reason::ReasonContainerLaunchFailed),
                &format!("Failed to launch container: {e}"),
            );
        }
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
    let key = (l.framework_id.clone(), exec_id.clone());
    let ev = if l.group {
        let mut e = exec_event(exev::Type::LaunchGroup);
        e.launch_group = Some(exev::LaunchGroup {
            task_group: Some(TaskGroupInfo {
                tasks: l.tasks.clone(),
            }),
        });
        vec![e]
    } else {
        l.tasks
            .iter()
            .map(|t| {
                let mut e = exec_event(exev::Type::Launch);
                e.launch = Some(exev::Launch {
                    task: Some(t.clone()),
                });
                e
            })
            .collect()
    };
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
        let container_id = uuid::Uuid::new_v4().to_string();
        let sandbox = sandbox_for(cx, &l.agent_id, &l.framework_id, &exec_id, &container_id);
        let env = executor_env(cx, st, &l.agent_id, &l.framework_id, &exec_id, &sandbox);
        let command = info.command.clone().unwrap_or_default();
        let spawned = spawn_in_sandbox(
            cx,
            command,
            env,
            &sandbox,
            &l.agent_id,
            &l.framework_id,
            &exec_id,
            &container_id,
        );
        let handle = match spawned {
            Ok(h) => h,
            Err(e) => {
                for t in &task_ids {
                    report(
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
            agent.executors.insert(
                key.clone(),
                Executor {
                    info: info.clone(),
                    custom: true,
                    resources,
                    tasks: BTreeSet::new(),
                    sub: None,
                    generation: 0,
                    queued: Vec::new(),
                    process: Some(handle),
                    sandbox: Some(sandbox),
                    container_id: container_id.clone(),
                    shutting_down: false,
                    unacked_launch: BTreeSet::new(),
                },
            );
        }
        let (epoch, agent, fw, eid) = (
            st.epoch,
            l.agent_id.clone(),
            l.framework_id.clone(),
            exec_id.clone(),
        );
        cx.after(cx.timing.executor_registration_timeout, move |cx, st| {
            if st.epoch != epoch {
                return;
            }
            let waiting = st
                .agents
                .get(&agent)
                .and_then(|a| a.executors.get(&(fw.clone(), eid.clone())))
                .is_some_and(|e| e.container_id == container_id && e.generation == 0);
            if waiting {
                tracing::info!(
                    executor = eid,
                    "executor did not subscribe in time; killing it"
                );
                terminate(
                    cx,
                    st,
                    &agent,
                    &fw,
                    &eid,
                    Reason::ReasonExecutorRegistrationTimeout,
                    "Executor did not register in time",
                    None,
                );
            }
        });
    }
    if let Some(ex) = st
        .agents
        .get_mut(&l.agent_id)
        .and_then(|a| a.executors.get_mut(&key))
    {
        ex.tasks.extend(task_ids.iter().cloned());
        ex.unacked_launch.extend(task_ids.iter().cloned());
        for e in ev {
            ex.deliver(e);
        }
    }
}
