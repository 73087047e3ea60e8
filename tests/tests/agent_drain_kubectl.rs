//! A Mesos agent drained by its operator (DRAIN_AGENT, Mesos 1.9+, on the
//! embedded localmesos), seen through kubectl: Mesos deactivates the agent
//! and kills every task there itself; mesopod marks the agent's Node
//! (cordoned, tainted `mesopod.io/maintenance`, an `AgentDraining` event), so
//! its DaemonSet pod is not made again there, while the Deployment's pods
//! come back on the other agent. The killed pods say why as kubelet's
//! graceful node shutdown does (`Terminated`, with a `DisruptionTarget`
//! condition), the agent turns DRAINED once mesopod has acknowledged every
//! kill, and REACTIVATE_AGENT gives the Node back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::containers_support::registry_agents::two_registry_agents;
use crate::maintenance_kubectl::{
    moved_to_agent_1, post_ok, running_per_node, taint_keys, web_on_agent_0,
};

use std::time::Duration;

use apiserver::Api;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use testkit::{Kubectl, ok, wait_until};

const T: Duration = Duration::from_secs(90);

async fn operator(master: &str, call: Value) {
    post_ok(&format!("{master}/api/v1"), &call).await;
}

/// The master's view of the agent on `hostname` (`/master/slaves`).
async fn slave(master: &str, hostname: &str) -> Value {
    let slaves: Value = reqwest::get(format!("{master}/master/slaves"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    slaves["slaves"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["hostname"] == hostname)
        .cloned()
        .unwrap_or(Value::Null)
}

/// The web pods that ended on `node`.
fn ended_on(api: &Api, node: &str) -> Vec<Pod> {
    api.list_pods(Some("default"), "app=web", "")
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.spec.as_ref().unwrap().node_name.as_deref() == Some(node))
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_the_operator_drains_is_cordoned_its_pods_move_and_reactivation_gives_it_back() {
    let Some(cluster) = two_registry_agents("an agent drain").await else {
        return;
    };
    let (app, image) = (&cluster.app, cluster.image.as_str());
    let api = app.api();
    let master = app.master_url().trim_end_matches('/').to_owned();
    let k = Kubectl::new(&app.api_url());
    web_on_agent_0(&k, api, image).await;

    let agent = slave(&master, "agent-0").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    operator(
        &master,
        json!({"type": "DRAIN_AGENT", "drain_agent": {"agent_id": {"value": agent}}}),
    )
    .await;

    // Mesos kills what ran there; mesopod marks the Node and the pods move.
    moved_to_agent_1(api).await;
    assert_eq!(cluster.assert_all_pulled("app=web"), 2);
    assert!(taint_keys(api, "agent-0").contains(&"mesopod.io/maintenance".to_owned()));
    let row = ok(&k.run(&["get", "node", "agent-0", "--no-headers"]).await);
    assert!(row.contains("SchedulingDisabled"), "{row}");
    let events = crate::common::cluster::event_messages(&k, "reason=AgentDraining").await;
    assert!(
        events.contains("The Mesos operator drains this agent (DRAIN_AGENT)"),
        "{events}"
    );
    // The pods that were killed say why, as a node shutdown's do.
    let ended = ended_on(api, "agent-0");
    assert_eq!(ended.len(), 2, "the two web pods of agent-0");
    for pod in &ended {
        let status = pod.status.as_ref().unwrap();
        assert_eq!(status.reason.as_deref(), Some("Terminated"), "{status:?}");
        let target = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "DisruptionTarget")
            .unwrap();
        assert_eq!(target.reason.as_deref(), Some("TerminationByKubelet"));
    }
    // Every kill acknowledged: the master calls the agent DRAINED.
    wait_until(
        "agent-0 DRAINED",
        T,
        async || slave(&master, "agent-0").await,
        |s| s["drain_info"]["state"] == "DRAINED" && s["deactivated"] == true,
    )
    .await;

    // Reactivated, it offers again: the mark goes and the daemon comes back.
    operator(
        &master,
        json!({"type": "REACTIVATE_AGENT", "reactivate_agent": {"agent_id": {"value": agent}}}),
    )
    .await;
    wait_until(
        "agent-0 schedulable, its daemon back",
        T,
        async || (taint_keys(api, "agent-0"), running_per_node(api, "agentd")),
        |(taints, daemon)| taints.is_empty() && daemon.get("agent-0") == Some(&1),
    )
    .await;
    cluster.shutdown().await;
}
