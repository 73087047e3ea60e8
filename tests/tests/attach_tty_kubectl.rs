//! `kubectl attach -it` to a `tty: true, stdin: true, stdinOnce: true`
//! busybox `sh` on the embedded runtime (kubectl 1.30 and 1.33 over
//! WebSocket; 1.27 and 1.29 over SPDY/3.1, whose resize is a stream of its
//! own) and on runc and in process mode (1.33), as
//! `kubectl run -it` leaves one: kubectl runs on a terminal of its own
//! (under `script`); a command typed there runs in the container and its
//! output comes back; the container's terminal has kubectl's size, and
//! when kubectl's terminal is resized `stty size` in the container shows
//! the new size; `exit` ends the shell, the pod succeeds, kubectl exits 0,
//! and `kubectl logs` shows the session as the terminal printed it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::cluster::{phase, wait_pod};
use containers_support::*;
use testkit::{Kubectl, ok, wait_until};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const T: Duration = Duration::from_secs(90);
const KUBECTL_127: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.27";
const KUBECTL_129: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.29";
const KUBECTL_130: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.30";

fn pod(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {IMAGE}\n    stdin: true\n    stdinOnce: true\n    tty: true\n    command: [\"/bin/sh\"]\n"
    )
}

/// What a running `script` has printed so far.
#[derive(Clone, Default)]
struct Screen(Arc<Mutex<String>>);

impl Screen {
    fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }
}

async fn shows(screen: &Screen, what: &str, needle: &str) {
    wait_until(what, T, async || screen.text(), |t| t.contains(needle)).await;
}

/// Types `line` at the terminal until the screen shows `needle`.
async fn ask(keys: &mut tokio::process::ChildStdin, screen: &Screen, line: &str, needle: &str) {
    wait_until(
        needle,
        T,
        async || {
            keys.write_all(format!("{line}\r").as_bytes())
                .await
                .unwrap();
            // The answer needs a round trip through the container.
            tokio::time::sleep(Duration::from_millis(500)).await;
            screen.text()
        },
        |t| t.contains(needle),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_attach_it_drives_a_containers_terminal() {
    if !prerequisites(false) {
        return;
    }
    let kubectls = [(KUBECTL_130, "tty-130"), (common::KUBECTL_133, "tty-133")];
    scenario("embedded", &kubectls).await;
}

/// kubectl before 1.30 attaches over SPDY/3.1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_attach_it_over_spdy_drives_a_containers_terminal() {
    if !prerequisites(false) {
        return;
    }
    let kubectls = [(KUBECTL_127, "spdy-tty-127"), (KUBECTL_129, "spdy-tty-129")];
    scenario("embedded", &kubectls).await;
}

/// runc makes the terminal itself and sends it over the console socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_attach_it_drives_a_runc_containers_terminal() {
    if !prerequisites(true) {
        return;
    }
    scenario(RUNC, &[(common::KUBECTL_133, "tty-runc")]).await;
}

/// Process mode: the pty's slave is the host process' stdio.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_attach_it_drives_a_process_modes_terminal() {
    scenario("process", &[(common::KUBECTL_133, "tty-process")]).await;
}

async fn scenario(runtime: &str, kubectls: &[(&str, &str)]) {
    let (_keep, store) = store();
    load_image(&store, IMAGE).await;
    let app = cluster(runtime, &store).await;
    let server = app.api_url();
    let k = Kubectl::new(&server);
    for &(program, name) in kubectls {
        k.apply(&pod(name)).await;
        wait_pod(app.api(), "default", name, T, |p| phase(p) == "Running").await;
        let dir = tempfile::tempdir().unwrap();
        let (go, resized) = (dir.path().join("go"), dir.path().join("resized"));
        // kubectl's terminal is 91x17; once the test says so, a helper
        // on it resizes it to 120x40 (a background job of `sh -c` has
        // /dev/null as stdin, hence /dev/tty; kubectl gets SIGWINCH and sends the
        // size on channel 4).
        let cmd = format!(
            "stty cols 91 rows 17; (while [ ! -e {go} ]; do sleep 0.1; done; stty cols 120 rows 40 </dev/tty; touch {resized}) & {program} --server={server} attach -it {name} -c main",
            go = go.display(),
            resized = resized.display(),
        );
        let mut script = tokio::process::Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .env("HOME", dir.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut keys = script.stdin.take().unwrap();
        let mut out = script.stdout.take().unwrap();
        let screen = Screen::default();
        let reader = {
            let screen = screen.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = out.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    screen
                        .0
                        .lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            })
        };
        shows(
            &screen,
            "kubectl's hint",
            "If you don't see a command prompt",
        )
        .await;
        // The command's output, not its echo: `$((6*7))` is 42 only once
        // run. The first size reaches the container beside the first
        // keys, so the shell is asked until it shows.
        ask(
            &mut keys,
            &screen,
            "echo \"size=$(stty size) answer=$((6*7))\"",
            "size=17 91 answer=42",
        )
        .await;
        std::fs::write(&go, "").unwrap();
        wait_until("the resize", T, async || resized.exists(), |r| *r).await;
        ask(
            &mut keys,
            &screen,
            "echo \"now=$(stty size)\"",
            "now=40 120",
        )
        .await;
        keys.write_all(b"exit\r").await.unwrap();
        let status = tokio::time::timeout(T, script.wait())
            .await
            .unwrap()
            .unwrap();
        reader.await.unwrap();
        assert!(status.success(), "{program}: {status:?}\n{}", screen.text());
        wait_pod(app.api(), "default", name, T, |p| phase(p) == "Succeeded").await;
        let log = ok(&k.run(&["logs", name]).await);
        assert!(log.contains("size=17 91 answer=42"), "{program}: {log:?}");
        assert!(log.contains("now=40 120"), "{program}: {log:?}");
    }
    app.shutdown().await;
}
