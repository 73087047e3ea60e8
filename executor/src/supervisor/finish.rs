//! How a pod's supervision ends: the final task state and message, and the
//! phase each state stands for.

use super::Supervisor;
use crate::runtime::PodState;
use crate::status::{DEADLINE_EXCEEDED, Life, Phase, START_ERROR};

impl Supervisor {
    pub(super) fn report_final(&mut self) {
        let exits: Vec<(String, i32, bool)> = self
            .all()
            .filter_map(|c| match &c.life {
                Life::Terminated(e) => Some((c.name.clone(), e.exit_code, e.reason == START_ERROR)),
                _ => None,
            })
            .collect();
        let codes = exits
            .iter()
            .map(|(n, c, _)| format!("{n}={c}"))
            .collect::<Vec<_>>()
            .join(", ");
        // Only process mode runs commands on the host; with a container
        // runtime a start error is the runtime's, named in the container's state.
        let not_pulled =
            if self.oci.is_none() && exits.iter().any(|(_, _, start_error)| *start_error) {
                " (images are recorded, not pulled: commands run on the agent's host)"
            } else {
                ""
            };
        let (state, message) = if let Some(why) = &self.evicted {
            (PodState::Failed, why.clone())
        } else if let Some(k) = self.killing.filter(|_| !self.deadline_exceeded) {
            let how = if k.sigkilled {
                "SIGKILL after the grace period"
            } else {
                "SIGTERM"
            };
            (
                PodState::Killed,
                format!(
                    "pod killed: stopped by {how} (grace period {:?}); exit codes: {codes}",
                    k.grace
                ),
            )
        } else if self.deadline_exceeded {
            (
                PodState::Failed,
                format!(
                    "{DEADLINE_EXCEEDED}: pod was active longer than activeDeadlineSeconds ({:?}); exit codes: {codes}",
                    self.plan.active_deadline.unwrap_or_default()
                ),
            )
        } else if self.init_failed {
            (
                PodState::Failed,
                format!("init container failed; exit codes: {codes}{not_pulled}"),
            )
        } else if self
            .main
            .iter()
            .all(|c| matches!(&c.life, Life::Terminated(e) if e.exit_code == 0))
        {
            (
                PodState::Finished,
                format!("all containers exited 0; exit codes: {codes}"),
            )
        } else {
            (
                PodState::Failed,
                format!("containers failed; exit codes: {codes}{not_pulled}"),
            )
        };
        self.report(state, Some(message));
    }

    pub(super) fn phase(&self, state: PodState) -> Phase {
        match state {
            PodState::Starting => Phase::Pending,
            PodState::Running => Phase::Running,
            PodState::Finished => Phase::Succeeded,
            PodState::Failed | PodState::Error | PodState::NotAdopted => Phase::Failed,
            PodState::Killed => {
                if self
                    .main
                    .iter()
                    .all(|c| matches!(&c.life, Life::Terminated(e) if e.exit_code == 0))
                {
                    Phase::Succeeded
                } else {
                    Phase::Failed
                }
            }
        }
    }
}
