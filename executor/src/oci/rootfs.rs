//! A container's root filesystem and where its bundle lives.
//!
//! The OCI bundle (`config.json`, the pid file, the `rootfs` mount point)
//! is made in the pod's sandbox directory, a tmpfs where the executor may
//! mount one ([`super::sandbox`]): those files cost nothing on the agent's
//! disk, where each new inode was a start's costliest step. The writable
//! layer an overlay needs (`upper`, `work`) must be on a disk, so it is
//! made in the container's own directory, and the bundle names it with
//! the symlinks `upper` and `work`: whoever removes a bundle (this
//! executor, or the next one cleaning up after it) finds and removes its
//! writable layer too.

use std::path::{Path, PathBuf};

/// The paths of one container run.
#[derive(Debug, Clone)]
pub(crate) struct RunDirs {
    /// The OCI bundle.
    pub(crate) bundle: PathBuf,
    /// The overlay's mount point, in the bundle.
    pub(crate) rootfs: PathBuf,
    /// The writable layer and the overlay's work directory.
    upper: PathBuf,
    work: PathBuf,
}

impl RunDirs {
    /// Container `id`'s bundle in the pod's `sandbox` directory, its
    /// writable layer in the container's `dir`.
    pub(crate) fn new(sandbox: &Path, dir: &Path, id: &str) -> RunDirs {
        let bundle = sandbox.join(format!(".bundle-{id}"));
        RunDirs {
            rootfs: bundle.join("rootfs"),
            bundle,
            upper: dir.join(format!(".upper-{id}")),
            work: dir.join(format!(".work-{id}")),
        }
    }
}

/// Mounts the image's layers (lowest first) as an overlay at the bundle's
/// `rootfs`, under its `init` layer ([`super::init_layer`]), with a fresh
/// writable layer unless the root filesystem is read-only.
pub(crate) fn assemble(
    layers: &[PathBuf],
    init: Option<&Path>,
    dirs: &RunDirs,
    read_only: bool,
) -> Result<(), String> {
    if layers.is_empty() {
        return Err("the image has no layers".into());
    }
    let mkdir = |d: &Path| {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))
    };
    mkdir(&dirs.rootfs)?;
    let lower: Vec<String> = init
        .into_iter()
        .chain(layers.iter().rev().map(PathBuf::as_path))
        .map(|l| l.display().to_string())
        .collect();
    // overlayfs takes two lower layers and no upper as a read-only mount;
    // a one-layer image keeps its upper, where the runtime may make the
    // mount points of volumes before it remounts the root read-only.
    let data = if read_only && layers.len() > 1 {
        format!("lowerdir={}", lower.join(":"))
    } else {
        for (link, target) in [("upper", &dirs.upper), ("work", &dirs.work)] {
            mkdir(target)?;
            std::os::unix::fs::symlink(target, dirs.bundle.join(link))
                .map_err(|e| format!("cannot link {link} in {}: {e}", dirs.bundle.display()))?;
        }
        format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.join(":"),
            dirs.upper.display(),
            dirs.work.display()
        )
    };
    // Without root the mount is made in the executor's own user and mount
    // namespace, by its holder ([`super::rootless_ns`]), never on the host.
    if super::rootless_ns::active() {
        return super::rootless_ns::mount_overlay(&dirs.rootfs, &data);
    }
    mount_overlay_here(&dirs.rootfs, &data)
}

/// Mounts an overlay with `data` at `target`, in this mount namespace.
pub(crate) fn mount_overlay_here(target: &Path, data: &str) -> Result<(), String> {
    let data = std::ffi::CString::new(data).map_err(|e| e.to_string())?;
    rustix::mount::mount(
        "overlay",
        target,
        "overlay",
        rustix::mount::MountFlags::empty(),
        Some(data.as_c_str()),
    )
    .map_err(|e| {
        format!(
            "cannot mount the image's root filesystem (overlay) at {}: {e}",
            target.display()
        )
    })
}

/// Unmounts a container's root filesystem and removes its bundle and the
/// writable layer the bundle links to (without root, in the holder, which
/// as root of the executor's namespace may remove what containers wrote
/// there as any of its users).
pub(crate) fn release(bundle: &Path) {
    if super::rootless_ns::active() {
        if let Err(e) = super::rootless_ns::release(bundle) {
            tracing::warn!(bundle = %bundle.display(), error = %e, "cannot release a container's root filesystem");
        }
        return;
    }
    release_here(bundle);
}

/// [`release`] in this mount namespace.
pub(crate) fn release_here(bundle: &Path) {
    let _ = rustix::mount::unmount(bundle.join("rootfs"), rustix::mount::UnmountFlags::DETACH);
    for link in ["upper", "work"] {
        // Only a symlink this module made: a directory of that name (a
        // bundle laid out before) goes with the bundle below.
        if let Ok(target) = std::fs::read_link(bundle.join(link)) {
            let _ = std::fs::remove_dir_all(target);
        }
    }
    let _ = std::fs::remove_dir_all(bundle);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_bundle_goes_with_the_writable_layer_it_links_to() {
        let tmp = tempfile::tempdir().unwrap();
        let (sandbox, dir) = (tmp.path().join("sandbox"), tmp.path().join("c"));
        std::fs::create_dir_all(&sandbox).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        let dirs = RunDirs::new(&sandbox, &dir, "c1");
        // No layers: refused before anything is made.
        assert!(assemble(&[], None, &dirs, false).is_err());
        assert!(!dirs.bundle.exists());
        std::fs::create_dir_all(&dirs.rootfs).unwrap();
        for (link, target) in [("upper", &dirs.upper), ("work", &dirs.work)] {
            std::fs::create_dir_all(target.join("x")).unwrap();
            std::os::unix::fs::symlink(target, dirs.bundle.join(link)).unwrap();
        }
        release(&dirs.bundle);
        assert!(!dirs.bundle.exists());
        assert!(!dirs.upper.exists() && !dirs.work.exists());
        assert!(dir.exists(), "the container's directory stays");
    }
}
