//! Interop: pymesos (PyPI, JSON over HTTP) runs unchanged against
//! localmesos. Installed by `.ci/install-pymesos.sh`. Skipped, loudly, only
//! when python or pymesos is missing and `CI` is not `true`.
#![allow(clippy::unwrap_used)]

use std::process::Stdio;
use std::time::Duration;

use localmesos::{AgentConfig, Config, LocalMesos, Timing};
use mesos::proto::TaskState;
use testkit::{ProcessGuard, wait_until};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};

/// One real agent, and timings that never make the test sleep through
/// Mesos' production intervals.
async fn cluster() -> LocalMesos {
    LocalMesos::start(Config {
        agents: vec![AgentConfig::from_flags("cpus:2;mem:1024", "", 0).unwrap()],
        timing: Timing {
            allocation_interval: Duration::from_millis(50),
            status_update_retry_min: Duration::from_millis(300),
            status_update_retry_max: Duration::from_secs(2),
            executor_shutdown_grace: Duration::from_millis(300),
            ..Timing::default()
        },
        ..Config::default()
    })
    .await
    .unwrap()
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

fn pymesos_available() -> bool {
    std::process::Command::new(python())
        .args(["-c", "import pymesos, addict"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test]
async fn pymesos_subscribes_launches_a_command_task_and_acknowledges_its_updates() {
    if !pymesos_available() {
        let msg = "pymesos is not installed (run .ci/install-pymesos.sh)";
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{msg}: required in CI"
        );
        eprintln!("\n!!!!!!!! SKIPPED pymesos interop test: {msg} !!!!!!!!\n");
        return;
    }
    let cluster = cluster().await;
    let addr = cluster.master_addr().to_string();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pymesos_scheduler.py");
    let mut child = ProcessGuard::spawn(
        tokio::process::Command::new(python())
            .arg(script)
            .arg(&addr)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut stderr_pipe = child.stderr.take().unwrap();
    let stderr = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr_pipe.read_to_string(&mut text).await;
        text
    });
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    let finished = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            seen.push(line.clone());
            if line.starts_with("STATE TASK_FINISHED") {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    if !finished {
        drop(stdin);
        child.wait().await.unwrap();
        panic!(
            "pymesos did not see TASK_FINISHED\nstdout:\n{}\nstderr:\n{}",
            seen.join("\n"),
            stderr.await.unwrap()
        );
    }
    let seen = seen.join("\n");
    assert!(seen.contains("REGISTERED"), "{seen}");
    assert!(seen.contains("LAUNCHED"), "{seen}");
    assert!(seen.contains("STATE TASK_RUNNING True"), "{seen}");
    // pymesos acknowledged both updates: nothing is owed, the task completed.
    wait_until(
        "the task finished, acknowledged and completed",
        Duration::from_secs(10),
        async || {
            let state = cluster.state();
            let task = state
                .task("pymesos-task")
                .map(|t| (t.state, t.unacknowledged_updates));
            let live: usize = state.frameworks.iter().map(|f| f.tasks.len()).sum();
            (task, live)
        },
        |(task, live)| *task == Some((TaskState::TaskFinished, 0)) && *live == 0,
    )
    .await;
    drop(stdin);
    let mut rest = Vec::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        rest.push(line);
    }
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("pymesos exits once told to")
        .unwrap();
    assert!(
        status.success() && rest.iter().any(|l| l == "DONE"),
        "{status:?}\n{rest:?}\n{}",
        stderr.await.unwrap()
    );
    cluster.shutdown().await;
}
