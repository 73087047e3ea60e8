//! Thousands of idle or half-sent connections cannot exhaust descriptors or
//! starve `/healthz`: the connection cap displaces idle connections for new
//! ones, and the header-read timeout closes connections that never finish a
//! request. Checked on mesopod's API, plain and TLS (one accept loop serves
//! both; the header-read timeout bounds the TLS handshake too), and on
//! localmesos' master.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::{Duration, Instant};

use common::cluster::{Setup, app_config};
use common::secure::Secure;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Raises the soft descriptor limit to the hard one (as Go programs do at
/// start) and says how many flood sockets this process can afford: it holds
/// both ends of each connection.
fn affordable(wanted: usize) -> usize {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    let _ = setrlimit(Resource::Nofile, limit);
    let soft = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    let room = usize::try_from(soft.saturating_sub(600) / 2).unwrap_or(usize::MAX);
    wanted.min(room)
}

/// `n` connections that send nothing, and `half` that stop halfway
/// through a request's headers.
async fn flood(addr: std::net::SocketAddr, n: usize, half: usize) -> Vec<TcpStream> {
    let mut socks = Vec::with_capacity(n + half);
    for i in 0..n + half {
        let mut s = TcpStream::connect(addr).await.unwrap();
        if i >= n {
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                .await
                .unwrap();
        }
        socks.push(s);
    }
    socks
}

/// `url` answers 200 within a second, five times in a row.
async fn answers_promptly(url: &str) {
    testkit::init_crypto();
    let client = reqwest::Client::new();
    for _ in 0..5 {
        let started = Instant::now();
        let resp = tokio::time::timeout(Duration::from_secs(2), client.get(url).send())
            .await
            .unwrap_or_else(|_| panic!("{url} did not answer within 2s"))
            .unwrap();
        assert_eq!(resp.status(), 200, "{url}");
        let took = started.elapsed();
        assert!(took < Duration::from_secs(1), "{url} took {took:?}");
    }
}

/// Whether the server has closed `s` (a read sees EOF or a reset).
async fn closed_by_server<S: AsyncRead + Unpin>(s: &mut S, within: Duration) -> bool {
    let mut buf = [0u8; 512];
    loop {
        match tokio::time::timeout(within, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            // A 408 or 400 before the close.
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_promptly_while_thousands_of_idle_and_half_sent_connections_are_open() {
    let n = affordable(3000);
    let app = framework::app::App::start(app_config(Setup {
        agents: vec![],
        ..Setup::default()
    }))
    .await
    .unwrap();
    let socks = flood(app.addr(), n, n / 10).await;
    eprintln!("{} idle and {} half-sent connections open", n, n / 10);
    answers_promptly(&format!("{}/healthz", app.api_url())).await;
    answers_promptly(&format!("{}/api/v1/namespaces", app.api_url())).await;
    drop(socks);
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_connection_cap_idle_connections_make_room_and_slow_ones_time_out() {
    let n = affordable(1000);
    let mut cfg = app_config(Setup {
        agents: vec![],
        ..Setup::default()
    });
    cfg.hardening.limits.max_connections = 64;
    cfg.hardening.limits.header_read_timeout = Duration::from_millis(500);
    let app = framework::app::App::start(cfg).await.unwrap();
    let mut socks = flood(app.addr(), n, 0).await;
    answers_promptly(&format!("{}/healthz", app.api_url())).await;
    // At most the cap is still open: every older idle connection was closed.
    let mut closed = 0;
    for s in &mut socks {
        if closed_by_server(s, Duration::from_millis(20)).await {
            closed += 1;
        }
    }
    assert!(
        closed >= n - 64,
        "{closed} of {n} idle connections closed with a cap of 64"
    );
    // A connection that stops halfway through its headers is closed after
    // the header-read timeout, without anyone else connecting.
    drop(socks);
    let mut slow = TcpStream::connect(app.addr()).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    assert!(closed_by_server(&mut slow, Duration::from_secs(10)).await);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(5),
        "closed after {took:?}"
    );
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn localmesos_keeps_answering_state_under_an_idle_connection_flood() {
    let n = affordable(1000);
    let cluster = localmesos::LocalMesos::start(localmesos::Config {
        security: localmesos::Security {
            max_connections: 64,
            header_read_timeout: Duration::from_millis(500),
            ..localmesos::Security::default()
        },
        ..localmesos::Config::default()
    })
    .await
    .unwrap();
    let socks = flood(cluster.master_addr(), n, n / 10).await;
    answers_promptly(&format!("{}/state", cluster.master_url())).await;
    drop(socks);
    cluster.shutdown().await;
}

/// A TLS connection to `secure`'s API as its admin.
async fn tls_connect(secure: &Secure) -> tokio_rustls::client::TlsStream<TcpStream> {
    let tcp = TcpStream::connect(secure.app.addr()).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    tokio_rustls::TlsConnector::from(secure.admin_tls())
        .connect(name, tcp)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tls_listener_has_the_cap_the_header_read_timeout_and_a_handshake_timeout() {
    let secure = Secure::start_with(|cfg| {
        cfg.hardening.limits.max_connections = 16;
        cfg.hardening.limits.header_read_timeout = Duration::from_millis(500);
    })
    .await;
    let within =
        |took: Duration| took >= Duration::from_millis(400) && took < Duration::from_secs(5);

    // A stalled handshake: half a ClientHello record header, then nothing.
    let mut stalled = TcpStream::connect(secure.app.addr()).await.unwrap();
    stalled.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
    let started = Instant::now();
    assert!(closed_by_server(&mut stalled, Duration::from_secs(10)).await);
    let took = started.elapsed();
    assert!(within(took), "stalled handshake closed after {took:?}");

    // Slowloris over TLS: the handshake done, the headers never finished.
    let mut slow = tls_connect(&secure).await;
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    assert!(closed_by_server(&mut slow, Duration::from_secs(10)).await);
    let took = started.elapsed();
    assert!(within(took), "half-sent TLS request closed after {took:?}");

    // At the cap, idle connections (here: never even shaking hands) make
    // room, and a real request over TLS still gets through.
    let mut idle = flood(secure.app.addr(), 100, 0).await;
    let mut ok = tls_connect(&secure).await;
    ok.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), ok.read_to_string(&mut answer))
        .await
        .expect("healthz over TLS answers at the cap")
        .ok();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let mut closed = 0;
    for s in &mut idle {
        if closed_by_server(s, Duration::from_millis(20)).await {
            closed += 1;
        }
    }
    assert!(
        closed >= 100 - 16,
        "{closed} of 100 idle connections closed with a cap of 16"
    );
    drop(idle);

    // Every place taken by a request in service (watches): a new connection
    // is closed at once, before its handshake.
    let mut watches = Vec::new();
    for _ in 0..16 {
        let mut w = tls_connect(&secure).await;
        w.write_all(b"GET /api/v1/namespaces/default/pods?watch=true HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut head = [0u8; 12];
        w.read_exact(&mut head).await.unwrap();
        assert_eq!(&head, b"HTTP/1.1 200", "the watch is served");
        watches.push(w);
    }
    let mut refused = TcpStream::connect(secure.app.addr()).await.unwrap();
    assert!(
        closed_by_server(&mut refused, Duration::from_secs(2)).await,
        "a connection past a cap of busy ones is closed"
    );
    drop(watches);
    secure.app.shutdown().await;
}
