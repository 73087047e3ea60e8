//! Whether a new owner could still find the shim. Adopters find it by
//! `shim.sock` in the bundle, by the bundle's path; once that path names
//! another directory or nothing, or the socket is gone (a dead executor's
//! sandbox removed, or a development cluster's temporary agent work dir
//! unmounted and deleted on its stop), no adopter will ever come, and
//! waiting out the adoption timeout would only leave the container running
//! with nobody to report on it.
//!
//! A path check rather than an inotify watch: a lazily unmounted sandbox
//! (the shim's working directory keeps it alive) is never deleted, so no
//! event would come.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::SOCKET;

/// How often an orphaned shim looks: a stat or two per orphan per period.
pub(super) const EVERY: Duration = Duration::from_secs(1);

/// The bundle, by path and by identity.
pub(super) struct Findable {
    path: PathBuf,
    id: (u64, u64),
}

impl Findable {
    /// Remembers what `bundle` (an absolute path) names now.
    pub(super) fn new(bundle: &Path) -> std::io::Result<Self> {
        let meta = std::fs::metadata(bundle)?;
        Ok(Findable {
            path: bundle.to_path_buf(),
            id: (meta.dev(), meta.ino()),
        })
    }

    /// Whether the path still names the bundle, with the socket in it.
    pub(super) fn still(&self) -> bool {
        let same = std::fs::metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.id);
        same && self.path.join(SOCKET).exists()
    }
}
