//! Recovery after a restart: rebuild the registry from the pods' recovery
//! annotations, then queue the pods still waiting.
//!
//! A pod whose annotations cannot be read is reported (log and a Warning
//! event) and left alone: recovery never deletes or fails a user's pod on
//! its own. Reconciliation with Mesos starts once the subscription is
//! open (see `sweep`).

use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;
use registry::{Registry, recover_from};

use super::Core;
use super::effect::{Effect, Write};
use crate::objects::pod_event;

impl Core {
    pub(super) fn recover(&mut self, pods: Vec<Arc<Pod>>, now: SystemTime) {
        let mut recovered = 0usize;
        let mut broken = Vec::new();
        for pod in &pods {
            match recover_from(pod, now) {
                Ok(Some(task)) => match self.registry.register(task) {
                    Ok(_) => recovered += 1,
                    Err(e) => tracing::warn!(error = %e, "recovered task not registered"),
                },
                Ok(None) => {}
                Err(e) => broken.push((pod.clone(), e.to_string())),
            }
        }
        tracing::info!(
            recovered,
            unreadable = broken.len(),
            "registry rebuilt from the store"
        );
        for (pod, why) in broken {
            tracing::warn!(pod = ?pod.metadata.name, %why, "cannot recover this pod's task; leaving the pod alone");
            let message = format!("mesopod cannot recover this pod's task: {why}");
            let event = pod_event(&pod, "Warning", "RecoveryFailed", message, now);
            self.emit(Effect::Store(vec![Write::Event(Box::new(event))]));
        }
        for pod in pods {
            self.on_pod(pod, now);
        }
    }
}
