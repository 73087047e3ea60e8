//! The API shim on etcd (`--etcd-servers`): two shims on one etcd each serve what the
//! other wrote (HA replicas share state this way), kubectl works against both, an
//! update from a stale resourceVersion is 409 as on redb, and with
//! `--encryption-provider-config` a Secret's value in etcd holds no plaintext;
//! ReplicationControllers and DaemonSets are kept under kube-apiserver's keys.
//! Needs etcd (`.ci/install-etcd.sh`): skipped without it, failed under `CI=true`.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;

use apiserver::store::encryption::Encryption;
use apiserver::store::{EtcdConfig, EtcdStore};
use apiserver::{Api, SystemClock};
use common::{Server, TestLogs, pod_yaml};
use std::time::Duration;
use testkit::etcd::Etcd;

use testkit::{Kubectl, ok, wait_until};

async fn shim_on(etcd: &Etcd, encryption: Option<Arc<Encryption>>) -> Server {
    let store = EtcdStore::connect(EtcdConfig::new(vec![etcd.url.clone()]), encryption)
        .await
        .unwrap();
    let api = Api::start(Arc::new(store), Arc::new(SystemClock), Arc::new(TestLogs))
        .await
        .unwrap();
    Server::serve(api).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shims_on_one_etcd_serve_each_others_writes_to_kubectl() {
    let Some(etcd) = Etcd::start("two_shims_on_one_etcd_serve_each_others_writes_to_kubectl").await
    else {
        return;
    };
    let a = shim_on(&etcd, None).await;
    let b = shim_on(&etcd, None).await;
    ok(&Kubectl::new(&a.url)
        .run_stdin(
            &["create", "-f", "-"],
            Some(&pod_yaml("web", "nginx", "app: web")),
        )
        .await);
    // b learns of a's writes through its etcd watch.
    let rv_on_b = async |want: &'static str| {
        wait_until(
            "b serves a's pod",
            Duration::from_secs(10),
            async || {
                let out = Kubectl::new(&b.url)
                    .run(&[
                        "get",
                        "pod",
                        "web",
                        "-o",
                        "jsonpath={.metadata.resourceVersion} {.metadata.labels.tier}",
                    ])
                    .await;
                String::from_utf8_lossy(&out.stdout).into_owned()
            },
            |s: &String| !s.is_empty() && s.ends_with(want),
        )
        .await
    };
    let seen = rv_on_b(" ").await.trim().to_string();
    ok(&Kubectl::new(&a.url)
        .run(&["label", "pod", "web", "tier=front"])
        .await);
    rv_on_b("front").await;
    // Stale resourceVersion from b: 409 Conflict, as on redb.
    let stale = pod_yaml("web", "nginx", "app: web").replace(
        "name: web",
        &format!("name: web\n  resourceVersion: \"{seen}\""),
    );
    let out = Kubectl::new(&b.url)
        .run_stdin(&["replace", "-f", "-"], Some(&stale))
        .await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the object has been modified"),
        "expected kube-apiserver's conflict message, got {err}"
    );
    // The objects are where kube-apiserver keeps them.
    let raw = etcdctl(
        &etcd,
        &["get", "/registry/pods/default/web", "--print-value-only"],
    );
    assert!(raw.contains("\"name\":\"web\""), "{raw}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_encrypted_in_etcd_and_read_back_with_the_keys() {
    let Some(etcd) = Etcd::start("secrets_are_encrypted_in_etcd_and_read_back_with_the_keys").await
    else {
        return;
    };
    let path = etcd.data_dir().join("encryption.yaml");
    std::fs::write(
        &path,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources:\n      - secrets\n    providers:\n      - aesgcm:\n          keys:\n            - name: key1\n              secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n",
    )
    .unwrap();
    let enc = Arc::new(Encryption::load(&path).unwrap());
    let shim = shim_on(&etcd, Some(enc.clone())).await;
    ok(&Kubectl::new(&shim.url)
        .run(&[
            "create",
            "secret",
            "generic",
            "db",
            "--from-literal=password=planted-hunter2",
        ])
        .await);
    let raw = etcdctl(
        &etcd,
        &["get", "/registry/secrets/default/db", "--print-value-only"],
    );
    assert!(raw.starts_with("k8s:enc:aesgcm:v1:key1:"), "{raw:.60}");
    assert!(!raw.contains("hunter2") && !raw.contains("cGxhbnRlZC1odW50ZXIy"));
    // Another process with the keys reads it back.
    let other = shim_on(&etcd, Some(enc)).await;
    let out = ok(&Kubectl::new(&other.url)
        .run(&["get", "secret", "db", "-o", "jsonpath={.data.password}"])
        .await);
    assert_eq!(out, "cGxhbnRlZC1odW50ZXIy");
}

fn etcdctl(etcd: &Etcd, args: &[&str]) -> String {
    let out = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={}", etcd.url))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_controllers_and_daemonsets_live_where_kube_apiserver_keeps_them() {
    let Some(etcd) =
        Etcd::start("replication_controllers_and_daemonsets_live_where_kube_apiserver_keeps_them")
            .await
    else {
        return;
    };
    let a = shim_on(&etcd, None).await;
    let b = shim_on(&etcd, None).await;
    let template = "  template:\n    metadata:\n      labels: {app: x}\n    spec:\n      containers:\n      - name: main\n        image: busybox:1.36\n";
    let rc = format!(
        "apiVersion: v1\nkind: ReplicationController\nmetadata:\n  name: old\nspec:\n{template}"
    );
    let ds = format!(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\nspec:\n  selector:\n    matchLabels: {{app: x}}\n{template}"
    );
    for manifest in [rc, ds] {
        ok(&Kubectl::new(&a.url)
            .run_stdin(&["create", "-f", "-"], Some(&manifest))
            .await);
    }
    // b serves them from its etcd watch, with their subresources.
    wait_until(
        "b serves a's workloads",
        Duration::from_secs(10),
        async || {
            let out = Kubectl::new(&b.url)
                .run(&["get", "rc/old", "ds/agent", "-o", "name"])
                .await;
            String::from_utf8_lossy(&out.stdout).into_owned()
        },
        |s| s.contains("replicationcontroller/old") && s.contains("daemonset.apps/agent"),
    )
    .await;
    ok(&Kubectl::new(&b.url)
        .run(&["scale", "rc/old", "--replicas=3"])
        .await);
    let raw = etcdctl(
        &etcd,
        &[
            "get",
            "/registry/controllers/default/old",
            "--print-value-only",
        ],
    );
    assert!(raw.contains("\"replicas\":3"), "{raw}");
    let raw = etcdctl(
        &etcd,
        &[
            "get",
            "/registry/daemonsets/default/agent",
            "--print-value-only",
        ],
    );
    assert!(
        raw.contains("\"deprecated.daemonset.template.generation\":\"1\""),
        "{raw}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn horizontal_pod_autoscalers_live_under_kube_apiservers_key_and_replicas_share_them() {
    let Some(etcd) = Etcd::start(
        "horizontal_pod_autoscalers_live_under_kube_apiservers_key_and_replicas_share_them",
    )
    .await
    else {
        return;
    };
    let a = shim_on(&etcd, None).await;
    let b = shim_on(&etcd, None).await;
    let hpa = "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: web\nspec:\n  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n  maxReplicas: 3\n";
    ok(&Kubectl::new(&a.url)
        .run_stdin(&["create", "-f", "-"], Some(hpa))
        .await);
    let shown = wait_until(
        "b serves a's autoscaler",
        Duration::from_secs(10),
        async || {
            let out = Kubectl::new(&b.url)
                .run(&["get", "hpa", "web", "--no-headers"])
                .await;
            String::from_utf8_lossy(&out.stdout).into_owned()
        },
        |s| s.starts_with("web "),
    )
    .await;
    // kube's defaults were stored: minReplicas 1 and CPU at 80%.
    assert!(
        shown.contains("Deployment/web") && shown.contains("cpu: <unknown>/80%"),
        "{shown}"
    );
    let raw = etcdctl(
        &etcd,
        &[
            "get",
            "/registry/horizontalpodautoscalers/default/web",
            "--print-value-only",
        ],
    );
    assert!(raw.contains("\"apiVersion\":\"autoscaling/v2\""), "{raw}");
}
