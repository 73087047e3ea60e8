//! The garbage collector's propagation policies and collection deletes with the real
//! kubectl, on simulated agents: `delete --cascade=orphan` leaves the ReplicaSets and
//! pods without references to the deleted owner (and a new ReplicaSet with the same
//! selector adopts the orphaned pods), `delete --cascade=foreground --wait` returns
//! only once the pods are gone, `delete -l`/`--all` (one DELETE per object, as kubectl
//! sends them) and `delete --raw` on a collection URL (a `deletecollection`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use apiserver::Api;
use common::cluster::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use testkit::{Kubectl, ok, stderr, wait_until};

const T: Duration = Duration::from_secs(60);

fn deployment(name: &str, replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n      - name: main\n        image: busybox:1.36\n        command: [\"sleep\", \"3600\"]\n        resources:\n          requests: {{cpu: 10m, memory: 16Mi}}\n"
    )
}

async fn cluster() -> framework::app::App {
    start(Setup {
        agents: (0..2)
            .map(|i| agent("cpus:8;mem:16384;ports:[31000-31100]", "", i).simulated(None))
            .collect(),
        ..Setup::default()
    })
    .await
}

async fn rolled_out(k: &Kubectl, what: &str) {
    let out = k.run(&["rollout", "status", what, "--timeout=60s"]).await;
    assert!(
        ok(&out).contains("successfully rolled out"),
        "{}",
        stderr(&out)
    );
}

/// The owners of `meta`, as `Kind/name`.
fn owners(meta: &ObjectMeta) -> Vec<String> {
    meta.owner_references
        .iter()
        .flatten()
        .map(|r| format!("{}/{}", r.kind, r.name))
        .collect()
}

/// The pods of `app` (terminating ones too), with their owners.
fn pods(api: &Api, app: &str) -> Vec<(String, Vec<String>)> {
    api.list_pods(Some("default"), &format!("app={app}"), "")
        .unwrap()
        .items
        .into_iter()
        .map(|p| (p.metadata.name.clone().unwrap(), owners(&p.metadata)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_and_foreground_cascades_and_collection_deletes() {
    let app = cluster().await;
    let api = app.api();
    let k = Kubectl::new(&app.api_url());

    // Orphan: kubectl waits for the Deployment to go; its ReplicaSet and pods stay.
    k.apply(&deployment("keep", 3)).await;
    rolled_out(&k, "deploy/keep").await;
    ok(&k
        .run(&["delete", "deployment", "keep", "--cascade=orphan"])
        .await);
    let rses = api
        .list_replicasets(Some("default"), "app=keep")
        .unwrap()
        .items;
    assert_eq!(rses.len(), 1);
    assert!(
        owners(&rses[0].metadata).is_empty(),
        "{:?}",
        rses[0].metadata
    );
    let rs = rses[0].metadata.name.clone().unwrap();
    let before = pods(api, "keep");
    assert_eq!(before.len(), 3);
    assert!(
        before
            .iter()
            .all(|(_, o)| *o == [format!("ReplicaSet/{rs}")])
    );

    // The ReplicaSet too: the pods stay, owned by nobody.
    ok(&k.run(&["delete", "rs", &rs, "--cascade=orphan"]).await);
    let orphans = pods(api, "keep");
    assert_eq!(orphans.len(), 3);
    assert!(orphans.iter().all(|(_, o)| o.is_empty()), "{orphans:?}");

    // A new ReplicaSet with the same selector adopts them and creates none.
    k.apply("apiVersion: apps/v1\nkind: ReplicaSet\nmetadata:\n  name: adopter\nspec:\n  replicas: 3\n  selector:\n    matchLabels: {app: keep}\n  template:\n    metadata:\n      labels: {app: keep}\n    spec:\n      containers:\n      - name: main\n        image: busybox:1.36\n        command: [\"sleep\", \"3600\"]\n").await;
    let adopted = wait_until(
        "the orphans adopted",
        T,
        async || pods(api, "keep"),
        |p| p.iter().all(|(_, o)| *o == ["ReplicaSet/adopter"]),
    )
    .await;
    let names = |p: &[(String, Vec<String>)]| {
        let mut n: Vec<String> = p.iter().map(|(n, _)| n.clone()).collect();
        n.sort();
        n
    };
    assert_eq!(names(&adopted), names(&orphans), "the same pods, none new");

    // Foreground: `--wait` returns only once the pods and the ReplicaSet are gone.
    k.apply(&deployment("fg", 2)).await;
    rolled_out(&k, "deploy/fg").await;
    ok(&k
        .run(&[
            "delete",
            "deployment",
            "fg",
            "--cascade=foreground",
            "--wait",
        ])
        .await);
    assert!(pods(api, "fg").is_empty(), "{:?}", pods(api, "fg"));
    assert!(
        api.list_replicasets(Some("default"), "app=fg")
            .unwrap()
            .items
            .is_empty()
    );

    // Collections: kubectl's `-l` deletes one by one; `--raw` on the collection URL is
    // a deletecollection, answered with the list of what it deleted.
    for (name, x) in [("c1", "one"), ("c2", "one"), ("c3", "two")] {
        k.apply(&format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  labels: {{x: {x}}}\n"
        ))
        .await;
    }
    let out = ok(&k.run(&["delete", "configmaps", "-l", "x=one"]).await);
    assert!(out.contains("configmap \"c1\" deleted"), "{out}");
    let left = async || ok(&k.run(&["get", "configmaps", "-l", "x", "-o", "name"]).await);
    assert_eq!(left().await.trim(), "configmap/c3");
    let out = ok(&k
        .run(&[
            "delete",
            "--raw",
            "/api/v1/namespaces/default/configmaps?labelSelector=x%3Dtwo",
        ])
        .await);
    let list: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["kind"], "ConfigMapList");
    assert_eq!(list["items"][0]["metadata"]["name"], "c3");
    assert_eq!(left().await.trim(), "");

    // `delete pods --all`: the adopter first (Background: its pods go with it), then
    // bare pods.
    ok(&k.run(&["delete", "rs", "adopter"]).await);
    for name in ["bare-1", "bare-2"] {
        ok(&k
            .run(&[
                "run",
                name,
                "--image=busybox:1.36",
                "--labels=app=bare",
                "--",
                "sleep",
                "3600",
            ])
            .await);
    }
    ok(&k.run(&["delete", "pods", "--all"]).await);
    wait_until(
        "every pod gone",
        T,
        async || api.list_pods(Some("default"), "", "").unwrap().items.len(),
        |n| *n == 0,
    )
    .await;
    app.shutdown().await;
}
