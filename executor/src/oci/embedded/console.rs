//! The container's terminal (`process.terminal`), as runc makes it: `create`
//! connects to `--console-socket` while it still sees the host's paths; once
//! `init` is in the container's root it opens a pty from the container's own
//! devpts (`/dev/ptmx`), makes the slave its controlling terminal and its
//! stdin, stdout and stderr, and sends the master over the socket
//! (`SCM_RIGHTS`, the terminal's name as the payload, as runc does).

use std::io::IoSlice;
use std::os::fd::{AsFd as _, OwnedFd};
use std::path::Path;

use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};

use super::RuntimeFailure;

/// Connects to the console socket (in `create`, before the fork).
pub(crate) fn connect(path: &Path) -> Result<OwnedFd, RuntimeFailure> {
    let stream = std::os::unix::net::UnixStream::connect(path).map_err(|e| {
        RuntimeFailure::io(format!("connect to console socket {}", path.display()), e)
    })?;
    Ok(stream.into())
}

/// In `init`, inside the container's root: with `terminal` makes the
/// terminal and sends its master over `socket`. runc's words when the two
/// do not go together.
pub(crate) fn setup(socket: Option<OwnedFd>, terminal: bool) -> Result<(), RuntimeFailure> {
    let socket = match (socket, terminal) {
        (None, false) => return Ok(()),
        (Some(s), true) => s,
        (None, true) => {
            return Err(RuntimeFailure(
                "cannot allocate tty if runc will detach without setting console socket".into(),
            ));
        }
        (Some(_), false) => {
            return Err(RuntimeFailure(
                "cannot use console socket if runc will not detach or allocate tty".into(),
            ));
        }
    };
    let failed = |e: &dyn std::fmt::Display| RuntimeFailure(format!("console: {e}"));
    let pty = crate::oci::exec::Pty::open().map_err(|e| failed(&e))?;
    let slave = pty.slave().map_err(|e| failed(&e))?;
    let master = OwnedFd::from(pty.file().map_err(|e| failed(&e))?);
    let name = rustix::pty::ptsname(&master, Vec::new()).map_err(|e| failed(&e))?;
    // A session of its own, whose controlling terminal the slave becomes:
    // the shell gets job control, SIGWINCH and SIGHUP.
    rustix::process::setsid().map_err(|e| failed(&e))?;
    rustix::process::ioctl_tiocsctty(&slave).map_err(|e| failed(&e))?;
    rustix::stdio::dup2_stdin(&slave).map_err(|e| failed(&e))?;
    rustix::stdio::dup2_stdout(&slave).map_err(|e| failed(&e))?;
    rustix::stdio::dup2_stderr(&slave).map_err(|e| failed(&e))?;
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let fds = [master.as_fd()];
    control.push(SendAncillaryMessage::ScmRights(&fds));
    rustix::net::sendmsg(
        &socket,
        &[IoSlice::new(name.as_bytes())],
        &mut control,
        SendFlags::empty(),
    )
    .map_err(|e| failed(&format!("send the terminal: {e}")))?;
    Ok(())
}
