//! End to end with the real kubectl: probes run by the executor. A
//! readiness probe keeps READY at 0/1 until it passes; a failing liveness
//! probe restarts the container and RESTARTS climbs, with kubelet's
//! `Killing` and `Unhealthy` events, the repeats aggregated into one
//! Event with a count; httpGet (busybox httpd), tcpSocket and exec.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::time::{Duration, Instant};

use common::cluster::*;
use containers_support::*;
use framework::app::App;
use k8s_openapi::api::core::v1::Pod;
use testkit::{Kubectl, ok};

const T: Duration = Duration::from_secs(90);

/// A port nothing listens on now (the kernel's choice, released).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A port that stays closed while the returned socket lives: bound and
/// never listening, so a connection to it is refused, no server started
/// later can take it, and the kernel never picks it as a connection's own
/// port (a connect from that very port to itself would succeed).
fn closed_port() -> (rustix::fd::OwnedFd, u16) {
    use rustix::net::{AddressFamily, SocketType, bind, getsockname, socket};
    let fd = socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    bind(&fd, &std::net::SocketAddr::from(([127, 0, 0, 1], 0))).unwrap();
    let addr = getsockname(&fd).unwrap();
    let port = std::net::SocketAddr::try_from(addr).unwrap().port();
    (fd, port)
}

/// A one-agent cluster on `runtime` with a 1 s crash-loop back-off, so
/// restarts come quickly.
async fn probed_cluster(runtime: &str, store: &std::path::Path) -> App {
    let mut cfg = app_config(Setup {
        agents: vec![agent(
            "cpus:8;mem:8192;disk:20480;ports:[31000-31010]",
            "rack:r0",
            0,
        )],
        ..Setup::default()
    });
    cfg.executor.args = vec![
        format!("--container-runtime={runtime}"),
        format!("--image-store={}", store.display()),
        "--restart-backoff=1secs".into(),
        "--restart-backoff-max=2secs".into(),
    ];
    App::start(cfg).await.expect("mesopod starts")
}

fn ready(p: &Pod) -> bool {
    let s = p.status.as_ref();
    let cs = s
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first());
    cs.is_some_and(|c| c.ready)
}

fn restarts(p: &Pod) -> i32 {
    let s = p.status.as_ref();
    let cs = s
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first());
    cs.map_or(0, |c| c.restart_count)
}

fn condition<'a>(p: &'a Pod, kind: &str) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
}

/// `(reason, message, count)` of the events about pod `name`.
async fn events(k: &Kubectl, name: &str) -> Vec<(String, String, i64)> {
    let list: serde_json::Value =
        serde_json::from_str(&ok(&k.run(&["get", "events", "-o", "json"]).await)).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == name)
        .map(|e| {
            let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
            (
                s(&e["reason"]),
                s(&e["message"]),
                e["count"].as_i64().unwrap_or(0),
            )
        })
        .collect()
}

/// The READY and RESTARTS columns of `kubectl get pod`.
async fn columns(k: &Kubectl, name: &str) -> (String, String) {
    let out = ok(&k.run(&["get", "pod", name, "--no-headers"]).await);
    let cols: Vec<&str> = out.split_whitespace().collect();
    (cols[1].to_owned(), cols[3].to_owned())
}

/// Readiness keeps the pod unready until the probe passes, then `kubectl
/// wait --for=condition=Ready` returns.
async fn ready_after(app: &App, k: &Kubectl, name: &str, at_least: Duration) {
    let running = wait_pod(app.api(), "default", name, T, |p| phase(p) == "Running").await;
    let since = Instant::now();
    assert!(
        !ready(&running),
        "not ready before its probe passed: {:?}",
        running.status
    );
    let cond = condition(&running, "ContainersReady").unwrap();
    assert_eq!(cond.status, "False");
    assert_eq!(cond.reason.as_deref(), Some("ContainersNotReady"));
    assert_eq!(
        cond.message.as_deref(),
        Some("containers with unready status: [main]")
    );
    assert_eq!(columns(k, name).await.0, "0/1");
    ok(&k
        .run(&[
            "wait",
            "--for=condition=Ready",
            &format!("pod/{name}"),
            "--timeout=60s",
        ])
        .await);
    let waited = since.elapsed();
    // Running reaches the store a moment after the container started.
    assert!(
        waited + Duration::from_millis(1500) >= at_least,
        "ready after only {waited:?}"
    );
    assert_eq!(columns(k, name).await.0, "1/1");
    let p = app.api().get_pod("default", name).unwrap();
    let became = condition(&p, "Ready").unwrap();
    assert!(ready(&p) && became.status == "True");
    // The same in the pod's own times (whole seconds on the wire).
    let cs = p
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap();
    let started = cs[0]
        .state
        .as_ref()
        .unwrap()
        .running
        .as_ref()
        .unwrap()
        .started_at
        .clone()
        .unwrap();
    let after = became.last_transition_time.clone().unwrap().0.as_second() - started.0.as_second();
    assert!(
        after + 1 >= at_least.as_secs() as i64,
        "Ready {after} s after the start"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_and_liveness_probes_in_containers() {
    if !prerequisites(false) {
        return;
    }
    let (_keep, store) = store();
    load_image(&store, IMAGE).await;
    let app = probed_cluster("embedded", &store).await;
    let k = Kubectl::new(&app.api_url());

    // httpd comes up after 5 s: READY stays 0/1 until then. The tcpSocket
    // liveness probe on the same port waits 8 s and then passes.
    let port = free_port();
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {IMAGE}\n    command: [\"/bin/sh\", \"-c\", \"mkdir -p /www && echo ok > /www/index.html && sleep 5 && exec httpd -f -p {port} -h /www\"]\n    ports:\n    - name: http\n      containerPort: {port}\n    readinessProbe:\n      httpGet:\n        path: /index.html\n        port: http\n        httpHeaders:\n        - name: X-Probe\n          value: \"yes\"\n      periodSeconds: 1\n    livenessProbe:\n      tcpSocket:\n        port: {port}\n      initialDelaySeconds: 8\n      periodSeconds: 1\n"
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);

    // Nothing listens on `dead`: the liveness probe fails twice, the
    // container is killed and restarted, again and again.
    let (_held, dead) = closed_port();
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: dies\nspec:\n  terminationGracePeriodSeconds: 30\n  containers:\n  - name: main\n    image: {IMAGE}\n    command: [\"/bin/sh\", \"-c\", \"exec sleep 3600\"]\n    livenessProbe:\n      tcpSocket:\n        port: {dead}\n      periodSeconds: 1\n      failureThreshold: 2\n      terminationGracePeriodSeconds: 1\n"
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);

    ready_after(&app, &k, "web", Duration::from_secs(5)).await;
    // Its liveness probe passed past its initial delay: no restart.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let web = app.api().get_pod("default", "web").unwrap();
    assert_eq!(restarts(&web), 0, "{:?}", web.status);
    assert!(ready(&web));

    // An exec probe runs inside the container: the file it tests exists
    // only in the container's own root, made there after 3 s.
    let marker = format!("/tmp/probe-inside-{}", std::process::id());
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: inside\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {IMAGE}\n    command: [\"/bin/sh\", \"-c\", \"sleep 3; touch {marker}; exec sleep 3600\"]\n    readinessProbe:\n      exec:\n        command: [\"/bin/sh\", \"-c\", \"test -f {marker} || {{ echo not inside yet; exit 1; }}\"]\n      periodSeconds: 1\n"
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    ready_after(&app, &k, "inside", Duration::from_secs(3)).await;
    assert!(
        !std::path::Path::new(&marker).exists(),
        "the marker is in the container's root, not the host's"
    );

    let dies = wait_pod(app.api(), "default", "dies", T, |p| restarts(p) >= 2).await;
    assert!(restarts(&dies) >= 2);
    let restarts_col: i32 = columns(&k, "dies").await.1.parse().unwrap();
    assert!(restarts_col >= 2, "RESTARTS climbs");
    // The probe events travel with the next update (at most 5 s later).
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        seen = events(&k, "dies").await;
        let unhealthy = seen.iter().find(|(r, _, _)| r == "Unhealthy");
        if unhealthy.is_some_and(|(_, _, n)| *n >= 4) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let killing: Vec<_> = seen.iter().filter(|(r, _, _)| r == "Killing").collect();
    assert_eq!(killing.len(), 1, "one aggregated Killing event: {seen:?}");
    assert_eq!(
        killing[0].1,
        "Container main failed liveness probe, will be restarted"
    );
    assert!(
        killing[0].2 >= 2,
        "its count climbs with each restart: {seen:?}"
    );
    let unhealthy: Vec<_> = seen.iter().filter(|(r, _, _)| r == "Unhealthy").collect();
    assert_eq!(
        unhealthy.len(),
        1,
        "one aggregated Unhealthy event: {seen:?}"
    );
    let (_, message, count) = unhealthy[0];
    assert!(
        message.starts_with("Liveness probe failed: dial tcp "),
        "{message}"
    );
    assert!(
        message.ends_with(&format!(":{dead}: connect: connection refused")),
        "{message}"
    );
    assert!(*count >= 4, "two failures per run, counted: {seen:?}");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_readiness_probe_in_process_mode() {
    let (_keep, store) = store();
    let app = probed_cluster("process", &store).await;
    let k = Kubectl::new(&app.api_url());
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: marker\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox\n    command: [\"/bin/sh\", \"-c\", \"sleep 3; touch ready; exec sleep 3600\"]\n    readinessProbe:\n      exec:\n        command: [\"/bin/sh\", \"-c\", \"test -f ready || { echo no marker yet; exit 1; }\"]\n      periodSeconds: 1\n";
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(yaml)).await);
    ready_after(&app, &k, "marker", Duration::from_secs(3)).await;
    let seen = events(&k, "marker").await;
    assert!(
        seen.iter()
            .any(|(r, m, _)| r == "Unhealthy" && m == "Readiness probe failed: no marker yet\n"),
        "{seen:?}"
    );
    app.shutdown().await;
}
