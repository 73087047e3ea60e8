//! Mounts an executor left under a temporary work directory: its pods'
//! overlays and namespace files stay mounted when it is killed before it
//! could undo them, and a mounted directory cannot be removed. An agent that
//! removes its work directory unmounts what is under it first, as Mesos'
//! filesystem isolator unmounts a sandbox's mounts before it is collected.

use std::path::{Path, PathBuf};

/// Lazily unmounts every mount point at or under `dir`, deepest first, in
/// this process' mount namespace; returns how many were detached. Without
/// the privilege to unmount there was nothing to undo (mounting needs it
/// too), so failures are only logged.
pub(crate) fn unmount_under(dir: &Path) -> usize {
    let Ok(dir) = dir.canonicalize() else {
        return 0;
    };
    let Ok(table) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return 0;
    };
    let mut points: Vec<PathBuf> = table
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape(p)))
        .filter(|p| p.starts_with(&dir))
        .collect();
    // Children before parents; a path mounted twice is detached twice.
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    let mut detached = 0;
    for p in points {
        match rustix::mount::unmount(&p, rustix::mount::UnmountFlags::DETACH) {
            Ok(()) => detached += 1,
            Err(e) => tracing::debug!(path = %p.display(), error = %e, "cannot unmount"),
        }
    }
    if detached > 0 {
        tracing::info!(count = detached, dir = %dir.display(), "unmounted what executors left");
    }
    detached
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/tmp/a\040b\011c\134d"), "/tmp/a b\tc\\d");
        assert_eq!(unescape(r"/plain/path"), "/plain/path");
        assert_eq!(unescape(r"/bad\9x\04"), r"/bad\9x\04");
    }

    #[test]
    fn mounts_under_a_directory_are_detached_children_first() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: mounting a tmpfs needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let outer = dir.path().join("outer");
        let inner = outer.join("inner");
        std::fs::create_dir_all(&outer).unwrap();
        let tmpfs = |p: &Path| {
            rustix::mount::mount(
                "tmpfs",
                p,
                "tmpfs",
                rustix::mount::MountFlags::empty(),
                None,
            )
        };
        if let Err(e) = tmpfs(&outer) {
            assert!(
                std::env::var("CI").is_err(),
                "tmpfs mount failed in CI: {e}"
            );
            eprintln!("skipped: cannot mount a tmpfs here: {e}");
            return;
        }
        std::fs::create_dir(&inner).unwrap();
        tmpfs(&inner).unwrap();
        assert_eq!(unmount_under(dir.path()), 2);
        assert_eq!(unmount_under(dir.path()), 0, "nothing is left mounted");
        std::fs::remove_dir_all(dir.path()).unwrap();
    }
}
