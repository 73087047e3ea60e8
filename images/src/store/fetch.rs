//! Blobs and unpacked layers, each made at most once at a time: the first
//! request for a digest starts a task, later ones await the same task.
//! A blob is downloaded to a temporary file and renamed once its digest is
//! checked; a layer is unpacked into a temporary directory and renamed, so
//! the store never holds half of either.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::FutureExt as _;
use futures::future::{BoxFuture, Shared};

use crate::error::PullError;
use crate::remote::Remote;
use crate::store::record::{self, Layout};
use crate::unpack::{self, UnpackError, Unpacked};

/// The metadata file beside a layer's `fs` directory.
pub(crate) const UNPACKED: &str = "unpacked.json";

type Flight = Shared<BoxFuture<'static, Result<(), PullError>>>;

/// In-flight work by key (`blob:<digest>`, `layer:<digest>`).
#[derive(Clone, Default)]
pub(crate) struct Flights(Arc<Mutex<HashMap<String, Flight>>>);

impl Flights {
    /// Runs `work` unless a task for `key` is running, then awaits that one.
    async fn once(
        &self,
        key: String,
        work: impl FnOnce() -> BoxFuture<'static, Result<(), PullError>>,
    ) -> Result<(), PullError> {
        let flight = {
            let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
            map.entry(key.clone())
                .or_insert_with(|| {
                    // A task of its own, so a caller that gives up (its pod
                    // deleted) does not strand the others mid-download.
                    let task = tokio::spawn(work());
                    async move {
                        task.await.unwrap_or_else(|e| {
                            Err(PullError::Other {
                                reference: String::new(),
                                detail: format!("pull task failed: {e}"),
                            })
                        })
                    }
                    .boxed()
                    .shared()
                })
                .clone()
        };
        let result = flight.clone().await;
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if map.get(&key).is_some_and(|f| f.ptr_eq(&flight)) {
            map.remove(&key);
        }
        result
    }
}

/// Where a blob comes from when the store lacks it.
#[derive(Clone)]
pub(crate) enum Source {
    /// A registry.
    Remote(Remote),
    /// Nowhere: it must be in the store already (an archive's import put it there).
    Local(String),
}

/// Makes the blob `digest` present, returning its path.
pub(crate) async fn blob(
    layout: &Layout,
    flights: &Flights,
    source: &Source,
    digest: &str,
) -> Result<PathBuf, PullError> {
    let path = layout.blob(digest);
    if path.exists() {
        return Ok(path);
    }
    let (layout2, source2, digest2, path2) = (
        layout.clone(),
        source.clone(),
        digest.to_string(),
        path.clone(),
    );
    flights
        .once(format!("blob:{digest}"), move || {
            async move {
                if path2.exists() {
                    return Ok(());
                }
                let remote = match source2 {
                    Source::Remote(r) => r,
                    Source::Local(reference) => {
                        return Err(PullError::Other {
                            reference,
                            detail: format!("blob {digest2} is missing from the store"),
                        });
                    }
                };
                let temp = layout2.temp("blob");
                let result = remote.blob(&digest2, &temp).await;
                let result = result.and_then(|()| {
                    std::fs::rename(&temp, &path2).map_err(|e| PullError::Other {
                        reference: String::new(),
                        detail: format!("cannot store blob {digest2}: {e}"),
                    })
                });
                if result.is_err() {
                    let _ = tokio::fs::remove_file(&temp).await;
                }
                result
            }
            .boxed()
        })
        .await?;
    Ok(path)
}

/// Makes the layer `digest` present and unpacked, returning its directory
/// (which holds `fs/` and `unpacked.json`). The blob is removed once
/// unpacked: the layer directory is what containers use.
pub(crate) async fn layer(
    layout: &Layout,
    flights: &Flights,
    source: &Source,
    reference: &str,
    digest: &str,
    diff_id: Option<&str>,
) -> Result<PathBuf, PullError> {
    let dir = layout.layer(digest);
    if dir.join(UNPACKED).exists() {
        return Ok(dir);
    }
    let (layout2, flights2, source2) = (layout.clone(), flights.clone(), source.clone());
    let (reference, digest2, diff_id) = (
        reference.to_string(),
        digest.to_string(),
        diff_id.map(str::to_string),
    );
    let dir2 = dir.clone();
    flights
        .once(format!("layer:{digest}"), move || {
            async move {
                if dir2.join(UNPACKED).exists() {
                    return Ok(());
                }
                let blob = blob(&layout2, &flights2, &source2, &digest2).await?;
                let temp = layout2.temp("layer");
                let (temp2, blob2, dir3) = (temp.clone(), blob.clone(), dir2.clone());
                let done = tokio::task::spawn_blocking(move || {
                    unpack_into(&temp2, &blob2, &dir3, diff_id.as_deref())
                })
                .await
                .unwrap_or_else(|e| Err(UnpackError::Io(std::io::Error::other(e))));
                let _ = tokio::task::spawn_blocking(move || unpack::remove_any(&temp)).await;
                // A bad layer's blob goes too: the store keeps nothing of it.
                let _ = tokio::fs::remove_file(&blob).await;
                done.map_err(|e| match e {
                    UnpackError::Io(e) => PullError::Other {
                        reference,
                        detail: format!("failed to extract layer {digest2}: {e}"),
                    },
                    other => PullError::CorruptLayer {
                        reference,
                        digest: digest2,
                        detail: other.to_string(),
                    },
                })
            }
            .boxed()
        })
        .await?;
    Ok(dir)
}

fn unpack_into(
    temp: &Path,
    blob: &Path,
    dir: &Path,
    diff_id: Option<&str>,
) -> Result<(), UnpackError> {
    let fs_dir = temp.join("fs");
    std::fs::create_dir_all(&fs_dir)?;
    let unpacked: Unpacked = unpack::unpack(blob, &fs_dir, diff_id)?;
    let meta = serde_json::to_vec(&unpacked).map_err(std::io::Error::other)?;
    std::fs::write(temp.join(UNPACKED), meta)?;
    match std::fs::rename(temp, dir) {
        Ok(()) => Ok(()),
        // Another process sharing the store unpacked it first.
        Err(_) if dir.join(UNPACKED).exists() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Reads a layer's metadata.
pub(crate) fn unpacked(dir: &Path) -> Option<Unpacked> {
    record::read_json(&dir.join(UNPACKED))
}
