//! The network probes' dialer: one fresh TCP connection per attempt, as
//! kubelet opens, for as few syscalls as the kernel allows.
//!
//! A probe's peer is nearly always on this host (the pod's veth, or
//! loopback), where the kernel completes the whole handshake inside the
//! `connect` call. So the socket is connected nonblocking and asked once
//! more (a second `connect` answers `0` once established); only when the
//! handshake is really still under way is the socket handed to tokio to
//! wait for it. A `tcpSocket` probe that connected at once then closes the
//! socket without it ever touching the reactor: `socket`, `connect`,
//! `connect`, `close`, against tokio's `socket`, `connect`, `epoll_ctl`,
//! a wakeup, `getsockopt`, `epoll_ctl`, `close`.
//!
//! An `httpGet` or `grpc` probe stays off the reactor too ([`Conn`]): its
//! request goes straight into the socket and its answer is read at the
//! grid's next step, when it is there. Counted with `strace -c -f` over
//! the probe bench, an httpGet attempt is `socket`, two `connect`s,
//! `sendto`, `recvfrom` and `close` (one in about 180 still registers, its
//! answer late), where it also had an `epoll_ctl` pair and a reactor
//! wakeup of its own; a grpc attempt adds one `sendto` (the SETTINGS ack)
//! and one `recvfrom`.
//!
//! Closing is a plain `close`: FIN, as kubelet's probes close. kubelet's
//! `ProbeDialer` also sets `SO_LINGER {on, 1 s}`, but on Linux that only
//! bounds how long `close` may block (which here would block a runtime
//! worker); the FIN and TIME_WAIT (60 s, `TCP_TIMEWAIT_LEN`) stay the same.
//! A linger of 0 would skip both, but answers the pod with a RST, which
//! kubelet chose not to do (the ProbeDialer's own comment); measured in
//! the probe bench it was no cheaper either.

use std::io::{
    self,
    ErrorKind::{Interrupted, WouldBlock},
};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use rustix::io::Errno;
use rustix::net::{AddressFamily, SocketFlags, SocketType};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use super::tcp::{go_error, join_host_port};
use super::worker::next_step;

/// A connected probe socket, and the stream a probe talks over.
///
/// It stays off the reactor for as long as the kernel answers at once:
/// reads and writes go straight to the socket, and only one that would
/// block registers it with tokio (one `epoll_ctl`) to wait. A probe that
/// first [`settle`](Conn::settle)s finds its answer already there and reads
/// it with one `recv`; closing a socket the reactor never saw is one
/// `close`, without tokio's `epoll_ctl` to remove it first.
#[derive(Debug)]
pub(crate) enum Conn {
    /// Connected, not registered with the reactor.
    Ready(std::net::TcpStream),
    /// Registered with the reactor, to wait on.
    Waited(TcpStream),
    /// Registering failed; the error was returned then.
    Lost,
}

impl Conn {
    /// The stream as tokio's, registering it if it was not yet.
    fn waited(&mut self) -> io::Result<&mut TcpStream> {
        if let Conn::Ready(_) = self {
            *self = match std::mem::replace(self, Conn::Lost) {
                Conn::Ready(s) => Conn::Waited(TcpStream::from_std(s)?),
                other => other,
            };
        }
        match self {
            Conn::Waited(s) => Ok(s),
            _ => Err(io::Error::from(io::ErrorKind::NotConnected)),
        }
    }

    /// Writes `bytes`, then hands the connection back to read the answer.
    /// A small request goes whole into an unregistered socket.
    pub(crate) async fn send(mut self, bytes: &[u8]) -> Result<Conn, String> {
        self.write_all(bytes).await.map_err(|e| go_error(&e))?;
        Ok(self)
    }

    /// Waits for the next step of the probes' shared grid before the first
    /// read, when the socket is not on the reactor: a peer on this host has
    /// answered by then, and the probe reads the answer with one `recv` in
    /// the same wakeup as the attempts due at that step, instead of
    /// registering the socket and being woken for it alone. An answer that
    /// is not there yet is waited for on the reactor, as before; the
    /// attempt's timeout runs all along.
    pub(crate) async fn settle(&self) {
        if matches!(self, Conn::Ready(_)) {
            tokio::time::sleep_until(next_step()).await;
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Conn::Ready(s) = this {
            match io::Read::read(s, buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // tokio retries an interrupted read; so does its stream.
                Err(e) if matches!(e.kind(), WouldBlock | Interrupted) => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Pin::new(this.waited()?).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Conn::Ready(s) = this {
            match io::Write::write(s, bytes) {
                Err(e) if matches!(e.kind(), WouldBlock | Interrupted) => {}
                done => return Poll::Ready(done),
            }
        }
        Pin::new(this.waited()?).poll_write(cx, bytes)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Waited(s) => Pin::new(s).poll_flush(cx),
            _ => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Ready(s) => Poll::Ready(s.shutdown(std::net::Shutdown::Write)),
            Conn::Waited(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Lost => Poll::Ready(Ok(())),
        }
    }
}

/// How far one nonblocking `connect` got.
enum Started {
    Connected(std::net::TcpStream),
    Pending(std::net::TcpStream),
}

fn start(addr: SocketAddr) -> io::Result<Started> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
    let fd = rustix::net::socket_with(family, SocketType::STREAM, flags, None)?;
    match rustix::net::connect(&fd, &addr) {
        Ok(()) => return Ok(Started::Connected(fd.into())),
        Err(Errno::INPROGRESS) => {}
        Err(e) => return Err(e.into()),
    }
    // The handshake usually finished inside the first call; asking again
    // says so (0), or that it is still going (EALREADY), or how it failed.
    match rustix::net::connect(&fd, &addr) {
        Ok(()) | Err(Errno::ISCONN) => Ok(Started::Connected(fd.into())),
        Err(Errno::ALREADY | Errno::INPROGRESS) => Ok(Started::Pending(fd.into())),
        Err(e) => Err(e.into()),
    }
}

async fn dial_addr(addr: SocketAddr) -> io::Result<Conn> {
    match start(addr)? {
        Started::Connected(s) => Ok(Conn::Ready(s)),
        Started::Pending(s) => {
            let s = TcpStream::from_std(s)?;
            // Writable once the handshake ends either way; SO_ERROR says how.
            s.writable().await?;
            match s.take_error()? {
                Some(e) => Err(e),
                None => Ok(Conn::Waited(s)),
            }
        }
    }
}

async fn dial_any(host: &str, port: u16) -> io::Result<Conn> {
    if let Ok(ip) = host.trim_matches(['[', ']']).parse::<IpAddr>() {
        return dial_addr(SocketAddr::new(ip, port)).await;
    }
    // A name (an `httpGet.host`): each address in turn, as tokio's
    // `TcpStream::connect` tries them; the last error is the answer.
    let mut last = None;
    for addr in tokio::net::lookup_host((host, port)).await? {
        match dial_addr(addr).await {
            Ok(c) => return Ok(c),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no such host")))
}

/// Dials `host:port` within `timeout`; errors in Go's dialer's words.
pub(crate) async fn dial(host: &str, port: u16, timeout: Duration) -> Result<Conn, String> {
    match tokio::time::timeout(timeout, dial_any(host, port)).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(format!(
            "dial tcp {}: connect: {}",
            join_host_port(host, port),
            go_error(&e)
        )),
        Err(_) => Err(format!(
            "dial tcp {}: i/o timeout",
            join_host_port(host, port)
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use tokio::io::AsyncReadExt;

    use super::*;

    #[tokio::test]
    async fn a_loopback_peer_is_connected_within_connect_and_carries_data() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let conn = dial("127.0.0.1", port, Duration::from_secs(1))
            .await
            .unwrap();
        assert!(
            matches!(conn, Conn::Ready(_)),
            "loopback completes the handshake inside connect: {conn:?}"
        );
        let _client = conn.send(b"ping").await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 4];
        server.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
    }

    #[tokio::test]
    async fn an_answer_later_than_the_next_step_is_waited_for_on_the_reactor() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).await.unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
            tokio::io::AsyncWriteExt::write_all(&mut s, b"pong")
                .await
                .unwrap();
        });
        let conn = dial("127.0.0.1", port, Duration::from_secs(1))
            .await
            .unwrap();
        let mut conn = conn.send(b"ping").await.unwrap();
        conn.settle().await;
        let mut buf = [0u8; 4];
        conn.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");
        assert!(matches!(conn, Conn::Waited(_)), "{conn:?}");
    }

    #[tokio::test]
    async fn a_name_resolves_and_a_closed_port_fails_in_gos_words() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(
            dial("localhost", port, Duration::from_secs(2))
                .await
                .is_ok()
        );
        drop(listener);
        let err = dial("127.0.0.1", port, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert_eq!(
            err,
            format!("dial tcp 127.0.0.1:{port}: connect: connection refused")
        );
    }

    #[tokio::test]
    async fn an_unanswered_handshake_waits_on_the_reactor_and_times_out_in_gos_words() {
        // A listener whose accept queue is full drops further SYNs: the
        // handshake stays under way past `connect` until the timeout.
        let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
        rustix::net::bind(&fd, &SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
        rustix::net::listen(&fd, 0).unwrap();
        let std::net::SocketAddr::V4(bound) = std::net::TcpListener::from(fd.try_clone().unwrap())
            .local_addr()
            .unwrap()
        else {
            panic!("an IPv4 listener");
        };
        let mut held = Vec::new();
        let err = loop {
            match dial("127.0.0.1", bound.port(), Duration::from_millis(200)).await {
                Ok(conn) if held.len() < 8 => held.push(conn),
                Ok(_) => panic!("the accept queue never filled"),
                Err(e) => break e,
            }
        };
        assert_eq!(
            err,
            format!("dial tcp 127.0.0.1:{}: i/o timeout", bound.port())
        );
        drop(fd);
    }
}
