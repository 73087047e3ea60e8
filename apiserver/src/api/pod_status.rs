//! The framework's writes on pods: the status subresource and binding to a node.

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};

use super::objects::{k8s_time, to_value};
use super::pods::{Binding, PODS, as_stored, conflict, is_conflict, pod_key};
use super::{Api, RETRIES};
use crate::error::{ApiError, CauseKind};
use crate::store::{Precondition, WriteOp};
use crate::validation::{Causes, check_subdomain_name, is_qualified_name};

impl Api {
    /// Replaces the pod's status (the status subresource): metadata and spec stay as
    /// stored. Unconditional (a lost race is retried on a fresh read).
    pub async fn update_pod_status(
        &self,
        namespace: &str,
        name: &str,
        status: PodStatus,
    ) -> Result<Pod, ApiError> {
        self.write_status(namespace, name, None, false, |_| Ok(status.clone()))
            .await
    }

    /// The status write behind PUT/PATCH `pods/NAME/status` and [`Api::update_pod_status`]:
    /// `make` computes the new status from the stored pod.
    pub(crate) async fn write_status(
        &self,
        ns: &str,
        name: &str,
        expected: Option<u64>,
        dry_run: bool,
        make: impl Fn(&Pod) -> Result<PodStatus, ApiError>,
    ) -> Result<Pod, ApiError> {
        for _ in 0..RETRIES {
            let (old, old_rv) = self.get_typed::<Pod>(PODS, ns, name)?;
            if expected.is_some_and(|rv| rv != old_rv) {
                return Err(ApiError::stale("pods", name));
            }
            let status = make(&old)?;
            let mut causes = Causes::default();
            if let Some(phase) = status.phase.as_deref() {
                const PHASES: [&str; 5] = ["Pending", "Running", "Succeeded", "Failed", "Unknown"];
                if !PHASES.contains(&phase) {
                    causes.unsupported("status.phase", phase, &PHASES);
                }
            }
            causes.into_result("Pod", name)?;
            let mut new = old.clone();
            new.status = Some(status);
            if new == old || dry_run {
                return Ok(new);
            }
            let result = self
                .commit(vec![WriteOp::Put {
                    key: pod_key(ns, name),
                    object: to_value(&new)?,
                    precondition: Precondition::ResourceVersion(old_rv),
                }])
                .await;
            match result {
                Err(e) if is_conflict(&e) && expected.is_none() => continue,
                other => return as_stored(new, &other?),
            }
        }
        Err(ApiError::stale("pods", name))
    }

    /// Binds the pod to `binding.node_name`, merging the annotations and setting the
    /// condition in one write. Idempotent for the same node; 409 if the pod is bound to
    /// another node or is being deleted.
    pub async fn bind_pod(
        &self,
        namespace: &str,
        name: &str,
        binding: &Binding,
    ) -> Result<Pod, ApiError> {
        let mut causes = Causes::default();
        check_subdomain_name(&mut causes, "target.name", &binding.node_name);
        for k in binding.annotations.keys() {
            if !is_qualified_name(k) {
                causes.push(
                    CauseKind::Invalid,
                    "metadata.annotations",
                    format!("Invalid value: \"{k}\": not a qualified name"),
                );
            }
        }
        causes.into_result("Binding", name)?;
        for _ in 0..RETRIES {
            let (old, old_rv) = self.get_typed::<Pod>(PODS, namespace, name)?;
            if old.metadata.deletion_timestamp.is_some() {
                return Err(conflict(
                    name,
                    "pod is being deleted, cannot be assigned to a host",
                ));
            }
            let mut new = old.clone();
            let spec = new.spec.get_or_insert_with(Default::default);
            match spec.node_name.as_deref() {
                Some(n) if !n.is_empty() && n != binding.node_name => {
                    return Err(conflict(
                        name,
                        format!("pod {name} is already assigned to node \"{n}\""),
                    ));
                }
                _ => spec.node_name = Some(binding.node_name.clone()),
            }
            let annotations = new
                .metadata
                .annotations
                .get_or_insert_with(Default::default);
            annotations.extend(binding.annotations.clone());
            let condition = binding.condition.clone().unwrap_or_else(|| PodCondition {
                type_: "PodScheduled".into(),
                status: "True".into(),
                last_transition_time: Some(k8s_time(self.now())),
                ..Default::default()
            });
            let status = new.status.get_or_insert_with(Default::default);
            let conditions = status.conditions.get_or_insert_with(Vec::new);
            match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
                Some(c) => *c = condition,
                None => conditions.push(condition),
            }
            if new == old {
                return Ok(old);
            }
            let result = self
                .commit(vec![WriteOp::Put {
                    key: pod_key(namespace, name),
                    object: to_value(&new)?,
                    precondition: Precondition::ResourceVersion(old_rv),
                }])
                .await;
            match result {
                Err(e) if is_conflict(&e) => continue,
                other => return as_stored(new, &other?),
            }
        }
        Err(ApiError::stale("pods", name))
    }
}
