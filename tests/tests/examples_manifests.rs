//! End to end: every manifest in `examples/` is accepted by the real kubectl, and
//! its workloads run (Deployments roll out, the Indexed Job completes each index
//! once, a rack-pinned Deployment lands on its rack, wildcard host ports differ).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::cluster::*;
use testkit::{Kubectl, ok};

const T: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_manifest_is_accepted_and_its_workloads_run() {
    let app = start(Setup::default()).await;
    let server = app.api_url();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples");
    let out = Kubectl::new(&server).run(&["apply", "-f", dir]).await;
    let text = ok(&out);
    assert!(text.contains("pod/hello created"), "{text}");
    for name in ["web", "on-rack-r1", "init-demo", "worker"] {
        assert!(
            text.contains(&format!("deployment.apps/{name} created")),
            "{text}"
        );
    }
    // `web` asks for host port 31080, which the test agents do not offer, so only
    // the others roll out here.
    for name in ["worker", "on-rack-r1", "init-demo"] {
        let rollout = Kubectl::new(&server)
            .run(&[
                "rollout",
                "status",
                &format!("deploy/{name}"),
                "--timeout=60s",
            ])
            .await;
        assert!(ok(&rollout).contains("successfully rolled out"), "{name}");
    }
    assert!(text.contains("job.batch/squares created"), "{text}");
    assert!(text.contains("cronjob.batch/heartbeat created"), "{text}");
    wait_pod(app.api(), "default", "hello", T, |p| {
        phase(p) == "Succeeded"
    })
    .await;
    // The Indexed Job runs each index once and completes.
    let done = Kubectl::new(&server)
        .run(&[
            "wait",
            "--for=condition=complete",
            "job/squares",
            "--timeout=90s",
        ])
        .await;
    assert!(ok(&done).contains("condition met"), "{}", ok(&done));
    let squares = app
        .api()
        .list_pods(Some("default"), "batch.kubernetes.io/job-name=squares", "")
        .unwrap()
        .items;
    let seen: Vec<(String, String, Option<i32>)> = squares
        .iter()
        .map(|p| {
            (
                p.metadata.annotations.as_ref().unwrap()["batch.kubernetes.io/job-completion-index"].clone(),
                phase(p).to_owned(),
                p.status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .and_then(|c| c[0].state.as_ref()?.terminated.as_ref().map(|t| t.exit_code)),
            )
        })
        .collect();
    assert_eq!(squares.len(), 5, "{seen:?}");
    let pods = |name: &str| {
        app.api()
            .list_pods(Some("default"), &format!("app={name}"), "")
            .unwrap()
            .items
    };
    let rack = pods("on-rack-r1");
    assert_eq!(rack.len(), 2);
    for pod in &rack {
        assert_eq!(
            pod.spec.as_ref().unwrap().node_name.as_deref(),
            Some("agent-1")
        );
    }
    // Each wildcard replica got a host port of its own from the offers.
    let mut ports: Vec<String> = pods("init-demo")
        .iter()
        .map(|p| {
            let annotations = p.metadata.annotations.as_ref().unwrap();
            let mappings: serde_json::Value =
                serde_json::from_str(&annotations["mesopod.io/ports"]).unwrap();
            assert_eq!(mappings.as_array().unwrap().len(), 1, "{mappings}");
            format!(
                "{}/{}",
                annotations["mesopod.io/hostname"], mappings[0]["hostPort"]
            )
        })
        .collect();
    ports.sort();
    ports.dedup();
    assert_eq!(ports.len(), 2, "{ports:?}");
    app.shutdown().await;
}
