//! A pod's volumes on the agent: set up before its containers start,
//! bind-mounted into each container's bundle, kept current while it runs,
//! and removed with it.
//!
//! ```text
//! <pod dir>/volumes/<name>/                     emptyDir, configMap, secret, downwardAPI, projected
//! <pod dir>/volume-subpaths/<name>/<container>/<i>   each subPath mount, bound from the volume
//! ```
//!
//! # Contract
//!
//! - `emptyDir` is a directory shared by every container of the pod
//!   (`medium: Memory`: a tmpfs); past its `sizeLimit` the pod is evicted
//!   ([`PodVolumes::over_limit`], checked every
//!   [`VolumeSettings::usage_interval`]).
//! - `hostPath` only under [`VolumeSettings::allowed_host_paths`] (none by
//!   default), refused at launch otherwise; `type` checked as kubelet does.
//! - `configMap`, `secret`, `downwardAPI` and `projected` are written with
//!   kubelet's AtomicWriter ([`atomic`]) and rewritten every
//!   [`VolumeSettings::resync_interval`], so a change to the object reaches
//!   the volume; a `subPath` mount keeps what it was mounted with. Secret
//!   and projected volumes are tmpfs, so secrets never reach the disk.
//!   They are mounted read-only, as in Kubernetes.
//! - A missing object that is not `optional` fails the start with kubelet's
//!   message (`configmap "x" not found`); the supervisor retries it.
//! - `fsGroup` (and `fsGroupChangePolicy`) is applied as kubelet does
//!   ([`ownership`]) to every volume but hostPath, at setup and after each
//!   rewrite; the group joins each container's supplemental groups.
//! - A dead executor's volume mounts are unmounted by the next one
//!   ([`leftovers`]).

pub mod atomic;
mod empty_dir;
mod host_path;
pub mod leftovers;
pub mod ownership;
mod plan;
pub mod projection;
mod start;
mod subpath;

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Volume;
use tokio::sync::{Mutex, mpsc};

pub use host_path::{check_allowed, check_type};
pub use plan::{MountPlan, SubPath, check_relative, check_volumes, plan_mounts};
pub use start::{Prepared, StartInputs};

use crate::objects::SharedObjects;
use crate::oci::spec::Mount;
use crate::pod::{ContainerPlan, PodContext, PodPlan};

/// Kubelet's ConfigMap/Secret resync period.
pub const RESYNC_INTERVAL: Duration = Duration::from_secs(60);
/// Kubelet's eviction manager period (how often `sizeLimit` is checked).
pub const USAGE_INTERVAL: Duration = Duration::from_secs(10);

/// The name prefix of the ServiceAccount token volume admission injects.
pub const SERVICE_ACCOUNT_VOLUME_PREFIX: &str = "kube-api-access-";

/// The longest path Linux resolves (`PATH_MAX`), the bound of a
/// `subPathExpr`'s expansion.
const PATH_MAX: usize = 4096;

/// How this agent's executor treats volumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeSettings {
    /// `--allowed-host-paths`: the prefixes `hostPath` volumes may name.
    pub allowed_host_paths: Vec<PathBuf>,
    /// How often projected files are rewritten from their objects.
    pub resync_interval: Duration,
    /// How often `emptyDir` usage is checked against `sizeLimit`.
    pub usage_interval: Duration,
}

impl Default for VolumeSettings {
    fn default() -> Self {
        VolumeSettings {
            allowed_host_paths: Vec::new(),
            resync_interval: RESYNC_INTERVAL,
            usage_interval: USAGE_INTERVAL,
        }
    }
}

/// What a pod's values are read from, owned (see [`PodContext`]).
#[derive(Debug, Clone)]
pub struct PodInfo {
    /// The pod's plan.
    pub plan: Arc<PodPlan>,
    /// Its node.
    pub node_name: String,
    /// The agent's IP (also the pod's, on the agent's network).
    pub host_ip: String,
}

impl PodInfo {
    /// The borrowed view.
    pub fn cx(&self) -> PodContext<'_> {
        PodContext {
            pod: &self.plan.pod,
            key: &self.plan.key,
            node_name: &self.node_name,
            host_ip: &self.host_ip,
            pod_ip: &self.host_ip,
            containers: &self.plan.containers,
        }
    }
}

/// Why a pod cannot run here at all (TASK_ERROR at launch): a `hostPath`
/// outside the allowed prefixes, or, in process mode (`mounts` false), any
/// volume mount but the ServiceAccount token's.
pub fn launch_refusal(plan: &PodPlan, settings: &VolumeSettings, mounts: bool) -> Option<String> {
    let spec = plan.pod.spec.as_ref()?;
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        if let Some(h) = &v.host_path
            && let Err(e) = check_allowed(&h.path, &settings.allowed_host_paths)
        {
            return Some(format!("spec.volumes[{i}].hostPath: {e}"));
        }
    }
    if mounts {
        return None;
    }
    let all = plan.init_containers.iter().chain(&plan.containers);
    for c in all {
        if let Some(m) = c
            .mounts
            .iter()
            .find(|m| !m.volume.starts_with(SERVICE_ACCOUNT_VOLUME_PREFIX))
        {
            return Some(format!(
                "container {:?} mounts volume {:?}: volumes need a container runtime, and this agent runs pods as host processes (--container-runtime=process)",
                c.name, m.volume
            ));
        }
        if let Some((name, _)) = c.env.iter().find(|(_, s)| s.needs_objects()) {
            return Some(format!(
                "container {:?} env {name:?}: values from ConfigMaps and Secrets need a container runtime, and this agent runs pods as host processes (--container-runtime=process)",
                c.name
            ));
        }
        if !c.env_from.is_empty() {
            return Some(format!(
                "container {:?} envFrom: values from ConfigMaps and Secrets need a container runtime, and this agent runs pods as host processes (--container-runtime=process)",
                c.name
            ));
        }
    }
    None
}

/// One pod's volumes.
#[derive(Debug)]
pub struct PodVolumes {
    pod_dir: PathBuf,
    volumes: Vec<Volume>,
    settings: VolumeSettings,
    objects: SharedObjects,
    state: Mutex<State>,
    /// Every volume is set up (read without the lock, by the pod's loop).
    all_ready: AtomicBool,
    /// The pod's `fsGroup`.
    fs_group: Option<ownership::FsGroup>,
}

#[derive(Debug, Default)]
struct State {
    ready: HashSet<String>,
    tokens: projection::Tokens,
    /// subPath targets already bound.
    bound: BTreeSet<PathBuf>,
    /// Mounts to undo at teardown (tmpfs and subPath binds), in order.
    mounted: Vec<PathBuf>,
    /// emptyDirs already reported past their limit.
    evicted: bool,
}

impl PodVolumes {
    /// The volumes of the pod whose directory is `pod_dir`.
    pub fn new(
        pod_dir: &Path,
        plan: &PodPlan,
        settings: VolumeSettings,
        objects: SharedObjects,
    ) -> Self {
        let volumes = plan
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.clone())
            .unwrap_or_default();
        let fs_group = ownership::FsGroup::of(
            plan.pod
                .spec
                .as_ref()
                .and_then(|s| s.security_context.as_ref()),
        );
        PodVolumes {
            pod_dir: pod_dir.to_path_buf(),
            fs_group,
            all_ready: AtomicBool::new(volumes.is_empty()),
            volumes,
            settings,
            objects,
            state: Mutex::new(State::default()),
        }
    }

    /// Whether the pod has any volume.
    pub fn is_empty(&self) -> bool {
        self.volumes.is_empty()
    }

    /// Whether every volume was set up.
    pub fn all_ready(&self) -> bool {
        self.all_ready.load(Ordering::Acquire)
    }

    /// `<pod dir>/volumes/<name>`.
    pub fn dir(&self, name: &str) -> PathBuf {
        self.pod_dir.join("volumes").join(name)
    }

    /// Sets up every volume not set up yet; an error is kubelet's message
    /// for the first volume that cannot be (the others stay as they are).
    pub async fn prepare(&self, info: &PodInfo) -> Result<(), String> {
        let mut state = self.state.lock().await;
        for v in &self.volumes {
            if state.ready.contains(&v.name) {
                continue;
            }
            let fail =
                |e: String| format!("MountVolume.SetUp failed for volume {:?} : {e}", v.name);
            if let Some(h) = &v.host_path {
                check_allowed(&h.path, &self.settings.allowed_host_paths).map_err(fail)?;
                check_type(&h.path, h.type_.as_deref().unwrap_or_default()).map_err(fail)?;
                state.ready.insert(v.name.clone());
                continue;
            }
            let dir = self.dir(&v.name);
            let memory = v
                .empty_dir
                .as_ref()
                .is_some_and(|e| e.medium.as_deref() == Some("Memory"));
            // A rootless executor cannot mount on the host (its mounts live
            // in its own namespace, which it writes through the host's
            // directories): its memory-backed volumes are plain directories
            // in the agent's work dir, which only the agent's user may read.
            let tmpfs = (memory || v.secret.is_some() || v.projected.is_some())
                && !crate::oci::rootless_ns::active();
            let fresh = !dir.exists();
            std::fs::create_dir_all(&dir).map_err(|e| fail(e.to_string()))?;
            if tmpfs && fresh {
                empty_dir::mount_tmpfs(&dir).map_err(fail)?;
                state.mounted.push(dir.clone());
            }
            let src = projection::Sources {
                objects: self.objects.as_ref(),
                cx: &info.cx(),
                now: SystemTime::now(),
            };
            match projection::payload(v, &src, &mut state.tokens)
                .await
                .map_err(&fail)?
            {
                Some(files) => {
                    atomic::write(&dir, &files).map_err(|e| fail(e.to_string()))?;
                }
                None => empty_dir::open_up(&dir).map_err(fail)?,
            }
            self.own(&dir, v).map_err(fail)?;
            state.ready.insert(v.name.clone());
        }
        self.all_ready.store(true, Ordering::Release);
        Ok(())
    }

    /// Gives a volume to the pod's `fsGroup`, if it has one; projected
    /// volumes are read-only, as their mounts are.
    fn own(&self, dir: &Path, v: &Volume) -> Result<(), String> {
        match self.fs_group {
            Some(g) => g.apply(dir, v.empty_dir.is_none()),
            None => Ok(()),
        }
    }

    /// The container's mounts, for its bundle (after [`PodVolumes::prepare`]).
    pub async fn mounts(
        &self,
        plan: &ContainerPlan,
        env: &[(String, String)],
    ) -> Result<Vec<Mount>, String> {
        let mut state = self.state.lock().await;
        let mut out = Vec::new();
        for (i, m) in plan.mounts.iter().enumerate() {
            let v = self
                .volumes
                .iter()
                .find(|v| v.name == m.volume)
                .ok_or_else(|| format!("volume {:?} is not in the pod", m.volume))?;
            let base = match &v.host_path {
                Some(h) => PathBuf::from(&h.path),
                None => self.dir(&v.name),
            };
            let sub = match &m.sub_path {
                None => None,
                Some(SubPath::Plain(p)) => Some(p.clone()),
                Some(SubPath::Expr(e)) => {
                    // A path is at most PATH_MAX: a longer expansion stops there.
                    let p = crate::pod::expand::expand(e, env, PATH_MAX).ok_or_else(|| {
                        format!("subPathExpr: {e:?} expands past {PATH_MAX} bytes (PATH_MAX)")
                    })?;
                    check_relative(&p).map_err(|e| format!("subPathExpr: {e}"))?;
                    Some(p)
                }
            };
            let source = match sub.filter(|s| !s.is_empty() && s != ".") {
                None => base,
                Some(sub) => {
                    let target = self
                        .pod_dir
                        .join("volume-subpaths")
                        .join(&v.name)
                        .join(&plan.name)
                        .join(i.to_string());
                    if !state.bound.contains(&target) {
                        subpath::bind(&base, &sub, &target)?;
                        state.bound.insert(target.clone());
                        state.mounted.push(target.clone());
                    }
                    target
                }
            };
            let projected = v.config_map.is_some()
                || v.secret.is_some()
                || v.downward_api.is_some()
                || v.projected.is_some();
            let mut options = vec!["rbind".to_owned(), "rprivate".to_owned()];
            if m.read_only || projected {
                options.push("ro".into());
            }
            let dest = if m.mount_path.starts_with('/') {
                m.mount_path.clone()
            } else {
                format!("/{}", m.mount_path)
            };
            out.push(Mount {
                destination: dest,
                kind: Some("bind".into()),
                source: Some(source.display().to_string()),
                options,
            });
        }
        Ok(out)
    }

    /// Rewrites projected volumes from their objects (a no-op for what did
    /// not change); a failure keeps the old files, as kubelet does.
    pub async fn resync(&self, info: &PodInfo) {
        let mut state = self.state.lock().await;
        for v in &self.volumes {
            if !state.ready.contains(&v.name) || v.host_path.is_some() || v.empty_dir.is_some() {
                continue;
            }
            let src = projection::Sources {
                objects: self.objects.as_ref(),
                cx: &info.cx(),
                now: SystemTime::now(),
            };
            match projection::payload(v, &src, &mut state.tokens).await {
                Ok(Some(files)) => match atomic::write(&self.dir(&v.name), &files) {
                    Ok(true) => {
                        if let Err(e) = self.own(&self.dir(&v.name), v) {
                            tracing::warn!(volume = %v.name, error = %e, "cannot apply fsGroup");
                        }
                        tracing::info!(volume = %v.name, "volume updated");
                    }
                    Ok(false) => {}
                    Err(e) => tracing::warn!(volume = %v.name, error = %e, "cannot update volume"),
                },
                Ok(None) => {}
                Err(e) => tracing::warn!(volume = %v.name, error = %e, "cannot resync volume"),
            }
        }
    }

    /// Kubelet's eviction message for the first `emptyDir` past its
    /// `sizeLimit`, once.
    pub async fn over_limit(&self) -> Option<String> {
        let mut state = self.state.lock().await;
        if state.evicted {
            return None;
        }
        for v in &self.volumes {
            let Some(limit) = v.empty_dir.as_ref().and_then(|e| e.size_limit.as_ref()) else {
                continue;
            };
            let Ok(bytes) = quantity::Quantity::parse(&limit.0).map(|q| q.to_f64()) else {
                continue;
            };
            if !state.ready.contains(&v.name) || bytes <= 0.0 {
                continue;
            }
            #[allow(clippy::cast_precision_loss)]
            let used = empty_dir::usage(&self.dir(&v.name)) as f64;
            if used > bytes {
                state.evicted = true;
                return Some(format!(
                    "Usage of EmptyDir volume {:?} exceeds the limit {:?}. ",
                    v.name, limit.0
                ));
            }
        }
        None
    }

    /// Resyncs and checks usage until dropped; an eviction message goes to
    /// `evict`.
    pub async fn watch(self: Arc<Self>, info: Arc<PodInfo>, evict: mpsc::UnboundedSender<String>) {
        let mut resync = tokio::time::interval(self.settings.resync_interval);
        let mut usage = tokio::time::interval(self.settings.usage_interval);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        usage.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = resync.tick() => self.resync(&info).await,
                _ = usage.tick() => {
                    if let Some(msg) = self.over_limit().await
                        && evict.send(msg).is_err()
                    {
                        return;
                    }
                }
            }
        }
    }

    /// A dead executor set these volumes up, and its containers, adopted
    /// now, have them mounted: what is mounted below the pod's volume
    /// directories is this pod's to unmount at teardown, and nothing is
    /// mounted again.
    pub async fn adopt_mounts(&self) {
        let mut state = self.state.lock().await;
        let under = [
            self.pod_dir.join("volumes"),
            self.pod_dir.join("volume-subpaths"),
        ];
        let mut found: Vec<PathBuf> = empty_dir::mount_points()
            .into_iter()
            .filter(|m| under.iter().any(|u| m.starts_with(u)))
            .collect();
        // Shallow first: teardown undoes them in reverse.
        found.sort_by_key(|m| m.components().count());
        for m in found {
            if m.starts_with(&under[1]) {
                state.bound.insert(m.clone());
            }
            if !state.mounted.contains(&m) {
                state.mounted.push(m);
            }
        }
    }

    /// Unmounts and removes everything the pod's volumes put on the agent.
    /// Host paths are never removed; nothing is removed while something is
    /// still mounted below it.
    pub async fn teardown(&self) {
        let mut state = self.state.lock().await;
        for m in state.mounted.drain(..).rev() {
            let _ = rustix::mount::unmount(&m, rustix::mount::UnmountFlags::DETACH);
        }
        for dir in ["volume-subpaths", "volumes"] {
            let dir = self.pod_dir.join(dir);
            if empty_dir::mounted_below(&dir) {
                tracing::warn!(dir = %dir.display(), "something is still mounted below; left in place");
                continue;
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
