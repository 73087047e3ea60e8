//! The agent's side of tasks: starting executors and command tasks,
//! delivering events to executors, kills, shutdowns and exits.
//!
//! Every status an agent produces here goes through
//! [`tasks::status_update`], so the state machine and reliable delivery
//! apply to it as to an executor's own updates.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use mesos::proto::executor::{Event as ExecEvent, event as exev};
use mesos::proto::scheduler::{Event, event};
use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{
    ExecutorInfo, FrameworkId, KillPolicy, TaskGroupInfo, TaskInfo, TaskState, TaskStatus,
};
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

impl Executor {
    /// Delivers an event now, or queues it until the executor subscribes.
    pub(crate) fn deliver(&mut self, ev: ExecEvent) {
        match &self.sub {
            Some(sub) if sub.tx.send(ev.clone()).is_ok() => {}
            _ => self.queued.push(ev),
        }
    }
}

/// What an ACCEPT asks an agent to start.
pub(crate) struct Launch {
    pub(crate) framework_id: String,
    pub(crate) agent_id: String,
    /// `None` for command tasks.
    pub(crate) executor: Option<ExecutorInfo>,
    pub(crate) tasks: Vec<TaskInfo>,
    pub(crate) group: bool,
}

fn event(kind: exev::Type) -> ExecEvent {
    ExecEvent {
        r#type: Some(kind as i32),
        ..Default::default()
    }
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
    sandbox: &std::path::Path,
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
    let spawned = process::make_sandbox(&sandbox).and_then(|()| {
        let (agent, fwc, tid, cid) = (
            agent_id.to_owned(),
            fw.to_owned(),
            task_id.clone(),
            container_id.clone(),
        );
        let me = cx.arc();
        process::spawn(
            &cx.rt,
            process::Spec {
                command,
                env,
                sandbox: sandbox.clone(),
            },
            move |exit| {
                if let Some(cx) = me {
                    let mut st = cx.lock();
                    exited(&cx, &mut st, &agent, &fwc, &tid, &cid, exit);
                }
            },
        )
    });
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
        let mut e = event(exev::Type::LaunchGroup);
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
                let mut e = event(exev::Type::Launch);
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
        let (agent, fwc, eid, cid) = (
            l.agent_id.clone(),
            l.framework_id.clone(),
            exec_id.clone(),
            container_id.clone(),
        );
        let me = cx.arc();
        let spawned = process::make_sandbox(&sandbox).and_then(|()| {
            process::spawn(
                &cx.rt,
                process::Spec {
                    command,
                    env,
                    sandbox: sandbox.clone(),
                },
                move |exit| {
                    if let Some(cx) = me {
                        let mut st = cx.lock();
                        exited(&cx, &mut st, &agent, &fwc, &eid, &cid, exit);
                    }
                },
            )
        });
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

/// A child ended: an executor or a command task.
fn exited(
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
            let mut e = event(exev::Type::Kill);
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
        ex.deliver(event(exev::Type::Shutdown));
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
        let mut e = event(exev::Type::Acknowledged);
        e.acknowledged = Some(exev::Acknowledged {
            task_id: Some(task_id),
            uuid,
        });
        ex.deliver(e);
    }
}
