//! Interop: pymesos (PyPI, JSON over HTTP) runs unchanged against
//! localmesos. Installed by `.ci/install-pymesos.sh`. Skipped, loudly, only
//! when python or pymesos is missing and `CI` is not `true`.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::pymesos;
use localmesos::{AgentConfig, Config, LocalMesos, Timing};
use mesos::proto::TaskState;
use testkit::wait_until;

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

#[tokio::test]
async fn pymesos_subscribes_launches_a_command_task_and_acknowledges_its_updates() {
    if !pymesos::available_or_skip("pymesos interop test") {
        return;
    }
    let cluster = cluster().await;
    let mut script =
        pymesos::Script::start("pymesos_scheduler.py", &[cluster.master_addr().to_string()]);
    let finished = script
        .until(Duration::from_secs(60), |l| {
            l.starts_with("STATE TASK_FINISHED").then_some(true)
        })
        .await;
    if !finished {
        let seen = script.seen.join("\n");
        let (_, _, stderr) = script.finish().await;
        panic!("pymesos did not see TASK_FINISHED\nstdout:\n{seen}\nstderr:\n{stderr}");
    }
    let seen = script.seen.join("\n");
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
    let (status, rest, stderr) = script.finish().await;
    assert!(
        status.success() && rest.iter().any(|l| l == "DONE"),
        "{status:?}\n{rest:?}\n{stderr}"
    );
    cluster.shutdown().await;
}
