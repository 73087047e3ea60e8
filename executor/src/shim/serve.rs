//! `mesopod shim`: the process that anchors one container run.
//!
//! It is started by the executor with a packet socket as its stdin, takes
//! the container's pipes from it ([`Message::Run`]), leaves the executor's
//! cgroup ([`super::anchor`]), starts a session of its own (an agent that
//! kills the executor's process group misses it), becomes a child
//! subreaper, listens on `shim.sock` in the bundle, and runs the runtime's
//! `run --detach`: the container's init becomes its child. From then on it
//! only waits, in one `poll`:
//!
//! - the container exits: it is reaped, its OOM kill read from its memory
//!   cgroup, and [`Message::Exited`] goes to the owner;
//! - the owner's socket closes (the executor died): the shim waits for a
//!   new owner, at most the adoption timeout, holding the executor's ends
//!   of the container's pipes meanwhile, so the container's writes block
//!   instead of dying of SIGPIPE and nothing written is lost;
//! - a new owner connects on `shim.sock` (root only): it gets
//!   [`Message::Hello`] with the container's pidfd and the held pipe ends;
//! - the adoption timeout passes with no owner: the container is killed
//!   (SIGKILL), reaped, and the shim exits. No container is left without
//!   an executor for longer than that, and an orphan that no adopter
//!   could find any more (its bundle or socket gone, [`super::findable`])
//!   goes at once. A timeout of 0 means no adoption:
//!   the container goes with its executor (a rootless executor's, whose
//!   user namespace dies with it).
//!
//! It exits once an owner that saw the exit says [`Message::Release`], or
//! the container ended with no owner to tell after the timeout. The
//! container has `PR_SET_PDEATHSIG` (embedded runtime): should the shim
//! itself die, its container dies with it, and the next owner finds no
//! shim, which is a container it cannot adopt.

use std::os::fd::{AsFd as _, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, PidfdFlags, Signal, WaitId, WaitIdOptions};

use super::findable::{self, Findable};
use super::wire::{self, ExitStatus, Held, Message};
use super::{PID_FILE, SOCKET};

/// How long a container killed for want of an adopter has to exit.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// The shim's command line.
#[derive(Debug, Default)]
struct Args {
    bundle: PathBuf,
    id: String,
    pid_file: PathBuf,
    cgroups_path: String,
    anchor_bases: Vec<PathBuf>,
    adoption_timeout: Duration,
    argv: Vec<String>,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut out = Args::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "--" {
            out.argv = it.cloned().collect();
            break;
        }
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?
            .clone();
        match flag.as_str() {
            "--bundle" => out.bundle = value.into(),
            "--id" => out.id = value,
            "--pid-file" => out.pid_file = value.into(),
            "--cgroups-path" => out.cgroups_path = value,
            "--anchor-base" => out.anchor_bases.push(value.into()),
            "--adoption-timeout" => {
                let secs: u64 = value.parse().map_err(|_| {
                    format!("--adoption-timeout {value:?} is not a number of seconds")
                })?;
                out.adoption_timeout = Duration::from_secs(secs);
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    if out.argv.is_empty() || out.id.is_empty() || out.bundle.as_os_str().is_empty() {
        return Err("usage: mesopod shim --bundle DIR --id ID --pid-file FILE [--cgroups-path P] [--anchor-base DIR]… [--adoption-timeout SECS] -- RUNTIME ARGS…".into());
    }
    Ok(out)
}

/// Runs `mesopod shim ARGS…`; returns the exit code.
pub fn main(args: &[String]) -> i32 {
    match parse(args).and_then(|a| run(&a)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("mesopod shim: {e}");
            1
        }
    }
}

/// The launcher's socket is this process' stdin; stdin becomes
/// `/dev/null`, so the runtime and container never see the socket.
fn take_launcher() -> Result<OwnedFd, String> {
    let launcher = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| format!("no launcher socket on stdin: {e}"))?;
    let null = std::fs::File::open("/dev/null").map_err(|e| format!("/dev/null: {e}"))?;
    rustix::stdio::dup2_stdin(&null).map_err(|e| format!("dup2: {e}"))?;
    Ok(launcher)
}

fn run(args: &Args) -> Result<(), String> {
    let launcher = take_launcher()?;
    let (stdin, held, mut fds) = match wire::recv(launcher.as_fd()) {
        Ok(Some((Message::Run { stdin, held }, fds))) => (stdin, held, fds),
        Ok(other) => return Err(format!("expected a run message, got {other:?}")),
        Err(e) => return Err(format!("reading the run message: {e}")),
    };
    let ends = 2 + usize::from(stdin);
    if fds.len() != ends + held.len() {
        return Err(format!(
            "the run message carried {} descriptors, not {}",
            fds.len(),
            ends + held.len()
        ));
    }
    let held_fds = fds.split_off(ends);
    let mut ends = fds.into_iter();
    let (out, err) = (ends.next(), ends.next());
    let input = ends.next();
    let _ = rustix::process::setsid();
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .map_err(|e| format!("cannot become a child subreaper: {e}"))?;
    let anchors = super::anchor::enter(&args.anchor_bases, &args.id)?;
    // Without it (the bundle's path unresolvable) only the timeout ends an
    // orphan's wait.
    let findable = std::fs::canonicalize(&args.bundle)
        .and_then(|b| Findable::new(&b))
        .ok();
    std::env::set_current_dir(&args.bundle)
        .map_err(|e| format!("cannot enter {}: {e}", args.bundle.display()))?;
    let listener = listen()?;
    let ran = std::process::Command::new(&args.argv[0])
        .args(&args.argv[1..])
        .stdin(input.map_or_else(Stdio::null, Stdio::from))
        .stdout(out.map_or_else(Stdio::null, Stdio::from))
        .stderr(err.map_or_else(Stdio::null, Stdio::from))
        .spawn()
        .and_then(|child| run_watched(child, &launcher, &args.pid_file));
    let failed = |status: String| {
        let _ = wire::send(launcher.as_fd(), &Message::RunFailed { status }, &[]);
        let _ = std::fs::remove_file(SOCKET);
        super::anchor::remove(&anchors);
    };
    match ran {
        Ok(s) if s.success() => {}
        Ok(s) => {
            failed(s.to_string());
            return Ok(());
        }
        Err(e) => {
            failed(format!("cannot run {}: {e}", args.argv[0]));
            return Ok(());
        }
    }
    let pid = std::fs::read_to_string(&args.pid_file)
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok())
        .and_then(Pid::from_raw);
    let Some(pid) = pid else {
        failed("the runtime wrote no pid file".into());
        return Ok(());
    };
    // The container is this process' child (a subreaper), so even one that
    // exited already is a zombie the pidfd still names.
    let pidfd = match rustix::process::pidfd_open(pid, PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(e) => {
            failed(format!("pidfd_open: {e}"));
            return Ok(());
        }
    };
    let _ = std::fs::write(
        PID_FILE,
        super::pid_record(std::process::id()).unwrap_or_default(),
    );
    let shim = Shim {
        pid: u32::try_from(pid.as_raw_nonzero().get()).unwrap_or_default(),
        pidfd,
        held,
        held_fds,
        cgroups_path: args.cgroups_path.clone(),
        timeout: args.adoption_timeout,
        findable,
    };
    let started = Message::Started { pid: shim.pid };
    let owner = wire::send(launcher.as_fd(), &started, &[shim.pidfd.as_fd()])
        .is_ok()
        .then_some(launcher);
    shim.serve(owner, &listener);
    let _ = std::fs::remove_file(SOCKET);
    let _ = std::fs::remove_file(PID_FILE);
    super::anchor::remove(&anchors);
    Ok(())
}

/// Waits for the runtime's `run` while its launcher lives. A launcher that
/// goes meanwhile (the executor died) gets no container: the runtime, and
/// the container if it was made, are killed, as nothing could adopt them
/// yet, and a runtime stuck on a full pipe would wait for ever.
fn run_watched(
    mut child: std::process::Child,
    launcher: &OwnedFd,
    pid_file: &std::path::Path,
) -> std::io::Result<std::process::ExitStatus> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        let mut fds = [PollFd::new(launcher, PollFlags::IN)];
        let tick = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 20_000_000,
        };
        let _ = rustix::event::poll(&mut fds, Some(&tick));
        let gone =
            !fds[0].revents().is_empty() && !matches!(wire::recv(launcher.as_fd()), Ok(Some(_)));
        if gone {
            let _ = child.kill();
            let _ = child.wait();
            let container = std::fs::read_to_string(pid_file)
                .ok()
                .and_then(|p| p.trim().parse::<i32>().ok())
                .and_then(Pid::from_raw);
            if let Some(pid) = container {
                let _ = rustix::process::kill_process(pid, Signal::KILL);
            }
            return Err(std::io::Error::other(
                "the executor went while the container was being made",
            ));
        }
    }
}

/// Polls `fd` for input too; returns its index.
fn add<'a>(fds: &mut Vec<PollFd<'a>>, fd: BorrowedFd<'a>) -> usize {
    fds.push(PollFd::from_borrowed_fd(fd, PollFlags::IN));
    fds.len() - 1
}

/// Binds `shim.sock` in the current directory (the bundle): relative, so
/// a deep agent work dir never meets the 108-byte limit of a socket path.
fn listen() -> Result<OwnedFd, String> {
    let socket = rustix::net::socket_with(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| format!("socket: {e}"))?;
    let _ = std::fs::remove_file(SOCKET);
    let addr = rustix::net::SocketAddrUnix::new(SOCKET).map_err(|e| format!("{SOCKET}: {e}"))?;
    rustix::net::bind(&socket, &addr).map_err(|e| format!("bind {SOCKET}: {e}"))?;
    std::fs::set_permissions(SOCKET, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .map_err(|e| format!("chmod {SOCKET}: {e}"))?;
    rustix::net::listen(&socket, 4).map_err(|e| format!("listen: {e}"))?;
    Ok(socket)
}

struct Shim {
    pid: u32,
    pidfd: OwnedFd,
    held: Vec<Held>,
    held_fds: Vec<OwnedFd>,
    cgroups_path: String,
    timeout: Duration,
    findable: Option<Findable>,
}

impl Shim {
    fn serve(&self, mut owner: Option<OwnedFd>, listener: &OwnedFd) {
        let mut exit: Option<ExitStatus> = None;
        // Once no adopter could find the shim (`lost`), an owner that goes
        // is not waited for.
        let mut lost = false;
        let adopter_by =
            |lost: bool| Some(Instant::now() + if lost { Duration::ZERO } else { self.timeout });
        // Set while nobody owns the shim: when to give up on an adopter
        // (and, once the container was killed, on its exit).
        let mut deadline = if owner.is_none() {
            adopter_by(lost)
        } else {
            None
        };
        let mut killed = false;
        loop {
            if owner.is_none()
                && !lost
                && !killed
                && self.findable.as_ref().is_some_and(|f| !f.still())
            {
                lost = true;
                deadline = adopter_by(lost);
            }
            let wait = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if wait == Some(Duration::ZERO) {
                if exit.is_some() || killed {
                    return;
                }
                // Nobody adopted it: the container goes, as its executor's
                // container would have gone.
                let _ = rustix::process::pidfd_send_signal(&self.pidfd, Signal::KILL);
                killed = true;
                deadline = Some(Instant::now() + KILL_GRACE);
                continue;
            }
            // An orphan looks again whether it could be found.
            let wait = match wait {
                Some(w) if owner.is_none() && !lost => Some(w.min(findable::EVERY)),
                w => w,
            };
            let timeout = wait.map(|w| rustix::time::Timespec {
                tv_sec: i64::try_from(w.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(w.subsec_nanos()),
            });
            let mut fds = vec![PollFd::new(listener, PollFlags::IN)];
            let container_at = exit.is_none().then(|| add(&mut fds, self.pidfd.as_fd()));
            let owner_at = owner.as_ref().map(|o| add(&mut fds, o.as_fd()));
            match rustix::event::poll(&mut fds, timeout.as_ref()) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(_) => return,
            }
            let ready: Vec<bool> = fds.iter().map(|f| !f.revents().is_empty()).collect();
            drop(fds);
            let ready = |at: Option<usize>| at.is_some_and(|i| ready[i]);
            if ready(container_at) {
                let code = self.reap();
                let status = ExitStatus {
                    code,
                    oom: code == 137 && self.oom_killed(),
                };
                exit = Some(status);
                if killed && owner.is_none() {
                    return;
                }
                if let Some(o) = &owner
                    && wire::send(o.as_fd(), &Message::Exited(status), &[]).is_err()
                {
                    owner = None;
                    deadline = adopter_by(lost);
                }
            }
            if owner.is_some() && ready(owner_at) {
                let said = owner.as_ref().map(|o| wire::recv(o.as_fd()));
                match said {
                    Some(Ok(Some((Message::Release, _)))) if exit.is_some() => return,
                    Some(Ok(Some(_))) => {}
                    _ => {
                        owner = None;
                        deadline = adopter_by(lost);
                    }
                }
            }
            if ready(Some(0))
                && !killed
                && let Some(new) = self.accept(listener, exit)
            {
                owner = Some(new);
                deadline = None;
            }
        }
    }

    /// A new owner: root (or this shim's user) only; it gets the container
    /// and the held pipe ends.
    fn accept(&self, listener: &OwnedFd, exit: Option<ExitStatus>) -> Option<OwnedFd> {
        let conn = rustix::net::accept_with(listener, rustix::net::SocketFlags::CLOEXEC).ok()?;
        let me = rustix::process::geteuid();
        let peer = rustix::net::sockopt::socket_peercred(&conn).ok()?;
        if !(peer.uid == me || peer.uid.is_root()) {
            return None;
        }
        let hello = Message::Hello {
            pid: self.pid,
            exit,
            held: self.held.clone(),
        };
        let mut fds = vec![self.pidfd.as_fd()];
        fds.extend(self.held_fds.iter().map(|f| f.as_fd()));
        wire::send(conn.as_fd(), &hello, &fds).ok()?;
        Some(conn)
    }

    fn reap(&self) -> i32 {
        let status = loop {
            match rustix::process::waitid(WaitId::PidFd(self.pidfd.as_fd()), WaitIdOptions::EXITED)
            {
                Err(rustix::io::Errno::INTR) => continue,
                other => break other,
            }
        };
        match status {
            Ok(Some(s)) => s
                .exit_status()
                .or_else(|| s.terminating_signal().map(|n| 128 + n))
                .unwrap_or(128),
            _ => 128,
        }
    }

    fn oom_killed(&self) -> bool {
        crate::oci::cgroup::memory_dir(&self.cgroups_path)
            .is_some_and(|d| crate::oci::cgroup::oom_killed(&d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_checked() {
        let args: Vec<String> = [
            "--bundle",
            "/b",
            "--id",
            "c1",
            "--pid-file",
            "/b/pid",
            "--adoption-timeout",
            "900",
            "--",
            "runc",
            "run",
            "c1",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let a = parse(&args).unwrap_or_default();
        assert_eq!(a.argv, ["runc", "run", "c1"]);
        assert_eq!(a.adoption_timeout, Duration::from_secs(900));
        assert!(parse(&args[..8]).is_err(), "no runtime command");
        let bad = ["--adoption-timeout".to_owned(), "soon".to_owned()];
        assert!(parse(&bad).is_err_and(|e| e.contains("not a number")));
    }
}
