//! The store's on-disk layout and its small JSON records, each written to a
//! temporary file and renamed, so a reader sees the old record or the new.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::manifest::ImageConfig;

/// An image the store holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ImageRecord {
    /// `registry/repository@digest`.
    pub(crate) image_id: String,
    /// The normalised references that resolved to it.
    pub(crate) references: Vec<String>,
    /// The platform manifest's digest (the image id's digest may be a list's).
    pub(crate) manifest_digest: String,
    /// The config blob's digest.
    pub(crate) config_digest: String,
    /// The container fields of the config.
    pub(crate) config: ImageConfig,
    /// Layer (compressed) digests, bottom first.
    pub(crate) layers: Vec<String>,
    /// Bytes of its layers as unpacked plus its config.
    pub(crate) size: u64,
    /// When it was last pulled or used, in nanoseconds since the epoch.
    pub(crate) last_used: u64,
}

/// A reference's entry: which image it resolved to.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RefRecord {
    pub(crate) reference: String,
    pub(crate) image_id: String,
}

/// Paths under a store's root.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(crate) root: PathBuf,
}

pub(crate) fn hash_name(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// `sha256:abc` -> `abc` (anything else is refused before it reaches here).
pub(crate) fn digest_hex(digest: &str) -> &str {
    digest.strip_prefix("sha256:").unwrap_or(digest)
}

impl Layout {
    pub(crate) fn dirs(&self) -> [PathBuf; 5] {
        [
            self.root.join("blobs/sha256"),
            self.root.join("layers/sha256"),
            self.root.join("images"),
            self.root.join("refs"),
            self.root.join("tmp"),
        ]
    }
    pub(crate) fn blob(&self, digest: &str) -> PathBuf {
        self.root.join("blobs/sha256").join(digest_hex(digest))
    }
    pub(crate) fn layer(&self, digest: &str) -> PathBuf {
        self.root.join("layers/sha256").join(digest_hex(digest))
    }
    pub(crate) fn image(&self, image_id: &str) -> PathBuf {
        self.root
            .join("images")
            .join(format!("{}.json", hash_name(image_id)))
    }
    pub(crate) fn reference(&self, reference: &str) -> PathBuf {
        self.root
            .join("refs")
            .join(format!("{}.json", hash_name(reference)))
    }
    /// A fresh temporary path: unique in this process, and across the
    /// processes sharing the store by their pids.
    pub(crate) fn temp(&self, what: &str) -> PathBuf {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        self.root
            .join("tmp")
            .join(format!("{what}.{}.{n}", std::process::id()))
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename.
pub(crate) fn write_atomic(layout: &Layout, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let temp = layout.temp("write");
    let result = (|| {
        let mut f = std::fs::File::create(&temp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

pub(crate) fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

pub(crate) fn write_json<T: Serialize>(
    layout: &Layout,
    path: &Path,
    value: &T,
) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
    write_atomic(layout, path, &bytes)
}

/// Nanoseconds since the epoch, for `last_used`.
pub(crate) fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Bytes under `path`, not following symlinks.
pub(crate) fn disk_usage(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| disk_usage(&e.path()))
                .sum()
        })
        .unwrap_or(0)
}

/// Removes the blob `digest` unless an image record names it (as config).
pub(crate) fn remove_unreferenced_blob(layout: &Layout, digest: &str) {
    let dir = layout.root.join("images");
    let referenced = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .any(|e| read_json::<ImageRecord>(&e.path()).is_some_and(|r| r.config_digest == digest));
    if !referenced {
        let _ = std::fs::remove_file(layout.blob(digest));
    }
}

/// Removes temporaries (`what.<pid>.<n>`) whose process is gone.
pub(crate) fn remove_stale_temps(layout: &Layout) {
    let dir = layout.root.join("tmp");
    for entry in std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name.split('.').nth(1).and_then(|p| p.parse::<u32>().ok());
        let alive = pid
            .is_some_and(|p| p == std::process::id() || Path::new(&format!("/proc/{p}")).exists());
        if !alive {
            let _ = crate::unpack::remove_any(&entry.path());
        }
    }
}
