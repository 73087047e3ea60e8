//! A preemption victim's end, as kube-scheduler writes it: the pod is marked
//! `DisruptionTarget` (`PreemptionByScheduler`), then deleted with its own
//! grace period, so its node agent stops it as it stops any deleted pod. The
//! scheduler decides who goes; this only writes it.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, Preconditions};

use super::Api;
use super::eviction::with_disruption_target;
use crate::error::ApiError;

/// kube's `DisruptionTarget` reason for a pod preempted by the scheduler.
const PREEMPTION_BY_SCHEDULER: &str = "PreemptionByScheduler";

impl Api {
    /// Marks the pod `name` in `ns` as preempted by `scheduler` and deletes it
    /// gracefully. `uid` guards against a pod recreated under the same name:
    /// that one is not the victim and is left alone (409).
    ///
    /// # Errors
    /// 404 for no pod, 409 for another pod of that name, and the delete's own
    /// errors.
    pub async fn preempt_pod(
        &self,
        ns: &str,
        name: &str,
        uid: &str,
        scheduler: &str,
    ) -> Result<Pod, ApiError> {
        let now = self.now();
        let message = format!("{scheduler}: preempting to accommodate a higher priority pod");
        let other = |pod: &Pod| ApiError::Conflict {
            resource: "Pod".into(),
            name: name.into(),
            detail: format!(
                "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                pod.metadata.uid.as_deref().unwrap_or_default()
            ),
        };
        self.write_status(ns, name, None, false, |pod| {
            if pod.metadata.uid.as_deref() != Some(uid) {
                return Err(other(pod));
            }
            Ok(with_disruption_target(
                pod,
                now,
                PREEMPTION_BY_SCHEDULER,
                &message,
            ))
        })
        .await?;
        let opts = DeleteOptions {
            preconditions: Some(Preconditions {
                uid: Some(uid.to_owned()),
                ..Preconditions::default()
            }),
            ..DeleteOptions::default()
        };
        self.delete_pod(ns, name, &opts).await
    }
}
