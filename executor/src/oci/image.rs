//! Images as the executor needs them: a root filesystem (layers, lowest
//! first), the image config, and the id kubelet reports as `imageID`.
//!
//! [`Images`] is the seam to the image store. [`DirStore`] is the store
//! the executor ships with: images unpacked under
//! `<root>/local/<reference>/` (`image.json` and `rootfs/`), which is what
//! the tests and `mesopod image load` fill in. Nothing here blocks the
//! caller: file work runs on tokio's blocking pool.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

/// Kubelet's waiting reason for a failed pull.
pub const ERR_IMAGE_PULL: &str = "ErrImagePull";
/// The waiting reason inside the pull back-off.
pub const IMAGE_PULL_BACK_OFF: &str = "ImagePullBackOff";
/// Policy Never and the image is absent.
pub const ERR_IMAGE_NEVER_PULL: &str = "ErrImageNeverPull";
/// The reference does not parse.
pub const INVALID_IMAGE_NAME: &str = "InvalidImageName";

/// `imagePullPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPolicy {
    /// Pull every time.
    Always,
    /// Pull when absent.
    IfNotPresent,
    /// Never pull.
    Never,
}

impl PullPolicy {
    /// The policy a container gets: its own, else Kubernetes' default
    /// (`:latest` or no tag means Always, anything else IfNotPresent).
    pub fn for_container(policy: Option<&str>, image: &str) -> PullPolicy {
        match policy {
            Some("Always") => PullPolicy::Always,
            Some("IfNotPresent") => PullPolicy::IfNotPresent,
            Some("Never") => PullPolicy::Never,
            _ => {
                let name = image.rsplit('/').next().unwrap_or(image);
                if image.contains('@') {
                    PullPolicy::IfNotPresent
                } else {
                    match name.split_once(':') {
                        None => PullPolicy::Always,
                        Some((_, "latest")) => PullPolicy::Always,
                        Some(_) => PullPolicy::IfNotPresent,
                    }
                }
            }
        }
    }
}

/// The parts of an OCI image config a container uses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ImageConfig {
    /// `Entrypoint`.
    #[serde(default)]
    pub entrypoint: Option<Vec<String>>,
    /// `Cmd`.
    #[serde(default)]
    pub cmd: Option<Vec<String>>,
    /// `Env` (`KEY=value`).
    #[serde(default)]
    pub env: Option<Vec<String>>,
    /// `WorkingDir`.
    #[serde(default)]
    pub working_dir: Option<String>,
    /// `User`.
    #[serde(default)]
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
    /// The image `image` under `policy`, pulled if it must be.
    fn ensure(
        &self,
        image: &str,
        policy: PullPolicy,
    ) -> BoxFuture<'static, Result<Image, PullFailure>>;
}

/// Docker's normalisation: `busybox` is `docker.io/library/busybox:latest`.
pub fn normalize(image: &str) -> Result<String, PullFailure> {
    let invalid = |why: &str| PullFailure {
        reason: INVALID_IMAGE_NAME,
        message: format!("Failed to apply default image tag {image:?}: {why}"),
    };
    if image.is_empty() {
        return Err(invalid("the image name is empty"));
    }
    if image
        .chars()
        .any(|c| c.is_ascii_uppercase() || c.is_whitespace())
    {
        return Err(invalid(
            "couldn't parse image name: repository name must be lowercase",
        ));
    }
    let (first, rest) = image.split_once('/').unwrap_or(("", image));
    let mut full = if first.is_empty() {
        format!("docker.io/library/{rest}")
    } else if first.contains('.') || first.contains(':') || first == "localhost" {
        image.to_owned()
    } else {
        format!("docker.io/{image}")
    };
    let last = full.rsplit('/').next().unwrap_or_default();
    if !full.contains('@') && !last.contains(':') {
        full.push_str(":latest");
    }
    Ok(full)
}

/// The on-disk form of one image in a [`DirStore`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DirImage {
    /// The image id (`repo@sha256:…`).
    pub id: String,
    /// Its config.
    pub config: ImageConfig,
}

/// Unpacked images under `<root>/local/`.
#[derive(Debug, Clone)]
pub struct DirStore {
    root: PathBuf,
}

impl DirStore {
    /// A store rooted at `root` (created on first import).
    pub fn new(root: impl Into<PathBuf>) -> DirStore {
        DirStore { root: root.into() }
    }

    /// Where the image named `reference` (normalised) lives.
    pub fn image_dir(&self, reference: &str) -> PathBuf {
        let escaped: String = reference
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.root.join("local").join(escaped)
    }

    /// Imports a root filesystem directory as `image`: copied aside, then
    /// renamed into place, so the store is never half-written.
    pub fn import(
        &self,
        image: &str,
        rootfs: &Path,
        id: &str,
        config: &ImageConfig,
    ) -> std::io::Result<PathBuf> {
        let reference = normalize(image)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.message))?;
        let dir = self.image_dir(&reference);
        let parent = dir.parent().unwrap_or(&self.root).to_path_buf();
        std::fs::create_dir_all(&parent)?;
        let tmp = parent.join(format!(".tmp-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&tmp)?;
        let status = std::process::Command::new("cp")
            .arg("-a")
            .arg(rootfs)
            .arg(tmp.join("rootfs"))
            .status()?;
        if !status.success() {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(std::io::Error::other(format!(
                "cp -a {} failed",
                rootfs.display()
            )));
        }
        let meta = DirImage {
            id: id.to_owned(),
            config: config.clone(),
        };
        std::fs::write(tmp.join("image.json"), serde_json::to_vec_pretty(&meta)?)?;
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::rename(&tmp, &dir)?;
        Ok(dir)
    }

    fn lookup(&self, image: &str, policy: PullPolicy) -> Result<Image, PullFailure> {
        let reference = normalize(image)?;
        let dir = self.image_dir(&reference);
        let meta = std::fs::read(dir.join("image.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<DirImage>(&b).ok());
        match meta {
            Some(meta) => Ok(Image {
                image_id: meta.id,
                config: meta.config,
                layers: vec![dir.join("rootfs")],
                size: 0,
                pulled_in: None,
            }),
            None if policy == PullPolicy::Never => Err(PullFailure {
                reason: ERR_IMAGE_NEVER_PULL,
                message: format!(
                    "Container image {image:?} is not present with pull policy of Never"
                ),
            }),
            None => Err(PullFailure {
                reason: ERR_IMAGE_PULL,
                message: format!(
                    "failed to pull and unpack image {reference:?}: not found in the agent's image store {} and no registry is configured",
                    self.root.display()
                ),
            }),
        }
    }
}

impl Images for DirStore {
    fn ensure(
        &self,
        image: &str,
        policy: PullPolicy,
    ) -> BoxFuture<'static, Result<Image, PullFailure>> {
        let store = self.clone();
        let image = image.to_owned();
        Box::pin(async move {
            let started = Instant::now();
            let found = tokio::task::spawn_blocking(move || store.lookup(&image, policy))
                .await
                .map_err(|e| PullFailure {
                    reason: ERR_IMAGE_PULL,
                    message: format!("image lookup panicked: {e}"),
                })?;
            let _ = started;
            found
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_normalise_as_docker_does() {
        assert_eq!(
            normalize("busybox").ok(),
            Some("docker.io/library/busybox:latest".into())
        );
        assert_eq!(
            normalize("me/app:1").ok(),
            Some("docker.io/me/app:1".into())
        );
        assert_eq!(
            normalize("localhost:5000/app").ok(),
            Some("localhost:5000/app:latest".into())
        );
        assert_eq!(
            normalize("x@sha256:ab").ok(),
            Some("docker.io/library/x@sha256:ab".into())
        );
        assert_eq!(
            normalize("Bad").map_err(|e| e.reason),
            Err(INVALID_IMAGE_NAME)
        );
    }

    #[test]
    fn default_pull_policies_are_kubernetes_defaults() {
        assert_eq!(
            PullPolicy::for_container(None, "busybox"),
            PullPolicy::Always
        );
        assert_eq!(
            PullPolicy::for_container(None, "busybox:latest"),
            PullPolicy::Always
        );
        assert_eq!(
            PullPolicy::for_container(None, "busybox:1.36"),
            PullPolicy::IfNotPresent
        );
        assert_eq!(
            PullPolicy::for_container(None, "localhost:5000/b"),
            PullPolicy::Always
        );
        assert_eq!(
            PullPolicy::for_container(Some("Never"), "b"),
            PullPolicy::Never
        );
    }
}
