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
//! Closing is a plain `close`: FIN, as kubelet's probes close. kubelet's
//! `ProbeDialer` also sets `SO_LINGER {on, 1 s}`, but on Linux that only
//! bounds how long `close` may block (which here would block a runtime
//! worker); the FIN and TIME_WAIT (60 s, `TCP_TIMEWAIT_LEN`) stay the same.
//! A linger of 0 would skip both, but answers the pod with a RST, which
//! kubelet chose not to do (the ProbeDialer's own comment); measured in
//! the probe bench it was no cheaper either.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use rustix::io::Errno;
use rustix::net::{AddressFamily, SocketFlags, SocketType};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::tcp::{go_error, join_host_port};

/// A connected probe socket.
#[derive(Debug)]
pub(crate) enum Conn {
    /// Connected within `connect`, not registered with the reactor.
    Ready(std::net::TcpStream),
    /// Connected after waiting on the reactor.
    Waited(TcpStream),
}

impl Conn {
    /// The connection as a tokio stream, to talk over.
    pub(crate) fn into_tokio(self) -> Result<TcpStream, String> {
        match self {
            Conn::Ready(s) => TcpStream::from_std(s).map_err(|e| go_error(&e)),
            Conn::Waited(s) => Ok(s),
        }
    }

    /// Writes `bytes`, then hands the connection over to read the answer.
    /// A socket connected within `connect` takes a small request whole
    /// before it meets the reactor: tokio would first wait for the
    /// reactor to report it writable, a wakeup for nothing.
    pub(crate) async fn send(self, bytes: &[u8]) -> Result<TcpStream, String> {
        let (mut tcp, rest) = match self {
            Conn::Ready(mut s) => {
                let n = match std::io::Write::write(&mut s, bytes) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => 0,
                    Err(e) => return Err(go_error(&e)),
                };
                let tcp = TcpStream::from_std(s).map_err(|e| go_error(&e))?;
                (tcp, &bytes[n..])
            }
            Conn::Waited(s) => (s, bytes),
        };
        if !rest.is_empty() {
            tcp.write_all(rest).await.map_err(|e| go_error(&e))?;
        }
        Ok(tcp)
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
