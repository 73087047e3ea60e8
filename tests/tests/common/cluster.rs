//! A mesopod in the test's process with an embedded localmesos whose agents
//! run the real `mesopod executor`, and waits that await store events
//! instead of sleeping.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use apiserver::{Api, EventKind, ObjectStream, SystemClock};
use framework::admission::Admission;
use framework::app::{App, AppConfig};
use framework::config::{FrameworkConfig, SchedulingConfig};
use framework::launch::ExecutorCommand;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use localmesos::{AgentConfig, Timing};
use mesos::codec::Codec;
use procurement::{PortStrategy, ResourceDefaults, Scoring};

use super::MESOPOD;

/// How a test cluster looks.
pub struct Setup {
    pub agents: Vec<AgentConfig>,
    pub data_dir: Option<PathBuf>,
    pub admission: Admission,
    pub masters: Vec<String>,
    pub start_deadline: Duration,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            agents: (0..3)
                .map(|i| {
                    agent(
                        "cpus:4;mem:8192;disk:20480;ports:[31000-31010]",
                        "rack:r{i}",
                        i,
                    )
                })
                .collect(),
            data_dir: None,
            admission: Admission::none(),
            masters: Vec::new(),
            start_deadline: Duration::from_secs(300),
        }
    }
}

pub fn agent(resources: &str, attributes: &str, i: usize) -> AgentConfig {
    AgentConfig::from_flags(resources, attributes, i).unwrap()
}

/// Fast timings: offers every 100 ms, heartbeats every second.
pub fn fast_timing() -> Timing {
    Timing {
        heartbeat_interval: Duration::from_secs(1),
        allocation_interval: Duration::from_millis(100),
        status_update_retry_min: Duration::from_millis(500),
        status_update_retry_max: Duration::from_secs(2),
        ..Timing::default()
    }
}

pub fn app_config(setup: Setup) -> AppConfig {
    testkit::init_crypto();
    AppConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: setup.data_dir,
        etcd: None,
        embedded: localmesos::Config {
            agents: setup.agents,
            timing: fast_timing(),
            ..Default::default()
        },
        framework: FrameworkConfig {
            masters: setup.masters,
            ..FrameworkConfig::default()
        },
        scheduling: SchedulingConfig {
            offer_ttl: Duration::from_secs(2),
            decline_refuse: Duration::from_millis(100),
            start_deadline: setup.start_deadline,
            sweep_interval: Duration::from_millis(100),
            revive_min_interval: Duration::from_millis(100),
            ..SchedulingConfig::default()
        },
        default_pod_roles: vec!["*".into()],
        port_strategy: PortStrategy::Fixed,
        resource_defaults: ResourceDefaults::default(),
        scoring: Scoring::default(),
        executor: ExecutorCommand {
            program: MESOPOD.into(),
            uri: None,
            shutdown_grace: Duration::from_secs(5),
            // The pre-container tests run host commands; containers_* tests
            // set their own runtime.
            args: vec!["--container-runtime=process".into()],
        },
        admission: setup.admission,
        codec: Codec::Protobuf,
        clock: Arc::new(SystemClock),
        security: Default::default(),
        hardening: framework::hardening::Hardening::default(),
        ha: Default::default(),
        controllers: Default::default(),
    }
}

pub async fn start(setup: Setup) -> App {
    App::start(app_config(setup)).await.expect("mesopod starts")
}

/// A cluster of two simulated agents (`agent-0` and `agent-1`, 3 cpus each), once
/// both their Nodes exist: for tests of the API's objects, whose pods need not run.
pub async fn two_simulated_agents() -> App {
    let app = start(Setup {
        agents: (0..2)
            .map(|i| agent("cpus:3;mem:16384;ports:[31000-31100]", "", i).simulated(None))
            .collect(),
        ..Setup::default()
    })
    .await;
    let api = app.api();
    testkit::wait_until(
        "both agents' Nodes",
        Duration::from_secs(60),
        async || api.list_nodes("", "").unwrap().items.len(),
        |n| *n == 2,
    )
    .await;
    app
}

/// Awaits the object named `name` for which `pred` holds: read once, then
/// watched (no sleeping). The version is taken before the read, so a change
/// between the two is either seen by the read or replayed by the watch.
pub async fn wait_watched<T: k8s_openapi::Metadata<Ty = ObjectMeta>>(
    api: &Api,
    name: &str,
    read: impl Fn(&Api) -> Option<T>,
    watch: impl FnOnce(&Api, u64) -> ObjectStream<T>,
    pred: impl Fn(&T) -> bool,
) -> T {
    let rv = api.resource_version();
    if let Some(o) = read(api).filter(|o| pred(o)) {
        return o;
    }
    let mut watch = watch(api, rv);
    while let Some(ev) = watch.next().await {
        let ev = ev.expect("watch");
        if ev.kind != EventKind::Deleted
            && ev.object.metadata().name.as_deref() == Some(name)
            && pred(&ev.object)
        {
            return ev.object;
        }
    }
    panic!("watch ended")
}

/// Awaits a pod for which `pred` holds, watching the store (no sleeping).
pub async fn wait_pod(
    api: &Api,
    ns: &str,
    name: &str,
    within: Duration,
    pred: impl Fn(&Pod) -> bool,
) -> Pod {
    let fut = wait_watched(
        api,
        name,
        |api| api.get_pod(ns, name).ok(),
        |api, rv| api.watch_pods(Some(ns), rv).unwrap(),
        pred,
    );
    match tokio::time::timeout(within, fut).await {
        Ok(p) => p,
        Err(_) => panic!(
            "pod {ns}/{name} did not reach the condition within {within:?}; now: {:?}",
            api.get_pod(ns, name).map(|p| p.status)
        ),
    }
}

/// Awaits the pod's removal from the store.
pub async fn wait_gone(api: &Api, ns: &str, name: &str, within: Duration) {
    let fut = async {
        let rv = api.resource_version();
        if api.get_pod(ns, name).is_err() {
            return;
        }
        let mut watch = api.watch_pods(Some(ns), rv).unwrap();
        while let Some(ev) = watch.next().await {
            let ev = ev.expect("watch");
            if ev.kind == EventKind::Deleted && ev.object.metadata.name.as_deref() == Some(name) {
                return;
            }
        }
    };
    tokio::time::timeout(within, fut)
        .await
        .expect("pod removed in time");
}

/// Whether the task the pod's annotation names has run, as its executor
/// said (TASK_RUNNING from the executor): after a relaunch, that the new
/// task reached an executor, not only that the pod was bound again.
pub fn task_running(app: &framework::app::App, p: &Pod) -> bool {
    let Some(id) = p
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("mesopod.io/task-id"))
    else {
        return false;
    };
    app.registry()
        .get(&mesos::proto::TaskId::new(id))
        .and_then(|t| t.last_status)
        .is_some_and(|s| {
            s.state == mesos::proto::TaskState::TaskRunning
                && s.source == Some(mesos::proto::task_status::Source::SourceExecutor)
        })
}

/// Awaits the pod `name` relaunched after its executor died: running
/// under a task other than `old_task` that its new executor reported
/// RUNNING ([`task_running`]). Polled: the registry has no watch.
pub async fn wait_adopted(
    app: &framework::app::App,
    name: &str,
    old_task: &str,
    within: Duration,
) -> Pod {
    let adopted = |p: &Pod| {
        let task = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("mesopod.io/task-id"))
            .map(String::as_str);
        phase(p) == "Running" && task.is_some_and(|t| t != old_task) && task_running(app, p)
    };
    let seen = testkit::wait_until(
        &format!("pod {name} adopted"),
        within,
        async || app.api().get_pod("default", name).ok(),
        |p| p.as_ref().is_some_and(adopted),
    )
    .await;
    seen.expect("the pod")
}

pub fn phase(p: &Pod) -> &str {
    p.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// A Deployment `name` in `default` of `replicas` sleepers of `image` labelled
/// `app: name`, its container's `resources:` block given as YAML under it (or `""`).
/// Their grace period is a second: `sleep` as a container's init ignores SIGTERM,
/// and every stop would otherwise wait out kube's default 30 s.
pub fn deployment_yaml(name: &str, replicas: u32, resources: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  namespace: default
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: {name}}}
  template:
    metadata:
      labels: {{app: {name}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: {image}
        command: [sleep, \"3600\"]
{resources}"
    )
}

/// The messages of the events `field_selector` selects, as kubectl prints them.
pub async fn event_messages(k: &testkit::Kubectl, field_selector: &str) -> String {
    testkit::ok(
        &k.run(&[
            "get",
            "events",
            "--field-selector",
            field_selector,
            "-o",
            "jsonpath={.items[*].message}",
        ])
        .await,
    )
}

pub fn pod_yaml(name: &str, extra_spec: &str, command: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  restartPolicy: Never\n{extra_spec}  containers:\n  - name: main\n    image: busybox\n    command: [\"/bin/sh\", \"-c\", {command:?}]\n    resources:\n      requests:\n        cpu: 100m\n        memory: 32Mi\n"
    )
}

/// The scheduler's own account of why nothing moves: its debug pages for
/// the framework and subscription, the queue, the live offers and the
/// tasks, for a wait's timeout ([`testkit::wait_until_explained`]).
pub async fn scheduler_pages(base: &str) -> String {
    let mut out = String::new();
    for page in [
        "/debug/framework",
        "/debug/queue",
        "/debug/offers",
        "/debug/registry/tasks?format=text",
    ] {
        let body = match reqwest::get(format!("{base}{page}")).await {
            Ok(resp) => resp.text().await.unwrap_or_else(|e| e.to_string()),
            Err(e) => e.to_string(),
        };
        out.push_str(&format!("\n--- {page}\n{body}"));
    }
    out
}

/// Spawns `cmd` (a `mesopod` whose stdout is piped and whose stderr goes to
/// `log`) and reads its stdout until it says where its Kubernetes API
/// listens: the process and that URL. Its stdout is drained afterwards.
///
/// # Panics
///
/// When it exits first: with its log, and what `context` adds.
pub async fn serving(
    cmd: &mut tokio::process::Command,
    log: &std::path::Path,
    context: impl FnOnce() -> String,
) -> (testkit::ProcessGuard<tokio::process::Child>, String) {
    use tokio::io::AsyncBufReadExt as _;
    let mut proc = testkit::ProcessGuard::spawn(cmd).expect("mesopod starts");
    let mut lines = tokio::io::BufReader::new(proc.stdout.take().unwrap()).lines();
    let url = loop {
        match lines.next_line().await {
            Ok(Some(l)) if l.contains("Kubernetes API:") => {
                break l.split_whitespace().last().unwrap().to_owned();
            }
            Ok(Some(_)) => continue,
            _ => panic!(
                "mesopod exited before it served: {}\n{}",
                std::fs::read_to_string(log).unwrap_or_default(),
                context()
            ),
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (proc, url)
}
