//! The executor's side of a shim: start one for a container run, adopt a
//! dead executor's, wait for the exit.

use std::ffi::OsString;
use std::os::fd::{AsFd as _, AsRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::wire::{self, ExitStatus, Held, Message};

/// A shim to start: where, for which container, and the runtime command
/// it runs (`run --detach …`).
#[derive(Debug, Clone)]
pub struct Spawn {
    /// This binary (`mesopod shim` is one of its commands).
    pub exe: PathBuf,
    /// The container's bundle: the shim's working directory, where it
    /// listens ([`super::SOCKET`]).
    pub bundle: PathBuf,
    /// The container's id (names the shim's anchor cgroup).
    pub id: String,
    /// Where the runtime writes the container's pid.
    pub pid_file: PathBuf,
    /// The container's cgroup, relative (its OOM kills are read there).
    pub cgroups_path: String,
    /// Where the shim's anchor cgroups go ([`Spawn::anchor_bases`]).
    pub anchor_bases: Vec<PathBuf>,
    /// How long the shim waits for a new owner; 0: none, the container
    /// goes with its executor.
    pub adoption_timeout: Duration,
    /// The runtime command (`run --detach …`).
    pub argv: Vec<OsString>,
    /// Environment for it.
    pub env: Vec<(String, String)>,
}

/// The container's ends of its stdio pipes, for the runtime.
#[derive(Debug)]
pub struct ContainerEnds {
    /// The write end of its stdout pipe.
    pub stdout: OwnedFd,
    /// The write end of its stderr pipe.
    pub stderr: OwnedFd,
    /// The read end of its stdin pipe, if it has one.
    pub stdin: Option<OwnedFd>,
}

/// A running shim this executor owns.
#[derive(Debug)]
pub struct Shim {
    conn: OwnedFd,
    /// The container's init.
    pub pid: u32,
    /// Its pidfd (the shim's copy, so it names the process even once the
    /// shim has reaped it).
    pub pidfd: OwnedFd,
}

/// How a container's shim ended its watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The container exited.
    Exited(ExitStatus),
    /// The shim is gone without a word: the container died with it
    /// (`PR_SET_PDEATHSIG`) or was never seen to exit.
    Lost,
}

/// A dead executor's container, taken over.
#[derive(Debug)]
pub struct Adopted {
    /// The shim, owned now.
    pub shim: Shim,
    /// It exited while nobody watched.
    pub exit: Option<ExitStatus>,
    /// The executor's ends of its pipes, which the shim kept.
    pub held: Vec<(Held, OwnedFd)>,
}

impl Spawn {
    /// The bases of the anchors an executor in the Mesos container
    /// `container` (its sandbox's name) gives its shims: out of that
    /// container's cgroups (see `anchor`). Read once per executor.
    pub fn anchor_bases(container: &str) -> Vec<PathBuf> {
        super::anchor::bases(container)
    }

    /// Starts the shim and has it run the container. `Ok(Err(status))`:
    /// the runtime failed; `Err`: the shim could not be started.
    pub async fn run(
        self,
        ends: ContainerEnds,
        held: Vec<(Held, OwnedFd)>,
    ) -> Result<Result<Shim, String>, String> {
        let (ours, theirs) = wire::pair().map_err(|e| format!("socketpair: {e}"))?;
        let mut cmd = tokio::process::Command::new(&self.exe);
        cmd.arg("shim")
            .arg("--bundle")
            .arg(&self.bundle)
            .arg("--id")
            .arg(&self.id)
            .arg("--pid-file")
            .arg(&self.pid_file)
            .arg("--cgroups-path")
            .arg(&self.cgroups_path)
            .args(
                self.anchor_bases
                    .iter()
                    .flat_map(|b| [std::ffi::OsStr::new("--anchor-base"), b.as_os_str()]),
            )
            .arg("--adoption-timeout")
            .arg(self.adoption_timeout.as_secs().to_string())
            .arg("--")
            .args(&self.argv)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            // Its own complaints go where the executor's do.
            .stderr(Stdio::inherit())
            // It must outlive this executor: never killed with its handle,
            // which tokio reaps once dropped.
            .kill_on_drop(false);
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {} shim: {e}", self.exe.display()))?;
        drop(child);
        tokio::task::spawn_blocking(move || launch(ours, ends, held))
            .await
            .map_err(|e| e.to_string())?
    }
}

fn launch(
    ours: OwnedFd,
    ends: ContainerEnds,
    held: Vec<(Held, OwnedFd)>,
) -> Result<Result<Shim, String>, String> {
    let run = Message::Run {
        stdin: ends.stdin.is_some(),
        held: held.iter().map(|(k, _)| *k).collect(),
    };
    let mut fds = vec![ends.stdout.as_fd(), ends.stderr.as_fd()];
    fds.extend(ends.stdin.iter().map(|f| f.as_fd()));
    fds.extend(held.iter().map(|(_, f)| f.as_fd()));
    wire::send(ours.as_fd(), &run, &fds).map_err(|e| format!("cannot reach the shim: {e}"))?;
    // Only the shim and the container hold the container's ends now: the
    // container's exit closes its pipes.
    drop(fds);
    drop(ends);
    match wire::recv(ours.as_fd()) {
        Ok(Some((Message::Started { pid }, fds))) => {
            let pidfd = fds
                .into_iter()
                .next()
                .ok_or("the shim sent no pidfd for its container")?;
            Ok(Ok(Shim {
                conn: ours,
                pid,
                pidfd,
            }))
        }
        Ok(Some((Message::RunFailed { status }, _))) => Ok(Err(status)),
        Ok(Some((other, _))) => Err(format!("the shim said {other:?}")),
        Ok(None) => Err(
            "the shim exited before it ran the container (its error is in the executor's log)"
                .into(),
        ),
        Err(e) => Err(format!("reading from the shim: {e}")),
    }
}

impl Shim {
    /// Takes over the shim of the container whose bundle is `bundle`.
    /// Blocking (a connect and one message).
    pub fn adopt(bundle: &Path) -> std::io::Result<Adopted> {
        // Through the directory's descriptor: an agent's work dir can be
        // deeper than a socket path may be long (108 bytes).
        let dir = rustix::fs::open(
            bundle,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        let path = format!("/proc/self/fd/{}/{}", dir.as_raw_fd(), super::SOCKET);
        let addr = rustix::net::SocketAddrUnix::new(path.as_str())?;
        let conn = rustix::net::socket_with(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )?;
        rustix::net::connect(&conn, &addr)?;
        drop(dir);
        let bad =
            |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
        match wire::recv(conn.as_fd())? {
            Some((Message::Hello { pid, exit, held }, fds)) => {
                let mut fds = fds.into_iter();
                let pidfd = fds.next().ok_or_else(|| bad("the shim sent no pidfd"))?;
                let rest: Vec<OwnedFd> = fds.collect();
                if rest.len() != held.len() {
                    return Err(bad(
                        "the shim's descriptors do not match what it says it holds",
                    ));
                }
                Ok(Adopted {
                    shim: Shim { conn, pid, pidfd },
                    exit,
                    held: held.into_iter().zip(rest).collect(),
                })
            }
            Some((other, _)) => Err(bad(&format!("the shim said {other:?}"))),
            None => Err(bad("the shim closed the connection")),
        }
    }

    /// Waits for the container's exit, then lets the shim go. Blocking:
    /// run on a thread of its own.
    pub fn wait(&self) -> Ended {
        loop {
            match wire::recv(self.conn.as_fd()) {
                Ok(Some((Message::Exited(status), _))) => {
                    let _ = wire::send(self.conn.as_fd(), &Message::Release, &[]);
                    return Ended::Exited(status);
                }
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => return Ended::Lost,
            }
        }
    }

    /// Lets the shim go without waiting (its container exited while it
    /// had no owner, and the exit came with [`Shim::adopt`]).
    pub fn release(&self) {
        let _ = wire::send(self.conn.as_fd(), &Message::Release, &[]);
    }
}
