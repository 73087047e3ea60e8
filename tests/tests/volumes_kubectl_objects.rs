//! ConfigMap and Secret volumes and env end to end: a secure mesopod
//! (`--authorization-mode=Node,RBAC`) whose executor reads the objects with
//! its own node credential, real kubectl, the embedded runtime. A change to
//! the ConfigMap reaches the mounted volume (with `--sync-frequency=1s`),
//! not a `subPath` mount of it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::time::Duration;

use common::cluster::{phase, wait_pod};
use containers_support::*;
use testkit::{ok, wait_until};

const T: Duration = Duration::from_secs(90);
const K: &str = common::KUBECTL_133;

const OBJECTS: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  color: blue\n  size: L\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  password: hunter2\n";

fn pod() -> String {
    let script = "echo env=$COLOR/$PASSWORD/$CFG_size; cat /secret/password; echo; while true; do echo \"vol=$(cat /cfg/color) sub=$(cat /sub-color)\"; sleep 0.2; done";
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: cfg\nspec:\n  terminationGracePeriodSeconds: 1\n  volumes:\n  - name: cfg\n    configMap:\n      name: settings\n  - name: secret\n    secret:\n      secretName: creds\n  containers:\n  - name: main\n    image: {IMAGE}\n    command: [\"/bin/sh\", \"-c\", {script:?}]\n    env:\n    - name: COLOR\n      valueFrom:\n        configMapKeyRef:\n          name: settings\n          key: color\n    - name: PASSWORD\n      valueFrom:\n        secretKeyRef:\n          name: creds\n          key: password\n    envFrom:\n    - configMapRef:\n        name: settings\n      prefix: CFG_\n    volumeMounts:\n    - name: cfg\n      mountPath: /cfg\n    - name: cfg\n      mountPath: /sub-color\n      subPath: color\n    - name: secret\n      mountPath: /secret\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_maps_and_secrets_reach_volumes_and_env_through_the_node_credential() {
    if !prerequisites(false) {
        return;
    }
    let (_keep, store) = store();
    load_image(&store, IMAGE).await;
    let cluster = common::secure::Secure::embedded(&store, &["--sync-frequency=1s"]).await;
    let app = &cluster.app;
    let admin =
        async |args: &[&str], stdin: Option<&str>| cluster.admin_stdin(K, args, stdin).await;

    ok(&admin(&["apply", "-f", "-"], Some(OBJECTS)).await);
    ok(&admin(&["apply", "-f", "-"], Some(&pod())).await);
    wait_pod(app.api(), "default", "cfg", T, |p| phase(p) == "Running").await;
    let logs =
        async || String::from_utf8_lossy(&admin(&["logs", "cfg"], None).await.stdout).into_owned();
    let first = wait_until("the container's first lines", T, logs, |l| {
        l.contains("vol=")
    })
    .await;
    assert!(first.contains("env=blue/hunter2/L"), "{first}");
    assert!(first.contains("hunter2\n"), "{first}");
    assert!(first.contains("vol=blue sub=blue"), "{first}");

    let changed = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  color: red\n  size: L\n";
    ok(&admin(&["apply", "-f", "-"], Some(changed)).await);
    wait_until("the change to reach the volume", T, logs, |l| {
        l.contains("vol=red sub=blue")
    })
    .await;
    ok(&admin(&["delete", "pod", "cfg", "--wait=false"], None).await);
}
