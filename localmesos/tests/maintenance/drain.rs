//! Agent deactivation and draining over the operator API (Mesos 1.9+):
//! DEACTIVATE_AGENT, DRAIN_AGENT, REACTIVATE_AGENT, and the drain state as
//! GET_AGENTS, `/master/state` and `/master/slaves` show it.

use crate::common::*;
use crate::support::*;
use localmesos::{Config, Credentials, LocalMesos, RestartOptions, Security};
use mesos::codec::Codec;
use mesos::proto::framework_info::capability::Type as Cap;
use mesos::proto::master::{self, call as op, response};
use mesos::proto::scheduler::{call, event};
use mesos::proto::task_status::Reason;
use mesos::proto::{AgentId, DrainState, DurationInfo, KillPolicy, TaskState};
use serde_json::{Value, json};

fn agent_call(kind: op::Type, agent: &str) -> master::Call {
    let id = Some(AgentId::new(agent));
    let mut c = op_call(kind);
    match kind {
        op::Type::DrainAgent => {
            c.drain_agent = Some(op::DrainAgent {
                agent_id: id,
                ..Default::default()
            });
        }
        op::Type::DeactivateAgent => {
            c.deactivate_agent = Some(op::DeactivateAgent { agent_id: id })
        }
        _ => c.reactivate_agent = Some(op::ReactivateAgent { agent_id: id }),
    }
    c
}

fn drain_call(agent: &str, max_grace_secs: Option<i64>, mark_gone: bool) -> master::Call {
    let mut c = agent_call(op::Type::DrainAgent, agent);
    c.drain_agent = Some(op::DrainAgent {
        agent_id: Some(AgentId::new(agent)),
        max_grace_period: max_grace_secs.map(|s| op::Duration {
            seconds: Some(s),
            nanos: None,
        }),
        mark_gone: Some(mark_gone),
    });
    c
}

/// An operator call's status and text body.
async fn call_text(cluster: &LocalMesos, codec: Codec, c: &master::Call) -> (u16, String) {
    let (status, body) = operator(cluster, codec, c).await;
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// GET_AGENTS' registered agents, in `codec`.
async fn agents(cluster: &LocalMesos, codec: Codec) -> Vec<master::response::get_agents::Agent> {
    let (status, body) = operator(cluster, codec, &op_call(op::Type::GetAgents)).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let r: master::Response = codec.decode(&body).unwrap();
    assert_eq!(r.kind(), Some(response::Type::GetAgents));
    r.get_agents.unwrap().agents
}

async fn get_agent(
    cluster: &LocalMesos,
    codec: Codec,
    id: &str,
) -> master::response::get_agents::Agent {
    agents(cluster, codec)
        .await
        .into_iter()
        .find(|a| a.agent_info.as_ref().and_then(|i| i.id.as_ref()) == Some(&AgentId::new(id)))
        .unwrap()
}

fn drain_state(a: &master::response::get_agents::Agent) -> Option<DrainState> {
    a.drain_info
        .as_ref()
        .and_then(|d| d.state)
        .and_then(|s| DrainState::try_from(s).ok())
}

/// The agent as `path` (`/master/state` or `/master/slaves`) shows it.
async fn slave_json(cluster: &LocalMesos, path: &str, id: &str) -> Option<Value> {
    let v = get_json(&format!("{}{path}", cluster.master_url())).await;
    v["slaves"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .cloned()
}

#[tokio::test]
async fn deactivation_rescinds_offers_keeps_tasks_and_reactivation_offers_again() {
    let cluster = simulated_cluster(1).await;
    let mut a = subscribe(cluster.master_url(), Codec::Protobuf, framework("a", &[])).await;
    let agent = run_task(&mut a, "t0", "cpus:1;mem:1024").await;
    assert_eq!(a.simple(call::Type::Revive).await, 202);
    let held = a.offers().await.remove(0);

    let (status, body) = call_text(
        &cluster,
        Codec::Json,
        &agent_call(op::Type::DeactivateAgent, &agent),
    )
    .await;
    assert_eq!((status, body.as_str()), (200, ""));
    let ev = a.expect(event::Type::Rescind).await;
    assert_eq!(ev.rescind.unwrap().offer_id, held.id);
    assert_eq!(a.simple(call::Type::Revive).await, 202);
    a.assert_none(event::Type::Offers, QUIET).await;
    a.assert_none(event::Type::Update, QUIET).await;

    let got = get_agent(&cluster, Codec::Protobuf, &agent).await;
    assert_eq!((got.active, got.deactivated), (false, Some(true)));
    assert_eq!(got.drain_info, None, "deactivation alone does not drain");
    let slave = slave_json(&cluster, "/master/state", &agent).await.unwrap();
    assert_eq!(
        (&slave["active"], &slave["deactivated"]),
        (&json!(false), &json!(true))
    );
    assert_eq!(slave.get("drain_info"), None);
    let state = get_json(&format!("{}/master/state", cluster.master_url())).await;
    assert_eq!(state["deactivated_slaves"], 1);
    assert_eq!(state["frameworks"][0]["tasks"][0]["state"], "TASK_RUNNING");

    let (status, _) = call_text(
        &cluster,
        Codec::Protobuf,
        &agent_call(op::Type::ReactivateAgent, &agent),
    )
    .await;
    assert_eq!(status, 200);
    let offers = a.offers().await;
    assert_eq!(offers[0].agent_id, Some(AgentId::new(&agent)));
    let got = get_agent(&cluster, Codec::Json, &agent).await;
    assert_eq!((got.active, got.deactivated), (true, Some(false)));
    // Only a deactivated agent can be reactivated.
    let (status, body) = call_text(
        &cluster,
        Codec::Json,
        &agent_call(op::Type::ReactivateAgent, &agent),
    )
    .await;
    assert_eq!((status, body.as_str()), (400, "Agent is not deactivated"));
    cluster.shutdown().await;
}

#[tokio::test]
async fn draining_kills_every_task_and_is_drained_once_the_kills_are_acknowledged() {
    let cluster = simulated_cluster(1).await;
    let mut a = subscribe(cluster.master_url(), Codec::Json, framework("a", &[])).await;
    let agent = run_task(&mut a, "ta", "cpus:1;mem:1024").await;
    let mut b = subscribe(cluster.master_url(), Codec::Protobuf, framework("b", &[])).await;
    run_task(&mut b, "tb", "cpus:1;mem:1024").await;

    let (status, body) = call_text(
        &cluster,
        Codec::Protobuf,
        &drain_call(&agent, Some(10), false),
    )
    .await;
    assert_eq!((status, body.as_str()), (200, ""));
    let killed_a = a.update().await;
    let killed_b = b.update().await;
    for k in [&killed_a, &killed_b] {
        assert_eq!(state_of(k), TaskState::TaskKilled);
        assert_eq!(k.reason, Some(Reason::ReasonAgentDraining as i32));
    }

    // DRAINING until every kill is acknowledged; the config as Mesos keeps
    // it (the Duration devolved into a DurationInfo).
    let got = get_agent(&cluster, Codec::Json, &agent).await;
    assert_eq!(drain_state(&got), Some(DrainState::Draining));
    let config = got.drain_info.unwrap().config.unwrap();
    assert_eq!(
        config.max_grace_period,
        Some(DurationInfo {
            nanoseconds: 10_000_000_000
        })
    );
    assert_eq!(config.mark_gone, Some(false));
    assert_eq!((got.active, got.deactivated), (false, Some(true)));
    assert!(got.estimated_drain_start_time.is_some());
    let slave = slave_json(&cluster, "/master/state", &agent).await.unwrap();
    assert_eq!(
        slave["drain_info"],
        json!({"state": "DRAINING", "config": {"max_grace_period": {"nanoseconds": 10_000_000_000i64}, "mark_gone": false}})
    );
    assert!(
        slave["estimated_drain_start_time_seconds"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    // Mesos refuses to reactivate a DRAINING agent.
    let (status, body) = call_text(
        &cluster,
        Codec::Json,
        &agent_call(op::Type::ReactivateAgent, &agent),
    )
    .await;
    assert_eq!(
        (status, body.as_str()),
        (400, "Agent is still in the DRAINING state")
    );

    assert_eq!(a.ack(&killed_a).await, 202);
    let got = get_agent(&cluster, Codec::Protobuf, &agent).await;
    assert_eq!(drain_state(&got), Some(DrainState::Draining));
    assert_eq!(b.ack(&killed_b).await, 202);
    let got = get_agent(&cluster, Codec::Protobuf, &agent).await;
    assert_eq!(drain_state(&got), Some(DrainState::Drained));
    let slave = slave_json(&cluster, "/master/slaves", &agent)
        .await
        .unwrap();
    assert_eq!(slave["drain_info"]["state"], "DRAINED");
    assert_eq!(slave["deactivated"], true);

    // Drained: no offers until it is reactivated, then offers again (to A
    // alone, so the test knows where to look).
    assert_eq!(b.simple(call::Type::Suppress).await, 202);
    assert_eq!(a.simple(call::Type::Revive).await, 202);
    a.assert_none(event::Type::Offers, QUIET).await;
    let (status, _) = call_text(
        &cluster,
        Codec::Json,
        &agent_call(op::Type::ReactivateAgent, &agent),
    )
    .await;
    assert_eq!(status, 200);
    a.offers().await;
    let got = get_agent(&cluster, Codec::Json, &agent).await;
    assert_eq!(
        (got.drain_info, got.estimated_drain_start_time),
        (None, None)
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn max_grace_period_caps_the_kill_grace_of_a_task_that_ignores_sigterm() {
    let cluster = cluster(vec![agent("cpus:2;mem:2048", false)], fast_timing()).await;
    let mut a = subscribe(cluster.master_url(), Codec::Protobuf, framework("a", &[])).await;
    let offers = a.offers().await;
    let offer = &offers[0];
    let mut task = command_task(
        "stubborn",
        offer,
        "cpus:1;mem:64",
        "trap '' TERM; sleep 1000",
    );
    // An hour's grace: only the drain's cap lets the kill end in time.
    task.kill_policy = Some(KillPolicy {
        grace_period: Some(DurationInfo {
            nanoseconds: 3_600_000_000_000,
        }),
    });
    assert_eq!(a.launch(offer, vec![task]).await, 202);
    loop {
        let s = a.update().await;
        assert_eq!(a.ack(&s).await, 202);
        if state_of(&s) == TaskState::TaskRunning {
            break;
        }
    }
    let agent = offer.agent_id.clone().unwrap().value;
    let (status, _) = call_text(&cluster, Codec::Json, &drain_call(&agent, Some(0), false)).await;
    assert_eq!(status, 200);
    let killed = a.update().await;
    assert_eq!(state_of(&killed), TaskState::TaskKilled);
    assert_eq!(killed.reason, Some(Reason::ReasonAgentDraining as i32));
    assert_eq!(a.ack(&killed).await, 202);
    let got = get_agent(&cluster, Codec::Json, &agent).await;
    assert_eq!(drain_state(&got), Some(DrainState::Drained));
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_drain_that_marks_gone_ends_with_the_agent_gone() {
    let cluster = simulated_cluster(1).await;
    let aware = framework("aware", &[Cap::PartitionAware]);
    let mut a = subscribe(cluster.master_url(), Codec::Json, aware).await;
    let agent = run_task(&mut a, "ta", "cpus:1;mem:1024").await;

    let (status, _) = call_text(&cluster, Codec::Json, &drain_call(&agent, None, true)).await;
    assert_eq!(status, 200);
    let gone = a.update().await;
    assert_eq!(state_of(&gone), TaskState::TaskGoneByOperator);
    assert_eq!(gone.reason, Some(Reason::ReasonAgentDraining as i32));
    let got = get_agent(&cluster, Codec::Json, &agent).await;
    assert_eq!(drain_state(&got), Some(DrainState::Draining));
    assert_eq!(
        got.drain_info.unwrap().config.unwrap().max_grace_period,
        None
    );

    assert_eq!(a.ack(&gone).await, 202);
    assert!(agents(&cluster, Codec::Protobuf).await.is_empty());
    assert_eq!(slave_json(&cluster, "/master/state", &agent).await, None);
    assert!(
        cluster
            .state()
            .agents
            .iter()
            .any(|ag| ag.id == agent && ag.status == "gone")
    );
    // Gone is for good: the master no longer knows it.
    for kind in [op::Type::DeactivateAgent, op::Type::DrainAgent] {
        let (status, body) = call_text(&cluster, Codec::Json, &agent_call(kind, &agent)).await;
        assert_eq!((status, body.as_str()), (400, "Unknown agent"));
    }
    cluster.shutdown().await;
}

#[tokio::test]
async fn refusals_carry_mesos_status_codes_and_messages() {
    let cluster = simulated_cluster(1).await;
    let agent = agents(&cluster, Codec::Json).await[0]
        .agent_info
        .clone()
        .unwrap()
        .id
        .unwrap()
        .value;
    for codec in [Codec::Json, Codec::Protobuf] {
        for kind in [op::Type::DeactivateAgent, op::Type::DrainAgent] {
            let (status, body) = call_text(&cluster, codec, &agent_call(kind, "nope")).await;
            assert_eq!((status, body.as_str()), (400, "Unknown agent"));
        }
        let (status, body) = call_text(
            &cluster,
            codec,
            &agent_call(op::Type::ReactivateAgent, "nope"),
        )
        .await;
        assert_eq!((status, body.as_str()), (400, "Agent is not deactivated"));
        let (status, body) = call_text(&cluster, codec, &op_call(op::Type::DrainAgent)).await;
        assert_eq!(
            (status, body.as_str()),
            (
                400,
                "Failed to validate master::Call: Expecting 'drain_agent' to be present"
            )
        );
    }

    // An agent on a machine of the maintenance schedule cannot be drained.
    assert_eq!(
        update_schedule(&cluster, Codec::Json, schedule(&["AGENT-0"]))
            .await
            .0,
        200
    );
    let (status, body) = call_text(&cluster, Codec::Json, &drain_call(&agent, None, false)).await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        format!(
            "Agent {agent} is part of a maintenance schedule under Machine AGENT-0 (127.0.0.1)"
        )
    );

    // Draining an agent with no task drains it at once, and draining it
    // again replaces the config.
    assert_eq!(
        call_text(
            &cluster,
            Codec::Json,
            &master::Call {
                update_maintenance_schedule: Some(op::UpdateMaintenanceSchedule {
                    schedule: Some(Default::default()),
                }),
                ..op_call(op::Type::UpdateMaintenanceSchedule)
            },
        )
        .await
        .0,
        200
    );
    assert_eq!(
        call_text(&cluster, Codec::Json, &drain_call(&agent, None, false))
            .await
            .0,
        200
    );
    let got = get_agent(&cluster, Codec::Json, &agent).await;
    assert_eq!(drain_state(&got), Some(DrainState::Drained));
    assert_eq!(
        call_text(
            &cluster,
            Codec::Protobuf,
            &drain_call(&agent, Some(5), false)
        )
        .await
        .0,
        200
    );
    let got = get_agent(&cluster, Codec::Protobuf, &agent).await;
    assert_eq!(drain_state(&got), Some(DrainState::Drained));
    assert_eq!(
        got.drain_info.unwrap().config.unwrap().max_grace_period,
        Some(DurationInfo {
            nanoseconds: 5_000_000_000
        })
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn drain_and_deactivation_outlive_a_master_restart() {
    let cluster = simulated_cluster(2).await;
    let ids: Vec<String> = agents(&cluster, Codec::Json)
        .await
        .iter()
        .map(|a| a.agent_info.clone().unwrap().id.unwrap().value)
        .collect();
    assert_eq!(
        call_text(&cluster, Codec::Json, &drain_call(&ids[0], None, false))
            .await
            .0,
        200
    );
    assert_eq!(
        call_text(
            &cluster,
            Codec::Json,
            &agent_call(op::Type::DeactivateAgent, &ids[1])
        )
        .await
        .0,
        200
    );
    cluster.restart_master(RestartOptions {
        keep_state: true,
        recovery_ms: 0,
        agent_reregistration_ms: 0,
    });
    eventually(|| {
        let s = cluster.state();
        !s.recovering && s.agents.iter().all(|a| a.status == "active")
    })
    .await;
    let mut a = subscribe(cluster.master_url(), Codec::Json, framework("a", &[])).await;
    // Neither agent is offered after the restart either.
    a.assert_none(event::Type::Offers, QUIET).await;
    let all = agents(&cluster, Codec::Json).await;
    let by = |id: &str| {
        all.iter()
            .find(|a| a.agent_info.as_ref().unwrap().id.as_ref().unwrap().value == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(drain_state(&by(&ids[0])), Some(DrainState::Drained));
    assert_eq!(by(&ids[1]).deactivated, Some(true));
    cluster.shutdown().await;
}

#[tokio::test]
async fn the_drain_calls_need_the_readwrite_credentials() {
    testkit::init_crypto();
    let cluster = LocalMesos::start(Config {
        agents: vec![agent("cpus:1;mem:1024", true)],
        timing: fast_timing(),
        security: Security {
            framework_credentials: Some(Credentials::single("ops", "s3cret")),
            authenticate_http_readwrite: true,
            ..Security::default()
        },
        ..Config::default()
    })
    .await
    .unwrap();
    let agent = cluster.state().agents[0].id.clone();
    let url = format!("{}/api/v1", cluster.master_url());
    let post = |call: master::Call, auth: Option<(&str, &str)>| {
        let mut req = client()
            .post(&url)
            .header("Content-Type", "application/x-protobuf")
            .body(Codec::Protobuf.encode(&call));
        if let Some((user, secret)) = auth {
            req = req.basic_auth(user, Some(secret));
        }
        req.send()
    };
    for kind in [
        op::Type::DrainAgent,
        op::Type::DeactivateAgent,
        op::Type::ReactivateAgent,
    ] {
        let resp = post(agent_call(kind, &agent), None).await.unwrap();
        assert_eq!(resp.status(), 401, "{kind:?}");
        assert_eq!(
            resp.headers()["www-authenticate"],
            r#"Basic realm="mesos-master-readwrite""#
        );
    }
    let resp = post(drain_call(&agent, None, false), Some(("ops", "s3cret")))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_partitioned_agent_drains_once_it_is_back() {
    let cluster = simulated_cluster(1).await;
    let mut a = subscribe(cluster.master_url(), Codec::Protobuf, framework("a", &[])).await;
    let agent = run_task(&mut a, "ta", "cpus:1;mem:1024").await;
    cluster.partition_agent(&agent).unwrap();

    // The master takes the drain, but the agent does not hear it.
    let (status, _) = call_text(&cluster, Codec::Json, &drain_call(&agent, None, false)).await;
    assert_eq!(status, 200);
    a.assert_none(event::Type::Update, QUIET).await;
    let got = get_agent(&cluster, Codec::Json, &agent).await;
    assert_eq!(drain_state(&got), Some(DrainState::Draining));

    // Back: it is told to drain again, and does.
    cluster.heal_agent(&agent).unwrap();
    let killed = a.update().await;
    assert_eq!(state_of(&killed), TaskState::TaskKilled);
    assert_eq!(killed.reason, Some(Reason::ReasonAgentDraining as i32));
    assert_eq!(a.ack(&killed).await, 202);
    let got = get_agent(&cluster, Codec::Json, &agent).await;
    assert_eq!(drain_state(&got), Some(DrainState::Drained));
    cluster.shutdown().await;
}
