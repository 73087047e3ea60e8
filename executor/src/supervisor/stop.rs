//! Stopping the pod: SIGTERM every container, SIGKILL once the grace
//! period is over (sooner if a later order says so).

use std::time::Duration;

use tokio::time::Instant;

use super::{Killing, Supervisor};
use crate::process::{self, KILL, TERM};
use crate::runtime::KillOrder;
use crate::status::{ContainerRecord, Life};

impl Supervisor {
    pub(super) fn begin_kill(&mut self, order: KillOrder) {
        let grace = order
            .grace
            .unwrap_or(self.plan.termination_grace)
            .min(order.cap);
        if let Some(k) = &mut self.killing {
            // Already stopping: a later, shorter order (SHUTDOWN after a KILL
            // with a long grace period) moves SIGKILL earlier, never later.
            let at = Instant::now().checked_add(grace);
            if !k.sigkilled && at.is_some_and(|at| at < k.sigkill_at) {
                k.sigkill_at = at.unwrap_or(k.sigkill_at);
                k.grace = grace;
                if grace.is_zero() {
                    self.sigkill_all();
                }
            }
            return;
        }
        self.kill_events();
        self.probes.clear();
        for (_, running) in self.handles.iter() {
            crate::oci::runner::signal(running, TERM);
        }
        let oci = self.oci.is_some();
        for record in self.init.iter_mut().chain(self.main.iter_mut()) {
            if let Some(pgid) = record.pgid().filter(|_| !oci) {
                process::signal_group(pgid, TERM);
            } else if let (Life::Waiting { .. }, Some(last)) = (&record.life, &record.last) {
                // A restart that will not happen: show how the last run ended.
                record.life = Life::Terminated(last.clone());
            }
        }
        let sigkill_at = Instant::now()
            .checked_add(grace)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
        self.killing = Some(Killing {
            grace,
            sigkill_at,
            sigkilled: false,
        });
        tracing::info!(task = %self.task_id, ?grace, "stopping pod");
        if grace.is_zero() {
            self.sigkill_all();
        }
    }

    pub(super) fn sigkill_all(&mut self) {
        for (_, running) in self.handles.iter() {
            crate::oci::runner::signal(running, KILL);
        }
        if self.oci.is_none() {
            for pgid in self.all().filter_map(ContainerRecord::pgid) {
                process::signal_group(pgid, KILL);
            }
        }
        if let Some(k) = &mut self.killing {
            k.sigkilled = true;
        }
    }
}
