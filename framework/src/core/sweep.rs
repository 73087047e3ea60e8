//! Time-driven work and subscription changes: offer TTLs, start deadlines,
//! kill retries, reconciliation, retention, and REVIVE/SUPPRESS. Sweeps
//! turn time into work; every status write still goes through the status
//! path.

use std::time::{Duration, SystemTime};

use mesos::proto::scheduler::{Call, call};
use mesos::proto::{FrameworkId, Offer, OfferId};
use procurement::NodeView;
use registry::{Flag, PodTask, Registry, State};

use super::{AgentInfo, Core, KillReason};
use crate::launch::grace_period;
use crate::objects::node_for;
use crate::reconcile::ReconcileRequest;

/// How long after a KILL without an answer it is sent again: Mesos does
/// not retry KILLs, and an agent that was away may have missed it.
const KILL_RETRY: Duration = Duration::from_secs(30);

impl Core {
    pub(super) async fn on_subscribed(
        &mut self,
        id: FrameworkId,
        heartbeat: Duration,
        master: String,
    ) {
        tracing::info!(framework = %id, %master, ?heartbeat, "subscribed to Mesos");
        self.directory.set_framework_id(&id.value);
        self.framework_id = Some(id);
        self.subscribed = true;
        // The master rescinds every outstanding offer on re-subscribe.
        self.offers.clear();
        self.suppressed = false;
        self.observed.metrics.subscriptions.inc();
        self.observed.set_master(Some(master), Some(heartbeat));
        self.start_explicit_reconciliation();
        self.revive_or_suppress(true).await;
    }

    pub(super) fn on_disconnected(&mut self, reason: &str) {
        tracing::warn!(reason, "lost the Mesos subscription");
        self.subscribed = false;
        self.offers.clear();
        self.reconciler.abort();
        self.observed.metrics.reconnects.inc();
        self.observed.set_master(None, None);
    }

    /// Every live task, asked about explicitly.
    pub(super) fn start_explicit_reconciliation(&mut self) {
        let now = self.now();
        let tasks = self
            .registry
            .list(&|t: &PodTask| t.is_live() && t.has(Flag::Launched))
            .into_iter()
            // Mesos has not heard of a task whose ACCEPT is under way, and
            // would call it unknown (lost) just before launching it.
            .filter(|t| !self.launching.contains(&t.id))
            .map(|t| {
                let agent = t.spec.as_ref().map(|s| s.agent_id.value.clone());
                (t.id.value, agent)
            });
        self.reconciler.start_explicit(tasks, now);
    }

    /// Keeps the Node object of an agent current: written when the agent
    /// is first seen and whenever it offers more than ever before.
    pub(super) async fn note_agent(&mut self, offer: &Offer, now: SystemTime) {
        let Some(agent_id) = offer.agent_id.as_ref().map(|a| a.value.clone()) else {
            return;
        };
        // Summed straight from the wire: this runs for every offer.
        let mut offered: std::collections::BTreeMap<&str, f64> = std::collections::BTreeMap::new();
        for r in &offer.resources {
            if let Some(s) = &r.scalar {
                *offered.entry(r.name.as_str()).or_default() += s.value;
            }
        }
        let offered_scalar = |name: &str| offered.get(name).copied().unwrap_or(0.0);
        let entry = self.agents.entry(agent_id).or_insert_with(|| AgentInfo {
            hostname: offer.hostname.clone(),
            capacity: Default::default(),
            written: false,
        });
        let mut changed = !entry.written || entry.hostname != offer.hostname;
        entry.hostname.clone_from(&offer.hostname);
        for name in ["cpus", "mem", "disk", "gpus"] {
            let seen = entry.capacity.entry(name).or_insert(0.0);
            if offered_scalar(name) > *seen {
                *seen = offered_scalar(name);
                changed = true;
            }
        }
        if !changed {
            return;
        }
        let Ok(view) = NodeView::from_offer(offer) else {
            return;
        };
        let node = node_for(&view, &entry.capacity, now);
        entry.written = true;
        if let Err(e) = self.api.upsert_node(node).await {
            tracing::warn!(host = %offer.hostname, error = %e, "could not write the agent's Node");
        }
    }

    pub(super) async fn decline(&self, ids: Vec<OfferId>) {
        if ids.is_empty() {
            return;
        }
        let n = ids.len() as u64;
        let call = Call {
            r#type: Some(call::Type::Decline as i32),
            decline: Some(call::Decline {
                offer_ids: ids,
                filters: Some(mesos::proto::Filters {
                    refuse_seconds: Some(self.config.decline_refuse.as_secs_f64()),
                }),
            }),
            ..Default::default()
        };
        match self.mesos.call(call).await {
            Ok(()) => self.observed.metrics.offers_declined.add(n),
            Err(e) => tracing::debug!(error = %e, "DECLINE not sent"),
        }
    }

    pub(super) async fn sweep(&mut self) {
        let now = self.now();
        // Offers held past their TTL go back, refused for a while.
        let expired: Vec<OfferId> = self
            .offers
            .expire(now)
            .into_iter()
            .filter_map(|o| o.offer.id.clone())
            .collect();
        self.observed
            .metrics
            .offers_expired
            .add(expired.len() as u64);
        if self.subscribed {
            self.decline(expired).await;
        }
        if !self.subscribed {
            return;
        }
        self.start_deadlines(now).await;
        self.retry_kills(now).await;
        for request in self.reconciler.poll(now) {
            self.observed.metrics.reconciliations.inc();
            let tasks = match request {
                ReconcileRequest::Implicit => Vec::new(),
                ReconcileRequest::Explicit(tasks) => tasks
                    .into_iter()
                    .map(|(t, a)| call::reconcile::Task {
                        task_id: Some(t.into()),
                        agent_id: a.map(Into::into),
                    })
                    .collect(),
            };
            let call = Call {
                r#type: Some(call::Type::Reconcile as i32),
                reconcile: Some(call::Reconcile { tasks }),
                ..Default::default()
            };
            if let Err(e) = self.mesos.call(call).await {
                tracing::debug!(error = %e, "RECONCILE not sent");
            }
        }
        for gone in self.registry.gc(now) {
            tracing::debug!(task = %gone.id, "finished task retired from the registry");
            self.observed.forget_task(&gone.id.value);
        }
        self.revive_or_suppress(false).await;
    }

    /// A launched task not RUNNING within the start deadline is killed; its
    /// pod fails with the reason once the kill is confirmed.
    async fn start_deadlines(&mut self, now: SystemTime) {
        let deadline = self.config.start_deadline;
        let late = self.registry.list(&|t: &PodTask| {
            t.state == State::Pending
                && t.has(Flag::Launched)
                && now.duration_since(t.created).unwrap_or_default() >= deadline
        });
        for task in late {
            if self.killing.contains_key(&task.id) {
                continue;
            }
            let why = KillReason {
                reason: "StartDeadlineExceeded".into(),
                message: format!(
                    "the pod's task did not start running within {}s",
                    deadline.as_secs()
                ),
            };
            self.kill(&task, grace_period(&task), why).await;
        }
    }

    async fn retry_kills(&mut self, now: SystemTime) {
        let due: Vec<_> = self
            .killing
            .iter()
            .filter(|(_, sent)| now.duration_since(**sent).unwrap_or_default() >= KILL_RETRY)
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            match self.registry.get(&id) {
                Some(task) if task.is_live() => {
                    let why = self.kill_reasons.get(&id).cloned().unwrap_or(KillReason {
                        reason: "Killed".into(),
                        message: "killed by mesopod".into(),
                    });
                    self.kill(&task, grace_period(&task), why).await;
                }
                _ => {
                    self.killing.remove(&id);
                    self.kill_reasons.remove(&id);
                }
            }
        }
    }

    /// SUPPRESS when nothing waits; REVIVE, at most once per interval, when
    /// pods wait and offers are suppressed or missing.
    pub(super) async fn revive_or_suppress(&mut self, force: bool) {
        if !self.subscribed {
            return;
        }
        let now = self.now();
        if self.queue.is_empty() {
            if !self.suppressed || force {
                let call = Call {
                    r#type: Some(call::Type::Suppress as i32),
                    suppress: Some(call::Suppress::default()),
                    ..Default::default()
                };
                if self.mesos.call(call).await.is_ok() {
                    self.suppressed = true;
                }
            }
            return;
        }
        let want = self.suppressed || force;
        let allowed = self.last_revive.is_none_or(|t| {
            now.duration_since(t).unwrap_or_default() >= self.config.revive_min_interval
        });
        if want && (allowed || force) {
            let call = Call {
                r#type: Some(call::Type::Revive as i32),
                revive: Some(call::Revive::default()),
                ..Default::default()
            };
            if self.mesos.call(call).await.is_ok() {
                self.suppressed = false;
                self.last_revive = Some(now);
            }
        }
    }
}
