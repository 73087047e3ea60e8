//! `create`: cgroups, namespaces, and the container's `init` process.

use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};
use rustix::process::{Pid, Signal, WaitOptions};
use rustix::thread::{LinkNameSpaceType, UnshareFlags};

use super::RuntimeFailure;
use super::state::{self, ContainerState};
use crate::oci::cgroup;
use crate::oci::spec::Spec;

/// How long `init` may take to build the root filesystem.
const INIT_TIMEOUT: Duration = Duration::from_secs(30);

/// When `init` execs the container's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// Once `start` opens `exec.fifo` (runc's `create`).
    OnFifo,
    /// As soon as `create` has recorded the container and exited (runc's
    /// `run --detach`): no FIFO to make on disk, nor a second step to open it.
    WhenCreated,
}

pub(crate) fn read_spec(bundle: &Path) -> Result<Spec, RuntimeFailure> {
    let path = bundle.join("config.json");
    let bytes = std::fs::read(&path).map_err(|e| RuntimeFailure::io(path.display(), e))?;
    serde_json::from_slice(&bytes).map_err(|e| RuntimeFailure::io(path.display(), e))
}

/// The spec `create` ran: from `state.json`, where runc keeps it too. The
/// bundle's `config.json` carries the container's env, Secrets' values
/// among them, and the executor removes it once the container runs. A
/// container recorded without it falls back to its bundle.
pub(crate) fn created_spec(state: &ContainerState) -> Result<Spec, RuntimeFailure> {
    match &state.spec {
        Some(spec) => Ok(spec.clone()),
        None => read_spec(&state.bundle),
    }
}

pub(crate) fn create(
    root: &Path,
    id: &str,
    bundle: &Path,
    pid_file: Option<PathBuf>,
    console: Option<PathBuf>,
    start: Start,
) -> Result<Option<OwnedFd>, RuntimeFailure> {
    let bundle =
        std::fs::canonicalize(bundle).map_err(|e| RuntimeFailure::io(bundle.display(), e))?;
    let spec = read_spec(&bundle)?;
    let dir = state::dir(root, id)?;
    std::fs::create_dir_all(root).map_err(|e| RuntimeFailure::io(root.display(), e))?;
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(RuntimeFailure(format!(
                "container with id {id:?} already exists"
            )));
        }
        Err(e) => return Err(RuntimeFailure::io(dir.display(), e)),
    }
    let result = create_in(&dir, id, &bundle, &spec, pid_file, console, start);
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

fn create_in(
    dir: &Path,
    id: &str,
    bundle: &Path,
    spec: &Spec,
    pid_file: Option<PathBuf>,
    console: Option<PathBuf>,
    start: Start,
) -> Result<Option<OwnedFd>, RuntimeFailure> {
    // Connected while the host's paths are in view; init sends the terminal.
    let console = console.map(|p| super::console::connect(&p)).transpose()?;
    let rootless = crate::oci::rootless::active();
    let root = dir.parent().unwrap_or(dir);
    // Without it, init copies the host's whole mount table, and detaches
    // it. Made first: before the PID namespace (its holder, forked after,
    // would be that namespace's PID 1, and it would die with it), and
    // before this process opens anything the holder should not keep.
    let template = if rootless {
        None
    } else {
        super::mntns::template(root).ok()
    };
    // This process' parent is the executor (a subreaper), whose child init
    // becomes once this process exits; init learns when that is from a
    // pidfd of this process (a pid means nothing inside the new PID
    // namespace).
    let parent = rustix::process::getppid()
        .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok());
    let me = parent.as_ref().and_then(|_| {
        rustix::process::pidfd_open(
            rustix::process::getpid(),
            rustix::process::PidfdFlags::empty(),
        )
        .ok()
    });
    // Without a pidfd of this process init could not wait for its exit,
    // so it waits on the FIFO, as for `create` (the caller then starts it).
    let start = if me.is_none() { Start::OnFifo } else { start };
    if start == Start::OnFifo {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.join("exec.fifo"),
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .map_err(|e| RuntimeFailure::io("mkfifo exec.fifo", e))?;
    }
    let cgroups = make_cgroups(spec, rootless)?;
    // Without root, the container's user namespace comes first: the ones
    // made next belong to it, so its root may mount and unshare in them.
    if rootless {
        crate::oci::rootless::enter_user_namespace()?;
    }
    // Only the PID namespace is entered here (it applies to children);
    // init enters the others itself, so this process keeps the host's
    // mounts while init pivots.
    enter_namespaces(spec, true, false)?;
    // init says on this pipe when it is ready, at once: no status file to
    // write on the (journalled) disk and no poll for it.
    let (ready_rx, ready_tx) =
        std::io::pipe().map_err(|e| RuntimeFailure::io("pipe for init", e))?;
    let pid = match super::fork::fork()? {
        super::fork::Forked::Child => {
            drop(parent);
            drop(ready_rx);
            let handoff = super::init::Handoff {
                spawner: me,
                ready: ready_tx,
                template,
                console,
                start,
                spec: spec.clone(),
            };
            let e = match super::init::init(root, id, bundle, rootless, handoff) {
                Ok(()) => RuntimeFailure("init returned without exec".into()),
                Err(e) => e,
            };
            eprintln!("mesopod runtime: {e}");
            std::process::exit(1);
        }
        super::fork::Forked::Parent(pid) => pid,
    };
    drop((me, template, console));
    drop(ready_tx);
    let child = Child(pid);
    // init joins its cgroups before it can exec anything (it waits for
    // `start`); this process stays out, so a failed create can remove them.
    for cg in &cgroups {
        if let Err(e) = std::fs::write(cg.join("cgroup.procs"), pid.as_raw_nonzero().to_string()) {
            child.kill();
            for cg in &cgroups {
                state::remove_cgroup(cg);
            }
            return Err(RuntimeFailure::io(
                format!("join cgroup {}", cg.display()),
                e,
            ));
        }
    }
    let status = init_status(ready_rx, &child);
    if status != super::init::READY {
        child.kill();
        for cg in &cgroups {
            state::remove_cgroup(cg);
        }
        return Err(RuntimeFailure(status.trim().to_owned()));
    }
    let pid = pid.as_raw_nonzero().get();
    let start_time = state::proc_stat(pid).map(|(t, _)| t).unwrap_or_default();
    let record = ContainerState {
        id: id.to_owned(),
        pid,
        start_time,
        bundle: bundle.to_path_buf(),
        cgroups,
        spec: Some(spec.clone()),
    };
    let json = serde_json::to_vec(&record).map_err(|e| RuntimeFailure(e.to_string()))?;
    let tmp = dir.join("state.json.tmp");
    // It holds the container's env: readable by root alone, as runc's.
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &json))
        .map_err(|e| RuntimeFailure::io(tmp.display(), e))?;
    std::fs::rename(&tmp, dir.join("state.json"))
        .map_err(|e| RuntimeFailure::io("state.json", e))?;
    if let Some(p) = pid_file {
        std::fs::write(&p, pid.to_string()).map_err(|e| RuntimeFailure::io(p.display(), e))?;
    }
    // `child` is not waited for: once this process exits, init belongs to
    // the nearest subreaper (the executor).
    Ok(parent)
}

/// What init said on its pipe: [`super::init::READY`], its error, or why
/// it said nothing.
fn init_status(pipe: std::io::PipeReader, child: &Child) -> String {
    use std::io::Read as _;
    let until = Instant::now() + INIT_TIMEOUT;
    let mut said = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if said == super::init::READY.as_bytes() {
            return super::init::READY.to_owned();
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return format!("container init did not get ready within {INIT_TIMEOUT:?}");
        }
        let timeout = rustix::time::Timespec::try_from(left).unwrap_or(rustix::time::Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        });
        let mut fds = [rustix::event::PollFd::new(
            &pipe,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => {}
            Err(e) => return format!("cannot wait for container init: {e}"),
        }
        match (&pipe).read(&mut buf) {
            Ok(0) => break,
            Ok(n) => said.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return format!("cannot read from container init: {e}"),
        }
    }
    let text = String::from_utf8_lossy(&said).trim().to_owned();
    if text.is_empty() {
        let exit = child.exited().unwrap_or_else(|| "closed its pipe".into());
        format!("container init exited early: {exit}")
    } else {
        text
    }
}

/// The forked init, as `create` watches it.
struct Child(Pid);

impl Child {
    /// How it ended, if it has.
    fn exited(&self) -> Option<String> {
        match rustix::process::waitpid(Some(self.0), WaitOptions::NOHANG) {
            Ok(Some((_, s))) => Some(
                s.exit_status()
                    .map(|c| format!("exit status: {c}"))
                    .or_else(|| s.terminating_signal().map(|n| format!("signal: {n}")))
                    .unwrap_or_else(|| "ended".into()),
            ),
            Ok(None) => None,
            Err(e) => Some(format!("cannot wait for it: {e}")),
        }
    }

    /// Kills and reaps it.
    fn kill(&self) {
        let _ = rustix::process::kill_process(self.0, Signal::KILL);
        let _ = rustix::process::waitpid(Some(self.0), WaitOptions::empty());
    }
}

/// The last step of `create` and `run`: a container whose executor died
/// while it was made is killed and deleted, for init's parent-death signal
/// is armed only once this process is gone, and would never fire.
pub(crate) fn check_executor(
    root: &Path,
    id: &str,
    executor: Option<OwnedFd>,
) -> Result<(), RuntimeFailure> {
    let Some(fd) = executor else { return Ok(()) };
    let mut fds = [rustix::event::PollFd::new(
        &fd,
        rustix::event::PollFlags::IN,
    )];
    let zero = rustix::time::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    if rustix::event::poll(&mut fds, Some(&zero)).is_ok_and(|n| n > 0) {
        let _ = state::delete(root, id, true);
        return Err(RuntimeFailure(
            "the executor that created this container is gone".into(),
        ));
    }
    Ok(())
}

/// Creates the container's cgroups below this process' own and sets their
/// limits. Without root, a cgroup that is not delegated to this user is
/// done without, unless the container has limits it would enforce.
fn make_cgroups(spec: &Spec, rootless: bool) -> Result<Vec<PathBuf>, RuntimeFailure> {
    let Some(relative) = spec.linux.cgroups_path.as_deref() else {
        return Ok(Vec::new());
    };
    let res = spec.linux.resources.clone().unwrap_or_default();
    let memory = res.memory.and_then(|m| m.limit);
    let cpu = res.cpu.unwrap_or_default();
    let mut made: Vec<PathBuf> = Vec::new();
    for (controller, dir) in cgroup::dirs(relative) {
        if let Err(e) = std::fs::create_dir_all(&dir) {
            let denied = matches!(
                e.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
            );
            if rootless && denied {
                for dir in &made {
                    state::remove_cgroup(dir);
                }
                return match crate::oci::rootless::unenforceable(memory, cpu.quota, &dir) {
                    Some(why) => Err(RuntimeFailure(why)),
                    None => Ok(Vec::new()),
                };
            }
            return Err(RuntimeFailure::io(format!("cgroup {}", dir.display()), e));
        }
        for (file, value) in
            cgroup::limit_files(controller, memory, cpu.shares, cpu.quota, cpu.period)
        {
            let path = dir.join(file);
            if let Err(e) = std::fs::write(&path, &value) {
                // memory.swap.max is absent without swap accounting: not a limit we need.
                if file != "memory.swap.max" {
                    return Err(RuntimeFailure::io(
                        format!("write {value} to {}", path.display()),
                        e,
                    ));
                }
            }
        }
        made.push(dir);
    }
    Ok(made)
}

/// Creates or joins the spec's namespaces: the PID one alone (`pid_only`,
/// for `create`) or all the others (for `init`), the mount namespace only
/// `with_mount` (else init makes it from the template, [`super::mntns`]).
pub(crate) fn enter_namespaces(
    spec: &Spec,
    pid_only: bool,
    with_mount: bool,
) -> Result<(), RuntimeFailure> {
    let mut unshare = UnshareFlags::empty();
    for ns in &spec.linux.namespaces {
        let (flag, kind) = match ns.kind.as_str() {
            "pid" => (UnshareFlags::NEWPID, LinkNameSpaceType::ProcessID),
            "mount" => (UnshareFlags::NEWNS, LinkNameSpaceType::Mount),
            "ipc" => (
                UnshareFlags::NEWIPC,
                LinkNameSpaceType::InterProcessCommunication,
            ),
            "uts" => (
                UnshareFlags::NEWUTS,
                LinkNameSpaceType::HostNameAndNISDomainName,
            ),
            "network" => (UnshareFlags::NEWNET, LinkNameSpaceType::Network),
            other => {
                return Err(RuntimeFailure(format!(
                    "namespace {other:?} is not supported"
                )));
            }
        };
        if (ns.kind == "pid") != pid_only || (ns.kind == "mount" && !with_mount) {
            continue;
        }
        match &ns.path {
            Some(path) => {
                let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
                    .map_err(|e| RuntimeFailure::io(format!("open namespace {path}"), e))?;
                rustix::thread::move_into_link_name_space(fd.as_fd(), Some(kind))
                    .map_err(|e| RuntimeFailure::io(format!("join namespace {path}"), e))?;
            }
            None => unshare |= flag,
        }
    }
    // Only namespace flags, in a single-threaded process: the case
    // rustix's deprecation of `unshare` (for CLONE_FILES and friends) spares.
    #[allow(deprecated)]
    rustix::thread::unshare(unshare).map_err(|e| RuntimeFailure::io("unshare", e))
}
