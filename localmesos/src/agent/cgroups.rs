//! Each executor's own cgroup, as Mesos' cgroups isolator gives every
//! container one: `mesos/<container id>`. When the executor ends, however
//! it ended, everything left in that subtree (the pods it started, which
//! lead their own process groups) is killed and the cgroup removed, so no
//! process outlives its executor.
//!
//! The tree is cgroup v2's when it is mounted (`cgroup.kill`); without it,
//! a v1 hierarchy that can stop a subtree: `freezer` (freeze, kill, thaw:
//! nothing forks in between, as Mesos' v1 isolator destroys) or else
//! `pids` (`pids.max` 0 forbids forks while the processes are killed).
//! Only as root; otherwise [`enter`] returns `false`, the agent falls back
//! to killing the executor's process group, and [`warn_if_unavailable`]
//! says so when an agent starts.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// A hierarchy executors' cgroups can live in, at its mount point.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tree {
    /// The unified hierarchy.
    V2(PathBuf),
    /// The v1 `freezer` hierarchy.
    Freezer(PathBuf),
    /// The v1 `pids` hierarchy.
    Pids(PathBuf),
}

impl Tree {
    fn root(&self) -> &Path {
        match self {
            Tree::V2(p) | Tree::Freezer(p) | Tree::Pids(p) => p,
        }
    }

    /// The cgroup of container `container_id` in this tree.
    fn path_for(&self, container_id: &str) -> Option<PathBuf> {
        if container_id.is_empty() || container_id.contains('/') || container_id.starts_with('.') {
            return None;
        }
        Some(self.root().join("mesos").join(container_id))
    }
}

/// Where executors' cgroups go on this host, if anywhere.
///
/// Probed once per process, as Mesos' cgroups isolator finds its hierarchies when the
/// agent starts: the mount table does not change under a running agent. Read for every
/// executor that ended, it cost the kernel about 5 s of CPU to format for the 5,000
/// executors `mesopod bench` leaves at its end.
pub(crate) fn tree() -> Option<Tree> {
    static TREE: std::sync::OnceLock<Option<Tree>> = std::sync::OnceLock::new();
    TREE.get_or_init(probe).clone()
}

fn probe() -> Option<Tree> {
    if !rustix::process::geteuid().is_root() {
        return None;
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let (mut freezer, mut pids) = (None, None);
    for l in mounts.lines() {
        // ... mount-point ... - fstype source super-options
        let Some((left, right)) = l.split_once(" - ") else {
            continue;
        };
        let Some(point) = left.split_whitespace().nth(4).map(PathBuf::from) else {
            continue;
        };
        let mut fields = right.split_whitespace();
        let (kind, options) = (fields.next(), fields.nth(1).unwrap_or(""));
        match kind {
            Some("cgroup2") => return Some(Tree::V2(point)),
            Some("cgroup") => {
                let has = |c: &str| options.split(',').any(|o| o == c);
                if has("freezer") {
                    freezer.get_or_insert(Tree::Freezer(point));
                } else if has("pids") {
                    pids.get_or_insert(Tree::Pids(point));
                }
            }
            _ => {}
        }
    }
    freezer.or(pids)
}

/// Says once, when the first agent starts, that a killed executor's pods
/// may outlive it here, and why.
pub(crate) fn warn_if_unavailable() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if tree().is_none() {
            tracing::warn!(
                "executors get no cgroup (needs root and cgroup v2, or a v1 freezer or pids hierarchy): a SIGKILLed executor's process-mode pods outlive it"
            );
        }
    });
}

/// Moves `pid` into the container's own cgroup. Returns whether it is there.
pub(crate) fn enter(container_id: &str, pid: u32) -> bool {
    tree().is_some_and(|t| enter_in(&t, container_id, pid))
}

fn enter_in(tree: &Tree, container_id: &str, pid: u32) -> bool {
    let Some(path) = tree.path_for(container_id) else {
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
    let Some(tree) = tree() else {
        return;
    };
    let Some(path) = tree.path_for(container_id) else {
        return;
    };
    if !path.exists() {
        return;
    }
    kill_tree(&tree, &path);
    rt.spawn(async move { remove_when_empty(&tree, &path).await });
}

/// [`destroy`], awaited: for a process about to exit (`--reset`).
pub(crate) async fn destroy_and_wait(container_id: &str) {
    if let Some(tree) = tree() {
        destroy_in(&tree, container_id).await;
    }
}

async fn destroy_in(tree: &Tree, container_id: &str) {
    if let Some(path) = tree.path_for(container_id)
        && path.exists()
    {
        kill_tree(tree, &path);
        remove_when_empty(tree, &path).await;
    }
}

async fn remove_when_empty(tree: &Tree, path: &Path) {
    for _ in 0..50 {
        if remove_tree(path) {
            return;
        }
        kill_tree(tree, path);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tracing::warn!(path = %path.display(), "could not remove an executor's cgroup");
}

/// Kills the subtree so that nothing in it can fork a survivor meanwhile:
/// `cgroup.kill` (Linux 5.14+) on v2; a frozen subtree, or one that may
/// not fork, on v1; else SIGKILL for each process listed.
fn kill_tree(tree: &Tree, path: &Path) {
    match tree {
        Tree::V2(_) => {
            if std::fs::write(path.join("cgroup.kill"), "1").is_ok() {
                return;
            }
            kill_listed(path);
        }
        Tree::Freezer(_) => {
            let frozen = std::fs::write(path.join("freezer.state"), "FROZEN").is_ok();
            kill_listed(path);
            // SIGKILL is delivered once thawed.
            if frozen {
                let _ = std::fs::write(path.join("freezer.state"), "THAWED");
            }
        }
        Tree::Pids(_) => {
            let _ = std::fs::write(path.join("pids.max"), "0");
            kill_listed(path);
        }
    }
}

fn kill_listed(path: &Path) {
    for pid in procs(path) {
        if let Some(pid) = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
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

#[cfg(test)]
#[path = "cgroups_tests.rs"]
mod tests;
