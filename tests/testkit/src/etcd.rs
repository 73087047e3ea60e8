//! A throwaway etcd on loopback for tests: Debian's `etcd-server`
//! (`.ci/install-etcd.sh`), free ports, a temporary data directory, ended
//! with its guard.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::{ProcessGuard, wait_until};

/// etcd's serving certificate and the CA it trusts for client certificates
/// (`--cert-file`, `--key-file`, `--trusted-ca-file` with `--client-cert-auth`).
#[derive(Debug, Clone)]
pub struct Tls {
    /// Its certificate (PEM), valid for 127.0.0.1.
    pub cert: std::path::PathBuf,
    /// Its key (PEM).
    pub key: std::path::PathBuf,
    /// The CA whose client certificates it accepts (PEM).
    pub client_ca: std::path::PathBuf,
}

/// A running etcd; dropping it stops it and removes its data.
#[derive(Debug)]
pub struct Etcd {
    /// Its client URL (`http://127.0.0.1:PORT`, `https://` with [`Etcd::start_tls`]).
    pub url: String,
    guard: Option<ProcessGuard<std::process::Child>>,
    dir: tempfile::TempDir,
    /// Its client and peer ports, kept for [`Etcd::restart`].
    ports: (u16, u16),
    tls: Option<Tls>,
}

/// The etcd binary: `$ETCD`, else `etcd` on the PATH.
fn binary() -> String {
    std::env::var("ETCD").unwrap_or_else(|_| "etcd".into())
}

fn free_port() -> u16 {
    // The port is free once the listener is dropped; etcd takes it right after.
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

impl Etcd {
    /// Starts etcd, or returns `None` (saying what was skipped) when it is not
    /// installed. With `CI=true` a missing etcd fails the test instead.
    pub async fn start(test: &str) -> Option<Self> {
        Self::start_with(test, None).await
    }

    /// [`Etcd::start`] serving clients over TLS only, and only those with a
    /// certificate signed by `tls.client_ca`.
    pub async fn start_tls(test: &str, tls: &Tls) -> Option<Self> {
        Self::start_with(test, Some(tls)).await
    }

    async fn start_with(test: &str, tls: Option<&Tls>) -> Option<Self> {
        let present = Command::new(binary())
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !present {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: etcd is not installed (run .ci/install-etcd.sh)"
            );
            eprintln!("skipping {test}: etcd is not installed (run .ci/install-etcd.sh)");
            return None;
        }
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut etcd = Self {
            url: String::new(),
            guard: None,
            dir,
            ports: (free_port(), free_port()),
            tls: tls.cloned(),
        };
        etcd.spawn().await;
        Some(etcd)
    }

    /// Stops etcd (SIGTERM, then SIGKILL after its grace) and waits until it is gone:
    /// its clients then find the port closed. Its data stays for [`Etcd::restart`].
    pub fn stop(&mut self) {
        drop(self.guard.take());
    }

    /// Starts etcd again on the same data directory and ports, after [`Etcd::stop`];
    /// returns once it accepts connections.
    pub async fn restart(&mut self) {
        self.stop();
        self.spawn().await;
    }

    /// Its data directory.
    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Starts etcd on its ports. A free port found can be taken by another
    /// process before etcd binds it (a test that runs thousands of agents
    /// beside it does): an etcd that exits at start gets new ports, on a
    /// first start, and is tried again.
    async fn spawn(&mut self) {
        for _ in 0..3 {
            if self.try_spawn().await {
                return;
            }
            if self.url.is_empty() {
                self.ports = (free_port(), free_port());
            }
        }
        panic!(
            "etcd did not start; its log: {}",
            std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default()
        );
    }

    /// One try: true once etcd accepts connections, false if it exited.
    async fn try_spawn(&mut self) -> bool {
        let (client, peer) = self.ports;
        let tls = self.tls.as_ref();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("etcd.log"))
            .expect("etcd log file");
        let scheme = if tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut command = Command::new(binary());
        if let Some(tls) = tls {
            command
                .arg("--cert-file")
                .arg(&tls.cert)
                .arg("--key-file")
                .arg(&tls.key)
                .arg("--trusted-ca-file")
                .arg(&tls.client_ca)
                .arg("--client-cert-auth");
        }
        let guard = ProcessGuard::spawn(
            command
                .arg("--data-dir")
                .arg(self.dir.path().join("data"))
                .args(["--name", "test"])
                .args(["--listen-client-urls", &url])
                .args(["--advertise-client-urls", &url])
                .args(["--listen-peer-urls", &peer_url])
                .args(["--initial-advertise-peer-urls", &peer_url])
                .args(["--initial-cluster", &format!("test={peer_url}")])
                .stdout(Stdio::null())
                .stderr(log),
        )
        .expect("etcd starts")
        .grace(Duration::from_secs(5));
        let addr = format!("127.0.0.1:{client}");
        let mut guard = guard;
        let up = wait_until(
            "etcd accepts connections",
            Duration::from_secs(30),
            async || {
                if TcpStream::connect(&addr).is_ok() {
                    Some(true)
                } else {
                    guard.try_wait().ok().flatten().map(|_| false)
                }
            },
            Option::is_some,
        )
        .await;
        if up != Some(true) {
            return false;
        }
        self.url = url;
        self.guard = Some(guard);
        true
    }
}
