//! The executor's own user and mount namespace, for pods without root.
//!
//! A non-root executor cannot mount: not its pods' overlay root
//! filesystems, not their sandbox namespace files. So it starts one small
//! process of its own, the *holder* (`mesopod runtime rootless-ns`), which
//! makes a user namespace (this user's uid and gid as 0: a single-id
//! mapping) and a mount namespace owned by it, and then waits on its stdin:
//!
//! - the executor asks it, one line at a time, to mount an overlay root
//!   filesystem or to release one ([`mount_overlay`], [`release`]); the
//!   mounts exist only in the holder's mount namespace, never on the host;
//! - every runtime command the executor runs joins the holder's user and
//!   mount namespaces first ([`JOIN_ENV`], [`join_from_env`]), so
//!   `mesopod runtime` sees those mounts and makes each container's own
//!   mount, PID, IPC and UTS namespaces inside that user namespace, the
//!   pod's shared sandbox included (a pod's containers can join it because
//!   they all belong to the same user namespace);
//! - the executor reads what is inside a root filesystem (the image's
//!   `/etc/passwd`) through the holder's root, `/proc/<holder>/root`
//!   ([`view`]).
//!
//! The holder dies with its executor: its stdin is the executor's pipe,
//! and at end of file it kills every process left in its user namespace
//! (the pods' containers: they arm a parent-death signal too) and exits,
//! which ends its mount namespace and every mount in it.

use std::io::{BufRead as _, BufReader, Write as _};
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, OnceLock};

use rustix::thread::{LinkNameSpaceType, UnshareFlags};

use super::embedded::RuntimeFailure;

/// The environment variable that tells `mesopod runtime` the pid of the
/// holder whose user and mount namespaces it joins before anything else.
pub(crate) const JOIN_ENV: &str = "MESOPOD_ROOTLESS_NS";

/// The executor's side of its holder.
struct Holder {
    pid: u32,
    io: Mutex<(ChildStdin, BufReader<ChildStdout>)>,
    /// Never waited for: the holder lives as long as the executor.
    _child: Child,
}

static HOLDER: OnceLock<Holder> = OnceLock::new();

/// Why a rootless executor cannot run pods with these settings, if so:
/// another runtime (runc) would need its own rootless setup in this
/// namespace, and CNI plugins need root on the host.
pub(crate) fn check(runtime: &super::RuntimeKind, cni: bool) -> Result<(), String> {
    if let super::RuntimeKind::Cli(path) = runtime {
        return Err(format!(
            "rootless: only the embedded runtime runs pods without root, not {}",
            path.display()
        ));
    }
    if cni {
        return Err("rootless: CNI networks (--cni-conf-dir) need root;                     without root pods use the agent's network"
            .into());
    }
    Ok(())
}

/// Starts this executor's holder with `exe runtime rootless-ns` (once per
/// process); returns its pid.
pub(crate) fn start(exe: &Path) -> Result<u32, String> {
    if let Some(h) = HOLDER.get() {
        return Ok(h.pid);
    }
    let ranges = super::rootless_ids::subordinate();
    let mut child = Command::new(exe)
        .args(["runtime", "rootless-ns"])
        .args(ranges.map(|_| "--map-by-parent"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!(
                "rootless: cannot run {} runtime rootless-ns: {e}",
                exe.display()
            )
        })?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("rootless: the namespace holder has no pipes".into());
    };
    let mut stdin = stdin;
    let mut stdout = BufReader::new(stdout);
    let mut line = String::new();
    let _ = stdout.read_line(&mut line);
    if let (Some(ranges), Some(pid)) = (ranges, line.strip_prefix("userns ")) {
        let pid = pid.trim().parse::<u32>().unwrap_or(0);
        // Mapped from out here (only the parent namespace may); failing
        // that, the holder maps its own ids alone.
        let how = match super::rootless_ids::map_with_helpers(pid, ranges) {
            Ok(()) => "mapped",
            Err(e) => {
                tracing::warn!(error = %e, "rootless: cannot map the subordinate ids; only the agent's own");
                "self"
            }
        };
        let _ = writeln!(stdin, "{how}").and_then(|()| stdin.flush());
        line.clear();
        let _ = stdout.read_line(&mut line);
    }
    let Some(pid) = line
        .strip_prefix("ready ")
        .and_then(|p| p.trim().parse::<u32>().ok())
    else {
        let _ = child.kill();
        let out = child.wait_with_output().ok();
        let why = out
            .map(|o| String::from_utf8_lossy(&o.stderr).trim().to_owned())
            .unwrap_or_default();
        return Err(format!(
            "rootless: cannot make the executor's user and mount namespace: {why}"
        ));
    };
    // Its errors from now on go to the executor's log, not a pipe nobody reads.
    if let Some(err) = child.stderr.take() {
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                tracing::warn!(holder = %l, "rootless namespace holder");
            }
        });
    }
    let map = std::fs::read_to_string(format!("/proc/{pid}/uid_map")).unwrap_or_default();
    tracing::info!(
        holder = pid,
        uid_map = %map.split_whitespace().collect::<Vec<_>>().join(" "),
        "rootless: pods run in this executor's own user and mount namespace"
    );
    let _ = HOLDER.set(Holder {
        pid,
        io: Mutex::new((stdin, stdout)),
        _child: child,
    });
    Ok(HOLDER.get().map_or(pid, |h| h.pid))
}

/// Whether this executor runs its pods in a holder's namespaces.
pub(crate) fn active() -> bool {
    HOLDER.get().is_some()
}

/// The holder's pid, for [`JOIN_ENV`].
pub(crate) fn pid() -> Option<u32> {
    HOLDER.get().map(|h| h.pid)
}

/// `path` as the holder's mount namespace shows it (an overlay root
/// filesystem is mounted only there); `path` itself without a holder.
pub(crate) fn view(path: &Path) -> PathBuf {
    match pid() {
        Some(pid) if path.is_absolute() => {
            PathBuf::from(format!("/proc/{pid}/root")).join(path.strip_prefix("/").unwrap_or(path))
        }
        _ => path.to_path_buf(),
    }
}

fn request(fields: &[&str]) -> Result<(), String> {
    let holder = HOLDER
        .get()
        .ok_or("rootless: no namespace holder is running")?;
    if fields.iter().any(|f| f.contains(['\t', '\n'])) {
        return Err(format!(
            "rootless: a path with a tab or newline: {fields:?}"
        ));
    }
    let mut io = holder
        .io
        .lock()
        .map_err(|_| "rootless: holder lock poisoned")?;
    let (stdin, stdout) = &mut *io;
    writeln!(stdin, "{}", fields.join("\t"))
        .and_then(|()| stdin.flush())
        .map_err(|e| format!("rootless: the namespace holder is gone: {e}"))?;
    let mut reply = String::new();
    stdout
        .read_line(&mut reply)
        .map_err(|e| format!("rootless: the namespace holder is gone: {e}"))?;
    match reply.trim_end().strip_prefix("err ") {
        Some(why) => Err(why.to_owned()),
        None if reply.trim_end() == "ok" => Ok(()),
        None => Err("rootless: the namespace holder exited".into()),
    }
}

/// Mounts an overlay with mount data `data` at `target`, in the holder's
/// mount namespace.
pub(crate) fn mount_overlay(target: &Path, data: &str) -> Result<(), String> {
    request(&["overlay", &target.display().to_string(), data])
}

/// Unmounts a bundle's `rootfs` and removes the bundle with the writable
/// layer it links to ([`super::rootfs::release`]), in the holder (root of
/// the namespace, it may remove what containers wrote there as any user).
pub(crate) fn release(bundle: &Path) -> Result<(), String> {
    request(&["release", &bundle.display().to_string()])
}

/// Why a container's `uid`, `gid` and supplemental groups cannot run in
/// the holder's user namespace, if so ([`super::rootless_ids::unmapped`]).
pub(crate) fn unmapped(uid: u32, gid: u32, groups: &[u32]) -> Option<String> {
    let pid = pid()?;
    let read = |f: &str| std::fs::read_to_string(format!("/proc/{pid}/{f}")).unwrap_or_default();
    let (u, g, s) = (read("uid_map"), read("gid_map"), read("setgroups"));
    super::rootless_ids::unmapped((&u, &g, &s), uid, gid, groups)
}

/// Whether this runtime process runs for a rootless executor (it joined,
/// or will join, a holder's namespaces).
pub(crate) fn joined() -> bool {
    std::env::var_os(JOIN_ENV).is_some()
}

/// Whether process `pid` is in this process' user namespace.
pub(crate) fn same_user_ns(pid: impl std::fmt::Display) -> bool {
    let ino = |p: &str| {
        std::fs::metadata(p)
            .ok()
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
    };
    let theirs = ino(&format!("/proc/{pid}/ns/user"));
    theirs.is_some() && theirs == ino("/proc/self/ns/user")
}

/// First thing a `mesopod runtime` command does: with [`JOIN_ENV`] set,
/// joins that holder's user namespace, then its mount namespace (this
/// process must be single-threaded, as the runtime is). A process already
/// in it (`exec-inner`, run by `exec`) joins nothing.
pub(crate) fn join_from_env() -> Result<(), RuntimeFailure> {
    let Some(pid) = std::env::var_os(JOIN_ENV) else {
        return Ok(());
    };
    let pid: u32 = pid
        .to_str()
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| RuntimeFailure(format!("{JOIN_ENV} is not a pid")))?;
    if same_user_ns(pid) {
        return Ok(());
    }
    let open = |ns: &str| {
        let path = format!("/proc/{pid}/ns/{ns}");
        std::fs::File::open(&path).map_err(|e| RuntimeFailure::io(&path, e))
    };
    let (user, mnt) = (open("user")?, open("mnt")?);
    rustix::thread::move_into_link_name_space(user.as_fd(), Some(LinkNameSpaceType::User))
        .map_err(|e| RuntimeFailure::io("rootless: join the executor's user namespace", e))?;
    rustix::thread::move_into_link_name_space(mnt.as_fd(), Some(LinkNameSpaceType::Mount))
        .map_err(|e| RuntimeFailure::io("rootless: join the executor's mount namespace", e))?;
    Ok(())
}

/// `mesopod runtime rootless-ns`: the holder. Makes the namespaces, says
/// `ready <pid>`, serves requests until its stdin ends, then kills what is
/// left in its user namespace.
/// With `--map-by-parent` the executor maps its ids (`newuidmap`): the
/// holder says `userns <pid>` and waits for `mapped` (or `self`: it maps
/// its own ids alone).
pub(crate) fn serve(by_parent: bool) -> Result<(), RuntimeFailure> {
    let ids = super::rootless::unshare_unmapped()?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let stdin = std::io::stdin();
    let mut requests = stdin.lock().lines();
    if by_parent {
        writeln!(out, "userns {}", std::process::id())
            .and_then(|()| out.flush())
            .map_err(|e| RuntimeFailure::io("stdout", e))?;
        match requests.next() {
            Some(Ok(l)) if l == "mapped" => {}
            Some(Ok(l)) if l == "self" => super::rootless::map_self(ids)?,
            other => return Err(RuntimeFailure(format!("rootless: no mapping ({other:?})"))),
        }
    } else {
        super::rootless::map_self(ids)?;
    }
    // Only a namespace flag, in a single-threaded process (the runtime's).
    #[allow(deprecated)]
    rustix::thread::unshare(UnshareFlags::NEWNS)
        .map_err(|e| RuntimeFailure::io("rootless: unshare the mount namespace", e))?;
    // Nothing mounted here may reach the host (a namespace of a user
    // namespace of its own gets slave mounts already; said again).
    rustix::mount::mount_change(
        "/",
        rustix::mount::MountPropagationFlags::REC
            | rustix::mount::MountPropagationFlags::DOWNSTREAM,
    )
    .map_err(|e| RuntimeFailure::io("rootless: make / a slave", e))?;
    // A signal to the executor's process group is not this process' end:
    // only the executor's exit (its pipe's end) is, and then the sweep.
    let _ = rustix::process::setsid();
    writeln!(out, "ready {}", std::process::id())
        .and_then(|()| out.flush())
        .map_err(|e| RuntimeFailure::io("stdout", e))?;
    for line in requests {
        let Ok(line) = line else { break };
        let reply = match answer(&line) {
            Ok(()) => "ok".to_owned(),
            Err(e) => format!("err {}", e.replace('\n', " ")),
        };
        if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
    sweep();
    Ok(())
}

fn answer(line: &str) -> Result<(), String> {
    let fields: Vec<&str> = line.split('\t').collect();
    match fields[..] {
        ["overlay", target, data] => super::rootfs::mount_overlay_here(Path::new(target), data),
        ["release", bundle] => {
            super::rootfs::release_here(Path::new(bundle));
            match std::fs::symlink_metadata(bundle) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                _ => Err(format!("cannot remove {bundle}")),
            }
        }
        _ => Err(format!("unknown request {line:?}")),
    }
}

/// Kills every other process in this user namespace until none is left
/// (a container may fork while it is being killed).
fn sweep() {
    let me = std::process::id();
    let Ok(own) = std::fs::metadata("/proc/self/ns/user") else {
        return;
    };
    let own = std::os::unix::fs::MetadataExt::ino(&own);
    for _ in 0..100 {
        let mut left = 0;
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<i32>().ok()) else {
                continue;
            };
            let ours = std::fs::metadata(e.path().join("ns/user"))
                .is_ok_and(|m| std::os::unix::fs::MetadataExt::ino(&m) == own);
            if pid as u32 != me && ours {
                left += 1;
                if let Some(p) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                }
            }
        }
        if left == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
