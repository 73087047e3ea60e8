//! START/STOP_MAINTENANCE, Mesos' validation messages and status codes, the
//! operator API's encodings and refusals, and read-write authentication.

use crate::common::*;
use crate::support::*;
use localmesos::{AgentConfig, Config, Credentials, LocalMesos, Security};
use mesos::codec::Codec;
use mesos::proto::TaskState;
use mesos::proto::framework_info::capability::Type as Cap;
use mesos::proto::maintenance::Schedule;
use mesos::proto::master::{self, call as op};
use mesos::proto::scheduler::{call, event};
use mesos::proto::task_status::Reason;
use serde_json::json;

#[tokio::test]
async fn machine_down_removes_agents_with_mesos_task_states_and_up_lets_them_back() {
    let cluster = simulated_cluster(1).await;
    let aware = framework("aware", &[Cap::PartitionAware]);
    let mut a = subscribe(cluster.master_url(), Codec::Protobuf, aware).await;
    let agent_id = run_task(&mut a, "ta", "cpus:1;mem:1024").await;
    let mut b = subscribe(cluster.master_url(), Codec::Json, framework("plain", &[])).await;
    run_task(&mut b, "tb", "cpus:1;mem:1024").await;

    // Not DRAINING yet: refused, nothing changes.
    let (status, body) = post_json(
        &cluster,
        "/master/machine/down",
        &json!([{"hostname": "agent-0", "ip": IP}]),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        r#"Machine '{"hostname":"agent-0","ip":"127.0.0.1"}' is not in DRAINING mode and cannot be brought down"#
    );

    assert_eq!(
        update_schedule(&cluster, Codec::Json, schedule(&["agent-0"]))
            .await
            .0,
        200
    );
    let io = inverse_offers(&mut a).await.remove(0);
    let (status, body) = machines_call(&cluster, op::Type::StartMaintenance, &["Agent-0"]).await;
    assert_eq!((status, body.as_str()), (200, ""));

    // The inverse offer goes first, then the tasks: PARTITION_AWARE ones
    // TASK_GONE_BY_OPERATOR, the others TASK_LOST.
    let ev = a.expect(event::Type::RescindInverseOffer).await;
    assert_eq!(ev.rescind_inverse_offer.unwrap().inverse_offer_id, io.id);
    let gone = a.update().await;
    assert_eq!(state_of(&gone), TaskState::TaskGoneByOperator);
    assert_eq!(
        gone.reason,
        Some(Reason::ReasonAgentRemovedByOperator as i32)
    );
    assert_eq!(
        gone.message.as_deref(),
        Some("Operator initiated 'Machine DOWN'")
    );
    let lost = b.update().await;
    assert_eq!(state_of(&lost), TaskState::TaskLost);
    assert_eq!(lost.reason, Some(Reason::ReasonAgentRemoved as i32));
    assert!(
        cluster
            .state()
            .agents
            .iter()
            .all(|ag| ag.id != agent_id || ag.status != "active"),
        "the agent is removed"
    );

    let s = status_json(&cluster).await;
    assert_eq!(
        s["down_machines"],
        json!([{"hostname": "agent-0", "ip": IP}])
    );
    // A DOWN machine's agent may not register, and may not leave the schedule.
    let again = AgentConfig::from_flags("cpus:2;mem:2048", "", 0)
        .unwrap()
        .simulated(None)
        .with_hostname("agent-0");
    let refused = cluster.add_agent(again.clone()).await;
    assert!(
        matches!(refused, Err(localmesos::Error::MachineDown(_))),
        "{refused:?}"
    );
    let (status, body) = post_json(&cluster, "/maintenance/schedule", &json!({})).await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        r#"Machine '{"hostname":"agent-0","ip":"127.0.0.1"}' is deactivated and cannot be removed from the schedule"#
    );

    // UP: out of the schedule, and the agent registers and is offered again.
    let (status, _) = post_json(
        &cluster,
        "/master/machine/up",
        &json!([{"hostname": "agent-0", "ip": IP}]),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(status_json(&cluster).await, json!({}));
    let got = get_json(&format!("{}/maintenance/schedule", cluster.master_url())).await;
    assert_eq!(got, json!({}));
    // A steps aside so the new agent's offer goes to B.
    assert_eq!(a.simple(call::Type::Suppress).await, 202);
    let back = cluster.add_agent(again).await.unwrap();
    assert_eq!(b.simple(call::Type::Revive).await, 202);
    loop {
        let offers = b.offers().await;
        if offers.iter().any(|o| o.agent_id.as_ref() == Some(&back)) {
            break;
        }
    }
    let (status, body) = machines_call(&cluster, op::Type::StopMaintenance, &["agent-0"]).await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        r#"Machine '{"hostname":"agent-0","ip":"127.0.0.1"}' is not in DOWN mode and cannot be brought up"#
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn bad_schedules_and_machine_lists_get_mesos_messages() {
    let cluster = simulated_cluster(1).await;
    let m = |h: &str, ip: &str| json!({"hostname": h, "ip": ip});
    let start = json!({"nanoseconds": 1});
    let cases = [
        (
            json!({"windows": [{"machine_ids": [m("a", IP)], "unavailability": {"start": start}},
                               {"machine_ids": [m("A", IP)], "unavailability": {"start": start}}]}),
            r#"Machine '{"hostname":"A","ip":"127.0.0.1"}' appears more than once in the schedule"#,
        ),
        (
            json!({"windows": [{"machine_ids": [{}], "unavailability": {"start": start}}]}),
            "Both 'hostname' and 'ip' for a machine are empty",
        ),
        (
            json!({"windows": [{"machine_ids": [m("a", "not-an-ip")], "unavailability": {"start": start}}]}),
            "Failed to parse IPv4: not-an-ip",
        ),
        (
            json!({"windows": [{"machine_ids": [], "unavailability": {"start": start}}]}),
            "List of machines in the maintenance window is empty",
        ),
        (
            json!({"windows": [{"machine_ids": [m("a", IP)], "unavailability": {"start": start, "duration": {"nanoseconds": -1}}}]}),
            "Unavailability 'duration' is negative",
        ),
    ];
    for (body, message) in &cases {
        let (status, text) = post_json(&cluster, "/master/maintenance/schedule", body).await;
        assert_eq!((status, text.as_str()), (400, *message), "{body}");
        // The same through the operator API.
        let s: Schedule = serde_json::from_value(body.clone()).unwrap();
        let (status, text) = update_schedule(&cluster, Codec::Protobuf, s).await;
        assert_eq!((status, text.as_str()), (400, *message), "{body}");
    }
    assert_eq!(status_json(&cluster).await, json!({}), "nothing changed");

    let (status, text) = post_json(&cluster, "/machine/down", &json!([])).await;
    assert_eq!((status, text.as_str()), (400, "List of machines is empty"));
    let (status, text) = post_json(
        &cluster,
        "/machine/down",
        &json!([m("elsewhere", "10.0.0.9")]),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        text,
        r#"Machine '{"hostname":"elsewhere","ip":"10.0.0.9"}' is not part of a maintenance schedule"#
    );
    let (status, text) = post_json(
        &cluster,
        "/machine/up",
        &json!([m("agent-0", IP), m("AGENT-0", IP)]),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        text.ends_with("appears more than once in the schedule"),
        "{text}"
    );
    let (status, _) = post_json(&cluster, "/machine/up", &json!({"not": "an array"})).await;
    assert_eq!(status, 400);
    let resp = client()
        .get(format!("{}/machine/down", cluster.master_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(
        resp.text().await.unwrap(),
        "Expecting one of { 'POST' }, but received 'GET'"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn the_operator_api_speaks_json_and_protobuf_and_refuses_what_it_does_not_serve() {
    let cluster = simulated_cluster(1).await;
    let url = format!("{}/api/v1", cluster.master_url());
    // JSON in, protobuf out.
    let body = json!({"type": "UPDATE_MAINTENANCE_SCHEDULE",
        "update_maintenance_schedule": {"schedule": {"windows": [{
            "machine_ids": [{"hostname": "agent-0", "ip": IP}],
            "unavailability": {"start": {"nanoseconds": 5}}}]}}});
    let resp = client()
        .post(&url)
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = client()
        .post(&url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/x-protobuf")
        .body(json!({"type": "GET_MAINTENANCE_STATUS"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "application/x-protobuf");
    let r: master::Response = Codec::Protobuf
        .decode(&resp.bytes().await.unwrap())
        .unwrap();
    let status = r.get_maintenance_status.unwrap().status.unwrap();
    assert_eq!(status.draining_machines[0].id, Some(machine("agent-0")));

    // Calls of other types are refused, never pretended.
    let (code, text) = operator(&cluster, Codec::Json, &op_call(op::Type::GetState)).await;
    assert_eq!(code, 501);
    assert!(String::from_utf8_lossy(&text).contains("GET_STATE is not implemented"));
    assert_eq!(
        operator(&cluster, Codec::Protobuf, &op_call(op::Type::Unknown))
            .await
            .0,
        501
    );
    let (code, text) = operator(
        &cluster,
        Codec::Protobuf,
        &op_call(op::Type::StartMaintenance),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(
        String::from_utf8_lossy(&text),
        "Failed to validate master::Call: Expecting 'start_maintenance' to be present"
    );
    let (code, _) = operator(&cluster, Codec::Protobuf, &master::Call::default()).await;
    assert_eq!(code, 400, "no type");
    let resp = client().post(&url).body("{}").send().await.unwrap();
    assert_eq!(resp.status(), 400, "no Content-Type");
    let resp = client()
        .post(&url)
        .header("Content-Type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 415);
    let resp = client()
        .post(&url)
        .header("Content-Type", "application/json")
        .header("Accept", "text/html")
        .body(json!({"type": "GET_MAINTENANCE_SCHEDULE"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 406);
    let resp = client().get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 405);
    cluster.shutdown().await;
}

#[tokio::test]
async fn readwrite_authentication_guards_the_writes() {
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
    let base = cluster.master_url().to_owned();
    let get_schedule = json!({"type": "GET_MAINTENANCE_SCHEDULE"}).to_string();
    for (path, body) in [
        ("/api/v1", get_schedule.clone()),
        ("/master/maintenance/schedule", "{}".to_owned()),
        ("/machine/down", "[]".to_owned()),
        ("/master/machine/up", "[]".to_owned()),
    ] {
        let resp = client()
            .post(format!("{base}{path}"))
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 401, "{path}");
        assert_eq!(
            resp.headers()["www-authenticate"],
            r#"Basic realm="mesos-master-readwrite""#
        );
    }
    let wrong = client()
        .post(format!("{base}/api/v1"))
        .basic_auth("ops", Some("nope"))
        .header("Content-Type", "application/json")
        .body(get_schedule.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let ok = client()
        .post(format!("{base}/api/v1"))
        .basic_auth("ops", Some("s3cret"))
        .header("Content-Type", "application/json")
        .body(get_schedule)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    // The status is read-only: open while only read-write is authenticated.
    let resp = client()
        .get(format!("{base}/maintenance/status"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    cluster.shutdown().await;
}
