//! Images as the executor needs them: a root filesystem (layers, lowest
//! first), the image config, and the id kubelet reports as `imageID`.
//!
//! [`Images`] is the seam between the supervisor and the image store;
//! [`StoreImages`] is the `images` crate's store (pulls from registries,
//! content-addressed, verified). Nothing here blocks the caller.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

pub use images::PullPolicy;

/// Kubelet's waiting reason for a failed pull.
pub const ERR_IMAGE_PULL: &str = "ErrImagePull";
/// The waiting reason inside the pull back-off.
pub const IMAGE_PULL_BACK_OFF: &str = "ImagePullBackOff";

/// A container's pull policy: its own, else Kubernetes' default for the
/// image (`:latest` or no tag means Always). A name that does not parse
/// gets IfNotPresent; its pull then fails with `InvalidImageName`.
pub fn pull_policy(policy: Option<&str>, image: &str) -> PullPolicy {
    policy
        .and_then(|p| p.parse().ok())
        .or_else(|| {
            images::Reference::parse(image)
                .ok()
                .map(|r| PullPolicy::default_for(&r))
        })
        .unwrap_or(PullPolicy::IfNotPresent)
}

/// The parts of an OCI image config a container uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageConfig {
    /// `Entrypoint`.
    pub entrypoint: Option<Vec<String>>,
    /// `Cmd`.
    pub cmd: Option<Vec<String>>,
    /// `Env` (`KEY=value`).
    pub env: Option<Vec<String>>,
    /// `WorkingDir`.
    pub working_dir: Option<String>,
    /// `User`.
    pub user: Option<String>,
}

/// An image ready to run.
#[derive(Debug, Clone)]
pub struct Image {
    /// `status.imageID`: `repo@sha256:…`.
    pub image_id: String,
    /// The image config.
    pub config: ImageConfig,
    /// Root filesystem layers, lowest first (directories).
    pub layers: Vec<PathBuf>,
    /// Bytes on disk.
    pub size: u64,
    /// How long the pull took; `None` when it was already present.
    pub pulled_in: Option<Duration>,
    /// The mirror that served the pull (`http://host:port`), if one did.
    pub pulled_from_mirror: Option<String>,
}

/// Why an image cannot be had: kubelet's waiting reason and message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PullFailure {
    /// `ErrImagePull`, `ErrImageNeverPull` or `InvalidImageName`.
    pub reason: &'static str,
    /// For people.
    pub message: String,
}

/// Where images come from.
pub trait Images: Send + Sync + std::fmt::Debug {
    /// The image `image` under `policy`, pulled if it must be; `creds`
    /// (the pod's imagePullSecrets) are tried before the agent's.
    fn ensure(
        &self,
        image: &str,
        policy: PullPolicy,
        creds: Vec<images::RegistryAuth>,
    ) -> BoxFuture<'static, Result<Image, PullFailure>>;
}

/// The agent's image store.
#[derive(Clone)]
pub struct StoreImages {
    store: images::ImageStore,
}

impl std::fmt::Debug for StoreImages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreImages")
            .field("root", &self.store.root())
            .finish()
    }
}

impl StoreImages {
    /// The store described by `config`.
    pub fn open(config: images::StoreConfig) -> Result<StoreImages, String> {
        images::ImageStore::open(config)
            .map(|store| StoreImages { store })
            .map_err(|e| format!("cannot open the image store: {e}"))
    }

    /// The store itself (for gc).
    pub fn store(&self) -> &images::ImageStore {
        &self.store
    }
}

impl Images for StoreImages {
    fn ensure(
        &self,
        image: &str,
        policy: PullPolicy,
        creds: Vec<images::RegistryAuth>,
    ) -> BoxFuture<'static, Result<Image, PullFailure>> {
        let store = self.store.clone();
        let image = image.to_owned();
        Box::pin(async move {
            let started = Instant::now();
            let (found, fetched) =
                store
                    .ensure_fetched(&image, policy, &creds)
                    .await
                    .map_err(|e| PullFailure {
                        reason: e.reason(),
                        message: e.to_string(),
                    })?;
            let c = found.config;
            Ok(Image {
                image_id: found.image_id,
                config: ImageConfig {
                    entrypoint: c.entrypoint,
                    cmd: c.cmd,
                    env: Some(c.env),
                    working_dir: c.working_dir,
                    user: c.user,
                },
                layers: found.layers,
                size: found.size,
                pulled_in: matches!(fetched, images::Fetched::Pulled { .. })
                    .then(|| started.elapsed()),
                pulled_from_mirror: match fetched {
                    images::Fetched::Pulled { mirror } => mirror,
                    images::Fetched::Present => None,
                },
            })
        })
    }
}
