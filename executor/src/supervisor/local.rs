//! Starting one container: through the container runtime (`containers`),
//! or, in process mode, as a host process in a group of its own.

use std::sync::Arc;
use std::time::SystemTime;

use super::{Event, Supervisor, Which};
use crate::process;
use crate::status::{Exit, Life, START_ERROR};

impl Supervisor {
    pub(super) fn start(&mut self, which: Which) {
        if self.oci.is_some() {
            self.start_oci(which);
            return;
        }
        let plan = self.plan_of(which).clone();
        let key = &self.plan.key;
        let dir = self.pod_dir.join(&plan.name);
        let (plan, env) = match self.inputs.prepare_local(&plan) {
            Ok(prepared) => prepared,
            Err(message) => {
                self.config_error(which, message);
                return;
            }
        };
        self.pull_attempts.remove(&which);
        if let Which::Main(j) = which {
            self.started_once[j] = true;
        }
        let run = crate::logs::RunLog::new(
            &dir,
            key,
            &self.plan.pod,
            &plan.name,
            self.record_ref(which).restart_count,
        );
        let started = crate::logs::start(&run, self.config.containers.logs)
            .and_then(|output| process::spawn(&plan, &dir, &key.name, &env, output));
        match started {
            Ok(started) => {
                let pgid = started.pgid;
                let mut child = started.child;
                let exec =
                    crate::probe::exec::ProcessExec::for_container(&plan, &dir, &key.name, &env);
                let record = self.record(which);
                record.life = Life::Running {
                    pgid,
                    started_at: SystemTime::now(),
                };
                record.image.clone_from(&plan.image);
                self.events.push(Box::pin(async move {
                    let status = child.wait().await;
                    Event::Exited(which, pgid, status)
                }));
                self.start_probes(which, Arc::new(exec));
                tracing::info!(task = %self.task_id, container = %plan.name, pgid, "container started");
            }
            Err(e) => {
                let message = format!(
                    "{e} (image {:?} is recorded, not pulled: without a container runtime the \
                     command runs on the agent's host)",
                    plan.image
                );
                tracing::warn!(task = %self.task_id, container = %plan.name, %message, "container did not start");
                let exit = Exit {
                    exit_code: 128,
                    reason: START_ERROR.into(),
                    message: Some(message),
                    started_at: None,
                    finished_at: SystemTime::now(),
                    pgid: None,
                };
                self.exited(which, exit);
            }
        }
    }
}
