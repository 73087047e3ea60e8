//! Priority and preemption through kubectl, on two simulated agents that a
//! low-priority Deployment fills: a pod of `preemptionPolicy: Never` waits
//! and stops nobody; an urgent pod stops exactly one low pod, which is
//! marked `DisruptionTarget` (`PreemptionByScheduler`) with kube-scheduler's
//! `Preempted` event, and lands on the agent it was nominated to, though the
//! ReplicaSet's replacement of its victim waited there first.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiserver::Api;
use common::cluster::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use testkit::{Kubectl, ok, wait_until};

const T: Duration = Duration::from_secs(60);

/// The live pods of the `batch` Deployment that run on an agent.
fn running_batch(api: &Api) -> Vec<Pod> {
    api.list_pods(Some("default"), "app=batch", "")
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .collect()
}

/// Whether the pod is marked as kube-scheduler marks a preemption victim.
fn marked_preempted(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == "DisruptionTarget"
                    && c.status == "True"
                    && c.reason.as_deref() == Some("PreemptionByScheduler")
            })
        })
}

/// Follows the pods from `from` and notes each one ever marked preempted,
/// with its node: a victim may be gone by the time anyone looks.
fn collect_preempted(api: &Api, from: u64) -> Arc<Mutex<BTreeMap<String, String>>> {
    let seen = Arc::new(Mutex::new(BTreeMap::new()));
    let mut stream = api.watch_pods(Some("default"), from).unwrap();
    let out = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Some(Ok(event)) = stream.next().await {
            let pod = event.object;
            if marked_preempted(&pod) {
                let node = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
                out.lock()
                    .unwrap()
                    .insert(pod.metadata.name.unwrap_or_default(), node);
            }
        }
    });
    seen
}

fn urgent_pod(name: &str, class: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  priorityClassName: {class}\n  containers:\n  - name: main\n    image: busybox:1.36\n    command: [sleep, \"3600\"]\n    resources:\n      requests: {{cpu: 900m, memory: 16Mi}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_urgent_pod_preempts_one_low_pod_and_lands_where_it_was_nominated() {
    let app = two_simulated_agents().await;
    let api = app.api();
    let k = Kubectl::new(&app.api_url());
    for args in [
        &["create", "priorityclass", "low", "--value=10"][..],
        &["create", "priorityclass", "high", "--value=1000"][..],
        &[
            "create",
            "priorityclass",
            "polite",
            "--value=1000",
            "--preemption-policy=Never",
        ][..],
    ] {
        ok(&k.run(args).await);
    }
    // Three 900m pods fill an agent of 3 cpus (its executor takes 100m):
    // six run, two wait.
    let batch = deployment_yaml(
        "batch",
        8,
        "        resources:\n          requests: {cpu: 900m, memory: 16Mi}\n",
    )
    .replace(
        "    spec:\n      containers:",
        "    spec:\n      priorityClassName: low\n      containers:",
    );
    k.apply(&batch).await;
    wait_until(
        "six running batch pods",
        T,
        async || running_batch(api).len(),
        |n| *n == 6,
    )
    .await;

    // Never preempts: it waits, told why, and nothing is stopped for it.
    k.apply(&urgent_pod("polite", "polite")).await;
    wait_until(
        "the polite pod's FailedScheduling",
        T,
        async || event_messages(&k, "involvedObject.name=polite,reason=FailedScheduling").await,
        |m| !m.is_empty(),
    )
    .await;
    let polite = api.get_pod("default", "polite").unwrap();
    let marked = collect_preempted(api, 0);
    assert_eq!(polite.spec.as_ref().unwrap().priority, Some(1000));
    assert_eq!(
        polite
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.as_deref()),
        None
    );
    assert!(marked.lock().unwrap().is_empty(), "Never stops nobody");
    ok(&k.run(&["delete", "pod", "polite", "--wait=false"]).await);

    // The urgent pod stops exactly one batch pod, and runs where it said.
    k.apply(&urgent_pod("urgent", "high")).await;
    let urgent = wait_until(
        "the urgent pod running",
        T,
        async || api.get_pod("default", "urgent").unwrap(),
        |p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"),
    )
    .await;
    let node = urgent.spec.as_ref().unwrap().node_name.clone().unwrap();
    assert_eq!(
        urgent
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.clone())
            .as_deref(),
        Some(node.as_str()),
        "it landed on the agent it was nominated to"
    );
    wait_until(
        "the victim noted",
        T,
        async || marked.lock().unwrap().len(),
        |n| *n >= 1,
    )
    .await;
    let victims = marked.lock().unwrap().clone();
    assert_eq!(
        victims.len(),
        1,
        "exactly one victim, the sizes match: {victims:?}"
    );
    let (victim, victim_node) = victims.into_iter().next().unwrap();
    assert_eq!(
        victim_node, node,
        "the victim ran where the urgent pod runs"
    );
    let message = event_messages(
        &k,
        &format!("involvedObject.name={victim},reason=Preempted"),
    )
    .await;
    let uid = urgent.metadata.uid.unwrap();
    assert_eq!(message, format!("Preempted by pod {uid} on node {node}"));
    // The victim's replacement waits: the freed room was the urgent pod's.
    let running = running_batch(api);
    assert_eq!(running.len(), 5, "{:?}", names(&running));
}

fn names(pods: &[Pod]) -> Vec<String> {
    pods.iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect()
}
