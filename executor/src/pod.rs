//! From `TaskInfo.data` (a Kubernetes Pod as JSON) to a [`PodPlan`]: what to
//! run, checked before anything is started.
//!
//! # Contract
//!
//! A plan is only built from a pod this executor can run faithfully; anything
//! else is a [`PodError`] whose message tells the user what to change.
//! Environment sources and volumes are planned here ([`envsrc`], and
//! [`crate::volumes`]) and resolved when a container starts: a missing
//! ConfigMap or Secret keeps it waiting, never starts it without. The plan
//! keeps `command` and
//! `args` apart, since with a container runtime they combine with the
//! image's Entrypoint and Cmd ([`crate::oci::bundle::argv`]); in process mode
//! a container without `command` is refused ([`PodError::NoCommand`]).

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

use crate::oci::image::{PullPolicy, pull_policy};

mod envsrc;
pub mod expand;
mod objects_data;
mod resources;
mod security;

pub use envsrc::{
    EnvFrom, EnvSource, KeyRef, PodContext, PodField, Resolved, ResourceRef, expanded, resolve,
};
pub use expand::ExecLimits;
pub(crate) use objects_data::{Kind, fetch};
pub use resources::RawResources;
pub use security::{Limits, SeccompProfile, Security};
use security::{limits, security};

/// Kubernetes' default `terminationGracePeriodSeconds`.
pub const DEFAULT_TERMINATION_GRACE: Duration = Duration::from_secs(30);

/// Why a pod cannot be run. Reported to the scheduler as TASK_ERROR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodError {
    /// `TaskInfo.data` is empty.
    #[error("the task carries no pod: TaskInfo.data is empty")]
    NoData,
    /// `TaskInfo.data` is not a Pod in JSON.
    #[error("TaskInfo.data is not a Kubernetes Pod in JSON: {0}")]
    Json(String),
    /// A field the executor needs is missing or unusable.
    #[error("invalid pod: {0}")]
    Invalid(String),
    /// A container has no `command`.
    #[error(
        "container {container:?} has no command: the entrypoint of image {image:?} cannot be run \
         without a container runtime (images are recorded, not pulled); set `command`"
    )]
    NoCommand {
        /// The container.
        container: String,
        /// Its image.
        image: String,
    },
    /// A container uses something this executor cannot provide.
    #[error("container {container:?}: {what} is not supported by the mesopod executor")]
    Unsupported {
        /// The container.
        container: String,
        /// What it uses.
        what: String,
    },
}

/// What happens when a container exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    /// Restart whatever the exit code (Kubernetes' default).
    Always,
    /// Restart only after a non-zero exit.
    OnFailure,
    /// Never restart.
    Never,
}

impl RestartPolicy {
    /// Whether a container that exited with `exit_code` is started again.
    pub fn restarts(self, exit_code: i32) -> bool {
        match self {
            RestartPolicy::Always => true,
            RestartPolicy::OnFailure => exit_code != 0,
            RestartPolicy::Never => false,
        }
    }
}

/// The pod's identity, which also names its sandbox directory.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodKey {
    /// `metadata.namespace` (`default` when absent).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid` (`none` when absent).
    pub uid: String,
}

/// One container, ready to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPlan {
    /// The container's name (a DNS label: safe as a directory name).
    pub name: String,
    /// The image.
    pub image: String,
    /// `imagePullPolicy`, or Kubernetes' default for the image.
    pub pull_policy: PullPolicy,
    /// `command` followed by `args`: `argv[0]` is the program (process mode).
    pub argv: Vec<String>,
    /// `command`, as written (see [`expanded`] for `$(VAR)`).
    pub command: Option<Vec<String>>,
    /// `args`, as written (see [`expanded`] for `$(VAR)`).
    pub args: Option<Vec<String>>,
    /// The security context, pod and container merged.
    pub security: Security,
    /// Limits and requests.
    pub resources: Limits,
    /// Environment, in the pod's order.
    pub env: Vec<(String, EnvSource)>,
    /// `envFrom`, applied before `env`.
    pub env_from: Vec<EnvFrom>,
    /// `resources` as written (`resourceFieldRef`).
    pub raw_resources: RawResources,
    /// `volumeMounts`.
    pub mounts: Vec<crate::volumes::MountPlan>,
    /// `workingDir`, if set.
    pub working_dir: Option<PathBuf>,
}

/// A pod, checked and ready to run.
#[derive(Debug, Clone)]
pub struct PodPlan {
    /// The pod as sent.
    pub pod: Pod,
    /// Its identity.
    pub key: PodKey,
    /// Init containers, run one after the other before anything else.
    pub init_containers: Vec<ContainerPlan>,
    /// The pod's containers, run together.
    pub containers: Vec<ContainerPlan>,
    /// What happens when a container exits.
    pub restart_policy: RestartPolicy,
    /// `terminationGracePeriodSeconds` (30 s when unset).
    pub termination_grace: Duration,
    /// `activeDeadlineSeconds`, if set.
    pub active_deadline: Option<Duration>,
}

impl PodPlan {
    /// Decodes and checks the pod carried in `TaskInfo.data`.
    pub fn from_task_data(data: Option<&[u8]>) -> Result<PodPlan, PodError> {
        let data = data.filter(|d| !d.is_empty()).ok_or(PodError::NoData)?;
        let pod: Pod = serde_json::from_slice(data).map_err(|e| PodError::Json(e.to_string()))?;
        PodPlan::from_pod(pod)
    }

    /// Checks a decoded pod.
    pub fn from_pod(pod: Pod) -> Result<PodPlan, PodError> {
        let invalid = |msg: String| PodError::Invalid(msg);
        let name = pod
            .metadata
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| invalid("metadata.name is missing".into()))?;
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into());
        let uid = pod
            .metadata
            .uid
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "none".into());
        for (what, value) in [
            ("metadata.name", &name),
            ("metadata.namespace", &namespace),
            ("metadata.uid", &uid),
        ] {
            if !is_path_safe(value) {
                return Err(invalid(format!(
                    "{what} {value:?} may only hold letters, digits, '-', '.' and '_', and not start with '.'"
                )));
            }
        }
        let spec = pod
            .spec
            .as_ref()
            .ok_or_else(|| invalid("spec is missing".into()))?;
        if spec.containers.is_empty() {
            return Err(invalid("spec.containers is empty".into()));
        }
        let restart_policy = match spec.restart_policy.as_deref() {
            None | Some("Always") => RestartPolicy::Always,
            Some("OnFailure") => RestartPolicy::OnFailure,
            Some("Never") => RestartPolicy::Never,
            Some(other) => {
                return Err(invalid(format!(
                    "spec.restartPolicy {other:?} is not one of Always, OnFailure, Never"
                )));
            }
        };
        let termination_grace = match spec.termination_grace_period_seconds {
            None => DEFAULT_TERMINATION_GRACE,
            Some(s) if s >= 0 => Duration::from_secs(s.unsigned_abs()),
            Some(s) => {
                return Err(invalid(format!(
                    "spec.terminationGracePeriodSeconds is negative: {s}"
                )));
            }
        };
        let active_deadline = match spec.active_deadline_seconds {
            None => None,
            Some(s) if s > 0 => Some(Duration::from_secs(s.unsigned_abs())),
            Some(s) => {
                return Err(invalid(format!(
                    "spec.activeDeadlineSeconds must be positive, got {s}"
                )));
            }
        };
        crate::volumes::check_volumes(spec).map_err(invalid)?;
        let mut names = HashSet::new();
        let init = spec.init_containers.as_deref().unwrap_or_default();
        let mut plan_all =
            |list: &[Container], kind: &str| -> Result<Vec<ContainerPlan>, PodError> {
                list.iter()
                    .enumerate()
                    .map(|(i, c)| {
                        if !names.insert(c.name.clone()) {
                            return Err(invalid(format!(
                                "container name {:?} is used twice",
                                c.name
                            )));
                        }
                        let field = format!("spec.{kind}[{i}]");
                        plan_container(c, spec, &field)
                    })
                    .collect()
            };
        let init_containers = plan_all(init, "initContainers")?;
        let containers = plan_all(&spec.containers, "containers")?;
        Ok(PodPlan {
            key: PodKey {
                namespace,
                name,
                uid,
            },
            pod,
            init_containers,
            containers,
            restart_policy,
            termination_grace,
            active_deadline,
        })
    }
}

/// A name that is safe as one path component.
fn is_path_safe(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('.')
        && s.len() <= 253
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
}

/// A Kubernetes DNS label: what a container name must be.
pub(crate) fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn plan_container(c: &Container, spec: &PodSpec, field: &str) -> Result<ContainerPlan, PodError> {
    if !is_dns_label(&c.name) {
        return Err(PodError::Invalid(format!(
            "container name {:?} is not a DNS label (lower-case letters, digits and '-', at most 63)",
            c.name
        )));
    }
    let image = c.image.clone().unwrap_or_default();
    let unsupported = |what: String| PodError::Unsupported {
        container: c.name.clone(),
        what,
    };
    let (env, env_from) = envsrc::plan_env(c, field).map_err(PodError::Invalid)?;
    let mounts = crate::volumes::plan_mounts(c, field, spec).map_err(PodError::Invalid)?;
    let command = c.command.clone().filter(|c| !c.is_empty());
    let args = c.args.clone().filter(|a| !a.is_empty());
    let security = security(c, spec.security_context.as_ref());
    let resources = limits(c).map_err(unsupported)?;
    let mut plan = ContainerPlan {
        name: c.name.clone(),
        pull_policy: pull_policy(c.image_pull_policy.as_deref(), &image),
        image,
        argv: Vec::new(),
        command,
        args,
        security,
        resources,
        env,
        env_from,
        raw_resources: RawResources::of(c),
        mounts,
        working_dir: c
            .working_dir
            .as_ref()
            .filter(|w| !w.is_empty())
            .map(PathBuf::from),
    };
    // `argv` with the literal variables expanded, for process mode's
    // "has a command" check; the container runs `expanded` of its full env.
    // Past the kernel's limits it stays as written: the start reports that
    // (`CreateContainerConfigError`), and the check needs only the command.
    let literal: Vec<(String, String)> = plan
        .env
        .iter()
        .filter_map(|(n, s)| match s {
            EnvSource::Value(v) => Some((n.clone(), v.clone())),
            _ => None,
        })
        .collect();
    plan.argv = match expanded(&plan, &literal, ExecLimits::of_this_process()) {
        Ok(p) => p.argv,
        Err(_) => match &plan.command {
            Some(cmd) => cmd
                .iter()
                .chain(plan.args.iter().flatten())
                .cloned()
                .collect(),
            None => Vec::new(),
        },
    };
    Ok(plan)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn plan(v: serde_json::Value) -> Result<PodPlan, PodError> {
        PodPlan::from_task_data(Some(&serde_json::to_vec(&v).unwrap()))
    }

    #[test]
    fn a_full_pod_becomes_a_plan() {
        let p = plan(json!({
            "metadata": {"name": "web", "namespace": "prod", "uid": "u-1"},
            "spec": {
                "restartPolicy": "OnFailure",
                "terminationGracePeriodSeconds": 3,
                "activeDeadlineSeconds": 60,
                "initContainers": [{"name": "init", "image": "busybox", "command": ["true"]}],
                "containers": [{
                    "name": "app", "image": "nginx:1.27",
                    "command": ["/bin/sh", "-c"], "args": ["echo $(GREETING) $$(HOME)"],
                    "workingDir": "/tmp",
                    "env": [
                        {"name": "GREETING", "value": "hello"},
                        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
                    ]
                }]
            }
        }))
        .unwrap();
        assert_eq!(
            p.key,
            PodKey {
                namespace: "prod".into(),
                name: "web".into(),
                uid: "u-1".into()
            }
        );
        assert_eq!(p.restart_policy, RestartPolicy::OnFailure);
        assert_eq!(p.termination_grace, Duration::from_secs(3));
        assert_eq!(p.active_deadline, Some(Duration::from_secs(60)));
        assert_eq!(p.init_containers[0].argv, vec!["true"]);
        let app = &p.containers[0];
        assert_eq!(app.argv, vec!["/bin/sh", "-c", "echo hello $(HOME)"]);
        assert_eq!(app.image, "nginx:1.27");
        assert_eq!(app.working_dir, Some(PathBuf::from("/tmp")));
        assert_eq!(app.env[1], ("POD".into(), EnvSource::Field(PodField::Name)));
        assert_eq!(app.env[2], ("IP".into(), EnvSource::Field(PodField::PodIp)));
    }

    #[test]
    fn defaults_are_kubernetes_defaults() {
        let p = plan(json!({"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "command": ["true"]}]}}))
            .unwrap();
        assert_eq!(p.key.namespace, "default");
        assert_eq!(p.restart_policy, RestartPolicy::Always);
        assert_eq!(p.termination_grace, DEFAULT_TERMINATION_GRACE);
        assert_eq!(p.active_deadline, None);
    }

    #[test]
    fn bad_pods_are_refused_with_a_clear_message() {
        assert_eq!(PodPlan::from_task_data(None).unwrap_err(), PodError::NoData);
        assert!(matches!(
            PodPlan::from_task_data(Some(b"{not json")),
            Err(PodError::Json(_))
        ));
        let cases = [
            (
                json!({"spec": {"containers": [{"name": "c", "command": ["x"]}]}}),
                "metadata.name",
            ),
            (json!({"metadata": {"name": "a"}}), "spec is missing"),
            (
                json!({"metadata": {"name": "a"}, "spec": {"containers": []}}),
                "spec.containers is empty",
            ),
            (
                json!({"metadata": {"name": "../x"}, "spec": {"containers": [{"name": "c", "command": ["x"]}]}}),
                "metadata.name",
            ),
            (
                json!({"metadata": {"name": "a"}, "spec": {"containers": [{"name": "C/x", "command": ["x"]}]}}),
                "DNS label",
            ),
            (
                json!({"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "command": ["x"]}, {"name": "c", "command": ["y"]}]}}),
                "used twice",
            ),
            (
                json!({"metadata": {"name": "a"}, "spec": {"restartPolicy": "Sometimes", "containers": [{"name": "c", "command": ["x"]}]}}),
                "restartPolicy",
            ),
            (
                json!({"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "command": ["x"], "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}, "configMapKeyRef": {"name": "s", "key": "k"}}}]}]}}),
                "spec.containers[0].env[0].valueFrom: exactly one of",
            ),
            (
                json!({"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "command": ["x"], "volumeMounts": [{"name": "v", "mountPath": "/v"}]}]}}),
                "spec.containers[0].volumeMounts[0].name: Not found",
            ),
            (
                json!({"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "command": ["x"], "env": [{"name": "P", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels"}}}]}]}}),
                "metadata.labels",
            ),
        ];
        for (pod, needle) in cases {
            let err = plan(pod.clone()).unwrap_err().to_string();
            assert!(err.contains(needle), "{pod}: {err}");
        }
    }

    #[test]
    fn restart_policies_decide_on_exit_codes() {
        assert!(RestartPolicy::Always.restarts(0));
        assert!(RestartPolicy::Always.restarts(1));
        assert!(!RestartPolicy::OnFailure.restarts(0));
        assert!(RestartPolicy::OnFailure.restarts(2));
        assert!(!RestartPolicy::Never.restarts(1));
    }
}
