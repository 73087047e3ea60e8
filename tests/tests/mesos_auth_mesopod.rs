//! mesopod against a Mesos master that authenticates frameworks and
//! executors (localmesos with `--authenticate-frameworks --credentials` and
//! `--authenticate_http_executors --jwt_secret_key`): with the right
//! `--principal`/`--secret-file` it registers and runs a pod (its executor
//! authenticating with the agent's token); with a wrong secret it logs the
//! 401 and why, and retries with backoff, never registering.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::MESOPOD;
use common::cluster::{Setup, app_config, fast_timing, phase, wait_pod};
use k8s_openapi::api::core::v1::Pod;
use localmesos::{AgentConfig, Config, Credentials, LocalMesos, Security};
use tokio::io::{AsyncBufReadExt as _, BufReader};

const PRINCIPAL: &str = "mesopod";
const SECRET: &str = "the-framework-secret";

async fn secured_cluster() -> LocalMesos {
    LocalMesos::start(Config {
        agents: vec![
            AgentConfig::from_flags("cpus:4;mem:4096;ports:[31000-31010]", "", 0).unwrap(),
        ],
        timing: fast_timing(),
        security: Security {
            framework_credentials: Some(Credentials::single(PRINCIPAL, SECRET)),
            jwt_secret_key: Some(b"agent signing key".to_vec().into()),
            authenticate_http_executors: true,
            ..Security::default()
        },
        ..Config::default()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn with_the_right_secret_mesopod_registers_and_runs_a_pod() {
    let cluster = secured_cluster().await;
    let tmp = tempfile::tempdir().unwrap();
    let secret_file = tmp.path().join("secret");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let mut cfg = app_config(Setup {
        masters: vec![cluster.master_url().to_owned()],
        ..Setup::default()
    });
    cfg.framework.principal = Some(PRINCIPAL.into());
    cfg.hardening.mesos.credential =
        Some(mesos::client::Credential::from_secret_file(PRINCIPAL, &secret_file).unwrap());
    let app = framework::app::App::start(cfg).await.unwrap();
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "authenticated", "namespace": "default"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox", "command": ["/bin/sh", "-c", "sleep 30"]}]}
    }))
    .unwrap();
    app.api().create_pod("default", pod).await.unwrap();
    wait_pod(
        app.api(),
        "default",
        "authenticated",
        Duration::from_secs(60),
        |p| phase(p) == "Running",
    )
    .await;
    let state = cluster.state_json();
    assert_eq!(state["frameworks"][0]["principal"], PRINCIPAL);
    app.shutdown().await;
    cluster.shutdown().await;
}

#[tokio::test]
async fn with_a_wrong_secret_mesopod_logs_the_401_and_retries_with_backoff() {
    let cluster = secured_cluster().await;
    let tmp = tempfile::tempdir().unwrap();
    let secret_file = tmp.path().join("secret");
    std::fs::write(&secret_file, "not-the-secret").unwrap();
    let mut child = testkit::ProcessGuard::spawn(
        tokio::process::Command::new(MESOPOD)
            .args([
                "scheduler",
                "--listen",
                "127.0.0.1:0",
                "--principal",
                PRINCIPAL,
            ])
            .arg("--master")
            .arg(cluster.master_url())
            .arg("--secret-file")
            .arg(&secret_file)
            .arg("--data-dir")
            .arg(tmp.path().join("data"))
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    )
    .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut refusals = Vec::new();
    let mut seen = Vec::new();
    let got = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            seen.push(line.clone());
            if line.contains("401 Unauthorized") && line.contains("reconnecting") {
                refusals.push((Instant::now(), line));
                if refusals.len() == 3 {
                    return true;
                }
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(got, "three 401s not logged:\n{}", seen.join("\n"));
    let why = &refusals[0].1;
    assert!(why.contains("reconnecting"), "{why}");
    assert!(why.contains("mesos-master-scheduler"), "{why}");
    assert!(
        !why.contains("not-the-secret"),
        "the secret is never logged"
    );
    // Backoff: the gaps between attempts do not shrink, and the first is
    // mesopod's reconnect floor (1 s) or more.
    let gap1 = refusals[1].0 - refusals[0].0;
    let gap2 = refusals[2].0 - refusals[1].0;
    assert!(gap1 >= Duration::from_millis(800), "{gap1:?}");
    assert!(
        gap2 + Duration::from_millis(200) >= gap1,
        "{gap1:?} then {gap2:?}"
    );
    assert!(cluster.state().frameworks.is_empty(), "never registered");
    drop(child);
    cluster.shutdown().await;
}
