//! One container as one process group on the host.
//!
//! Each container is started as the leader of a new process group, so a
//! signal reaches the whole tree it starts (a shell and its children), and a
//! group left behind after the leader exits can be cleaned up as one.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::process::{Child, Command};

use crate::logs::Output;
use crate::pod::ContainerPlan;

/// `PATH` for containers when the executor itself has none: the usual
/// Debian/Alpine default, so `command: [sh, -c, …]` finds the shell.
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A started container process.
#[derive(Debug)]
pub(crate) struct Started {
    pub(crate) child: Child,
    /// Its pid, which is also its process group id.
    pub(crate) pgid: u32,
}

/// Where a container in `dir` runs: its `workingDir`, relative to `dir`.
pub(crate) fn workdir(plan: &ContainerPlan, dir: &Path) -> PathBuf {
    match &plan.working_dir {
        Some(w) if w.is_absolute() => w.clone(),
        Some(w) => dir.join(w),
        None => dir.to_path_buf(),
    }
}

/// `PATH` for a container: the executor's own, else [`DEFAULT_PATH`].
pub(crate) fn path() -> std::ffi::OsString {
    std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into())
}

/// Starts a container in `dir` (its own sandbox directory, created if
/// missing), its stdout and stderr the pipes of `output` ([`crate::logs`]).
///
/// The environment is the container's own plus `PATH`, `HOME` (the
/// container's directory) and `HOSTNAME` (the pod's name): the executor's
/// own `MESOS_*` variables do not leak into pods.
pub(crate) fn spawn(
    plan: &ContainerPlan,
    dir: &Path,
    hostname: &str,
    env: &[(String, String)],
    output: Output,
) -> io::Result<Started> {
    std::fs::create_dir_all(dir)?;
    let Some((program, args)) = plan.argv.split_first() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty command"));
    };
    let workdir = workdir(plan, dir);
    let (stdin, stdout, stderr) = stdio(output)?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .env("PATH", path())
        .env("HOME", dir)
        .env("HOSTNAME", hostname)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(&workdir)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0)
        // A safety net only: if a supervisor is dropped without stopping its
        // container (the runtime torn down mid-flight), the leader dies too.
        .kill_on_drop(true);
    let child = cmd.spawn().map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot start {program:?} in {}: {e}", workdir.display()),
        )
    })?;
    let pgid = child
        .id()
        .ok_or_else(|| io::Error::other("the process exited before its pid was read"))?;
    Ok(Started { child, pgid })
}

/// The container's stdin, stdout and stderr: the log's pipes, or with
/// `tty: true` a pty's slave whose master goes to the log and attach. The
/// process stays in the executor's session, so the pty is not its
/// controlling terminal (the embedded runtime and runc make it one).
fn stdio(output: Output) -> io::Result<(Stdio, Stdio, Stdio)> {
    let Some(console) = output.console else {
        let stdin = output.stdin.map_or_else(Stdio::null, Stdio::from);
        return Ok((stdin, output.stdout.into(), output.stderr.into()));
    };
    let pty = crate::oci::exec::Pty::open().map_err(io::Error::other)?;
    let slave = pty.slave().map_err(io::Error::other)?;
    let master = std::os::fd::OwnedFd::from(pty.file()?);
    tokio::spawn(async move {
        if let Err(e) = console.attach(master).await {
            tracing::warn!(error = %e, "a container's terminal cannot be read");
        }
    });
    let (a, b) = (slave.try_clone()?, slave.try_clone()?);
    Ok((slave.into(), a.into(), b.into()))
}

/// Sends `signal` to a container's process group; a group that is already
/// gone is not an error.
pub(crate) fn signal_group(pgid: u32, signal: Signal) {
    let Some(pid) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
        return;
    };
    match kill_process_group(pid, signal) {
        Ok(()) => {}
        Err(rustix::io::Errno::SRCH) => {}
        Err(e) => tracing::warn!(pgid, ?signal, error = %e, "cannot signal process group"),
    }
}

/// `SIGTERM`: asks a container to stop.
pub(crate) const TERM: Signal = Signal::TERM;
/// `SIGKILL`: stops it.
pub(crate) const KILL: Signal = Signal::KILL;

/// The exit code Kubernetes reports: the code, or 128 + the signal number.
pub(crate) fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(128)
}
