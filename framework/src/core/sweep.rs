//! Time-driven work and subscription changes: offer TTLs, start deadlines,
//! kill retries, reconciliation, retention, and REVIVE/SUPPRESS. Sweeps
//! turn time into work; every status write still goes through the status
//! path.

use std::time::{Duration, SystemTime};

use mesos::proto::scheduler::{Call, call};
use mesos::proto::{FrameworkId, OfferId};
use registry::{Flag, PodTask, Registry, State};

use super::Core;
use super::effect::{Effect, Reply};
use super::launching::KillReason;
use crate::launch::grace_period;
use crate::reconcile::ReconcileRequest;

/// How long after a KILL without an answer it is sent again: Mesos does
/// not retry KILLs, and an agent that was away may have missed it.
pub(crate) const KILL_RETRY: Duration = Duration::from_secs(30);

/// How long a node discovery keeps offers coming: a few of Mesos' allocation
/// intervals (1 s by default), so every agent offers at least once.
const NODE_DISCOVERY_WINDOW: Duration = Duration::from_secs(3);

impl Core {
    pub(super) fn on_subscribed(
        &mut self,
        id: FrameworkId,
        heartbeat: Duration,
        master: String,
        now: SystemTime,
    ) {
        tracing::info!(framework = %id, %master, ?heartbeat, "subscribed to Mesos");
        self.directory.set_framework_id(&id.value);
        self.directory.set_master(&master);
        self.subscription.framework_id = Some(id);
        self.subscription.subscribed = true;
        // The master rescinds every outstanding offer on re-subscribe.
        self.offers.clear();
        self.subscription.suppressed = false;
        self.observed.metrics.subscriptions.inc();
        self.observed.set_master(Some(master), Some(heartbeat));
        self.start_explicit_reconciliation(now);
        self.revive_or_suppress(true, now);
        self.ask_executors_to_register();
        // KILLs asked for while no subscription was open (a recovered
        // pod's deletion, say) could not be sent: they go now.
        self.resend_kills(now, Duration::ZERO);
        // So do new images for running pods (a recovered pod's, say).
        self.resend_images(now);
        // Its inverse offers went with the old subscription; the allocator
        // sends new ones.
        self.maintenance.forget_inverse_offers();
    }

    pub(super) fn on_disconnected(&mut self, reason: &str) {
        tracing::warn!(reason, "lost the Mesos subscription");
        self.subscription.subscribed = false;
        self.offers.clear();
        self.subscription.reconciler.abort();
        self.observed.metrics.reconnects.inc();
        self.observed.set_master(None, None);
    }

    /// Every live task, asked about explicitly.
    pub(super) fn start_explicit_reconciliation(&mut self, now: SystemTime) {
        let launching = &self.launching;
        let tasks = self
            .registry
            .list(&|t: &PodTask| t.is_live() && t.has(Flag::Launched))
            .into_iter()
            // Mesos has not heard of a task whose ACCEPT is under way, and
            // would call it unknown (lost) just before launching it.
            .filter(|t| !launching.contains(&t.id))
            .map(|t| {
                let agent = t.spec.as_ref().map(|s| s.agent_id.value.clone());
                (t.id.value, agent)
            });
        self.subscription.reconciler.start_explicit(tasks, now);
    }

    pub(super) fn decline(&mut self, ids: Vec<OfferId>) {
        let refuse = self.config.decline_refuse.as_secs_f64();
        self.decline_refusing(ids, refuse);
    }

    /// DECLINE `ids`, refusing their agents for `refuse_seconds`.
    pub(super) fn decline_refusing(&mut self, ids: Vec<OfferId>, refuse_seconds: f64) {
        if ids.is_empty() {
            return;
        }
        let call = Call {
            r#type: Some(call::Type::Decline as i32),
            decline: Some(call::Decline {
                offer_ids: ids,
                filters: Some(mesos::proto::Filters {
                    refuse_seconds: Some(refuse_seconds),
                }),
            }),
            ..Default::default()
        };
        self.emit(Effect::Call(call, Reply::None));
    }

    pub(super) fn sweep(&mut self, now: SystemTime) {
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
        if !self.subscription.subscribed {
            return;
        }
        self.decline(expired);
        self.preemption.expire(now);
        self.start_deadlines(now);
        self.retry_kills(now);
        self.check_liveness(now);
        self.resend_images(now);
        self.drain_sweep(now);
        for request in self.subscription.reconciler.poll(now) {
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
            self.emit(Effect::Call(call, Reply::None));
        }
        for gone in self.registry.gc(now) {
            tracing::debug!(task = %gone.id, "finished task retired from the registry");
            self.observed.forget_task(&gone.id.value);
        }
        self.revive_or_suppress(false, now);
    }

    /// A launched task not RUNNING within the start deadline is killed; its
    /// pod fails with the reason once the kill is confirmed.
    fn start_deadlines(&mut self, now: SystemTime) {
        let deadline = self.config.start_deadline;
        let late = self.registry.list(&|t: &PodTask| {
            t.state == State::Pending
                && t.has(Flag::Launched)
                && now.duration_since(t.created).unwrap_or_default() >= deadline
        });
        for task in late {
            if self.launching.killing.contains_key(&task.id) {
                continue;
            }
            let why = KillReason {
                reason: "StartDeadlineExceeded".into(),
                message: format!(
                    "the pod's task did not start running within {}s",
                    deadline.as_secs()
                ),
            };
            self.kill(&task, grace_period(&task), why, now);
        }
    }

    fn retry_kills(&mut self, now: SystemTime) {
        self.resend_kills(now, KILL_RETRY);
    }

    /// Sends again every KILL sent at least `after` ago and not answered.
    fn resend_kills(&mut self, now: SystemTime, after: Duration) {
        let mut due: Vec<_> = self
            .launching
            .killing
            .iter()
            .filter(|(_, sent)| now.duration_since(**sent).unwrap_or_default() >= after)
            .map(|(id, _)| id.clone())
            .collect();
        // In a fixed order, so the effects do not depend on hashing.
        due.sort();
        for id in due {
            match self.registry.get(&id) {
                Some(task) if task.is_live() => {
                    let why = self
                        .launching
                        .reasons
                        .get(&id)
                        .cloned()
                        .unwrap_or(KillReason {
                            reason: "Killed".into(),
                            message: "killed by mesopod".into(),
                        });
                    self.kill(&task, grace_period(&task), why, now);
                }
                _ => self.launching.forget_kill(&id),
            }
        }
    }

    /// SUPPRESS when nothing waits; REVIVE, at most once per interval, when
    /// pods wait and offers are suppressed or missing. The core counts on
    /// the call succeeding and sets itself back if it did not
    /// ([`Core::on_called`]).
    pub(super) fn revive_or_suppress(&mut self, force: bool, now: SystemTime) {
        let sub = &mut self.subscription;
        if !sub.subscribed {
            return;
        }
        if self.pending.queue().is_empty() {
            // A node discovery lets the agents' offers come for a moment.
            if !force && sub.discovering_until.is_some_and(|t| now < t) {
                return;
            }
            sub.discovering_until = None;
            if !sub.suppressed || force {
                sub.suppressed = true;
                sub.suppressed_at = Some(now);
                let call = Call {
                    r#type: Some(call::Type::Suppress as i32),
                    suppress: Some(call::Suppress::default()),
                    ..Default::default()
                };
                self.emit(Effect::Call(call, Reply::Suppress));
                return;
            }
            let every = self.config.node_discovery_interval;
            let due = sub
                .suppressed_at
                .is_some_and(|t| now.duration_since(t).unwrap_or_default() >= every);
            if !every.is_zero() && due {
                // Suppressed offers never show an agent that joined since: revive,
                // and its offer writes its Node.
                sub.suppressed = false;
                sub.discovering_until = Some(now + NODE_DISCOVERY_WINDOW);
                sub.revive_before = sub.last_revive.replace(now);
                let call = Call {
                    r#type: Some(call::Type::Revive as i32),
                    revive: Some(call::Revive::default()),
                    ..Default::default()
                };
                self.emit(Effect::Call(call, Reply::Revive));
            }
            return;
        }
        let want = sub.suppressed || force;
        let allowed = sub.last_revive.is_none_or(|t| {
            now.duration_since(t).unwrap_or_default() >= self.config.revive_min_interval
        });
        if want && (allowed || force) {
            sub.suppressed = false;
            sub.revive_before = sub.last_revive.replace(now);
            let call = Call {
                r#type: Some(call::Type::Revive as i32),
                revive: Some(call::Revive::default()),
                ..Default::default()
            };
            self.emit(Effect::Call(call, Reply::Revive));
        }
    }

    /// A REVIVE or SUPPRESS ended; one that failed changed nothing.
    pub(super) fn on_called(&mut self, call: Reply, ok: bool) {
        let sub = &mut self.subscription;
        match (call, ok) {
            (_, true) | (Reply::None, _) => {}
            (Reply::Suppress, false) => sub.suppressed = false,
            (Reply::Revive, false) => {
                sub.suppressed = true;
                sub.last_revive = sub.revive_before.take();
            }
        }
    }
}
