//! Priority and preemption through kubectl, on two agents whose pods run in
//! real containers from a registry image, which two Deployments of
//! priority-0 pods fill, one of them under a PodDisruptionBudget that allows
//! no disruption: a pod of
//! `preemptionPolicy: Never` waits and stops nobody; an urgent pod stops
//! exactly one pod, never the protected ones while another will do, which
//! is marked `DisruptionTarget` (`PreemptionByScheduler`) with
//! kube-scheduler's `Preempted` event; the urgent pod lands on the agent it
//! was nominated to, though lower pods waited for room there first.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support::registry_agents::two_registry_agents;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiserver::Api;
use common::cluster::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use testkit::{Kubectl, ok, wait_until};

const T: Duration = Duration::from_secs(90);

/// The live pods of the `batch` Deployment that run on an agent.
fn running_batch(api: &Api) -> Vec<Pod> {
    running(api, "app=batch")
}

/// The live pods `selector` selects that run on an agent.
fn running(api: &Api, selector: &str) -> Vec<Pod> {
    api.list_pods(Some("default"), selector, "")
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

fn urgent_pod(name: &str, class: &str, image: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  priorityClassName: {class}\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {image}\n    command: [sleep, \"3600\"]\n    resources:\n      requests: {{cpu: 900m, memory: 16Mi}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_urgent_pod_preempts_one_low_pod_and_lands_where_it_was_nominated() {
    let Some(cluster) = two_registry_agents("preemption kubectl").await else {
        return;
    };
    let (app, image) = (&cluster.app, cluster.image.as_str());
    let api = app.api();
    let k = Kubectl::new(&app.api_url());
    for args in [
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
    // the three guarded pods and three batch pods run, two batch pods wait.
    let resources = "        resources:\n          requests: {cpu: 900m, memory: 16Mi}\n";
    k.apply(&deployment_yaml("guarded", 3, resources, image))
        .await;
    wait_until(
        "three running guarded pods",
        T,
        async || running(api, "app=guarded").len(),
        |n| *n == 3,
    )
    .await;
    ok(&k
        .run(&[
            "create",
            "pdb",
            "guarded",
            "--selector=app=guarded",
            "--min-available=3",
        ])
        .await);
    wait_until(
        "the budget counted: three healthy, no disruption allowed",
        T,
        async || {
            api.get_poddisruptionbudget("default", "guarded")
                .unwrap()
                .status
                .map(|s| (s.current_healthy, s.disruptions_allowed))
        },
        |s| *s == Some((3, 0)),
    )
    .await;
    k.apply(&deployment_yaml("batch", 5, resources, image))
        .await;
    wait_until(
        "three running batch pods",
        T,
        async || running_batch(api).len(),
        |n| *n == 3,
    )
    .await;

    // Never preempts: it waits, told why, and nothing is stopped for it.
    k.apply(&urgent_pod("polite", "polite", image)).await;
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
    k.apply(&urgent_pod("urgent", "high", image)).await;
    let urgent = wait_until(
        "the urgent pod running",
        T,
        async || api.get_pod("default", "urgent").unwrap(),
        |p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"),
    )
    .await;
    cluster.assert_pulled(&urgent);
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
    assert!(
        victim.starts_with("batch-"),
        "the budget's pods are chosen last: {victim}"
    );
    assert_eq!(running(api, "app=guarded").len(), 3);
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
    let batch = running_batch(api);
    assert_eq!(batch.len(), 2, "{:?}", names(&batch));
}

fn names(pods: &[Pod]) -> Vec<String> {
    pods.iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect()
}
