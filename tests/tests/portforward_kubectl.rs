//! Issue #19, `kubectl port-forward` end to end: a pod on the embedded runtime
//! serves a file with busybox `httpd`; `kubectl port-forward pod/web :8080`
//! forwards a local port to it, and the file is fetched through it, twice per
//! session (two connections on one SPDY connection). kubectl 1.33 and 1.31
//! tunnel SPDY in a WebSocket (`SPDY/3.1+portforward.k8s.io`); 1.33 with
//! `KUBECTL_PORT_FORWARD_WEBSOCKETS=false`, 1.30 and 1.27 speak SPDY directly.
//! A port nothing listens on reports kubelet's error on the connection.
//!
//! Needs root and busybox-static: fails under CI=true without them, skipped
//! with a message elsewhere.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;
use crate::spdy_support;

use std::process::Stdio;
use std::time::Duration;

use common::cluster::*;
use containers_support::*;
use testkit::{Kubectl, KubectlChild, ok};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const T: Duration = Duration::from_secs(60);
const PAGE: &str = "served from inside the pod";
/// (version, WebSockets allowed): 1.31 and later tunnel unless told not to.
const KUBECTLS: [(&str, bool); 5] = [
    ("1.33", true),
    ("1.33", false),
    ("1.31", true),
    ("1.30", true),
    ("1.27", true),
];

/// A port nothing on this host listens on now: the pods run on the agent's
/// network, and the two tests here run side by side.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    l.local_addr().unwrap().port()
}

fn web_pod(port: u16) -> String {
    let script = format!(
        "mkdir -p /www && echo '{PAGE}' > /www/index.html && exec httpd -f -p {port} -h /www"
    );
    spdy_support::pod("web", IMAGE, &script)
}

/// Starts `kubectl port-forward pod/web :REMOTE` and returns it with the local port
/// it printed (`Forwarding from 127.0.0.1:N -> REMOTE`).
async fn forward(k: &Kubectl, remote: u16) -> (KubectlChild, u16) {
    let ports = format!(":{remote}");
    let mut child = k.start(
        &["port-forward", "pod/web", &ports],
        Stdio::piped(),
        Stdio::piped(),
    );
    let stdout = child.child.stdout.take().expect("stdout is piped");
    let mut lines = BufReader::new(stdout).lines();
    let port = tokio::time::timeout(T, async {
        while let Some(line) = lines.next_line().await.expect("kubectl prints") {
            if let Some(rest) = line.strip_prefix("Forwarding from 127.0.0.1:") {
                let port = rest.split(' ').next().unwrap_or_default();
                return port.parse::<u16>().expect("a local port");
            }
        }
        let mut stderr = String::new();
        if let Some(mut e) = child.child.stderr.take() {
            let _ = tokio::io::AsyncReadExt::read_to_string(&mut e, &mut stderr).await;
        }
        panic!("kubectl port-forward ended before forwarding: {stderr}");
    })
    .await
    .expect("kubectl port-forward starts forwarding");
    // Keep reading its output so kubectl never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, port)
}

/// `GET /index.html` through `port`: the whole response.
async fn fetch(port: u16) -> String {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("the forwarded port accepts");
    s.write_all(b"GET /index.html HTTP/1.0\r\nHost: web\r\n\r\n")
        .await
        .expect("request sent");
    let mut out = Vec::new();
    tokio::time::timeout(T, s.read_to_end(&mut out))
        .await
        .expect("the response ends")
        .expect("the response reads");
    String::from_utf8_lossy(&out).into_owned()
}

/// A one-agent cluster on the embedded runtime with pod `web` Running, its
/// httpd on the returned port (`None`, after saying why, when containers
/// cannot run here). The directory holds the image store.
async fn web_running() -> Option<(tempfile::TempDir, framework::app::App, u16)> {
    if !prerequisites(false) {
        return None;
    }
    let (keep, store) = store();
    load_image(&store, IMAGE).await;
    let app = cluster("embedded", &store).await;
    let k = Kubectl::new(&app.api_url());
    let web = free_port();
    ok(&k
        .run_stdin(&["apply", "-f", "-"], Some(&web_pod(web)))
        .await);
    let up = wait_pod(app.api(), "default", "web", T, |p| phase(p) != "Pending").await;
    assert_eq!(phase(&up), "Running", "{:?}", up.status);
    Some((keep, app, web))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn port_forward_reaches_a_server_in_the_pod_with_every_kubectl() {
    let Some((_keep, app, web)) = web_running().await else {
        return;
    };

    for (version, websockets) in KUBECTLS {
        let wrapper = tempfile::tempdir().unwrap();
        let program = spdy_support::kubectl(version);
        let program = if websockets {
            program
        } else {
            spdy_support::with_websockets_off(
                wrapper.path(),
                &program,
                "KUBECTL_PORT_FORWARD_WEBSOCKETS",
            )
        };
        let k = Kubectl::new(&app.api_url()).program(&program);
        let (mut child, port) = forward(&k, web).await;
        for attempt in 0..2 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_err()
            {
                let mut stderr = String::new();
                if let Some(mut e) = child.child.stderr.take() {
                    let _ = tokio::time::timeout(
                        Duration::from_secs(5),
                        tokio::io::AsyncReadExt::read_to_string(&mut e, &mut stderr),
                    )
                    .await;
                }
                panic!(
                    "kubectl {version} (websockets {websockets}) attempt {attempt}: its port is closed: {stderr}"
                );
            }
            let response = testkit::wait_until(
                "the page through the forwarded port",
                T,
                async || fetch(port).await,
                |r| r.contains(PAGE),
            )
            .await;
            assert!(
                response.starts_with("HTTP/1.0 200") || response.starts_with("HTTP/1.1 200"),
                "kubectl {version} (websockets {websockets}) attempt {attempt}: {response}"
            );
        }
        drop(child);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_port_nothing_listens_on_is_kubelets_error() {
    let Some((_keep, app, _)) = web_running().await else {
        return;
    };
    let k = Kubectl::new(&app.api_url());
    let (mut child, port) = forward(&k, 9999).await;
    let _ = fetch(port).await;
    let mut stderr = child.child.stderr.take().expect("stderr is piped");
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    let text = tokio::time::timeout(T, async {
        loop {
            let n = stderr.read(&mut buf).await.expect("stderr reads");
            seen.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&seen).into_owned();
            if n == 0 || text.contains("error forwarding port 9999") {
                return text;
            }
        }
    })
    .await
    .expect("kubectl reports the error");
    assert!(
        text.contains("error forwarding port 9999 to pod web"),
        "{text}"
    );
}
