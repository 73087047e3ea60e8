//! What mesopod sends to Mesos for a placed pod: the `TaskInfo` and the
//! `ExecutorInfo` prototype every pod's task carries.
//!
//! # Contract
//!
//! - One Mesos task per pod. The pod travels to the executor as JSON in
//!   `TaskInfo.data`, with the port mappings and placement annotations of
//!   the binding already on it, so the executor sees what the store holds.
//! - The kill policy carries the pod's `terminationGracePeriodSeconds`, so
//!   a KILL from any source honours the pod's grace period (the old system
//!   always killed with 0).

use std::time::Duration;

use mesos::proto::{
    CommandInfo, DurationInfo, ExecutorInfo, KillPolicy, Label, Labels, TaskInfo, command_info,
    executor_info,
};
use registry::PodTask;

/// Grace period when the pod sets none (Kubernetes' default).
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// Why a task could not be built.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The task has no procured spec.
    #[error("task {0} has no placement")]
    NotPlaced(String),
}

/// The executor's own CPU share: it supervises processes and relays
/// status, so a tenth of a core is ample; the pods' own resources are
/// procured separately.
pub const EXECUTOR_CPUS: f64 = 0.1;
/// The executor's own memory in MB: the process and its buffers.
pub const EXECUTOR_MEM_MB: f64 = 64.0;

/// How the agent starts the executor.
#[derive(Debug, Clone)]
pub struct ExecutorCommand {
    /// The program, as the agent will see it: an absolute path for a local
    /// cluster, or a path relative to the sandbox when fetched from `uri`.
    pub program: String,
    /// Where a Mesos fetcher downloads the binary from, for real clusters.
    pub uri: Option<String>,
    /// Time the executor gets to stop everything on SHUTDOWN.
    pub shutdown_grace: Duration,
    /// Flags after `executor` (the container runtime and image store).
    pub args: Vec<String>,
}

/// The executor prototype: procurement derives the executor id from it.
pub fn executor_prototype(cmd: &ExecutorCommand) -> ExecutorInfo {
    let uris = cmd
        .uri
        .iter()
        .map(|u| command_info::Uri {
            value: u.clone(),
            executable: Some(true),
            extract: Some(false),
            cache: Some(true),
            output_file: Some("mesopod".into()),
        })
        .collect();
    ExecutorInfo {
        r#type: Some(executor_info::Type::Custom as i32),
        name: Some("mesopod executor".into()),
        command: Some(CommandInfo {
            uris,
            shell: Some(false),
            value: Some(cmd.program.clone()),
            arguments: [cmd.program.clone(), "executor".into()]
                .into_iter()
                .chain(cmd.args.iter().cloned())
                .collect(),
            ..Default::default()
        }),
        resources: vec![
            mesos::resources::scalar("cpus", EXECUTOR_CPUS, None),
            mesos::resources::scalar("mem", EXECUTOR_MEM_MB, None),
        ],
        shutdown_grace_period: Some(DurationInfo::from_duration(cmd.shutdown_grace)),
        ..Default::default()
    }
}

/// The pod's grace period: `terminationGracePeriodSeconds`, else 30 s.
pub fn grace_period(task: &PodTask) -> Duration {
    task.grace_period_seconds()
        .and_then(|s| u64::try_from(s).ok())
        .map_or(DEFAULT_GRACE, Duration::from_secs)
}

/// The `TaskInfo` for a placed task; `pod` is the bound pod's JSON, which
/// the executor runs.
pub fn task_info(task: &PodTask, pod: Vec<u8>) -> Result<TaskInfo, LaunchError> {
    let spec = task
        .spec
        .as_ref()
        .ok_or_else(|| LaunchError::NotPlaced(task.id.value.clone()))?;
    let key = task.pod_key();
    Ok(TaskInfo {
        name: format!("{}/{}", key.namespace, key.name),
        task_id: Some(task.id.clone()),
        agent_id: Some(spec.agent_id.clone()),
        resources: spec.resources.clone(),
        executor: spec.executor.as_deref().cloned(),
        data: Some(pod),
        kill_policy: Some(KillPolicy {
            grace_period: Some(DurationInfo::from_duration(grace_period(task))),
        }),
        labels: Some(Labels {
            labels: vec![
                Label {
                    key: "mesopod.io/namespace".into(),
                    value: Some(key.namespace),
                },
                Label {
                    key: "mesopod.io/pod".into(),
                    value: Some(key.name),
                },
            ],
        }),
        ..Default::default()
    })
}

/// Marks a launch as the adoption of a pod whose executor died: the new
/// executor takes over its containers, or fails the task if it cannot
/// ([`executor::ADOPT_LABEL`]).
pub fn ask_to_adopt(info: &mut TaskInfo) {
    info.labels
        .get_or_insert_with(Labels::default)
        .labels
        .push(Label {
            key: executor::ADOPT_LABEL.into(),
            value: Some("true".into()),
        });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use k8s_openapi::api::core::v1::{Pod, PodSpec};
    use mesos::proto::AgentId;
    use registry::Spec;
    use std::sync::Arc;
    use std::time::SystemTime;

    fn task(grace: Option<i64>) -> PodTask {
        let mut pod = Pod::default();
        pod.metadata.name = Some("web".into());
        pod.metadata.namespace = Some("team".into());
        pod.spec = Some(PodSpec {
            termination_grace_period_seconds: grace,
            ..Default::default()
        });
        PodTask::new(Arc::new(pod), vec!["*".into()], SystemTime::UNIX_EPOCH).unwrap()
    }

    #[test]
    fn a_placed_task_carries_the_pod_the_agent_and_the_grace_period() {
        let mut t = task(Some(7));
        let pod = Arc::clone(t.pod().unwrap());
        let json = || serde_json::to_vec(pod.as_ref()).unwrap();
        assert!(matches!(
            task_info(&t, json()),
            Err(LaunchError::NotPlaced(_))
        ));
        t.spec = Some(Arc::new(Spec {
            agent_id: AgentId::new("a1"),
            hostname: "h1".into(),
            ..Default::default()
        }));
        let info = task_info(&t, json()).unwrap();
        assert_eq!(info.name, "team/web");
        assert_eq!(info.agent_id, Some(AgentId::new("a1")));
        let pod: Pod = serde_json::from_slice(info.data.as_deref().unwrap()).unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("web"));
        let grace = info.kill_policy.unwrap().grace_period.unwrap();
        assert_eq!(grace.to_duration(), Duration::from_secs(7));
    }

    #[test]
    fn a_launched_task_keeps_the_grace_period_without_its_pod() {
        let mut t = task(Some(9));
        t.release_pod();
        assert_eq!(grace_period(&t), Duration::from_secs(9));
    }

    #[test]
    fn grace_defaults_to_thirty_seconds() {
        assert_eq!(grace_period(&task(None)), DEFAULT_GRACE);
    }

    #[test]
    fn the_executor_runs_the_mesopod_binary_and_can_be_fetched() {
        let info = executor_prototype(&ExecutorCommand {
            program: "./mesopod".into(),
            uri: Some("http://example.invalid/mesopod".into()),
            shutdown_grace: Duration::from_secs(5),
            args: Vec::new(),
        });
        let cmd = info.command.unwrap();
        assert_eq!(cmd.arguments, ["./mesopod", "executor"]);
        assert_eq!(cmd.shell, Some(false));
        assert_eq!(cmd.uris[0].executable, Some(true));
    }
}
