//! One scheduling round: admission, procurement over every live offer and
//! registration; the round is then launched (`launching.rs`).

use std::sync::Arc;
use std::time::SystemTime;

use futures::future::join_all;
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use procurement::{AggregateFailure, OfferView};
use registry::{Flag, PodKey, PodTask, Registry};

use super::Core;
use super::launching::Placed;
use crate::admission::Changes;
use crate::objects::pod_event;
use crate::podstatus::timestamp;

/// Pods one scheduling round takes from the queue (the highest priority
/// first). A round binds and launches its pods concurrently, which costs
/// memory per pod in flight, and the loop applies no status update while a
/// round runs: a burst of 50,000 pods goes through in rounds of this size.
pub(super) const MAX_ROUND: usize = 2048;

/// How soon a pod that saw only part of the cluster is tried again: about
/// the time Mesos takes to offer back what an ACCEPT left over.
const DEFER: std::time::Duration = std::time::Duration::from_millis(200);

/// A pod admitted for this round, with the task it would launch.
pub(super) struct Attempt {
    pub(super) key: PodKey,
    pub(super) task: PodTask,
    /// The pod as it will be placed (after the admission hooks' changes).
    pub(super) pod: Arc<Pod>,
    /// What the admission hooks changed, persisted with the binding.
    pub(super) changes: Changes,
}

/// What to write about a pod that fits nowhere.
struct Unschedulable {
    key: PodKey,
    event: k8s_openapi::api::core::v1::Event,
    status: PodStatus,
}

impl Core {
    pub(super) async fn schedule(&mut self) {
        if !self.subscribed || self.queue.is_empty() || !self.may_place() {
            return;
        }
        let now = self.now();
        let ready = self.queue.ready_up_to(now, MAX_ROUND);
        if ready.is_empty() || self.offers.is_empty() {
            return;
        }
        let ta = std::time::Instant::now();
        let attempts = self.admit(ready, now).await;
        let tb = std::time::Instant::now();
        if attempts.is_empty() {
            return;
        }

        let mut live: Vec<_> = self.offers.iter().cloned().collect();
        live.sort_by(|a, b| a.id().cmp(b.id()));
        let views: Vec<OfferView> = live
            .iter()
            .filter_map(|o| {
                let view = o.view.clone()?;
                let running = if o.offer.executor_ids.is_empty() {
                    None
                } else {
                    self.executor_on(o.agent_id()).filter(|info| {
                        info.executor_id
                            .as_ref()
                            .is_some_and(|id| o.offer.executor_ids.contains(id))
                    })
                };
                Some(match running {
                    Some(info) => {
                        let node = view.node().clone().with_running_executor(info.clone());
                        view.with_node(node)
                    }
                    None => view,
                })
            })
            .collect();
        if views.is_empty() {
            return;
        }
        let tc = std::time::Instant::now();
        let round =
            self.placer
                .place_round(attempts.iter().map(|a| &a.task), &views, &mut self.cursor);
        let mut placed = Vec::new();
        let mut unschedulable = Vec::new();
        for (attempt, result) in attempts.into_iter().zip(round) {
            let queued = self.queue.get(&attempt.key).map_or(now, |e| e.queued);
            let placement = match result {
                Ok(p) => p,
                Err(failure) => {
                    unschedulable.extend(self.unschedulable(&attempt, &failure, now));
                    continue;
                }
            };
            let mut task = placement.task;
            task.set(Flag::Launched);
            self.forget_waiting(&attempt.key);
            match self.registry.register(task) {
                Ok(task) => placed.push(Placed {
                    task,
                    offer: placement.offer_id,
                    queued,
                    changes: attempt.changes,
                }),
                // The pod has a live task already: it must not get a
                // second, and it is not waiting.
                Err(e) => tracing::warn!(error = %e, "not launching a second task for a pod"),
            }
        }
        let td = std::time::Instant::now();
        let n_unschedulable = unschedulable.len();
        self.report_unschedulable(unschedulable).await;
        if placed.is_empty() {
            return;
        }
        let n_placed = placed.len();
        self.launch(placed, now);
        tracing::trace!(
            target: "mesopod::turns",
            placed = n_placed,
            unschedulable = n_unschedulable,
            admit_us = (tb - ta).as_micros() as u64,
            offers_us = (tc - tb).as_micros() as u64,
            place_us = (td - tc).as_micros() as u64,
            report_us = td.elapsed().as_micros() as u64,
            "scheduling round"
        );
    }

    /// Books a failed attempt; returns what to write when the pod is
    /// newly or differently unschedulable.
    fn unschedulable(
        &mut self,
        attempt: &Attempt,
        failure: &AggregateFailure,
        now: SystemTime,
    ) -> Option<Unschedulable> {
        if failure.agents < self.agents.len() && !failure.is_invalid_pod() {
            // Some agents had no offer out (their resources are being used
            // or re-offered): the pod may fit there. Look again soon, without
            // calling it unschedulable or growing its backoff.
            self.observed.metrics.attempt("deferred", &[]);
            self.queue.defer(&attempt.key, now + DEFER);
            return None;
        }
        let message = failure.to_string();
        self.observed
            .metrics
            .attempt("unschedulable", &failure.counts());
        let changed = self
            .queue
            .get(&attempt.key)
            .is_none_or(|e| e.last_reason.as_deref() != Some(message.as_str()));
        self.queue.backoff(&attempt.key, now, message.clone());
        if !changed {
            return None;
        }
        let mut status = attempt.pod.status.clone().unwrap_or_default();
        status.phase.get_or_insert_with(|| "Pending".into());
        set_condition(
            &mut status,
            "PodScheduled",
            "False",
            "Unschedulable",
            &message,
            now,
        );
        Some(Unschedulable {
            key: attempt.key.clone(),
            event: pod_event(&attempt.pod, "Warning", "FailedScheduling", message, now),
            status,
        })
    }

    /// Writes the FailedScheduling events, then the conditions, concurrently.
    async fn report_unschedulable(&self, all: Vec<Unschedulable>) {
        let api = self.api.clone();
        join_all(all.into_iter().map(|u| {
            let api = api.clone();
            async move {
                let ns = u.key.namespace.clone();
                if let Err(e) = api.create_event(&ns, u.event).await {
                    tracing::debug!(error = %e, "could not record an event");
                }
                if let Err(e) = api.update_pod_status(&ns, &u.key.name, u.status).await {
                    tracing::debug!(pod = %u.key.name, error = %e, "could not mark the pod unschedulable");
                }
            }
        }))
        .await;
    }

    /// Records an event about a pod; failures are logged, never fatal.
    pub(super) async fn event(
        &self,
        pod: &Pod,
        type_: &str,
        reason: &str,
        message: String,
        now: SystemTime,
    ) {
        let ev = pod_event(pod, type_, reason, message, now);
        let ns = ev.metadata.namespace.clone().unwrap_or_default();
        if let Err(e) = self.api.create_event(&ns, ev).await {
            tracing::debug!(error = %e, "could not record an event");
        }
    }
}

/// Sets a condition, keeping its transition time when the status is unchanged.
pub(super) fn set_condition(
    status: &mut PodStatus,
    type_: &str,
    value: &str,
    reason: &str,
    message: &str,
    now: SystemTime,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let fresh = PodCondition {
        type_: type_.into(),
        status: value.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_transition_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            timestamp(now),
        )),
        ..Default::default()
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == value => {
            c.reason = fresh.reason;
            c.message = fresh.message;
        }
        Some(c) => *c = fresh,
        None => conditions.push(fresh),
    }
}
