//! Mesos events and task status updates: the one place that writes a
//! pod's status and moves a task's state.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use apiserver::{ApiError, PodHead};
use futures::future::join_all;
use mesos::proto::json::WireEnum;
use mesos::proto::scheduler::{Call, Event, call, event};
use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{DurationInfo, KillPolicy, Offer, TaskState, TaskStatus};
use registry::{Flag, PodKey, PodTask, Registry, StatusOutcome, recover_from};

use super::{Core, KillReason};
use crate::observe::{Outcome, StatusRow};
use crate::podstatus::pod_status_for;

/// What to do for one status update once the registry has applied it.
enum Work {
    /// Write the pod's new status, then acknowledge.
    Write {
        task: Box<PodTask>,
        status: TaskStatus,
        ack: Option<Call>,
    },
}

/// What came of one write.
struct Written {
    task: Box<PodTask>,
    terminal: bool,
    finalize: bool,
    running: Option<SystemTime>,
}

impl Core {
    pub(super) async fn on_event(&mut self, event: Event, updates: &mut Vec<TaskStatus>) {
        match event.kind() {
            Some(event::Type::Offers) => {
                for offer in event.offers.map(|o| o.offers).unwrap_or_default() {
                    self.add_offer(offer).await;
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
                    updates.push(status);
                }
            }
            Some(event::Type::Failure) => {
                if let Some(f) = event.failure {
                    tracing::warn!(agent = ?f.agent_id, executor = ?f.executor_id, status = ?f.status, "Mesos reports a failure");
                }
            }
            Some(event::Type::Message) => {
                tracing::debug!("message from an executor ignored");
            }
            _ => {}
        }
    }

    async fn add_offer(&mut self, offer: Offer) {
        self.observed.metrics.offers_received.inc();
        let now = self.now();
        if let (Some(agent), Some(base)) =
            (&offer.agent_id, offer.url.as_ref().and_then(|u| u.base()))
        {
            self.directory.set_agent(&agent.value, base);
        }
        self.note_agent(&offer, now).await;
        let id = offer.id.clone();
        if let Err(e) = self.offers.add(offer, now) {
            tracing::warn!(error = %e, "declining an offer mesopod cannot use");
            if let Some(id) = id {
                self.decline(vec![id]).await;
            }
        }
    }

    /// Applies a batch of status updates: registry first (in order), then
    /// the pod writes, concurrently across pods and in order within one,
    /// then the acknowledgements of what is durable.
    pub(super) async fn apply_updates(&mut self, updates: Vec<TaskStatus>) {
        let now = self.now();
        let mut per_pod: HashMap<PodKey, Vec<Work>> = HashMap::new();
        let mut acks = Vec::new();
        for status in updates {
            let state = TaskState::try_from(status.state).unwrap_or(TaskState::TaskUnknown);
            self.observed.metrics.status_update(state);
            if let Some(id) = &status.task_id {
                self.reconciler.observe_update(&id.value);
            }
            let ack = ack_call(&status);
            let outcome = self.registry.update_status(&status, now);
            self.record(&status, &outcome, now);
            match outcome {
                StatusOutcome::Applied(t) => {
                    let key = t.task.pod_key();
                    per_pod.entry(key).or_default().push(Work::Write {
                        task: Box::new(t.task),
                        status,
                        ack,
                    });
                }
                StatusOutcome::Duplicate { .. }
                | StatusOutcome::Stale { .. }
                | StatusOutcome::Absorbed { .. } => {
                    acks.extend(ack);
                }
                StatusOutcome::UnknownTask { task_id, observed } => {
                    acks.extend(ack);
                    if !observed.is_terminal() {
                        self.unknown_task(&status, &task_id).await;
                    }
                }
                StatusOutcome::Invalid(e) => {
                    tracing::warn!(error = %e, "ignoring a malformed status update");
                    acks.extend(ack);
                }
            }
        }
        let kill_reasons = self.kill_reasons.clone();
        let api = self.api.clone();
        let results = join_all(per_pod.into_values().map(|works| {
            let api = api.clone();
            let kill_reasons = &kill_reasons;
            async move {
                let mut out = Vec::new();
                for work in works {
                    let Work::Write { task, status, ack } = work;
                    match write_status(&api, &task, &status, kill_reasons, now).await {
                        Ok(written) => out.push((Some(written), ack)),
                        // Not durable: no ACK, so Mesos sends it again.
                        Err(e) => {
                            tracing::warn!(task = %task.id, error = %e, "pod status not written; will retry");
                            out.push((None, None));
                        }
                    }
                }
                out
            }
        }))
        .await;
        let mut finalize = Vec::new();
        for (written, ack) in results.into_iter().flatten() {
            acks.extend(ack);
            if let Some(w) = written {
                if w.terminal {
                    self.killing.remove(&w.task.id);
                    self.kill_reasons.remove(&w.task.id);
                    self.reconciler.forget(&w.task.id.value);
                }
                if let Some(created) = w.running {
                    self.observed
                        .metrics
                        .pod_started(now.duration_since(created).unwrap_or_default());
                }
                if w.finalize {
                    finalize.push(w.task.pod_key());
                }
            }
        }
        for key in finalize {
            self.finalize(&key).await;
        }
        // Everything acknowledged here is durable already; the calls need
        // not hold up the next turn (a lost ACK makes Mesos resend). The
        // handle bounds how many are in flight.
        let mesos = self.mesos.clone();
        tokio::spawn(join_all(acks.into_iter().map(move |a| {
            let mesos = mesos.clone();
            async move {
                if let Err(e) = mesos.call(a).await {
                    tracing::debug!(error = %e, "acknowledgement not sent; Mesos will resend");
                }
            }
        })));
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
    async fn unknown_task(&mut self, status: &TaskStatus, task_id: &mesos::proto::TaskId) {
        let now = self.now();
        if let Ok(list) = self.api.list_pods(None, "", "") {
            for pod in list.items {
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
                        self.start_explicit_reconciliation();
                    }
                    return;
                }
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
        if let Err(e) = self.mesos.call(call).await {
            tracing::warn!(error = %e, "could not kill an unknown task");
        }
    }

    /// Asks Mesos to kill a task with a grace period, and remembers why.
    pub(super) async fn kill(&mut self, task: &PodTask, grace: Duration, why: KillReason) {
        let now = self.now();
        let held = self.hold_kill(task, grace, &why);
        self.kill_reasons.insert(task.id.clone(), why);
        self.killing.insert(task.id.clone(), now);
        if held {
            return;
        }
        let call = Call {
            r#type: Some(call::Type::Kill as i32),
            kill: Some(call::Kill {
                task_id: Some(task.id.clone()),
                agent_id: task.spec.as_ref().map(|s| s.agent_id.clone()),
                kill_policy: Some(KillPolicy {
                    grace_period: Some(DurationInfo::from_duration(grace)),
                }),
            }),
            ..Default::default()
        };
        if let Err(e) = self.mesos.call(call).await {
            tracing::warn!(task = %task.id, error = %e, "KILL not sent; will retry");
        }
    }
}

/// Writes the pod status an update implies. A pod that is gone needs no
/// write: the update is durable in the only sense left.
async fn write_status(
    api: &apiserver::Api,
    task: &PodTask,
    status: &TaskStatus,
    kill_reasons: &HashMap<mesos::proto::TaskId, KillReason>,
    now: SystemTime,
) -> Result<Written, ApiError> {
    let key = task.pod_key();
    let state = TaskState::try_from(status.state).unwrap_or(TaskState::TaskUnknown);
    let terminal = task.state.is_terminal();
    let ours = |head: &PodHead| {
        key.uid.is_empty() || head.metadata.uid.as_deref() == Some(key.uid.as_str())
    };
    let result = api
        .update_pod_status_with(&key.namespace, &key.name, |head| {
            // Another pod of the same name: not the one this task ran for.
            if !ours(head) {
                return None;
            }
            let mut new_status = pod_status_for(status, head.status.as_ref(), now);
            if terminal
                && let Some(why) = kill_reasons.get(&task.id)
                && new_status.phase.as_deref() == Some("Failed")
                && why.reason != "Deleted"
            {
                new_status.reason = Some(why.reason.clone());
                new_status.message = Some(why.message.clone());
            }
            Some(new_status)
        })
        .await;
    let gone = Written {
        task: Box::new(task.clone()),
        terminal,
        finalize: false,
        running: None,
    };
    let before = match result {
        Ok(write) if ours(&write.before) => write.before,
        Ok(_) | Err(ApiError::NotFound { .. }) => return Ok(gone),
        Err(e) => return Err(e),
    };
    let was_running = before.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    let running = (state == TaskState::TaskRunning && !was_running)
        .then(|| {
            before
                .metadata
                .creation_timestamp
                .as_ref()
                .map(apiserver::system_time)
        })
        .flatten();
    Ok(Written {
        task: Box::new(task.clone()),
        terminal,
        finalize: terminal
            && (task.has(Flag::Deleted) || before.metadata.deletion_timestamp.is_some()),
        running,
    })
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
