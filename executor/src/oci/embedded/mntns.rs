//! A small mount namespace to make containers' from.
//!
//! A new mount namespace starts as a copy of its creator's, and a container
//! then detaches all of it under `pivot_root`: with the host's mounts
//! (every running container's root filesystem and sandbox files among
//! them, thousands on a busy host) that copy and detach were a third of a
//! container start's CPU. So the runtime keeps one template namespace per
//! runtime root, holding only a tmpfs with `/rootfs` and a `/proc` (for
//! `/proc/self/fd` paths): `init` clones what it needs from the host
//! (the root filesystem, bind sources, devices) as detached mounts
//! (`open_tree`), enters the template, unshares a copy of it (two mounts)
//! and attaches them there.
//!
//! The template is held by a process of its own, forked for the purpose
//! (once per runtime root, under a lock) and named with its start time in
//! `<root>/mnt-template.pid`: it becomes the executor's child when the
//! `create` that forked it exits, and then dies with the executor
//! (`PR_SET_PDEATHSIG`), so nothing is left mounted on the host. Root only:
//! a rootless container's namespaces must belong to its user namespace.

use std::os::fd::{AsFd as _, OwnedFd};
use std::path::Path;

use rustix::fs::{FlockOperation, Mode, OFlags};
use rustix::mount::{MountFlags, MountPropagationFlags, OpenTreeFlags, UnmountFlags};

use super::RuntimeFailure;
use super::fork::{Forked, fork};
use super::state::proc_stat;

/// The holder's pid and start time, under the runtime root.
const PID_FILE: &str = "mnt-template.pid";

/// The template's directory the container's root filesystem is attached at.
pub(super) const ROOTFS: &str = "/rootfs";

/// The runtime root's template namespace, made if there is none yet.
pub(super) fn template(root: &Path) -> Result<OwnedFd, RuntimeFailure> {
    let path = root.join(PID_FILE);
    if let Some(fd) = open_template(&path) {
        return Ok(fd);
    }
    let lock_path = root.join("mnt-template.lock");
    let lock = rustix::fs::open(
        &lock_path,
        OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| RuntimeFailure::io(lock_path.display(), e))?;
    rustix::fs::flock(&lock, FlockOperation::LockExclusive)
        .map_err(|e| RuntimeFailure::io("lock the mount template", e))?;
    if let Some(fd) = open_template(&path) {
        return Ok(fd);
    }
    make(root, &path, lock)?;
    open_template(&path).ok_or_else(|| RuntimeFailure("the mount template did not open".into()))
}

/// The holder's namespace, if the holder `pid_file` names is alive.
fn open_template(pid_file: &Path) -> Option<OwnedFd> {
    let text = std::fs::read_to_string(pid_file).ok()?;
    let (pid, start) = text.trim().split_once(' ')?;
    let (pid, start): (i32, u64) = (pid.parse().ok()?, start.parse().ok()?);
    let alive = || proc_stat(pid).is_some_and(|(t, zombie)| t == start && !zombie);
    if !alive() {
        return None;
    }
    let ns = format!("/proc/{pid}/ns/mnt");
    let fd = rustix::fs::open(ns.as_str(), OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    // Checked again: the pid could have been reused between the two looks.
    alive().then_some(fd)
}

/// Forks the holder and records it in `pid_file` once its namespace is made.
fn make(root: &Path, pid_file: &Path, lock: OwnedFd) -> Result<(), RuntimeFailure> {
    let (ready_rx, ready_tx) = std::io::pipe().map_err(|e| RuntimeFailure::io("pipe", e))?;
    let me = rustix::process::pidfd_open(
        rustix::process::getpid(),
        rustix::process::PidfdFlags::empty(),
    )
    .map_err(|e| RuntimeFailure::io("pidfd", e))?;
    let pid = match fork()? {
        Forked::Child => {
            drop((ready_rx, lock));
            // The container's stdio (log pipes, an attach's stdin) must
            // not be held open by a process that outlives the container.
            if let Ok(null) = rustix::fs::open("/dev/null", OFlags::RDWR, Mode::empty()) {
                let _ = rustix::stdio::dup2_stdin(&null);
                let _ = rustix::stdio::dup2_stdout(&null);
                let _ = rustix::stdio::dup2_stderr(&null);
            }
            let said = match build(root) {
                Ok(()) => "ok".to_owned(),
                Err(e) => e.0,
            };
            let _ = std::io::Write::write_all(&mut &ready_tx, said.as_bytes());
            drop(ready_tx);
            if said == "ok" {
                hold(me);
            }
            std::process::exit(1);
        }
        Forked::Parent(pid) => pid,
    };
    drop((ready_tx, me, lock));
    let mut said = String::new();
    let _ = std::io::Read::read_to_string(&mut &ready_rx, &mut said);
    if said != "ok" {
        let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty());
        return Err(RuntimeFailure(format!("mount template: {said}")));
    }
    let pid = pid.as_raw_nonzero().get();
    let start = proc_stat(pid).map(|(t, _)| t).unwrap_or_default();
    let tmp = pid_file.with_extension("tmp");
    std::fs::write(&tmp, format!("{pid} {start}"))
        .and_then(|()| std::fs::rename(&tmp, pid_file))
        .map_err(|e| RuntimeFailure::io(pid_file.display(), e))
}

/// The holder's life once its namespace is made: it waits for `create`
/// (`spawner`) to exit, then lives as long as its new parent, the
/// executor (a subreaper). Without a subreaper it would be init's child
/// for ever, so it leaves (the next `create` makes another).
fn hold(spawner: OwnedFd) -> ! {
    let mut fds = [rustix::event::PollFd::new(
        &spawner,
        rustix::event::PollFlags::IN,
    )];
    while let Err(rustix::io::Errno::INTR) = rustix::event::poll(&mut fds, None) {}
    let armed =
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    if armed.is_err() || rustix::process::getppid().is_none_or(|p| p.as_raw_nonzero().get() == 1) {
        std::process::exit(0);
    }
    loop {
        // Nothing to wait for: the parent-death signal ends it.
        std::thread::sleep(std::time::Duration::from_secs(3600));
    }
}

/// In the forked process: a namespace holding a tmpfs root with
/// `/rootfs` and `/proc`.
fn build(root: &Path) -> Result<(), RuntimeFailure> {
    let io = RuntimeFailure::io;
    // Only a namespace flag, in a single-threaded process.
    #[allow(deprecated)]
    rustix::thread::unshare(rustix::thread::UnshareFlags::NEWNS).map_err(|e| io("unshare", e))?;
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .map_err(|e| io("make / private", e))?;
    // The runtime root is mounted over in this namespace only.
    rustix::mount::mount(
        "tmpfs",
        root,
        "tmpfs",
        MountFlags::empty(),
        Some(c"mode=0700,size=64k"),
    )
    .map_err(|e| io("tmpfs", e))?;
    for d in ["rootfs", "proc"] {
        std::fs::create_dir(root.join(d)).map_err(|e| RuntimeFailure::io(d, e))?;
    }
    rustix::mount::mount(
        "proc",
        root.join("proc"),
        "proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        None,
    )
    .map_err(|e| io("mount proc", e))?;
    rustix::process::chdir(root).map_err(|e| io("chdir", e))?;
    rustix::process::pivot_root(".", ".").map_err(|e| io("pivot_root", e))?;
    rustix::mount::unmount(".", UnmountFlags::DETACH).map_err(|e| io("detach the old root", e))?;
    Ok(())
}

/// A detached copy of the mount at `path` (with the mounts below it when
/// `recursive`), to attach in another namespace.
pub(super) fn clone_tree(path: &Path, recursive: bool) -> Result<OwnedFd, RuntimeFailure> {
    let mut flags = OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC;
    if recursive {
        flags |= OpenTreeFlags::AT_RECURSIVE;
    }
    rustix::mount::open_tree(rustix::fs::CWD, path, flags)
        .map_err(|e| RuntimeFailure::io(format!("clone the mount at {}", path.display()), e))
}

/// Attaches the detached `tree` on the file or directory `target` is open at.
pub(super) fn attach(tree: &OwnedFd, target: &OwnedFd) -> rustix::io::Result<()> {
    rustix::mount::move_mount(
        tree.as_fd(),
        "",
        target.as_fd(),
        "",
        rustix::mount::MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH
            | rustix::mount::MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )
}

/// Enters `template` and unshares a copy of it for this container.
pub(super) fn enter(template: &OwnedFd) -> Result<(), RuntimeFailure> {
    rustix::thread::move_into_link_name_space(
        template.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Mount),
    )
    .map_err(|e| RuntimeFailure::io("enter the mount template", e))?;
    // Only a namespace flag, in a single-threaded process.
    #[allow(deprecated)]
    rustix::thread::unshare(rustix::thread::UnshareFlags::NEWNS)
        .map_err(|e| RuntimeFailure::io("unshare the mount namespace", e))
}
