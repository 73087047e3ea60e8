//! The HorizontalPodAutoscaler end to end on a secure cluster (`Node,RBAC`), as
//! `kubectl top`'s test runs it: pods in real containers of a registry image,
//! sampled every second. A Deployment whose pods burn CPU for a while and then idle
//! is scaled 1→3 by an `autoscaling/v2` HPA applied with kubectl (its scale-down
//! window set to 0, so the test does not wait kube's 5 minutes), and back to 1 once
//! they idle; `kubectl get hpa` shows the TARGETS column, `kubectl describe hpa` the
//! events, and a metric mesopod cannot read is refused at create.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::process::Output;
use std::time::Duration;

use common::KUBECTL_133 as K;
use containers_support::*;
use images::testing::Registry;
use testkit::{ok, stderr, stdout, wait_until};

/// Long enough for two samples, a sync, the Deployment's new pods and theirs.
const SCALE_UP: Duration = Duration::from_secs(120);

/// The pods' burn (40 s from each one's start) and then the scale-down.
const SCALE_DOWN: Duration = Duration::from_secs(180);

/// How long each pod burns CPU before it idles.
const BURN_SECONDS: u32 = 40;

/// kubectl 1.33 as the cluster's admin.
struct Admin<'a>(&'a common::secure::Secure);

impl Admin<'_> {
    async fn run(&self, args: &[&str]) -> Output {
        self.0.admin(K, args).await
    }

    async fn apply(&self, yaml: &str) -> Output {
        self.0
            .admin_stdin(K, &["apply", "-f", "-"], Some(yaml))
            .await
    }
}

fn deployment(image: &str) -> String {
    let script = format!(
        "end=$(( $(date +%s) + {BURN_SECONDS} )); while [ $(date +%s) -lt $end ]; do :; done; sleep 3600"
    );
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: {image}
        command: [\"/bin/sh\", \"-c\", {script:?}]
        resources:
          requests: {{cpu: 100m}}
          limits: {{cpu: 200m}}
"
    )
}

const HPA: &str = "apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: web
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 1
  maxReplicas: 3
  metrics:
  - type: Resource
    resource:
      name: cpu
      target: {type: Utilization, averageUtilization: 50}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 0
";

/// The Deployment's `spec.replicas`, as the HPA set it.
fn replicas(cluster: &common::secure::Secure) -> i32 {
    cluster
        .app
        .api()
        .get_deployment("default", "web")
        .ok()
        .and_then(|d| d.spec)
        .and_then(|s| s.replicas)
        .unwrap_or(-1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hpa_scales_1_to_3_under_load_and_back() {
    if !prerequisites(false) {
        return;
    }
    let Some(registry) = Registry::start_or_skip("an HPA on real containers").await else {
        return;
    };
    let (_keep, store) = store();
    let image = registry.push("test/busybox", "1", &test_image()).await;
    let image = image.as_str();
    let cluster =
        common::secure::Secure::embedded_tuned(&store, &["--metric-resolution=1secs"], |cfg| {
            cfg.controllers.hpa_sync_period = Duration::from_secs(2)
        })
        .await;
    let k = Admin(&cluster);

    // Discovery and OpenAPI: the short name and kubectl explain.
    let resources = ok(&k
        .run(&["api-resources", "--api-group=autoscaling", "--no-headers"])
        .await);
    assert!(
        resources.contains("horizontalpodautoscalers") && resources.contains(" hpa "),
        "{resources}"
    );
    let explain = ok(&k.run(&["explain", "hpa.spec.behavior"]).await);
    assert!(explain.contains("scaleDown"), "{explain}");

    // What mesopod cannot read is refused, with the field's path.
    let pods_metric = HPA.replace(
        "  - type: Resource\n    resource:\n      name: cpu\n      target: {type: Utilization, averageUtilization: 50}\n",
        "  - type: Pods\n    pods:\n      metric: {name: qps}\n      target: {type: AverageValue, averageValue: \"10\"}\n",
    );
    let refused = k.apply(&pods_metric).await;
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("spec.metrics[0].type")
            && stderr(&refused).contains("not supported by mesopod"),
        "{}",
        stderr(&refused)
    );
    let bad = k
        .apply(&HPA.replace("minReplicas: 1", "minReplicas: 0"))
        .await;
    assert!(
        stderr(&bad)
            .contains("spec.minReplicas: Invalid value: 0: must be greater than or equal to 1"),
        "{}",
        stderr(&bad)
    );

    // Dry run stores nothing; strict field validation names an unknown field.
    let dry = ok(&cluster
        .admin_stdin(
            K,
            &["create", "--dry-run=server", "-f", "-"],
            Some(&HPA.replace("name: web\nspec", "name: dry\nspec")),
        )
        .await);
    assert!(
        dry.contains("horizontalpodautoscaler.autoscaling/dry created (server dry run)"),
        "{dry}"
    );
    assert!(!k.run(&["get", "hpa", "dry"]).await.status.success());
    let strict = cluster
        .admin_stdin(
            K,
            &["apply", "--validate=strict", "-f", "-"],
            Some(&format!("{HPA}  bogus: 1\n")),
        )
        .await;
    assert!(
        stderr(&strict).contains("unknown field \"spec.bogus\""),
        "{}",
        stderr(&strict)
    );

    ok(&k.apply(&deployment(image)).await);
    ok(&k.apply(HPA).await);
    let table = ok(&k.run(&["get", "hpa", "web"]).await);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "REFERENCE",
            "TARGETS",
            "MINPODS",
            "MAXPODS",
            "REPLICAS",
            "AGE"
        ],
        "{table}"
    );
    assert!(table.contains("Deployment/web"), "{table}");

    // Under load: 200m of a 100m request is 200% against 50%, so 4, held at 3.
    wait_until(
        "the HPA to scale web to 3",
        SCALE_UP,
        async || replicas(&cluster),
        |r| *r == 3,
    )
    .await;
    let busy = wait_until(
        "kubectl get hpa to show the utilization",
        SCALE_UP,
        async || k.run(&["get", "hpa", "web", "--no-headers"]).await,
        |o| {
            let t = stdout(o);
            t.contains("cpu: ") && t.contains("%/50%") && !t.contains("<unknown>")
        },
    )
    .await;
    assert!(
        stdout(&busy).contains("Deployment/web"),
        "{}",
        stdout(&busy)
    );

    // Idle: back to the minimum at once (a scale-down window of 0).
    wait_until(
        "the HPA to scale web back to 1",
        SCALE_DOWN,
        async || replicas(&cluster),
        |r| *r == 1,
    )
    .await;

    let describe = ok(&k.run(&["describe", "hpa", "web"]).await);
    for want in [
        "SuccessfulRescale",
        "New size: 3; reason: cpu resource utilization (percentage of request) above target",
        "New size: 1; reason: All metrics below target",
        "AbleToScale",
        "ScalingActive",
        "ValidMetricFound",
    ] {
        assert!(describe.contains(want), "{want} missing from:\n{describe}");
    }
    let status = ok(&k
        .run(&[
            "get",
            "hpa",
            "web",
            "-o",
            "jsonpath={.status.desiredReplicas} {.status.lastScaleTime}",
        ])
        .await);
    assert!(status.starts_with("1 "), "{status}");

    // kubectl 1.33's autoscale sends autoscaling/v2 as protobuf (older ones send
    // autoscaling/v1, which mesopod does not serve).
    let auto = ok(&k
        .run(&[
            "autoscale",
            "deployment",
            "web",
            "--name=auto",
            "--cpu-percent=50",
            "--min=1",
            "--max=3",
            "--dry-run=server",
            "-o",
            "yaml",
        ])
        .await);
    assert!(
        auto.contains("apiVersion: autoscaling/v2") && auto.contains("averageUtilization: 50"),
        "{auto}"
    );
    ok(&k.run(&["delete", "hpa", "web"]).await);
    ok(&k
        .run(&["delete", "deployment", "web", "--wait=false"])
        .await);
    cluster.app.shutdown().await;
}
