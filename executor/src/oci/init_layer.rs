//! An image's init layer, as Docker makes one: a small read-only layer
//! laid over the image's own, holding the mount points every container
//! needs and the image may lack (`/etc/hosts`, `/etc/hostname`,
//! `/etc/resolv.conf`, `/dev`, `/proc`, `/sys`), so no container start
//! creates them in its writable layer. Each such creation cost a start a
//! copy-up of `/etc` and new inodes on the agent's disk, its costliest
//! step.
//!
//! Made once per image under the runtime's `<root>-init`, atomically (in a
//! temporary directory, then renamed). Its files are empty: every
//! container mounts the pod's own over them. Its `/etc` has the mode and
//! owner of the image's, since the uppermost layer's directory is the one
//! a container sees. An image whose `/etc` is not a directory gets no init
//! layer (the runtime then makes what it needs, as before).
//!
//! Collected with the images ([`super::gc`]): a layer goes once the store
//! no longer has its image and no live pod's container runs it
//! ([`collect`]). A layer is only ever made or removed whole: the
//! executor's image gc and its container starts exclude each other.

use std::collections::HashSet;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

/// The mount points the layer holds: path, and whether a file.
const MOUNT_POINTS: &[(&str, bool)] = &[
    ("etc/hosts", true),
    ("etc/hostname", true),
    ("etc/resolv.conf", true),
    ("dev", false),
    ("proc", false),
    ("sys", false),
];

/// What the uppermost of `layers` (lowest first) that has `path` has there.
fn topmost(layers: &[PathBuf], path: &str) -> Option<std::fs::Metadata> {
    let m = layers
        .iter()
        .rev()
        .find_map(|l| std::fs::symlink_metadata(l.join(path)).ok())?;
    // overlayfs' whiteout (a 0/0 character device): deleted by that layer.
    use std::os::unix::fs::FileTypeExt as _;
    let whiteout = m.file_type().is_char_device() && m.rdev() == 0;
    (!whiteout).then_some(m)
}

/// The directory name of `image_id`'s layer.
fn dir_name(image_id: &str) -> String {
    image_id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The image's init layer, made if it does not exist yet; `None` when the
/// image needs none or cannot have one.
pub(crate) fn ensure(dir: &Path, image_id: &str, layers: &[PathBuf]) -> Option<PathBuf> {
    let name = dir_name(image_id);
    let at = dir.join(&name);
    if at.is_dir() {
        return Some(at);
    }
    let etc = topmost(layers, "etc");
    if etc.as_ref().is_some_and(|m| !m.is_dir()) {
        return None;
    }
    let missing: Vec<(&str, bool)> = MOUNT_POINTS
        .iter()
        .copied()
        .filter(|(p, _)| topmost(layers, p).is_none())
        .collect();
    if missing.is_empty() {
        return None;
    }
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    let made = make(&tmp, etc.as_ref(), &missing).and_then(|()| std::fs::rename(&tmp, &at));
    match made {
        Ok(()) => Some(at),
        // Another start made it first.
        Err(_) if at.is_dir() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Some(at)
        }
        Err(e) => {
            tracing::warn!(image = %image_id, error = %e, "cannot make the image's init layer");
            let _ = std::fs::remove_dir_all(&tmp);
            None
        }
    }
}

/// Removes from `dir` the layers of images not in `keep` (image ids), and
/// what a start cut short by its process' death left half made; returns
/// the layers removed. The caller keeps starts out meanwhile.
pub(crate) fn collect(dir: &Path, keep: &HashSet<String>) -> Vec<PathBuf> {
    let kept: HashSet<String> = keep.iter().map(|id| dir_name(id)).collect();
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let stale = match name.strip_prefix('.') {
            // `.<layer>.<pid>`, a layer being made: only a dead maker's.
            Some(tmp) => tmp
                .rsplit_once('.')
                .and_then(|(_, pid)| pid.parse::<u32>().ok())
                .is_none_or(|pid| {
                    pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()
                }),
            None => !kept.contains(&name),
        };
        if !stale {
            continue;
        }
        let path = entry.path();
        match std::fs::remove_dir_all(&path) {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(layer = %path.display(), error = %e, "cannot remove an init layer")
            }
        }
    }
    removed
}

fn make(
    tmp: &Path,
    etc: Option<&std::fs::Metadata>,
    missing: &[(&str, bool)],
) -> std::io::Result<()> {
    std::fs::create_dir_all(tmp)?;
    let etc_dir = tmp.join("etc");
    std::fs::create_dir(&etc_dir)?;
    match etc {
        Some(m) => {
            std::fs::set_permissions(&etc_dir, std::fs::Permissions::from_mode(m.mode() & 0o7777))?;
            std::os::unix::fs::chown(&etc_dir, Some(m.uid()), Some(m.gid()))?;
        }
        None => std::fs::set_permissions(&etc_dir, std::fs::Permissions::from_mode(0o755))?,
    }
    for (path, file) in missing {
        let p = tmp.join(path);
        if *file {
            std::fs::write(&p, b"")?;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644))?;
        } else {
            std::fs::create_dir(&p)?;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_layer_holds_what_the_image_lacks_under_the_images_own_etc() {
        let tmp = tempfile::tempdir().unwrap();
        let (base, top) = (tmp.path().join("l0"), tmp.path().join("l1"));
        std::fs::create_dir_all(base.join("etc")).unwrap();
        std::fs::set_permissions(base.join("etc"), std::fs::Permissions::from_mode(0o750)).unwrap();
        std::fs::write(base.join("etc/hosts"), "image's").unwrap();
        std::fs::create_dir_all(base.join("proc")).unwrap();
        std::fs::create_dir_all(&top).unwrap();
        std::fs::write(top.join("sys"), "").unwrap();
        let layers = [base.clone(), top.clone()];
        let dir = tmp.path().join("init");
        let layer = ensure(&dir, "r@sha256:ab", &layers).unwrap();
        assert_eq!(layer, dir.join("r_sha256_ab"));
        let mode = std::fs::metadata(layer.join("etc")).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o750, "the image's /etc mode");
        assert!(!layer.join("etc/hosts").exists(), "the image has one");
        assert!(layer.join("etc/hostname").is_file());
        assert!(layer.join("etc/resolv.conf").is_file());
        assert!(layer.join("dev").is_dir());
        assert!(!layer.join("proc").exists() && !layer.join("sys").exists());
        // Made once: found again as it is.
        assert_eq!(ensure(&dir, "r@sha256:ab", &layers), Some(layer));
        // An /etc that is not a directory gets no layer.
        std::os::unix::fs::symlink("/x", top.join("etc")).unwrap();
        assert_eq!(ensure(&dir, "other", &layers), None);
    }

    #[test]
    fn collect_removes_the_layers_of_images_not_kept_and_dead_starts_leftovers() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().join("l0");
        std::fs::create_dir_all(base.join("etc")).unwrap();
        let dir = tmp.path().join("init");
        let kept = ensure(&dir, "r/kept@sha256:aa", std::slice::from_ref(&base)).unwrap();
        let gone = ensure(&dir, "r/gone@sha256:bb", std::slice::from_ref(&base)).unwrap();
        // A start of this process making one, and one of a process long gone.
        let making = dir.join(format!(".r_new.{}", std::process::id()));
        let dead = dir.join(".r_old.4294967295");
        std::fs::create_dir_all(making.join("etc")).unwrap();
        std::fs::create_dir_all(dead.join("etc")).unwrap();

        let keep: HashSet<String> = ["r/kept@sha256:aa".to_owned()].into();
        let mut removed = collect(&dir, &keep);
        removed.sort();
        let mut expected = vec![dead.clone(), gone.clone()];
        expected.sort();
        assert_eq!(removed, expected);
        assert!(
            kept.join("etc/hosts").is_file(),
            "the kept image's layer stays whole"
        );
        assert!(!gone.exists() && !dead.exists());
        assert!(making.is_dir(), "a layer being made is not touched");
        // Nothing to do: nothing more goes.
        assert!(collect(&dir, &keep).is_empty());
        assert!(collect(&tmp.path().join("absent"), &keep).is_empty());
    }
}
