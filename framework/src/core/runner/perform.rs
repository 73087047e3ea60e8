//! Performing the core's effects: store writes, Mesos calls, admission.

use std::collections::HashMap;

use apiserver::{Api, ApiError, PodHead};
use futures::future::join_all;
use k8s_openapi::api::policy::v1::Eviction;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta, Preconditions};
use mesos::proto::scheduler::{Call, call};
use mesos::proto::{TaskState, TaskStatus};
use registry::{Flag, PodKey, PodTask};

use super::Runner;
use crate::core::launching::KillReason;
use crate::core::{CoreError, Effect, Input, Reply, StatusWrite, Step, Write, Written};
use crate::podstatus::pod_status_for;

impl Runner {
    /// Performs `effects` and every effect their results lead to, until
    /// the turn is quiet. The one place effects leave the core: once the
    /// core steps down (the lease is lost), nothing of that turn is done.
    pub(super) async fn perform(&mut self, mut effects: Vec<Effect>) -> Result<(), CoreError> {
        while !effects.is_empty() {
            let (results, more) = self.perform_once(effects).await?;
            let now = self.clock.now();
            effects = more;
            for step in results {
                effects.extend(self.core.step(step, now));
            }
        }
        Ok(())
    }

    /// Performs one batch of effects, concurrently, and returns what came
    /// of those the core wants to hear about, with the effects of launch
    /// reports stepped meanwhile.
    ///
    /// A launch report is stepped as soon as it comes, even while this
    /// batch's writes are in flight, and the ACCEPTs it asks for leave at
    /// once: a round's second half must not wait behind a turn's status
    /// writes (awaiting them put half a second between a pod's binding and
    /// its ACCEPT under load). The core still sees one step at a time.
    async fn perform_once(
        &mut self,
        effects: Vec<Effect>,
    ) -> Result<(Vec<Step>, Vec<Effect>), CoreError> {
        // Effects stepped earlier in the same turn came from a core that
        // believed it led; none of them may leave.
        if effects.iter().any(|e| matches!(e, Effect::StepDown)) {
            return Err(CoreError::LostLease);
        }
        let mut stores = Vec::new();
        // Writes for one pod in order; pods concurrently.
        let mut statuses: HashMap<PodKey, Vec<StatusWrite>> = HashMap::new();
        let mut calls = Vec::new();
        let mut acks = Vec::new();
        let mut admit = None;
        let mut binds = Vec::new();
        for effect in effects {
            match effect {
                Effect::Store(writes) => stores.push(writes),
                Effect::WriteStatus(w) => statuses.entry(w.task.pod_key()).or_default().push(*w),
                Effect::Call(c, reply) => calls.push((c, reply)),
                Effect::Acknowledge(c) => acks.push(c),
                Effect::Admit(requests) => admit = Some(requests),
                Effect::Bind(b) => binds.push(b),
                Effect::Accept(accepts) => self.send_accepts(accepts),
                Effect::Stop(message) => return Err(CoreError::FailedOver(message)),
                Effect::StepDown => return Err(CoreError::LostLease),
            }
        }
        if !acks.is_empty() {
            // Everything acknowledged is durable already; the calls need
            // not hold up the turn (a lost ACK makes Mesos resend). The
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
        let (api, mesos, observed) = (self.api.clone(), self.mesos.clone(), self.observed.clone());
        let (admission, launch_tx, now) = (
            self.admission.clone(),
            self.launch_tx.clone(),
            self.clock.now(),
        );
        let work = async move {
            let api = &api;
            let stores = join_all(stores.into_iter().map(|writes| store(api, writes)));
            let statuses = join_all(statuses.into_values().map(|chain| async move {
                let mut out = Vec::with_capacity(chain.len());
                for w in chain {
                    let written =
                        match write_status(api, &w.task, &w.status, w.kill.as_ref(), now).await {
                            Ok(written) => Some(written),
                            // Not durable: no ACK, so Mesos sends it again.
                            Err(e) => {
                                tracing::warn!(task = %w.task.id, error = %e, "pod status not written; will retry");
                                None
                            }
                        };
                    out.push(Step::StatusWritten {
                        task: w.task,
                        written,
                        ack: w.ack,
                    });
                }
                out
            }));
            let calls =
                join_all((calls.into_iter()).map(|(c, reply)| call(&mesos, &observed, c, reply)));
            let admission = async {
                let requests = admit?;
                let outcomes = join_all(requests.into_iter().map(|r| admission.admit(r))).await;
                Some(Step::Admitted(outcomes))
            };
            // A round is bound once the turn's events are stored: whoever
            // sees a pod run can read why it was placed as it was (an
            // admission warning, say).
            let ((), statuses, calls, admitted) = futures::join!(
                async {
                    stores.await;
                    for b in binds {
                        super::launch::spawn_binds(api.clone(), launch_tx.clone(), b);
                    }
                },
                statuses,
                calls,
                admission
            );
            let mut results: Vec<Step> = statuses.into_iter().flatten().collect();
            results.extend(calls.into_iter().flatten());
            results.extend(admitted);
            results
        };
        tokio::pin!(work);
        let mut later = Vec::new();
        loop {
            tokio::select! {
                results = &mut work => return Ok((results, later)),
                Some(report) = self.launches.recv() => {
                    let now = self.clock.now();
                    for effect in self.core.step(Step::Input(Input::Launch(report)), now) {
                        match effect {
                            Effect::Accept(accepts) => self.send_accepts(accepts),
                            Effect::Stop(message) => return Err(CoreError::FailedOver(message)),
                            Effect::StepDown => return Err(CoreError::LostLease),
                            other => later.push(other),
                        }
                    }
                }
            }
        }
    }

    /// Sends ACCEPTs off the loop; their answers come back on the launch
    /// channel.
    fn send_accepts(&self, accepts: Vec<crate::core::Accept>) {
        super::launch::spawn_accepts(self.mesos.clone(), self.launch_tx.clone(), accepts);
    }
}

/// Sends one call; returns its outcome when the core wants it.
async fn call(
    mesos: &crate::driver::MesosHandle,
    observed: &crate::observe::Observed,
    c: Call,
    reply: Reply,
) -> Option<Step> {
    let kind = c.r#type.and_then(|t| call::Type::try_from(t).ok());
    let declined = c.decline.as_ref().map_or(0, |d| d.offer_ids.len() as u64);
    let ok = match mesos.call(c).await {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(call = ?kind, error = %e, "call to Mesos not sent");
            false
        }
    };
    if ok && declined > 0 {
        observed.metrics.offers_declined.add(declined);
    }
    (reply != Reply::None).then_some(Step::Called { call: reply, ok })
}

/// Performs store writes in order; failures are logged, never fatal.
async fn store(api: &Api, writes: Vec<Write>) {
    for write in writes {
        match write {
            Write::Event(ev) => {
                let ns = ev.metadata.namespace.clone().unwrap_or_default();
                if let Err(e) = api.record_event(&ns, *ev).await {
                    tracing::debug!(error = %e, "could not record an event");
                }
            }
            Write::PodStatus { key, status } => {
                if let Err(e) = api
                    .update_pod_status(&key.namespace, &key.name, *status)
                    .await
                {
                    tracing::debug!(pod = %key.name, error = %e, "could not write the pod's status");
                }
            }
            Write::Finalize(key) => {
                let uid = (!key.uid.is_empty()).then_some(key.uid.as_str());
                if let Err(e) = api.finalize_pod(&key.namespace, &key.name, uid).await {
                    tracing::warn!(pod = %key.name, error = %e, "could not finalize a deleted pod");
                }
            }
            Write::PodNotReady(key, now) => {
                let result = api
                    .update_pod_status_with(&key.namespace, &key.name, |head| {
                        let ours = key.uid.is_empty()
                            || head.metadata.uid.as_deref() == Some(key.uid.as_str());
                        ours.then(|| crate::podstatus::marked_not_ready(head.status.as_ref(), now))
                    })
                    .await;
                if let Err(e) = result {
                    tracing::debug!(pod = %key.name, error = %e, "could not mark the pod not ready");
                }
            }
            Write::Preempt { key, scheduler } => {
                let result = api
                    .preempt_pod(&key.namespace, &key.name, &key.uid, &scheduler)
                    .await;
                match result {
                    Ok(_) => {}
                    // Gone already, or another pod now has its name: nothing to stop.
                    Err(ApiError::NotFound { .. } | ApiError::Conflict { .. }) => {}
                    Err(e) => {
                        tracing::warn!(pod = %key.name, error = %e, "could not preempt the pod")
                    }
                }
            }
            Write::Evict { key, node } => evict(api, &key, &node).await,
            Write::NodeMaintenance { node, window } => {
                if let Err(e) = api.mark_node_maintenance(&node, window).await {
                    tracing::warn!(%node, error = %e, "could not mark the Node's maintenance");
                }
            }
            Write::Node(node) => {
                let name = node.metadata.name.clone().unwrap_or_default();
                if let Err(e) = api.upsert_node(*node).await {
                    tracing::warn!(host = %name, error = %e, "could not write the agent's Node");
                }
            }
        }
    }
}

/// Evicts a pod of a Node under maintenance. A refusal (its budget allows no
/// disruption now) is a Warning on the Node, in kubectl drain's words; the
/// core evicts it again later.
async fn evict(api: &Api, key: &PodKey, node: &str) {
    let eviction = Eviction {
        metadata: ObjectMeta {
            name: Some(key.name.clone()),
            namespace: Some(key.namespace.clone()),
            ..ObjectMeta::default()
        },
        delete_options: Some(DeleteOptions {
            preconditions: Some(Preconditions {
                uid: Some(key.uid.clone()).filter(|u| !u.is_empty()),
                ..Preconditions::default()
            }),
            ..DeleteOptions::default()
        }),
    };
    match api
        .evict_pod(&key.namespace, &key.name, eviction, false)
        .await
    {
        Ok(()) => tracing::info!(pod = %key.name, %node, "evicted for Mesos maintenance"),
        Err(ApiError::NotFound { .. } | ApiError::Conflict { .. }) => {}
        Err(e) => {
            let message = format!(
                "error when evicting pods/{} -n {} (will retry after {}s): {e}",
                key.name,
                key.namespace,
                crate::core::EVICTION_RETRY.as_secs()
            );
            tracing::info!(%node, %message, "maintenance drain held back");
            let now = api.now();
            let event =
                crate::objects::node_event(node, "Warning", "EvictionBlocked", message, now);
            let ns = event.metadata.namespace.clone().unwrap_or_default();
            if let Err(e) = api.record_event(&ns, event).await {
                tracing::debug!(error = %e, "could not record an event");
            }
        }
    }
}

/// Writes the pod status an update implies. A pod that is gone needs no
/// write: the update is durable in the only sense left.
async fn write_status(
    api: &apiserver::Api,
    task: &PodTask,
    status: &TaskStatus,
    kill: Option<&KillReason>,
    now: std::time::SystemTime,
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
                && let Some(why) = kill
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
        finalize: false,
        running_since: None,
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
        finalize: terminal
            && (task.has(Flag::Deleted) || before.metadata.deletion_timestamp.is_some()),
        running_since: running,
    })
}
