//! A Mesos maintenance window, scheduled as a platform team schedules it (a
//! POST to the master's `/master/maintenance/schedule`), on two agents whose
//! pods run in real containers from a registry image: before the window starts, the machine's Node is cordoned and
//! tainted `mesopod.io/maintenance`, its pods move to the other agent through
//! the Eviction API with their PodDisruptionBudget held (never fewer Running
//! than it asks), a DaemonSet's pod leaves too and does not come back, and
//! mesopod accepts the master's inverse offer, which the master's maintenance
//! status shows. When the schedule drops the machine, its Node takes pods
//! again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support::registry_agents::two_registry_agents;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use apiserver::Api;
use common::cluster::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use testkit::{Kubectl, ok, wait_until};

const T: Duration = Duration::from_secs(90);

fn workloads(image: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: {image}
        command: [sleep, \"3600\"]
        resources:
          requests: {{cpu: 500m, memory: 16Mi}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: web
  namespace: default
spec:
  minAvailable: 1
  selector:
    matchLabels: {{app: web}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agentd
  namespace: default
spec:
  selector:
    matchLabels: {{app: agentd}}
  template:
    metadata:
      labels: {{app: agentd}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: {image}
        command: [sleep, \"3600\"]
        resources:
          requests: {{cpu: 10m, memory: 16Mi}}
"
    )
}

fn live_running(p: &Pod) -> bool {
    p.metadata.deletion_timestamp.is_none()
        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// How many live Running pods of `app` each node has.
pub(crate) fn running_per_node(api: &Api, app: &str) -> BTreeMap<String, usize> {
    let mut per = BTreeMap::new();
    for p in api
        .list_pods(Some("default"), &format!("app={app}"), "")
        .unwrap()
        .items
    {
        if live_running(&p) {
            let node = p.spec.unwrap().node_name.unwrap_or_default();
            *per.entry(node).or_default() += 1;
        }
    }
    per
}

/// Applies [`workloads`] with both web pods on agent-0 (agent-1 is cordoned
/// while they are placed) and a daemon on each agent.
pub(crate) async fn web_on_agent_0(k: &Kubectl, api: &Api, image: &str) {
    ok(&k.run(&["cordon", "agent-1"]).await);
    k.apply(&workloads(image)).await;
    wait_until(
        "both web pods on agent-0, a daemon on each agent",
        T,
        async || {
            (
                running_per_node(api, "web"),
                running_per_node(api, "agentd"),
            )
        },
        |(web, daemon)| web.get("agent-0") == Some(&2) && daemon.len() == 2,
    )
    .await;
    ok(&k.run(&["uncordon", "agent-1"]).await);
}

/// Awaits agent-0 emptied: both web pods Running on agent-1, and the daemon
/// there alone (agent-0's is not made again).
pub(crate) async fn moved_to_agent_1(api: &Api) {
    let (web, daemon) = wait_until(
        "agent-0 empty, both web pods on agent-1",
        T,
        async || {
            (
                running_per_node(api, "web"),
                running_per_node(api, "agentd"),
            )
        },
        |(web, daemon)| web.get("agent-1") == Some(&2) && !daemon.contains_key("agent-0"),
    )
    .await;
    assert_eq!(web.get("agent-0"), None);
    assert_eq!(daemon.get("agent-1"), Some(&1));
}

/// Follows the web pods from a fresh list and keeps the fewest that were
/// Running and not being deleted at any moment: what the budget must hold.
fn fewest_running(api: &Api) -> Arc<Mutex<usize>> {
    let list = api.list_pods(Some("default"), "app=web", "").unwrap();
    let mut now: BTreeMap<String, bool> = list
        .items
        .iter()
        .map(|p| (p.metadata.name.clone().unwrap_or_default(), live_running(p)))
        .collect();
    let fewest = Arc::new(Mutex::new(now.values().filter(|r| **r).count()));
    let mut stream = api
        .watch_pods(Some("default"), list.resource_version)
        .unwrap();
    let out = Arc::clone(&fewest);
    tokio::spawn(async move {
        while let Some(Ok(ev)) = stream.next().await {
            let p = ev.object;
            let web = p.metadata.labels.as_ref().and_then(|l| l.get("app"));
            if web.map(String::as_str) != Some("web") {
                continue;
            }
            let name = p.metadata.name.clone().unwrap_or_default();
            let running = ev.kind != apiserver::EventKind::Deleted && live_running(&p);
            now.insert(name, running);
            let count = now.values().filter(|r| **r).count();
            let mut fewest = out.lock().unwrap();
            *fewest = (*fewest).min(count);
        }
    });
    fewest
}

async fn post_schedule(master: &str, schedule: &Value) {
    post_ok(&format!("{master}/master/maintenance/schedule"), schedule).await;
}

/// POSTs `body` as JSON to `url` and fails the test unless the answer is a success.
pub(crate) async fn post_ok(url: &str, body: &Value) {
    let answer = reqwest::Client::new()
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap();
    let code = answer.status();
    assert!(
        code.is_success(),
        "{body}: {code}: {}",
        answer.text().await.unwrap_or_default()
    );
}

async fn maintenance_status(master: &str) -> Value {
    reqwest::get(format!("{master}/master/maintenance/status"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

pub(crate) fn taint_keys(api: &Api, node: &str) -> Vec<String> {
    api.get_node(node)
        .unwrap()
        .spec
        .unwrap()
        .taints
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.key)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_maintenance_window_moves_the_pods_out_under_their_budget_and_the_inverse_offer_is_accepted()
 {
    let Some(cluster) = two_registry_agents("maintenance kubectl").await else {
        return;
    };
    let (app, image) = (&cluster.app, cluster.image.as_str());
    let api = app.api();
    let master = app.master_url().trim_end_matches('/').to_owned();
    let k = Kubectl::new(&app.api_url());
    web_on_agent_0(&k, api, image).await;
    wait_until(
        "the budget allows one disruption",
        T,
        async || {
            let out = k
                .run(&[
                    "get",
                    "pdb",
                    "web",
                    "-o",
                    "jsonpath={.status.disruptionsAllowed}",
                ])
                .await;
            ok(&out).trim().to_owned()
        },
        |allowed| allowed == "1",
    )
    .await;

    let fewest = fewest_running(api);
    // The window opens in an hour; the machine drains now.
    let start = SystemTime::now() + Duration::from_secs(3600);
    let nanos = start
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    post_schedule(
        &master,
        &json!({"windows": [{
            "machine_ids": [{"hostname": "agent-0", "ip": "127.0.0.1"}],
            "unavailability": {"start": {"nanoseconds": nanos}},
        }]}),
    )
    .await;

    // Cordoned and tainted before the window.
    wait_until(
        "agent-0 cordoned for maintenance",
        T,
        async || taint_keys(api, "agent-0"),
        |keys| keys.iter().any(|k| k == "mesopod.io/maintenance"),
    )
    .await;
    let row = ok(&k.run(&["get", "node", "agent-0", "--no-headers"]).await);
    assert!(row.contains("SchedulingDisabled"), "{row}");
    let node = api.get_node("agent-0").unwrap();
    let notes = node.metadata.annotations.unwrap();
    assert!(
        notes.contains_key("mesopod.io/maintenance-start"),
        "{notes:?}"
    );

    // The pods move out; the daemon's is not made again there.
    moved_to_agent_1(api).await;
    assert_eq!(cluster.assert_all_pulled("app=web"), 2);
    assert!(
        *fewest.lock().unwrap() >= 1,
        "the budget asks for one Running web pod at every moment"
    );

    // mesopod accepted the inverse offer: the master's status says so.
    let status = wait_until(
        "the inverse offer accepted",
        T,
        async || maintenance_status(&master).await,
        |s| {
            s["draining_machines"][0]["statuses"]
                .as_array()
                .is_some_and(|st| st.iter().any(|x| x["status"] == "ACCEPT"))
        },
    )
    .await;
    assert_eq!(
        status["draining_machines"][0]["id"]["hostname"], "agent-0",
        "{status}"
    );
    let events = event_messages(&k, "reason=MaintenanceScheduled").await;
    assert!(
        events.contains("Mesos scheduled this machine for maintenance"),
        "{events}"
    );
    // The budget held the second pod back at first, as it holds kubectl drain.
    let events = event_messages(&k, "reason=EvictionBlocked").await;
    assert!(
        events.contains("Cannot evict pod as it would violate the pod's disruption budget"),
        "{events}"
    );
    let events = event_messages(&k, "reason=InverseOfferAccepted").await;
    assert!(events.contains("accepted Mesos' inverse offer"), "{events}");

    // The schedule no longer names the machine: the mark and cordon go.
    post_schedule(&master, &json!({"windows": []})).await;
    wait_until(
        "agent-0 schedulable again",
        T,
        async || taint_keys(api, "agent-0"),
        |keys| keys.is_empty(),
    )
    .await;
    ok(&k.run(&["scale", "deployment", "web", "--replicas=8"]).await);
    wait_until(
        "eight web pods and the daemon back, some on agent-0",
        T,
        async || {
            (
                running_per_node(api, "web"),
                running_per_node(api, "agentd"),
            )
        },
        |(web, daemon)| {
            web.values().sum::<usize>() == 8
                && web.get("agent-0").is_some_and(|n| *n > 0)
                && daemon.get("agent-0") == Some(&1)
        },
    )
    .await;
    cluster.shutdown().await;
}
