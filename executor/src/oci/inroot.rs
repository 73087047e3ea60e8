//! Paths resolved inside a root directory, never out of it.
//!
//! An image or a volume may hold symlinks (`/data -> /etc`, `a -> ../..`).
//! Joining such a path onto the root and handing it to `mkdir`, `open` or
//! `mount` follows them onto the host. Everything here resolves with
//! `openat2(RESOLVE_IN_ROOT)`: an absolute symlink or `..` stops at the
//! root, as if the root were `/` (runc's securejoin does the same). Callers
//! mount onto `/proc/self/fd/N` of the opened descriptor, so the path cannot
//! be swapped between the check and the mount.

use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::Path;

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Opens `root` for resolving paths in it.
pub(crate) fn open_root(root: &Path) -> rustix::io::Result<OwnedFd> {
    rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// An `O_PATH` descriptor of `path` inside `root`.
pub(crate) fn open_in(root: &OwnedFd, path: &str) -> rustix::io::Result<OwnedFd> {
    let path = relative(path);
    rustix::fs::openat2(
        root,
        if path.is_empty() { "." } else { path },
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
    )
}

/// Creates every directory of `path` inside `root` (mode 0755), as
/// `mkdir -p` would in a chroot.
pub(crate) fn make_dirs(root: &OwnedFd, path: &str) -> rustix::io::Result<()> {
    let mut done = String::new();
    for part in relative(path)
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
    {
        let parent = open_dir_in(root, &done)?;
        match rustix::fs::mkdirat(&parent, part, Mode::from_raw_mode(0o755)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(e),
        }
        if !done.is_empty() {
            done.push('/');
        }
        done.push_str(part);
    }
    Ok(())
}

/// `path` inside `root`, created if missing (a directory, or an empty file
/// when `file`), as an `O_PATH` descriptor to mount onto.
pub(crate) fn ensure_in(root: &OwnedFd, path: &str, file: bool) -> rustix::io::Result<OwnedFd> {
    match open_in(root, path) {
        Err(Errno::NOENT) => {}
        other => return other,
    }
    let path = relative(path).trim_end_matches('/');
    if !file {
        make_dirs(root, path)?;
        return open_in(root, path);
    }
    let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
    make_dirs(root, parent)?;
    let dir = open_dir_in(root, parent)?;
    match rustix::fs::openat(
        &dir,
        name,
        OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    ) {
        Ok(_) | Err(Errno::EXIST) => {}
        Err(e) => return Err(e),
    }
    open_in(root, path)
}

/// The path the kernel resolves to what `fd` was opened on.
pub(crate) fn proc_path(fd: &OwnedFd) -> String {
    format!("/proc/self/fd/{}", fd.as_raw_fd())
}

fn open_dir_in(root: &OwnedFd, path: &str) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat2(
        root,
        if path.is_empty() { "." } else { path },
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
    )
}

fn relative(path: &str) -> &str {
    path.trim_start_matches('/')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn symlinks_in_the_root_cannot_lead_out_of_it() {
        let host = tempfile::tempdir().unwrap();
        let outside = host.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        let rootfs = host.path().join("rootfs");
        std::fs::create_dir(&rootfs).unwrap();
        // An image's absolute symlink naming a host directory, and a
        // relative one that climbs out of the root without RESOLVE_IN_ROOT.
        std::os::unix::fs::symlink(&outside, rootfs.join("data")).unwrap();
        std::os::unix::fs::symlink("../outside", rootfs.join("up")).unwrap();
        // What they name inside the root, as in a chroot.
        let inside_abs = rootfs.join(outside.strip_prefix("/").unwrap());
        std::fs::create_dir_all(&inside_abs).unwrap();
        std::fs::create_dir(rootfs.join("outside")).unwrap();
        let root = open_root(&rootfs).unwrap();

        ensure_in(&root, "/data/volume", false).unwrap();
        ensure_in(&root, "/up/token", true).unwrap();

        assert_eq!(
            std::fs::read_dir(&outside).unwrap().count(),
            0,
            "nothing may be created through a symlink onto the host"
        );
        assert!(inside_abs.join("volume").is_dir());
        assert!(rootfs.join("outside/token").is_file());
    }

    #[test]
    fn existing_paths_are_opened_as_they_are() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        std::fs::write(dir.path().join("etc/hosts"), b"x").unwrap();
        let root = open_root(dir.path()).unwrap();
        let fd = ensure_in(&root, "/etc/hosts", true).unwrap();
        let st = rustix::fs::fstat(&fd).unwrap();
        assert_eq!(st.st_size, 1);
        assert!(proc_path(&fd).starts_with("/proc/self/fd/"));
    }
}
