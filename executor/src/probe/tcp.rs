//! `tcpSocket`: a TCP connection opened within the timeout succeeds.

use std::time::Duration;

use super::Outcome;
use super::dial::dial;

/// `host:port` as Go's dialer prints it (IPv6 in brackets).
pub(crate) fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// An I/O error in Go's words (`connection refused`), as kubelet's
/// messages carry them.
pub(crate) fn go_error(e: &std::io::Error) -> String {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused => "connection refused".into(),
        ConnectionReset => "connection reset by peer".into(),
        HostUnreachable => "no route to host".into(),
        NetworkUnreachable => "network is unreachable".into(),
        TimedOut => "i/o timeout".into(),
        _ => {
            let s = e.to_string();
            // Rust appends " (os error N)"; Go does not.
            s.split(" (os error").next().unwrap_or(&s).to_lowercase()
        }
    }
}

/// One `tcpSocket` attempt: connected is success. A connection made
/// inside `connect` is closed without ever reaching the reactor.
pub async fn probe(host: &str, port: u16, timeout: Duration) -> Outcome {
    match dial(host, port, timeout).await {
        Ok(_) => Outcome::Success,
        Err(e) => Outcome::Failure(e),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn an_open_port_succeeds_and_a_closed_one_fails_in_gos_words() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(
            probe("127.0.0.1", port, Duration::from_secs(1)).await,
            Outcome::Success
        );
        drop(listener);
        let Outcome::Failure(msg) = probe("127.0.0.1", port, Duration::from_secs(1)).await else {
            panic!("a closed port must fail");
        };
        assert_eq!(
            msg,
            format!("dial tcp 127.0.0.1:{port}: connect: connection refused")
        );
    }
}
