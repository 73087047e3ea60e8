//! Image garbage collection driven by the executor, as kubelet's image
//! manager does it: when a pod ends, and when the executor starts, unused
//! images go once the store's filesystem passes `--image-gc-high-threshold`
//! percent, until it is at `--image-gc-low-threshold` (least recently used
//! first). An image a live pod names is never removed.
//!
//! One pass runs at a time, off the pods' loops; a request made while one
//! runs starts another after it, so the last pod's end is always seen.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use images::{ImageGcPolicy, ImageStore};

/// The executor's image gc.
pub(crate) struct ImageGc {
    store: ImageStore,
    thresholds: ImageGcPolicy,
    /// The images each live pod (by task id) names.
    live: Mutex<HashMap<String, Vec<String>>>,
    /// A pass was asked for since the running one began.
    dirty: AtomicBool,
    running: AtomicBool,
}

impl std::fmt::Debug for ImageGc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageGc")
            .field("root", &self.store.root())
            .field("thresholds", &self.thresholds)
            .finish_non_exhaustive()
    }
}

impl ImageGc {
    pub(crate) fn new(store: ImageStore, thresholds: ImageGcPolicy) -> Arc<ImageGc> {
        Arc::new(ImageGc {
            store,
            thresholds,
            live: Mutex::default(),
            dirty: AtomicBool::new(false),
            running: AtomicBool::new(false),
        })
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<String>>> {
        // A panic while holding it cannot leave the map half-changed.
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A pod that runs these images is live: they are kept.
    pub(crate) fn hold(&self, task: &str, images: Vec<String>) {
        self.live().insert(task.to_owned(), images);
    }

    /// The pod has ended: its images may go, and a pass runs.
    pub(crate) fn release(self: &Arc<Self>, task: &str) {
        self.live().remove(task);
        self.trigger();
    }

    /// Runs a pass soon (after the running one, if any), on the current
    /// tokio runtime (none: no pass).
    pub(crate) fn trigger(self: &Arc<Self>) {
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
                    gc.pass().await;
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

    async fn pass(&self) {
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
    }
}
