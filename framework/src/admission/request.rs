//! The copy of an attempt a hook sees.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

use super::decision::Toleration;

/// Requests and limits as Kubernetes quantities (`"500m"`, `"256Mi"`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceList {
    /// Effective requests of the pod.
    pub requests: BTreeMap<String, String>,
    /// Effective limits of the pod.
    pub limits: BTreeMap<String, String>,
}

/// The placement and metadata of the pod a hook sees.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Execution {
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// `spec.tolerations`.
    pub tolerations: Vec<Toleration>,
    /// `spec.priorityClassName`.
    pub priority_class_name: String,
    /// `spec.serviceAccountName` (empty when unset).
    pub service_account: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
}

/// The attempt about to be placed. A copy: changing it has no effect, a
/// hook answers with a decision instead. It never carries the pod's
/// environment, secrets or command.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Request {
    /// The tenant: the pod's namespace.
    pub tenant: String,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The pod's uid.
    pub uid: String,
    /// The Mesos task id this attempt would launch.
    pub task_id: String,
    /// Counts the pod's attempts from 1.
    pub attempt: u32,
    /// The effective requests and limits.
    pub resources: ResourceList,
    /// Placement and metadata.
    pub execution: Execution,
    /// Whether the pod named its service account itself.
    pub service_account_chosen: bool,
    /// The effective CPU request in millicores, for in-process hooks.
    #[serde(skip)]
    pub cpu_request_millis: u64,
}

impl Request {
    /// The request for `pod`'s attempt number `attempt`, launching `task_id`.
    pub fn for_pod(
        pod: &Pod,
        task_id: &str,
        attempt: u32,
        resources: ResourceList,
        cpu_request_millis: u64,
    ) -> Request {
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let spec = pod.spec.clone().unwrap_or_default();
        let service_account = spec
            .service_account_name
            .clone()
            .or(spec.service_account.clone())
            .unwrap_or_default();
        Request {
            tenant: namespace.clone(),
            namespace,
            pod: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            task_id: task_id.to_owned(),
            attempt,
            resources,
            service_account_chosen: !service_account.is_empty(),
            execution: Execution {
                node_selector: spec.node_selector.clone().unwrap_or_default(),
                tolerations: spec
                    .tolerations
                    .unwrap_or_default()
                    .into_iter()
                    .map(|t| Toleration {
                        key: t.key.unwrap_or_default(),
                        operator: t.operator.unwrap_or_default(),
                        value: t.value.unwrap_or_default(),
                        effect: t.effect.unwrap_or_default(),
                        toleration_seconds: t.toleration_seconds,
                    })
                    .collect(),
                priority_class_name: spec.priority_class_name.unwrap_or_default(),
                service_account,
                labels: pod.metadata.labels.clone().unwrap_or_default(),
                annotations: pod.metadata.annotations.clone().unwrap_or_default(),
            },
            cpu_request_millis,
        }
    }

    /// The effective CPU request in millicores.
    pub fn cpu_millis(&self) -> u64 {
        self.cpu_request_millis
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec};

    #[test]
    fn the_request_never_carries_env_or_command() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("p".into());
        pod.spec = Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                command: Some(vec!["secret-command".into()]),
                env: Some(vec![EnvVar {
                    name: "PASSWORD".into(),
                    value: Some("hunter2".into()),
                    value_from: None,
                }]),
                ..Default::default()
            }],
            ..Default::default()
        });
        let req = Request::for_pod(&pod, "t1", 1, ResourceList::default(), 0);
        let wire = serde_json::to_string(&req).unwrap_or_default();
        assert!(
            !wire.contains("hunter2") && !wire.contains("secret-command"),
            "{wire}"
        );
        assert!(wire.contains(r#""taskId":"t1""#), "{wire}");
        assert!(wire.contains(r#""serviceAccountChosen":false"#), "{wire}");
        assert_eq!(req.tenant, "default");
    }
}
