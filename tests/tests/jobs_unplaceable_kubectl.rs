//! A Job whose pod no agent can hold, on simulated agents with an injected clock:
//! it stays active while its pod waits with FailedScheduling, and fails at its
//! `activeDeadlineSeconds` (DeadlineExceeded), its pod deleted, once the clock says
//! so, without the test sleeping for the deadline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use apiserver::ManualClock;
use common::cluster::*;
use testkit::{Kubectl, ok, wait_until};

const T: Duration = Duration::from_secs(60);

const JOB: &str = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: huge\nspec:\n  activeDeadlineSeconds: 120\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: main\n        image: busybox:1.36\n        command: [\"true\"]\n        resources:\n          requests: {cpu: \"64\", memory: 16Mi}\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unplaceable_job_waits_with_failed_scheduling_and_fails_at_its_deadline() {
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let mut cfg = app_config(Setup {
        agents: (0..2)
            .map(|i| agent("cpus:8;mem:16384;ports:[31000-31100]", "", i).simulated(None))
            .collect(),
        ..Setup::default()
    });
    cfg.clock = clock.clone();
    let app = framework::app::App::start(cfg).await.unwrap();
    let api = app.api();
    let k = Kubectl::new(&app.api_url());
    k.apply(JOB).await;
    let pods = || {
        api.list_pods(Some("default"), "batch.kubernetes.io/job-name=huge", "")
            .unwrap()
            .items
    };
    let pod = wait_until("the Job's pod", T, async || pods(), |p| p.len() == 1).await;
    let pod = pod[0].metadata.name.clone().unwrap();
    wait_until(
        "FailedScheduling on the pod",
        T,
        async || {
            ok(&k
                .run(&[
                    "get",
                    "events",
                    "--field-selector",
                    &format!("involvedObject.name={pod}"),
                ])
                .await)
        },
        |e| e.contains("FailedScheduling"),
    )
    .await;
    let job = api.get_job("default", "huge").unwrap();
    assert_eq!(job.status.unwrap().active, Some(1), "active while it waits");

    // Past the deadline by the controllers' clock: Failed, the pod gone.
    clock.advance(Duration::from_secs(121));
    let failed = wait_until(
        "the Job failed",
        T,
        async || api.get_job("default", "huge").unwrap(),
        |j| {
            j.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Failed" && c.status == "True"))
        },
    )
    .await;
    let c = failed
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Failed")
        .unwrap();
    assert_eq!(c.reason.as_deref(), Some("DeadlineExceeded"));
    assert_eq!(
        c.message.as_deref(),
        Some("Job was active longer than specified deadline")
    );
    wait_until(
        "the pod deleted",
        T,
        async || {
            pods()
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .count()
        },
        |n| *n == 0,
    )
    .await;
    let table = ok(&k.run(&["get", "job", "huge", "--no-headers"]).await);
    assert!(table.contains("Failed"), "{table}");
    app.shutdown().await;
}
