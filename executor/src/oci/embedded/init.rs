//! `init`: the container's PID 1 until it execs the container's process.

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use rustix::fs::{Mode, OFlags};
use rustix::mount::{MountFlags, MountPropagationFlags, UnmountFlags};
use rustix::process::Signal;
use rustix::thread::CapabilitySet;

use super::RuntimeFailure;
use super::state;
use crate::oci::spec::{self, Mount, Spec};

/// What `init` writes to `create` when the container is ready.
pub(super) const READY: &str = "ok\n";

/// Host devices every container gets (bind-mounted: works as root and
/// in a user namespace alike).
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// The descriptors `create` hands to the `init` it forked.
pub(crate) struct Handoff {
    /// A pidfd of `create`'s own process.
    pub(crate) spawner: Option<OwnedFd>,
    /// The pipe to `create`: `ok\n` once the container is ready, else the error.
    pub(crate) ready: std::io::PipeWriter,
    /// The template mount namespace (`mntns.rs`), when there is one.
    pub(crate) template: Option<OwnedFd>,
    /// The console socket to send the terminal's master on (`console.rs`).
    pub(crate) console: Option<OwnedFd>,
    /// Whether to wait for `start` on `exec.fifo` before the exec.
    pub(crate) start: super::create::Start,
    /// The bundle's `config.json`, as `create` read it.
    pub(crate) spec: Spec,
}

/// Runs in the process `create` forked (PID 1 of the container's PID
/// namespace); `spawner` is a pidfd of `create`'s own process; `rootless`
/// when `create` ran without root (this process is root only in the
/// container's user namespace). `ready` is the pipe to `create`: `ok\n`
/// once the container is ready, else the error (then the pipe closes).
pub(crate) fn init(
    root: &Path,
    id: &str,
    bundle: &Path,
    rootless: bool,
    handoff: Handoff,
) -> Result<(), RuntimeFailure> {
    let Handoff {
        spawner,
        ready,
        template,
        console,
        start,
        spec,
    } = handoff;
    let dir = state::dir(root, id)?;
    let dirfd = rustix::fs::open(
        &dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| RuntimeFailure::io(dir.display(), e))?;
    // The container's stdin is the runtime process' own, inherited through
    // the fork: the executor's pipe for a `stdin: true` container, else
    // /dev/null (`oci/runner.rs` gives the runtime one or the other).
    let parent_fd = spawner;
    // The spec `create` parsed, inherited through the fork: not read again.
    let result = prepare(&spec, bundle, rootless, template)
        .map(|argv| (spec, argv))
        .and_then(|(spec, argv)| {
            super::console::setup(console, spec.process.terminal).map(|()| (spec, argv))
        })
        .and_then(|(spec, argv)| seccomp(&spec).map(|()| (spec, argv)));
    // The pipe is close-on-exec: `create` also sees it close if this
    // process dies or execs before it said anything.
    let report = |text: &str| {
        let _ = std::io::Write::write_all(&mut &ready, text.as_bytes());
    };
    let (spec, program) = match result {
        Ok(v) => v,
        Err(e) => {
            report(&e.0);
            return Err(e);
        }
    };
    report(READY);
    if start == super::create::Start::OnFifo {
        // Wait for `start`: opening the FIFO's write end blocks until it reads.
        let fifo = rustix::fs::openat(
            &dirfd,
            "exec.fifo",
            OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| RuntimeFailure::io("open exec.fifo", e))?;
        rustix::io::write(&fifo, b"0").map_err(|e| RuntimeFailure::io("write exec.fifo", e))?;
        drop(fifo);
    }
    drop(dirfd);
    // With `Start::WhenCreated`, the wait below for `create`'s exit is the
    // start: `create` exits once the container's state is recorded.
    arm_parent_death(parent_fd)?;
    let p = &spec.process;
    let err = Command::new(&program)
        .arg0(&p.args[0])
        .args(&p.args[1..])
        .env_clear()
        .envs(p.env.iter().filter_map(|e| e.split_once('=')))
        .exec();
    Err(RuntimeFailure::io(format!("exec {:?}", p.args[0]), err))
}

/// The container's seccomp filter, installed as late as its failure can
/// still be reported (runc too installs it before the wait for `start`):
/// after the user, capabilities and `no_new_privs`, so only the few
/// syscalls up to the exec run under it.
pub(super) fn seccomp(spec: &Spec) -> Result<(), RuntimeFailure> {
    match &spec.linux.seccomp {
        Some(profile) => crate::oci::seccomp::compile::install(profile)
            .map_err(|e| RuntimeFailure(e.to_string())),
        None => Ok(()),
    }
}

/// Dies with the executor: once the runtime process that spawned this one
/// (`create`, or `run`, which starts the container before it exits) is
/// gone, this one is the executor's child (a subreaper), and a parent-death
/// signal armed then fires when the executor dies. Armed earlier, it would
/// fire at the spawner's exit. A pidfd reports an exit only after the
/// kernel has reparented the children, so the wait is race-free; it is
/// bounded, in case the spawner lingers. The spawner itself refuses to
/// leave a container whose executor is already gone.
fn arm_parent_death(spawner: Option<OwnedFd>) -> Result<(), RuntimeFailure> {
    let Some(fd) = spawner else { return Ok(()) };
    let mut fds = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::IN,
    )];
    let timeout = rustix::time::Timespec {
        tv_sec: 10,
        tv_nsec: 0,
    };
    loop {
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Err(rustix::io::Errno::INTR) => continue,
            Ok(0) => {
                return Err(RuntimeFailure(
                    "the runtime process that created this container did not exit".into(),
                ));
            }
            Ok(_) => break,
            Err(e) => return Err(RuntimeFailure::io("poll the runtime process", e)),
        }
    }
    rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
        .map_err(|e| RuntimeFailure::io("PR_SET_PDEATHSIG", e))
}

/// Everything up to the exec; returns the program's path inside the root.
fn prepare(
    spec: &Spec,
    bundle: &Path,
    rootless: bool,
    template: Option<OwnedFd>,
) -> Result<PathBuf, RuntimeFailure> {
    if spec.process.args.is_empty() {
        return Err(RuntimeFailure("no command specified".into()));
    }
    let rootfs = {
        let p = PathBuf::from(&spec.root.path);
        if p.is_absolute() { p } else { bundle.join(p) }
    };
    // The pod's first container makes the sandbox's namespaces (this
    // process, still in the host's mount namespace), then joins them as
    // every other container does.
    if let Some(dir) = spec.annotations.get(crate::oci::sandbox::MAKE_ANNOTATION) {
        if rootless && !crate::oci::rootless_ns::joined() {
            // Its namespace files are bind mounts on the host, which only
            // root (or a rootless executor's namespace holder) may make.
            return Err(RuntimeFailure(
                "rootless: a pod sandbox (shared IPC and UTS namespaces) needs root".into(),
            ));
        }
        crate::oci::sandbox::hold_here(Path::new(dir), spec.hostname.as_deref().unwrap_or(""))?;
    }
    super::create::enter_namespaces(spec, false, template.is_none())?;
    // With the template, what the container needs from the host is cloned
    // first (its paths do not resolve in the template).
    let host = match &template {
        Some(_) => Some(HostMounts::from_host(&rootfs, spec)?),
        None => None,
    };
    if let Some(t) = &template {
        super::mntns::enter(t)?;
    }
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .map_err(|e| RuntimeFailure::io("make / private", e))?;
    let rootfs = match &host {
        Some(h) => {
            let at = PathBuf::from(super::mntns::ROOTFS);
            let dir = crate::oci::inroot::open_root(&at)
                .map_err(|e| RuntimeFailure::io(at.display(), e))?;
            super::mntns::attach(&h.rootfs, &dir)
                .map_err(|e| RuntimeFailure::io("attach the root filesystem", e))?;
            at
        }
        None => {
            rustix::mount::mount_bind_recursive(&rootfs, &rootfs)
                .map_err(|e| RuntimeFailure::io(format!("bind {}", rootfs.display()), e))?;
            rootfs
        }
    };
    for (i, m) in spec.mounts.iter().enumerate() {
        let source = host
            .as_ref()
            .and_then(|h| h.binds.get(i))
            .and_then(Option::as_ref);
        mount_one(&rootfs, m, rootless, source)?;
    }
    devices(&rootfs, host.as_ref().map(|h| &h.devices[..]))?;
    if spec.hostname.is_some()
        && !spec
            .linux
            .namespaces
            .iter()
            .any(|n| n.kind == "uts" && n.path.is_some())
    {
        let name = spec.hostname.as_deref().unwrap_or_default();
        rustix::system::sethostname(name.as_bytes())
            .map_err(|e| RuntimeFailure::io("sethostname", e))?;
    }
    rustix::process::chdir(&rootfs).map_err(|e| RuntimeFailure::io("chdir rootfs", e))?;
    rustix::process::pivot_root(".", ".").map_err(|e| RuntimeFailure::io("pivot_root", e))?;
    rustix::mount::unmount(".", UnmountFlags::DETACH)
        .map_err(|e| RuntimeFailure::io("detach the old root", e))?;
    rustix::process::chdir("/").map_err(|e| RuntimeFailure::io("chdir /", e))?;
    for path in &spec.linux.masked_paths {
        mask(path);
    }
    for path in &spec.linux.readonly_paths {
        if rustix::mount::mount_bind(path.as_str(), path.as_str()).is_ok() {
            let _ = rustix::mount::mount_remount(
                path.as_str(),
                MountFlags::BIND | MountFlags::RDONLY,
                "",
            );
        }
    }
    if spec.root.readonly {
        rustix::mount::mount_remount("/", MountFlags::BIND | MountFlags::RDONLY, "")
            .map_err(|e| RuntimeFailure::io("remount / read-only", e))?;
    }
    let p = &spec.process;
    let cwd = Path::new(&p.cwd);
    if !cwd.exists() {
        std::fs::create_dir_all(cwd)
            .map_err(|e| RuntimeFailure::io(format!("mkdir {}", p.cwd), e))?;
    }
    let program = find_program(&p.args[0], &p.env)?;
    user(spec, rootless)?;
    rustix::process::chdir(cwd).map_err(|e| RuntimeFailure::io(format!("chdir {}", p.cwd), e))?;
    if p.no_new_privileges {
        rustix::thread::set_no_new_privs(true)
            .map_err(|e| RuntimeFailure::io("no_new_privs", e))?;
    }
    Ok(program)
}

/// Detached copies of the host mounts a container needs, for a container
/// made in the template namespace ([`super::mntns`]).
struct HostMounts {
    rootfs: OwnedFd,
    /// Per spec mount: its bind source, and whether that is a file.
    binds: Vec<Option<(OwnedFd, bool)>>,
    /// [`DEVICES`], in order.
    devices: Vec<OwnedFd>,
}

impl HostMounts {
    fn from_host(rootfs: &Path, spec: &Spec) -> Result<HostMounts, RuntimeFailure> {
        let mut binds = Vec::new();
        for m in &spec.mounts {
            let source = m.source.clone().unwrap_or_default();
            let bind = bind_kind(m).is_some() && m.kind.as_deref() != Some("cgroup");
            binds.push(if bind {
                let file = Path::new(&source).is_file();
                let recursive = !file && m.options.iter().any(|o| o == "rbind");
                Some((
                    super::mntns::clone_tree(Path::new(&source), recursive)?,
                    file,
                ))
            } else {
                None
            });
        }
        let devices = DEVICES
            .iter()
            .map(|d| super::mntns::clone_tree(&Path::new("/dev").join(d), false))
            .collect::<Result<_, _>>()?;
        Ok(HostMounts {
            rootfs: super::mntns::clone_tree(rootfs, true)?,
            binds,
            devices,
        })
    }
}

/// `Some(kind)` when the mount is a bind (by type or option).
fn bind_kind(m: &Mount) -> Option<&str> {
    let kind = m.kind.as_deref().unwrap_or("bind");
    (kind == "bind" || m.options.iter().any(|o| o == "bind" || o == "rbind")).then_some(kind)
}

/// `cloned`: the bind source, cloned from the host before the container
/// entered the template namespace (with whether it is a file).
fn mount_one(
    rootfs: &Path,
    m: &Mount,
    rootless: bool,
    cloned: Option<&(OwnedFd, bool)>,
) -> Result<(), RuntimeFailure> {
    // A cgroup namespace view is not offered: containers see no cgroupfs.
    if m.kind.as_deref() == Some("cgroup") {
        return Ok(());
    }
    let kind = m.kind.as_deref().unwrap_or("bind");
    let is_bind = bind_kind(m).is_some();
    let source = m.source.clone().unwrap_or_else(|| kind.to_owned());
    // The destination is resolved inside the rootfs: an image's symlink
    // (`/data -> /etc`) must not make us create or mount on the host.
    let in_root = |e| RuntimeFailure::io(format!("mount destination {}", m.destination), e);
    let root = crate::oci::inroot::open_root(rootfs).map_err(in_root)?;
    let file = match cloned {
        Some((_, file)) => *file,
        None => is_bind && Path::new(&source).is_file(),
    };
    let target_fd = crate::oci::inroot::ensure_in(&root, &m.destination, file).map_err(in_root)?;
    let target = PathBuf::from(crate::oci::inroot::proc_path(&target_fd));
    let mut flags = MountFlags::empty();
    let mut data = Vec::new();
    for o in &m.options {
        match o.as_str() {
            "ro" => flags |= MountFlags::RDONLY,
            "rw" | "bind" | "rbind" | "private" | "rprivate" => {}
            "nosuid" => flags |= MountFlags::NOSUID,
            "nodev" => flags |= MountFlags::NODEV,
            "noexec" => flags |= MountFlags::NOEXEC,
            "strictatime" => flags |= MountFlags::STRICTATIME,
            "relatime" => flags |= MountFlags::RELATIME,
            "noatime" => flags |= MountFlags::NOATIME,
            other => data.push(other.to_owned()),
        }
    }
    let what = |e| RuntimeFailure::io(format!("mount {kind} on {}", m.destination), e);
    if is_bind {
        // OCI's `bind` is one mount, `rbind` the tree below it too. A file
        // has no tree, and its recursive bind still walks every mount of
        // the filesystem it sits on (the host's root, with each running
        // container's mounts on it), which made the pod's /etc files the
        // costliest step of a start.
        if let Some((tree, _)) = cloned {
            super::mntns::attach(tree, &target_fd).map_err(what)?;
        } else if file || !m.options.iter().any(|o| o == "rbind") {
            rustix::mount::mount_bind(source.as_str(), &target).map_err(what)?;
        } else {
            rustix::mount::mount_bind_recursive(source.as_str(), &target).map_err(what)?;
        }
        if flags.contains(MountFlags::RDONLY) {
            // Opened again, the path now resolves to the new mount's root.
            let mounted =
                crate::oci::inroot::ensure_in(&root, &m.destination, file).map_err(in_root)?;
            let mounted = crate::oci::inroot::proc_path(&mounted);
            rustix::mount::mount_remount(mounted.as_str(), MountFlags::BIND | flags, "")
                .map_err(what)?;
        }
        return Ok(());
    }
    let data = CString::new(data.join(",")).map_err(|e| RuntimeFailure(e.to_string()))?;
    match rustix::mount::mount(source.as_str(), &target, kind, flags, Some(data.as_c_str())) {
        Ok(()) => Ok(()),
        // mqueue needs kernel support some hosts lack; nothing in a pod needs it.
        Err(_) if kind == "mqueue" => Ok(()),
        // A user namespace may mount sysfs only with a network namespace
        // of its own; without one the host's is bound read-only, as runc
        // does for rootless containers.
        Err(rustix::io::Errno::PERM) if kind == "sysfs" && rootless => {
            rustix::mount::mount_bind_recursive("/sys", &target).map_err(what)?;
            let _ = rustix::mount::mount_remount(&target, MountFlags::BIND | flags, "");
            Ok(())
        }
        Err(e) => Err(what(e)),
    }
}

/// `cloned`: [`DEVICES`] cloned from the host (in the template namespace).
fn devices(rootfs: &Path, cloned: Option<&[OwnedFd]>) -> Result<(), RuntimeFailure> {
    let dev = rootfs.join("dev");
    for (i, d) in DEVICES.iter().enumerate() {
        let target = dev.join(d);
        if !target.exists() {
            std::fs::write(&target, b"").map_err(|e| RuntimeFailure::io(target.display(), e))?;
        }
        let bound = match cloned.and_then(|c| c.get(i)) {
            Some(tree) => rustix::fs::open(&target, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
                .and_then(|t| super::mntns::attach(tree, &t)),
            None => rustix::mount::mount_bind(format!("/dev/{d}").as_str(), &target),
        };
        bound.map_err(|e| RuntimeFailure::io(format!("bind /dev/{d}"), e))?;
    }
    for (link, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("ptmx", "pts/ptmx"),
    ] {
        let _ = std::os::unix::fs::symlink(to, dev.join(link));
    }
    Ok(())
}

fn mask(path: &str) {
    let p = Path::new(path);
    if p.is_dir() {
        let _ = rustix::mount::mount("tmpfs", p, "tmpfs", MountFlags::RDONLY, None);
    } else if p.exists() {
        let _ = rustix::mount::mount_bind("/dev/null", p);
    }
}

/// `argv[0]` as exec will find it: a path, or the first match on the
/// container's `PATH`.
pub(super) fn find_program(arg0: &str, env: &[String]) -> Result<PathBuf, RuntimeFailure> {
    let not_found = || {
        RuntimeFailure(format!(
            "exec: {arg0:?}: executable file not found in $PATH"
        ))
    };
    if arg0.contains('/') {
        return if Path::new(arg0).exists() {
            Ok(PathBuf::from(arg0))
        } else {
            Err(RuntimeFailure(format!(
                "exec: {arg0:?}: no such file or directory"
            )))
        };
    }
    let path = env
        .iter()
        .find_map(|e| e.strip_prefix("PATH="))
        .unwrap_or("/usr/local/bin:/usr/bin:/bin");
    path.split(':')
        .map(|d| Path::new(d).join(arg0))
        .find(|p| p.is_file())
        .ok_or_else(not_found)
}

fn cap_set(names: &[String]) -> CapabilitySet {
    names
        .iter()
        .filter_map(|n| spec::capability_number(n))
        .fold(CapabilitySet::empty(), |acc, n| {
            acc | CapabilitySet::from_bits_retain(1u64 << n)
        })
}

/// Groups, gid, uid and capabilities, in the order the kernel needs.
/// `rootless`: ids the user namespace does not map are refused with that
/// reason (the single-id mapping has 0 alone and denies setgroups).
pub(super) fn user(spec: &Spec, rootless: bool) -> Result<(), RuntimeFailure> {
    let p = &spec.process;
    let caps = p.capabilities.clone().unwrap_or_default();
    let bounding = cap_set(&caps.bounding);
    let last = u32::try_from(spec::ALL_CAPABILITIES.len()).unwrap_or(41);
    for n in 0..last {
        let cap = CapabilitySet::from_bits_retain(1u64 << n);
        if !bounding.contains(cap) {
            // Capabilities newer than this kernel are not in its bounding set at all.
            let _ = rustix::thread::remove_capability_from_bounding_set(cap);
        }
    }
    let groups: Vec<rustix::process::Gid> = p
        .user
        .additional_gids
        .iter()
        .map(|g| rustix::process::Gid::from_raw(*g))
        .collect();
    if rootless {
        // Only the ids this user namespace maps (one, or a subordinate range).
        let u = &p.user;
        if let Some(why) = crate::oci::rootless_ids::unmapped_here(u.uid, u.gid, &u.additional_gids)
        {
            return Err(RuntimeFailure(why));
        }
    }
    if !rootless || crate::oci::rootless_ids::setgroups_allowed() {
        rustix::thread::set_thread_groups(&groups)
            .map_err(|e| RuntimeFailure::io("setgroups", e))?;
    }
    rustix::thread::set_keep_capabilities(true)
        .map_err(|e| RuntimeFailure::io("PR_SET_KEEPCAPS", e))?;
    let gid = rustix::process::Gid::from_raw(p.user.gid);
    rustix::thread::set_thread_res_gid(gid, gid, gid)
        .map_err(|e| RuntimeFailure::io("setresgid", e))?;
    let uid = rustix::process::Uid::from_raw(p.user.uid);
    rustix::thread::set_thread_res_uid(uid, uid, uid)
        .map_err(|e| RuntimeFailure::io("setresuid", e))?;
    rustix::thread::set_capabilities(
        None,
        rustix::thread::CapabilitySets {
            effective: cap_set(&caps.effective),
            permitted: cap_set(&caps.permitted),
            inheritable: cap_set(&caps.inheritable),
        },
    )
    .map_err(|e| RuntimeFailure::io("capset", e))?;
    let _ = rustix::thread::set_keep_capabilities(false);
    Ok(())
}
