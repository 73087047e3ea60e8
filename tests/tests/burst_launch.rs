//! A burst of creates loses nothing: 5,000 pods created at once by 16
//! clients over HTTP all reach Running, each launched once, on the embedded
//! cluster and on a standalone `mesopod localmesos`.
//!
//! Two large agents make each offer carry about a thousand pods of a
//! round, more than one ACCEPT may: before the launch split its ACCEPTs,
//! the master refused them (413) and every pod in them ended Failed
//! (TaskDropped). Agents are simulated (their tasks run at once and use no
//! process), so the test measures the launch, not 5,000 processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::{HashMap, HashSet};
use std::process::{Command, Stdio};
use std::time::Duration;

use apiserver::{Api, EventKind};
use common::cluster::*;
use futures::StreamExt;
use mesos::proto::json::WireEnum;
use testkit::ProcessGuard;

const PODS: usize = 5_000;
const CLIENTS: usize = 16;
const T: Duration = Duration::from_secs(300);
const AGENT: &str = "cpus:100;mem:200000;disk:20480;ports:[31000-31010]";

fn pod_json(name: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        // `kubectl apply` keeps the whole manifest in an annotation: pods
        // of real manifests are a few KiB, and a thousand of them outgrow
        // the master's 4 MiB limit on a call.
        "metadata": {"name": name, "labels": {"burst": "yes"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "x".repeat(3000)}},
        "spec": {"containers": [{"name": "main", "image": "busybox",
            "command": ["sleep", "3600"],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]},
    })
}

/// Creates the pods from `CLIENTS` concurrent clients, all at once.
async fn create_burst(api_url: &str) {
    let url = format!("{api_url}/api/v1/namespaces/default/pods");
    let clients = (0..CLIENTS).map(|c| {
        let url = url.clone();
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            let creates = (c..PODS).step_by(CLIENTS).map(|i| {
                let (http, url) = (&http, &url);
                async move {
                    let body = pod_json(&format!("burst-{i}"));
                    let res = http.post(url).json(&body).send().await.expect("create");
                    let status = res.status();
                    assert!(
                        status.is_success(),
                        "{status}: {}",
                        res.text().await.unwrap()
                    );
                }
            });
            futures::stream::iter(creates)
                .buffer_unordered(32)
                .collect::<Vec<()>>()
                .await;
        })
    });
    for client in futures::future::join_all(clients).await {
        client.unwrap();
    }
}

/// Awaits every burst pod Running (watching, no polling); fails on the
/// first that fails. Returns each pod's task id.
async fn all_running(api: &Api) -> HashMap<String, String> {
    let fut = async {
        let mut running = HashMap::new();
        let mut watch = api.watch_pods(Some("default"), 0).unwrap();
        while let Some(ev) = watch.next().await {
            let ev = ev.expect("watch");
            let pod = ev.object;
            let name = pod.metadata.name.clone().unwrap_or_default();
            if ev.kind == EventKind::Deleted || !name.starts_with("burst-") {
                continue;
            }
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            assert_ne!(phase, Some("Failed"), "{name} failed: {:?}", pod.status);
            if phase == Some("Running") {
                let task = pod.metadata.annotations.as_ref().unwrap()["mesopod.io/task-id"].clone();
                running.insert(name, task);
                if running.len() == PODS {
                    return running;
                }
            }
        }
        panic!("the watch ended");
    };
    tokio::time::timeout(T, fut)
        .await
        .unwrap_or_else(|_| panic!("not every pod reached Running within {T:?}"))
}

/// Each pod ran exactly one task, and the master saw no other task.
fn launched_once(running: &HashMap<String, String>, master_tasks: &[(String, String)]) {
    let tasks: HashSet<&str> = running.values().map(String::as_str).collect();
    assert_eq!(tasks.len(), PODS, "one task per pod");
    assert_eq!(
        master_tasks.len(),
        PODS,
        "the master launched {} tasks for {PODS} pods",
        master_tasks.len()
    );
    for (id, state) in master_tasks {
        assert!(tasks.contains(id.as_str()), "a task no pod names: {id}");
        assert_eq!(state, "TASK_RUNNING", "{id}");
    }
}

fn big_agents() -> Vec<localmesos::AgentConfig> {
    (0..2)
        .map(|i| agent(AGENT, "rack:r{i}", i).simulated(None))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_5000_creates_all_run_once_on_the_embedded_cluster() {
    let app = start(Setup {
        agents: big_agents(),
        ..Setup::default()
    })
    .await;
    create_burst(&app.api_url()).await;
    let running = all_running(app.api()).await;
    let state = app.local().expect("an embedded localmesos").state();
    let tasks: Vec<(String, String)> = state
        .frameworks
        .iter()
        .flat_map(|f| f.tasks.iter().chain(&f.completed_tasks))
        .map(|t| (t.id.clone(), t.state.wire_name().to_owned()))
        .collect();
    launched_once(&running, &tasks);
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_5000_creates_all_run_once_on_a_standalone_localmesos() {
    let mesos = ProcessGuard::spawn(
        Command::new(common::MESOPOD)
            .args([
                "localmesos",
                "--listen",
                "127.0.0.1:0",
                "--agents",
                "2",
                "--simulate",
                "--resources",
                AGENT,
                "--allocation-interval",
                "100ms",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    )
    .expect("localmesos starts")
    .grace(Duration::from_secs(3));
    let (_mesos, master) = common::restart::read_url(mesos, &["localmesos"], "http://");
    let app = start(Setup {
        agents: Vec::new(),
        masters: vec![master.clone()],
        ..Setup::default()
    })
    .await;
    create_burst(&app.api_url()).await;
    let running = all_running(app.api()).await;
    let state: serde_json::Value = reqwest::get(format!("{master}/state"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let tasks: Vec<(String, String)> = state["frameworks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| {
            let live = f["tasks"].as_array().cloned().unwrap_or_default();
            let done = f["completed_tasks"].as_array().cloned().unwrap_or_default();
            live.into_iter().chain(done)
        })
        .map(|t| {
            (
                t["id"].as_str().unwrap().to_owned(),
                t["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    launched_once(&running, &tasks);
    app.shutdown().await;
}
