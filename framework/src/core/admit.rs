//! The admission step of a scheduling round: which pods are tried, the
//! requests for the hooks (run by the runner: a webhook is I/O), and what
//! their answers do: change, hold or fail pods.

use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;
use registry::{PodKey, PodTask};

use super::Core;
use super::effect::{Effect, Write};
use super::schedule::set_condition;
use crate::admission::{Changes, Outcome, Request, apply_changes};
use crate::objects::pod_event;

/// A pod tried this round, with the task it would launch.
#[derive(Debug)]
pub(super) struct Attempt {
    pub(super) key: PodKey,
    pub(super) task: PodTask,
    /// The pod as it will be placed (after the admission hooks' changes).
    pub(super) pod: Arc<Pod>,
    /// What the admission hooks changed, persisted with the binding.
    pub(super) changes: Changes,
}

impl Core {
    /// The attempts for the ready pods; a pod that cannot make a task fails.
    pub(super) fn attempts(&mut self, ready: Vec<PodKey>, now: SystemTime) -> Vec<Attempt> {
        let mut attempts = Vec::new();
        for key in ready {
            let Some(pod) = self.pending.pod(&key).cloned() else {
                continue;
            };
            match PodTask::new(pod.clone(), Vec::new(), now) {
                Ok(task) => attempts.push(Attempt {
                    key,
                    task,
                    pod,
                    changes: Changes::default(),
                }),
                Err(e) => {
                    let msg = format!("mesopod cannot make a task for this pod: {e}");
                    self.fail_unbound(&key, &pod, "InvalidPod", &msg, now);
                }
            }
        }
        attempts
    }

    /// What the hooks are asked about each attempt.
    pub(super) fn admission_requests(&self, attempts: &[Attempt]) -> Vec<Request> {
        attempts
            .iter()
            .map(|a| {
                let entry = self.pending.entry(&a.key);
                let attempt = entry.map_or(1, |e| e.attempts + e.holds + 1);
                crate::demand::admission_request(&self.needs, &a.task, &a.pod, attempt)
            })
            .collect()
    }

    /// Applies the hooks' answers; returns the attempts admitted.
    pub(super) fn on_admitted(
        &mut self,
        candidates: Vec<Attempt>,
        outcomes: Vec<Outcome>,
        now: SystemTime,
    ) -> Vec<Attempt> {
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
                        self.event(&pod, "Warning", "AdmissionFailOpen", w, now);
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
                    self.on_hold(&attempt, reason, now);
                }
                Outcome::Refuse(reason) => {
                    self.observed.metrics.admission("refuse");
                    self.fail_unbound(&attempt.key, &pod, "AdmissionRefused", &reason, now);
                }
            }
        }
        admitted
    }

    fn on_hold(&mut self, attempt: &Attempt, reason: String, now: SystemTime) {
        let window = self.admission.config().hold_window;
        let first = self.pending.entry(&attempt.key).and_then(|e| e.first_hold);
        if first.is_some_and(|f| now.duration_since(f).unwrap_or_default() >= window) {
            let msg = format!(
                "held by admission for longer than {}s: {reason}",
                window.as_secs()
            );
            self.fail_unbound(&attempt.key, &attempt.pod, "AdmissionHeld", &msg, now);
            return;
        }
        let first_time = first.is_none();
        self.pending
            .queue_mut()
            .hold(&attempt.key, now, reason.clone());
        if first_time {
            self.event(&attempt.pod, "Normal", "AdmissionHeld", reason, now);
        }
    }

    /// Fails a pod that never got a task, for good: the event first, so
    /// whoever sees the pod Failed can read why.
    pub(super) fn fail_unbound(
        &mut self,
        key: &PodKey,
        pod: &Pod,
        reason: &str,
        message: &str,
        now: SystemTime,
    ) {
        self.pending.forget(key);
        let mut status = pod.status.clone().unwrap_or_default();
        status.phase = Some("Failed".into());
        status.reason = Some(reason.into());
        status.message = Some(message.into());
        set_condition(&mut status, "PodScheduled", "False", reason, message, now);
        let event = pod_event(pod, "Warning", reason, message.to_owned(), now);
        self.emit(Effect::Store(vec![
            Write::Event(Box::new(event)),
            Write::PodStatus {
                key: key.clone(),
                status: Box::new(status),
            },
        ]));
    }

    /// Records an event about a pod.
    pub(super) fn event(
        &mut self,
        pod: &Pod,
        type_: &str,
        reason: &str,
        message: String,
        now: SystemTime,
    ) {
        let event = pod_event(pod, type_, reason, message, now);
        self.emit(Effect::Store(vec![Write::Event(Box::new(event))]));
    }
}
