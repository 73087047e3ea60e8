//! cgroups as the executor, the shims and the embedded runtime see them:
//! which version the host runs, the caller's own cgroup in each hierarchy
//! (containers nest under it: under their shim's anchor, outside the
//! executor's Mesos cgroup, see `crate::shim`), limits, and whether the
//! kernel OOM-killed a container.

use std::path::{Path, PathBuf};

/// The cgroup filesystem's mount point.
const ROOT: &str = "/sys/fs/cgroup";

/// The v1 hierarchies containers get a cgroup in. `cpuacct` sets no limit:
/// it counts the container's CPU time for `kubectl top`
/// ([`crate::metrics`]), which `cpu` alone does not where the two are
/// mounted apart.
const V1_SUBSYSTEMS: &[&str] = &["memory", "cpu", "cpuacct", "pids"];

/// Which cgroup version the host runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// Separate hierarchies per controller.
    V1,
    /// The unified hierarchy.
    V2,
}

impl Version {
    /// The host's version: v2 when `/sys/fs/cgroup` itself is the unified tree.
    pub fn detect() -> Option<Version> {
        let root = Path::new(ROOT);
        if root.join("cgroup.controllers").exists() {
            Some(Version::V2)
        } else if root.join("memory").exists() {
            Some(Version::V1)
        } else {
            None
        }
    }

    /// `v1` or `v2`, as the Node label says it.
    pub fn label(self) -> &'static str {
        match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        }
    }
}

/// This process' own cgroup path in `subsystem`'s hierarchy (`""` is v2's).
fn own_path(subsystem: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let _id = parts.next()?;
        let controllers = parts.next()?;
        let path = parts.next()?;
        let hit = if subsystem.is_empty() {
            controllers.is_empty()
        } else {
            controllers.split(',').any(|c| c == subsystem)
        };
        hit.then(|| path.to_owned())
    })
}

/// The directories of a container cgroup at `relative` (below this process'
/// own cgroup), one per hierarchy, with the controller each serves.
pub fn dirs(relative: &str) -> Vec<(&'static str, PathBuf)> {
    let relative = relative.trim_start_matches('/');
    match Version::detect() {
        Some(Version::V2) => own_path("")
            .map(|own| {
                vec![(
                    "",
                    Path::new(ROOT)
                        .join(own.trim_start_matches('/'))
                        .join(relative),
                )]
            })
            .unwrap_or_default(),
        Some(Version::V1) => {
            // `cpu` and `cpuacct` are often one hierarchy (`cpu,cpuacct`,
            // with a link for each name): one cgroup there, not two.
            let mut mounts = Vec::new();
            V1_SUBSYSTEMS
                .iter()
                .filter_map(|s| {
                    let mount = Path::new(ROOT).join(s);
                    let own = own_path(s)?;
                    let real = mount.canonicalize().ok()?;
                    if mounts.contains(&real) {
                        return None;
                    }
                    mounts.push(real);
                    Some((*s, mount.join(own.trim_start_matches('/')).join(relative)))
                })
                .collect()
        }
        None => Vec::new(),
    }
}

/// The memory controller's directory of the container cgroup at `relative`.
pub fn memory_dir(relative: &str) -> Option<PathBuf> {
    dirs(relative)
        .into_iter()
        .find(|(c, _)| c.is_empty() || *c == "memory")
        .map(|(_, d)| d)
}

/// Whether the kernel's OOM killer killed a process of the cgroup at `dir`
/// (v1 `memory.oom_control`, v2 `memory.events`).
pub fn oom_killed(dir: &Path) -> bool {
    ["memory.events", "memory.oom_control"].iter().any(|file| {
        std::fs::read_to_string(dir.join(file)).is_ok_and(|text| {
            text.lines().any(|l| {
                l.strip_prefix("oom_kill ")
                    .and_then(|n| n.trim().parse::<u64>().ok())
                    .is_some_and(|n| n > 0)
            })
        })
    })
}

/// The files and values that set a container's limits in `controller`.
pub fn limit_files(
    controller: &str,
    memory: Option<i64>,
    shares: Option<u64>,
    quota: Option<i64>,
    period: Option<u64>,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    match controller {
        "memory" => {
            if let Some(m) = memory {
                out.push(("memory.limit_in_bytes", m.to_string()));
            }
        }
        "cpu" => {
            if let Some(s) = shares {
                out.push(("cpu.shares", s.to_string()));
            }
            if let (Some(q), Some(p)) = (quota, period) {
                out.push(("cpu.cfs_period_us", p.to_string()));
                out.push(("cpu.cfs_quota_us", q.to_string()));
            }
        }
        "" => {
            if let Some(m) = memory {
                out.push(("memory.max", m.to_string()));
                out.push(("memory.swap.max", "0".into()));
            }
            if let Some(s) = shares {
                // runc's conversion from shares (2..262144) to weight (1..10000).
                let weight = 1 + ((s.clamp(2, 262_144) - 2) * 9999) / 262_142;
                out.push(("cpu.weight", weight.to_string()));
            }
            if let (Some(q), Some(p)) = (quota, period) {
                out.push(("cpu.max", format!("{q} {p}")));
            }
        }
        _ => {}
    }
    out
}
