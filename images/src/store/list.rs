//! What the store holds, read without touching it: the images and their
//! names and sizes, as a node's status lists them, and which images a set
//! of names stands for. Reading counts as no use (gc's order is untouched).

use std::collections::HashSet;

use crate::store::ImageStore;
use crate::store::gc::{image_ids, records};

/// An image the store holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredImage {
    /// `registry/repository@sha256:…` (what `status.imageID` shows).
    pub image_id: String,
    /// The normalised references that resolved to it
    /// (`docker.io/library/busybox:latest`), sorted.
    pub references: Vec<String>,
    /// Bytes of its unpacked layers and config (layers other images share
    /// are counted in each, as kubelet's sizes are).
    pub size: u64,
}

impl ImageStore {
    /// Every image the store holds, by image id. A store that cannot be
    /// read lists nothing.
    pub async fn list(&self) -> Vec<StoredImage> {
        let layout = self.inner.layout.clone();
        let listed = tokio::task::spawn_blocking(move || {
            let mut images: Vec<StoredImage> = records(&layout)
                .unwrap_or_default()
                .into_iter()
                .map(|r| {
                    let mut references = r.references;
                    references.sort();
                    references.dedup();
                    StoredImage {
                        image_id: r.image_id,
                        references,
                        size: r.size,
                    }
                })
                .collect();
            images.sort_by(|a, b| a.image_id.cmp(&b.image_id));
            images
        });
        listed.await.unwrap_or_default()
    }

    /// The image ids `names` (references, as pods name images, or image
    /// ids) stand for now: what gc keeps for them. A name of a digest
    /// stands for that image whether or not the store has it.
    pub async fn resolve(&self, names: &[String]) -> HashSet<String> {
        let layout = self.inner.layout.clone();
        let names = names.to_vec();
        tokio::task::spawn_blocking(move || image_ids(&layout, &names))
            .await
            .unwrap_or_default()
    }
}
