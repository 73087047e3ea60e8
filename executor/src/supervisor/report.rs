//! The updates the supervisor sends: a full status rendered from its
//! container records, with the events queued since the last one.

use std::time::SystemTime;

use super::Supervisor;
use crate::runtime::{PodState, PodUpdate};
use crate::status::{DEADLINE_EXCEEDED, Snapshot};

impl Supervisor {
    /// An update for a restart or a backoff, in the pod's current task state.
    pub(super) fn report_progress(&mut self) {
        let state = if self.running_reported {
            PodState::Running
        } else {
            PodState::Starting
        };
        self.report(state, None);
    }

    pub(super) fn report(&mut self, state: PodState, message: Option<String>) {
        let reason = self
            .deadline_exceeded
            .then_some(DEADLINE_EXCEEDED)
            .or(self.evicted.as_ref().map(|_| crate::status::EVICTED));
        // On a CNI agent the pod has an IP of its own once its sandbox exists.
        let pod_ip = self.pod_ip();
        let status = Snapshot {
            phase: self.phase(state),
            reason,
            message: if state.is_terminal() {
                message.clone()
            } else {
                None
            },
            initialized: self.next_init >= self.init.len(),
            init: &self.init,
            main: &self.main,
            host_ip: &self.config.host_ip,
            pod_ip: &pod_ip,
            start_time: self.start_time,
            now: SystemTime::now(),
        }
        .render(&mut self.conditions);
        let update = PodUpdate {
            task_id: self.task_id.clone(),
            state,
            message,
            deadline_exceeded: self.deadline_exceeded,
            status: Some(status),
            pod_dir: Some(self.pod_dir.clone()),
            events: crate::events::coalesce(std::mem::take(&mut self.out_events)),
        };
        self.write_checkpoint(state.is_terminal());
        // A closed channel means the executor is going away; the kill path
        // still stops every container.
        let _ = self.updates.send(update);
    }
}
