//! `emptyDir` on the agent: a directory every container may write
//! (0777, as kubelet makes it), a tmpfs for `medium: Memory` (and for
//! secret and projected volumes), and its usage for `sizeLimit`.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

/// Mounts a fresh tmpfs at `dir` (nosuid, nodev). No `size`: usage past
/// `sizeLimit` evicts the pod, as in kubelet, and the memory is charged to
/// the writing container's cgroup.
pub(super) fn mount_tmpfs(dir: &Path) -> Result<(), String> {
    let data = c"mode=0755";
    rustix::mount::mount(
        "tmpfs",
        dir,
        "tmpfs",
        rustix::mount::MountFlags::NOSUID | rustix::mount::MountFlags::NODEV,
        Some(data),
    )
    .map_err(|e| format!("cannot mount a tmpfs at {}: {e}", dir.display()))
}

/// Lets every container write, whatever its user.
pub(super) fn open_up(dir: &Path) -> Result<(), String> {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))
        .map_err(|e| format!("chmod {}: {e}", dir.display()))
}

/// Bytes allocated below `dir` (as `du`: blocks, symlinks not followed).
pub(super) fn usage(dir: &Path) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(meta) = e.path().symlink_metadata() else {
                continue;
            };
            total = total.saturating_add(meta.blocks().saturating_mul(512));
            if meta.is_dir() {
                stack.push(e.path());
            }
        }
    }
    total
}

/// Whether anything is mounted at or below `dir` (from
/// `/proc/self/mountinfo`), so that removing it could reach elsewhere.
pub(super) fn mounted_below(dir: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return true;
    };
    parse_mount_points(&info)
        .iter()
        .any(|mp| mp.starts_with(dir))
}

/// Every mount point in `/proc/self/mountinfo` (none if it cannot be read).
pub(super) fn mount_points() -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .map(|info| parse_mount_points(&info))
        .unwrap_or_default()
}

fn parse_mount_points(info: &str) -> Vec<PathBuf> {
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|mp| PathBuf::from(unescape(mp)))
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn usage_counts_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let before = usage(dir.path());
        std::fs::write(dir.path().join("f"), vec![1u8; 256 * 1024]).unwrap();
        assert!(usage(dir.path()) >= before + 256 * 1024);
        assert!(!mounted_below(dir.path()));
    }
}
