//! Removing unused images past the store's threshold (a byte size, or
//! kubelet's percentages of its filesystem), least recently used first,
//! with the blobs and layers no remaining image needs.

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
        tokio::task::spawn_blocking(move || collect(&layout, threshold, &in_use, u64::MAX))
            .await
            .map_err(|e| StoreError::Io {
                path: self.inner.layout.root.clone(),
                source: std::io::Error::other(e),
            })?
    }
}

/// kubelet's image gc policy over the store's filesystem
/// (`--image-gc-high-threshold`, `--image-gc-low-threshold`, percentages
/// of the filesystem as kubelet computes them: 100 - available/capacity,
/// and `--minimum-image-ttl-duration`): once the filesystem is `high`
/// percent full, unused images not used for `minimum_age` go, least
/// recently used first, until it is at most `low` percent full or none is
/// left to remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageGcPolicy {
    /// Percent used at which gc runs (100 turns gc off).
    pub high: u8,
    /// Percent used gc aims for.
    pub low: u8,
    /// An image used more recently than this is kept.
    pub minimum_age: std::time::Duration,
}

impl Default for ImageGcPolicy {
    /// kubelet's defaults: 85, 80 and 2 minutes.
    fn default() -> Self {
        ImageGcPolicy {
            high: 85,
            low: 80,
            minimum_age: std::time::Duration::from_secs(120),
        }
    }
}

impl ImageGcPolicy {
    /// Checks kubelet's rules: both at most 100, `low` below `high`.
    ///
    /// # Errors
    ///
    /// kubelet's message naming the flags.
    pub fn new(high: u8, low: u8, minimum_age: std::time::Duration) -> Result<Self, String> {
        if high > 100 {
            return Err(format!(
                "invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) {high} must be between 0 and 100, inclusive"
            ));
        }
        if low > 100 {
            return Err(format!(
                "invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) {low} must be between 0 and 100, inclusive"
            ));
        }
        if low >= high && high != 100 {
            return Err(format!(
                "invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) {low} must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) {high}"
            ));
        }
        Ok(ImageGcPolicy {
            high,
            low,
            minimum_age,
        })
    }

    /// How many bytes gc must free on a filesystem of `capacity` bytes with
    /// `used` in use; `None` when it is below `high` (or gc is off).
    pub fn to_free(self, capacity: u64, used: u64) -> Option<u64> {
        let percent = |p: u8| u128::from(capacity) * u128::from(p) / 100;
        if self.high >= 100 || capacity == 0 || u128::from(used) < percent(self.high) {
            return None;
        }
        let goal = u64::try_from(percent(self.low)).unwrap_or(u64::MAX);
        Some(used.saturating_sub(goal))
    }
}

impl ImageStore {
    /// kubelet's image gc over the store's filesystem (see
    /// [`ImageGcPolicy`]). `in_use` holds the references (or image ids)
    /// of the images live pods run; they are never removed.
    ///
    /// # Errors
    ///
    /// When the filesystem or the store's files cannot be read or removed.
    pub async fn gc_disk(
        &self,
        thresholds: ImageGcPolicy,
        in_use: &[String],
    ) -> Result<GcReport, StoreError> {
        let _exclusive = self.inner.gc_lock.write().await;
        let layout = self.inner.layout.clone();
        let in_use = in_use.to_vec();
        tokio::task::spawn_blocking(move || {
            let fs = rustix::fs::statvfs(&layout.root).map_err(|e| StoreError::Io {
                path: layout.root.clone(),
                source: e.into(),
            })?;
            let capacity = fs.f_blocks.saturating_mul(fs.f_frsize);
            let used = capacity.saturating_sub(fs.f_bavail.saturating_mul(fs.f_frsize));
            let Some(to_free) = thresholds.to_free(capacity, used) else {
                let bytes = usage(&layout);
                return Ok(GcReport {
                    bytes_before: bytes,
                    bytes_after: bytes,
                    ..GcReport::default()
                });
            };
            let keep = image_ids(&layout, &in_use);
            let limit = usage(&layout).saturating_sub(to_free);
            let min_age = u64::try_from(thresholds.minimum_age.as_nanos()).unwrap_or(u64::MAX);
            collect(
                &layout,
                limit,
                &keep,
                record::now_nanos().saturating_sub(min_age),
            )
        })
        .await
        .map_err(|e| StoreError::Io {
            path: self.inner.layout.root.clone(),
            source: std::io::Error::other(e),
        })?
    }
}

impl ImageStore {
    /// The references of every image in the store, sorted; reading them
    /// does not count as a use (gc's order is untouched).
    pub async fn references(&self) -> Vec<String> {
        let layout = self.inner.layout.clone();
        let listed = tokio::task::spawn_blocking(move || {
            let mut refs: Vec<String> = records(&layout)
                .unwrap_or_default()
                .into_iter()
                .flat_map(|r| r.references)
                .collect();
            refs.sort();
            refs
        });
        listed.await.unwrap_or_default()
    }
}

/// The image ids `names` (references or ids) stand for in the store.
pub(super) fn image_ids(layout: &Layout, names: &[String]) -> HashSet<String> {
    names
        .iter()
        .filter_map(|name| {
            let reference = crate::reference::Reference::parse(name).ok()?;
            let by_ref: Option<record::RefRecord> =
                record::read_json(&layout.reference(&reference.to_string()));
            Some(match (by_ref, reference.digest()) {
                (Some(r), _) => r.image_id,
                (None, Some(d)) => reference.with_digest(d),
                (None, None) => return None,
            })
        })
        .collect()
}

fn usage(layout: &Layout) -> u64 {
    record::disk_usage(&layout.root.join("blobs")) + record::disk_usage(&layout.root.join("layers"))
}

pub(super) fn records(layout: &Layout) -> Result<Vec<ImageRecord>, StoreError> {
    let dir = layout.root.join("images");
    let entries = std::fs::read_dir(&dir).map_err(StoreError::io(&dir))?;
    Ok(entries
        .filter_map(Result::ok)
        .filter_map(|e| record::read_json::<ImageRecord>(&e.path()))
        .collect())
}

/// Removes unused images used last before `used_before` (nanoseconds since
/// the epoch; `u64::MAX`: any), least recently used first, while the store
/// holds more than `threshold` bytes.
fn collect(
    layout: &Layout,
    threshold: u64,
    in_use: &HashSet<String>,
    used_before: u64,
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
        let Some(pos) = all
            .iter()
            .position(|r| !in_use.contains(&r.image_id) && r.last_used < used_before)
        else {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn thresholds_follow_kubelets_rules() {
        let age = std::time::Duration::from_secs(120);
        assert_eq!(
            ImageGcPolicy::default(),
            ImageGcPolicy::new(85, 80, age).unwrap()
        );
        let err = ImageGcPolicy::new(80, 80, age).unwrap_err();
        assert!(
            err.contains("must be less than imageGCHighThresholdPercent"),
            "{err}"
        );
        assert!(
            ImageGcPolicy::new(101, 0, age)
                .unwrap_err()
                .contains("between 0 and 100")
        );
        let t = ImageGcPolicy::default();
        assert_eq!(t.to_free(1000, 849), None);
        assert_eq!(t.to_free(1000, 900), Some(100));
        let off = ImageGcPolicy::new(100, 100, age).unwrap();
        assert_eq!(off.to_free(1000, 1000), None);
    }
}
