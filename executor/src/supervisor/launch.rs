//! One container start through the runtime, as a future of the pod's loop:
//! the pod's volumes, its pull secrets, the image (pulled if it must be)
//! while the pod sandbox is made, then `run`. Its events travel back with
//! the result.
//!
//! A volume that cannot be set up is kubelet's volume manager's case, not
//! a container config error: the containers keep waiting in
//! `ContainerCreating` (`PodInitializing` for init containers), the pod in
//! Pending, a `FailedMount` Warning goes on the pod for every failed
//! attempt (`MountVolume.SetUp failed for volume "x" : …`), and the setup
//! is retried with the volume manager's backoff (0.5 s doubling to 2 min
//! 2 s), so the pod starts soon after what it misses appears.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::{Event, Supervisor, Which};
use crate::backoff::Backoff;
use crate::events::ContainerEvent;
use crate::objects::SharedObjects;
use crate::oci::image::{ERR_IMAGE_PULL, PullFailure};
use crate::oci::runner::{Oci, StartError, StartRequest};
use crate::oci::sandbox::PodSandbox;
use crate::pod::ContainerPlan;
use crate::status::Life;

/// kubelet's event reason when the pod sandbox cannot be made.
const FAILED_CREATE_POD_SANDBOX: &str = "FailedCreatePodSandBox";

/// kubelet's event reason when a volume cannot be set up.
pub(crate) const FAILED_MOUNT: &str = "FailedMount";

/// kubelet's volume operations' exponential backoff
/// (`initialDurationBeforeRetry` 500 ms, `maxDurationBeforeRetry` 2m2s).
pub(crate) const MOUNT_RETRY: Backoff =
    Backoff::new(Duration::from_millis(500), Duration::from_secs(122));

/// Everything a start needs, owned (it outlives the supervisor's borrow).
pub(super) struct Start {
    pub(super) which: Which,
    pub(super) oci: Arc<Oci>,
    pub(super) plan: ContainerPlan,
    pub(super) id: String,
    pub(super) dir: PathBuf,
    /// This run's CRI log (`<restartCount>.log`) and attach registration.
    pub(super) log: crate::logs::RunLog,
    pub(super) hostname: String,
    pub(super) pod_ref: String,
    pub(super) task: String,
    pub(super) sandbox: Arc<tokio::sync::OnceCell<PodSandbox>>,
    pub(super) objects: SharedObjects,
    pub(super) pod: Pod,
    /// Volumes, objects and the pod's values (env, mounts).
    pub(super) inputs: crate::volumes::StartInputs,
    /// The container's `fieldPath` in events.
    pub(super) path: String,
    /// "Pulling" went out when the start began (the volumes were set up,
    /// so the pull was next); else it goes with the result, if it pulled.
    pub(super) pulling_announced: bool,
}

/// kubelet's "Pulling" event message.
pub(super) fn pulling(image: &str) -> String {
    format!("Pulling image {image:?}")
}

impl Start {
    pub(super) async fn run(self) -> Event {
        let mut events = Vec::new();
        let result = self.start(&mut events).await;
        Event::OciStarted(self.which, Box::new(result), events, self.plan.image)
    }

    async fn start(
        &self,
        events: &mut Vec<ContainerEvent>,
    ) -> Result<crate::oci::runner::Running, StartError> {
        let plan = &self.plan;
        self.inputs
            .volumes_ready()
            .await
            .map_err(StartError::Mount)?;
        let secrets = crate::oci::pull_secrets::read(self.objects.as_ref(), &self.pod)
            .await
            .map_err(|message| {
                StartError::Pull(PullFailure {
                    reason: ERR_IMAGE_PULL,
                    message,
                })
            })?;
        events.extend(secrets.warning);
        // The sandbox is made while the image is pulled (or found): neither
        // waits for the other.
        let (image, sandbox) = tokio::join!(
            self.oci
                .images
                .ensure(&plan.image, plan.pull_policy, secrets.creds),
            self.sandbox.get_or_try_init(|| self.oci.sandbox(
                &self.task,
                &self.hostname,
                &self.pod
            )),
        );
        let image = image.map_err(StartError::Pull)?;
        if image.pulled_in.is_some() {
            // The Node lists the store's images.
            self.oci.gc.report();
        }
        if !self.pulling_announced && image.pulled_in.is_some() {
            events.push(self.event("Normal", "Pulling", pulling(&plan.image)));
        }
        let pulled = match image.pulled_in {
            // kubelet's words, and the mirror that served it: the image's
            // name stays what the pod asked for.
            Some(took) => format!(
                "Successfully pulled image {:?} in {took:.3?} ({took:.3?} including waiting). Image size: {} bytes.{}",
                plan.image,
                image.size,
                image
                    .pulled_from_mirror
                    .as_ref()
                    .map(|m| format!(" Pulled from {m}."))
                    .unwrap_or_default()
            ),
            None => format!(
                "Container image {:?} already present on machine",
                plan.image
            ),
        };
        events.push(self.event("Normal", "Pulled", pulled));
        let sandbox = sandbox.map_err(|e| {
            // kubelet's words; the start is retried as any runtime failure.
            let message = format!("Failed to create pod sandbox: {e}");
            events.push(ContainerEvent::new(
                "Warning",
                FAILED_CREATE_POD_SANDBOX,
                message.clone(),
                String::new(),
            ));
            StartError::Runtime(message)
        })?;
        // After the sandbox: on a CNI agent `status.podIP` is its IP.
        let pod_ip = sandbox.ip.map(|ip| ip.to_string());
        let ready = self
            .inputs
            .prepare(plan, pod_ip.as_deref())
            .await
            .map_err(StartError::Config)?;
        for (reason, message) in ready.warnings {
            events.push(self.event("Warning", reason.as_str(), message));
        }
        let req = StartRequest {
            id: self.id.clone(),
            plan: &ready.plan,
            image: &image,
            dir: self.dir.clone(),
            log: self.log.clone(),
            hostname: self.hostname.clone(),
            pod_ref: self.pod_ref.clone(),
            env: ready.env,
            mounts: ready.mounts,
            sandbox,
        };
        let running = self.oci.start(req).await?;
        events.push(self.event(
            "Normal",
            "Created",
            format!("Created container: {}", plan.name),
        ));
        events.push(self.event(
            "Normal",
            "Started",
            format!("Started container {}", plan.name),
        ));
        Ok(running)
    }

    fn event(&self, type_: &str, reason: &str, message: String) -> ContainerEvent {
        ContainerEvent::new(type_, reason, message, self.path.clone())
    }
}

impl Supervisor {
    /// A volume of the pod could not be set up: the container waits as
    /// before any runtime status, `FailedMount` goes on the pod, and the
    /// start is tried again after the volume manager's backoff.
    pub(super) fn failed_mount(&mut self, which: Which, message: String) {
        tracing::info!(task = %self.task_id, %message, "volume setup failed; retrying");
        self.out_events.push(ContainerEvent::new(
            "Warning",
            FAILED_MOUNT,
            message,
            String::new(),
        ));
        let reason = match which {
            Which::Init(_) => "PodInitializing",
            Which::Main(_) => "ContainerCreating",
        };
        self.record(which).life = Life::Waiting {
            reason: reason.into(),
            message: None,
        };
        let attempts = self.pull_attempts.entry(which).or_insert(0);
        let delay = MOUNT_RETRY.delay(*attempts);
        *attempts = attempts.saturating_add(1);
        self.events.push(Box::pin(async move {
            tokio::time::sleep(delay).await;
            Event::Retry(which)
        }));
        self.report_progress();
    }
}
