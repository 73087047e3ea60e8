//! StatefulSets with the real kubectl, on simulated agents (pods run and are ready at
//! once, so what is tested is the controller and what kubectl reads of it): apply, an
//! ordered start (web-1 is created only once web-0 runs and is ready), `rollout
//! status`, a partitioned update (partition 2: only web-2 changes; partition 0: all),
//! `rollout history` and `undo` through ControllerRevisions, a scale-down that removes
//! the highest ordinals first, and a delete that cascades to pods and revisions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiserver::{Api, EventKind};
use common::cluster::*;
use futures::StreamExt as _;
use testkit::{Kubectl, ok, stderr, wait_until};

const T: Duration = Duration::from_secs(60);

fn statefulset(replicas: u32, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: web\nspec:\n  serviceName: nginx\n  replicas: {replicas}\n  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - name: main\n        image: {image}\n        command: [\"sleep\", \"3600\"]\n        resources:\n          requests: {{cpu: 10m, memory: 16Mi}}\n"
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

/// `name=image` of the pods of `web` not being deleted, sorted by name.
fn images(api: &Api) -> Vec<String> {
    let mut out: Vec<String> = api
        .list_pods(Some("default"), "app=web", "")
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            format!(
                "{}={}",
                p.metadata.name.unwrap_or_default(),
                p.spec
                    .and_then(|s| s.containers[0].image.clone())
                    .unwrap_or_default()
            )
        })
        .collect();
    out.sort();
    out
}

/// What the pod watch saw, in order: (kind, name, running and ready).
type Seen = Arc<Mutex<Vec<(EventKind, String, bool)>>>;

fn record_pods(api: &Api) -> (Seen, tokio::task::JoinHandle<()>) {
    let from = api
        .list_pods(Some("default"), "", "")
        .unwrap()
        .resource_version;
    let mut events = api.watch_pods(Some("default"), from).unwrap();
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    let task = tokio::spawn(async move {
        while let Some(Ok(ev)) = events.next().await {
            let status = ev.object.status.as_ref();
            let ready = status.and_then(|s| s.phase.as_deref()) == Some("Running")
                && status
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            let name = ev.object.metadata.name.clone().unwrap_or_default();
            log.lock().unwrap().push((ev.kind, name, ready));
        }
    });
    (seen, task)
}

async fn rolled_out(k: &Kubectl, expect: &str) {
    let out = k
        .run(&["rollout", "status", "sts/web", "--timeout=60s"])
        .await;
    assert!(ok(&out).contains(expect), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statefulset_starts_in_order_updates_by_partition_undoes_scales_down_and_cascades() {
    let app = cluster().await;
    let api = app.api();
    let k = Kubectl::new(&app.api_url());
    let (seen, recorder) = record_pods(api);

    k.apply(&statefulset(3, "busybox:1.36")).await;
    rolled_out(
        &k,
        "partitioned roll out complete: 3 new pods have been updated...",
    )
    .await;
    assert_eq!(
        images(api),
        [
            "web-0=busybox:1.36",
            "web-1=busybox:1.36",
            "web-2=busybox:1.36"
        ]
    );
    // Ordered: each pod appears only once the one before it runs and is ready.
    {
        let log = seen.lock().unwrap();
        for i in 1..3 {
            let added = log
                .iter()
                .position(|(kind, n, _)| *kind == EventKind::Added && *n == format!("web-{i}"))
                .expect("added");
            let before_ready = log[..added]
                .iter()
                .any(|(_, n, ready)| *n == format!("web-{}", i - 1) && *ready);
            assert!(
                before_ready,
                "web-{i} created before web-{} was ready: {log:?}",
                i - 1
            );
        }
    }
    let pod = api.get_pod("default", "web-1").unwrap();
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(labels["statefulset.kubernetes.io/pod-name"], "web-1");
    assert_eq!(labels["apps.kubernetes.io/pod-index"], "1");
    let spec = pod.spec.clone().unwrap();
    assert_eq!(spec.hostname.as_deref(), Some("web-1"));
    let first_revision = labels["controller-revision-hash"].clone();
    let table = ok(&k.run(&["get", "sts", "web", "--no-headers"]).await);
    assert!(table.starts_with("web   3/3"), "{table}");
    let revs = ok(&k.run(&["get", "controllerrevisions", "--no-headers"]).await);
    assert!(
        revs.starts_with(&format!("{first_revision}   statefulset.apps/web   1 ")),
        "{revs}"
    );
    let events = ok(&k
        .run(&[
            "get",
            "events",
            "--field-selector=involvedObject.kind=StatefulSet",
        ])
        .await);
    assert!(
        events.contains("create Pod web-0 in StatefulSet web successful"),
        "{events}"
    );

    // Partition 2: only web-2 takes the new template.
    ok(&k
        .run(&[
            "patch",
            "sts/web",
            "-p",
            r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":2}}}}"#,
        ])
        .await);
    ok(&k
        .run(&["set", "image", "sts/web", "main=busybox:1.37"])
        .await);
    rolled_out(
        &k,
        "partitioned roll out complete: 1 new pods have been updated...",
    )
    .await;
    wait_until(
        "web-2 updated",
        T,
        async || images(api),
        |i| {
            *i == [
                "web-0=busybox:1.36",
                "web-1=busybox:1.36",
                "web-2=busybox:1.37",
            ]
        },
    )
    .await;
    let set = api.get_statefulset("default", "web").unwrap();
    let status = set.status.unwrap();
    assert_eq!(
        status.current_revision.as_deref(),
        Some(first_revision.as_str())
    );
    assert_ne!(status.update_revision, status.current_revision);

    // Partition 0: the rest, highest first.
    ok(&k
        .run(&[
            "patch",
            "sts/web",
            "-p",
            r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}"#,
        ])
        .await);
    rolled_out(
        &k,
        "partitioned roll out complete: 3 new pods have been updated...",
    )
    .await;
    wait_until(
        "all updated",
        T,
        async || images(api),
        |i| {
            *i == [
                "web-0=busybox:1.37",
                "web-1=busybox:1.37",
                "web-2=busybox:1.37",
            ]
        },
    )
    .await;
    wait_until(
        "the update revision current",
        T,
        async || {
            api.get_statefulset("default", "web")
                .unwrap()
                .status
                .unwrap()
        },
        |s| s.current_revision == s.update_revision && s.current_replicas == Some(3),
    )
    .await;

    // History and undo through ControllerRevisions.
    let history = ok(&k.run(&["rollout", "history", "sts/web"]).await);
    assert!(
        history.contains("1         <none>") && history.contains("2         <none>"),
        "{history}"
    );
    let second = ok(&k
        .run(&["rollout", "history", "sts/web", "--revision=2"])
        .await);
    assert!(second.contains("busybox:1.37"), "{second}");
    let described = ok(&k.run(&["describe", "sts/web"]).await);
    assert!(
        described.contains("3 Running / 0 Waiting / 0 Succeeded / 0 Failed"),
        "{described}"
    );
    ok(&k.run(&["rollout", "undo", "sts/web"]).await);
    wait_until(
        "undone",
        T,
        async || images(api),
        |i| {
            *i == [
                "web-0=busybox:1.36",
                "web-1=busybox:1.36",
                "web-2=busybox:1.36",
            ]
        },
    )
    .await;
    let renumbered = api
        .get_controller_revision("default", &first_revision)
        .unwrap();
    assert_eq!(renumbered.revision, 3, "undo renumbers the old revision");

    // Scale down: the highest ordinals go, highest first.
    let mark = seen.lock().unwrap().len();
    ok(&k.run(&["scale", "sts/web", "--replicas=1"]).await);
    wait_until(
        "web-2 then web-1 deleted",
        T,
        async || {
            seen.lock().unwrap()[mark..]
                .iter()
                .filter(|(kind, _, _)| *kind == EventKind::Deleted)
                .map(|(_, n, _)| n.clone())
                .collect::<Vec<_>>()
        },
        |gone| gone.len() >= 2,
    )
    .await;
    let gone: Vec<String> = seen.lock().unwrap()[mark..]
        .iter()
        .filter(|(kind, _, _)| *kind == EventKind::Deleted)
        .map(|(_, n, _)| n.clone())
        .collect();
    assert_eq!(gone, ["web-2", "web-1"]);
    assert_eq!(images(api), ["web-0=busybox:1.36"]);
    let events = ok(&k
        .run(&[
            "get",
            "events",
            "--field-selector=involvedObject.kind=StatefulSet",
        ])
        .await);
    assert!(
        events.contains("delete Pod web-2 in StatefulSet web successful"),
        "{events}"
    );

    // Deleting the set deletes its pods and its revisions.
    ok(&k.run(&["delete", "sts/web"]).await);
    wait_until(
        "pods and revisions collected",
        T,
        async || {
            (
                images(api).len(),
                api.list_controller_revisions(Some("default"), "")
                    .unwrap()
                    .items
                    .len(),
            )
        },
        |n| *n == (0, 0),
    )
    .await;
    recorder.abort();
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explains_statefulsets_and_volume_claim_templates_are_refused_with_their_path() {
    let app = cluster().await;
    let k = Kubectl::new(&app.api_url());
    let explained = ok(&k
        .run(&["explain", "statefulset.spec.podManagementPolicy"])
        .await);
    assert!(explained.contains("KIND:       StatefulSet"), "{explained}");
    assert!(explained.contains("OrderedReady"), "{explained}");
    let explained = ok(&k.run(&["explain", "controllerrevision.revision"]).await);
    assert!(
        explained.contains("KIND:       ControllerRevision"),
        "{explained}"
    );
    let yaml = format!(
        "{}  volumeClaimTemplates:\n  - metadata: {{name: www}}\n    spec:\n      accessModes: [ReadWriteOnce]\n      resources: {{requests: {{storage: 1Gi}}}}\n",
        statefulset(1, "busybox:1.36")
    );
    let out = k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains(
            "spec.volumeClaimTemplates: Forbidden: not supported by mesopod: there are no persistent volumes"
        ),
        "{}",
        stderr(&out)
    );
    app.shutdown().await;
}
