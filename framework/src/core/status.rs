//! Mesos events and task status updates: the one place that moves a
//! task's state and decides a pod's status. The status is written by the
//! runner ([`Effect::WriteStatus`]); the ACK goes out only once it is
//! durable ([`Step::StatusWritten`]).
//!
//! [`Step::StatusWritten`]: super::Step::StatusWritten

use std::time::SystemTime;

use mesos::proto::json::WireEnum;
use mesos::proto::scheduler::{Call, Event, call, event};
use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{ExecutorId, Offer, OfferId, TaskId, TaskState, TaskStatus};
use registry::{PodTask, Registry, StatusOutcome, recover_from};

use super::Core;
use super::effect::{Effect, Reply, StatusWrite, Write, Written};
use crate::observe::{Outcome, StatusRow};

impl Core {
    pub(super) fn on_event(&mut self, event: Event, now: SystemTime) {
        match event.kind() {
            Some(event::Type::Offers) => {
                for offer in event.offers.map(|o| o.offers).unwrap_or_default() {
                    self.add_offer(offer, now);
                }
            }
            Some(event::Type::InverseOffers) => {
                let offers = event.inverse_offers.map(|o| o.inverse_offers);
                self.on_inverse_offers(offers.unwrap_or_default(), now);
            }
            Some(event::Type::RescindInverseOffer) => {
                if let Some(id) = event.rescind_inverse_offer.and_then(|r| r.inverse_offer_id) {
                    self.on_rescind_inverse_offer(&id);
                }
            }
            Some(event::Type::Rescind) => {
                if let Some(id) = event.rescind.and_then(|r| r.offer_id) {
                    self.offers.rescind(&id);
                    self.observed.metrics.offers_rescinded.inc();
                }
            }
            Some(event::Type::Update) => {
                if let Some(status) = event.update.and_then(|u| u.status) {
                    self.on_update(status, now);
                }
            }
            Some(event::Type::Failure) => {
                if let Some(f) = event.failure {
                    tracing::warn!(agent = ?f.agent_id, executor = ?f.executor_id, status = ?f.status, "Mesos reports a failure");
                    if let (Some(agent), Some(executor)) = (&f.agent_id, &f.executor_id) {
                        self.drop_offers_listing(&agent.value, executor);
                    }
                }
            }
            Some(event::Type::Message) => {
                // Whatever an executor says, it is alive.
                if let Some(message) = &event.message {
                    self.on_executor_message(message, now);
                    self.on_node_images(message);
                }
            }
            _ => {}
        }
    }

    /// An executor ended: offers held from its agent still list it, and a
    /// pod placed on one would reuse it, so the master (as Mesos does)
    /// would count the executor's resources, which such an offer lacks,
    /// and refuse the task as invalid. They go back at once, unfiltered;
    /// the master offers the agent again as it is now.
    pub(super) fn drop_offers_listing(&mut self, agent: &str, executor: &ExecutorId) {
        let stale: Vec<String> = self
            .offers
            .iter()
            .filter(|o| o.agent_id() == agent && o.offer.executor_ids.contains(executor))
            .map(|o| o.id().to_owned())
            .collect();
        let ids: Vec<OfferId> = stale
            .iter()
            .filter_map(|id| self.offers.take(id))
            .filter_map(|o| o.offer.id.clone())
            .collect();
        self.decline_refusing(ids, 0.0);
    }

    fn add_offer(&mut self, offer: Offer, now: SystemTime) {
        self.observed.metrics.offers_received.inc();
        if let (Some(agent), Some(base)) =
            (&offer.agent_id, offer.url.as_ref().and_then(|u| u.base()))
        {
            self.directory.set_agent(&agent.value, base);
        }
        if let Some(node) = self.agents.note(&offer, now) {
            self.emit(Effect::Store(vec![Write::Node(Box::new(node))]));
        }
        if let Some(agent) = &offer.agent_id {
            let unavailability = offer.unavailability.as_ref();
            self.offer_unavailability(&agent.value, &offer.hostname, unavailability, now);
        }
        let id = offer.id.clone();
        // Copied only while a nominee waits for its agent's offer.
        let agent = offer
            .agent_id
            .as_ref()
            .filter(|_| self.preemption.nominee_waits_for_offers())
            .map(|a| a.value.clone());
        match self.offers.add(offer, now) {
            // What deferred pods waited for; the clock need not move for them.
            Ok(()) => {
                self.pending.queue_mut().wake_deferred(now);
                if let Some(agent) = agent {
                    self.wake_nominees(&agent, now);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "declining an offer mesopod cannot use");
                if let Some(id) = id {
                    self.decline(vec![id]);
                }
            }
        }
    }

    /// Applies one status update to the registry and asks for the pod
    /// write it implies; an update that changes nothing is acknowledged
    /// at once (it is as durable as it will be).
    pub(super) fn on_update(&mut self, status: TaskStatus, now: SystemTime) {
        self.update(status, now, true);
    }

    /// An update mesopod makes itself (a launch that ends before reaching
    /// an agent): applied as it is, never taken as a reason to launch the
    /// pod again.
    pub(super) fn apply_update(&mut self, status: TaskStatus, now: SystemTime) {
        self.update(status, now, false);
    }

    fn update(&mut self, status: TaskStatus, now: SystemTime, from_mesos: bool) {
        let state = TaskState::try_from(status.state).unwrap_or(TaskState::TaskUnknown);
        self.observed.metrics.status_update(state);
        if let Some(id) = &status.task_id {
            self.subscription.reconciler.observe_update(&id.value);
        }
        if status.reason == Some(Reason::ReasonAgentReregistered as i32) {
            self.on_agent_reregistered(&status, now);
        }
        if status.reason == Some(Reason::ReasonAgentDraining as i32)
            && let Some(agent) = &status.agent_id
        {
            self.on_agent_draining(&agent.value, now);
        }
        let ack = ack_call(&status);
        if from_mesos && self.relaunch(&status, now) {
            if let Some(ack) = ack {
                self.emit(Effect::Acknowledge(ack));
            }
            return;
        }
        let outcome = self.registry.update_status(&status, now);
        self.record(&status, &outcome, now);
        match outcome {
            StatusOutcome::Applied(t) => {
                if t.task.state.is_terminal() {
                    self.on_task_ended(&t.task.id);
                }
                let from_executor = status.source == Some(Source::SourceExecutor as i32);
                if (from_executor || t.task.state.is_terminal())
                    && let Some(held) = self.launching.unheard.remove(&t.task.id)
                    && let Some((grace, why)) = held.filter(|_| !t.task.state.is_terminal())
                {
                    // The adopting executor has the task: its KILL goes now.
                    self.kill(&t.task, grace, why, now);
                }
                let events = crate::container_events::events(&status, &t.task, now);
                if !events.is_empty() {
                    let writes = events.into_iter().map(|e| Write::Event(Box::new(e)));
                    self.emit(Effect::Store(writes.collect()));
                }
                let kill = self.launching.reasons.get(&t.task.id).cloned();
                self.emit(Effect::WriteStatus(Box::new(StatusWrite {
                    task: Box::new(t.task),
                    status,
                    kill,
                    ack: ack.map(Box::new),
                })));
                return;
            }
            StatusOutcome::Duplicate { .. }
            | StatusOutcome::Stale { .. }
            | StatusOutcome::Absorbed { .. } => {}
            StatusOutcome::UnknownTask { task_id, observed } => {
                if !observed.is_terminal() {
                    self.unknown_task(&status, &task_id, now);
                }
            }
            StatusOutcome::Invalid(e) => {
                tracing::warn!(error = %e, "ignoring a malformed status update");
            }
        }
        if let Some(ack) = ack {
            self.emit(Effect::Acknowledge(ack));
        }
    }

    /// A pod status write ended: durable, so its ACK goes out; not durable,
    /// so no ACK, and Mesos sends the update again.
    pub(super) fn on_status_written(
        &mut self,
        task: &PodTask,
        written: Option<Written>,
        ack: Option<Box<Call>>,
        now: SystemTime,
    ) {
        let Some(written) = written else { return };
        if let Some(ack) = ack {
            self.emit(Effect::Acknowledge(*ack));
        }
        if task.state.is_terminal() {
            self.launching.forget_kill(&task.id);
            self.subscription.reconciler.forget(&task.id.value);
        }
        if let Some(created) = written.running_since {
            self.observed
                .metrics
                .pod_started(now.duration_since(created).unwrap_or_default());
        }
        if written.finalize {
            self.emit(Effect::Store(vec![Write::Finalize(task.pod_key())]));
        }
    }

    fn record(&self, status: &TaskStatus, outcome: &StatusOutcome, now: SystemTime) {
        let Some(id) = &status.task_id else { return };
        let row = StatusRow {
            state: TaskState::try_from(status.state)
                .map(|s| s.wire_name())
                .unwrap_or_default(),
            source: status
                .source
                .and_then(|s| Source::try_from(s).ok())
                .map(|s| s.wire_name())
                .filter(|s| !s.is_empty()),
            reason: status
                .reason
                .and_then(|r| Reason::try_from(r).ok())
                .map(|r| r.wire_name())
                .filter(|s| !s.is_empty()),
            message: status.message.as_deref().map(Box::from),
            outcome: match outcome {
                StatusOutcome::Applied(t) => Outcome::Applied {
                    from: t.previous.as_str(),
                    to: t.current.as_str(),
                },
                StatusOutcome::Duplicate { .. } => Outcome::Other("duplicate".into()),
                StatusOutcome::Stale { .. } => Outcome::Other("stale".into()),
                StatusOutcome::Absorbed { .. } => Outcome::Other("absorbed (task finished)".into()),
                StatusOutcome::UnknownTask { .. } => Outcome::Other("unknown task".into()),
                StatusOutcome::Invalid(e) => Outcome::Other(format!("invalid: {e}").into()),
            },
            received_unix: now
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
        };
        self.observed.record_status(&id.value, row);
    }

    /// A task Mesos runs but the registry does not know: recover it from
    /// its pod if one names it, else kill it so nothing runs unaccounted.
    fn unknown_task(&mut self, status: &TaskStatus, task_id: &TaskId, now: SystemTime) {
        for pod in self.lookup.pods() {
            let names_it = pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(registry::annotations::TASK_ID))
                .is_some_and(|t| *t == task_id.value);
            if !names_it {
                continue;
            }
            if let Ok(Some(task)) = recover_from(&pod, now)
                && self.registry.register(task).is_ok()
            {
                tracing::info!(task = %task_id, "recovered a task Mesos reported");
                let outcome = self.registry.update_status(status, now);
                if outcome.changed_state() {
                    self.start_explicit_reconciliation(now);
                }
                return;
            }
        }
        tracing::warn!(task = %task_id, "killing a task mesopod does not know");
        let call = Call {
            r#type: Some(call::Type::Kill as i32),
            kill: Some(call::Kill {
                task_id: Some(task_id.clone()),
                agent_id: status.agent_id.clone(),
                kill_policy: None,
            }),
            ..Default::default()
        };
        self.emit(Effect::Call(call, Reply::None));
    }
}

/// The ACKNOWLEDGE for an update, if it carries a uuid (master-generated
/// updates do not, and must not be acknowledged).
fn ack_call(status: &TaskStatus) -> Option<Call> {
    let uuid = status.uuid.clone().filter(|u| !u.is_empty())?;
    Some(Call {
        r#type: Some(call::Type::Acknowledge as i32),
        acknowledge: Some(call::Acknowledge {
            agent_id: Some(status.agent_id.clone()?),
            task_id: Some(status.task_id.clone()?),
            uuid,
        }),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mesos::proto::{AgentId, TaskId};

    #[test]
    fn only_updates_with_a_uuid_are_acknowledged() {
        let mut status = TaskStatus {
            task_id: Some(TaskId::new("t")),
            agent_id: Some(AgentId::new("a")),
            state: TaskState::TaskRunning as i32,
            ..Default::default()
        };
        assert!(
            ack_call(&status).is_none(),
            "master-generated updates carry no uuid"
        );
        status.uuid = Some(vec![1; 16]);
        let ack = ack_call(&status).and_then(|c| c.acknowledge);
        assert_eq!(ack.map(|a| a.uuid), Some(vec![1; 16]));
    }
}
