//! Removing unused images past the store's threshold, least recently used
//! first, with the blobs and layers no remaining image needs.

use std::collections::HashSet;

use crate::error::StoreError;
use crate::store::ImageStore;
use crate::store::record::{self, ImageRecord, Layout};

/// What a [`ImageStore::gc`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Image ids removed, in the order they went.
    pub removed: Vec<String>,
    /// Bytes the store held before.
    pub bytes_before: u64,
    /// Bytes it holds now.
    pub bytes_after: u64,
}

impl ImageStore {
    /// While the store holds more than `gc_threshold_bytes`, removes the
    /// least recently used image whose id is not in `in_use`, and every
    /// layer and blob only it needed. Pulls wait while it runs.
    ///
    /// # Errors
    ///
    /// When the store's files cannot be read or removed.
    pub async fn gc(&self, in_use: &HashSet<String>) -> Result<GcReport, StoreError> {
        let _exclusive = self.inner.gc_lock.write().await;
        let layout = self.inner.layout.clone();
        let threshold = self.inner.config.gc_threshold_bytes;
        let in_use = in_use.clone();
        tokio::task::spawn_blocking(move || collect(&layout, threshold, &in_use))
            .await
            .map_err(|e| StoreError::Io {
                path: self.inner.layout.root.clone(),
                source: std::io::Error::other(e),
            })?
    }
}

fn usage(layout: &Layout) -> u64 {
    record::disk_usage(&layout.root.join("blobs")) + record::disk_usage(&layout.root.join("layers"))
}

fn records(layout: &Layout) -> Result<Vec<ImageRecord>, StoreError> {
    let dir = layout.root.join("images");
    let entries = std::fs::read_dir(&dir).map_err(StoreError::io(&dir))?;
    Ok(entries
        .filter_map(Result::ok)
        .filter_map(|e| record::read_json::<ImageRecord>(&e.path()))
        .collect())
}

fn collect(
    layout: &Layout,
    threshold: u64,
    in_use: &HashSet<String>,
) -> Result<GcReport, StoreError> {
    let bytes_before = usage(layout);
    let mut report = GcReport {
        bytes_before,
        bytes_after: bytes_before,
        ..GcReport::default()
    };
    if bytes_before <= threshold {
        return Ok(report);
    }
    let mut all = records(layout)?;
    all.sort_by_key(|r| r.last_used);
    while report.bytes_after > threshold {
        let Some(pos) = all.iter().position(|r| !in_use.contains(&r.image_id)) else {
            break;
        };
        let victim = all.remove(pos);
        remove_image(layout, &victim, &all)?;
        tracing::info!(image = %victim.image_id, "image garbage-collected");
        report.removed.push(victim.image_id);
        report.bytes_after = usage(layout);
    }
    Ok(report)
}

/// Removes `victim`'s record, its references and what `remaining` do not share.
fn remove_image(
    layout: &Layout,
    victim: &ImageRecord,
    remaining: &[ImageRecord],
) -> Result<(), StoreError> {
    let image = layout.image(&victim.image_id);
    std::fs::remove_file(&image).map_err(StoreError::io(&image))?;
    for reference in &victim.references {
        let path = layout.reference(reference);
        let points_here = record::read_json::<record::RefRecord>(&path)
            .is_some_and(|r| r.image_id == victim.image_id);
        if points_here {
            let _ = std::fs::remove_file(&path);
        }
    }
    let kept: HashSet<&str> = remaining
        .iter()
        .flat_map(|r| r.layers.iter().chain(std::iter::once(&r.config_digest)))
        .map(String::as_str)
        .collect();
    for layer in victim.layers.iter().filter(|d| !kept.contains(d.as_str())) {
        let dir = layout.layer(layer);
        crate::unpack::remove_any(&dir).map_err(StoreError::io(&dir))?;
    }
    if !kept.contains(victim.config_digest.as_str()) {
        let blob = layout.blob(&victim.config_digest);
        crate::unpack::remove_any(&blob).map_err(StoreError::io(&blob))?;
    }
    Ok(())
}
