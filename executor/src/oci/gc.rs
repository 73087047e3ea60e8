//! Image garbage collection driven by the executor, as kubelet's image
//! manager does it: when a pod ends, and when the executor starts, unused
//! images go once the store's filesystem passes `--image-gc-high-threshold`
//! percent, until it is at `--image-gc-low-threshold` (least recently used
//! first). An image a live pod names, or one of its containers runs, is
//! never removed.
//!
//! Images' init layers ([`super::init_layer`]) are collected with them:
//! every pass removes the layers of the images the store no longer has,
//! but those a live pod's containers run. Passes and the making and
//! mounting of init layers by container starts exclude each other, so a
//! pass never removes a layer a start has just found.
//!
//! After each pass, and when asked after a pull ([`ImageGc::report`]), the
//! store's images are listed for the Node ([`crate::node_images`]); the
//! executor loop sends the list when it changed ([`ImageGc::listed`]).
//!
//! One pass runs at a time, off the pods' loops; a request made while one
//! runs starts another after it, so the last pod's end is always seen.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use images::{ImageGcPolicy, ImageStore};
use tokio::sync::{RwLock, RwLockReadGuard, watch};

use crate::node_images::NodeImages;

/// The executor's image gc.
pub(crate) struct ImageGc {
    store: ImageStore,
    thresholds: ImageGcPolicy,
    /// Images' init layers (`<runtime root>-init`).
    init_layers: PathBuf,
    /// The agent's work directory, whose filesystem the Node reports.
    work_dir: PathBuf,
    /// The images each live pod (by task id) names or runs.
    live: Mutex<HashMap<String, Vec<String>>>,
    /// Starts hold it shared while they make and mount an init layer;
    /// passes exclusively.
    starts: RwLock<()>,
    /// A collection was asked for since the running pass began.
    collect: AtomicBool,
    /// A pass (a collection or only a listing) was asked for.
    dirty: AtomicBool,
    running: AtomicBool,
    /// The store's images as last listed (`None`: not yet).
    listed: watch::Sender<Option<Arc<NodeImages>>>,
}

impl std::fmt::Debug for ImageGc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageGc")
            .field("root", &self.store.root())
            .field("init_layers", &self.init_layers)
            .field("thresholds", &self.thresholds)
            .finish_non_exhaustive()
    }
}

impl ImageGc {
    pub(crate) fn new(
        store: ImageStore,
        thresholds: ImageGcPolicy,
        init_layers: PathBuf,
        work_dir: PathBuf,
    ) -> Arc<ImageGc> {
        Arc::new(ImageGc {
            store,
            thresholds,
            init_layers,
            work_dir,
            live: Mutex::default(),
            starts: RwLock::new(()),
            collect: AtomicBool::new(false),
            dirty: AtomicBool::new(false),
            running: AtomicBool::new(false),
            listed: watch::Sender::new(None),
        })
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<String>>> {
        // A panic while holding it cannot leave the map half-changed.
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A pod that runs these images (references or image ids) is live:
    /// they, and their init layers, are kept.
    pub(crate) fn hold(&self, task: &str, images: Vec<String>) {
        self.live().insert(task.to_owned(), images);
    }

    /// The pod has ended: its images may go, and a pass runs.
    pub(crate) fn release(self: &Arc<Self>, task: &str) {
        self.live().remove(task);
        self.trigger();
    }

    /// Held by a start while it makes and mounts its image's init layer.
    pub(crate) async fn starting(&self) -> RwLockReadGuard<'_, ()> {
        self.starts.read().await
    }

    /// The store's images as last listed; changes after each pass that
    /// changed them.
    pub(crate) fn listed(&self) -> watch::Receiver<Option<Arc<NodeImages>>> {
        self.listed.subscribe()
    }

    /// Runs a pass soon (after the running one, if any), on the current
    /// tokio runtime (none: no pass).
    pub(crate) fn trigger(self: &Arc<Self>) {
        self.collect.store(true, Ordering::SeqCst);
        self.report();
    }

    /// Lists the store's images again soon (an image was pulled).
    pub(crate) fn report(self: &Arc<Self>) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            tracing::debug!("no tokio runtime: image gc skipped");
            return;
        };
        self.dirty.store(true, Ordering::SeqCst);
        if self.running.swap(true, Ordering::SeqCst) {
            return;
        }
        let gc = Arc::clone(self);
        rt.spawn(async move {
            loop {
                while gc.dirty.swap(false, Ordering::SeqCst) {
                    if gc.collect.swap(false, Ordering::SeqCst) {
                        gc.pass().await;
                    }
                    gc.list().await;
                }
                gc.running.store(false, Ordering::SeqCst);
                // A trigger between the last check and the store above saw
                // `running` and left: take its pass.
                if !gc.dirty.load(Ordering::SeqCst) || gc.running.swap(true, Ordering::SeqCst) {
                    return;
                }
            }
        });
    }

    pub(crate) async fn pass(&self) {
        let in_use: Vec<String> = self.live().values().flatten().cloned().collect();
        match self.store.gc_disk(self.thresholds, &in_use).await {
            Ok(report) if !report.removed.is_empty() => tracing::info!(
                removed = ?report.removed,
                bytes_before = report.bytes_before,
                bytes_after = report.bytes_after,
                "image garbage collection"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "image garbage collection failed"),
        }
        self.collect_init_layers().await;
    }

    /// Removes the init layers of images the store no longer has, but
    /// those live pods run.
    async fn collect_init_layers(&self) {
        let _no_start = self.starts.write().await;
        // Read under the lock: a start that held it had its image held and
        // recorded in the store before it took it.
        let in_use: Vec<String> = self.live().values().flatten().cloned().collect();
        let mut keep: HashSet<String> = self.store.resolve(&in_use).await;
        keep.extend(self.store.list().await.into_iter().map(|i| i.image_id));
        let dir = self.init_layers.clone();
        let removed =
            tokio::task::spawn_blocking(move || super::init_layer::collect(&dir, &keep)).await;
        match removed {
            Ok(removed) if !removed.is_empty() => {
                tracing::info!(?removed, "init layers of removed images collected");
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "init layer collection failed"),
        }
    }

    /// Lists the store's images for the Node; the executor loop is told
    /// only if they changed.
    async fn list(&self) {
        let stored = self.store.list().await;
        let work_dir = self.work_dir.clone();
        let filesystem_bytes = tokio::task::spawn_blocking(move || {
            rustix::fs::statvfs(&work_dir)
                .ok()
                .map(|fs| fs.f_blocks.saturating_mul(fs.f_frsize))
        })
        .await
        .ok()
        .flatten();
        let now = NodeImages::from_store(&stored, filesystem_bytes);
        self.listed.send_if_modified(|last| {
            if last.as_deref() == Some(&now) {
                return false;
            }
            *last = Some(Arc::new(now));
            true
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    use images::testing::{self, Layer, Spec};

    /// A store holding `names` (one image each, all different), as
    /// `mesopod image load` would make it.
    async fn store_with(dir: &std::path::Path, names: &[&str]) -> (ImageStore, Vec<String>) {
        testkit::init_crypto();
        let store = ImageStore::open(images::StoreConfig::new(dir.join("store"))).unwrap();
        let built: Vec<testing::TestImage> = names
            .iter()
            .map(|n| {
                let layer = Layer::new()
                    .dir("etc")
                    .file("name", 0o644, n.as_bytes())
                    .tar();
                testing::image(vec![layer], &Spec::default())
            })
            .collect();
        let tags: Vec<[&str; 1]> = names.iter().map(|n| [*n]).collect();
        let pairs: Vec<(&[&str], &testing::TestImage)> =
            tags.iter().zip(&built).map(|(t, i)| (&t[..], i)).collect();
        let archive = dir.join("images.tar");
        std::fs::write(&archive, testing::docker_save(&pairs)).unwrap();
        let loaded = store.load_archive(&archive).await.unwrap();
        let ids = loaded.iter().map(|i| i.image_id.clone()).collect();
        (store, ids)
    }

    #[tokio::test]
    async fn a_pass_removes_the_init_layers_of_removed_images_and_keeps_those_in_use() {
        let tmp = tempfile::tempdir().unwrap();
        let (store, ids) = store_with(
            tmp.path(),
            &["test/kept:1", "test/running:1", "test/unused:1"],
        )
        .await;
        let init = tmp.path().join("runtime-init");
        let mut layer_dirs = Vec::new();
        for id in &ids {
            let base = tmp.path().join("rootfs");
            std::fs::create_dir_all(base.join("etc")).unwrap();
            layer_dirs.push(super::super::init_layer::ensure(&init, id, &[base]).unwrap());
        }
        // An image an earlier executor ran, gone from the store since.
        let stale_base = tmp.path().join("stale");
        std::fs::create_dir_all(&stale_base).unwrap();
        let stale =
            super::super::init_layer::ensure(&init, "test/old@sha256:00", &[stale_base]).unwrap();

        // gc removes every unused image at once.
        let everything = ImageGcPolicy {
            high: 0,
            low: 0,
            minimum_age: std::time::Duration::ZERO,
        };
        let gc = ImageGc::new(store.clone(), everything, init.clone(), tmp.path().into());
        // A live pod names one image by reference, another runs a second
        // image whose tag has moved on: held by its image id.
        gc.hold("pod-a", vec!["test/kept:1".into()]);
        gc.hold("pod-b", vec![ids[1].clone()]);
        gc.pass().await;

        let left: Vec<String> = store.list().await.into_iter().map(|i| i.image_id).collect();
        assert_eq!(
            left,
            [ids[0].clone(), ids[1].clone()],
            "the unused image went"
        );
        assert!(
            layer_dirs[0].join("etc/hostname").is_file(),
            "kept image's layer stays"
        );
        assert!(
            layer_dirs[1].join("etc/hostname").is_file(),
            "running image's layer stays"
        );
        assert!(
            !layer_dirs[2].exists(),
            "the removed image's layer went with it"
        );
        assert!(
            !stale.exists(),
            "a layer of an image already gone goes on the next pass"
        );

        // Once its pod ends, an image and its layer go on the next pass.
        gc.live().remove("pod-b");
        gc.pass().await;
        assert!(!layer_dirs[1].exists());
        assert!(layer_dirs[0].is_dir());
    }

    #[tokio::test]
    async fn the_listing_changes_only_when_the_store_does() {
        let tmp = tempfile::tempdir().unwrap();
        let (store, ids) = store_with(tmp.path(), &["test/a:1", "test/b:2"]).await;
        let gc = ImageGc::new(
            store,
            ImageGcPolicy::default(),
            tmp.path().join("init"),
            tmp.path().into(),
        );
        let mut listed = gc.listed();
        assert!(listed.borrow().is_none());
        gc.list().await;
        assert!(listed.has_changed().unwrap());
        let first = listed.borrow_and_update().clone().unwrap();
        assert_eq!(first.images.len(), 2);
        let names: HashSet<&str> = first
            .images
            .iter()
            .flat_map(|i| i.names.iter().map(String::as_str))
            .collect();
        for want in [&ids[0], &ids[1], "docker.io/test/a:1", "docker.io/test/b:2"] {
            assert!(names.contains(want), "{want} in {names:?}");
        }
        assert!(first.images.iter().all(|i| i.size_bytes > 0));
        assert!(first.filesystem_bytes.is_some_and(|b| b > 0));
        gc.list().await;
        assert!(
            !listed.has_changed().unwrap(),
            "the same store: no new message"
        );
    }
}
