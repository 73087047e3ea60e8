//! The admission step of a scheduling round: runs the hooks for the pods
//! that are due, applies their changes, and holds or fails pods.

use std::sync::Arc;
use std::time::SystemTime;

use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use registry::{PodKey, PodTask};

use super::Core;
use super::schedule::{Attempt, set_condition};
use crate::admission::{Changes, Outcome, Request, apply_changes};

impl Core {
    /// Runs the admission hooks for the ready pods, concurrently.
    pub(super) async fn admit(&mut self, ready: Vec<PodKey>, now: SystemTime) -> Vec<Attempt> {
        let mut candidates = Vec::new();
        for key in ready {
            let Some(pod) = self.waiting.get(&key).cloned() else {
                continue;
            };
            match PodTask::new(pod.clone(), Vec::new(), now) {
                Ok(task) => candidates.push(Attempt {
                    key,
                    task,
                    pod,
                    changes: Changes::default(),
                }),
                Err(e) => {
                    let msg = format!("mesopod cannot make a task for this pod: {e}");
                    self.fail_unbound(&key, &pod, "InvalidPod", &msg, now).await;
                }
            }
        }
        if self.admission.is_empty() {
            return candidates;
        }
        let admission = self.admission.clone();
        let requests: Vec<Request> = candidates
            .iter()
            .map(|a| {
                let entry = self.queue.get(&a.key);
                let attempt = entry.map_or(1, |e| e.attempts + e.holds + 1);
                crate::demand::admission_request(&self.needs, &a.task, &a.pod, attempt)
            })
            .collect();
        let outcomes = join_all(requests.into_iter().map(|r| {
            let admission = admission.clone();
            async move { admission.admit(r).await }
        }))
        .await;
        let mut admitted = Vec::new();
        for (mut attempt, outcome) in candidates.into_iter().zip(outcomes) {
            let pod = attempt.pod.clone();
            match outcome {
                Outcome::Admit { changes, warnings } => {
                    self.observed.metrics.admission(if changes.is_empty() {
                        "admit"
                    } else {
                        "admitWith"
                    });
                    for w in warnings {
                        self.event(&pod, "Warning", "AdmissionFailOpen", w, now)
                            .await;
                    }
                    if !changes.is_empty() {
                        let changed = Arc::new(apply_changes(&pod, &changes));
                        // Hooks change labels, annotations and the spec, never
                        // which pod it is; a change that did is not placed.
                        if let Err(e) = attempt.task.set_pod(Arc::clone(&changed)) {
                            tracing::warn!(pod = %attempt.key, error = %e, "admission changed the pod's identity; not placing it");
                            continue;
                        }
                        attempt.pod = changed;
                    }
                    attempt.changes = changes;
                    admitted.push(attempt);
                }
                Outcome::Hold(reason) => {
                    self.observed.metrics.admission("hold");
                    self.on_hold(&attempt, reason, now).await;
                }
                Outcome::Refuse(reason) => {
                    self.observed.metrics.admission("refuse");
                    self.fail_unbound(&attempt.key, &pod, "AdmissionRefused", &reason, now)
                        .await;
                }
            }
        }
        admitted
    }

    async fn on_hold(&mut self, attempt: &Attempt, reason: String, now: SystemTime) {
        let window = self.admission.config().hold_window;
        let first = self.queue.get(&attempt.key).and_then(|e| e.first_hold);
        if first.is_some_and(|f| now.duration_since(f).unwrap_or_default() >= window) {
            let msg = format!(
                "held by admission for longer than {}s: {reason}",
                window.as_secs()
            );
            self.fail_unbound(&attempt.key, &attempt.pod, "AdmissionHeld", &msg, now)
                .await;
            return;
        }
        let first_time = first.is_none();
        self.queue.hold(&attempt.key, now, reason.clone());
        if first_time {
            self.event(&attempt.pod, "Normal", "AdmissionHeld", reason, now)
                .await;
        }
    }

    /// Fails a pod that never got a task, for good.
    async fn fail_unbound(
        &mut self,
        key: &PodKey,
        pod: &Pod,
        reason: &str,
        message: &str,
        now: SystemTime,
    ) {
        self.queue.remove(key);
        self.waiting.remove(key);
        let mut status = pod.status.clone().unwrap_or_default();
        status.phase = Some("Failed".into());
        status.reason = Some(reason.into());
        status.message = Some(message.into());
        set_condition(&mut status, "PodScheduled", "False", reason, message, now);
        // The event first: whoever sees the pod Failed can read why.
        self.event(pod, "Warning", reason, message.to_owned(), now)
            .await;
        if let Err(e) = self
            .api
            .update_pod_status(&key.namespace, &key.name, status)
            .await
        {
            tracing::warn!(pod = %key.name, error = %e, "could not fail the pod");
        }
    }
}
