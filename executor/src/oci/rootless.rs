//! Rootless containers: what the embedded runtime does differently when it
//! runs without root (a developer's laptop), and why it cannot when the
//! kernel forbids it.
//!
//! Without root the runtime gives each container a user namespace in which
//! the runtime's own uid and gid are 0 (a single-id mapping, which an
//! unprivileged process may write for itself), and creates the container's
//! other namespaces inside it, so `root` in a container is the agent's
//! user on the host and nothing more. Cgroups are used only where the
//! agent's cgroup is delegated (writable); a limit that cannot be enforced
//! is refused with the reason, never ignored. Where the kernel forbids
//! unprivileged user namespaces, containers are refused with the sysctl
//! that says so, rather than run unisolated.
//!
//! A rootless executor runs every runtime command in a user namespace of
//! its own instead ([`super::rootless_ns`]), shared by its pods, whose ids
//! are this user's alone or also its subordinate range
//! ([`super::rootless_ids`]).

use std::path::Path;

/// Whether this process runs containers rootless: its effective uid is not
/// 0, or it is a runtime command of a rootless executor (root only in that
/// executor's user namespace, [`super::rootless_ns`]).
pub fn active() -> bool {
    !rustix::process::geteuid().is_root() || super::rootless_ns::joined()
}

/// The Node label `mesopod.io/rootless`: `true` when the agent's
/// containers would run without root.
pub fn label() -> &'static str {
    if active() { "true" } else { "false" }
}

/// The sysctls that forbid an unprivileged user namespace: `(file, the
/// value that forbids it, what it means)`.
const SYSCTLS: &[(&str, &str, &str)] = &[
    (
        "/proc/sys/kernel/unprivileged_userns_clone",
        "0",
        "kernel.unprivileged_userns_clone=0 forbids user namespaces without root",
    ),
    (
        "/proc/sys/user/max_user_namespaces",
        "0",
        "user.max_user_namespaces=0 allows no user namespaces",
    ),
    (
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
        "1",
        "kernel.apparmor_restrict_unprivileged_userns=1: AppArmor restricts user namespaces without root",
    ),
];

/// Why this kernel forbids rootless containers, read from its sysctls under
/// `proc_sys` (`/proc/sys` but in tests); `None` if none forbids them.
pub fn kernel_refusal_in(read: impl Fn(&Path) -> Option<String>) -> Option<String> {
    let why: Vec<&str> = SYSCTLS
        .iter()
        .filter(|(file, forbids, _)| read(Path::new(file)).is_some_and(|v| v.trim() == *forbids))
        .map(|(_, _, what)| *what)
        .collect();
    (!why.is_empty()).then(|| {
        format!(
            "rootless containers need unprivileged user namespaces, which this kernel forbids ({})",
            why.join("; ")
        )
    })
}

/// [`kernel_refusal_in`] for this host.
pub fn kernel_refusal() -> Option<String> {
    kernel_refusal_in(|p| std::fs::read_to_string(p).ok())
}

/// Puts this (single-threaded, unprivileged) process into a new user
/// namespace where its uid and gid are 0. The namespaces it creates next
/// belong to that one. A runtime command of a rootless executor is in the
/// executor's user namespace already, which its pods share (their
/// containers join one another's sandbox namespaces): it makes none.
pub(crate) fn enter_user_namespace() -> Result<(), super::embedded::RuntimeFailure> {
    if super::rootless_ns::joined() {
        return Ok(());
    }
    unshare_user_namespace()
}

/// [`enter_user_namespace`] unconditionally, with the single-id mapping.
pub(crate) fn unshare_user_namespace() -> Result<(), super::embedded::RuntimeFailure> {
    let ids = unshare_unmapped()?;
    map_self(ids)
}

/// A new user namespace for this (single-threaded) process, its ids not
/// mapped yet; returns this process' `(uid, gid)` outside it.
pub(crate) fn unshare_unmapped() -> Result<(u32, u32), super::embedded::RuntimeFailure> {
    use super::embedded::RuntimeFailure;
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    // Only a namespace flag, in a single-threaded process (the runtime's).
    #[allow(deprecated)]
    rustix::thread::unshare(rustix::thread::UnshareFlags::NEWUSER).map_err(|e| {
        let hint = kernel_refusal()
            .unwrap_or_else(|| "rootless containers need unprivileged user namespaces".to_owned());
        RuntimeFailure(format!("cannot create a user namespace ({e}): {hint}"))
    })?;
    Ok((uid, gid))
}

/// Maps `(uid, gid)`, this process' own ids outside, to 0 in its new user
/// namespace (the single-id mapping).
pub(crate) fn map_self((uid, gid): (u32, u32)) -> Result<(), super::embedded::RuntimeFailure> {
    use super::embedded::RuntimeFailure;
    // An unprivileged process may map only its own ids, and its gid only
    // once it has given up setgroups (which could drop a denying group).
    for (file, text) in [
        ("uid_map", format!("0 {uid} 1\n")),
        ("setgroups", "deny\n".to_owned()),
        ("gid_map", format!("0 {gid} 1\n")),
    ] {
        std::fs::write(format!("/proc/self/{file}"), text)
            .map_err(|e| RuntimeFailure::io(format!("write /proc/self/{file}"), e))?;
    }
    Ok(())
}

/// Why a rootless container's limits cannot be enforced without the
/// cgroup `dir` (which is not delegated to this user), if it has limits.
pub(crate) fn unenforceable(
    memory: Option<i64>,
    cpu_quota: Option<i64>,
    dir: &Path,
) -> Option<String> {
    let mut limits = Vec::new();
    if let Some(m) = memory {
        limits.push(format!("a memory limit ({m} bytes)"));
    }
    if let Some(q) = cpu_quota {
        limits.push(format!("a CPU limit (quota {q} µs)"));
    }
    (!limits.is_empty()).then(|| {
        format!(
            "rootless: {} cannot be enforced: the cgroup {} is not delegated to uid {} (not writable); \
             delegate it (systemd: Delegate=yes) or remove the limit",
            limits.join(" and "),
            dir.display(),
            rustix::process::geteuid().as_raw()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sysctl_that_forbids_user_namespaces_is_named() {
        let all_allowed = |p: &Path| {
            Some(
                if p.ends_with("max_user_namespaces") {
                    "63000"
                } else {
                    "0"
                }
                .to_owned(),
            )
        };
        // apparmor_restrict…=0 and unprivileged_userns_clone=… read "0" here:
        // the latter forbids, the former does not.
        let why = kernel_refusal_in(all_allowed).unwrap_or_default();
        assert!(why.contains("kernel.unprivileged_userns_clone=0"), "{why}");
        assert!(!why.contains("apparmor"), "{why}");
        let apparmor = |p: &Path| {
            p.ends_with("apparmor_restrict_unprivileged_userns")
                .then(|| "1\n".to_owned())
        };
        let why = kernel_refusal_in(apparmor).unwrap_or_default();
        assert!(why.contains("AppArmor"), "{why}");
        assert_eq!(kernel_refusal_in(|_| None), None);
        assert_eq!(
            kernel_refusal_in(|p| Some(
                if p.ends_with("unprivileged_userns_clone") {
                    "1"
                } else {
                    "5"
                }
                .into()
            )),
            None
        );
    }

    #[test]
    fn only_limits_are_refused_without_a_delegated_cgroup() {
        let dir = Path::new("/sys/fs/cgroup/user.slice/c1");
        assert_eq!(unenforceable(None, None, dir), None);
        let why = unenforceable(Some(64 << 20), None, dir).unwrap_or_default();
        assert!(why.contains("memory limit (67108864 bytes)"), "{why}");
        assert!(why.contains("not delegated"), "{why}");
        assert!(unenforceable(None, Some(50_000), dir).is_some_and(|w| w.contains("CPU limit")));
    }
}
