//! Pods' processes as the host sees them: each test pod sleeps for a number
//! unique to it (its marker), so the live processes that sleep for it are
//! that pod's copies, in whatever PID namespace they run. A copy counts as
//! containerised when its cgroup is a container's (`…/mesopod/<id>`, where
//! the embedded runtime and runc nest containers under their executor's
//! own cgroup), so a pod left running as a host process is not mistaken
//! for its container.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

/// The pids of live (not zombie) processes running `sleep <marker>`.
pub fn sleepers(marker: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let argv: Vec<&[u8]> = c.split(|b| *b == 0).filter(|a| !a.is_empty()).collect();
                argv.len() == 2 && argv[0].ends_with(b"sleep") && argv[1] == marker.as_bytes()
            })
        })
        .filter(|pid| alive(*pid))
        .collect()
}

/// Whether `pid` runs in a container's cgroup (in any hierarchy).
pub fn containerised(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| {
        c.lines()
            .filter_map(|l| l.splitn(3, ':').nth(2))
            .any(|path| path.contains("/mesopod/"))
    })
}

/// Whether `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

/// Pids of the `mesopod-e2e executor` processes whose environment names a
/// path under `dir` (their sandbox).
pub fn executor_pids(dir: &Path) -> Vec<u32> {
    let dir = dir.to_str().unwrap().as_bytes().to_vec();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let argv: Vec<&[u8]> = c.split(|b| *b == 0).collect();
                argv.len() >= 2 && argv[0].ends_with(b"mesopod-e2e") && argv[1] == b"executor"
            }) && std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|e| e.windows(dir.len()).any(|w| w == dir.as_slice()))
        })
        .filter(|pid| alive(*pid))
        .collect()
}

/// Whether this process may give executors a cgroup subtree (root and a
/// cgroup v2 mount, or a v1 `freezer` or `pids` hierarchy), as localmesos'
/// agents need to kill what an executor leaves.
pub fn cgroups_usable() -> bool {
    let root = rustix::process::geteuid().is_root();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let usable = mounts.lines().any(|l| {
        l.split(" - ").nth(1).is_some_and(|r| {
            let mut f = r.split_whitespace();
            let (kind, options) = (f.next(), f.nth(1).unwrap_or(""));
            kind == Some("cgroup2")
                || (kind == Some("cgroup")
                    && options.split(',').any(|o| o == "freezer" || o == "pids"))
        })
    });
    root && usable
}
