//! Interop: pymesos (PyPI, JSON over HTTP) runs unchanged against
//! localmesos. Installed by `.ci/install-pymesos.sh`. Skipped, loudly, only
//! when python or pymesos is missing and `CI` is not `true`.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use mesos::proto::TaskState;
use tokio::io::{AsyncBufReadExt as _, BufReader};

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
    let cluster = cluster(vec![agent("cpus:2;mem:1024", false)], fast_timing()).await;
    let addr = cluster.master_addr().to_string();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pymesos_scheduler.py");
    let mut child = tokio::process::Command::new(python())
        .arg(script)
        .arg(&addr)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
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
        let out = child.wait_with_output().await.unwrap();
        panic!(
            "pymesos did not see TASK_FINISHED\nstdout:\n{}\nstderr:\n{}",
            seen.join("\n"),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let seen = seen.join("\n");
    assert!(seen.contains("REGISTERED"), "{seen}");
    assert!(seen.contains("LAUNCHED"), "{seen}");
    assert!(seen.contains("STATE TASK_RUNNING True"), "{seen}");
    // pymesos acknowledged both updates: nothing is owed, the task completed.
    eventually(|| {
        cluster
            .state()
            .task("pymesos-task")
            .is_some_and(|t| t.state == TaskState::TaskFinished && t.unacknowledged_updates == 0)
            && cluster
                .state()
                .frameworks
                .iter()
                .all(|f| f.tasks.is_empty())
    })
    .await;
    drop(stdin);
    let mut rest = Vec::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        rest.push(line);
    }
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("pymesos exits once told to")
        .unwrap();
    assert!(
        out.status.success() && rest.iter().any(|l| l == "DONE"),
        "{:?}\n{rest:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    cluster.shutdown().await;
}
