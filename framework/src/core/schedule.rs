//! One scheduling round: the pods that are due, admission (see `admit`),
//! placement by the procurement crate's [`procurement::Placer`] over every
//! live offer, registration, and the round's launch (see `launch`).

use std::borrow::Cow;
use std::collections::HashSet;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
use procurement::{AggregateFailure, OfferView};
use registry::{Flag, Registry};

use super::Core;
use super::admit::Attempt;
use super::effect::{Effect, Placed, Write};
use super::launch::Estimate;
use super::launching::MAX_LAUNCHING;
use super::preempt::PreemptRound;
use crate::objects::pod_event;
use crate::podstatus::timestamp;

/// Pods one scheduling round takes from the queue (the highest priority
/// first). A round binds and launches its pods concurrently, which costs
/// memory per pod in flight: a burst of 50,000 pods goes through in rounds
/// of this size.
pub(super) const MAX_ROUND: usize = 2048;

/// How soon a pod that saw only part of the cluster is tried again: about
/// the time Mesos takes to offer back what an ACCEPT left over.
const DEFER: std::time::Duration = std::time::Duration::from_millis(200);

impl Core {
    /// Starts a round: the due pods go to admission, or straight to
    /// placement when no hook is configured.
    pub(super) fn schedule(&mut self, now: SystemTime) {
        if !self.subscription.subscribed
            || self.pending.queue().is_empty()
            || self.launching.len() >= MAX_LAUNCHING
            || self.admitting.is_some()
        {
            return;
        }
        let mut ready = self.pending.round(now, MAX_ROUND);
        if !ready.is_empty() && self.offers.is_empty() {
            // A full cluster offers nothing: only a pod that may preempt
            // has anything to try.
            ready = self.may_preempt(ready, now);
        }
        if ready.is_empty() {
            return;
        }
        let attempts = self.attempts(ready, now);
        if attempts.is_empty() {
            return;
        }
        if self.admission.is_empty() {
            self.place(attempts, now);
            return;
        }
        let requests = self.admission_requests(&attempts);
        self.admitting = Some(attempts);
        self.emit(Effect::Admit(requests));
    }

    /// The hooks answered for the round under admission: place what they
    /// admitted.
    pub(super) fn admitted(&mut self, outcomes: Vec<crate::admission::Outcome>, now: SystemTime) {
        let Some(candidates) = self.admitting.take() else {
            tracing::warn!("admission answers for no round; ignored");
            return;
        };
        let attempts = self.on_admitted(candidates, outcomes, now);
        if !attempts.is_empty() {
            self.place(attempts, now);
        }
    }

    /// Places the admitted pods on every live offer, registers what was
    /// placed and starts its launch. The core reads no clock: the runner's
    /// turn trace times the whole step (`sweep_schedule_us`).
    fn place(&mut self, attempts: Vec<Attempt>, now: SystemTime) {
        let views = self.offer_views();
        if views.is_empty() && !self.offers.is_empty() {
            return;
        }
        let round = if self.preemption.holds() {
            // A nominated agent's room is its nominees' (see `preempt`).
            let held = self.preemption.held();
            let may_use = |task: &registry::PodTask, view: &procurement::OfferView| {
                held.get(view.node().agent_id().value.as_str()).is_none_or(
                    |(priority, nominees)| {
                        task.priority() > *priority || nominees.contains(&&task.pod_key())
                    },
                )
            };
            self.placer.place_round_where(
                attempts.iter().map(|a| &a.task),
                &views,
                &mut self.cursor,
                Some(&may_use),
            )
        } else {
            self.placer
                .place_round(attempts.iter().map(|a| &a.task), &views, &mut self.cursor)
        };
        let used = round
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .map(|p| p.offer_index)
            .collect();
        let mut preempting = PreemptRound::new(views, used);
        let mut placed = Vec::new();
        let mut unschedulable = 0;
        let mut estimate = Estimate::default();
        for (attempt, result) in attempts.into_iter().zip(round) {
            let queued = self.pending.entry(&attempt.key).map_or(now, |e| e.queued);
            let placement = match result {
                Ok(p) => p,
                Err(failure) => {
                    unschedulable +=
                        usize::from(self.unschedulable(&attempt, &failure, &mut preempting, now));
                    continue;
                }
            };
            let limit = self.config.max_accept_bytes;
            if !estimate.admit(
                &placement.offer_id.value,
                &placement.task,
                &attempt.pod,
                limit,
            ) {
                // Its offer's ACCEPT is full: the offer's leftovers come
                // back at once (refuse_seconds 0), and it goes then.
                self.pending.queue_mut().defer(&attempt.key, now + DEFER);
                continue;
            }
            let mut task = placement.task;
            task.set(Flag::Launched);
            let bound = self.pending.is_bound(&attempt.key);
            if bound {
                // Its pod is bound already: should its annotations fail to
                // be written, it goes back to its node (`rebind`).
                task.set(Flag::Bound);
            }
            self.pending.forget(&attempt.key);
            self.preemption.forget(&attempt.key);
            self.preemption.running(task.priority());
            match self.registry.register(task) {
                Ok(task) => placed.push(Placed {
                    task,
                    offer: placement.offer_id,
                    queued,
                    changes: attempt.changes,
                    bound,
                }),
                // The pod has a live task already: it must not get a
                // second, and it is not waiting.
                Err(e) => tracing::warn!(error = %e, "not launching a second task for a pod"),
            }
        }
        tracing::trace!(
            target: "mesopod::turns",
            placed = placed.len(),
            unschedulable,
            "scheduling round"
        );
        if !placed.is_empty() {
            self.launch(placed, now);
        }
    }

    /// Every live offer as procurement sees it, in offer id order, with the
    /// executor an agent runs for us already; none of a held agent
    /// (`relaunch`).
    ///
    /// A round runs every turn that has pods due, so this is kept cheap at
    /// thousands of offers: the views share their parsed parts, and an
    /// offer's view with its agent's executor is worked out once and kept
    /// with the offer (an executor id names one `ExecutorInfo` for good).
    fn offer_views(&mut self) -> Vec<OfferView> {
        let held = self.held_agents();
        if !held.is_empty() {
            tracing::debug!(
                agents = ?held,
                "agents held until the master answers for their recovered tasks"
            );
        }
        let (agents, lookup) = (&mut self.agents, self.lookup.as_ref());
        let (liveness, cordoned) = (&self.liveness, &self.cordoned);
        let maintenance = &self.maintenance;
        // A NotReady agent (its executor quiet) takes no pod, as
        // kube-scheduler keeps off a node with the unreachable taint; nor does
        // one being given back for Mesos maintenance.
        let mut live: Vec<_> = self
            .offers
            .iter_mut()
            .filter(|o| {
                !held.contains(o.agent_id())
                    && !liveness.is_not_ready(o.agent_id())
                    && !maintenance.fences(o.agent_id(), &o.offer.hostname)
            })
            .collect();
        live.sort_unstable_by(|a, b| a.id().cmp(b.id()));
        live.into_iter()
            .filter_map(|o| {
                let known = o
                    .view
                    .as_ref()
                    .is_some_and(|v| v.node().running_executor().is_some());
                if !known && !o.offer.executor_ids.is_empty() {
                    let running = agents.executor_on(o.agent_id(), lookup).filter(|info| {
                        info.executor_id
                            .as_ref()
                            .is_some_and(|id| o.offer.executor_ids.contains(id))
                    });
                    if let Some(info) = running {
                        o.view = o.view.take().map(|v| v.with_running_executor(info));
                    }
                }
                let view = o.view.clone()?;
                // A cordon can come after the offer: its taint goes on here.
                Some(if cordoned.contains(view.node().hostname()) {
                    let node = view.node().clone().cordoned();
                    view.with_node(node)
                } else {
                    view
                })
            })
            .collect()
    }

    /// Books a failed attempt, and writes the event and condition when the
    /// pod is newly or differently unschedulable (true then).
    fn unschedulable(
        &mut self,
        attempt: &Attempt,
        failure: &AggregateFailure,
        preempting: &mut PreemptRound,
        now: SystemTime,
    ) -> bool {
        let mut failure = Cow::Borrowed(failure);
        if failure.agents < self.agents.len() && !failure.is_invalid_pod() {
            // Some agents had no offer out (their resources are being used
            // or re-offered). If one of them could hold the pod, look again
            // soon, without calling it unschedulable or growing its backoff.
            // If none could even when idle (a pod larger than any agent), it
            // is unschedulable now, and they count in the message as
            // kube-scheduler counts every node.
            let offered: HashSet<&str> = failure.failures.iter().map(|(h, _)| h.as_str()).collect();
            let short = self
                .needs
                .pod_needs(&attempt.task)
                .ok()
                .and_then(|needs| self.agents.shortfalls_without_offers(needs, &offered));
            let Some(short) = short else {
                if let Some(host) = self.preempt(attempt, preempting, true, now) {
                    let message = format!(
                        "0/{n} agents available: {n} with every resource the pod needs held by running pods.",
                        n = self.agents.len()
                    );
                    return self.nominate(attempt, &message, &host, now);
                }
                self.observed.metrics.attempt("deferred", &[]);
                self.pending.queue_mut().defer(&attempt.key, now + DEFER);
                return false;
            };
            let all = failure.to_mut();
            all.agents += short.len();
            all.failures.extend(short);
        }
        let failure = failure.as_ref();
        let message = failure.to_string();
        self.observed
            .metrics
            .attempt("unschedulable", &failure.metric_counts());
        if self.pending.is_bound(&attempt.key) {
            // Bound: it waits for its node, as a kubelet's pod does, and its
            // PodScheduled condition stays True.
            self.pending.queue_mut().backoff(&attempt.key, now, message);
            return false;
        }
        if let Some(host) = self.preempt(attempt, preempting, false, now) {
            return self.nominate(attempt, &message, &host, now);
        }
        let changed = self
            .pending
            .entry(&attempt.key)
            .is_none_or(|e| e.last_reason.as_deref() != Some(message.as_str()));
        self.pending
            .queue_mut()
            .backoff(&attempt.key, now, message.clone());
        if !changed {
            return false;
        }
        self.write_unschedulable(attempt, &message, None, now);
        true
    }

    /// The pod waits for the agent it is nominated to, whose lower-priority
    /// pods are stopping: tried again when an offer comes (or at the
    /// nomination's end), with its status and event written when new.
    fn nominate(&mut self, attempt: &Attempt, message: &str, host: &str, now: SystemTime) -> bool {
        let known = attempt
            .pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref())
            == Some(host);
        let changed = !known
            || self
                .pending
                .entry(&attempt.key)
                .is_none_or(|e| e.last_reason.as_deref() != Some(message));
        let until = self
            .preemption
            .expires(&attempt.key)
            .unwrap_or(now + super::preempt::NOMINATION_SLACK);
        let queue = self.pending.queue_mut();
        queue.backoff(&attempt.key, now, message.to_owned());
        queue.wait_until(&attempt.key, until);
        if !changed {
            return false;
        }
        self.write_unschedulable(attempt, message, Some(host), now);
        true
    }

    /// Writes the pod's `PodScheduled=False` (Unschedulable) condition, its
    /// nominated node, and the FailedScheduling event.
    fn write_unschedulable(
        &mut self,
        attempt: &Attempt,
        message: &str,
        nominated: Option<&str>,
        now: SystemTime,
    ) {
        let mut status = attempt.pod.status.clone().unwrap_or_default();
        status.phase.get_or_insert_with(|| "Pending".into());
        if let Some(host) = nominated {
            status.nominated_node_name = Some(host.to_owned());
        }
        set_condition(
            &mut status,
            "PodScheduled",
            "False",
            "Unschedulable",
            message,
            now,
        );
        let event = pod_event(
            &attempt.pod,
            "Warning",
            "FailedScheduling",
            message.to_owned(),
            now,
        );
        self.emit(Effect::Store(vec![
            Write::Event(Box::new(event)),
            Write::PodStatus {
                key: attempt.key.clone(),
                status: Box::new(status),
            },
        ]));
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
