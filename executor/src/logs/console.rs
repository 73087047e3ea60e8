//! A `tty: true` container's terminal, as containerd's shim holds it: the
//! runtime makes the pty (OCI `process.terminal`) and hands this executor
//! its master ([`crate::oci::console_socket`]); the master's output is the
//! container's whole output, logged as `stdout` (kubelet's stream for a
//! tty), and attach writes the container's stdin to it and resizes it.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use tokio::net::unix::pipe;
use tokio::sync::oneshot;

use super::attach_io::ContainerIo;

/// Where a run's terminal goes once the runtime made it.
#[derive(Debug)]
pub(crate) struct Console {
    pub(super) pump: oneshot::Sender<pipe::Receiver>,
    pub(super) io: Arc<ContainerIo>,
    pub(super) stdin: bool,
}

impl Console {
    /// Takes the pty's master: its output into the log and the attach tap,
    /// attach's input and resizes to it.
    ///
    /// # Errors
    /// The descriptor could not be duplicated or registered with tokio.
    pub(crate) async fn attach(self, master: OwnedFd) -> io::Result<()> {
        // The master is not a FIFO, which tokio's pipe checks for; it
        // polls like one (epoll works on ptys).
        let reader = pipe::Receiver::from_owned_fd_unchecked(master.try_clone()?)?;
        let writer = match self.stdin {
            true => Some(pipe::Sender::from_owned_fd_unchecked(master.try_clone()?)?),
            false => None,
        };
        // The pump may be gone already (the log could not be written):
        // the terminal then still takes input.
        let _ = self.pump.send(reader);
        self.io.set_terminal(master, writer).await;
        Ok(())
    }
}

/// Sets a terminal's size through its master.
pub(crate) fn resize(master: &impl AsFd, width: u16, height: u16) {
    let size = rustix::termios::Winsize {
        ws_row: height,
        ws_col: width,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    if let Err(e) = rustix::termios::tcsetwinsize(master, size) {
        tracing::debug!(error = %e, "cannot resize a container's terminal");
    }
}

/// Hangs a terminal up: `SIGHUP` to its foreground process group (the
/// kernel names it in this process' PID namespace), as when the terminal's
/// master closes; the master itself stays open for the output that follows.
pub(crate) fn hang_up(master: &impl AsFd) {
    match rustix::termios::tcgetpgrp(master) {
        Ok(pgrp) => {
            if let Err(e) = rustix::process::kill_process_group(pgrp, rustix::process::Signal::HUP)
            {
                tracing::debug!(error = %e, "cannot hang up a container's terminal");
            }
        }
        Err(e) => tracing::debug!(error = %e, "a container's terminal has no foreground group"),
    }
}
