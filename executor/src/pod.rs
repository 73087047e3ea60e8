//! From `TaskInfo.data` (a Kubernetes Pod as JSON) to a [`PodPlan`]: what to
//! run, checked before anything is started.
//!
//! # Contract
//!
//! A plan is only built from a pod this executor can run faithfully; anything
//! else is a [`PodError`] whose message tells the user what to change.
//! Environment sources that need the Kubernetes API (secrets, config maps)
//! are refused rather than silently left empty. The plan keeps `command` and
//! `args` apart, since with a container runtime they combine with the
//! image's Entrypoint and Cmd ([`crate::oci::bundle::argv`]); in process mode
//! a container without `command` is refused ([`PodError::NoCommand`]).

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, PodSecurityContext};

use crate::oci::image::{PullPolicy, pull_policy};

mod security;

pub use security::{Limits, Security};
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

/// A pod field a container can read through `env[].valueFrom.fieldRef`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodField {
    /// `metadata.name`.
    Name,
    /// `metadata.namespace`.
    Namespace,
    /// `metadata.uid`.
    Uid,
    /// `status.podIP`.
    PodIp,
    /// `status.hostIP`.
    HostIp,
    /// `spec.nodeName`.
    NodeName,
    /// `spec.serviceAccountName`.
    ServiceAccountName,
}

impl PodField {
    fn parse(path: &str) -> Option<PodField> {
        Some(match path {
            "metadata.name" => PodField::Name,
            "metadata.namespace" => PodField::Namespace,
            "metadata.uid" => PodField::Uid,
            "status.podIP" => PodField::PodIp,
            "status.hostIP" => PodField::HostIp,
            "spec.nodeName" => PodField::NodeName,
            "spec.serviceAccountName" => PodField::ServiceAccountName,
            _ => return None,
        })
    }
}

/// One environment variable's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvSource {
    /// `value` (Kubernetes' `$(VAR)` references already resolved).
    Value(String),
    /// `valueFrom.fieldRef`.
    Field(PodField),
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
    /// `command`, `$(VAR)`-expanded.
    pub command: Option<Vec<String>>,
    /// `args`, `$(VAR)`-expanded.
    pub args: Option<Vec<String>>,
    /// The security context, pod and container merged.
    pub security: Security,
    /// Limits and requests.
    pub resources: Limits,
    /// Environment, in the pod's order.
    pub env: Vec<(String, EnvSource)>,
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
        let mut names = HashSet::new();
        let init = spec.init_containers.as_deref().unwrap_or_default();
        let mut plan_all = |list: &[Container]| -> Result<Vec<ContainerPlan>, PodError> {
            list.iter()
                .map(|c| {
                    if !names.insert(c.name.clone()) {
                        return Err(invalid(format!(
                            "container name {:?} is used twice",
                            c.name
                        )));
                    }
                    plan_container(c, spec.security_context.as_ref())
                })
                .collect()
        };
        let init_containers = plan_all(init)?;
        let containers = plan_all(&spec.containers)?;
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
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn plan_container(
    c: &Container,
    pod_sec: Option<&PodSecurityContext>,
) -> Result<ContainerPlan, PodError> {
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
    let mut env: Vec<(String, EnvSource)> = Vec::new();
    for var in c.env.as_deref().unwrap_or_default() {
        let source = match (&var.value, &var.value_from) {
            (_, Some(from)) => {
                if let Some(field) = &from.field_ref {
                    let path = field.field_path.as_str();
                    EnvSource::Field(PodField::parse(path).ok_or_else(|| {
                        unsupported(format!("env {:?}: fieldRef {path:?}", var.name))
                    })?)
                } else if from.secret_key_ref.is_some() {
                    return Err(unsupported(format!("env {:?}: secretKeyRef", var.name)));
                } else if from.config_map_key_ref.is_some() {
                    return Err(unsupported(format!("env {:?}: configMapKeyRef", var.name)));
                } else {
                    return Err(unsupported(format!(
                        "env {:?}: this valueFrom source",
                        var.name
                    )));
                }
            }
            (value, None) => EnvSource::Value(expand(value.as_deref().unwrap_or_default(), &env)),
        };
        env.push((var.name.clone(), source));
    }
    if c.env_from.as_ref().is_some_and(|e| !e.is_empty()) {
        return Err(unsupported("envFrom".into()));
    }
    let expand_all = |list: &Option<Vec<String>>| {
        list.as_ref()
            .map(|l| l.iter().map(|a| expand(a, &env)).collect::<Vec<_>>())
    };
    let command = expand_all(&c.command).filter(|c| !c.is_empty());
    let args = expand_all(&c.args).filter(|a| !a.is_empty());
    let argv = match &command {
        Some(cmd) => cmd.iter().chain(args.iter().flatten()).cloned().collect(),
        None => Vec::new(),
    };
    let security = security(c, pod_sec);
    let resources = limits(c).map_err(unsupported)?;
    Ok(ContainerPlan {
        name: c.name.clone(),
        pull_policy: pull_policy(c.image_pull_policy.as_deref(), &image),
        image,
        argv,
        command,
        args,
        security,
        resources,
        env,
        working_dir: c
            .working_dir
            .as_ref()
            .filter(|w| !w.is_empty())
            .map(PathBuf::from),
    })
}

/// Kubernetes' `$(VAR)` expansion in command, args and env values: a
/// reference to an earlier literal variable is replaced, `$$` escapes `$`,
/// and anything else is left as written (as Kubernetes does).
fn expand(input: &str, env: &[(String, EnvSource)]) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
        {
            let name = &inner[..end];
            let value = env.iter().rev().find_map(|(n, s)| match s {
                EnvSource::Value(v) if n == name => Some(v.as_str()),
                _ => None,
            });
            match value {
                Some(v) => out.push_str(v),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
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
                json!({"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "command": ["x"], "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}}),
                "secretKeyRef",
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
