//! Adoption: a pod whose executor died, taken over by this one as a
//! restarted kubelet takes over its pods' containers.
//!
//! The pod's new task comes with the dead executor's checkpoint
//! ([`super::checkpoint`]). The supervisor takes up its records as they
//! were (restart counts, last states, container ids and start times, so
//! the pod's status goes on as if nothing happened), and for each
//! container that was running connects to its shim, takes the container's
//! pidfd and pipes, and pumps its output on into the same log file. A
//! container restarts for no part of this.
//!
//! What cannot be adopted is accounted for, never left: a container whose
//! shim is gone (it died, or killed its container once nobody adopted it
//! in time) ended unseen, and is taken as killed, exit 137, kubelet's
//! `ContainerStatusUnknown`, with the reason in its message; the pod's
//! restart policy then applies as to any exit. A container that exited
//! while no executor watched reports its real exit code. What waited to
//! be started or restarted (a back-off, a pull) starts now: its timer died
//! with the old executor.
//!
//! Readiness carries over, as kubelet keeps a container that started
//! before its own restart ready until a probe says otherwise.

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use super::checkpoint::Checkpoint;
use super::{Event, Supervisor, Which};
use crate::runtime::PodState;
use crate::status::{CRASH_LOOP_BACK_OFF, Exit, Life};

/// kubelet's reason for a container whose state could not be found.
pub(crate) const CONTAINER_STATUS_UNKNOWN: &str = "ContainerStatusUnknown";

impl Supervisor {
    /// Takes up a dead executor's records of this pod (the same pod: its
    /// uid, and so its containers, are the checkpoint's).
    pub(super) fn restore(mut self, cp: Checkpoint) -> Self {
        let fits = cp.uid == self.plan.key.uid
            && cp.init.len() == self.init.len()
            && cp.main.len() == self.main.len()
            && cp.init_attempts.len() == self.init.len()
            && cp.main_attempts.len() == self.main.len()
            && cp.started_once.len() == self.main.len();
        if !fits {
            tracing::warn!(task = %self.task_id, "the checkpoint is of another pod; not adopting");
            return self;
        }
        self.start_time = cp.start_time;
        self.init = cp.init.clone();
        self.main = cp.main.clone();
        self.init_attempts = cp.init_attempts.clone();
        self.main_attempts = cp.main_attempts.clone();
        self.next_init = cp.next_init;
        self.started_once = cp.started_once.clone();
        self.runs = cp.runs;
        self.running_reported = cp.running_reported;
        self.conditions = cp.conditions.clone();
        if let Some(sb) = &cp.sandbox {
            let _ = self.sandbox.set(sb.sandbox());
        }
        self.adopting = Some(cp);
        self
    }

    /// Whether this supervisor takes over a dead executor's pod.
    pub(super) fn is_adopting(&self) -> bool {
        self.adopting.is_some()
    }

    /// Takes over the containers of the checkpoint, then starts what
    /// waited, and reports the pod.
    pub(super) async fn adopt_containers(&mut self) {
        let Some(cp) = self.adopting.take() else {
            return;
        };
        let Some(oci) = self.oci.clone() else {
            return;
        };
        self.inputs.volumes.adopt_mounts().await;
        let live: Vec<Which> = cp.live.iter().map(|(w, _)| *w).collect();
        let waited = self.waiting_slots(&live);
        for (which, req) in cp.live {
            if !self.slot_exists(which) {
                continue;
            }
            let name = self.plan_of(which).name.clone();
            let record = self.record_ref(which).clone();
            let log = crate::logs::RunLog::new(
                &self.pod_dir.join(&name),
                &self.plan.key,
                &self.plan.pod,
                &name,
                record.restart_count,
            );
            match oci.adopt(&req, &log).await {
                Ok((running, exit)) => {
                    let running = Arc::new(running);
                    let pid = running.pid;
                    self.handles.insert(which, Arc::clone(&running));
                    let oci = Arc::clone(&oci);
                    match exit {
                        None => {
                            tracing::info!(task = %self.task_id, container = %name, pid, "adopted a running container");
                            self.track_metrics(which, &running);
                            let exec = self.oci_probe_exec(which);
                            self.start_probes(which, exec);
                            let r = self.record(which);
                            r.probe_started = record.probe_started;
                            r.probe_ready = record.probe_ready;
                            self.events.push(Box::pin(async move {
                                let (code, oom) = oci.wait(running).await;
                                Event::OciExited(which, pid, code, oom)
                            }));
                        }
                        Some(exit) => {
                            tracing::info!(task = %self.task_id, container = %name, code = exit.code, "adopted a container that exited meanwhile");
                            self.events.push(Box::pin(async move {
                                oci.remove_exited(&running).await;
                                Event::OciExited(which, pid, exit.code, exit.oom)
                            }));
                        }
                    }
                }
                Err(why) => {
                    oci.remove_unadopted(&req).await;
                    self.lost(which, why);
                }
            }
        }
        for which in waited {
            self.restart_adopted(which);
        }
        // The new task's pod may carry an image the dead executor had not
        // taken on yet; the adopted runs' images stay until they end.
        self.hold_images();
        let _ = self.reconcile_images();
        let state = if self.running_reported {
            PodState::Running
        } else {
            PodState::Starting
        };
        self.report(state, None);
        self.maybe_report_running();
    }

    fn slot_exists(&self, which: Which) -> bool {
        match which {
            Which::Init(i) => i < self.init.len(),
            Which::Main(j) => j < self.main.len(),
        }
    }

    /// A container that was running and cannot be adopted.
    fn lost(&mut self, which: Which, why: String) {
        let started_at = match self.record_ref(which).life {
            Life::Running { started_at, .. } => Some(started_at),
            _ => None,
        };
        tracing::warn!(task = %self.task_id, container = %self.plan_of(which).name, %why, "cannot adopt a container");
        let exit = Exit {
            exit_code: 137,
            reason: CONTAINER_STATUS_UNKNOWN.into(),
            message: Some(format!(
                "The container could not be adopted from the executor that ran it: {why}"
            )),
            started_at,
            finished_at: SystemTime::now(),
            pgid: None,
        };
        self.exited(which, exit);
    }

    /// What was waiting for a start or a restart when the old executor
    /// died (its timers died with it), in the order the pod runs; `live`
    /// are the containers that were running.
    fn waiting_slots(&self, live: &[Which]) -> Vec<Which> {
        let slots: Vec<Which> = if self.next_init < self.init.len() {
            vec![Which::Init(self.next_init)]
        } else {
            (0..self.main.len()).map(Which::Main).collect()
        };
        slots
            .into_iter()
            .filter(|w| !live.contains(w))
            .filter(|w| matches!(self.record_ref(*w).life, Life::Waiting { .. }))
            .collect()
    }

    fn restart_adopted(&mut self, which: Which) {
        let backing_off = matches!(&self.record_ref(which).life, Life::Waiting { reason, .. } if reason == CRASH_LOOP_BACK_OFF);
        if backing_off {
            // The restart its back-off was waiting for (`RestartDue`).
            self.record(which).restart_count += 1;
        }
        self.start(which);
    }
}

/// Makes an adopted pod's directory, which stays in the dead executor's sandbox (its
/// containers write there and its volumes are mounted there), reachable from this
/// executor's sandbox too, where the agent's `/state` now points and where
/// `kubectl logs` looks: a symlink, which the agent's `/files/read` follows since the
/// target is a sandbox as well. A failure is logged: the pod runs on either way.
pub(super) fn link_pod_dir(here: &Path, there: &Path) {
    if here == there || here.symlink_metadata().is_ok() {
        return;
    }
    let linked = here
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::os::unix::fs::symlink(there, here));
    if let Err(e) = linked {
        tracing::warn!(
            link = %here.display(),
            target = %there.display(),
            error = %e,
            "cannot link the adopted pod's directory into this sandbox; its logs stay where they were"
        );
    }
}
