//! A running pod's container images changed (the scheduler's [`ImageUpdate`]):
//! what kubelet does when a container's definition changes
//! (`computePodActions`: the container's hash differs from the running one's).
//!
//! - A running container is stopped as kubelet's `killContainer` stops it
//!   (`Killing` "Container C definition changed, will be restarted"; SIGTERM,
//!   SIGKILL after the pod's `terminationGracePeriodSeconds`) and started again
//!   with its new image as soon as it exits, whatever the restart policy and
//!   without a crash-loop back-off: its restart count goes up, `lastState` is
//!   the run that ended, and the new run's `Pulling`, `Pulled`, `Created` and
//!   `Started` follow, with the pull policy and pull secrets of any start.
//! - A container waiting to start takes the new image for its next start; one
//!   waiting out a failed pull or a crash-loop back-off starts at once with it
//!   (kubelet's back-offs are per image and per container definition).
//! - Init containers are not run again: a running one finishes with its image,
//!   one that is done stays done, as kubelet does; one that has yet to run (or
//!   runs again after a failure) runs the new image.
//! - A container that ended for good is not run again.
//!
//! The image gc keeps an old image until no run of the pod uses it.
//!
//! The status shows the image of the run a container has or had: a new image
//! once that container takes it on (waiting, with no `imageID` until it is
//! pulled), the old one while a run of it goes on. So a scheduler that reads a
//! status whose image differs from the spec for a container that is not done
//! knows this executor has yet to hear of the change, and says it again.

use std::time::Duration;

use super::{Event, Supervisor, Which};
use crate::images_message::{ContainerImage, ImageUpdate};
use crate::oci::image::{ERR_IMAGE_PULL, IMAGE_PULL_BACK_OFF, pull_policy};
use crate::process::{KILL, TERM};
use crate::status::Life;

/// kubelet's `minimumGracePeriodInSeconds`: the least a container it kills
/// is given before SIGKILL.
const MINIMUM_GRACE: Duration = Duration::from_secs(2);

impl Supervisor {
    /// Takes on the images of `update`, then does what each container's new
    /// image asks for.
    pub(super) fn update_images(&mut self, update: &ImageUpdate) {
        if self.killing.is_some() {
            return;
        }
        let mut changed = false;
        for (list, init) in [(&update.init_containers, true), (&update.containers, false)] {
            for ContainerImage { name, image } in list {
                let slots = if init {
                    &self.plan.init_containers
                } else {
                    &self.plan.containers
                };
                let Some(i) = slots.iter().position(|c| c.name == *name) else {
                    tracing::warn!(task = %self.task_id, container = %name, "an image for a container the pod does not have; ignored");
                    continue;
                };
                let which = if init { Which::Init(i) } else { Which::Main(i) };
                changed |= self.set_image(which, image);
            }
        }
        // A repeated order may still find a status to put right.
        if !self.reconcile_images() && !changed {
            return;
        }
        self.hold_images();
        self.report_progress();
    }

    /// Keeps the images the pod names and the ones its runs use (an old one
    /// until its run ends) from the image gc; the latter by image id too,
    /// since a tag may have moved on (or another agent's executor removed
    /// it from a shared store) while they run.
    pub(super) fn hold_images(&self) {
        let Some(oci) = &self.oci else { return };
        let planned = self
            .plan
            .init_containers
            .iter()
            .chain(&self.plan.containers);
        let mut images: Vec<String> = planned
            .map(|c| c.image.clone())
            .chain(self.all().map(|r| r.image.clone()))
            .chain(
                self.all()
                    .filter(|r| !r.image_id.is_empty())
                    .map(|r| r.image_id.clone()),
            )
            .collect();
        images.sort();
        images.dedup();
        oci.gc.hold(&self.task_id.value, images);
    }

    /// Plans `image` for `which`; false if it has it already.
    fn set_image(&mut self, which: Which, image: &str) -> bool {
        if self.plan_of(which).image == image || image.is_empty() {
            return false;
        }
        tracing::info!(task = %self.task_id, container = %self.plan_of(which).name, %image, "the container's image changed");
        let (spec, plan) = match which {
            Which::Init(i) => (
                (self.plan.pod.spec.as_mut()).and_then(|s| s.init_containers.as_mut()?.get_mut(i)),
                &mut self.plan.init_containers[i],
            ),
            Which::Main(j) => (
                (self.plan.pod.spec.as_mut()).and_then(|s| s.containers.get_mut(j)),
                &mut self.plan.containers[j],
            ),
        };
        let policy = spec.as_ref().and_then(|c| c.image_pull_policy.clone());
        plan.pull_policy = pull_policy(policy.as_deref(), image);
        image.clone_into(&mut plan.image);
        if let Some(c) = spec {
            c.image = Some(image.to_owned());
        }
        true
    }

    /// Brings every container's run in line with its planned image (see the
    /// module docs): after an update, after a start that raced one, and
    /// after adoption (the new task's pod may carry an image the dead
    /// executor had not taken on). Returns whether it changed anything.
    pub(super) fn reconcile_images(&mut self) -> bool {
        if self.killing.is_some() {
            return false;
        }
        let mut acted = false;
        let slots: Vec<Which> = (0..self.init.len())
            .map(Which::Init)
            .chain((0..self.main.len()).map(Which::Main))
            .collect();
        for which in slots {
            let image = self.plan_of(which).image.clone();
            if self.record_ref(which).image == image || self.changing.contains(&which) {
                continue;
            }
            let starting = self.starting.contains(&which);
            match &self.record_ref(which).life {
                Life::Running { .. } if matches!(which, Which::Main(_)) => {
                    self.stop_for_image(which);
                    acted = true;
                }
                Life::Running { .. } | Life::Terminated(_) => {}
                // A start under way shows its image once it runs (and is
                // stopped then if that is the old one).
                Life::Waiting { .. } if starting => {}
                Life::Waiting { reason, .. } => {
                    let pull_failed = reason == ERR_IMAGE_PULL || reason == IMAGE_PULL_BACK_OFF;
                    // Cancelled: its back-off was for the old definition.
                    let backing_off = self.restarts_due.remove(&which).is_some();
                    let record = self.record(which);
                    record.image = image;
                    record.image_id.clear();
                    acted = true;
                    if backing_off {
                        // The restart the back-off was waiting for.
                        record.restart_count += 1;
                        *self.attempts(which) = 0;
                        self.start(which);
                    } else if pull_failed {
                        self.pull_attempts.remove(&which);
                        self.start(which);
                    }
                }
            }
        }
        acted
    }

    /// kubelet's kill of a container whose definition changed.
    fn stop_for_image(&mut self, which: Which) {
        let name = self.plan_of(which).name.clone();
        let Some(run) = self.run_token(which) else {
            return;
        };
        self.event(
            which,
            "Normal",
            "Killing",
            format!("Container {name} definition changed, will be restarted"),
        );
        tracing::info!(task = %self.task_id, container = %name, "stopping the container to run its new image");
        self.changing.insert(which);
        self.probes.remove(&which);
        self.signal_container(which, TERM);
        let grace = self.plan.termination_grace.max(MINIMUM_GRACE);
        self.events.push(Box::pin(async move {
            tokio::time::sleep(grace).await;
            Event::ImageKillDue(which, run)
        }));
    }

    /// Names the run of `which` going on now: its runtime id, or its process
    /// group in process mode.
    fn run_token(&self, which: Which) -> Option<String> {
        match self.handles.get(&which) {
            Some(running) => Some(running.id.clone()),
            None => self.record_ref(which).pgid().map(|p| p.to_string()),
        }
    }

    /// The grace period of a stop for a new image ran out: SIGKILL, if that
    /// run still goes on.
    pub(super) fn image_kill_due(&mut self, which: Which, run: &str) {
        if self.changing.contains(&which) && self.run_token(which).as_deref() == Some(run) {
            self.signal_container(which, KILL);
        }
    }

    /// The container stopped for its new image exited: it starts again now.
    pub(super) fn restart_with_new_image(&mut self, which: Which) {
        let image = self.plan_of(which).image.clone();
        let record = self.record(which);
        let Life::Terminated(exit) = record.life.clone() else {
            return;
        };
        record.last = Some(exit);
        record.life = Life::Waiting {
            reason: "ContainerCreating".into(),
            message: None,
        };
        record.image = image;
        record.image_id.clear();
        record.restart_count += 1;
        // A new definition starts a new back-off, as kubelet's is keyed by it.
        *self.attempts(which) = 0;
        self.pull_attempts.remove(&which);
        // The old image is no longer run.
        self.hold_images();
        self.start(which);
        self.report_progress();
    }
}
