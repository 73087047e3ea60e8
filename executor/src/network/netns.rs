//! A persistent network namespace: a fresh one bind-mounted on a file, as
//! `ip netns add` makes them, so that it outlives the process that created it.

use std::path::Path;
use std::process::Command;

use super::NetworkError;

/// Creates a new network namespace bound to `path` (its parent must exist).
///
/// `unshare(1)` does the unshare and the bind mount: a thread of this
/// multithreaded process cannot change its own namespace safely without `unsafe`.
/// Inside, `ip link set lo up`: a new namespace's loopback is down, and the
/// pod's containers reach each other on `localhost` (CRI runtimes run CNI's
/// `loopback` plugin for the same reason).
pub fn create_netns(path: &Path) -> Result<(), NetworkError> {
    let io = |source| NetworkError::Io {
        what: "creating the network namespace",
        path: path.to_owned(),
        source,
    };
    std::fs::File::create(path).map_err(io)?;
    let out = Command::new("unshare")
        .arg(format!("--net={}", path.display()))
        .args(["ip", "link", "set", "lo", "up"])
        .output()
        .map_err(io)?;
    if !out.status.success() {
        let _ = std::fs::remove_file(path);
        return Err(io(std::io::Error::other(format!(
            "unshare --net ip link set lo up: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))));
    }
    Ok(())
}

/// Unmounts and removes the namespace at `path`; nothing there is not an error.
pub fn remove_netns(path: &Path) -> Result<(), NetworkError> {
    let io = |source| NetworkError::Io {
        what: "removing the network namespace",
        path: path.to_owned(),
        source,
    };
    if !path.exists() {
        return Ok(());
    }
    match rustix::mount::unmount(path, rustix::mount::UnmountFlags::DETACH) {
        // EINVAL: not a mount point (the bind never happened).
        Ok(()) | Err(rustix::io::Errno::INVAL) => {}
        Err(e) => return Err(io(e.into())),
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(e)),
        _ => Ok(()),
    }
}
