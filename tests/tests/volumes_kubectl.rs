//! Volumes end to end with the real kubectl, on the embedded runtime: an
//! emptyDir shared by two containers, a Memory emptyDir past its sizeLimit
//! evicting the pod, hostPath refused outside `--allowed-host-paths` and
//! working inside, and the downward API showing the pod's name and node.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::time::Duration;

use common::cluster::*;
use containers_support::*;
use framework::app::App;
use testkit::{Kubectl, ok};

const T: Duration = Duration::from_secs(90);

fn pod(name: &str, body: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 1\n{body}"
    )
}

fn container(name: &str, script: &str, mounts: &str) -> String {
    format!(
        "  - name: {name}\n    image: {IMAGE}\n    command: [\"/bin/sh\", \"-c\", {script:?}]\n    volumeMounts:\n{mounts}"
    )
}

async fn cluster_allowing(store: &std::path::Path, allowed: &std::path::Path) -> App {
    let mut cfg = app_config(Setup {
        agents: vec![agent(
            "cpus:8;mem:8192;disk:20480;ports:[31000-31010]",
            "rack:r0",
            0,
        )],
        ..Setup::default()
    });
    cfg.executor.args = vec![
        "--container-runtime=embedded".into(),
        format!("--image-store={}", store.display()),
        format!("--allowed-host-paths={}", allowed.display()),
    ];
    App::start(cfg).await.expect("mesopod starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volumes_work_through_kubectl() {
    if !prerequisites(false) {
        return;
    }
    let (_keep, store) = store();
    load_image(&store, IMAGE).await;
    let allowed = tempfile::tempdir().unwrap();
    std::fs::write(allowed.path().join("in.txt"), "from-the-host").unwrap();
    let app = cluster_allowing(&store, allowed.path()).await;
    let k = Kubectl::new(&app.api_url());
    let api = app.api();

    // Two containers exchange a file through an emptyDir.
    let shared = "    - name: shared\n      mountPath: /data\n";
    let yaml = pod(
        "share",
        &format!(
            "  volumes:\n  - name: shared\n    emptyDir: {{}}\n  containers:\n{}{}",
            container(
                "writer",
                "echo hello-through-emptydir > /data/.msg && mv /data/.msg /data/msg",
                shared
            ),
            container(
                "reader",
                "while [ ! -f /data/msg ]; do sleep 0.1; done; cat /data/msg",
                shared
            )
        ),
    );
    // A Memory emptyDir past its sizeLimit.
    let fill = pod(
        "fill",
        &format!(
            "  volumes:\n  - name: cache\n    emptyDir:\n      medium: Memory\n      sizeLimit: 1Mi\n  containers:\n{}",
            container(
                "main",
                "dd if=/dev/zero of=/cache/big bs=1024 count=2048; sleep 3600",
                "    - name: cache\n      mountPath: /cache\n"
            )
        ),
    );
    // hostPath outside the allowed prefixes, and inside.
    let outside = pod(
        "outside",
        &format!(
            "  volumes:\n  - name: h\n    hostPath:\n      path: /etc\n  containers:\n{}",
            container(
                "main",
                "cat /h/passwd",
                "    - name: h\n      mountPath: /h\n"
            )
        ),
    );
    let inside = pod(
        "inside",
        &format!(
            "  volumes:\n  - name: h\n    hostPath:\n      path: {}\n      type: Directory\n  containers:\n{}",
            allowed.path().display(),
            container(
                "main",
                "cat /h/in.txt; echo from-the-pod > /h/out.txt",
                "    - name: h\n      mountPath: /h\n"
            )
        ),
    );
    // The downward API.
    let downward = pod(
        "downward",
        &format!(
            "  volumes:\n  - name: info\n    downwardAPI:\n      items:\n      - path: name\n        fieldRef:\n          fieldPath: metadata.name\n      - path: node\n        fieldRef:\n          fieldPath: spec.nodeName\n  containers:\n{}",
            container(
                "main",
                "echo \"$(cat /info/name) on $(cat /info/node)\"",
                "    - name: info\n      mountPath: /info\n"
            )
        ),
    );
    let all = [yaml, fill, outside, inside, downward].join("---\n");
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&all)).await);

    wait_pod(api, "default", "share", T, |p| phase(p) == "Succeeded").await;
    let text = ok(&k.run(&["logs", "share", "-c", "reader"]).await);
    assert!(text.contains("hello-through-emptydir"), "{text}");

    let p = wait_pod(api, "default", "inside", T, |p| phase(p) == "Succeeded").await;
    assert_eq!(phase(&p), "Succeeded");
    assert!(ok(&k.run(&["logs", "inside"]).await).contains("from-the-host"));
    assert_eq!(
        std::fs::read_to_string(allowed.path().join("out.txt")).unwrap(),
        "from-the-pod\n"
    );

    let p = wait_pod(api, "default", "outside", T, |p| phase(p) == "Failed").await;
    let status = format!("{:?}", p.status);
    assert!(status.contains("--allowed-host-paths"), "{status}");

    let p = wait_pod(api, "default", "downward", T, |p| phase(p) == "Succeeded").await;
    let node = p.spec.as_ref().unwrap().node_name.clone().unwrap();
    assert_eq!(
        ok(&k.run(&["logs", "downward"]).await),
        format!("downward on {node}\n")
    );

    let p = wait_pod(api, "default", "fill", T, |p| phase(p) == "Failed").await;
    let s = p.status.unwrap();
    assert_eq!(s.reason.as_deref(), Some("Evicted"), "{s:?}");
    assert_eq!(
        s.message.as_deref().map(str::trim_end),
        Some("Usage of EmptyDir volume \"cache\" exceeds the limit \"1Mi\".")
    );
}
