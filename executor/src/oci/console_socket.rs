//! runc's `--console-socket`: for a container with `process.terminal` the
//! runtime makes the pty inside the container and sends its master over a
//! Unix socket (`SCM_RIGHTS`, the payload the terminal's name), as it does
//! for containerd's shim. The socket lives in a directory of its own that
//! only root may enter, so no other local user can hand us a terminal.

use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::time::Duration;

use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
use tokio::io::Interest;
use tokio::net::UnixListener;

/// A listening console socket; its directory goes with it.
#[derive(Debug)]
pub(crate) struct ConsoleSocket {
    dir: PathBuf,
    listener: UnixListener,
}

impl ConsoleSocket {
    /// Listens at a fresh path (short: a socket's path is at most 107 bytes).
    pub(crate) fn bind() -> io::Result<ConsoleSocket> {
        use std::os::unix::fs::DirBuilderExt as _;
        let dir = std::env::temp_dir().join(format!("mesopod-console-{}", uuid::Uuid::new_v4()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        match UnixListener::bind(dir.join("sock")) {
            Ok(listener) => Ok(ConsoleSocket { dir, listener }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    /// What the runtime is given as `--console-socket`.
    pub(crate) fn path(&self) -> PathBuf {
        self.dir.join("sock")
    }

    /// The master the runtime sent. It sends it before its `create` (and
    /// so `run --detach`) returns, so once it did the connection is
    /// already queued; `within` bounds a runtime that never connects.
    pub(crate) async fn receive(&self, within: Duration) -> io::Result<OwnedFd> {
        let timed_out = || io::Error::new(io::ErrorKind::TimedOut, "no terminal from the runtime");
        let (stream, _) = tokio::time::timeout(within, self.listener.accept())
            .await
            .map_err(|_| timed_out())??;
        let read = stream.async_io(Interest::READABLE, || {
            let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let mut name = [0u8; 4096];
            let mut iov = [io::IoSliceMut::new(&mut name)];
            rustix::net::recvmsg(&stream, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC)?;
            let fd = control.drain().find_map(|m| match m {
                RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
                _ => None,
            });
            Ok(fd)
        });
        tokio::time::timeout(within, read)
            .await
            .map_err(|_| timed_out())??
            .ok_or_else(|| io::Error::other("the runtime sent no terminal"))
    }
}

impl Drop for ConsoleSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How long a runtime that returned may take to have sent its terminal.
const RECEIVE: Duration = Duration::from_secs(5);

/// Gives the terminal the runtime sent to `console` (the run's log and attach).
pub(crate) async fn hand_over(
    socket: &ConsoleSocket,
    console: crate::logs::console::Console,
) -> io::Result<()> {
    let master = socket.receive(RECEIVE).await?;
    console.attach(master).await
}
