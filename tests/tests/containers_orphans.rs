//! No orphan runs a second copy: an executor killed with SIGKILL takes its
//! containers with it (the embedded runtime's init dies with its executor;
//! with runc, the next executor on the agent kills what is left), and a
//! recreated pod runs exactly once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod containers_support;

use std::time::Duration;

use common::cluster::*;
use containers_support::*;
use testkit::{Kubectl, ok, wait_until};

const T: Duration = Duration::from_secs(120);
const PODS: usize = 50;

fn sleeper(name: &str, marker: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {IMAGE}\n    command: [\"sleep\", \"3600\"]\n    env:\n    - name: MARKER\n      value: {marker:?}\n    resources:\n      requests:\n        cpu: 10m\n        memory: 8Mi\n"
    )
}

async fn scenario(runtime: &str) {
    let (_keep, store) = store();
    load_image(&store, IMAGE).await;
    let app = cluster(runtime, &store).await;
    let server = app.api_url();
    let k = Kubectl::new(&server);
    let tag = if runtime == "embedded" {
        "embedded"
    } else {
        "runc"
    };
    let first = format!("MARKER=first-{tag}-{}", std::process::id());
    let yaml: String = (0..PODS)
        .map(|i| sleeper(&format!("s{i}"), first.trim_start_matches("MARKER=")))
        .collect::<Vec<_>>()
        .join("---\n");
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    for i in 0..PODS {
        wait_pod(app.api(), "default", &format!("s{i}"), T, |p| {
            phase(p) == "Running"
        })
        .await;
    }
    let runs = wait_until(
        "a process for every pod",
        T,
        async || processes_with_env(&first),
        |p| p.len() >= PODS,
    )
    .await;
    assert_eq!(runs.len(), PODS, "one process per pod");

    let work = app.local().unwrap().work_dir().to_path_buf();
    let executors = executors_under(&work);
    assert_eq!(
        executors.len(),
        1,
        "one executor on the agent: {executors:?}"
    );
    let pid = rustix::process::Pid::from_raw(i32::try_from(executors[0]).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();

    if runtime == "embedded" {
        // Each container's init dies with the executor that started it.
        wait_until(
            "no pod process left",
            T,
            async || processes_with_env(&first),
            |p| p.is_empty(),
        )
        .await;
    }
    for i in 0..PODS {
        wait_pod(app.api(), "default", &format!("s{i}"), T, |p| {
            phase(p) == "Failed"
        })
        .await;
    }
    // Each pod's status names its killed container, as kubectl shows it.
    let pods: serde_json::Value =
        serde_json::from_str(&ok(&k.run(&["get", "pods", "-o", "json"]).await)).unwrap();
    let items = pods["items"].as_array().unwrap();
    assert_eq!(items.len(), PODS);
    for pod in items {
        let name = &pod["metadata"]["name"];
        assert_eq!(pod["status"]["reason"], "ExecutorTerminated", "{name}");
        let c = &pod["status"]["containerStatuses"][0];
        assert_eq!(c["name"], "main", "{name}");
        assert_eq!(c["ready"], false, "{name}");
        let t = &c["state"]["terminated"];
        assert_eq!(t["reason"], "Error", "{name}: {c}");
        assert_eq!(t["exitCode"], 137, "{name}: {c}");
        assert_eq!(t["signal"], 9, "{name}: {c}");
        let message = t["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with("The container was killed with its executor (Executor")
                && message.ends_with("no executor adopted it"),
            "{name}: {message}"
        );
        assert!(
            t["startedAt"].is_string() && t["finishedAt"].is_string(),
            "{name}: {c}"
        );
    }

    // The same pod again: it runs once, and nothing of the first run is left.
    ok(&k
        .run(&["delete", "pod", "s0", "--wait=true", "--timeout=60s"])
        .await);
    let again = format!("MARKER=again-{tag}-{}", std::process::id());
    ok(&k
        .run_stdin(
            &["apply", "-f", "-"],
            Some(&sleeper("s0", again.trim_start_matches("MARKER="))),
        )
        .await);
    wait_pod(app.api(), "default", "s0", T, |p| phase(p) == "Running").await;
    wait_until(
        "the first run's processes gone",
        T,
        async || processes_with_env(&first),
        |p| p.is_empty(),
    )
    .await;
    // Running is reported once the runtime's `start` returned, as kubelet does
    // after StartContainer; the command's execve may follow a moment later.
    let runs = wait_until(
        "the recreated pod's process",
        T,
        async || processes_with_env(&again),
        |p| !p.is_empty(),
    )
    .await;
    assert_eq!(
        runs.len(),
        1,
        "the recreated pod runs exactly once: {runs:?}"
    );
    // The dead executor's pod sandboxes went with it: only the new pod's is left.
    let left = sandboxes_left(&work);
    assert_eq!(left.len(), 1, "{left:?}");
    // So did its containers' root filesystems, mounted in the agent's
    // mount namespace: only the new pod's is left.
    let rootfs = rootfs_mounts_under(&work);
    assert_eq!(rootfs.len(), 1, "{rootfs:?}");

    app.shutdown().await;
    wait_until(
        "no process after shutdown",
        T,
        async || processes_with_env(&again),
        |p| p.is_empty(),
    )
    .await;
}

/// The overlay mounts (containers' root filesystems) under `work` in this
/// process' mount namespace, the agent's.
fn rootfs_mounts_under(work: &std::path::Path) -> Vec<String> {
    let work = work.display().to_string();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| {
            let point = l.split(' ').nth(4)?;
            let kind = l.split(" - ").nth(1)?.split(' ').next()?;
            (kind == "overlay" && point.starts_with(&work)).then(|| point.to_owned())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_executor_leaves_no_container_on_the_embedded_runtime() {
    testkit::init_crypto();
    if prerequisites(false) {
        scenario("embedded").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_executor_leaves_no_container_on_runc() {
    testkit::init_crypto();
    if prerequisites(true) {
        scenario(RUNC).await;
    }
}
