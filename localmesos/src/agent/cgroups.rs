//! Each executor's own cgroup, as Mesos' cgroups isolator gives every
//! container one: `mesos/<container id>` in the cgroup v2 tree. When the
//! executor ends, however it ended, everything left in that subtree (the
//! pods it started, which lead their own process groups) is killed and the
//! cgroup removed, so no process outlives its executor.
//!
//! Only when this process is root and a cgroup v2 hierarchy is mounted and
//! writable; otherwise [`enter`] returns `false` and the agent falls back
//! to killing the executor's process group.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where cgroup v2 is mounted, if it is and we may write there.
fn v2_root() -> Option<PathBuf> {
    let uid_root = std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))?;
    if !uid_root {
        return None;
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|l| {
        // ... mount-point ... - fstype source options
        let (left, right) = l.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        left.split_whitespace().nth(4).map(PathBuf::from)
    })
}

/// The cgroup of container `container_id`, if cgroups are usable.
pub(crate) fn path_for(container_id: &str) -> Option<PathBuf> {
    if container_id.is_empty() || container_id.contains('/') || container_id.starts_with('.') {
        return None;
    }
    Some(v2_root()?.join("mesos").join(container_id))
}

/// Moves `pid` into the container's own cgroup. Returns whether it is there.
pub(crate) fn enter(container_id: &str, pid: u32) -> bool {
    let Some(path) = path_for(container_id) else {
        return false;
    };
    let moved = std::fs::create_dir_all(&path)
        .and_then(|()| std::fs::write(path.join("cgroup.procs"), pid.to_string()));
    match moved {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e, "no cgroup for the executor");
            let _ = std::fs::remove_dir(&path);
            false
        }
    }
}

/// Kills everything in the container's cgroup subtree and removes it, in
/// the background (the kernel kills asynchronously; a populated cgroup
/// cannot be removed). Does nothing when the container has no cgroup.
pub(crate) fn destroy(rt: &tokio::runtime::Handle, container_id: &str) {
    let Some(path) = path_for(container_id) else {
        return;
    };
    if !path.exists() {
        return;
    }
    kill_tree(&path);
    rt.spawn(async move {
        for _ in 0..50 {
            if remove_tree(&path) {
                return;
            }
            kill_tree(&path);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tracing::warn!(path = %path.display(), "could not remove an executor's cgroup");
    });
}

/// [`destroy`], awaited: for a process about to exit (`--reset`).
pub(crate) async fn destroy_and_wait(container_id: &str) {
    let Some(path) = path_for(container_id) else {
        return;
    };
    for _ in 0..50 {
        if !path.exists() {
            return;
        }
        kill_tree(&path);
        if remove_tree(&path) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tracing::warn!(path = %path.display(), "could not remove an executor's cgroup");
}

/// `cgroup.kill` (Linux 5.14+) kills the whole subtree; older kernels get
/// SIGKILL for each process listed.
fn kill_tree(path: &Path) {
    if std::fs::write(path.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    for pid in procs(path) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

fn procs(path: &Path) -> Vec<u32> {
    let mut out: Vec<u32> = std::fs::read_to_string(path.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    for child in children(path) {
        out.extend(procs(&child));
    }
    out
}

fn children(path: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(path)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// Removes the subtree bottom-up; true once it is gone.
fn remove_tree(path: &Path) -> bool {
    for child in children(path) {
        remove_tree(&child);
    }
    std::fs::remove_dir(path).is_ok() || !path.exists()
}
