//! How the pod moves on when a container ends: init containers in order,
//! then every container; restarts by policy with kubelet's back-off.

use std::time::SystemTime;

use super::{Event, Supervisor, Which};
use crate::pod::RestartPolicy;
use crate::process::{self, KILL};
use crate::runtime::PodState;
use crate::status::{CRASH_LOOP_BACK_OFF, Exit, Life};

impl Supervisor {
    /// Starts the next init container, or every container once init is done.
    pub(super) fn advance(&mut self) {
        if self.next_init < self.init.len() {
            self.start(Which::Init(self.next_init));
            return;
        }
        for j in 0..self.main.len() {
            self.start(Which::Main(j));
        }
        self.maybe_report_running();
    }

    /// Reports Running once every container was started (or failed to).
    pub(super) fn maybe_report_running(&mut self) {
        if !self.running_reported
            && self.killing.is_none()
            && self.next_init >= self.init.len()
            && self.started_once.iter().all(|s| *s)
            && !self.is_over()
        {
            self.running_reported = true;
            self.report(PodState::Running, None);
        }
    }

    pub(super) fn handle(&mut self, event: Event) {
        match event {
            Event::Exited(which, pgid, status) => {
                // Whatever the leader left behind in its group goes with it.
                process::signal_group(pgid, KILL);
                let started_at = match self.record(which).life {
                    Life::Running { started_at, .. } => Some(started_at),
                    _ => None,
                };
                let (exit_code, message) = match status {
                    Ok(status) => (process::exit_code(status), None),
                    Err(e) => (128, Some(format!("cannot wait for the process: {e}"))),
                };
                let exit = Exit {
                    exit_code,
                    reason: Exit::reason_for(exit_code).into(),
                    message,
                    started_at,
                    finished_at: SystemTime::now(),
                    pgid: Some(pgid),
                };
                tracing::info!(task = %self.task_id, container = %self.plan_of(which).name, exit_code, "container exited");
                self.exited(which, exit);
            }
            Event::RestartDue(which, n) => {
                if self.killing.is_some() || self.restarts_due.get(&which) != Some(&n) {
                    return;
                }
                self.restarts_due.remove(&which);
                self.record(which).restart_count += 1;
                self.start(which);
                self.report_progress();
            }
            Event::OciStarted(which, result, events, image) => {
                self.oci_started(which, *result, events, image);
            }
            Event::OciExited(which, pid, code, oom) => self.oci_exited(which, pid, code, oom),
            Event::PullBackOff(which, rest) => self.pull_back_off(which, rest),
            Event::Retry(which) => {
                // A retry that an image change already made (`images`) is spent.
                let spent = self.starting.contains(&which) || self.record_ref(which).is_running();
                if self.killing.is_none() && !spent {
                    self.start(which);
                    self.report_progress();
                }
            }
            Event::ProbeKillDue(which, run) => self.probe_kill_due(which, run),
            Event::ImageKillDue(which, run) => self.image_kill_due(which, &run),
            Event::FlushEvents => self.flush_events(),
        }
    }

    /// A container ended (or never started): restart it, move on, or give up.
    pub(super) fn exited(&mut self, which: Which, exit: Exit) {
        self.stop_probes(which);
        let code = exit.exit_code;
        self.record(which).life = Life::Terminated(exit);
        if self.killing.is_some() {
            return;
        }
        if self.changing.remove(&which) {
            self.restart_with_new_image(which);
            return;
        }
        let policy = self.plan.restart_policy;
        match which {
            Which::Init(i) if code == 0 => {
                self.next_init = i + 1;
                self.advance();
            }
            Which::Init(_) if policy == RestartPolicy::Never => self.init_failed = true,
            Which::Init(_) => {
                self.schedule_restart(which);
                self.report_progress();
            }
            Which::Main(_) => {
                if policy.restarts(code) {
                    self.schedule_restart(which);
                }
                if self.running_reported && !self.is_over() {
                    self.report(PodState::Running, None);
                }
            }
        }
    }

    pub(super) fn schedule_restart(&mut self, which: Which) {
        let backoff = self.config.backoff;
        let pod_name = self.plan.key.name.clone();
        let record = self.record(which);
        let Life::Terminated(exit) = record.life.clone() else {
            return;
        };
        let name = record.name.clone();
        let ran_for = exit
            .started_at
            .and_then(|s| exit.finished_at.duration_since(s).ok())
            .unwrap_or_default();
        let attempts = self.attempts(which);
        if ran_for >= backoff.reset_after() {
            *attempts = 0;
        }
        let delay = backoff.delay(*attempts);
        *attempts = attempts.saturating_add(1);
        let record = self.record(which);
        record.last = Some(exit);
        record.life = Life::Waiting {
            reason: CRASH_LOOP_BACK_OFF.into(),
            message: Some(format!(
                "back-off {delay:?} restarting failed container={name} pod={pod_name}"
            )),
        };
        self.backoffs += 1;
        let n = self.backoffs;
        self.restarts_due.insert(which, n);
        self.events.push(Box::pin(async move {
            tokio::time::sleep(delay).await;
            Event::RestartDue(which, n)
        }));
    }
}
