//! What a container needs from its pod's volumes and the API before it is
//! created: the volumes set up, its environment resolved, `command` and
//! `args` expanded, its mounts.

use std::sync::Arc;

use super::{PodInfo, PodVolumes};
use crate::objects::SharedObjects;
use crate::oci::spec::Mount;
use crate::pod::{ContainerPlan, ExecLimits, expanded, resolve};

/// The pod-wide handles a container start reads.
#[derive(Debug, Clone)]
pub struct StartInputs {
    /// The pod's values.
    pub info: Arc<PodInfo>,
    /// Its volumes.
    pub volumes: Arc<PodVolumes>,
    /// The objects source.
    pub objects: SharedObjects,
}

/// A container ready for its bundle.
#[derive(Debug)]
pub struct Prepared {
    /// The plan, `command` and `args` expanded.
    pub plan: ContainerPlan,
    /// Its environment.
    pub env: Vec<(String, String)>,
    /// Its volume mounts.
    pub mounts: Vec<Mount>,
    /// `(reason, message)` Warning events.
    pub warnings: Vec<(String, String)>,
}

impl StartInputs {
    /// Sets up the pod's volumes (kubelet does this before any pull).
    pub async fn volumes_ready(&self) -> Result<(), String> {
        self.volumes.prepare(&self.info).await
    }

    /// Resolves the container's environment and mounts; an error is a
    /// `CreateContainerConfigError` message. `pod_ip` is the pod's own IP
    /// when it has one (a CNI network), else the agent's is used.
    pub async fn prepare(
        &self,
        plan: &ContainerPlan,
        pod_ip: Option<&str>,
    ) -> Result<Prepared, String> {
        self.volumes_ready().await?;
        let mut cx = self.info.cx();
        if let Some(ip) = pod_ip {
            cx.pod_ip = ip;
        }
        let limits = ExecLimits::of_this_process();
        let resolved = resolve(plan, &cx, self.objects.as_ref(), limits).await?;
        let plan_expanded = expanded(plan, &resolved.env, limits)?;
        let mounts = self.volumes.mounts(plan, &resolved.env).await?;
        Ok(Prepared {
            plan: plan_expanded,
            env: resolved.env,
            mounts,
            warnings: resolved.warnings,
        })
    }

    /// Process mode: the environment without objects (refused at launch if
    /// the container needs any), `command` and `args` expanded; an error is
    /// a `CreateContainerConfigError` message.
    pub fn prepare_local(
        &self,
        plan: &ContainerPlan,
    ) -> Result<(ContainerPlan, Vec<(String, String)>), String> {
        use futures::FutureExt as _;
        let objects = crate::objects::NoObjects;
        let limits = ExecLimits::of_this_process();
        let env = resolve(plan, &self.info.cx(), &objects, limits)
            .now_or_never()
            .ok_or("the environment needs objects, which process mode cannot read")??
            .env;
        Ok((expanded(plan, &env, limits)?, env))
    }
}
