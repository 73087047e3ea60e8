//! The shim's messages: one JSON object per `SOCK_SEQPACKET` packet, file
//! descriptors riding along as `SCM_RIGHTS`. Packets keep their bounds,
//! so a message and its descriptors always arrive together.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use serde::{Deserialize, Serialize};

/// The most descriptors one message carries: the container's pidfd and
/// the three pipe ends the shim holds, or the launcher's six pipe ends.
pub(crate) const MAX_FDS: usize = 8;

/// The longest message: a few numbers and words.
const MAX_MESSAGE: usize = 4096;

/// What a descriptor the shim holds for its owner is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Held {
    /// The read end of the container's stdout pipe.
    Stdout,
    /// The read end of the container's stderr pipe.
    Stderr,
    /// The write end of the container's stdin pipe.
    Stdin,
}

/// How the container's init ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitStatus {
    /// The exit code, 128 + the signal for a killed process.
    pub code: i32,
    /// The kernel's OOM killer killed a process of the container's cgroup.
    pub oom: bool,
}

/// One message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub(crate) enum Message {
    /// Launcher → shim, first: run the runtime. Descriptors: the
    /// container's stdout and stderr (and stdin when `stdin`), then one per
    /// `held`, to keep for whoever owns the shim.
    Run { stdin: bool, held: Vec<Held> },
    /// Shim → launcher: the container runs. Descriptor: its pidfd.
    Started { pid: u32 },
    /// Shim → launcher: the runtime failed (its exit status, in words).
    RunFailed { status: String },
    /// Shim → a new owner, first: the container, and whether it ended
    /// meanwhile. Descriptors: the container's pidfd, then one per `held`.
    Hello {
        pid: u32,
        exit: Option<ExitStatus>,
        held: Vec<Held>,
    },
    /// Shim → owner: the container exited.
    Exited(ExitStatus),
    /// Owner → shim: the exit was seen; the shim may go.
    Release,
}

/// Sends `message` with `fds`.
pub(crate) fn send(
    socket: BorrowedFd<'_>,
    message: &Message,
    fds: &[BorrowedFd<'_>],
) -> io::Result<()> {
    let bytes = serde_json::to_vec(message).map_err(io::Error::other)?;
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty()
        && (fds.len() > MAX_FDS || !control.push(SendAncillaryMessage::ScmRights(fds)))
    {
        return Err(io::Error::other("too many descriptors for one message"));
    }
    loop {
        match rustix::net::sendmsg(
            socket,
            &[IoSlice::new(&bytes)],
            &mut control,
            SendFlags::NOSIGNAL,
        ) {
            Ok(_) => return Ok(()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// The next message and its descriptors; `None` when the peer is gone.
pub(crate) fn recv(socket: BorrowedFd<'_>) -> io::Result<Option<(Message, Vec<OwnedFd>)>> {
    let mut bytes = vec![0u8; MAX_MESSAGE];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = loop {
        match rustix::net::recvmsg(
            socket,
            &mut [IoSliceMut::new(&mut bytes)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(got) => break got,
            Err(rustix::io::Errno::INTR) => continue,
            Err(rustix::io::Errno::CONNRESET) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    };
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    if got.bytes == 0 {
        return Ok(None);
    }
    if got.flags.contains(rustix::net::ReturnFlags::TRUNC)
        || got.flags.contains(rustix::net::ReturnFlags::CTRUNC)
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a shim message was cut short",
        ));
    }
    let message = serde_json::from_slice(&bytes[..got.bytes]).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a bad shim message: {e}"),
        )
    })?;
    Ok(Some((message, fds)))
}

/// A connected pair of packet sockets (close-on-exec).
pub(crate) fn pair() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )?)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::{Read as _, Write as _};
    use std::os::fd::AsFd as _;

    #[test]
    fn messages_carry_their_descriptors() {
        let (a, b) = pair().unwrap();
        let (r, w) = std::io::pipe().unwrap();
        let sent = Message::Hello {
            pid: 7,
            exit: Some(ExitStatus {
                code: 137,
                oom: true,
            }),
            held: vec![Held::Stdout],
        };
        send(a.as_fd(), &sent, &[r.as_fd()]).unwrap();
        drop(r);
        let (got, fds) = recv(b.as_fd()).unwrap().unwrap();
        assert_eq!(got, sent);
        assert_eq!(fds.len(), 1);
        let mut w = w;
        w.write_all(b"still open").unwrap();
        drop(w);
        let mut text = String::new();
        std::fs::File::from(fds.into_iter().next().unwrap())
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "still open");
    }

    #[test]
    fn a_closed_peer_is_none_and_garbage_is_an_error() {
        let (a, b) = pair().unwrap();
        rustix::net::send(&a, b"{not json", SendFlags::empty()).unwrap();
        let err = recv(b.as_fd()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        drop(a);
        assert!(recv(b.as_fd()).unwrap().is_none());
    }
}
