//! The pod sandbox: the containers of one pod share its IPC and UTS
//! namespaces (the hostname is the pod's name) and keep their own mount and
//! PID namespaces; another pod has other ones; the sandbox goes with its
//! pod. On the embedded runtime and on runc, through kubectl.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::collections::HashMap;
use std::time::Duration;

use common::cluster::*;
use containers_support::*;
use testkit::{Kubectl, ok, wait_until};

const T: Duration = Duration::from_secs(60);

/// What each container prints: one `key=value` per line. It keeps
/// running, so that no namespace the test compares has ended (the kernel
/// reuses the inode numbers of namespaces that are gone).
const SCRIPT: &str = "echo host=$(hostname); for ns in ipc uts pid mnt; do \
                      echo $ns=$(readlink /proc/self/ns/$ns); done; exec sleep 3600";

fn two_containers(name: &str) -> String {
    let c = |n: &str| {
        format!(
            "  - name: {n}\n    image: {IMAGE}\n    command: [\"/bin/sh\", \"-c\", {SCRIPT:?}]\n"
        )
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 1\n  containers:\n{}{}",
        c("a"),
        c("b")
    )
}

/// What a container printed, once it printed all of it.
async fn seen(k: &Kubectl, pod: &str, container: &str) -> HashMap<String, String> {
    let text = wait_until(
        "the container's namespaces in its log",
        T,
        async || {
            let out = k.run(&["logs", pod, "-c", container]).await;
            String::from_utf8_lossy(&out.stdout).into_owned()
        },
        |text| text.contains("mnt="),
    )
    .await;
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

async fn scenario(runtime: &str) {
    let (_keep, store) = store();
    load_image(&store, IMAGE).await;
    let app = cluster(runtime, &store).await;
    let k = Kubectl::new(&app.api_url());
    let yaml = format!(
        "{}---\n{}",
        two_containers("pod-one"),
        two_containers("pod-two")
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    for name in ["pod-one", "pod-two"] {
        let up = wait_pod(app.api(), "default", name, T, |p| phase(p) != "Pending").await;
        assert_eq!(phase(&up), "Running", "{:?}", up.status);
    }
    let a = seen(&k, "pod-one", "a").await;
    let b = seen(&k, "pod-one", "b").await;
    let other = seen(&k, "pod-two", "a").await;
    for key in ["host", "ipc", "uts", "pid", "mnt"] {
        assert!(
            a.contains_key(key) && b.contains_key(key),
            "{key}: {a:?} {b:?}"
        );
    }
    assert_eq!(a["host"], "pod-one");
    assert_eq!(b["host"], "pod-one");
    assert_eq!(other["host"], "pod-two");
    // One pod: one IPC and one UTS namespace; each container its own PID
    // and mount namespaces.
    assert_eq!(a["ipc"], b["ipc"], "{a:?} {b:?}");
    assert_eq!(a["uts"], b["uts"], "{a:?} {b:?}");
    assert_ne!(a["pid"], b["pid"], "{a:?} {b:?}");
    assert_ne!(a["mnt"], b["mnt"], "{a:?} {b:?}");
    // Another pod: others again, and none of them the host's.
    assert_ne!(a["ipc"], other["ipc"]);
    assert_ne!(a["uts"], other["uts"]);
    let host_ipc = std::fs::read_link("/proc/self/ns/ipc").unwrap();
    assert_ne!(a["ipc"], host_ipc.display().to_string());

    // The sandboxes go with their pods.
    let work = app.local().unwrap().work_dir().to_path_buf();
    assert_eq!(
        sandboxes_left(&work).len(),
        2,
        "{:?}",
        sandboxes_left(&work)
    );
    for name in ["pod-one", "pod-two"] {
        ok(&k.run(&["delete", "pod", name, "--wait=false"]).await);
    }
    wait_until(
        "the deleted pods' sandboxes removed",
        T,
        async || sandboxes_left(&work),
        |left| left.is_empty(),
    )
    .await;
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_containers_share_ipc_and_uts_on_the_embedded_runtime() {
    if prerequisites(false) {
        scenario("embedded").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pods_containers_share_ipc_and_uts_on_runc() {
    if prerequisites(true) {
        scenario(RUNC).await;
    }
}
