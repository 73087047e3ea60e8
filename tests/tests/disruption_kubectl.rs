//! PodDisruptionBudgets through kubectl, on two agents whose pods run in real
//! containers from a registry image: `kubectl create pdb`
//! and `get pdb` show kube's columns once the disruption controller has counted the
//! pods; `kubectl drain` evicts through the Eviction API and, refused with 429 while
//! the budget allows nothing, retries until the ReplicaSet's replacements are Ready
//! elsewhere, so the budget holds all the way; a budget that allows nothing stops the
//! drain at its timeout with every pod still running.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support::registry_agents::two_registry_agents;

use std::time::Duration;

use apiserver::Api;
use common::cluster::*;
use testkit::{Kubectl, ok, stderr, wait_until};

const T: Duration = Duration::from_secs(90);

/// The live, Ready web pods, and the nodes they run on.
fn ready_web(api: &Api) -> Vec<String> {
    api.list_pods(Some("default"), "app=web", "")
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .map(|p| p.spec.unwrap().node_name.unwrap_or_default())
        .collect()
}

/// The budget's `(currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed)`.
fn counts(api: &Api) -> (i32, i32, i32, i32) {
    let s = api
        .get_poddisruptionbudget("default", "web")
        .unwrap()
        .status
        .unwrap_or_default();
    (
        s.current_healthy,
        s.desired_healthy,
        s.expected_pods,
        s.disruptions_allowed,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_evicts_within_the_budget_and_a_budget_that_allows_nothing_stops_it() {
    let Some(cluster) = two_registry_agents("disruption kubectl").await else {
        return;
    };
    let (app, image) = (&cluster.app, cluster.image.as_str());
    let api = app.api();
    let k = Kubectl::new(&app.api_url());
    // Every web pod on agent-0, which the drain then empties.
    ok(&k.run(&["cordon", "agent-1"]).await);
    let web = deployment_yaml(
        "web",
        3,
        "        resources:\n          requests: {cpu: 500m, memory: 16Mi}\n",
        image,
    );
    k.apply(&web).await;
    wait_until(
        "three ready web pods",
        T,
        async || ready_web(api),
        |p| p.len() == 3 && p.iter().all(|n| n == "agent-0"),
    )
    .await;
    let out = ok(&k
        .run(&[
            "create",
            "pdb",
            "web",
            "--selector=app=web",
            "--min-available=2",
        ])
        .await);
    assert_eq!(out.trim(), "poddisruptionbudget.policy/web created");
    wait_until(
        "the budget counted",
        T,
        async || counts(api),
        |c| *c == (3, 2, 3, 1),
    )
    .await;
    let table = ok(&k.run(&["get", "pdb"]).await);
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap()
        .split("  ")
        .filter(|c| !c.is_empty())
        .map(str::trim)
        .collect();
    assert_eq!(
        header,
        [
            "NAME",
            "MIN AVAILABLE",
            "MAX UNAVAILABLE",
            "ALLOWED DISRUPTIONS",
            "AGE"
        ]
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..4], ["web", "2", "N/A", "1"], "{table}");
    let described = ok(&k.run(&["describe", "pdb", "web"]).await);
    for line in [
        "Min available:  2",
        "Selector:       app=web",
        "Allowed disruptions:  1",
        "Current:              3",
        "Desired:              2",
        "Total:                3",
    ] {
        assert!(described.contains(line), "{line:?} in {described}");
    }
    // Both bounds at once is kube-apiserver's refusal.
    let both = "apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: both, namespace: default}
spec: {minAvailable: 1, maxUnavailable: 1, selector: {matchLabels: {app: web}}}
";
    let out = k.run_stdin(&["apply", "-f", "-"], Some(both)).await;
    assert!(
        stderr(&out).contains("The PodDisruptionBudget \"both\" is invalid: spec: Invalid value: ")
            && stderr(&out).contains("minAvailable and maxUnavailable cannot be both set"),
        "{}",
        stderr(&out)
    );

    // One pod at a time may go; the next eviction waits (429) until the replacement
    // is Ready on agent-1.
    ok(&k.run(&["uncordon", "agent-1"]).await);
    let out = k
        .run(&["drain", "agent-0", "--ignore-daemonsets", "--timeout=60s"])
        .await;
    let (drained, refusals) = (ok(&out), stderr(&out));
    assert!(
        drained.contains("node/agent-0 drained"),
        "{drained}\n{refusals}"
    );
    assert!(drained.contains("evicting pod default/web-"), "{drained}");
    assert!(
        refusals.contains("(will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget."),
        "the budget never refused: {refusals}"
    );
    let after = wait_until(
        "three ready web pods on agent-1",
        T,
        async || ready_web(api),
        |p| p.len() == 3,
    )
    .await;
    assert!(after.iter().all(|n| n == "agent-1"), "{after:?}");
    assert_eq!(cluster.assert_all_pulled("app=web"), 3);
    let condition = ok(&k
        .run(&[
            "get",
            "pdb",
            "web",
            "-o",
            "jsonpath={.status.conditions[0].type}",
        ])
        .await);
    assert_eq!(condition, "DisruptionAllowed");

    // A budget that allows nothing: the drain of agent-1 gives up at its timeout and
    // every pod still runs.
    ok(&k
        .run(&[
            "patch",
            "pdb",
            "web",
            "--type=merge",
            "-p",
            "{\"spec\":{\"minAvailable\":3}}",
        ])
        .await);
    wait_until(
        "the budget allowing nothing",
        T,
        async || counts(api),
        |c| *c == (3, 3, 3, 0),
    )
    .await;
    ok(&k.run(&["uncordon", "agent-0"]).await);
    let out = k
        .run(&["drain", "agent-1", "--ignore-daemonsets", "--timeout=7s"])
        .await;
    assert!(!out.status.success(), "{}", ok(&out));
    let refusals = stderr(&out);
    assert!(
        refusals.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{refusals}"
    );
    assert!(
        refusals.contains("global timeout reached: 7s"),
        "{refusals}"
    );
    assert_eq!(ready_web(api).len(), 3);
    let status = api
        .get_poddisruptionbudget("default", "web")
        .unwrap()
        .status
        .unwrap();
    let condition = &status.conditions.unwrap()[0];
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "InsufficientPods")
    );
    cluster.shutdown().await;
}
