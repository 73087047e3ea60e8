//! `subPath`: a part of a volume, resolved inside the volume (symlinks
//! cannot lead out: `openat2` with `RESOLVE_IN_ROOT`) and bind-mounted from
//! the opened file descriptor to a stable place under the pod's directory,
//! as kubelet does, so that a container cannot swap a path component for a
//! symlink between the check and the mount.

use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags};

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

fn open_in(root: &OwnedFd, sub: &str) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat2(
        root,
        sub,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
    )
}

fn make_dirs(root: &OwnedFd, sub: &str) -> rustix::io::Result<()> {
    let mut done = String::new();
    for part in sub.split('/').filter(|p| !p.is_empty() && *p != ".") {
        let parent = if done.is_empty() {
            rustix::fs::openat(
                root,
                ".",
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )?
        } else {
            rustix::fs::openat2(
                root,
                done.as_str(),
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
                ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
            )?
        };
        match rustix::fs::mkdirat(&parent, part, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e),
        }
        if !done.is_empty() {
            done.push('/');
        }
        done.push_str(part);
    }
    Ok(())
}
