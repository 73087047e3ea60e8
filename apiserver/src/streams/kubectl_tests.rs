//! Real kubectls against the SPDY side alone: a small server with just the
//! discovery kubectl needs, one Running pod, and the `portforward` and `exec`
//! routes served by this crate's SPDY code over in-memory containers. The end
//! to end tests (`tests/tests/portforward_kubectl.rs`, `exec_spdy_kubectl.rs`)
//! add the executor; these pin the wire protocol on their own.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Query, Request};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::StatusCode;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::tests::Echo;
use crate::streams::{
    Channels, ContainerStreams, Frame, StreamError, StreamFuture, StreamOp, StreamTarget, channel,
    portforward, spdy_exec,
};

const T: Duration = Duration::from_secs(30);

fn kubectl(version: &str) -> Option<String> {
    let program = format!("/usr/lib/google-cloud-sdk/bin/kubectl.{version}");
    if std::path::Path::new(&program).exists() {
        return Some(program);
    }
    let msg = format!("{program} is missing");
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{msg}");
    eprintln!("SKIPPED: {msg}");
    None
}

fn pod() -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
        "status": {"phase": "Running"},
    }))
    .expect("a pod")
}

/// Port-forward echoes (port 7); exec prints its command, echoes stdin, exits 3.
struct Fake;

impl ContainerStreams for Fake {
    fn open(&self, target: StreamTarget) -> StreamFuture<'_> {
        match target.op.clone() {
            StreamOp::PortForward { .. } => Echo.open(target),
            StreamOp::Exec { command, .. } => Box::pin(async move {
                let (a_tx, mut b_rx) = mpsc::channel::<Frame>(4);
                let (b_tx, a_rx) = mpsc::channel::<Frame>(4);
                tokio::spawn(async move {
                    let said = format!("ran {}\n", command.join(" "));
                    let _ = b_tx.send(Frame::new(channel::STDOUT, said)).await;
                    while let Some(f) = b_rx.recv().await {
                        match f.channel {
                            channel::STDIN => {
                                let _ = b_tx.send(Frame::new(channel::STDOUT, f.data)).await;
                            }
                            channel::CLOSE => break,
                            _ => {}
                        }
                    }
                    let _ = b_tx.send(Frame::new(channel::STDERR, "oops\n")).await;
                    let status = json!({"metadata": {}, "status": "Failure",
                        "reason": "NonZeroExitCode", "message": "command terminated with exit code 3",
                        "details": {"causes": [{"reason": "ExitCode", "message": "3"}]}});
                    let _ = b_tx
                        .send(Frame::new(channel::ERROR, status.to_string()))
                        .await;
                });
                Ok(Channels { tx: a_tx, rx: a_rx })
            }),
            StreamOp::Attach { .. } => {
                Box::pin(async { Err(StreamError::BadContainer("no attach here".into())) })
            }
        }
    }
}

async fn exec_route(Query(q): Query<Vec<(String, String)>>, req: Request) -> Response {
    if crate::streams::spdy::upgrade::websocket_protocol(req.headers(), &["v5.channel.k8s.io"])
        .is_some()
    {
        // Refused, so kubectl ≥ 1.30 falls back to SPDY, as it does for old servers.
        return (StatusCode::BAD_REQUEST, "no websockets here").into_response();
    }
    let flag = |k: &str| q.iter().any(|(n, v)| n == k && (v == "1" || v == "true"));
    let command = q
        .iter()
        .filter(|(n, _)| n == "command")
        .map(|(_, v)| v.clone())
        .collect();
    let target = StreamTarget {
        pod: pod(),
        container: "main".into(),
        op: StreamOp::Exec {
            command,
            stdin: flag("stdin"),
            stdout: flag("stdout"),
            stderr: flag("stderr"),
            tty: flag("tty"),
        },
    };
    spdy_exec::serve_with(req, target, Arc::new(Fake)).await
}

async fn portforward_route(Query(q): Query<Vec<(String, String)>>, req: Request) -> Response {
    portforward::serve_with(req, pod(), "main".into(), q, Arc::new(Fake)).await
}

async fn server() -> String {
    let resources = json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
         "verbs": ["get", "list"], "shortNames": ["po"]},
        {"name": "pods/exec", "singularName": "", "namespaced": true,
         "kind": "PodExecOptions", "verbs": ["create", "get"]},
        {"name": "pods/portforward", "singularName": "", "namespaced": true,
         "kind": "PodPortForwardOptions", "verbs": ["create", "get"]}]});
    let app = Router::new()
        .route(
            "/api",
            get(|| async { axum::Json(json!({"kind": "APIVersions", "versions": ["v1"]})) }),
        )
        .route(
            "/apis",
            get(|| async {
                axum::Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}))
            }),
        )
        .route(
            "/api/v1",
            get(move || {
                let r = resources.clone();
                async move { axum::Json(r) }
            }),
        )
        .route(
            "/api/v1/namespaces/default/pods/web",
            get(|| async { axum::Json(pod()) }),
        )
        .route(
            "/api/v1/namespaces/default/pods/web/exec",
            get(exec_route).post(exec_route),
        )
        .route(
            "/api/v1/namespaces/default/pods/web/portforward",
            get(portforward_route).post(portforward_route),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn command(program: &str, server: &str, cache: &std::path::Path) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(program);
    c.arg(format!("--server={server}"))
        .arg(format!("--cache-dir={}", cache.display()))
        .env("HOME", cache)
        .env("KUBECONFIG", cache.join("none"))
        .kill_on_drop(true);
    c
}

async fn forward_once(program: &str, server: &str, env: Option<(&str, &str)>) -> Vec<u8> {
    let cache = tempfile::tempdir().expect("tempdir");
    let mut c = command(program, server, cache.path());
    c.args(["port-forward", "pod/web", ":7"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit());
    if let Some((k, v)) = env {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("kubectl starts");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let port: u16 = tokio::time::timeout(T, async {
        while let Some(line) = lines.next_line().await.expect("reads") {
            if let Some(rest) = line.strip_prefix("Forwarding from 127.0.0.1:") {
                return rest.split(' ').next().and_then(|p| p.parse().ok());
            }
        }
        None
    })
    .await
    .expect("kubectl forwards in time")
    .expect("kubectl prints its port");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let mut got = Vec::new();
    for i in 0..2 {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connects");
        s.write_all(format!("ping {i}\n").as_bytes())
            .await
            .expect("writes");
        s.shutdown().await.expect("half-closes");
        tokio::time::timeout(T, s.read_to_end(&mut got))
            .await
            .expect("the echo ends")
            .expect("reads");
    }
    let _ = child.kill().await;
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_port_forwards_over_spdy_and_the_websocket_tunnel() {
    let server = server().await;
    for (version, env) in [
        ("1.27", None),
        ("1.30", None),
        ("1.33", None),
        ("1.33", Some(("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false"))),
    ] {
        let Some(program) = kubectl(version) else {
            continue;
        };
        let got = forward_once(&program, &server, env).await;
        assert_eq!(
            String::from_utf8_lossy(&got),
            "ping 0\nping 1\n",
            "kubectl {version} {env:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_over_spdy_prints_passes_stdin_and_exits_with_the_code() {
    let server = server().await;
    for version in ["1.27", "1.29", "1.33"] {
        let Some(program) = kubectl(version) else {
            continue;
        };
        let cache = tempfile::tempdir().expect("tempdir");
        let mut c = command(&program, &server, cache.path());
        c.args(["exec", "-i", "web", "--", "sh", "-c", "cat"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().expect("kubectl starts");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(b"from stdin\n").await.expect("writes");
        drop(stdin);
        let out = tokio::time::timeout(T, child.wait_with_output())
            .await
            .expect("kubectl exec ends")
            .expect("output");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(
            stdout, "ran sh -c cat\nfrom stdin\n",
            "kubectl {version}: {stderr}"
        );
        assert!(stderr.contains("oops"), "kubectl {version}: {stderr}");
        assert_eq!(out.status.code(), Some(3), "kubectl {version}: {stderr}");
    }
}
