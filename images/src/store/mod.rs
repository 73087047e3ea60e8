//! The image store: `ensure` an image per pull policy, from the store or a
//! registry.

mod fetch;
mod gc;
pub use gc::{GcReport, ImageGcPolicy};
mod list;
pub use list::StoredImage;
pub(crate) mod record;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::auth::RegistryAuth;
use crate::error::{PullError, StoreError};
use crate::hosts::RegistryHosts;
use crate::manifest::{self, ConfigError, ImageConfig, Manifest};
use crate::policy::PullPolicy;
use crate::reference::Reference;
use crate::remote::Clients;

pub(crate) use fetch::{Flights, Source, UNPACKED, unpacked};
use record::{ImageRecord, Layout, RefRecord};

/// Where the store lives and how it reaches registries.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// The store's directory (`<agent work dir>/images`); created if absent.
    pub root: PathBuf,
    /// Registries (`host:port`) reached over plain HTTP although not on
    /// loopback (`--insecure-registry`).
    pub insecure_registries: Vec<String>,
    /// A Docker `config.json` with credentials for every pull (`--registry-config`).
    pub registry_config: Option<PathBuf>,
    /// Docker's per-registry TLS directory: `<certs_dir>/<host:port>/*.crt`
    /// are that registry's CAs (default `/etc/docker/certs.d`).
    pub certs_dir: PathBuf,
    /// `gc` removes unused images while the store holds more than this.
    pub gc_threshold_bytes: u64,
    /// Mirrors and per-registry hosts (`--registry-mirror`,
    /// `--registry-config-dir`), loaded and checked beforehand.
    pub hosts: RegistryHosts,
}

impl StoreConfig {
    /// A store at `root` with no extra registries, no credentials and a
    /// 10 GiB threshold.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            insecure_registries: Vec::new(),
            registry_config: None,
            certs_dir: PathBuf::from(crate::remote::DOCKER_CERTS_DIR),
            gc_threshold_bytes: 10 << 30,
            hosts: RegistryHosts::default(),
        }
    }
}

/// An image present in the store, ready for [`crate::rootfs::assemble`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// The normalised reference it was asked by (`docker.io/library/busybox:latest`).
    pub reference: String,
    /// `registry/repository@sha256:…`, for `status.imageID`.
    pub image_id: String,
    /// The config's container fields.
    pub config: ImageConfig,
    /// The unpacked layers' directories, bottom first.
    pub layers: Vec<PathBuf>,
    /// Bytes of its unpacked layers and config (the `Pulled` event's size).
    pub size: u64,
}

/// What [`ImageStore::ensure`] did, for the `Pulled` event's two forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// It was in the store: `Container image "IMG" already present on machine`.
    Present,
    /// It was pulled from its registry, or from the mirror named.
    Pulled {
        /// The host that resolved it (`http://host:port`) when it is not
        /// the registry's own: a mirror, or a host file's `server`.
        mirror: Option<String>,
    },
}

/// A content-addressed store of images, shared by clones (and by
/// processes using the same root: every write is a rename).
#[derive(Clone)]
pub struct ImageStore {
    inner: Arc<Inner>,
}

struct Inner {
    layout: Layout,
    config: StoreConfig,
    creds: Vec<RegistryAuth>,
    clients: Clients,
    flights: Flights,
    /// Pulls hold it shared, `gc` exclusively: gc never removes a layer a
    /// pull has unpacked but not yet recorded.
    gc_lock: tokio::sync::RwLock<()>,
}

impl ImageStore {
    /// Opens (creating) the store at `config.root` and reads
    /// `registry_config`. Temporary files of processes that no longer run
    /// (a pull cut short by a crash) are removed.
    ///
    /// # Errors
    ///
    /// When the directories cannot be made or the registry config is bad.
    pub fn open(config: StoreConfig) -> Result<Self, StoreError> {
        let layout = Layout {
            root: config.root.clone(),
        };
        for dir in layout.dirs() {
            std::fs::create_dir_all(&dir).map_err(StoreError::io(&dir))?;
        }
        let creds = match &config.registry_config {
            None => Vec::new(),
            Some(path) => {
                let bytes = std::fs::read(path).map_err(|e| StoreError::RegistryConfig {
                    path: path.clone(),
                    detail: e.to_string(),
                })?;
                RegistryAuth::from_docker_config(&bytes).map_err(|e| {
                    StoreError::RegistryConfig {
                        path: path.clone(),
                        detail: e.to_string(),
                    }
                })?
            }
        };
        record::remove_stale_temps(&layout);
        let clients = Clients::new(
            config.insecure_registries.clone(),
            config.certs_dir.clone(),
            config.hosts.clone(),
        )
        .map_err(|e| StoreError::Io {
            path: config.root.clone(),
            source: std::io::Error::other(e),
        })?;
        Ok(Self {
            inner: Arc::new(Inner {
                layout,
                config,
                creds,
                clients,
                flights: Flights::default(),
                gc_lock: tokio::sync::RwLock::new(()),
            }),
        })
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.inner.layout.root
    }

    /// Makes `image` present as `policy` says and returns it. `creds` are
    /// tried before the registry config's (a pod's imagePullSecrets).
    /// File work runs on the blocking pool; concurrent calls share each
    /// blob's and layer's download.
    ///
    /// # Errors
    ///
    /// A [`PullError`] with kubelet's reason and message.
    pub async fn ensure(
        &self,
        image: &str,
        policy: PullPolicy,
        creds: &[RegistryAuth],
    ) -> Result<Image, PullError> {
        self.ensure_fetched(image, policy, creds)
            .await
            .map(|(i, _)| i)
    }

    /// [`ImageStore::ensure`], saying whether it pulled.
    ///
    /// # Errors
    ///
    /// As [`ImageStore::ensure`].
    pub async fn ensure_fetched(
        &self,
        image: &str,
        policy: PullPolicy,
        creds: &[RegistryAuth],
    ) -> Result<(Image, Fetched), PullError> {
        let _pulling = self.inner.gc_lock.read().await;
        let reference = Reference::parse(image).map_err(|e| PullError::InvalidImageName {
            image: image.to_string(),
            detail: e.to_string(),
        })?;
        if policy != PullPolicy::Always
            && let Some(found) = self.local(&reference).await
        {
            return Ok((found, Fetched::Present));
        }
        if policy == PullPolicy::Never {
            return Err(PullError::NeverPull {
                image: image.to_string(),
            });
        }
        let mut all = creds.to_vec();
        all.extend(self.inner.creds.iter().cloned());
        // As kubelet: each of the registry's credentials in turn (the pod's
        // first) until one is not refused.
        let registry = reference.registry().to_owned();
        let mut rest: &[RegistryAuth] = &all;
        loop {
            let pulled = self.pull(&reference, rest).await;
            let used = rest.iter().position(|c| c.registry() == registry);
            match (pulled, used) {
                (Err(PullError::Unauthorized { .. }), Some(i))
                    if rest[i + 1..].iter().any(|c| c.registry() == registry) =>
                {
                    rest = &rest[i + 1..];
                }
                (pulled, _) => return pulled.map(|(i, mirror)| (i, Fetched::Pulled { mirror })),
            }
        }
    }

    /// The image `reference` names, if the store has it whole.
    async fn local(&self, reference: &Reference) -> Option<Image> {
        let layout = self.inner.layout.clone();
        let reference = reference.clone();
        tokio::task::spawn_blocking(move || {
            let by_ref: Option<RefRecord> =
                record::read_json(&layout.reference(&reference.to_string()));
            let image_id = match (by_ref, reference.digest()) {
                (Some(r), _) => r.image_id,
                (None, Some(d)) => reference.with_digest(d),
                (None, None) => return None,
            };
            let mut rec: ImageRecord = record::read_json(&layout.image(&image_id))?;
            let image = image_of(&layout, &rec, &reference.to_string())?;
            rec.last_used = record::now_nanos();
            // Only gc's order depends on it: no fsync on every container start.
            let _ = record::write_json_unsynced(&layout, &layout.image(&image_id), &rec);
            Some(image)
        })
        .await
        .ok()
        .flatten()
    }

    /// Pulls `reference`, saying which mirror served it, if one did.
    async fn pull(
        &self,
        reference: &Reference,
        creds: &[RegistryAuth],
    ) -> Result<(Image, Option<String>), PullError> {
        let full = reference.to_string();
        let remote = self.inner.clients.remote(reference, creds)?;
        let (bytes, top_digest, remote) = remote.resolve().await?;
        let bad = |detail: String| PullError::BadManifest {
            reference: full.clone(),
            detail,
        };
        let (manifest_bytes, manifest_digest) = match manifest::parse(&bytes).map_err(bad)? {
            Manifest::Image(_) => (bytes, top_digest.clone()),
            Manifest::Index(index) => {
                let entry =
                    manifest::pick_platform(&index).map_err(|detail| PullError::Platform {
                        reference: full.clone(),
                        detail,
                    })?;
                let digest = entry.digest().to_string();
                remote.manifest(&digest).await?
            }
        };
        let image_id = reference.with_digest(&top_digest);
        let mirror = remote.mirror();
        let image = self
            .import(
                reference,
                &image_id,
                &manifest_bytes,
                &manifest_digest,
                &Source::Remote(remote),
            )
            .await?;
        Ok((image, mirror))
    }

    /// Stores the image whose platform manifest is `manifest_bytes`,
    /// fetching what is missing from `source`, and records it under
    /// `reference` and `image_id`.
    pub(crate) async fn import(
        &self,
        reference: &Reference,
        image_id: &str,
        manifest_bytes: &[u8],
        manifest_digest: &str,
        source: &Source,
    ) -> Result<Image, PullError> {
        let full = reference.to_string();
        let inner = &self.inner;
        let bad = |detail: String| PullError::BadManifest {
            reference: full.clone(),
            detail,
        };
        let Manifest::Image(manifest) = manifest::parse(manifest_bytes).map_err(bad)? else {
            return Err(bad("a manifest list inside a manifest list".into()));
        };
        let config_digest = manifest.config().digest().to_string();
        let config_path =
            fetch::blob(&inner.layout, &inner.flights, source, &config_digest).await?;
        let config_bytes = tokio::fs::read(&config_path)
            .await
            .map_err(|e| bad(format!("cannot read config: {e}")))?;
        let config = manifest::parse_config(&config_bytes).map_err(|e| match e {
            ConfigError::Bad(detail) => bad(detail),
            ConfigError::Platform(detail) => PullError::Platform {
                reference: full.clone(),
                detail,
            },
        })?;
        let layer_digests: Vec<String> = manifest
            .layers()
            .iter()
            .map(|l| l.digest().to_string())
            .collect();
        if config.diff_ids.len() != layer_digests.len() {
            return Err(bad(format!(
                "the manifest has {} layers, the config {} diff IDs",
                layer_digests.len(),
                config.diff_ids.len()
            )));
        }
        let pulls = layer_digests
            .iter()
            .zip(&config.diff_ids)
            .map(|(digest, diff_id)| {
                fetch::layer(
                    &inner.layout,
                    &inner.flights,
                    source,
                    &full,
                    digest,
                    Some(diff_id),
                )
            });
        if let Err(e) = futures::future::try_join_all(pulls).await {
            // The config alone is no image: it goes unless another has it.
            let layout = inner.layout.clone();
            let _ = tokio::task::spawn_blocking(move || {
                record::remove_unreferenced_blob(&layout, &config_digest)
            })
            .await;
            return Err(e);
        }
        let layout = inner.layout.clone();
        let (image_id, manifest_digest) = (image_id.to_string(), manifest_digest.to_string());
        let full2 = full.clone();
        let stored = tokio::task::spawn_blocking(move || {
            let size = layer_digests
                .iter()
                .map(|d| fetch::unpacked(&layout.layer(d)).map_or(0, |u| u.size))
                .sum::<u64>()
                + config_bytes.len() as u64;
            let old: Option<ImageRecord> = record::read_json(&layout.image(&image_id));
            let mut references = old.map(|o| o.references).unwrap_or_default();
            if !references.contains(&full2) {
                references.push(full2.clone());
            }
            let rec = ImageRecord {
                image_id: image_id.clone(),
                references,
                manifest_digest,
                config_digest,
                config: config.image,
                layers: layer_digests,
                size,
                last_used: record::now_nanos(),
            };
            record::write_json(&layout, &layout.image(&image_id), &rec)?;
            let by_ref = RefRecord {
                reference: full2.clone(),
                image_id: image_id.clone(),
            };
            record::write_json(&layout, &layout.reference(&full2), &by_ref)?;
            image_of(&layout, &rec, &full2).ok_or_else(|| std::io::Error::other("a layer vanished"))
        })
        .await
        .map_err(std::io::Error::other)
        .and_then(|r| r);
        stored.map_err(|e| PullError::Other {
            reference: full,
            detail: format!("cannot record the image in the store: {e}"),
        })
    }
}

/// The [`Image`] of a record, if all its layers are unpacked.
fn image_of(layout: &Layout, rec: &ImageRecord, reference: &str) -> Option<Image> {
    let layers = rec
        .layers
        .iter()
        .map(|d| {
            let dir = layout.layer(d);
            dir.join(UNPACKED).exists().then(|| dir.join("fs"))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Image {
        reference: reference.to_string(),
        image_id: rec.image_id.clone(),
        config: rec.config.clone(),
        layers,
        size: rec.size,
    })
}
