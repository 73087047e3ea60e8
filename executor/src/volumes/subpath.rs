//! `subPath`: a part of a volume, resolved inside the volume (symlinks
//! cannot lead out: `openat2` with `RESOLVE_IN_ROOT`) and bind-mounted from
//! the opened file descriptor to a stable place under the pod's directory,
//! as kubelet does, so that a container cannot swap a path component for a
//! symlink between the check and the mount.

use std::os::fd::AsRawFd as _;
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags};

use crate::oci::inroot::{make_dirs, open_in};

/// Binds `sub` inside `volume` at `target` (created as a file or a
/// directory to match). A missing `sub` is created as a directory, as
/// kubelet does.
pub(super) fn bind(volume: &Path, sub: &str, target: &Path) -> Result<(), String> {
    let err = |what: &str, e: rustix::io::Errno| format!("subPath {sub:?}: {what}: {e}");
    let root = rustix::fs::open(
        volume,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| err("open the volume", e))?;
    let fd = match open_in(&root, sub) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => {
            make_dirs(&root, sub).map_err(|e| err("create", e))?;
            open_in(&root, sub).map_err(|e| err("open", e))?
        }
        Err(e) => return Err(err("open", e)),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| err("stat", e))?;
    let is_dir = FileType::from_raw_mode(st.st_mode) == FileType::Directory;
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("subPath {sub:?}: {e}"))?;
    }
    if is_dir {
        std::fs::create_dir_all(target).map_err(|e| format!("subPath {sub:?}: {e}"))?;
    } else if !target.exists() {
        std::fs::write(target, b"").map_err(|e| format!("subPath {sub:?}: {e}"))?;
    }
    let source = format!("/proc/self/fd/{}", fd.as_raw_fd());
    rustix::mount::mount_bind(source.as_str(), target).map_err(|e| err("bind", e))
}
