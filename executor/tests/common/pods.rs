//! The pod runtime with real processes, and what its tests read back.

use std::path::Path;
use std::time::Duration;

use executor::backoff::Backoff;
use executor::layout::run_log;
use executor::logs::cri::{Stream as LogStream, texts};
use executor::{PodPlan, PodState, PodUpdate, Runtime, RuntimeConfig};
use k8s_openapi::api::core::v1::{ContainerStatus, PodStatus};
use mesos::proto::TaskId;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

/// Bounds every wait on a process in these tests; generous for a loaded CI box.
pub const WAIT: Duration = Duration::from_secs(20);

pub fn runtime(sandbox: &Path) -> (Runtime, UnboundedReceiver<PodUpdate>) {
    Runtime::new(config(sandbox))
}

/// The settings of [`runtime`]: process mode, a short crash-loop back-off.
pub fn config(sandbox: &Path) -> RuntimeConfig {
    RuntimeConfig {
        sandbox: sandbox.to_path_buf(),
        host_ip: "127.0.0.1".into(),
        node_name: "agent-host".into(),
        backoff: Backoff {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(200),
        },
        containers: Default::default(),
        objects: std::sync::Arc::new(executor::objects::NoObjects),
    }
}

pub fn pod(name: &str, restart: &str, containers: Value) -> PodPlan {
    pod_with(
        name,
        json!({"restartPolicy": restart, "containers": containers}),
    )
}

pub fn pod_with(name: &str, spec: Value) -> PodPlan {
    let pod = json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
        "spec": spec,
    });
    PodPlan::from_task_data(Some(&serde_json::to_vec(&pod).unwrap())).unwrap()
}

pub fn sh(name: &str, script: &str) -> Value {
    json!({"name": name, "image": "busybox:1.36", "command": ["/bin/sh", "-c", script]})
}

pub async fn next(rx: &mut UnboundedReceiver<PodUpdate>) -> PodUpdate {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("an update in time")
        .expect("runtime alive")
}

/// Every update up to and including the terminal one.
pub async fn until_terminal(rx: &mut UnboundedReceiver<PodUpdate>) -> Vec<PodUpdate> {
    let mut all = Vec::new();
    loop {
        let u = next(rx).await;
        let done = u.state.is_terminal();
        all.push(u);
        if done {
            return all;
        }
    }
}

/// Waits for the first update matching `pred`.
pub async fn until(
    rx: &mut UnboundedReceiver<PodUpdate>,
    pred: impl Fn(&PodUpdate) -> bool,
) -> PodUpdate {
    loop {
        let u = next(rx).await;
        assert!(
            !u.state.is_terminal() || pred(&u),
            "ended before the condition: {u:?}"
        );
        if pred(&u) {
            return u;
        }
    }
}

pub fn status(u: &PodUpdate) -> &PodStatus {
    u.status.as_ref().unwrap()
}

pub fn container<'a>(s: &'a PodStatus, name: &str) -> &'a ContainerStatus {
    s.container_statuses
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.name == name)
        .unwrap()
}

/// One stream's text over every run of the container, oldest first.
pub fn read_log(sandbox: &Path, pod: &str, container: &str, stream: LogStream) -> String {
    let uid = format!("uid-{pod}");
    (0..)
        .map(|run| std::fs::read(sandbox.join(run_log("ns", pod, &uid, container, run))))
        .take_while(Result::is_ok)
        .map(|log| texts(&log.unwrap_or_default(), Some(stream)))
        .collect()
}

pub async fn wait_for_file(path: &Path) {
    let what = format!("{} to appear", path.display());
    testkit::wait_until(&what, WAIT, async || path.exists(), |e| *e).await;
}

/// Waits until the container has written to its stdout: its shell runs
/// the script, traps included.
pub async fn wait_for_output(sandbox: &Path, pod: &str, container: &str) {
    let what = format!("output from {pod}/{container}");
    let read = async || read_log(sandbox, pod, container, LogStream::Stdout);
    testkit::wait_until(&what, WAIT, read, |log| !log.is_empty()).await;
}

/// Launches pod `name` whose one container `c` ignores SIGTERM, and returns
/// its task id once it runs and has written its first line.
pub async fn launch_ignoring_term(
    rt: &mut Runtime,
    rx: &mut UnboundedReceiver<PodUpdate>,
    sandbox: &Path,
    name: &str,
    restart: &str,
) -> TaskId {
    let plan = pod(
        name,
        restart,
        json!([sh(
            "c",
            "trap '' TERM; echo up; while true; do sleep 0.05; done"
        )]),
    );
    let task = TaskId::new(format!("t-{name}"));
    rt.launch(task.clone(), plan).unwrap();
    until(rx, |u| u.state == PodState::Running).await;
    wait_for_output(sandbox, name, "c").await;
    task
}
