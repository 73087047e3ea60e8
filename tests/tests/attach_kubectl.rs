//! `kubectl attach -i` end to end (kubectl 1.30 and 1.33 over WebSocket
//! v5; 1.27 and 1.29 over SPDY/3.1, their default for attach):
//! a busybox `sh` with `stdin: true, stdinOnce: true` on the embedded
//! runtime reads what kubectl pipes in and answers on stdout; kubectl's
//! stdin EOF closes the container's stdin (stdinOnce), the shell exits and
//! kubectl with it, status 0. Its log holds the whole conversation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::time::Duration;

use common::cluster::{phase, wait_pod};
use containers_support::*;
use testkit::{ok, stderr, wait_until};

const T: Duration = Duration::from_secs(90);
const KUBECTL_130: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.30";
const KUBECTL_127: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.27";
const KUBECTL_129: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.29";

fn pod(name: &str) -> String {
    let script = "echo ready; while read l; do echo \"got $l\"; done; echo bye";
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {IMAGE}\n    stdin: true\n    stdinOnce: true\n    command: [\"/bin/sh\", \"-c\", {script:?}]\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_attach_talks_to_a_containers_stdin_and_stdout() {
    if !prerequisites(false) {
        return;
    }
    let (_keep, store) = store();
    load_image(&store, IMAGE).await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let app = common::secure::with_embedded_agent(dir.path(), &store, &[]).await;
    let kc = format!("--kubeconfig={}", data.join("kubeconfig").display());
    for (program, name) in [
        (KUBECTL_130, "att-130"),
        (common::KUBECTL_133, "att-133"),
        (KUBECTL_127, "att-127"),
        (KUBECTL_129, "att-129"),
    ] {
        let k = common::kubectl(program, &app.api_url());
        let admin = async |args: &[&str], stdin: Option<&str>| {
            let mut all = vec![kc.as_str()];
            all.extend_from_slice(args);
            k.run_stdin(&all, stdin).await
        };
        ok(&admin(&["apply", "-f", "-"], Some(&pod(name))).await);
        wait_pod(app.api(), "default", name, T, |p| phase(p) == "Running").await;
        wait_until(
            "the shell's first line",
            T,
            async || {
                String::from_utf8_lossy(&admin(&["logs", name], None).await.stdout).into_owned()
            },
            |l| l.contains("ready"),
        )
        .await;
        let attached = admin(
            &["attach", "-i", name, "-c", "main"],
            Some("hello\nworld\n"),
        )
        .await;
        let out = ok(&attached);
        assert!(
            out.contains("got hello\n") && out.contains("got world\n"),
            "{program}: {out}\n{}",
            stderr(&attached)
        );
        wait_pod(app.api(), "default", name, T, |p| phase(p) == "Succeeded").await;
        let log = ok(&admin(&["logs", name], None).await);
        assert_eq!(log, "ready\ngot hello\ngot world\nbye\n", "{program}");
    }
    app.shutdown().await;
}
