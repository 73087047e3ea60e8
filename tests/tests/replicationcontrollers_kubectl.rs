//! ReplicationControllers with the real kubectl, on simulated agents: `kubectl create`
//! (selector and labels defaulted from the template), `get rc` with kube-apiserver's
//! columns, `scale rc/x` through the `autoscaling/v1` Scale, events in `describe`, and
//! a delete whose pods go with it through the garbage collector.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use apiserver::Api;
use common::cluster::*;
use testkit::{Kubectl, ok, stderr, wait_until};

const T: Duration = Duration::from_secs(60);

/// The names of the live (not deleting) pods labelled `app`.
fn live_pods(api: &Api, app: &str) -> Vec<String> {
    api.list_pods(Some("default"), &format!("app={app}"), "")
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replication_controller_keeps_its_pods_scales_and_its_pods_go_with_it() {
    let app = start(Setup {
        agents: (0..2)
            .map(|i| agent("cpus:8;mem:16384;ports:[31000-31100]", "", i).simulated(None))
            .collect(),
        ..Setup::default()
    })
    .await;
    let api = app.api();
    let k = Kubectl::new(&app.api_url());
    // No selector: it defaults to the template's labels, as do the RC's own.
    let rc = "apiVersion: v1\nkind: ReplicationController\nmetadata:\n  name: old\nspec:\n  replicas: 2\n  template:\n    metadata:\n      labels: {app: old}\n    spec:\n      containers:\n      - name: main\n        image: busybox:1.36\n        command: [\"sleep\", \"3600\"]\n";
    let out = k.run_stdin(&["create", "-f", "-"], Some(rc)).await;
    assert!(
        ok(&out).contains("replicationcontroller/old created"),
        "{}",
        stderr(&out)
    );
    let ready = |n: i32| {
        move |rc: &k8s_openapi::api::core::v1::ReplicationController| {
            rc.status.as_ref().and_then(|s| s.ready_replicas) == Some(n)
        }
    };
    wait_until(
        "2 ready",
        T,
        async || api.get_replicationcontroller("default", "old").unwrap(),
        ready(2),
    )
    .await;
    let stored = api.get_replicationcontroller("default", "old").unwrap();
    let selector = stored.spec.unwrap().selector.unwrap();
    assert_eq!(selector.get("app").map(String::as_str), Some("old"));
    assert_eq!(
        stored
            .metadata
            .labels
            .unwrap()
            .get("app")
            .map(String::as_str),
        Some("old")
    );
    let pods = api.list_pods(Some("default"), "app=old", "").unwrap().items;
    let owner = &pods[0].metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.api_version.as_str(),
            owner.kind.as_str(),
            owner.name.as_str()
        ),
        ("v1", "ReplicationController", "old")
    );
    let table = ok(&k.run(&["get", "rc", "old", "-o", "wide"]).await);
    let header = table.lines().next().unwrap();
    let columns: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(
        columns,
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    let row = table.lines().nth(1).unwrap();
    assert!(row.starts_with("old    2         2         2"), "{table}");
    assert!(
        row.ends_with("main         busybox:1.36   app=old"),
        "{table}"
    );

    let explain = ok(&k.run(&["explain", "rc.spec.selector"]).await);
    assert!(
        explain.contains("ReplicationController") && explain.contains("map[string]string"),
        "{explain}"
    );

    ok(&k.run(&["scale", "rc/old", "--replicas=4"]).await);
    wait_until(
        "scaled up",
        T,
        async || api.get_replicationcontroller("default", "old").unwrap(),
        ready(4),
    )
    .await;
    ok(&k.run(&["scale", "rc/old", "--replicas=1"]).await);
    wait_until(
        "scaled down",
        T,
        async || live_pods(api, "old").len(),
        |n| *n == 1,
    )
    .await;
    let describe = ok(&k.run(&["describe", "rc/old"]).await);
    assert!(
        describe.contains("SuccessfulCreate")
            && describe.contains("SuccessfulDelete")
            && describe.contains("replication-controller"),
        "{describe}"
    );

    ok(&k.run(&["delete", "rc/old"]).await);
    wait_until(
        "its pods collected",
        T,
        async || {
            api.list_pods(Some("default"), "app=old", "")
                .unwrap()
                .items
                .len()
        },
        |n| *n == 0,
    )
    .await;
    app.shutdown().await;
}
