//! `autoscaling/v1` HorizontalPodAutoscalers through the real kubectl, on simulated
//! agents (no pod needs to run): kubectl 1.27's `kubectl autoscale`, which POSTs a v1
//! object, creates the autoscaler; kubectl 1.33 shows it in `get hpa` (the preferred
//! v2), as v1 with `get hpa.v1.autoscaling`, and explains v1's fields from OpenAPI v3.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::cluster::*;
use common::{KUBECTL_133, kubectl};
use testkit::{ok, stderr};

const KUBECTL_127: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.27";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_127_autoscale_creates_a_v1_autoscaler_that_133_reads() {
    let app = two_simulated_agents().await;
    let url = app.api_url();
    let old = kubectl(KUBECTL_127, &url);
    let new = kubectl(KUBECTL_133, &url);
    ok(&new
        .run(&["create", "deployment", "web", "--image=busybox:1.36"])
        .await);

    let out = old
        .run(&[
            "autoscale",
            "deployment",
            "web",
            "--min=1",
            "--max=3",
            "--cpu-percent=50",
        ])
        .await;
    assert!(
        ok(&out).contains("horizontalpodautoscaler.autoscaling/web autoscaled"),
        "{}",
        stderr(&out)
    );

    let table = ok(&new.run(&["get", "hpa"]).await);
    let lines: Vec<&str> = table.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
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
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        row[..6],
        ["web", "Deployment/web", "cpu:", "<unknown>/50%", "1", "3"],
        "{table}"
    );

    // kubectl 1.33 expands the short name `hpa` to the preferred version whatever
    // version follows it, so it is given the full name; 1.27 keeps the version.
    let yaml = ok(&new
        .run(&[
            "get",
            "horizontalpodautoscalers.v1.autoscaling",
            "web",
            "-o",
            "yaml",
        ])
        .await);
    let short = ok(&old
        .run(&["get", "hpa.v1.autoscaling", "web", "-o", "yaml"])
        .await);
    assert_eq!(short, yaml);
    assert!(yaml.contains("apiVersion: autoscaling/v1"), "{yaml}");
    assert!(
        yaml.contains("targetCPUUtilizationPercentage: 50"),
        "{yaml}"
    );
    // What v1 cannot say (the controller's conditions) rides in annotations of the v1
    // object only.
    assert!(
        yaml.contains("autoscaling.alpha.kubernetes.io/conditions"),
        "{yaml}"
    );
    let stored = ok(&new
        .run(&[
            "get",
            "hpa",
            "web",
            "-o",
            "jsonpath={.metadata.annotations}",
        ])
        .await);
    assert_eq!(stored, "");
    let v2 = ok(&new.run(&["get", "hpa", "web", "-o", "yaml"]).await);
    assert!(
        v2.contains("apiVersion: autoscaling/v2") && v2.contains("averageUtilization: 50"),
        "{v2}"
    );

    let explained = ok(&new
        .run(&[
            "explain",
            "hpa.spec.targetCPUUtilizationPercentage",
            "--api-version=autoscaling/v1",
        ])
        .await);
    assert!(
        explained.contains("VERSION:    v1")
            && explained.contains("targetCPUUtilizationPercentage"),
        "{explained}"
    );

    // The v1 client edits what it reads; the v2 object keeps the rest.
    let out = old
        .run(&[
            "patch",
            "hpa",
            "web",
            "--type=merge",
            "-p",
            r#"{"spec":{"maxReplicas":4}}"#,
        ])
        .await;
    ok(&out);
    let v2 = ok(&new
        .run(&["get", "hpa", "web", "-o", "jsonpath={.spec.maxReplicas}"])
        .await);
    assert_eq!(v2, "4");
    ok(&old.run(&["delete", "hpa", "web"]).await);
}
