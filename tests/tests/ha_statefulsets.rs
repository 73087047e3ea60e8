//! Two `mesopod` replicas on one real etcd and a standalone localmesos of simulated
//! agents: the leader SIGKILLed while an OrderedReady StatefulSet is starting its pods
//! one by one (`minReadySeconds: 1` makes each step last long enough to be in one).
//! The new leader's statefulset controller goes on from what is stored: every ordinal
//! runs, in order, each pod was launched once. Needs etcd (`.ci/install-etcd.sh`):
//! skipped without it, failed under `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeSet;

use common::ha::*;
use serde_json::Value;
use testkit::{ok, wait_until};

const REPLICAS: usize = 8;

fn statefulset() -> String {
    format!(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: db\nspec:\n  serviceName: db\n  replicas: {REPLICAS}\n  minReadySeconds: 1\n  selector:\n    matchLabels: {{app: db}}\n  template:\n    metadata:\n      labels: {{app: db}}\n    spec:\n      containers:\n      - name: main\n        image: busybox:1.36\n        command: [\"sleep\", \"600\"]\n        resources:\n          requests: {{cpu: 10m, memory: 16Mi}}\n"
    )
}

async fn set_status(api: &str) -> Value {
    get_json(&format!(
        "{api}/apis/apps/v1/namespaces/default/statefulsets/db"
    ))
    .await["status"]
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_of_the_leader_mid_ordered_start_finishes_it_with_each_pod_launched_once() {
    let Some(mut cluster) = Cluster::with_replicas(
        "sigkill_of_the_leader_mid_ordered_start_finishes_it_with_each_pod_launched_once",
        2,
    )
    .await
    else {
        return;
    };
    let leader = cluster.settled(&[0, 1]).await;
    let follower = 1 - leader;
    let via = cluster.replicas[follower].api.clone();
    let k = cluster.replicas[follower].kubectl();
    ok(&k
        .run_stdin(&["apply", "-f", "-"], Some(&statefulset()))
        .await);
    wait_until(
        "the ordered start under way",
        T,
        async || set_status(&via).await,
        |s| s["availableReplicas"].as_u64().unwrap_or(0) >= 2,
    )
    .await;
    cluster.replicas[leader].proc.kill().unwrap();
    cluster.replicas[leader].proc.wait().unwrap();
    let status = set_status(&via).await;
    assert!(
        status["readyReplicas"].as_u64().unwrap_or(0) < REPLICAS as u64,
        "the SIGKILL came after the start: {status}"
    );
    assert_eq!(cluster.settled(&[follower]).await, follower);

    let done = ok(&k
        .run(&["rollout", "status", "sts/db", "--timeout=120s"])
        .await);
    assert!(
        done.contains(&format!(
            "partitioned roll out complete: {REPLICAS} new pods have been updated..."
        )),
        "{done}"
    );
    let all = pods(&via).await;
    let names: BTreeSet<&str> = all.keys().map(String::as_str).collect();
    let want: BTreeSet<String> = (0..REPLICAS).map(|i| format!("db-{i}")).collect();
    assert_eq!(
        names,
        want.iter().map(String::as_str).collect::<BTreeSet<_>>()
    );
    // Each pod launched once: one Mesos task per pod, of one framework.
    let tasks = mesos_tasks(&cluster.master).await;
    let frameworks: BTreeSet<&str> = tasks.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(frameworks.len(), 1, "{frameworks:?}");
    for name in &want {
        let launched = tasks
            .iter()
            .filter(|(_, t)| t.contains(&format!(".{name}.")))
            .count();
        assert_eq!(launched, 1, "pod {name} launched {launched} times");
    }
    // Ordered: no pod was created before the one below it.
    let list = get_json(&format!("{via}/api/v1/namespaces/default/pods")).await;
    let created = |name: &str| {
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["metadata"]["name"] == name)
            .and_then(|p| p["metadata"]["creationTimestamp"].as_str())
            .unwrap_or_else(|| panic!("{name} has a creation time"))
            .to_owned()
    };
    for i in 1..REPLICAS {
        let (lower, upper) = (format!("db-{}", i - 1), format!("db-{i}"));
        assert!(created(&lower) <= created(&upper), "{lower} after {upper}");
    }
}
