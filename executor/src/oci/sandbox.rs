//! The pod sandbox: the namespaces a pod's containers share.
//!
//! Kubernetes gives the containers of one pod one IPC namespace (SysV
//! shared memory and semaphores work between them) and one UTS namespace
//! (the hostname is the pod's), while each keeps its own mount and PID
//! namespaces. A sandbox is a directory `<sandboxes>/<pod>/` holding the
//! namespace files `ipc` and `uts`, each a bind mount of a namespace that
//! `mesopod runtime sandbox` created: the bind mount keeps the namespace
//! alive with no process in it, and every container of the pod joins it
//! through `linux.namespaces[].path`, which runc honours as the embedded
//! runtime does.
//!
//! `net` is the pod's network namespace when it has one of its own (CNI);
//! `None` means the agent's network, where containers share the host's
//! network namespace and `localhost` already works between them.
//!
//! The directory is a small tmpfs of its own where the executor may mount
//! one (see `make_dir`). A sandbox goes with its pod ([`remove`]); an
//! executor that starts removes every sandbox a dead predecessor left, but
//! those of the pods it may adopt, as it kills their containers.

use std::path::{Path, PathBuf};

use rustix::mount::{MountFlags, UnmountFlags};
use rustix::thread::UnshareFlags;

use super::embedded::RuntimeFailure;

/// The namespaces a sandbox holds, as OCI names them, with their
/// `/proc/self/ns` file names.
const HELD: &[(&str, &str)] = &[("ipc", "ipc"), ("uts", "uts")];

/// The longest hostname Linux takes; kubelet truncates pod names to it.
const HOSTNAME_MAX: usize = 63;

/// The annotation that asks the embedded runtime's `init` to make the pod
/// sandbox's namespaces at this directory before it joins them: the first
/// container of a pod makes its sandbox, and a pod start costs no
/// `runtime sandbox` exec.
pub const MAKE_ANNOTATION: &str = "io.mesopod.sandbox.make";

/// A pod's shared namespaces.
#[derive(Debug, Clone)]
pub struct PodSandbox {
    /// The sandbox's directory.
    pub dir: PathBuf,
    /// The IPC namespace file.
    pub ipc: PathBuf,
    /// The UTS namespace file (its hostname is the pod's).
    pub uts: PathBuf,
    /// The pod's network namespace, when it has its own (CNI); `None`
    /// runs the pod in the agent's network namespace.
    pub net: Option<PathBuf>,
    /// The pod's IP in `net` (`None`: the agent's IP).
    pub ip: Option<std::net::IpAddr>,
    /// Set when the namespaces are left to the first container's `init`
    /// ([`MAKE_ANNOTATION`]): held by a start until its `run` has made
    /// them, so the pod's other containers join, never make, them.
    pub deferred: Option<std::sync::Arc<tokio::sync::Mutex<()>>>,
}

impl PartialEq for PodSandbox {
    fn eq(&self, other: &Self) -> bool {
        (&self.dir, &self.ipc, &self.uts, &self.net, &self.ip)
            == (&other.dir, &other.ipc, &other.uts, &other.net, &other.ip)
    }
}

impl Eq for PodSandbox {}

impl PodSandbox {
    /// The sandbox in `dir`, as [`create`] lays it out.
    pub fn at(dir: &Path) -> PodSandbox {
        PodSandbox {
            dir: dir.to_path_buf(),
            ipc: dir.join("ipc"),
            uts: dir.join("uts"),
            net: None,
            ip: None,
            deferred: None,
        }
    }

    /// Whether the namespace files exist yet (a deferred sandbox's appear
    /// with its first container).
    pub fn made(&self) -> bool {
        self.uts.exists() && self.ipc.exists()
    }

    /// The namespaces a container of the pod joins: `(OCI type, path)`.
    pub fn joins(&self) -> Vec<(String, String)> {
        let mut out = vec![
            ("ipc".to_owned(), self.ipc.display().to_string()),
            ("uts".to_owned(), self.uts.display().to_string()),
        ];
        if let Some(net) = &self.net {
            out.push(("network".to_owned(), net.display().to_string()));
        }
        out
    }
}

/// kubelet's hostname for a pod: its name, cut to 63 characters without a
/// trailing `-` or `.`.
pub fn pod_hostname(pod_name: &str) -> String {
    if pod_name.len() <= HOSTNAME_MAX {
        return pod_name.to_owned();
    }
    let cut: String = pod_name.chars().take(HOSTNAME_MAX).collect();
    cut.trim_end_matches(['-', '.']).to_owned()
}

/// A sandbox directory name from a task id: the characters a path and
/// the runtime's ids allow.
pub fn dir_name(task: &str) -> String {
    task.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_start_matches('.')
        .to_owned()
}

/// The directory of a sandbox whose namespaces the first container's
/// `init` makes (the embedded runtime).
pub(crate) fn deferred(dir: &Path) -> Result<PodSandbox, String> {
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    make_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(PodSandbox {
        deferred: Some(Default::default()),
        ..PodSandbox::at(dir)
    })
}

/// Makes a sandbox's directory, with a small tmpfs of its own mounted on
/// it where this process may mount (as root): the files a pod start makes
/// there (the namespace files, `/etc/hosts` and its siblings, the
/// containers' bundles) are then made in memory. On the agent's disk each
/// new inode cost a start more CPU than any other step (ext4 without a
/// journal scans past every recently deleted inode, and a busy agent
/// deletes many). Without root the directory stays a plain one.
fn make_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir(dir)?;
    let mounted = rustix::mount::mount(
        "tmpfs",
        dir,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        Some(c"mode=0755,size=16m"),
    );
    match mounted {
        Ok(()) | Err(rustix::io::Errno::PERM | rustix::io::Errno::ACCESS) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_dir(dir);
            Err(e.into())
        }
    }
}

/// Creates the sandbox at `dir` by running `exe runtime sandbox` (the
/// namespaces are made by a single-threaded process of their own, never
/// by the executor).
pub(crate) async fn create(exe: &Path, dir: &Path, hostname: &str) -> Result<PodSandbox, String> {
    let out = tokio::process::Command::new(exe)
        .arg("runtime")
        .arg("sandbox")
        .arg("--hostname")
        .arg(hostname)
        .arg(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot run {} runtime sandbox: {e}", exe.display()))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
    }
    Ok(PodSandbox::at(dir))
}

/// `mesopod runtime sandbox --hostname NAME DIR`: new IPC and UTS
/// namespaces with the pod's hostname, bind-mounted at `DIR/ipc` and
/// `DIR/uts`. Runs in a process of its own (it unshares itself).
pub(crate) fn hold(dir: &Path, hostname: &str) -> Result<(), RuntimeFailure> {
    check_hostname(hostname)?;
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| RuntimeFailure::io(parent.display(), e))?;
    }
    match make_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(RuntimeFailure(format!(
                "sandbox {} already exists",
                dir.display()
            )));
        }
        Err(e) => return Err(RuntimeFailure::io(dir.display(), e)),
    }
    let made = hold_in(dir, hostname);
    if made.is_err() {
        remove(dir);
    }
    made
}

/// `init`'s part for a [`MAKE_ANNOTATION`]: the namespaces made in the
/// existing `dir` by this process (which then joins them), still in the
/// host's mount namespace so the bind mounts outlive it. On failure the
/// namespace files are gone again, so a later start makes them anew.
pub(crate) fn hold_here(dir: &Path, hostname: &str) -> Result<(), RuntimeFailure> {
    let made = check_hostname(hostname).and_then(|()| hold_in(dir, hostname));
    if made.is_err() {
        for (_, file) in HELD {
            let path = dir.join(file);
            let _ = rustix::mount::unmount(&path, UnmountFlags::DETACH);
            let _ = std::fs::remove_file(&path);
        }
    }
    made
}

fn check_hostname(hostname: &str) -> Result<(), RuntimeFailure> {
    if hostname.is_empty() || hostname.len() > HOSTNAME_MAX {
        return Err(RuntimeFailure(format!(
            "sandbox: hostname {hostname:?} must have 1 to {HOSTNAME_MAX} characters"
        )));
    }
    Ok(())
}

fn hold_in(dir: &Path, hostname: &str) -> Result<(), RuntimeFailure> {
    // Only namespace flags, in a single-threaded process: the case
    // rustix's deprecation of `unshare` (for CLONE_FILES and friends) spares.
    #[allow(deprecated)]
    rustix::thread::unshare(UnshareFlags::NEWIPC | UnshareFlags::NEWUTS)
        .map_err(|e| RuntimeFailure::io("unshare the pod's IPC and UTS namespaces", e))?;
    rustix::system::sethostname(hostname.as_bytes())
        .map_err(|e| RuntimeFailure::io("sethostname", e))?;
    for (_, file) in HELD {
        let target = dir.join(file);
        std::fs::write(&target, b"").map_err(|e| RuntimeFailure::io(target.display(), e))?;
        let source = format!("/proc/self/ns/{file}");
        rustix::mount::mount_bind(source.as_str(), &target)
            .map_err(|e| RuntimeFailure::io(format!("bind {source} to {}", target.display()), e))?;
    }
    Ok(())
}

/// Unmounts a sandbox's namespace files and removes its directory; the
/// namespaces end once no container is left in them.
pub fn remove(dir: &Path) {
    for file in HELD.iter().map(|(_, f)| *f).chain(["net"]) {
        let path = dir.join(file);
        match rustix::mount::unmount(&path, UnmountFlags::DETACH) {
            Ok(()) | Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOENT) => {}
            // A rootless executor's are mounted only in its own namespace
            // (`rootless_ns`), where removing the file below detaches them.
            Err(rustix::io::Errno::PERM) if super::rootless_ns::active() => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot unmount a sandbox namespace")
            }
        }
    }
    // The sandbox's own tmpfs ([`make_dir`]), when it has one.
    match rustix::mount::unmount(dir, UnmountFlags::DETACH) {
        // Not a mount (made without root), or no directory at all.
        Ok(())
        | Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOENT | rustix::io::Errno::PERM) => {}
        Err(e) => tracing::warn!(dir = %dir.display(), error = %e, "cannot unmount a pod sandbox"),
    }
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(dir = %dir.display(), error = %e, "cannot remove a pod sandbox"),
    }
}

/// The names of the directories in `dir` (none if it cannot be read).
pub(crate) fn subdirs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostnames_are_cut_as_kubelet_cuts_them() {
        assert_eq!(pod_hostname("web-0"), "web-0");
        let long = format!("{}-{}", "a".repeat(62), "b".repeat(10));
        assert_eq!(pod_hostname(&long), "a".repeat(62));
        assert_eq!(pod_hostname(&"c".repeat(70)).len(), HOSTNAME_MAX);
    }

    #[test]
    fn sandboxes_join_ipc_and_uts_and_the_pods_network_when_it_has_one() {
        let mut sb = PodSandbox::at(Path::new("/s/p"));
        assert_eq!(
            sb.joins(),
            [
                ("ipc".to_owned(), "/s/p/ipc".to_owned()),
                ("uts".to_owned(), "/s/p/uts".to_owned())
            ]
        );
        sb.net = Some(PathBuf::from("/run/netns/p"));
        assert_eq!(sb.joins()[2], ("network".to_owned(), "/run/netns/p".into()));
        assert_eq!(dir_name("default/web:1"), "default_web_1");
        assert_eq!(dir_name("..x"), "x");
    }
}
