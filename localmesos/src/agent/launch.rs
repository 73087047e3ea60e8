//! What an agent does to start something: sandboxes, the MESOS_*
//! environment of a real agent, child processes whose exit is reported to
//! the master, and the LAUNCH events for a custom executor. Which tasks to
//! start, and what their statuses become, is the master's
//! (`master::launch`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mesos::proto::executor::{Event as ExecEvent, event as exev};
use mesos::proto::{CommandInfo, ExecutorId, ExecutorInfo, FrameworkId, TaskGroupInfo, TaskInfo};

use super::executors::exec_event;
use super::process;
use super::{ExecutorRef, Report};

/// Where the sandbox of `container` of an executor lives under `work_dir`,
/// laid out as a Mesos agent's.
pub(crate) fn sandbox_for(work_dir: &Path, executor: ExecutorRef<'_>, container: &str) -> PathBuf {
    work_dir
        .join("slaves")
        .join(executor.agent_id)
        .join("frameworks")
        .join(executor.framework_id)
        .join("executors")
        .join(executor.executor_id)
        .join("runs")
        .join(container)
}

/// What the MESOS_* environment is made of.
pub(crate) struct EnvOf<'a> {
    pub(crate) executor: ExecutorRef<'a>,
    pub(crate) sandbox: &'a Path,
    /// The agent's executor endpoint.
    pub(crate) endpoint: Option<SocketAddr>,
    /// `FrameworkInfo.checkpoint`.
    pub(crate) checkpoint: bool,
    pub(crate) shutdown_grace: Duration,
    /// `MESOS_RECOVERY_TIMEOUT` and `MESOS_SUBSCRIPTION_BACKOFF_MAX`.
    pub(crate) recovery: (Duration, Duration),
}

/// The MESOS_* environment of the reference (executor API docs).
pub(crate) fn executor_env(of: EnvOf<'_>) -> BTreeMap<String, String> {
    let ExecutorRef {
        agent_id,
        framework_id,
        executor_id,
    } = of.executor;
    let endpoint = of.endpoint.map(|e| e.to_string()).unwrap_or_default();
    let dir = of.sandbox.display().to_string();
    let mut env = BTreeMap::from([
        ("MESOS_FRAMEWORK_ID".to_owned(), framework_id.to_owned()),
        ("MESOS_EXECUTOR_ID".to_owned(), executor_id.to_owned()),
        ("MESOS_AGENT_ID".to_owned(), agent_id.to_owned()),
        ("MESOS_SLAVE_ID".to_owned(), agent_id.to_owned()),
        ("MESOS_DIRECTORY".to_owned(), dir.clone()),
        ("MESOS_SANDBOX".to_owned(), dir),
        ("MESOS_AGENT_ENDPOINT".to_owned(), endpoint),
        (
            "MESOS_CHECKPOINT".to_owned(),
            if of.checkpoint { "1" } else { "0" }.to_owned(),
        ),
        (
            "MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD".to_owned(),
            format!("{}ms", of.shutdown_grace.as_millis()),
        ),
    ]);
    if of.checkpoint {
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        env.insert("MESOS_RECOVERY_TIMEOUT".into(), ms(of.recovery.0));
        env.insert("MESOS_SUBSCRIPTION_BACKOFF_MAX".into(), ms(of.recovery.1));
    }
    env
}

/// Makes the sandbox and starts `command` in it. When the process ends,
/// `report` gets [`Report::Exited`] for `executor` (a command task's
/// executor is named after the task) of `container`.
pub(crate) fn spawn_in_sandbox(
    rt: &tokio::runtime::Handle,
    command: CommandInfo,
    env: BTreeMap<String, String>,
    sandbox: &Path,
    (executor, container, detach): (ExecutorRef<'_>, &str, bool),
    report: impl FnOnce(Report<'_>) + Send + 'static,
) -> std::io::Result<process::Handle> {
    process::make_sandbox(sandbox)?;
    let (agent, fw, exec, container) = (
        executor.agent_id.to_owned(),
        executor.framework_id.to_owned(),
        executor.executor_id.to_owned(),
        container.to_owned(),
    );
    process::spawn(
        rt,
        process::Spec {
            command,
            env,
            sandbox: sandbox.to_path_buf(),
            detach,
        },
        move |exit| {
            report(Report::Exited {
                executor: ExecutorRef {
                    agent_id: &agent,
                    framework_id: &fw,
                    executor_id: &exec,
                },
                container_id: &container,
                exit,
            });
        },
    )
}

/// The executor Mesos' agent stands up for a command task.
pub(crate) fn command_executor_info(fw: &str, task: &TaskInfo, task_id: &str) -> ExecutorInfo {
    ExecutorInfo {
        executor_id: Some(ExecutorId::new(task_id)),
        framework_id: Some(FrameworkId::new(fw)),
        command: task.command.clone(),
        name: Some(format!("Command Executor (Task: {task_id})")),
        ..Default::default()
    }
}

/// The events that hand `tasks` to a custom executor: one LAUNCH_GROUP, or
/// a LAUNCH each.
pub(crate) fn launch_events(tasks: &[TaskInfo], group: bool) -> Vec<ExecEvent> {
    if group {
        let mut e = exec_event(exev::Type::LaunchGroup);
        e.launch_group = Some(exev::LaunchGroup {
            task_group: Some(TaskGroupInfo {
                tasks: tasks.to_vec(),
            }),
        });
        return vec![e];
    }
    tasks
        .iter()
        .map(|t| {
            let mut e = exec_event(exev::Type::Launch);
            e.launch = Some(exev::Launch {
                task: Some(t.clone()),
            });
            e
        })
        .collect()
}
