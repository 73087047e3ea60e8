//! Recovery after a restart: rebuild the registry from the pods' recovery
//! annotations, queue the pods still waiting, then follow the store.
//!
//! A pod whose annotations cannot be read is reported (log and a Warning
//! event) and left alone: recovery never deletes or fails a user's pod on
//! its own. Reconciliation with Mesos starts once the subscription is
//! open (see `sweep`).

use std::sync::Arc;

use registry::{Registry, recover_from};

use super::{Core, CoreError};
use crate::core::pods::spawn_pod_watch;

impl Core {
    pub(super) async fn recover(&mut self) -> Result<(), CoreError> {
        let now = self.now();
        let list = self.api.list_pods(None, "", "")?;
        let mut recovered = 0usize;
        let mut broken = Vec::new();
        let mut pods = Vec::with_capacity(list.items.len());
        for pod in list.items {
            let pod = Arc::new(pod);
            match recover_from(&pod, now) {
                Ok(Some(task)) => match self.registry.register(task) {
                    Ok(_) => recovered += 1,
                    Err(e) => tracing::warn!(error = %e, "recovered task not registered"),
                },
                Ok(None) => {}
                Err(e) => broken.push((pod.clone(), e.to_string())),
            }
            pods.push(pod);
        }
        tracing::info!(
            recovered,
            unreadable = broken.len(),
            "registry rebuilt from the store"
        );
        for (pod, why) in broken {
            tracing::warn!(pod = ?pod.metadata.name, %why, "cannot recover this pod's task; leaving the pod alone");
            self.event(
                &pod,
                "Warning",
                "RecoveryFailed",
                format!("mesopod cannot recover this pod's task: {why}"),
                now,
            )
            .await;
        }
        for pod in pods {
            self.on_pod(pod).await;
        }
        spawn_pod_watch(self.api.clone(), list.resource_version, self.inputs.clone());
        Ok(())
    }
}
