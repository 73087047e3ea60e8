//! What a dead executor's pods left mounted: tmpfs volumes (`medium:
//! Memory` emptyDirs, secret and projected volumes), subPath binds and the
//! containers' overlay root filesystems stay mounted when an executor is
//! SIGKILLed, since only its teardown unmounts them. The next executor on
//! the agent finds them in `/proc/self/mountinfo` below
//! `<agent dir>/frameworks/<fw>/executors/<ex>/runs/<run>/pods/<pod>/` of a
//! sandbox that is not its own, unmounts them (deepest first) and removes
//! what a pod's own teardown removes: its `volumes` and `volume-subpaths`
//! directories and its containers' `.bundle-*` directories (their
//! writable layers). The container logs beside them stay, as after a
//! pod's own end: the API still shows those pods, and Mesos' sandbox gc
//! removes the rest. Like the containers' cleanup it runs before anything
//! is launched, and assumes one live mesopod executor per agent. The pods a
//! new executor may adopt keep theirs: it runs again, for those not
//! adopted, once the adoption timeout is over.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use rustix::mount::UnmountFlags;

use super::empty_dir::{mount_points, mounted_below};
use crate::layout::PODS_DIR;

/// What [`clean`] found and did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Leftovers {
    /// The mounts unmounted.
    pub unmounted: Vec<PathBuf>,
    /// The directories removed.
    pub removed: Vec<PathBuf>,
}

/// The pod directory a mount at `mount` belongs to, if `mount` is below
/// `<agent dir>/frameworks/<fw>/executors/<ex>/runs/<run>/pods/<pod>/` and
/// not under `own` (this executor's sandbox).
fn pod_dir_of(mount: &Path, agent_dir: &Path, own: &Path) -> Option<PathBuf> {
    let frameworks = agent_dir.join("frameworks");
    let rest = mount.strip_prefix(&frameworks).ok()?;
    if mount.starts_with(own) {
        return None;
    }
    let parts: Vec<Component<'_>> = rest.components().collect();
    // `..` would let a crafted path leave the agent's directory.
    if parts.len() < 8 || parts.iter().any(|c| !matches!(c, Component::Normal(_))) {
        return None;
    }
    let named = |i: usize, name: &str| parts[i].as_os_str() == name;
    if !(named(1, "executors") && named(3, "runs") && named(5, PODS_DIR)) {
        return None;
    }
    let mut dir = frameworks;
    dir.extend(&parts[..7]);
    Some(dir)
}

/// What a pod's own teardown removes from its directory: its volumes and
/// its containers' bundles.
fn removable(pod: &Path) -> Vec<PathBuf> {
    let mut out = vec![pod.join("volumes"), pod.join("volume-subpaths")];
    for container in std::fs::read_dir(pod).into_iter().flatten().flatten() {
        let bundles = std::fs::read_dir(container.path()).into_iter().flatten();
        out.extend(
            bundles
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(".bundle-"))
                .map(|e| e.path()),
        );
    }
    out
}

/// Unmounts every mount a dead executor left in its pods' directories
/// below `agent_dir` and removes their volumes and bundles; `own` is this
/// executor's sandbox, never touched, nor are the pod directories `keep`
/// holds (pods this executor adopts or may adopt). A directory with something still
/// mounted below is left.
pub fn clean(agent_dir: &Path, own: &Path, keep: &dyn Fn(&Path) -> bool) -> Leftovers {
    let mut out = Leftovers::default();
    let mut pods = BTreeSet::new();
    let mut mounts: Vec<PathBuf> = mount_points()
        .into_iter()
        .filter(|m| {
            pod_dir_of(m, agent_dir, own)
                .filter(|p| !keep(p))
                .map(|p| pods.insert(p))
                .is_some()
        })
        .collect();
    // Deepest first (a subPath bind may sit on a tmpfs); a path mounted
    // twice is unmounted as many times.
    mounts.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    for m in mounts {
        match rustix::mount::unmount(&m, UnmountFlags::DETACH) {
            Ok(()) => out.unmounted.push(m),
            Err(e) => {
                tracing::warn!(mount = %m.display(), error = %e, "cannot unmount a leftover mount")
            }
        }
    }
    for dir in pods.iter().flat_map(|p| removable(p)) {
        if mounted_below(&dir) {
            tracing::warn!(dir = %dir.display(), "something is still mounted below; left in place");
            continue;
        }
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => out.removed.push(dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot remove a leftover directory")
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_mounts_in_other_sandboxes_pod_dirs_count() {
        let agent = Path::new("/w/slaves/a1");
        let own = agent.join("frameworks/f/executors/e/runs/new");
        let old = agent.join("frameworks/f/executors/e/runs/old");
        let pod = old.join("pods/default_web_u1");
        for m in [
            pod.join("volumes/cache"),
            pod.join("volume-subpaths/cfg/main/0"),
            pod.join("main/.bundle-u1-main-1/rootfs"),
        ] {
            assert_eq!(pod_dir_of(&m, agent, &own), Some(pod.clone()), "{m:?}");
        }
        let ignored = [
            own.join("pods/default_web_u2/volumes/cache"),
            old.join("pods/default_web_u1"),
            old.join("mesopod-runtime/x/y/z"),
            PathBuf::from("/w/slaves/a2/frameworks/f/executors/e/runs/r/pods/p/volumes"),
            agent.join("frameworks/f/other/e/runs/r/pods/p/volumes"),
            old.join("pods/../pods/p/volumes/v"),
            PathBuf::from("/proc"),
        ];
        for m in ignored {
            assert_eq!(pod_dir_of(&m, agent, &own), None, "{m:?}");
        }
    }

    #[test]
    fn nothing_mounted_means_nothing_done() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let own = dir.path().join("frameworks/f/executors/e/runs/new");
        assert_eq!(clean(dir.path(), &own, &|_| false), Leftovers::default());
    }
}
