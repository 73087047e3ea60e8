//! Pod events from the store: what to queue, what to kill, what to finalize.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use registry::{Flag, PodKey, PodTask, Registry, State};

use super::effect::{Effect, Write};
use super::launching::KillReason;
use super::{Core, SCHEDULER_NAMES};
use crate::launch::grace_period;

/// Whether mesopod schedules this pod: its `schedulerName` is ours or the
/// default one.
pub(crate) fn is_ours(pod: &Pod) -> bool {
    let name = pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or("default-scheduler");
    SCHEDULER_NAMES.contains(&name)
}

/// Whether the pod ended (Succeeded or Failed).
pub(super) fn is_finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

impl Core {
    pub(super) fn on_pod(&mut self, pod: Arc<Pod>, now: SystemTime) {
        let Ok(key) = PodKey::of(&pod) else { return };
        let terminating = pod.metadata.deletion_timestamp.is_some();
        if let Some(task) = self.registry.for_pod(&key) {
            self.pending.forget(&key);
            if terminating && !task.has(Flag::Deleted) {
                self.kill_for_deletion(task, &pod, now);
            } else if !terminating {
                self.check_images(&task, &pod, now);
            }
            return;
        }
        let bound = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
        if terminating && self.pending.is_adopting(&key) {
            // Its containers outlived their executor: the pod goes once the
            // next executor has adopted and stopped them (`relaunch`).
            return;
        }
        if terminating {
            self.pending.forget(&key);
            if bound {
                // Bound by us earlier, and its task is no longer live: nothing
                // runs, so the pod may go.
                self.emit(Effect::Store(vec![Write::Finalize(key)]));
            }
            return;
        }
        if self.pending.is_bound(&key) && !is_finished(&pod) {
            // Waiting to be launched again on its node (see `relaunch`).
            return;
        }
        if bound || !is_ours(&pod) || is_finished(&pod) {
            self.pending.forget(&key);
            return;
        }
        let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
        self.pending.push(key, pod, priority, now);
        self.observed.metrics.pods_queued.inc();
    }

    pub(super) fn on_pod_deleted(&mut self, pod: &Pod, now: SystemTime) {
        let Ok(key) = PodKey::of(pod) else { return };
        self.pending.forget(&key);
        self.preemption.forget(&key);
        self.images_forget(&key);
        if let Some(task) = self.registry.for_pod(&key)
            && !task.has(Flag::Deleted)
        {
            self.kill_for_deletion(task, pod, now);
        }
    }

    pub(super) fn on_resync(&mut self, pods: Vec<Arc<Pod>>, now: SystemTime) {
        let present: HashSet<PodKey> = pods.iter().filter_map(|p| PodKey::of(p).ok()).collect();
        let gone: Vec<PodKey> = self
            .pending
            .keys()
            .filter(|k| !present.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            self.pending.forget(&key);
        }
        for pod in pods {
            self.on_pod(pod, now);
        }
    }

    fn kill_for_deletion(&mut self, mut task: PodTask, pod: &Pod, now: SystemTime) {
        let grace = pod
            .metadata
            .deletion_grace_period_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or_else(|| grace_period(&task), Duration::from_secs);
        task.set(Flag::Deleted);
        if let Err(e) = self.registry.update(task.clone()) {
            tracing::warn!(task = %task.id, error = %e, "could not flag a deleted pod's task");
        }
        let why = KillReason {
            reason: "Deleted".into(),
            message: "the pod was deleted".into(),
        };
        self.kill(&task, grace, why, now);
        // A pod whose agent cannot be reached is deleted at once, as
        // Kubernetes deletes a pod of a lost node. The KILL stands (and is
        // retried), and the task stays live in the registry, so no second
        // task runs for the pod until this one is known to have ended.
        if matches!(task.state, State::Unreachable | State::Unknown) {
            self.emit(Effect::Store(vec![Write::Finalize(task.pod_key())]));
        }
    }
}
