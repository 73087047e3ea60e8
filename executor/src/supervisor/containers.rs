//! The supervisor's container-runtime path: pull, create and start off the
//! pod's loop (a slow registry delays only its own pod), the waiting
//! reasons and back-offs kubelet shows, exits with `OOMKilled`, and
//! kubelet's events.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::{Event, Supervisor, Which, launch};
use crate::events::ContainerEvent;
use crate::oci::bundle::CREATE_CONTAINER_CONFIG_ERROR;
use crate::oci::image::{ERR_IMAGE_PULL, IMAGE_PULL_BACK_OFF};
use crate::oci::runner::{Running, StartError};
use crate::oci::seccomp::CREATE_CONTAINER_ERROR;
use crate::status::{Exit, Life, START_ERROR};

/// How long `ErrImagePull` shows before `ImagePullBackOff`.
const ERR_IMAGE_PULL_SHOWN: Duration = Duration::from_secs(1);

/// kubelet's terminated reason for a container the OOM killer stopped.
pub(crate) const OOM_KILLED: &str = "OOMKilled";

impl Supervisor {
    pub(super) fn field_path(&self, which: Which) -> String {
        match which {
            Which::Init(_) => format!("spec.initContainers{{{}}}", self.plan_of(which).name),
            Which::Main(_) => format!("spec.containers{{{}}}", self.plan_of(which).name),
        }
    }

    pub(super) fn event(&mut self, which: Which, type_: &str, reason: &str, message: String) {
        let path = self.field_path(which);
        self.out_events
            .push(ContainerEvent::new(type_, reason, message, path));
    }

    pub(super) fn start_oci(&mut self, which: Which) {
        let Some(oci) = self.oci.clone() else { return };
        if self.starting.contains(&which) {
            return;
        }
        self.starting.insert(which);
        let plan = self.plan_of(which).clone();
        let record = self.record(which);
        if !matches!(&record.life, Life::Waiting { reason, .. } if reason == ERR_IMAGE_PULL || reason == IMAGE_PULL_BACK_OFF)
        {
            record.life = Life::Waiting {
                reason: "ContainerCreating".into(),
                message: None,
            };
        }
        self.runs += 1;
        let key = &self.plan.key;
        let id = format!("{}-{}-{}", key.uid, plan.name, self.runs);
        let dir = self.pod_dir.join(&plan.name);
        let path = self.field_path(which);
        let log = crate::logs::RunLog::new(
            &dir,
            key,
            &self.plan.pod,
            &plan.name,
            self.record_ref(which).restart_count,
        );
        let start = launch::Start {
            which,
            oci,
            id,
            dir,
            log,
            hostname: crate::oci::sandbox::pod_hostname(
                self.plan
                    .pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.hostname.as_deref())
                    .unwrap_or(&key.name),
            ),
            pod_ref: format!("{}_{}({})", key.name, key.namespace, key.uid),
            task: self.task_id.value.clone(),
            sandbox: Arc::clone(&self.sandbox),
            objects: Arc::clone(&self.config.objects),
            pod: self.plan.pod.clone(),
            pulling_announced: self.inputs.volumes.all_ready(),
            inputs: self.inputs.clone(),
            path,
            plan,
        };
        if start.pulling_announced {
            let image = start.plan.image.clone();
            self.event(which, "Normal", "Pulling", launch::pulling(&image));
        }
        self.events.push(Box::pin(start.run()));
    }

    pub(super) fn oci_started(
        &mut self,
        which: Which,
        result: Result<Running, StartError>,
        events: Vec<ContainerEvent>,
        started_image: String,
    ) {
        self.starting.remove(&which);
        // The "Pulling" event was a guess made before the pull: with the image
        // already present, kubelet says only "Pulled ... already present".
        if events
            .iter()
            .any(|e| e.reason == "Pulled" && e.message.contains("already present"))
        {
            let path = self.field_path(which);
            self.out_events
                .retain(|e| !(e.reason == "Pulling" && e.field_path == path));
        }
        self.out_events.extend(events);
        let name = self.plan_of(which).name.clone();
        let image = self.plan_of(which).image.clone();
        match result {
            Ok(running) => {
                let running = Arc::new(running);
                if self.killing.is_some() {
                    crate::oci::runner::signal(&running, crate::process::KILL);
                }
                let pid = running.pid;
                let record = self.record(which);
                record.life = Life::Running {
                    pgid: pid,
                    started_at: SystemTime::now(),
                };
                record.container_id = Some(format!("mesopod://{}", running.id));
                record.image_id = running.image_id.clone();
                // What runs, even if the image changed while it started.
                record.image = started_image;
                self.hold_images();
                self.pull_attempts.remove(&which);
                if let Which::Main(j) = which {
                    self.started_once[j] = true;
                }
                self.handles.insert(which, Arc::clone(&running));
                self.track_metrics(which, &running);
                let exec = self.oci_probe_exec(which);
                self.start_probes(which, exec);
                if let Some(oci) = self.oci.clone() {
                    self.events.push(Box::pin(async move {
                        let (code, oom) = oci.wait(running).await;
                        Event::OciExited(which, pid, code, oom)
                    }));
                }
                tracing::info!(task = %self.task_id, container = %name, pid, "container started");
                // Its image changed while it started: it goes again at once.
                let _ = self.reconcile_images();
                if self.running_reported {
                    self.report_progress();
                } else {
                    self.maybe_report_running();
                    if !self.running_reported {
                        self.report_progress();
                    }
                }
            }
            Err(StartError::Pull(f)) => {
                self.event(
                    which,
                    "Warning",
                    "Failed",
                    format!("Failed to pull image {image:?}: {}", f.message),
                );
                self.event(which, "Warning", "Failed", format!("Error: {}", f.reason));
                self.record(which).life = Life::Waiting {
                    reason: f.reason.into(),
                    message: Some(f.message),
                };
                let delay = self.next_pull_delay(which);
                let shown = ERR_IMAGE_PULL_SHOWN.min(delay);
                self.events.push(Box::pin(async move {
                    tokio::time::sleep(shown).await;
                    Event::PullBackOff(which, delay.saturating_sub(shown))
                }));
                // The image changed while the old one was tried: the new one goes now.
                if started_image != self.plan_of(which).image {
                    let _ = self.reconcile_images();
                }
                self.report_progress();
            }
            Err(StartError::Mount(msg)) => self.failed_mount(which, msg),
            Err(StartError::Config(msg)) => self.config_error(which, msg),
            Err(StartError::Create(msg)) => self.not_created(which, CREATE_CONTAINER_ERROR, msg),
            Err(StartError::Runtime(msg)) => {
                tracing::warn!(task = %self.task_id, container = %name, %msg, "container did not start");
                self.event(which, "Warning", "Failed", format!("Error: {msg}"));
                if let Which::Main(j) = which {
                    self.started_once[j] = true;
                }
                let exit = Exit {
                    exit_code: 128,
                    reason: START_ERROR.into(),
                    message: Some(msg),
                    started_at: None,
                    finished_at: SystemTime::now(),
                    pgid: None,
                };
                self.exited(which, exit);
                if !self.running_reported {
                    self.maybe_report_running();
                }
            }
        }
    }

    /// The container's config cannot be built: kubelet's
    /// `CreateContainerConfigError` (see [`Self::not_created`]).
    pub(super) fn config_error(&mut self, which: Which, msg: String) {
        self.not_created(which, CREATE_CONTAINER_CONFIG_ERROR, msg);
    }

    /// kubelet's `CreateContainerConfigError` and `CreateContainerError`:
    /// the container waits with `reason`, a `Failed` Warning, and another
    /// try after the back-off, which doubles up to its cap (so a config
    /// that costs work to find wrong is not rebuilt in a hot loop).
    fn not_created(&mut self, which: Which, reason: &str, msg: String) {
        tracing::info!(task = %self.task_id, container = %self.plan_of(which).name, %msg, %reason, "container not created");
        self.event(which, "Warning", "Failed", format!("Error: {msg}"));
        self.record(which).life = Life::Waiting {
            reason: reason.into(),
            message: Some(msg),
        };
        let delay = self.next_pull_delay(which);
        self.events.push(Box::pin(async move {
            tokio::time::sleep(delay).await;
            Event::Retry(which)
        }));
        self.report_progress();
    }

    fn next_pull_delay(&mut self, which: Which) -> Duration {
        let backoff = self.oci_backoff;
        let attempts = self.pull_attempts.entry(which).or_insert(0);
        let delay = backoff.delay(*attempts);
        *attempts = attempts.saturating_add(1);
        delay
    }

    pub(super) fn pull_back_off(&mut self, which: Which, rest: Duration) {
        if self.killing.is_some() {
            return;
        }
        let image = self.plan_of(which).image.clone();
        let record = self.record(which);
        let Life::Waiting { reason, message } = &record.life else {
            return;
        };
        if reason != ERR_IMAGE_PULL {
            return;
        }
        let last = message.clone().unwrap_or_default();
        record.life = Life::Waiting {
            reason: IMAGE_PULL_BACK_OFF.into(),
            message: Some(format!(
                "Back-off pulling image {image:?}: {ERR_IMAGE_PULL}: {last}"
            )),
        };
        self.event(
            which,
            "Normal",
            "BackOff",
            format!("Back-off pulling image {image:?}"),
        );
        self.event(
            which,
            "Warning",
            "Failed",
            format!("Error: {IMAGE_PULL_BACK_OFF}"),
        );
        self.events.push(Box::pin(async move {
            tokio::time::sleep(rest).await;
            Event::Retry(which)
        }));
        self.report_progress();
    }

    /// Makes a running container's cgroup one [`crate::metrics`] samples.
    pub(super) fn track_metrics(&self, which: Which, running: &Running) {
        let meta = &self.plan.pod.metadata;
        crate::metrics::Containers::global().insert(
            &running.id,
            crate::metrics::Container {
                namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
                pod: meta.name.clone().unwrap_or_default(),
                uid: meta.uid.clone().unwrap_or_default(),
                name: self.plan_of(which).name.clone(),
                pid: running.pid,
                cgroups_path: running.cgroups_path.clone(),
            },
        );
    }

    pub(super) fn oci_exited(&mut self, which: Which, pid: u32, code: i32, oom: bool) {
        if let Some(running) = self.handles.remove(&which) {
            crate::metrics::Containers::global().remove(&running.id);
        }
        self.stop_probes(which);
        let started_at = match self.record(which).life {
            Life::Running { started_at, .. } => Some(started_at),
            _ => None,
        };
        let reason = if oom {
            OOM_KILLED
        } else {
            Exit::reason_for(code)
        };
        tracing::info!(task = %self.task_id, container = %self.plan_of(which).name, code, oom, "container exited");
        let exit = Exit {
            exit_code: code,
            reason: reason.into(),
            message: None,
            started_at,
            finished_at: SystemTime::now(),
            pgid: Some(pid),
        };
        self.exited(which, exit);
    }

    /// kubelet's `Killing` event for every running container.
    pub(super) fn kill_events(&mut self) {
        let running: Vec<Which> = (0..self.init.len())
            .map(Which::Init)
            .chain((0..self.main.len()).map(Which::Main))
            .filter(|w| self.record_ref(*w).is_running())
            .collect();
        for which in running {
            let name = self.plan_of(which).name.clone();
            self.event(
                which,
                "Normal",
                "Killing",
                format!("Stopping container {name}"),
            );
        }
    }
}
