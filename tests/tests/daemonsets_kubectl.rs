//! DaemonSets with the real kubectl, on simulated agents (pods run and are ready at
//! once, so what is tested is the controller, procurement's node pinning and what
//! kubectl reads): one Running pod on every agent, each placed through an offer of
//! its own agent; an agent that joins gets one; a `nodeSelector` keeps a DaemonSet
//! off agents without the label; `set image` rolls out (`rollout status`) one node at
//! a time; `rollout history` lists its ControllerRevisions and `undo` rolls back; a
//! delete takes the pods with it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt as _;

use apiserver::Api;
use common::cluster::*;
use k8s_openapi::api::core::v1::Pod;
use testkit::{Kubectl, ok, stderr, wait_until};

const T: Duration = Duration::from_secs(60);

fn daemonset(name: &str, image: &str, node_selector: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: {name}\nspec:\n  selector:\n    matchLabels: {{app: {name}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n    spec:\n{node_selector}      containers:\n      - name: main\n        image: {image}\n        command: [\"sleep\", \"3600\"]\n        resources:\n          requests: {{cpu: 10m, memory: 16Mi}}\n"
    )
}

/// The live (not deleting) pods of `app`.
fn live(api: &Api, app: &str) -> Vec<Pod> {
    api.list_pods(Some("default"), &format!("app={app}"), "")
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// The nodes the Running pods of `app` are on, with their images.
fn running_on(api: &Api, app: &str) -> BTreeSet<(String, String)> {
    live(api, app)
        .into_iter()
        .filter(|p| phase(p) == "Running")
        .filter_map(|p| {
            let spec = p.spec?;
            Some((spec.node_name?, spec.containers[0].image.clone()?))
        })
        .collect()
}

fn on(nodes: &[&str], image: &str) -> BTreeSet<(String, String)> {
    nodes
        .iter()
        .map(|n| ((*n).to_owned(), image.to_owned()))
        .collect()
}

/// Follows the pods of `agentd` (starting from `pods`) and keeps in `worst` the
/// most of the `agents` that were, at any change, without a live Running pod.
async fn count_nodes_without_a_running_pod(
    mut watch: apiserver::ObjectStream<Pod>,
    pods: Vec<Pod>,
    agents: usize,
    worst: Arc<AtomicUsize>,
) {
    let mut current: BTreeMap<String, Pod> = pods
        .into_iter()
        .map(|p| (p.metadata.name.clone().unwrap_or_default(), p))
        .collect();
    while let Some(Ok(ev)) = watch.next().await {
        let name = ev.object.metadata.name.clone().unwrap_or_default();
        let ours = ev
            .object
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.get("app").map(String::as_str) == Some("agentd"));
        if !ours {
            continue;
        }
        match ev.kind {
            apiserver::EventKind::Deleted => {
                current.remove(&name);
            }
            _ => {
                current.insert(name, ev.object);
            }
        }
        let covered: BTreeSet<String> = current
            .values()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && phase(p) == "Running")
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        worst.fetch_max(agents - covered.len().min(agents), Ordering::SeqCst);
    }
}

async fn rolled_out(k: &Kubectl, what: &str) {
    let out = k.run(&["rollout", "status", what, "--timeout=60s"]).await;
    assert!(
        ok(&out).contains("successfully rolled out"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemonset_runs_on_every_agent_follows_new_agents_rolls_out_and_cascades() {
    let mut config = app_config(Setup {
        agents: (0..2)
            .map(|i| agent("cpus:8;mem:16384;ports:[31000-31100]", "tier:edge", i).simulated(None))
            .collect(),
        ..Setup::default()
    });
    // An agent added while nothing is pending becomes a Node within a second.
    config.scheduling.node_discovery_interval = Duration::from_secs(1);
    let app = framework::app::App::start(config)
        .await
        .expect("mesopod starts");
    let api = app.api();
    let k = Kubectl::new(&app.api_url());
    k.apply(&daemonset("agentd", "busybox:1.36", "")).await;
    rolled_out(&k, "ds/agentd").await;
    wait_until(
        "one pod Running on each agent",
        T,
        async || running_on(api, "agentd"),
        |r| *r == on(&["agent-0", "agent-1"], "busybox:1.36"),
    )
    .await;
    // Each pod was pinned by affinity, not by nodeName, and carries the revision.
    let pod = &live(api, "agentd")[0];
    let spec = pod.spec.clone().unwrap();
    let required = spec
        .affinity
        .unwrap()
        .node_affinity
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .unwrap();
    let field = &required.node_selector_terms[0]
        .match_fields
        .as_ref()
        .unwrap()[0];
    assert_eq!(
        (field.key.as_str(), field.operator.as_str()),
        ("metadata.name", "In")
    );
    assert_eq!(
        field.values.as_deref(),
        Some(&[spec.node_name.unwrap()][..])
    );
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(labels["pod-template-generation"], "1");
    assert!(labels.contains_key("controller-revision-hash"));
    assert!(spec.tolerations.unwrap().iter().any(|t| {
        t.key.as_deref() == Some("node.kubernetes.io/unreachable")
            && t.effect.as_deref() == Some("NoExecute")
    }));

    let table = ok(&k.run(&["get", "ds", "agentd"]).await);
    let columns: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        columns,
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE",
            "SELECTOR",
            "AGE"
        ]
    );
    assert!(
        table
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("agentd   2         2         2       2            2           <none>"),
        "{table}"
    );

    let explain = ok(&k.run(&["explain", "ds.spec.updateStrategy"]).await);
    assert!(
        explain.contains("KIND:")
            && explain.contains("DaemonSet")
            && explain.contains("rollingUpdate"),
        "{explain}"
    );

    // A nodeSelector that only one agent's attributes satisfy.
    app.local()
        .unwrap()
        .add_agent(agent("cpus:8;mem:16384;ports:[31000-31100]", "tier:core", 2).simulated(None))
        .await
        .unwrap();
    wait_until(
        "the new agent gets a pod",
        T,
        async || running_on(api, "agentd"),
        |r| *r == on(&["agent-0", "agent-1", "agent-2"], "busybox:1.36"),
    )
    .await;
    k.apply(&daemonset(
        "coreonly",
        "busybox:1.36",
        "      nodeSelector: {tier: core}\n",
    ))
    .await;
    rolled_out(&k, "ds/coreonly").await;
    wait_until(
        "only agent-2 runs it",
        T,
        async || running_on(api, "coreonly"),
        |r| *r == on(&["agent-2"], "busybox:1.36"),
    )
    .await;
    let coreonly = api
        .get_daemonset("default", "coreonly")
        .unwrap()
        .status
        .unwrap();
    assert_eq!(coreonly.desired_number_scheduled, 1);

    // A rolling update, one node at a time (maxUnavailable 1): a watch counts, at
    // every pod change, the agents without a live Running pod.
    let worst = Arc::new(AtomicUsize::new(0));
    let watch = api
        .watch_pods(Some("default"), api.resource_version())
        .unwrap();
    let observer = tokio::spawn(count_nodes_without_a_running_pod(
        watch,
        live(api, "agentd"),
        3,
        Arc::clone(&worst),
    ));
    ok(&k
        .run(&["set", "image", "ds/agentd", "main=busybox:1.37"])
        .await);
    rolled_out(&k, "ds/agentd").await;
    wait_until(
        "every agent on the new image",
        T,
        async || running_on(api, "agentd"),
        |r| *r == on(&["agent-0", "agent-1", "agent-2"], "busybox:1.37"),
    )
    .await;
    observer.abort();
    assert_eq!(
        worst.load(Ordering::SeqCst),
        1,
        "one agent at a time went without its pod"
    );
    let pod = &live(api, "agentd")[0];
    assert_eq!(
        pod.metadata.labels.as_ref().unwrap()["pod-template-generation"],
        "2"
    );
    // Each template is a ControllerRevision: `rollout history` lists both, and `undo`
    // patches the first back, which is then renumbered 3.
    let history = ok(&k.run(&["rollout", "history", "ds/agentd"]).await);
    let revisions = |text: &str| -> Vec<String> {
        text.lines()
            .skip_while(|l| !l.starts_with("REVISION"))
            .skip(1)
            .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
            .collect()
    };
    assert_eq!(revisions(&history), ["1", "2"], "{history}");
    let first = ok(&k
        .run(&["rollout", "history", "ds/agentd", "--revision=1"])
        .await);
    assert!(first.contains("busybox:1.36"), "{first}");
    ok(&k.run(&["rollout", "undo", "ds/agentd"]).await);
    rolled_out(&k, "ds/agentd").await;
    wait_until(
        "every agent back on the first image",
        T,
        async || running_on(api, "agentd"),
        |r| *r == on(&["agent-0", "agent-1", "agent-2"], "busybox:1.36"),
    )
    .await;
    let history = ok(&k.run(&["rollout", "history", "ds/agentd"]).await);
    assert_eq!(revisions(&history), ["2", "3"], "{history}");
    let describe = ok(&k.run(&["describe", "ds/agentd"]).await);
    assert!(
        describe.contains("SuccessfulCreate")
            && describe.contains("Created pod: agentd-")
            && describe.contains("SuccessfulDelete")
            && describe.contains("daemonset-controller"),
        "{describe}"
    );

    ok(&k.run(&["delete", "ds/agentd", "ds/coreonly"]).await);
    wait_until(
        "their pods collected",
        T,
        async || {
            api.list_pods(Some("default"), "app in (agentd,coreonly)", "")
                .unwrap()
                .items
                .len()
        },
        |n| *n == 0,
    )
    .await;
    app.shutdown().await;
}
