//! A hung executor is seen (#39 point 4): SIGSTOP an agent's executor, and
//! its Node goes NotReady (`Ready=Unknown`, `NodeStatusUnknown`, the
//! unreachable taint) and its pods' Ready condition False within
//! `--node-monitor-grace-period`; SIGCONT, and both come back. Timings are
//! shortened (the executor reports every second, the grace is 4 s) so the
//! test takes seconds, not a minute.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::faults;

use std::time::Duration;

use apiserver::Api;
use common::cluster::*;
use faults::executor_pids;
use k8s_openapi::api::core::v1::{Node, Pod};
use rustix::process::{Pid, Signal, kill_process};
use testkit::{Kubectl, ok};

const T: Duration = Duration::from_secs(60);

fn condition<'a>(conditions: Option<&'a Vec<impl HasType>>, type_: &str) -> Option<&'a str> {
    conditions?
        .iter()
        .find(|c| c.type_() == type_)
        .map(HasType::status)
}

trait HasType {
    fn type_(&self) -> &str;
    fn status(&self) -> &str;
}

impl HasType for k8s_openapi::api::core::v1::NodeCondition {
    fn type_(&self) -> &str {
        &self.type_
    }
    fn status(&self) -> &str {
        &self.status
    }
}

impl HasType for k8s_openapi::api::core::v1::PodCondition {
    fn type_(&self) -> &str {
        &self.type_
    }
    fn status(&self) -> &str {
        &self.status
    }
}

fn node_ready(n: &Node) -> Option<&str> {
    condition(
        n.status.as_ref().and_then(|s| s.conditions.as_ref()),
        "Ready",
    )
}

fn pod_ready(p: &Pod) -> Option<&str> {
    condition(
        p.status.as_ref().and_then(|s| s.conditions.as_ref()),
        "Ready",
    )
}

/// Awaits the Node for which `pred` holds, watching (no polling).
async fn wait_node(api: &Api, name: &str, pred: impl Fn(&Node) -> bool) -> Node {
    let fut = wait_watched(
        api,
        name,
        |api| api.get_node(name).ok(),
        |api, rv| api.watch_nodes(rv).unwrap(),
        pred,
    );
    tokio::time::timeout(T, fut)
        .await
        .unwrap_or_else(|_| panic!("node {name} did not reach the condition within {T:?}"))
}

fn signal(pid: u32, signal: Signal) {
    kill_process(Pid::from_raw(i32::try_from(pid).unwrap()).unwrap(), signal).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_executor_makes_its_node_not_ready_and_its_pods_not_ready_until_it_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = app_config(Setup {
        agents: vec![agent(
            "cpus:4;mem:8192;disk:20480;ports:[31000-31010]",
            "rack:r0",
            0,
        )],
        data_dir: Some(dir.path().to_path_buf()),
        ..Setup::default()
    });
    cfg.scheduling.node_monitor_grace_period = Duration::from_secs(4);
    cfg.executor
        .args
        .push("--node-status-update-frequency=1secs".into());
    let app = framework::app::App::start(cfg).await.unwrap();
    let k = Kubectl::new(&app.api_url());
    k.apply(&pod_yaml("web", "", "sleep 3600")).await;
    k.apply(&pod_yaml(
        "doomed",
        "  terminationGracePeriodSeconds: 1\n",
        "sleep 3600",
    ))
    .await;
    let web = wait_pod(app.api(), "default", "web", T, |p| {
        pod_ready(p) == Some("True")
    })
    .await;
    wait_pod(app.api(), "default", "doomed", T, |p| {
        pod_ready(p) == Some("True")
    })
    .await;
    let node = web.spec.unwrap().node_name.unwrap();
    // Reporting: Ready, whatever time passes.
    let ready = app.api().get_node(&node).unwrap();
    assert_eq!(node_ready(&ready), Some("True"));

    // The executor's environment names its framework (MESOS_FRAMEWORK_ID).
    let state = app.local().expect("an embedded localmesos").state();
    let framework = state.frameworks[0].id.clone();
    let executors = executor_pids(std::path::Path::new(&framework));
    assert_eq!(executors.len(), 1, "one executor: {executors:?}");
    signal(executors[0], Signal::STOP);
    let quiet = wait_node(app.api(), &node, |n| node_ready(n) == Some("Unknown")).await;
    let ready = quiet.status.as_ref().unwrap().conditions.as_ref().unwrap();
    let ready = ready.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.reason.as_deref(), Some("NodeStatusUnknown"));
    assert_eq!(
        ready.message.as_deref(),
        Some("Kubelet stopped posting node status.")
    );
    let taints = quiet.spec.as_ref().unwrap().taints.as_ref().unwrap();
    assert!(
        taints
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unreachable" && t.effect == "NoSchedule"),
        "{taints:?}"
    );
    let web = wait_pod(app.api(), "default", "web", T, |p| {
        pod_ready(p) == Some("False")
    })
    .await;
    assert_eq!(
        web.status.as_ref().unwrap().phase.as_deref(),
        Some("Running"),
        "the phase stays what the executor last said"
    );
    let described = k.run(&["describe", "pod", "web"]).await;
    let out = String::from_utf8_lossy(&described.stdout);
    assert!(
        out.contains("NodeNotReady") && out.contains("Node is not ready"),
        "{out}"
    );

    // A pod deleted meanwhile stays, terminating, while nothing can say
    // its containers are gone: its grace period (1 s) runs out, and so does
    // the KILL's first answer; it is not removed.
    let doomed_task = app
        .api()
        .get_pod("default", "doomed")
        .unwrap()
        .metadata
        .annotations
        .unwrap()["mesopod.io/task-id"]
        .clone();
    ok(&k.run(&["delete", "pod", "doomed", "--wait=false"]).await);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let doomed = app.api().get_pod("default", "doomed").unwrap();
    assert!(doomed.metadata.deletion_timestamp.is_some());
    let state = app.local().unwrap().state();
    let task = state.task(&doomed_task).expect("its task");
    assert!(!task.state.is_terminal(), "{:?}", task.state);

    // Resumed: the Node is Ready again, and so is the pod.
    signal(executors[0], Signal::CONT);
    let back = wait_node(app.api(), &node, |n| node_ready(n) == Some("True")).await;
    assert!(
        back.spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_none_or(|t| t.iter().all(|t| t.key != "node.kubernetes.io/unreachable")),
        "{:?}",
        back.spec
    );
    wait_pod(app.api(), "default", "web", T, |p| {
        pod_ready(p) == Some("True")
    })
    .await;
    // The executor stops the deleted pod's container; only then is it gone.
    wait_gone(app.api(), "default", "doomed", T).await;
    app.shutdown().await;
}
