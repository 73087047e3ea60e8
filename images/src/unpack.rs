//! Unpacking one layer tarball (plain or gzip) into its own directory.
//!
//! Nothing in a layer may reach outside the directory: a path with `..`,
//! an entry under a symlink (an absolute one would point outward) and a
//! hardlink to anything outside refuse the whole layer. Whiteouts are kept
//! two ways: as overlayfs expects them in the directory (a 0/0 character
//! device, the `trusted.overlay.opaque` xattr; root only) and in
//! `whiteouts.json` beside it, which a flattened copy applies.

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The prefix of a whiteout's name.
const WHITEOUT: &str = ".wh.";
/// The name that makes its directory opaque.
const OPAQUE: &str = ".wh..wh..opq";

/// What a layer deletes from the layers below it.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Whiteouts {
    /// Paths (relative to the root) removed.
    pub(crate) removed: Vec<String>,
    /// Directories whose lower contents are hidden.
    pub(crate) opaque: Vec<String>,
}

/// A layer unpacked.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Unpacked {
    /// Whether the directory holds overlayfs whiteouts for every whiteout
    /// (needs root), so it can be an overlay lower directory.
    pub(crate) overlay_ready: bool,
    /// The layer's whiteouts.
    pub(crate) whiteouts: Whiteouts,
    /// Bytes of the uncompressed tarball.
    pub(crate) size: u64,
}

/// Why a layer was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UnpackError {
    /// A path that escapes the layer's root, or a link that would.
    #[error("{0}")]
    Hostile(String),
    /// Not a tarball, a truncated one, or not its diff ID.
    #[error("{0}")]
    Corrupt(String),
    /// The local disk.
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// A reader that hashes what passes through it.
struct Hashing<R> {
    inner: R,
    hash: Sha256,
    bytes: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hash.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

/// Unpacks the layer blob at `blob` into `dest` (which must exist and be
/// empty). `diff_id`, when known, is checked against the uncompressed
/// content.
pub(crate) fn unpack(
    blob: &Path,
    dest: &Path,
    diff_id: Option<&str>,
) -> Result<Unpacked, UnpackError> {
    let mut file = fs::File::open(blob)?;
    let mut magic = [0u8; 4];
    let n = read_up_to(&mut file, &mut magic)?;
    let file = io::Cursor::new(magic[..n].to_vec()).chain(file);
    let reader: Box<dyn Read> = if magic[..n].starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::GzDecoder::new(file))
    } else if magic[..n] == [0x28, 0xb5, 0x2f, 0xfd] {
        return Err(UnpackError::Corrupt(
            "zstd-compressed layers are not supported".into(),
        ));
    } else {
        Box::new(file)
    };
    let mut hashing = Hashing {
        inner: reader,
        hash: Sha256::new(),
        bytes: 0,
    };
    let mut state = State {
        dest,
        overlay_ready: true,
        whiteouts: Whiteouts::default(),
        dir_modes: Vec::new(),
        root: rustix::process::geteuid().is_root(),
    };
    {
        let mut archive = tar::Archive::new(&mut hashing);
        let entries = archive.entries().map_err(corrupt)?;
        for entry in entries {
            let mut entry = entry.map_err(corrupt)?;
            state.entry(&mut entry)?;
        }
    }
    // The tarball's padding after its last entry is part of its diff ID.
    io::copy(&mut hashing, &mut io::sink()).map_err(corrupt)?;
    for (path, mode) in state.dir_modes.iter().rev() {
        fs::set_permissions(path, fs::Permissions::from_mode(*mode))?;
    }
    let actual = format!("sha256:{}", hex::encode(hashing.hash.finalize()));
    if let Some(expected) = diff_id
        && expected != actual
    {
        return Err(UnpackError::Corrupt(format!(
            "uncompressed content is {actual}, its config says {expected}"
        )));
    }
    Ok(Unpacked {
        overlay_ready: state.overlay_ready,
        whiteouts: state.whiteouts,
        size: hashing.bytes,
    })
}

/// A tarball's bytes, uncompressed if it is gzip.
pub(crate) fn open_tarball(path: &Path) -> Result<Box<dyn Read>, UnpackError> {
    let mut file = fs::File::open(path)?;
    let mut magic = [0u8; 4];
    let n = read_up_to(&mut file, &mut magic)?;
    let file = io::Cursor::new(magic[..n].to_vec()).chain(file);
    if magic[..n].starts_with(&[0x1f, 0x8b]) {
        Ok(Box::new(flate2::read::GzDecoder::new(file)))
    } else if magic[..n] == [0x28, 0xb5, 0x2f, 0xfd] {
        Err(UnpackError::Corrupt(
            "zstd-compressed layers are not supported".into(),
        ))
    } else {
        Ok(Box::new(file))
    }
}

fn corrupt(e: io::Error) -> UnpackError {
    UnpackError::Corrupt(format!("not a valid tar archive: {e}"))
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// `path` as a relative path with no `..`; a leading `/` is dropped, as
/// Docker's archive package does.
pub(crate) fn clean(path: &Path) -> Result<PathBuf, UnpackError> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => {
                return Err(UnpackError::Hostile(format!(
                    "path {} escapes the layer's root",
                    path.display()
                )));
            }
        }
    }
    Ok(out)
}

/// Refuses `rel` when a directory on its way in `root` is a symlink: an
/// entry written through it could land anywhere.
pub(crate) fn check_ancestors(root: &Path, rel: &Path) -> Result<(), UnpackError> {
    let mut at = root.to_path_buf();
    let parents: Vec<_> = rel.components().collect();
    for part in parents.iter().take(parents.len().saturating_sub(1)) {
        at.push(part);
        match fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(UnpackError::Hostile(format!(
                    "path {} goes through the symlink {}",
                    rel.display(),
                    at.strip_prefix(root).unwrap_or(&at).display()
                )));
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Removes whatever is at `path` (not following a symlink), if anything.
pub(crate) fn remove_any(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

struct State<'a> {
    dest: &'a Path,
    overlay_ready: bool,
    whiteouts: Whiteouts,
    dir_modes: Vec<(PathBuf, u32)>,
    root: bool,
}

impl State<'_> {
    fn entry<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>) -> Result<(), UnpackError> {
        let raw = entry.path().map_err(corrupt)?.into_owned();
        let rel = clean(&raw)?;
        if rel.as_os_str().is_empty() {
            return Ok(());
        }
        check_ancestors(self.dest, &rel)?;
        let name = rel
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let parent = rel.parent().unwrap_or(Path::new("")).to_path_buf();
        if name == OPAQUE {
            return self.opaque(&parent);
        }
        if let Some(hidden) = name.strip_prefix(WHITEOUT) {
            if hidden.starts_with(WHITEOUT) {
                return Ok(());
            }
            return self.whiteout(&parent.join(hidden));
        }
        let path = self.dest.join(&rel);
        let header = entry.header();
        let mode = header.mode().map_err(corrupt)? & 0o7777;
        let owner = (header.uid().unwrap_or(0), header.gid().unwrap_or(0));
        match header.entry_type() {
            tar::EntryType::Directory => {
                if fs::symlink_metadata(&path).is_ok_and(|m| !m.is_dir()) {
                    remove_any(&path)?;
                }
                fs::create_dir_all(&path)?;
                self.chown(&path, owner)?;
                self.dir_modes.push((path, mode));
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                self.make_parent(&rel)?;
                remove_any(&path)?;
                let mut file = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&path)?;
                io::copy(entry, &mut file).map_err(corrupt)?;
                self.chown(&path, owner)?;
                fs::set_permissions(&path, fs::Permissions::from_mode(mode))?;
            }
            tar::EntryType::Symlink => {
                let target = entry.link_name().map_err(corrupt)?.ok_or_else(|| {
                    UnpackError::Corrupt(format!("symlink {} has no target", rel.display()))
                })?;
                self.make_parent(&rel)?;
                remove_any(&path)?;
                std::os::unix::fs::symlink(&target, &path)?;
                self.chown(&path, owner)?;
            }
            tar::EntryType::Link => {
                let target = entry.link_name().map_err(corrupt)?.ok_or_else(|| {
                    UnpackError::Corrupt(format!("hardlink {} has no target", rel.display()))
                })?;
                let target = clean(&target).map_err(|_| {
                    UnpackError::Hostile(format!(
                        "hardlink {} points outside the layer's root",
                        rel.display()
                    ))
                })?;
                check_ancestors(self.dest, &target)?;
                let source = self.dest.join(&target);
                if fs::symlink_metadata(&source).is_err() {
                    return Err(UnpackError::Hostile(format!(
                        "hardlink {} points to {}, which is not in the layer",
                        rel.display(),
                        target.display()
                    )));
                }
                self.make_parent(&rel)?;
                remove_any(&path)?;
                fs::hard_link(&source, &path)?;
            }
            other => {
                // Devices and FIFOs: a container gets its /dev from the runtime.
                tracing::debug!(path = %rel.display(), kind = ?other, "skipping special file in layer");
            }
        }
        Ok(())
    }

    fn make_parent(&self, rel: &Path) -> io::Result<()> {
        match rel.parent() {
            Some(p) if !p.as_os_str().is_empty() => fs::create_dir_all(self.dest.join(p)),
            _ => Ok(()),
        }
    }

    fn chown(&self, path: &Path, (uid, gid): (u64, u64)) -> io::Result<()> {
        if !self.root {
            return Ok(());
        }
        let (uid, gid) = (u32::try_from(uid).ok(), u32::try_from(gid).ok());
        std::os::unix::fs::lchown(path, uid, gid)
    }

    fn opaque(&mut self, dir: &Path) -> Result<(), UnpackError> {
        self.whiteouts
            .opaque
            .push(dir.to_string_lossy().into_owned());
        let path = self.dest.join(dir);
        fs::create_dir_all(&path)?;
        if self.overlay_ready
            && rustix::fs::lsetxattr(
                &path,
                "trusted.overlay.opaque",
                b"y",
                rustix::fs::XattrFlags::empty(),
            )
            .is_err()
        {
            self.overlay_ready = false;
        }
        Ok(())
    }

    fn whiteout(&mut self, rel: &Path) -> Result<(), UnpackError> {
        let rel = clean(rel)?;
        self.whiteouts
            .removed
            .push(rel.to_string_lossy().into_owned());
        if !self.overlay_ready {
            return Ok(());
        }
        self.make_parent(&rel)?;
        let path = self.dest.join(&rel);
        remove_any(&path)?;
        let made = rustix::fs::mknodat(
            rustix::fs::CWD,
            &path,
            rustix::fs::FileType::CharacterDevice,
            rustix::fs::Mode::empty(),
            rustix::fs::makedev(0, 0),
        );
        if made.is_err() {
            self.overlay_ready = false;
        }
        Ok(())
    }
}

/// Whether `meta` is an overlayfs whiteout (a 0/0 character device).
pub(crate) fn is_overlay_whiteout(meta: &fs::Metadata) -> bool {
    use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
    meta.file_type().is_char_device() && meta.rdev() == 0
}
