//! Deployments and ReplicaSets with the real kubectl, on simulated agents (pods run
//! and are ready at once, so what is tested is the controllers and what kubectl reads
//! of them): apply, `rollout status`, `scale`, `set image`, `rollout history`, `undo`,
//! `restart`, `pause` and `resume`, a rollout that can never progress ending in
//! ProgressDeadlineExceeded (and `rollout status` failing), a ReplicaSet replacing a
//! deleted pod and adopting orphans it selects, and cascading deletes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use apiserver::Api;
use common::cluster::*;
use testkit::{Kubectl, ok, stderr, wait_until};

const T: Duration = Duration::from_secs(60);

fn deployment(name: &str, replicas: u32, image: &str, extra: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: {replicas}\n{extra}  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n      containers:\n      - name: main\n        image: {image}\n        command: [\"sleep\", \"3600\"]\n        resources:\n          requests: {{cpu: 10m, memory: 16Mi}}\n"
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

/// The images of the pods of `app` that are not being deleted, sorted.
fn images(api: &Api, app: &str) -> Vec<String> {
    let mut out: Vec<String> = api
        .list_pods(Some("default"), &format!("app={app}"), "")
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.spec.and_then(|s| s.containers[0].image.clone()))
        .collect();
    out.sort();
    out
}

async fn rolled_out(k: &Kubectl, what: &str) {
    let out = k.run(&["rollout", "status", what, "--timeout=60s"]).await;
    assert!(
        ok(&out).contains("successfully rolled out"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_rolls_out_scales_updates_undoes_restarts_pauses_and_cascades() {
    let app = cluster().await;
    let api = app.api();
    let k = Kubectl::new(&app.api_url());
    k.apply(&deployment("web", 3, "busybox:1.36", "")).await;
    rolled_out(&k, "deploy/web").await;
    assert_eq!(images(api, "web"), vec!["busybox:1.36"; 3]);
    let table = ok(&k.run(&["get", "deploy", "web", "--no-headers"]).await);
    assert!(table.starts_with("web   3/3   3     3"), "{table}");

    ok(&k.run(&["scale", "deploy/web", "--replicas=5"]).await);
    rolled_out(&k, "deploy/web").await;
    assert_eq!(images(api, "web").len(), 5);

    ok(&k
        .run(&["set", "image", "deploy/web", "main=busybox:1.37"])
        .await);
    rolled_out(&k, "deploy/web").await;
    wait_until(
        "the old pods gone",
        T,
        async || images(api, "web"),
        |i| *i == vec!["busybox:1.37"; 5],
    )
    .await;
    let rses = api
        .list_replicasets(Some("default"), "app=web")
        .unwrap()
        .items;
    assert_eq!(rses.len(), 2);
    let history = ok(&k.run(&["rollout", "history", "deploy/web"]).await);
    assert!(
        history.contains("1         <none>") && history.contains("2         <none>"),
        "{history}"
    );
    let events = ok(&k
        .run(&[
            "get",
            "events",
            "--field-selector=involvedObject.kind=Deployment",
        ])
        .await);
    assert!(events.contains("ScalingReplicaSet"), "{events}");
    assert!(events.contains("Scaled up replica set web-"), "{events}");

    ok(&k.run(&["rollout", "undo", "deploy/web"]).await);
    rolled_out(&k, "deploy/web").await;
    wait_until(
        "undone",
        T,
        async || images(api, "web"),
        |i| *i == vec!["busybox:1.36"; 5],
    )
    .await;
    let d = api.get_deployment("default", "web").unwrap();
    assert_eq!(
        d.metadata.annotations.unwrap()["deployment.kubernetes.io/revision"],
        "3",
        "undo is a new revision"
    );

    ok(&k.run(&["rollout", "restart", "deploy/web"]).await);
    rolled_out(&k, "deploy/web").await;
    let d = api.get_deployment("default", "web").unwrap();
    let template = d.spec.unwrap().template.metadata.unwrap();
    assert!(
        template
            .annotations
            .unwrap()
            .contains_key("kubectl.kubernetes.io/restartedAt")
    );

    // Paused: a new template makes no new ReplicaSet until resumed.
    ok(&k.run(&["rollout", "pause", "deploy/web"]).await);
    ok(&k
        .run(&["set", "image", "deploy/web", "main=busybox:1.38"])
        .await);
    let before = api
        .list_replicasets(Some("default"), "app=web")
        .unwrap()
        .items
        .len();
    wait_until(
        "the pause seen",
        T,
        async || api.get_deployment("default", "web").unwrap(),
        |d| d.status.as_ref().and_then(|s| s.observed_generation) == d.metadata.generation,
    )
    .await;
    assert_eq!(
        api.list_replicasets(Some("default"), "app=web")
            .unwrap()
            .items
            .len(),
        before
    );
    assert!(images(api, "web").iter().all(|i| i == "busybox:1.36"));
    ok(&k.run(&["rollout", "resume", "deploy/web"]).await);
    rolled_out(&k, "deploy/web").await;
    wait_until(
        "resumed",
        T,
        async || images(api, "web"),
        |i| *i == vec!["busybox:1.38"; 5],
    )
    .await;

    // Deleting the Deployment deletes its ReplicaSets and their pods.
    ok(&k.run(&["delete", "deploy/web"]).await);
    wait_until(
        "the ReplicaSets and pods collected",
        T,
        async || {
            (
                api.list_replicasets(Some("default"), "app=web")
                    .unwrap()
                    .items
                    .len(),
                images(api, "web").len(),
            )
        },
        |n| *n == (0, 0),
    )
    .await;
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_that_cannot_progress_exceeds_its_deadline_and_undo_restores_it() {
    let app = cluster().await;
    let api = app.api();
    let k = Kubectl::new(&app.api_url());
    k.apply(&deployment(
        "app",
        2,
        "busybox:1.36",
        "  progressDeadlineSeconds: 2\n",
    ))
    .await;
    rolled_out(&k, "deploy/app").await;
    // No agent has 64 CPUs: the new pods never run.
    let patch = r#"{"spec":{"template":{"spec":{"containers":[{"name":"main","resources":{"requests":{"cpu":"64"}}}]}}}}"#;
    ok(&k.run(&["patch", "deploy/app", "-p", patch]).await);
    let out = k
        .run(&["rollout", "status", "deploy/app", "--timeout=60s"])
        .await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("deployment \"app\" exceeded its progress deadline"),
        "{}",
        stderr(&out)
    );
    let d = api.get_deployment("default", "app").unwrap();
    let progressing = d
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Progressing")
        .unwrap();
    assert_eq!(
        (progressing.status.as_str(), progressing.reason.as_deref()),
        ("False", Some("ProgressDeadlineExceeded"))
    );
    // The old pods kept serving: maxUnavailable 25% of 2 rounds down to 0; and the
    // ReplicaSet made one surge pod, not one per sync.
    assert_eq!(
        images(api, "app").len(),
        3,
        "two old pods and one surge pod"
    );
    // Why it never progressed is on the pod, as kube-scheduler puts it there.
    let events: serde_json::Value =
        serde_json::from_str(&ok(&k.run(&["get", "events", "-o", "json"]).await)).unwrap();
    let unplaceable = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["reason"] == "FailedScheduling")
        .unwrap_or_else(|| panic!("no FailedScheduling event: {events}"));
    assert_eq!(unplaceable["involvedObject"]["kind"], "Pod");
    assert!(
        unplaceable["involvedObject"]["name"]
            .as_str()
            .unwrap()
            .starts_with("app-"),
        "{unplaceable}"
    );
    assert!(
        unplaceable["message"]
            .as_str()
            .unwrap()
            .contains("insufficient cpus"),
        "{unplaceable}"
    );
    ok(&k.run(&["rollout", "undo", "deploy/app"]).await);
    rolled_out(&k, "deploy/app").await;
    wait_until(
        "the unplaceable pod gone",
        T,
        async || images(api, "app").len(),
        |n| *n == 2,
    )
    .await;
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicaset_adopts_orphans_replaces_deleted_pods_and_its_pods_go_with_it() {
    let app = cluster().await;
    let api = app.api();
    let k = Kubectl::new(&app.api_url());
    // An orphan the ReplicaSet will select.
    k.apply("apiVersion: v1\nkind: Pod\nmetadata:\n  name: stray\n  labels: {app: rs}\nspec:\n  containers:\n  - name: main\n    image: busybox:1.36\n    command: [\"sleep\", \"3600\"]\n").await;
    let rs = "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata:\n  name: rs\nspec:\n  replicas: 3\n  selector:\n    matchLabels: {app: rs}\n  template:\n    metadata:\n      labels: {app: rs}\n    spec:\n      containers:\n      - name: main\n        image: busybox:1.36\n        command: [\"sleep\", \"3600\"]\n";
    k.apply(rs).await;
    let ready = |n: i32| {
        move |rs: &k8s_openapi::api::apps::v1::ReplicaSet| {
            rs.status.as_ref().and_then(|s| s.ready_replicas) == Some(n)
        }
    };
    wait_until(
        "3 ready",
        T,
        async || api.get_replicaset("default", "rs").unwrap(),
        ready(3),
    )
    .await;
    let stray = api.get_pod("default", "stray").unwrap();
    let owner = stray.metadata.owner_references.unwrap();
    assert_eq!(
        (
            owner[0].kind.as_str(),
            owner[0].name.as_str(),
            owner[0].controller
        ),
        ("ReplicaSet", "rs", Some(true))
    );
    assert_eq!(
        images(api, "rs").len(),
        3,
        "the orphan counted: two created, not three"
    );

    ok(&k.run(&["delete", "pod", "stray", "--wait=false"]).await);
    wait_until(
        "replaced",
        T,
        async || {
            api.list_pods(Some("default"), "app=rs", "")
                .unwrap()
                .items
                .iter()
                .filter(|p| {
                    p.metadata.deletion_timestamp.is_none()
                        && p.metadata.name.as_deref() != Some("stray")
                })
                .count()
        },
        |n| *n == 3,
    )
    .await;

    ok(&k.run(&["scale", "rs/rs", "--replicas=1"]).await);
    wait_until(
        "scaled down",
        T,
        async || images(api, "rs").len(),
        |n| *n == 1,
    )
    .await;
    let describe = ok(&k.run(&["describe", "rs/rs"]).await);
    assert!(
        describe.contains("SuccessfulCreate") && describe.contains("SuccessfulDelete"),
        "{describe}"
    );

    ok(&k.run(&["delete", "rs/rs"]).await);
    wait_until(
        "its pods collected",
        T,
        async || images(api, "rs").len(),
        |n| *n == 0,
    )
    .await;
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_deployment_sends_protobuf_and_rolls_out() {
    let app = cluster().await;
    let api = app.api();
    for (program, name) in [
        (common::KUBECTL_133, "made"),
        (common::KUBECTL_131, "made-old"),
    ] {
        let k = Kubectl::new(&app.api_url()).program(program);
        let out = k
            .run(&[
                "create",
                "deployment",
                name,
                "--image=busybox:1.36",
                "--replicas=2",
                "--",
                "sleep",
                "3600",
            ])
            .await;
        assert_eq!(ok(&out).trim(), format!("deployment.apps/{name} created"));
        rolled_out(&k, &format!("deploy/{name}")).await;
        let d = api.get_deployment("default", name).unwrap();
        let container = &d.spec.unwrap().template.spec.unwrap().containers[0];
        assert_eq!(container.image.as_deref(), Some("busybox:1.36"));
        assert_eq!(
            container.command.as_deref(),
            Some(&["sleep".to_owned(), "3600".to_owned()][..])
        );
        assert_eq!(images(api, name).len(), 2);
    }
    app.shutdown().await;
}
