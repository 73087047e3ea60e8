//! `kubectl top` end to end on a secure cluster (`Node,RBAC`): pods in real
//! containers of an image pulled from a registry, their executor sampling their
//! cgroups every second and pushing to the API shim with its node
//! credential; the real kubectl reads `metrics.k8s.io`. A busy pod shows
//! CPU, an idle one less, label selectors and namespaces narrow the list,
//! the node is listed, a pod with no metrics yet is metrics-server's 404,
//! the API takes no writes, and RBAC guards reads and pushes alike.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::process::Output;
use std::time::Duration;

use common::KUBECTL_133 as K;
use common::cluster::*;
use containers_support::*;
use images::testing::Registry;
use testkit::{ok, stderr, stdout, wait_until};

const T: Duration = Duration::from_secs(90);

/// The oldest kubectl the tests carry.
const KUBECTL_127: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.27";

/// kubectl 1.33 as the cluster's admin.
struct Admin<'a>(&'a common::secure::Secure);

impl Admin<'_> {
    async fn run(&self, args: &[&str]) -> Output {
        self.0.admin(K, args).await
    }

    async fn run_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        self.0.admin_stdin(K, args, stdin).await
    }
}

fn pod(name: &str, image: &str, script: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{app: {name}}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {image}\n    command: [\"/bin/sh\", \"-c\", {script:?}]\n"
    )
}

/// The CPU column of `name`'s row in `kubectl top pods` output, in millicores.
fn millicores(out: &Output, name: &str) -> Option<u64> {
    let text = stdout(out);
    let row = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))?;
    row.split_whitespace()
        .nth(1)?
        .strip_suffix('m')?
        .parse()
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_top_shows_a_busy_pods_cpu_and_lists_the_node() {
    if !prerequisites(false) {
        return;
    }
    let Some(registry) = Registry::start_or_skip("kubectl top").await else {
        return;
    };
    let (_keep, store) = store();
    let image = registry.push("test/busybox", "1", &test_image()).await;
    let image = image.as_str();
    let cluster = common::secure::Secure::embedded(&store, &["--metric-resolution=1secs"]).await;
    let app = &cluster.app;
    let k = Admin(&cluster);

    // Discovery: kubectl top finds the group there.
    let resources = ok(&k
        .run(&[
            "api-resources",
            "--api-group=metrics.k8s.io",
            "--no-headers",
        ])
        .await);
    assert!(
        resources.contains("PodMetrics") && resources.contains("NodeMetrics"),
        "{resources}"
    );

    ok(&k
        .run_stdin(
            &["apply", "-f", "-"],
            Some(&pod("busy", image, "while :; do :; done")),
        )
        .await);
    ok(&k
        .run_stdin(
            &["apply", "-f", "-"],
            Some(&pod("idle", image, "sleep 3600")),
        )
        .await);
    for name in ["busy", "idle"] {
        wait_pod(app.api(), "default", name, T, |p| phase(p) == "Running").await;
    }

    // Two samples of each, then the busy loop's rate: about a core.
    let top = wait_until(
        "kubectl top pods to show the busy pod's CPU",
        T,
        async || k.run(&["top", "pods"]).await,
        |o| millicores(o, "busy").is_some_and(|m| m > 100) && millicores(o, "idle").is_some(),
    )
    .await;
    let text = stdout(&top);
    assert!(text.starts_with("NAME"), "{text}");
    assert!(
        millicores(&top, "idle").unwrap() < millicores(&top, "busy").unwrap(),
        "{text}"
    );

    // Label selectors and namespaces, as metrics-server serves them.
    let only = ok(&k
        .run(&["top", "pods", "-l", "app=busy", "--no-headers"])
        .await);
    assert_eq!(only.lines().count(), 1, "{only}");
    assert!(only.starts_with("busy "), "{only}");
    let all = ok(&k.run(&["top", "pods", "-A", "--no-headers"]).await);
    assert!(
        all.lines()
            .any(|l| l.starts_with("default ") && l.contains("busy")),
        "{all}"
    );
    let containers = ok(&k.run(&["top", "pod", "busy", "--containers"]).await);
    assert!(containers.contains("main"), "{containers}");
    // An older kubectl reads the same API.
    let old = ok(&cluster
        .admin(
            KUBECTL_127,
            &["top", "pods", "-l", "app=busy", "--no-headers"],
        )
        .await);
    assert!(old.starts_with("busy "), "{old}");
    // metrics-server's Table, for kubectl get.
    let table = ok(&k.run(&["get", "pods.metrics.k8s.io", "busy"]).await);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "CPU", "MEMORY", "WINDOW"], "{table}");

    // The node, with its pods' usage.
    let nodes = ok(&k.run(&["get", "nodes", "-o", "name"]).await);
    let node = nodes.trim().trim_start_matches("node/").to_owned();
    let top_nodes = wait_until(
        "kubectl top nodes to list the node",
        T,
        async || k.run(&["top", "nodes", "--no-headers"]).await,
        |o| {
            stdout(o)
                .lines()
                .any(|l| l.starts_with(&format!("{node} ")))
        },
    )
    .await;
    assert!(
        !stdout(&top_nodes).contains("<unknown>"),
        "{}",
        stdout(&top_nodes)
    );

    // Kube's JSON: nanocores, memory in binary SI, a window.
    let raw = ok(&k
        .run(&[
            "get",
            "--raw",
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/busy",
        ])
        .await);
    let m: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(m["kind"], "PodMetrics", "{m}");
    assert_eq!(m["metadata"]["labels"]["app"], "busy", "{m}");
    let usage = &m["containers"][0]["usage"];
    let cpu = usage["cpu"].as_str().unwrap();
    assert!(cpu.ends_with('n') || cpu.ends_with('m'), "{m}");
    let memory = usage["memory"].as_str().unwrap();
    assert!(memory.ends_with("Ki") || memory.ends_with("Mi"), "{m}");
    assert!(m["window"].as_str().unwrap().ends_with('s'), "{m}");
    assert!(m["timestamp"].as_str().unwrap().ends_with('Z'), "{m}");

    // A pod with no metrics (never placed) is metrics-server's 404.
    ok(&k
        .run_stdin(
            &["apply", "-f", "-"],
            Some(&format!(
                "{}  nodeSelector: {{nowhere: \"true\"}}\n",
                pod("pending", image, "sleep 1")
            )),
        )
        .await);
    let missing = k.run(&["top", "pod", "pending"]).await;
    assert!(!missing.status.success());
    assert!(
        stderr(&missing).contains("podmetrics.metrics.k8s.io \"default/pending\" not found"),
        "{}",
        stderr(&missing)
    );
    // No writes: 405 as kube answers a verb a resource does not serve.
    let write = k
        .run_stdin(
            &[
                "create",
                "--raw",
                "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods",
                "-f",
                "-",
            ],
            Some("{}"),
        )
        .await;
    assert!(!write.status.success());
    assert!(
        stderr(&write).contains("MethodNotAllowed"),
        "{}",
        stderr(&write)
    );

    for name in ["busy", "idle", "pending"] {
        ok(&k.run(&["delete", "pod", name, "--wait=false"]).await);
    }
    cluster.app.shutdown().await;
}
