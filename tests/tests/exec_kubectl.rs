//! `kubectl exec` and `kubectl cp` end to end with the real kubectl (1.30 and 1.33,
//! WebSocket `v5.channel.k8s.io`), through the API shim, the pod's executor's
//! streaming endpoint and the embedded runtime's `exec`: output and exit code, stdin,
//! a tty of the size the terminal has, `cp` both ways, the container's user, and a
//! large output through a slow reader. The executor's endpoint refuses a request
//! without the shim's credential.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::time::Duration;

use common::cluster::{phase, wait_pod};
use containers_support::*;
use testkit::{Kubectl, ok};

const T: Duration = Duration::from_secs(60);
const KUBECTLS: [&str; 2] = [
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.30",
    common::KUBECTL_133,
];

fn sleeper(name: &str, security: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {IMAGE}\n    command: [\"/bin/sh\", \"-c\", \"sleep 3600\"]\n{security}"
    )
}

fn text(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_exec_and_cp_reach_the_container() {
    if !prerequisites(false) {
        return;
    }
    let (_keep, store) = store();
    load_image(&store, IMAGE).await;
    let app = cluster("embedded", &store).await;
    let server = app.api_url();
    let k = Kubectl::new(&server);
    k.apply(&sleeper("shell", "")).await;
    k.apply(&sleeper(
        "as-user",
        "    securityContext:\n      runAsUser: 1000\n      runAsGroup: 1000\n",
    ))
    .await;
    for name in ["shell", "as-user"] {
        wait_pod(app.api(), "default", name, T, |p| phase(p) == "Running").await;
    }

    for program in KUBECTLS {
        let k = Kubectl::new(&server).program(program);
        // Output and the exit code.
        let out = k
            .run(&[
                "exec",
                "shell",
                "--",
                "sh",
                "-c",
                "echo hi; echo oops >&2; exit 3",
            ])
            .await;
        assert_eq!(text(&out), "hi\n", "{program}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("oops"),
            "{program}: {out:?}"
        );
        assert_eq!(out.status.code(), Some(3), "{program}: {out:?}");

        // stdin, to its end.
        let out = k
            .run_stdin(
                &[
                    "exec",
                    "-i",
                    "shell",
                    "--",
                    "sh",
                    "-c",
                    "tr a-z A-Z; echo done",
                ],
                Some("hello from stdin\n"),
            )
            .await;
        assert_eq!(text(&out), "HELLO FROM STDIN\ndone\n", "{program}: {out:?}");
        assert!(out.status.success(), "{program}: {out:?}");

        // The container's namespaces and user.
        let out = k
            .run(&[
                "exec",
                "as-user",
                "--",
                "sh",
                "-c",
                "id -u; id -g; hostname; cat /proc/1/comm; cat /etc/only-in-image",
            ])
            .await;
        assert_eq!(
            text(&out),
            format!("1000\n1000\nas-user\nsleep\n{IMAGE_FILE_TEXT}"),
            "{program}: {out:?}"
        );

        // A tty, sized as kubectl's terminal (run under `script`, which gives it one).
        let cmd = format!(
            "stty cols 91 rows 17; {program} --server={server} exec -ti shell -- sh -c 'stty size; test -t 0 && echo on-a-tty'"
        );
        let out = tokio::process::Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .env("HOME", std::env::temp_dir())
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .unwrap();
        let shown = text(&out);
        assert!(shown.contains("17 91"), "{program}: {shown:?} {out:?}");
        assert!(shown.contains("on-a-tty"), "{program}: {shown:?}");

        // cp in and out (tar over exec).
        let dir = tempfile::tempdir().unwrap();
        let local = dir.path().join("in.txt");
        std::fs::write(&local, "copied in\n").unwrap();
        ok(&k
            .run(&["cp", local.to_str().unwrap(), "shell:/tmp/in.txt"])
            .await);
        let out = k.run(&["exec", "shell", "--", "cat", "/tmp/in.txt"]).await;
        assert_eq!(text(&out), "copied in\n", "{program}: {out:?}");
        let back = dir.path().join("back.txt");
        ok(&k
            .run(&["cp", "shell:/tmp/in.txt", back.to_str().unwrap()])
            .await);
        assert_eq!(std::fs::read_to_string(&back).unwrap(), "copied in\n");
    }

    // kubectl 1.27 speaks SPDY for exec: it works, or it is told clearly why not.
    let out = Kubectl::new(&server)
        .program("/usr/lib/google-cloud-sdk/bin/kubectl.1.27")
        .run(&["exec", "shell", "--", "echo", "old"])
        .await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        text(&out) == "old\n" || err.contains("SPDY is not supported yet"),
        "{out:?}"
    );

    // 50 MB through kubectl into a slow reader: it completes, and the shim's memory
    // does not grow by the output (the streams are bounded both ways).
    let before = rss_kib();
    let mut child = k.start(
        &[
            "exec",
            "shell",
            "--",
            "sh",
            "-c",
            "head -c 52428800 /dev/zero",
        ],
        std::process::Stdio::piped(),
        std::process::Stdio::piped(),
    );
    let mut stdout = child.child.stdout.take().unwrap();
    let mut total = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    let mut peak = before;
    loop {
        use tokio::io::AsyncReadExt as _;
        let n = stdout.read(&mut buf).await.unwrap();
        if n == 0 {
            break;
        }
        total += n;
        if total % (4 << 20) < n {
            // A slow reader: the writer has to wait for it.
            tokio::time::sleep(Duration::from_millis(20)).await;
            peak = peak.max(rss_kib());
        }
    }
    let status = child.child.wait().await.unwrap();
    assert!(status.success());
    assert_eq!(total, 52_428_800);
    assert!(
        peak.saturating_sub(before) < 40 * 1024,
        "the test process (shim and framework) grew from {before} KiB to {peak} KiB"
    );

    // The executor's endpoint, as recorded on the Node, refuses a request without the
    // shim's credential.
    let node = app.api().list_nodes("", "").unwrap().items.remove(0);
    let port = node
        .status
        .and_then(|s| s.daemon_endpoints)
        .and_then(|d| d.kubelet_endpoint)
        .map(|e| e.port)
        .expect("the Node records the executor's streaming port");
    let out = tokio::process::Command::new("curl")
        .args([
            "-k",
            "-s",
            "--http1.1",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            "Connection: Upgrade",
            "-H",
            "Upgrade: websocket",
            "-H",
            "Sec-WebSocket-Version: 13",
            "-H",
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
            &format!("https://127.0.0.1:{port}/exec/default/shell/main?command=id&stdout=1"),
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(text(&out), "401", "{out:?}");
}

/// This process' resident memory.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}
