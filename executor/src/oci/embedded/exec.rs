//! `exec`: runs a process inside a running container, as runc's `exec` does.
//!
//! `mesopod runtime exec [-t|--tty] ID CMD [ARGS…]` runs in two single-threaded
//! processes, for a process can only enter a PID namespace for its children:
//!
//! 1. `exec` joins the container's cgroups and its PID namespace (through its init's
//!    `/proc/<pid>/ns/pid`), spawns `exec-inner`, waits for it and exits with its
//!    status (128+N for a signal, as a shell reports it).
//! 2. `exec-inner` (born in the container's PID namespace) opens the container's mount,
//!    IPC, UTS and network namespaces and joins them (the mount namespace last: joining
//!    it makes the container's root this process' root), becomes the session leader of
//!    its terminal with `--tty`, drops to the container's user, groups and capabilities
//!    (the container's own `process` in its `config.json`), changes to its working
//!    directory and execs the command with the container's environment.
//!
//! The command's stdio is whatever the caller gave `exec` (pipes, or a pty's slave).

use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};
use std::process::Command;

use rustix::fs::{Mode, OFlags};
use rustix::thread::LinkNameSpaceType;

use super::RuntimeFailure;
use super::create::created_spec;
use super::state;

/// What `exec` and `exec-inner` are told: `[-t] ID CMD…` (options before the id, the
/// command verbatim after it, so its own `-c` is not ours).
struct ExecArgs {
    tty: bool,
    /// `exec-inner`'s: the container is rootless (inside its user
    /// namespace this process' uid is 0, so it cannot tell by itself).
    rootless: bool,
    id: String,
    command: Vec<String>,
}

fn parse(args: &[String]) -> Result<ExecArgs, RuntimeFailure> {
    let mut tty = false;
    let mut rootless = false;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "-t" | "--tty" => tty = true,
            "--rootless" => rootless = true,
            "--" => {
                i += 1;
                break;
            }
            s if s.starts_with('-') => {
                return Err(RuntimeFailure(format!("exec: unknown option {s:?}")));
            }
            _ => break,
        }
        i += 1;
    }
    let id = args
        .get(i)
        .cloned()
        .ok_or_else(|| RuntimeFailure("exec: a container id is required".into()))?;
    let mut command: Vec<String> = args[i + 1..].to_vec();
    if command.first().is_some_and(|c| c == "--") {
        command.remove(0);
    }
    if command.is_empty() {
        return Err(RuntimeFailure("exec: a command is required".into()));
    }
    Ok(ExecArgs {
        tty,
        rootless,
        id,
        command,
    })
}

/// `exec`: returns the exit code this process should end with.
pub(crate) fn exec(root: &Path, args: &[String]) -> Result<i32, RuntimeFailure> {
    let a = parse(args)?;
    let s = state::load(root, &a.id)?;
    if !state::proc_stat(s.pid).is_some_and(|(start, zombie)| start == s.start_time && !zombie) {
        return Err(RuntimeFailure(format!(
            "cannot exec in a stopped container {:?}",
            a.id
        )));
    }
    let me = std::process::id().to_string();
    for cg in &s.cgroups {
        std::fs::write(cg.join("cgroup.procs"), &me)
            .map_err(|e| RuntimeFailure::io(format!("join cgroup {}", cg.display()), e))?;
    }
    let exe = std::env::current_exe().map_err(|e| RuntimeFailure::io("current exe", e))?;
    let rootless = crate::oci::rootless::active();
    // A rootless container's namespaces belong to its user namespace:
    // only inside it may they be joined.
    // (A rootless executor's containers are in its user namespace, where
    // this process is already.)
    if rootless && !crate::oci::rootless_ns::same_user_ns(s.pid) {
        join(s.pid, "user", LinkNameSpaceType::User)?;
    }
    join(s.pid, "pid", LinkNameSpaceType::ProcessID)?;
    let mut inner = Command::new(exe);
    inner
        .arg("runtime")
        .arg("--root")
        .arg(root)
        .arg("exec-inner");
    if a.tty {
        inner.arg("--tty");
    }
    if rootless {
        inner.arg("--rootless");
    }
    let status = inner
        .arg(&a.id)
        .args(&a.command)
        .status()
        .map_err(|e| RuntimeFailure::io("spawn exec-inner", e))?;
    Ok(status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1))
}

/// `exec-inner`: only returns on failure.
pub(crate) fn exec_inner(root: &Path, args: &[String]) -> Result<(), RuntimeFailure> {
    let a = parse(args)?;
    let s = state::load(root, &a.id)?;
    let spec = created_spec(&s)?;
    // Every namespace is opened before any is joined: once in the container's mount
    // namespace, its /proc no longer shows the host's pids.
    let kinds = [
        ("ipc", LinkNameSpaceType::InterProcessCommunication),
        ("uts", LinkNameSpaceType::HostNameAndNISDomainName),
        ("net", LinkNameSpaceType::Network),
        ("mnt", LinkNameSpaceType::Mount),
    ];
    let mut fds: Vec<(OwnedFd, LinkNameSpaceType, &str)> = Vec::new();
    for (name, kind) in kinds {
        fds.push((open_ns(s.pid, name)?, kind, name));
    }
    for (fd, kind, name) in &fds {
        // A namespace the container shares with this process (the host's
        // network, say) is not joined again: setns into it needs rights
        // over its owner, which a rootless container's user lacks.
        if same_namespace(fd, name) {
            continue;
        }
        rustix::thread::move_into_link_name_space(fd.as_fd(), Some(*kind))
            .map_err(|e| RuntimeFailure::io(format!("join the container's {name} namespace"), e))?;
    }
    drop(fds);
    if a.tty {
        rustix::process::setsid().map_err(|e| RuntimeFailure::io("setsid", e))?;
        rustix::process::ioctl_tiocsctty(std::io::stdin())
            .map_err(|e| RuntimeFailure::io("make the pty the controlling terminal", e))?;
    }
    let p = &spec.process;
    let mut env = p.env.clone();
    if a.tty && !env.iter().any(|e| e.starts_with("TERM=")) {
        env.push("TERM=xterm".into());
    }
    let program = super::init::find_program(&a.command[0], &env)?;
    super::init::user(&spec, a.rootless)?;
    let cwd = if p.cwd.is_empty() {
        "/"
    } else {
        p.cwd.as_str()
    };
    rustix::process::chdir(cwd).map_err(|e| RuntimeFailure::io(format!("chdir {cwd}"), e))?;
    if p.no_new_privileges {
        rustix::thread::set_no_new_privs(true)
            .map_err(|e| RuntimeFailure::io("no_new_privs", e))?;
    }
    // After the credentials changed (which clears it): the command dies with the
    // `exec` process that waits for it, so a hung-up stream leaves nothing behind.
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))
        .map_err(|e| RuntimeFailure::io("PR_SET_PDEATHSIG", e))?;
    // The container's filter binds what is run in it too, as runc's exec.
    super::init::seccomp(&spec)?;
    let err = Command::new(&program)
        .arg0(&a.command[0])
        .args(&a.command[1..])
        .env_clear()
        .envs(env.iter().filter_map(|e| e.split_once('=')))
        .exec();
    Err(RuntimeFailure::io(format!("exec {:?}", a.command[0]), err))
}

/// Whether `fd` is this process' own `name` namespace.
fn same_namespace(fd: &OwnedFd, name: &str) -> bool {
    let mine = rustix::fs::stat(format!("/proc/self/ns/{name}").as_str());
    match (rustix::fs::fstat(fd), mine) {
        (Ok(a), Ok(b)) => (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino),
        _ => false,
    }
}

fn open_ns(pid: i32, name: &str) -> Result<OwnedFd, RuntimeFailure> {
    let path = PathBuf::from(format!("/proc/{pid}/ns/{name}"));
    rustix::fs::open(&path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| RuntimeFailure::io(format!("open {}", path.display()), e))
}

fn join(pid: i32, name: &str, kind: LinkNameSpaceType) -> Result<(), RuntimeFailure> {
    let fd = open_ns(pid, name)?;
    rustix::thread::move_into_link_name_space(fd.as_fd(), Some(kind))
        .map_err(|e| RuntimeFailure::io(format!("join the container's {name} namespace"), e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn the_command_after_the_id_keeps_its_own_options() {
        let a = super::parse(&args(&["-t", "c1", "sh", "-c", "echo hi"])).unwrap();
        assert!(a.tty);
        assert_eq!(a.id, "c1");
        assert_eq!(a.command, args(&["sh", "-c", "echo hi"]));
        let a = super::parse(&args(&["c1", "--", "ls", "-l"])).unwrap();
        assert!(!a.tty);
        assert_eq!(a.command, args(&["ls", "-l"]));
    }

    #[test]
    fn an_exec_without_a_command_or_with_an_unknown_option_is_refused() {
        assert!(super::parse(&args(&["c1"])).is_err());
        assert!(super::parse(&args(&["--user", "0", "c1", "ls"])).is_err());
        assert!(super::parse(&args(&[])).is_err());
    }
}
