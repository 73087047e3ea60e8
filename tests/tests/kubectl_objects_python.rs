//! The official Kubernetes Python client (pip `kubernetes`) creates and reads a
//! ConfigMap and a Secret through the shim. Skipped with a message when the client is
//! not installed (`.ci/install-python-kubernetes.sh`), unless `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::shim::*;

fn client_available() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import kubernetes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_creates_and_reads_a_config_map_and_a_secret() {
    if !client_available() {
        let msg =
            "the Python kubernetes client is not installed (run .ci/install-python-kubernetes.sh)";
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{msg}: required in CI"
        );
        eprintln!("\n!!!!!!!! SKIPPED Python client test: {msg} !!!!!!!!\n");
        return;
    }
    let server = Server::start().await;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/kubectl_objects_python.py"
    );
    let run = tokio::process::Command::new("python3")
        .arg(script)
        .arg(&server.url)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the script finishes within a minute")
        .unwrap();
    assert!(
        out.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
    let cm: serde_json::Value = reqwest::get(format!(
        "{}/api/v1/namespaces/default/configmaps/py-settings",
        server.url
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    assert_eq!(cm["metadata"]["labels"]["made-by"], "python", "{cm}");
    server.stop().await;
}
