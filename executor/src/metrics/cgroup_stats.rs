//! A container's CPU and memory as its cgroup counts them, read the way
//! kubelet's cAdvisor reads them: cumulative CPU time (v2 `cpu.stat`
//! `usage_usec`, v1 `cpuacct.usage`) and the working set (memory usage minus
//! inactive file pages: v2 `memory.current` and `memory.stat`
//! `inactive_file`, v1 `memory.usage_in_bytes` and `total_inactive_file`).
//! The parsers are pure; [`read`] is the one place that touches files.

use std::path::{Path, PathBuf};

/// The cgroup filesystem's mount point.
const ROOT: &str = "/sys/fs/cgroup";

/// One reading of a cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// CPU time used, nanoseconds, since the cgroup was made.
    pub cpu_usage_nanos: u64,
    /// Usage minus inactive file pages, bytes.
    pub working_set_bytes: u64,
}

/// Where a process' cgroup is, by hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dirs {
    /// The unified hierarchy's directory.
    V2(PathBuf),
    /// The v1 `cpuacct` and `memory` directories.
    V1 {
        /// `cpuacct`'s.
        cpuacct: PathBuf,
        /// `memory`'s.
        memory: PathBuf,
    },
}

/// The directories of the cgroup a `/proc/<pid>/cgroup` text names, if that
/// cgroup's path ends in `own` (the container's `cgroupsPath`): a process in
/// no cgroup of its own (process mode, a rootless container without one)
/// would read its parent's counts, which are not the container's.
pub fn dirs(proc_cgroup: &str, own: &str) -> Option<Dirs> {
    let own = own.trim_matches('/');
    let mut v2 = None;
    let (mut cpuacct, mut memory) = (None, None);
    for line in proc_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let path = path.trim_start_matches('/');
        let whole_segments = path == own || path.ends_with(&format!("/{own}"));
        if own.is_empty() || !whole_segments {
            continue;
        }
        if controllers.is_empty() {
            v2 = Some(Path::new(ROOT).join(path));
        }
        for c in controllers.split(',') {
            match c {
                "cpuacct" => cpuacct = Some(Path::new(ROOT).join("cpuacct").join(path)),
                "memory" => memory = Some(Path::new(ROOT).join("memory").join(path)),
                _ => {}
            }
        }
    }
    match (cpuacct, memory, v2) {
        (Some(cpuacct), Some(memory), _) => Some(Dirs::V1 { cpuacct, memory }),
        (_, _, Some(dir)) => Some(Dirs::V2(dir)),
        _ => None,
    }
}

/// The value of `key` in a flat keyed file (`cpu.stat`, `memory.stat`).
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

/// v2: CPU nanoseconds from `cpu.stat`.
pub fn cpu_v2(cpu_stat: &str) -> Option<u64> {
    keyed(cpu_stat, "usage_usec")?.checked_mul(1_000)
}

/// v1: CPU nanoseconds from `cpuacct.usage`.
pub fn cpu_v1(cpuacct_usage: &str) -> Option<u64> {
    cpuacct_usage.trim().parse().ok()
}

/// The working set from the memory usage file and `memory.stat`: usage
/// minus inactive file pages (v2 `inactive_file`, v1 `total_inactive_file`),
/// never below 0, as cAdvisor computes it.
pub fn working_set(usage: &str, memory_stat: &str, v2: bool) -> Option<u64> {
    let usage: u64 = usage.trim().parse().ok()?;
    let key = if v2 {
        "inactive_file"
    } else {
        "total_inactive_file"
    };
    let inactive = keyed(memory_stat, key).unwrap_or(0);
    Some(usage.saturating_sub(inactive))
}

/// Reads the cgroup at `dirs`; `None` when it is gone or unreadable.
pub fn read(dirs: &Dirs) -> Option<Reading> {
    let text = |p: PathBuf| std::fs::read_to_string(p).ok();
    match dirs {
        Dirs::V2(dir) => Some(Reading {
            cpu_usage_nanos: cpu_v2(&text(dir.join("cpu.stat"))?)?,
            working_set_bytes: working_set(
                &text(dir.join("memory.current"))?,
                &text(dir.join("memory.stat"))?,
                true,
            )?,
        }),
        Dirs::V1 { cpuacct, memory } => Some(Reading {
            cpu_usage_nanos: cpu_v1(&text(cpuacct.join("cpuacct.usage"))?)?,
            working_set_bytes: working_set(
                &text(memory.join("memory.usage_in_bytes"))?,
                &text(memory.join("memory.stat"))?,
                false,
            )?,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_from_either_version() {
        let stat = "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 0\n";
        assert_eq!(cpu_v2(stat), Some(1_500_000));
        assert_eq!(cpu_v2("user_usec 3\n"), None);
        assert_eq!(cpu_v1("123456789\n"), Some(123_456_789));
    }

    #[test]
    fn the_working_set_leaves_out_inactive_file_pages() {
        let v2 = "anon 4096\nfile 8192\ninactive_file 6144\nactive_file 2048\n";
        assert_eq!(working_set("20480\n", v2, true), Some(14_336));
        let v1 = "cache 8192\ninactive_file 1\ntotal_inactive_file 4096\n";
        assert_eq!(working_set("10240\n", v1, false), Some(6_144));
        assert_eq!(working_set("100\n", v2, true), Some(0), "never below 0");
        assert_eq!(working_set("x", v2, true), None);
    }

    #[test]
    fn only_the_containers_own_cgroup_is_read() {
        let own = "mesopod/u1-app-1";
        let v2 = "0::/mesopod-anchors/r1/mesopod/u1-app-1\n";
        assert_eq!(
            dirs(v2, own),
            Some(Dirs::V2(
                "/sys/fs/cgroup/mesopod-anchors/r1/mesopod/u1-app-1".into()
            ))
        );
        let v1 =
            "5:memory:/a/mesopod/u1-app-1\n4:cpu,cpuacct:/a/mesopod/u1-app-1\n1:name=systemd:/x\n";
        assert_eq!(
            dirs(v1, own),
            Some(Dirs::V1 {
                cpuacct: "/sys/fs/cgroup/cpuacct/a/mesopod/u1-app-1".into(),
                memory: "/sys/fs/cgroup/memory/a/mesopod/u1-app-1".into(),
            })
        );
        assert_eq!(
            dirs("0::/mesos/executor\n", own),
            None,
            "no cgroup of its own"
        );
    }
}
