//! Safe defaults of the `mesopod` binary: plain HTTP only on loopback, said in the first
//! log line; a non-loopback address without TLS refused at startup naming the flags; and
//! `mesopod kubeconfig` printing the admin kubeconfig of a secure start.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use testkit::ProcessGuard;
use tokio::io::{AsyncBufReadExt as _, BufReader};

fn mesopod(args: &[&str]) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(common::MESOPOD);
    c.args(args)
        .env("RUST_LOG", "info")
        .env_remove("MESOPOD_LISTEN");
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_beyond_loopback_is_refused_naming_the_flags() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let out = tokio::time::timeout(
            Duration::from_secs(60),
            mesopod(&["--listen", addr, "--data-dir", data, "--agents", "0"]).output(),
        )
        .await
        .expect("mesopod exits by itself")
        .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{addr}: {err}");
        assert!(
            err.contains(&format!("refusing to serve the Kubernetes API on {addr} over plain HTTP without authentication"))
                && err.contains("--secure-port")
                && err.contains("--tls-cert-file")
                && err.contains("--token-auth-file"),
            "{addr}: {err}"
        );
    }
    // Authentication flags without TLS are refused as well, naming what is missing.
    let out = mesopod(&[
        "--token-auth-file",
        "/nonexistent",
        "--data-dir",
        data,
        "--agents",
        "0",
    ])
    .output()
    .await
    .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--token-auth-file needs HTTPS: pass --secure-port")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_default_says_first_that_it_serves_plain_http_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let mut child = ProcessGuard::spawn(
        mesopod(&[
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            data,
            "--agents",
            "0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped()),
    )
    .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("a first log line")
        .unwrap()
        .unwrap_or_default();
    assert!(
        first.contains("serving the Kubernetes API over plain HTTP without authentication on 127.0.0.1:0, which must be a loopback address"),
        "{first}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesopod_kubeconfig_prints_the_admin_kubeconfig() {
    let s = common::secure::Secure::start().await;
    let data = s.data_dir();
    let out = mesopod(&["kubeconfig", "--data-dir", data.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, std::fs::read(s.kubeconfig()).unwrap());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("server: {}", s.app.api_url())),
        "{text}"
    );
    // The kubeconfig works as is (its own server address, CA and admin certificate).
    let out = tokio::process::Command::new(common::KUBECTL_133)
        .arg(format!("--kubeconfig={}", s.kubeconfig().display()))
        .args(["auth", "can-i", "*", "*"])
        .env("HOME", data.as_os_str())
        .output()
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "yes",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let empty = tempfile::tempdir().unwrap();
    let out = mesopod(&["kubeconfig", "--data-dir", empty.path().to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("start mesopod with --secure-port"));
    s.app.shutdown().await;
}
