//! A container's root filesystem from an image's layers: an overlay mount
//! where the kernel allows it (root, every layer's whiteouts in overlay
//! form), else a flattened copy with the whiteouts applied.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use rustix::mount::{MountFlags, UnmountFlags};

use crate::store::{Image, unpacked};
use crate::unpack::{Unpacked, is_overlay_whiteout, remove_any};

/// An assembled root filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rootfs {
    /// The directory to use as the OCI bundle's `root.path`.
    pub path: PathBuf,
    /// Whether it is an overlay mount (else a copy).
    pub overlay: bool,
}

/// Why a root filesystem could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RootfsError {
    /// A layer directory without its metadata (removed by gc, or never unpacked).
    #[error("layer {0} is not in the image store")]
    MissingLayer(PathBuf),
    /// The copy or the mount failed.
    #[error("cannot assemble the root filesystem at {path}: {source}")]
    Io {
        /// Where.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> RootfsError + '_ {
    move |source| RootfsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Builds `container_dir/rootfs` from `image`. With an overlay the
/// writable layer is `container_dir/upper` (and `work`); `read_only` mounts
/// it read-only. A flattened copy is writable whatever `read_only` says:
/// the OCI runtime's `root.readonly` makes it read-only for the container.
///
/// # Errors
///
/// When a layer is missing or the copy fails.
pub fn assemble(
    image: &Image,
    container_dir: &Path,
    read_only: bool,
) -> Result<Rootfs, RootfsError> {
    build(image, container_dir, read_only, true)
}

/// [`assemble`] as a flattened copy, never an overlay (for a runtime that
/// cannot take a mounted rootfs, and to compare the two).
///
/// # Errors
///
/// As [`assemble`].
pub fn assemble_copy(image: &Image, container_dir: &Path) -> Result<Rootfs, RootfsError> {
    build(image, container_dir, false, false)
}

fn build(
    image: &Image,
    container_dir: &Path,
    read_only: bool,
    overlay: bool,
) -> Result<Rootfs, RootfsError> {
    let metas = image
        .layers
        .iter()
        .map(|fs_dir| {
            let dir = fs_dir.parent().unwrap_or(fs_dir);
            unpacked(dir).ok_or_else(|| RootfsError::MissingLayer(fs_dir.clone()))
        })
        .collect::<Result<Vec<Unpacked>, _>>()?;
    let path = container_dir.join("rootfs");
    fs::create_dir_all(&path).map_err(io_at(&path))?;
    if overlay && metas.iter().all(|m| m.overlay_ready) && !image.layers.is_empty() {
        match mount_overlay(image, container_dir, &path, read_only) {
            Ok(()) => {
                return Ok(Rootfs {
                    path,
                    overlay: true,
                });
            }
            Err(e) => {
                tracing::info!(error = %e, "overlay mount refused; copying the layers instead")
            }
        }
    }
    for (layer, meta) in image.layers.iter().zip(&metas) {
        apply_whiteouts(&path, meta).map_err(io_at(&path))?;
        copy_tree(layer, &path).map_err(io_at(layer))?;
    }
    Ok(Rootfs {
        path,
        overlay: false,
    })
}

impl Rootfs {
    /// Unmounts an overlay (lazily, so a process still inside does not
    /// keep it); a copy needs nothing. The directory stays for the caller
    /// to remove.
    ///
    /// # Errors
    ///
    /// When the unmount fails for another reason than not being mounted.
    pub fn release(&self) -> Result<(), RootfsError> {
        if !self.overlay {
            return Ok(());
        }
        match rustix::mount::unmount(&self.path, UnmountFlags::DETACH) {
            Ok(()) | Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(RootfsError::Io {
                path: self.path.clone(),
                source: e.into(),
            }),
        }
    }
}

fn mount_overlay(
    image: &Image,
    container_dir: &Path,
    target: &Path,
    read_only: bool,
) -> io::Result<()> {
    let upper = container_dir.join("upper");
    let work = container_dir.join("work");
    fs::create_dir_all(&upper)?;
    fs::create_dir_all(&work)?;
    // overlayfs lists the top layer first.
    let lower: Vec<String> = image
        .layers
        .iter()
        .rev()
        .map(|l| l.display().to_string())
        .collect();
    let options = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.join(":"),
        upper.display(),
        work.display()
    );
    let data = std::ffi::CString::new(options).map_err(io::Error::other)?;
    let flags = if read_only {
        MountFlags::RDONLY
    } else {
        MountFlags::empty()
    };
    rustix::mount::mount("overlay", target, "overlay", flags, data.as_c_str())?;
    Ok(())
}

/// Applies a layer's deletions to what the layers below left in `root`.
fn apply_whiteouts(root: &Path, meta: &Unpacked) -> io::Result<()> {
    for removed in &meta.whiteouts.removed {
        if let Some(path) = real_path(root, Path::new(removed)) {
            remove_any(&path)?;
        }
    }
    for dir in &meta.whiteouts.opaque {
        if let Some(path) = real_path(root, Path::new(dir))
            && fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir())
        {
            for entry in fs::read_dir(&path)? {
                remove_any(&entry?.path())?;
            }
        }
    }
    Ok(())
}

/// `root/rel` when every directory on the way is a real directory (no
/// symlink to follow outward).
fn real_path(root: &Path, rel: &Path) -> Option<PathBuf> {
    let mut at = root.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        if i + 1 < parts.len() && !fs::symlink_metadata(&at).ok()?.is_dir() {
            return None;
        }
    }
    Some(at)
}

/// Copies the layer tree `src` over `dst` as overlayfs would merge it: a
/// directory over a non-directory replaces it, anything else replaces what
/// was there. Nothing is followed: every directory written into is a real
/// one this copy made or found.
fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    let root = rustix::process::geteuid().is_root();
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let meta = fs::symlink_metadata(&from)?;
        let kind = meta.file_type();
        if is_overlay_whiteout(&meta) {
            continue;
        }
        if kind.is_dir() {
            if !fs::symlink_metadata(&to).is_ok_and(|m| m.is_dir()) {
                remove_any(&to)?;
                fs::create_dir(&to)?;
            }
            copy_tree(&from, &to)?;
        } else if kind.is_symlink() {
            remove_any(&to)?;
            std::os::unix::fs::symlink(fs::read_link(&from)?, &to)?;
        } else if kind.is_file() {
            remove_any(&to)?;
            fs::copy(&from, &to)?;
        } else {
            continue;
        }
        if root {
            std::os::unix::fs::lchown(&to, Some(meta.uid()), Some(meta.gid()))?;
        }
        if !kind.is_symlink() {
            fs::set_permissions(&to, fs::Permissions::from_mode(meta.mode() & 0o7777))?;
        }
    }
    Ok(())
}
