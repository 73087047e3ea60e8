//! Running a command inside a running container (`kubectl exec`, exec probes).
//!
//! - Embedded runtime: `mesopod runtime exec [-t] ID CMD…`, which enters the container's
//!   namespaces and cgroups and becomes its user ([`super::embedded`]); runc:
//!   `runc exec [-t] ID CMD…`, which does the same. Both take the container's own
//!   `process` (user, groups, capabilities, env, cwd) from its bundle.
//! - Process mode: the command runs as a host process in the container's directory.
//!
//! The executor itself never forks into a container: the runtime's own process does.
//! With a tty the command's stdio is the slave of a pty the executor holds the master
//! of ([`Pty`]), resized with `TIOCSWINSZ`.

use std::os::fd::{AsFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rustix::fs::{Mode, OFlags};
use rustix::pty::OpenptFlags;
use tokio::io::AsyncReadExt as _;

use super::{ContainerSettings, RuntimeKind};

/// Why a command could not be run.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExecError {
    /// The runtime (or the command, in process mode) could not be started.
    #[error("cannot run the exec: {0}")]
    Spawn(String),
    /// A pty could not be made.
    #[error("cannot make a pty: {0}")]
    Pty(String),
    /// The command did not finish in time (it was killed).
    #[error("command {0:?} timed out")]
    Timeout(String),
}

/// The container a command runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecTarget {
    /// A runtime container with this id.
    Container(String),
    /// A process-mode container: its directory.
    Process(PathBuf),
}

/// How this executor enters containers.
#[derive(Debug, Clone)]
pub struct ContainerExec {
    runtime: Option<(PathBuf, Vec<String>, PathBuf)>,
}

impl ContainerExec {
    /// As `settings` runs containers for the executor in `sandbox` (the same program and
    /// state root the supervisor's runtime uses).
    pub fn new(settings: &ContainerSettings, sandbox: &Path) -> Self {
        let root = || {
            settings
                .state_root
                .clone()
                .unwrap_or_else(|| super::agent_dir(sandbox).join("mesopod-runtime"))
        };
        let runtime = match &settings.runtime {
            RuntimeKind::Process => None,
            RuntimeKind::Cli(p) => Some((p.clone(), Vec::new(), root())),
            RuntimeKind::Embedded => {
                let exe = settings
                    .mesopod_binary
                    .clone()
                    .or_else(|| std::env::current_exe().ok())
                    .unwrap_or_else(|| PathBuf::from("mesopod"));
                Some((exe, vec!["runtime".to_owned()], root()))
            }
        };
        Self { runtime }
    }

    /// The runtime's state root (`None` in process mode): its entries are the running
    /// containers' ids.
    pub fn state_root(&self) -> Option<&Path> {
        self.runtime.as_ref().map(|(_, _, root)| root.as_path())
    }

    /// The command that runs `command` in `target`, stdio not set yet.
    fn command(
        &self,
        target: &ExecTarget,
        command: &[String],
        tty: bool,
    ) -> Result<tokio::process::Command, ExecError> {
        let Some(first) = command.first() else {
            return Err(ExecError::Spawn("no command given".into()));
        };
        let mut cmd = match (target, &self.runtime) {
            (ExecTarget::Container(id), Some((program, prefix, root))) => {
                let mut cmd = tokio::process::Command::new(program);
                cmd.args(prefix).arg("--root").arg(root).arg("exec");
                // A rootless executor's containers are in its own namespaces.
                if let Some(pid) = super::rootless_ns::pid() {
                    cmd.env(super::rootless_ns::JOIN_ENV, pid.to_string());
                }
                if tty {
                    cmd.arg("--tty");
                }
                cmd.arg(id).args(command);
                cmd
            }
            (ExecTarget::Process(dir), None) => {
                let mut cmd = tokio::process::Command::new(first);
                cmd.args(&command[1..]).current_dir(dir);
                cmd
            }
            _ => {
                return Err(ExecError::Spawn(
                    "the container does not run on this executor's runtime".into(),
                ));
            }
        };
        cmd.kill_on_drop(true);
        Ok(cmd)
    }

    /// Starts `command` in `target`: with `tty` on a new pty (stdin, stdout and stderr
    /// all the slave), else with piped stdout and stderr and, if `stdin`, piped stdin
    /// (else `/dev/null`).
    ///
    /// # Errors
    /// The runtime could not be started, or no pty could be made.
    pub fn spawn(
        &self,
        target: &ExecTarget,
        command: &[String],
        stdin: bool,
        tty: bool,
    ) -> Result<ExecProcess, ExecError> {
        let mut cmd = self.command(target, command, tty)?;
        let pty = if tty {
            let pty = Pty::open()?;
            let slave = pty.slave()?;
            let dup = |fd: &OwnedFd| {
                fd.try_clone()
                    .map(Stdio::from)
                    .map_err(|e| ExecError::Pty(e.to_string()))
            };
            cmd.stdin(dup(&slave)?)
                .stdout(dup(&slave)?)
                .stderr(Stdio::from(slave));
            Some(pty)
        } else {
            cmd.stdin(if stdin { Stdio::piped() } else { Stdio::null() })
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            None
        };
        let child = cmd.spawn().map_err(|e| ExecError::Spawn(e.to_string()))?;
        Ok(ExecProcess { child, pty })
    }

    /// Runs `command` in `target` to completion (stdin `/dev/null`): its exit code and up
    /// to `max_output` bytes of stdout and stderr combined. Past `timeout` it is killed.
    ///
    /// # Errors
    /// It could not be started, or timed out.
    pub async fn run(
        &self,
        target: &ExecTarget,
        command: &[String],
        timeout: Duration,
        max_output: usize,
    ) -> Result<ExecOutput, ExecError> {
        let mut p = self.spawn(target, command, false, false)?;
        let (Some(mut out), Some(mut err)) = (p.child.stdout.take(), p.child.stderr.take()) else {
            return Err(ExecError::Spawn("no output pipes".into()));
        };
        let work = async {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let (ra, rb) = tokio::join!(
                read_capped(&mut out, &mut a, max_output),
                read_capped(&mut err, &mut b, max_output)
            );
            let status = p.child.wait().await;
            let _ = (ra, rb);
            (status, a, b)
        };
        match tokio::time::timeout(timeout, work).await {
            Ok((status, mut a, b)) => {
                let status = status.map_err(|e| ExecError::Spawn(e.to_string()))?;
                a.extend(b);
                a.truncate(max_output);
                Ok(ExecOutput {
                    exit_code: crate::process::exit_code(status),
                    output: a,
                })
            }
            // Dropping the child (kill_on_drop) kills the runtime's exec, and with it the
            // command (its parent-death signal).
            Err(_) => Err(ExecError::Timeout(command.join(" "))),
        }
    }
}

/// Reads all of `r`, keeping the first `cap` bytes (draining the rest so the writer is
/// never blocked on a full pipe).
async fn read_capped(
    r: &mut (impl tokio::io::AsyncRead + Unpin),
    into: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<()> {
    let mut buf = [0u8; 8192];
    loop {
        let n = r.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        let room = cap.saturating_sub(into.len());
        into.extend_from_slice(&buf[..n.min(room)]);
    }
}

/// What a command run to completion left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// Its exit code (128+N for a signal).
    pub exit_code: i32,
    /// Its stdout then stderr, capped.
    pub output: Vec<u8>,
}

/// A started exec.
#[derive(Debug)]
pub struct ExecProcess {
    /// The runtime's process (killing it kills the command).
    pub child: tokio::process::Child,
    /// The pty, with a tty.
    pub pty: Option<Pty>,
}

/// The master side of a pty.
#[derive(Debug)]
pub struct Pty {
    master: OwnedFd,
}

impl Pty {
    pub(crate) fn open() -> Result<Pty, ExecError> {
        let pty = |e: rustix::io::Errno| ExecError::Pty(e.to_string());
        let master =
            rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)
                .map_err(pty)?;
        rustix::pty::grantpt(&master).map_err(pty)?;
        rustix::pty::unlockpt(&master).map_err(pty)?;
        Ok(Pty { master })
    }

    pub(crate) fn slave(&self) -> Result<OwnedFd, ExecError> {
        let name = rustix::pty::ptsname(&self.master, Vec::new())
            .map_err(|e| ExecError::Pty(e.to_string()))?;
        rustix::fs::open(
            name.as_c_str(),
            OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| ExecError::Pty(e.to_string()))
    }

    /// Sets the terminal's size (`TIOCSWINSZ`; the foreground process gets `SIGWINCH`).
    pub fn resize(&self, width: u16, height: u16) {
        let size = rustix::termios::Winsize {
            ws_row: height,
            ws_col: width,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        if let Err(e) = rustix::termios::tcsetwinsize(self.master.as_fd(), size) {
            tracing::debug!(error = %e, "pty resize failed");
        }
    }

    /// The master, to read the terminal's output from and write its input to (blocking
    /// file: use it from a blocking task).
    ///
    /// # Errors
    /// The descriptor could not be duplicated.
    pub fn file(&self) -> std::io::Result<std::fs::File> {
        Ok(std::fs::File::from(self.master.try_clone()?))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn process_mode() -> ContainerExec {
        ContainerExec::new(&ContainerSettings::default(), Path::new("/tmp"))
    }

    fn cmd(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[tokio::test]
    async fn a_command_run_to_completion_gives_its_exit_code_and_output() {
        let dir = tempfile::tempdir().unwrap();
        let e = process_mode();
        let out = e
            .run(
                &ExecTarget::Process(dir.path().into()),
                &cmd(&["sh", "-c", "echo hi; echo oops >&2; pwd; exit 3"]),
                Duration::from_secs(10),
                1024,
            )
            .await
            .unwrap();
        assert_eq!(out.exit_code, 3);
        let text = String::from_utf8(out.output).unwrap();
        assert!(text.starts_with("hi\n"), "{text}");
        assert!(text.contains("oops"), "{text}");
        assert!(text.contains(&dir.path().display().to_string()), "{text}");
    }

    #[tokio::test]
    async fn output_past_the_cap_is_dropped_and_a_slow_command_times_out() {
        let e = process_mode();
        let target = ExecTarget::Process(std::env::temp_dir());
        let out = e
            .run(
                &target,
                &cmd(&["sh", "-c", "head -c 100000 /dev/zero"]),
                Duration::from_secs(10),
                100,
            )
            .await
            .unwrap();
        assert_eq!(out.output.len(), 100);
        let err = e
            .run(
                &target,
                &cmd(&["sleep", "5"]),
                Duration::from_millis(200),
                100,
            )
            .await
            .unwrap_err();
        assert!(matches!(err, ExecError::Timeout(c) if c == "sleep 5"));
    }

    #[tokio::test]
    async fn a_tty_exec_sees_a_terminal_of_the_size_it_was_given() {
        let e = process_mode();
        let mut p = e
            .spawn(
                &ExecTarget::Process(std::env::temp_dir()),
                &cmd(&["sh", "-c", "sleep 0.2; stty size; test -t 0 && echo tty"]),
                true,
                true,
            )
            .unwrap();
        let pty = p.pty.take().unwrap();
        pty.resize(100, 40);
        let mut f = pty.file().unwrap();
        let read = tokio::task::spawn_blocking(move || {
            use std::io::Read as _;
            let mut all = Vec::new();
            let mut buf = [0u8; 1024];
            // EIO once the slave's last holder is gone: the end of the output.
            while let Ok(n) = f.read(&mut buf) {
                if n == 0 {
                    break;
                }
                all.extend_from_slice(&buf[..n]);
            }
            String::from_utf8_lossy(&all).into_owned()
        });
        assert!(p.child.wait().await.unwrap().success());
        drop(pty);
        let text = read.await.unwrap();
        assert!(text.contains("40 100"), "{text:?}");
        assert!(text.contains("tty"), "{text:?}");
    }
}
