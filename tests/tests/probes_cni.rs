//! Issue #19, network probes into pods on a CNI network: the executor dials
//! the pod's own IP from the agent's network, as kubelet does. A pod with
//! an httpGet readiness probe and one with a tcpSocket readiness probe,
//! both served inside the pod's network namespace (nothing on the agent's
//! network answers): READY shows 0/1 until the server is up, 1/1 once the
//! probe passes, and 0/1 again once it fails; the `Unhealthy` events name
//! the pod's IP. `kubectl port-forward` then reaches the web pod through
//! its namespace's `localhost`.
//!
//! Needs root, busybox-static and the CNI plugins (.ci/install-cni.sh):
//! fails under CI=true without them, skipped with a message elsewhere.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::cni_support;
use crate::common;
use crate::containers_support;

use std::process::Stdio;
use std::time::Duration;

use cni_support::{TestNet, cni_ready};
use common::cluster::*;
use containers_support::*;
use testkit::{Kubectl, ok, wait_until};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const T: Duration = Duration::from_secs(60);

/// A pod running `script`, with a readiness probe (`probe`, YAML under
/// `readinessProbe:`) every second that fails at the first miss.
fn probed_pod(name: &str, script: &str, probe: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  \
         containers:\n  - name: main\n    image: {IMAGE}\n    command: [\"/bin/sh\", \"-c\", {script:?}]\n    \
         readinessProbe:\n{probe}      periodSeconds: 1\n      failureThreshold: 1\n"
    )
}

/// The READY column of `kubectl get pod`.
async fn ready_column(k: &Kubectl, name: &str) -> String {
    let out = ok(&k.run(&["get", "pod", name, "--no-headers"]).await);
    out.split_whitespace().nth(1).unwrap_or_default().to_owned()
}

/// The messages of the `Unhealthy` events about `name`.
async fn unhealthy(k: &Kubectl, name: &str) -> Vec<String> {
    let list: serde_json::Value =
        serde_json::from_str(&ok(&k.run(&["get", "events", "-o", "json"]).await)).unwrap();
    (list["items"].as_array().unwrap().iter())
        .filter(|e| e["involvedObject"]["name"] == name && e["reason"] == "Unhealthy")
        .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Waits for `name` to run and checks READY is 0/1 while its server is
/// not up. Returns the pod's IP.
async fn running_unready(
    app: &framework::app::App,
    k: &Kubectl,
    name: &str,
    subnet: &str,
) -> String {
    let up = wait_pod(app.api(), "default", name, T, |p| phase(p) == "Running").await;
    let ip = up.status.as_ref().and_then(|s| s.pod_ip.clone()).unwrap();
    assert!(ip.starts_with(subnet), "{name} is on the CNI network: {ip}");
    assert_eq!(
        ready_column(k, name).await,
        "0/1",
        "{name} before its server is up"
    );
    ip
}

/// Waits for `kubectl wait --for=condition=Ready` and READY 1/1.
async fn becomes_ready(k: &Kubectl, name: &str) {
    let pod = format!("pod/{name}");
    ok(&k
        .run(&["wait", "--for=condition=Ready", &pod, "--timeout=60s"])
        .await);
    assert_eq!(ready_column(k, name).await, "1/1");
}

async fn becomes_unready(k: &Kubectl, name: &str) {
    wait_until(
        &format!("{name}'s READY back at 0/1"),
        T,
        async || ready_column(k, name).await,
        |r| r == "0/1",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_http_and_tcp_probes_to_a_cni_pods_ip_and_port_forward_reaches_it() {
    if !prerequisites(false) || !cni_ready("probes_cni") {
        return;
    }
    let net = TestNet::new("mpr", 222);
    let (_keep, store) = store();
    load_image(&store, IMAGE).await;
    let app = net.cluster(&store).await;
    let k = Kubectl::new(&app.api_url());

    // Both servers come up after 8 s, inside the pod's namespace only.
    let web = "mkdir -p /www && echo ok > /www/healthz && echo served-in-the-pod > /www/index.html && \
               sleep 8 && exec httpd -f -p 8080 -h /www";
    let http = "      httpGet:\n        path: /healthz\n        port: 8080\n";
    ok(&k
        .run_stdin(&["apply", "-f", "-"], Some(&probed_pod("web", web, http)))
        .await);
    let plain = "mkdir -p /www && sleep 8 && httpd -p 9090 -h /www && exec sleep 3600";
    let tcp = "      tcpSocket:\n        port: 9090\n";
    ok(&k
        .run_stdin(
            &["apply", "-f", "-"],
            Some(&probed_pod("plain", plain, tcp)),
        )
        .await);

    let web_ip = running_unready(&app, &k, "web", &net.subnet).await;
    let plain_ip = running_unready(&app, &k, "plain", &net.subnet).await;
    becomes_ready(&k, "web").await;
    becomes_ready(&k, "plain").await;
    // The attempts before the servers were up dialed the pods' own IPs.
    wait_until(
        "web's Unhealthy event",
        T,
        async || unhealthy(&k, "web").await,
        |m| !m.is_empty(),
    )
    .await;
    let seen = unhealthy(&k, "web").await;
    assert!(
        seen.iter().any(|m| m.starts_with(&format!(
            "Readiness probe failed: Get \"http://{web_ip}:8080/healthz\": dial tcp {web_ip}:8080: connect: connection refused"
        ))),
        "{seen:?}"
    );

    // The probes keep following the servers: a 404, a closed port.
    ok(&k.run(&["exec", "web", "--", "rm", "/www/healthz"]).await);
    becomes_unready(&k, "web").await;
    ok(&k.run(&["exec", "plain", "--", "killall", "httpd"]).await);
    becomes_unready(&k, "plain").await;
    wait_until(
        "the Unhealthy events of the failing probes",
        T,
        async || (unhealthy(&k, "web").await, unhealthy(&k, "plain").await),
        |(web, plain)| {
            web.iter()
                .any(|m| m == "Readiness probe failed: HTTP probe failed with statuscode: 404")
                && plain.iter().any(|m| {
                    m == &format!(
                        "Readiness probe failed: dial tcp {plain_ip}:9090: connect: connection refused"
                    )
                })
        },
    )
    .await;

    // port-forward dials localhost in the pod's namespace.
    let mut child = k.start(
        &["port-forward", "pod/web", ":8080"],
        Stdio::piped(),
        Stdio::null(),
    );
    let mut lines = BufReader::new(child.child.stdout.take().unwrap()).lines();
    let local = tokio::time::timeout(T, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.strip_prefix("Forwarding from 127.0.0.1:") {
                return rest.split(' ').next().unwrap().parse::<u16>().unwrap();
            }
        }
        panic!("kubectl port-forward ended before forwarding");
    })
    .await
    .expect("kubectl port-forward starts forwarding");
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", local))
        .await
        .unwrap();
    s.write_all(b"GET /index.html HTTP/1.0\r\n\r\n")
        .await
        .unwrap();
    let mut page = String::new();
    tokio::time::timeout(T, s.read_to_string(&mut page))
        .await
        .unwrap()
        .unwrap();
    assert!(page.contains("served-in-the-pod"), "{page}");
    drop(child);

    ok(&k
        .run(&["delete", "pod", "web", "plain", "--wait=false"])
        .await);
    for name in ["web", "plain"] {
        wait_gone(app.api(), "default", name, T).await;
    }
    app.shutdown().await;
}
