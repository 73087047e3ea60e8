//! `fsGroup`, as kubelet's `SetVolumeOwnership` applies it to the volumes
//! that support ownership management (emptyDir, configMap, secret,
//! downwardAPI, projected; never hostPath): every file and directory gets
//! group `fsGroup` (`lchown`, symlinks not followed), files gain group
//! read (and write, for a writable volume) on top of their mode,
//! directories group read/exec (and write) plus setgid so what containers
//! create inherits the group. `fsGroupChangePolicy: OnRootMismatch` skips
//! the walk when the volume's root already has the group and those bits.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;

use k8s_openapi::api::core::v1::PodSecurityContext;

/// kubelet's masks: read-only volumes get `r--` for the group, writable
/// ones `rw-`; directories add `x` and setgid.
const RO_MASK: u32 = 0o440;
const RW_MASK: u32 = 0o660;
const EXEC_MASK: u32 = 0o110;
const SETGID: u32 = 0o2000;

/// The pod's `fsGroup` and its change policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsGroup {
    /// The group every volume file is given.
    pub gid: u32,
    /// `fsGroupChangePolicy: OnRootMismatch`.
    pub on_root_mismatch: bool,
}

impl FsGroup {
    /// The pod's `fsGroup`, if it sets one (a negative one is refused by
    /// validation and ignored here).
    pub fn of(sc: Option<&PodSecurityContext>) -> Option<FsGroup> {
        let sc = sc?;
        let gid = u32::try_from(sc.fs_group?).ok()?;
        Some(FsGroup {
            gid,
            on_root_mismatch: sc.fs_group_change_policy.as_deref() == Some("OnRootMismatch"),
        })
    }

    /// Gives everything below `dir` (itself included) to the group.
    pub fn apply(&self, dir: &Path, read_only: bool) -> Result<(), String> {
        let mask = if read_only { RO_MASK } else { RW_MASK };
        if self.on_root_mismatch && !self.root_mismatch(dir, mask)? {
            return Ok(());
        }
        let mut stack = vec![dir.to_path_buf()];
        while let Some(path) = stack.pop() {
            let meta = std::fs::symlink_metadata(&path)
                .map_err(|e| format!("fsGroup: {}: {e}", path.display()))?;
            rustix::fs::chownat(
                rustix::fs::CWD,
                &path,
                None,
                Some(rustix::fs::Gid::from_raw(self.gid)),
                rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(|e| format!("fsGroup: chown {}: {e}", path.display()))?;
            if meta.file_type().is_symlink() {
                continue;
            }
            let mut bits = meta.mode() & 0o7777 | mask;
            if meta.is_dir() {
                bits |= SETGID | EXEC_MASK;
                for entry in std::fs::read_dir(&path)
                    .map_err(|e| format!("fsGroup: {}: {e}", path.display()))?
                {
                    let entry = entry.map_err(|e| format!("fsGroup: {}: {e}", path.display()))?;
                    stack.push(entry.path());
                }
            }
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(bits))
                .map_err(|e| format!("fsGroup: chmod {}: {e}", path.display()))?;
        }
        Ok(())
    }

    /// kubelet's `requiresPermissionChange`: the root lacks the group, the
    /// setgid bit or the mask's bits.
    fn root_mismatch(&self, dir: &Path, mask: u32) -> Result<bool, String> {
        let meta =
            std::fs::metadata(dir).map_err(|e| format!("fsGroup: {}: {e}", dir.display()))?;
        let want = mask | SETGID | EXEC_MASK;
        Ok(meta.gid() != self.gid || meta.mode() & want != want)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn files_gain_the_group_and_its_bits_and_dirs_setgid() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("v");
        std::fs::create_dir_all(d.join("..data")).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        let f = d.join("..data/pw");
        std::fs::write(&f, "x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o400)).unwrap();
        std::os::unix::fs::symlink("..data/pw", d.join("pw")).unwrap();
        // An unprivileged test can only give files its own groups.
        let gid = rustix::process::getegid().as_raw();
        let g = FsGroup {
            gid,
            on_root_mismatch: false,
        };
        g.apply(&d, true).unwrap();
        assert_eq!(mode(&f), 0o440);
        assert_eq!(mode(&d), 0o2755);
        assert_eq!(std::fs::metadata(&f).unwrap().gid(), gid);
        g.apply(&d, false).unwrap();
        assert_eq!(mode(&f), 0o660);
        assert_eq!(mode(&d), 0o2775);
    }

    #[test]
    fn on_root_mismatch_skips_a_volume_whose_root_is_right() {
        let dir = tempfile::tempdir().unwrap();
        let gid = rustix::process::getegid().as_raw();
        let g = FsGroup {
            gid,
            on_root_mismatch: true,
        };
        g.apply(dir.path(), false).unwrap();
        let f = dir.path().join("late");
        std::fs::write(&f, "x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        g.apply(dir.path(), false).unwrap();
        assert_eq!(mode(&f), 0o600, "the root matched: no walk");
        let always = FsGroup {
            on_root_mismatch: false,
            ..g
        };
        always.apply(dir.path(), false).unwrap();
        assert_eq!(mode(&f), 0o660);
    }

    #[test]
    fn the_pods_fs_group_and_policy_are_read() {
        let sc = PodSecurityContext {
            fs_group: Some(2000),
            fs_group_change_policy: Some("OnRootMismatch".into()),
            ..Default::default()
        };
        assert_eq!(
            FsGroup::of(Some(&sc)),
            Some(FsGroup {
                gid: 2000,
                on_root_mismatch: true
            })
        );
        assert_eq!(FsGroup::of(None), None);
        assert_eq!(FsGroup::of(Some(&PodSecurityContext::default())), None);
    }
}
