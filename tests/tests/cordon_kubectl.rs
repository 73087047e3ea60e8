//! `kubectl cordon`, `drain` and `uncordon` on two agents whose pods run in real
//! containers from a registry image: a cordoned Node
//! shows SchedulingDisabled and carries the cordon's taint, and its agent takes no
//! new pod but a DaemonSet's; drain moves a Deployment's pods to the other agent
//! (through the Eviction API; no budget holds them here, `disruption_kubectl` has
//! one);
//! after an uncordon the agent takes pods again. A Node's labels stay its agent's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::containers_support::registry_agents::two_registry_agents;

use std::collections::BTreeMap;
use std::time::Duration;

use apiserver::Api;
use testkit::{Kubectl, ok, stderr, wait_until};

const T: Duration = Duration::from_secs(90);

fn workloads(replicas: u32, image: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: {replicas}
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

/// How many live Running pods of `app` each node has.
fn running_per_node(api: &Api, app: &str) -> BTreeMap<String, usize> {
    let mut per = BTreeMap::new();
    for p in api
        .list_pods(Some("default"), &format!("app={app}"), "")
        .unwrap()
        .items
    {
        let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        if p.metadata.deletion_timestamp.is_none() && running {
            let node = p.spec.unwrap().node_name.unwrap_or_default();
            *per.entry(node).or_default() += 1;
        }
    }
    per
}

fn total(per: &BTreeMap<String, usize>) -> usize {
    per.values().sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cordoned_agent_takes_no_pod_drain_moves_them_and_uncordon_restores_it() {
    let Some(cluster) = two_registry_agents("cordon kubectl").await else {
        return;
    };
    let (app, image) = (&cluster.app, cluster.image.as_str());
    let api = app.api();
    let k = Kubectl::new(&app.api_url());
    // agent-1 cordoned first: every web pod goes to agent-0, the daemons to both.
    ok(&k.run(&["cordon", "agent-1"]).await);
    let row = ok(&k.run(&["get", "node", "agent-1", "--no-headers"]).await);
    assert!(row.contains("SchedulingDisabled"), "{row}");
    let taints = api
        .get_node("agent-1")
        .unwrap()
        .spec
        .unwrap()
        .taints
        .unwrap();
    assert!(
        taints
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unschedulable" && t.effect == "NoSchedule"),
        "{taints:?}"
    );
    k.apply(&workloads(3, image)).await;
    let (web, _) = wait_until(
        "three web pods and a daemon on each agent",
        T,
        async || {
            (
                running_per_node(api, "web"),
                running_per_node(api, "agentd"),
            )
        },
        |(web, daemon)| total(web) == 3 && daemon.len() == 2,
    )
    .await;
    assert_eq!(web.get("agent-0"), Some(&3), "{web:?}");
    let events = ok(&k
        .run(&[
            "get",
            "events",
            "--field-selector",
            "reason=FailedScheduling",
        ])
        .await);
    assert!(!events.contains("agentd"), "a daemon waited: {events}");
    // Labels are the agent's attributes, which placement reads.
    let out = k.run(&["label", "node", "agent-0", "disk=ssd"]).await;
    assert!(
        stderr(&out).contains("metadata.labels: Forbidden: mesopod takes a node's labels and taints from its Mesos agent's attributes"),
        "{}",
        stderr(&out)
    );

    ok(&k.run(&["uncordon", "agent-1"]).await);
    let out = k
        .run(&[
            "drain",
            "agent-0",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--timeout=60s",
        ])
        .await;
    assert!(
        ok(&out).contains("node/agent-0 drained"),
        "{}",
        stderr(&out)
    );
    // The ReplicaSet made the drained pods again, all on agent-1; the daemon
    // stays, since it tolerates the cordon.
    let (web, daemon) = wait_until(
        "the web pods all on agent-1",
        T,
        async || {
            (
                running_per_node(api, "web"),
                running_per_node(api, "agentd"),
            )
        },
        |(web, _)| web.get("agent-1") == Some(&3) && total(web) == 3,
    )
    .await;
    assert_eq!(web.get("agent-0"), None);
    assert_eq!(daemon.get("agent-0"), Some(&1));
    assert_eq!(cluster.assert_all_pulled("app=web"), 3);

    // Uncordoned, agent-0 takes what agent-1 cannot hold (3 cpus, half a cpu each).
    ok(&k.run(&["uncordon", "agent-0"]).await);
    assert!(
        api.get_node("agent-0")
            .unwrap()
            .spec
            .unwrap()
            .taints
            .is_none()
    );
    ok(&k.run(&["scale", "deployment", "web", "--replicas=8"]).await);
    wait_until(
        "eight web pods, some on agent-0",
        T,
        async || running_per_node(api, "web"),
        |web| total(web) == 8 && web.get("agent-0").is_some_and(|n| *n > 0),
    )
    .await;
    cluster.shutdown().await;
}
