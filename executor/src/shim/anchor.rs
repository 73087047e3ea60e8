//! The shim's own cgroup: out of the executor's Mesos container.
//!
//! When an executor ends, its agent destroys the executor's container:
//! Apache Mesos' launcher and isolators kill every process in the
//! container's cgroups (`<root>/mesos/<container id>` in each hierarchy),
//! and localmesos does the same in its one tree. A container that must
//! outlive its executor cannot be in there. In every hierarchy where the
//! executor's cgroup is its Mesos container's (the path ends in the
//! container id, the name of the executor's sandbox directory), the shim
//! moves itself, before it runs anything, to
//! `<the parent of that container's parent>/mesopod-anchors/<container run id>`
//! (the executor works out the bases once, [`bases`], and names them on
//! the shim's command line):
//! beside the agent's `mesos` cgroup rather than in it, since an agent
//! destroys whatever it finds in its own root that it does not know. The
//! runtime and the container it starts inherit that cgroup, and the
//! container's own cgroup nests below it as it nested below the executor's.
//!
//! What this costs: the pods' processes no longer count against the
//! executor container's limits in the agent's accounting; each container
//! keeps its own limits, which the runtime set from the pod.

use std::path::{Path, PathBuf};

/// Where anchors live in each hierarchy.
const ANCHORS: &str = "mesopod-anchors";

/// One hierarchy this process is in: its controllers (`""` is v2's) and
/// its path there.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Membership {
    controllers: String,
    path: String,
}

fn memberships(proc_cgroup: &str) -> Vec<Membership> {
    proc_cgroup
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let _id = parts.next()?;
            let controllers = parts.next()?.to_owned();
            let path = parts.next()?.to_owned();
            Some(Membership { controllers, path })
        })
        .collect()
}

/// The anchor's path in a hierarchy where this process' cgroup is the
/// Mesos container `container` (`/a/mesos/<container>` gives
/// `/a/mesopod-anchors/<anchor>`); `None` elsewhere.
fn anchor_path(path: &str, container: &str, anchor: &str) -> Option<String> {
    let rest = path.strip_suffix(container)?.strip_suffix('/')?;
    let (grandparent, parent) = rest.rsplit_once('/')?;
    if parent.is_empty() {
        return None;
    }
    Some(format!("{grandparent}/{ANCHORS}/{anchor}"))
}

/// The mount point of the hierarchy with `controllers` (`""`: cgroup2).
fn mount_point(mountinfo: &str, controllers: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let point = left.split_whitespace().nth(4)?;
        let mut fields = right.split_whitespace();
        let (kind, options) = (fields.next()?, fields.nth(1).unwrap_or(""));
        let hit = match kind {
            "cgroup2" => controllers.is_empty(),
            "cgroup" if !controllers.is_empty() => controllers
                .split(',')
                .all(|c| options.split(',').any(|o| o == c)),
            _ => false,
        };
        hit.then(|| PathBuf::from(point))
    })
}

/// Where the anchors of an executor in the Mesos container `container` go,
/// one directory per hierarchy where its cgroup is that container's;
/// none where the executor runs in no such cgroup. Read once per executor
/// (the mount table can be long, and a container start must not read it).
pub(crate) fn bases(container: &str) -> Vec<PathBuf> {
    if container.is_empty() {
        return Vec::new();
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut out = Vec::new();
    let mut mountinfo = None;
    for m in memberships(&own) {
        let Some(path) = anchor_path(&m.path, container, "") else {
            continue;
        };
        let mountinfo = mountinfo.get_or_insert_with(|| {
            std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default()
        });
        if let Some(mount) = mount_point(mountinfo, &m.controllers) {
            out.push(mount.join(path.trim_start_matches('/').trim_end_matches('/')));
        }
    }
    out
}

/// Moves this process into its anchor `anchor` below each of `bases`;
/// returns the anchors' directories.
pub(crate) fn enter(bases: &[PathBuf], anchor: &str) -> Result<Vec<PathBuf>, String> {
    if anchor.contains('/') || anchor.is_empty() {
        return Err(format!("{anchor:?} cannot name a cgroup"));
    }
    let mut dirs = Vec::new();
    for base in bases {
        let dir = base.join(anchor);
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string()))
            .map_err(|e| format!("cannot move into the cgroup {}: {e}", dir.display()))?;
        dirs.push(dir);
    }
    Ok(dirs)
}

/// Moves this process to its anchors' parent and removes the anchors: the
/// last thing a shim does (a cgroup with a process in it cannot go).
pub(crate) fn remove(dirs: &[PathBuf]) {
    for dir in dirs {
        let Some(parent) = dir.parent() else { continue };
        let _ = std::fs::write(parent.join("cgroup.procs"), std::process::id().to_string());
        remove_tree(dir);
    }
}

/// Removes a cgroup and the (empty) ones below it, deepest first.
fn remove_tree(dir: &Path) {
    for child in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if child.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&child.path());
        }
    }
    let _ = std::fs::remove_dir(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_executors_mesos_container_is_left() {
        let c = "0b9c6f1e-6a6e-4d1c-9c55-1f0c2b3a4d5e";
        assert_eq!(
            anchor_path(&format!("/mesos/{c}"), c, "u1-web-1").as_deref(),
            Some("/mesopod-anchors/u1-web-1")
        );
        assert_eq!(
            anchor_path(&format!("/system.slice/mesos/{c}"), c, "x").as_deref(),
            Some("/system.slice/mesopod-anchors/x")
        );
        for path in [
            "/",
            "/user.slice",
            &format!("/{c}"),
            &format!("/mesos/x{c}"),
        ] {
            assert_eq!(anchor_path(path, c, "x"), None, "{path}");
        }
    }

    #[test]
    fn hierarchies_are_found_by_their_controllers() {
        let info = "\
30 25 0:26 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate
31 25 0:27 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
32 25 0:28 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
33 25 0:29 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd";
        let at = |c: &str| mount_point(info, c);
        assert_eq!(at(""), Some(PathBuf::from("/sys/fs/cgroup/unified")));
        assert_eq!(at("memory"), Some(PathBuf::from("/sys/fs/cgroup/memory")));
        assert_eq!(
            at("cpu,cpuacct"),
            Some(PathBuf::from("/sys/fs/cgroup/cpu,cpuacct"))
        );
        assert_eq!(
            at("name=systemd"),
            Some(PathBuf::from("/sys/fs/cgroup/systemd"))
        );
        assert_eq!(at("pids"), None);
        let own = "4:memory:/mesos/c1\n0::/mesos/c1\n";
        assert_eq!(
            memberships(own),
            vec![
                Membership {
                    controllers: "memory".into(),
                    path: "/mesos/c1".into()
                },
                Membership {
                    controllers: String::new(),
                    path: "/mesos/c1".into()
                },
            ]
        );
    }
}
