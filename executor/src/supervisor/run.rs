//! The pod's loop: wait for kill orders, container events, probe reports,
//! evictions and the deadline, then tear the pod down and report the end.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;

use super::NOT_ISOLATED;
use super::Supervisor;
use crate::events::ContainerEvent;
use crate::runtime::{KillOrder, Order, PodState};
use crate::status::{ContainerRecord, Life};

impl Supervisor {
    pub(crate) async fn run(mut self) {
        if self.oci.is_none() {
            self.out_events.push(ContainerEvent::new(
                "Warning",
                NOT_ISOLATED,
                format!(
                    "container runtime is \"process\" on node {}: the pod's containers run as host processes, without isolation",
                    self.node_name
                ),
                String::new(),
            ));
        }
        // An adopted pod is already where it was: no Pending in between.
        if !self.is_adopting() {
            self.report(PodState::Starting, None);
        }
        if let Err(e) = std::fs::create_dir_all(&self.pod_dir) {
            let msg = format!(
                "cannot create the pod directory {}: {e}",
                self.pod_dir.display()
            );
            self.report(PodState::Failed, Some(msg));
            return;
        }
        // From the pod's start: an adopted pod's deadline does not restart.
        let ran = std::time::SystemTime::now()
            .duration_since(self.start_time)
            .unwrap_or_default();
        let deadline = (self.plan.active_deadline).map(|d| Instant::now() + d.saturating_sub(ran));
        let watch = (!self.inputs.volumes.is_empty()).then(|| {
            let volumes = Arc::clone(&self.inputs.volumes);
            tokio::spawn(volumes.watch(Arc::clone(&self.inputs.info), self.evict_tx.clone()))
        });
        if self.is_adopting() {
            self.adopt_containers().await;
        } else {
            self.advance();
        }
        while !self.is_over() {
            let sigkill_at = self.killing.filter(|k| !k.sigkilled).map(|k| k.sigkill_at);
            let deadline_armed = deadline.is_some() && self.killing.is_none();
            tokio::select! {
                order = self.kills.recv(), if self.kills_open => match order {
                    Some(Order::Kill(order)) => self.begin_kill(order),
                    Some(Order::Images(update)) => self.update_images(&update),
                    None => {
                        // The runtime is gone: nobody will hear about a grace period.
                        self.kills_open = false;
                        self.begin_kill(KillOrder { grace: Some(Duration::ZERO), cap: Duration::ZERO });
                    }
                },
                Some(event) = self.events.next() => self.handle(event),
                Some(report) = self.probe_rx.recv() => self.on_probe(report),
                Some(message) = self.evictions.recv(), if self.evicted.is_none() => self.evict(message),
                () = sleep_until(deadline), if deadline_armed => {
                    self.deadline_exceeded = true;
                    self.begin_kill(KillOrder { grace: None, cap: Duration::MAX });
                }
                () = sleep_until(sigkill_at), if sigkill_at.is_some() => self.sigkill_all(),
                else => break,
            }
        }
        if let Some(watch) = watch {
            watch.abort();
        }
        if !self.inputs.volumes.is_empty() {
            self.inputs.volumes.teardown().await;
        }
        if let (Some(sandbox), Some(oci)) = (self.sandbox.get(), &self.oci) {
            oci.remove_sandbox(sandbox).await;
        }
        if let Some(oci) = &self.oci {
            oci.gc.release(&self.task_id.value);
        }
        self.report_final();
    }

    /// Kubelet's eviction: stop every container now; the pod ends Failed,
    /// reason `Evicted`.
    pub(super) fn evict(&mut self, message: String) {
        tracing::warn!(task = %self.task_id, %message, "evicting pod");
        self.out_events.push(ContainerEvent::new(
            "Warning",
            crate::status::EVICTED,
            message.clone(),
            String::new(),
        ));
        self.evicted = Some(message);
        self.begin_kill(KillOrder {
            grace: Some(Duration::ZERO),
            cap: Duration::ZERO,
        });
    }

    pub(super) fn is_over(&self) -> bool {
        if self.killing.is_some() {
            return !self.all().any(ContainerRecord::is_running) && self.starting.is_empty();
        }
        self.init_failed
            || (self.next_init >= self.init.len()
                && self
                    .main
                    .iter()
                    .all(|c| matches!(c.life, Life::Terminated(_))))
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
