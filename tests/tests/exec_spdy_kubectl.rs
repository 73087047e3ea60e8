//! Issue #19, `kubectl exec` over SPDY/3.1 end to end, on the embedded
//! runtime: kubectl 1.27 and 1.29 (SPDY by default) and 1.33 with
//! `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false` run `sh -c 'echo hi; exit 3'`,
//! print `hi` and exit 3; `exec -i` passes piped stdin through to EOF.
//!
//! Needs root and busybox-static: fails under CI=true without them, skipped
//! with a message elsewhere.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;
use crate::spdy_support;

use std::time::Duration;

use common::cluster::*;
use containers_support::*;
use testkit::{Kubectl, ok};

const T: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exec_over_spdy_prints_and_exits_with_the_code() {
    if !prerequisites(false) {
        return;
    }
    let (_keep, store) = store();
    load_image(&store, IMAGE).await;
    let app = cluster("embedded", &store).await;
    let k = Kubectl::new(&app.api_url());
    let yaml = spdy_support::pod("box", IMAGE, "exec sleep 3600");
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    let up = wait_pod(app.api(), "default", "box", T, |p| phase(p) != "Pending").await;
    assert_eq!(phase(&up), "Running", "{:?}", up.status);

    for (version, websockets_off) in [("1.27", false), ("1.29", false), ("1.33", true)] {
        let wrapper = tempfile::tempdir().unwrap();
        let mut program = spdy_support::kubectl(version);
        if websockets_off {
            program = spdy_support::with_websockets_off(
                wrapper.path(),
                &program,
                "KUBECTL_REMOTE_COMMAND_WEBSOCKETS",
            );
        }
        let k = Kubectl::new(&app.api_url()).program(&program);
        let out = k
            .run(&[
                "exec",
                "box",
                "--",
                "sh",
                "-c",
                "echo hi; echo oops >&2; exit 3",
            ])
            .await;
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(stdout, "hi\n", "kubectl {version}: {stderr}");
        assert!(stderr.contains("oops"), "kubectl {version}: {stderr}");
        assert_eq!(out.status.code(), Some(3), "kubectl {version}: {stderr}");

        let input = "line one\nline two\n";
        let piped = k
            .run_stdin(
                &["exec", "-i", "box", "--", "sh", "-c", "cat; echo done"],
                Some(input),
            )
            .await;
        assert_eq!(
            String::from_utf8_lossy(&ok_output(&piped)),
            format!("{input}done\n"),
            "kubectl {version}"
        );
    }
}

fn ok_output(out: &std::process::Output) -> Vec<u8> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout.clone()
}
