//! Maintenance: schedules, DRAINING machines' offers and inverse offers,
//! the frameworks' answers, START/STOP_MAINTENANCE, over the v1 operator
//! API (`POST /api/v1`, JSON and protobuf) and Mesos' JSON endpoints.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use localmesos::{AgentConfig, Config, Credentials, LocalMesos, Security};
use mesos::codec::Codec;
use mesos::proto::allocator::inverse_offer_status;
use mesos::proto::framework_info::capability::Type as Cap;
use mesos::proto::maintenance::{Schedule, Window};
use mesos::proto::master::{self, call as op, response};
use mesos::proto::scheduler::{Call, call, event};
use mesos::proto::task_status::Reason;
use mesos::proto::{
    DurationInfo, Filters, InverseOffer, MachineId, OfferId, TaskState, TimeInfo, Unavailability,
};
use serde_json::{Value, json};

/// Every localmesos agent advertises loopback.
const IP: &str = "127.0.0.1";
/// How long a test waits to be sure something does not happen (several
/// allocation rounds of `fast_timing`).
const QUIET: Duration = Duration::from_millis(500);

fn machine(host: &str) -> MachineId {
    MachineId {
        hostname: Some(host.into()),
        ip: Some(IP.into()),
    }
}

fn unavailability() -> Unavailability {
    Unavailability {
        start: Some(TimeInfo {
            nanoseconds: 1_900_000_000_000_000_000,
        }),
        duration: Some(DurationInfo {
            nanoseconds: 3_600_000_000_000,
        }),
    }
}

fn schedule(hosts: &[&str]) -> Schedule {
    Schedule {
        windows: vec![Window {
            machine_ids: hosts.iter().map(|h| machine(h)).collect(),
            unavailability: Some(unavailability()),
        }],
    }
}

fn client() -> reqwest::Client {
    testkit::init_crypto();
    reqwest::Client::new()
}

/// `POST /api/v1` in `codec`, answered in `codec`: status and body.
async fn operator(cluster: &LocalMesos, codec: Codec, c: &master::Call) -> (u16, Vec<u8>) {
    let resp = client()
        .post(format!("{}/api/v1", cluster.master_url()))
        .header("Content-Type", codec.content_type())
        .header("Accept", codec.content_type())
        .body(codec.encode(c))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.bytes().await.unwrap().to_vec())
}

fn op_call(kind: op::Type) -> master::Call {
    master::Call {
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

async fn update_schedule(cluster: &LocalMesos, codec: Codec, s: Schedule) -> (u16, String) {
    let c = master::Call {
        update_maintenance_schedule: Some(op::UpdateMaintenanceSchedule { schedule: Some(s) }),
        ..op_call(op::Type::UpdateMaintenanceSchedule)
    };
    let (status, body) = operator(cluster, codec, &c).await;
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// START or STOP_MAINTENANCE over the operator API (JSON).
async fn machines_call(cluster: &LocalMesos, kind: op::Type, hosts: &[&str]) -> (u16, String) {
    let machines = hosts.iter().map(|h| machine(h)).collect();
    let mut c = op_call(kind);
    match kind {
        op::Type::StartMaintenance => c.start_maintenance = Some(op::StartMaintenance { machines }),
        _ => c.stop_maintenance = Some(op::StopMaintenance { machines }),
    }
    let (status, body) = operator(cluster, Codec::Json, &c).await;
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// GET_MAINTENANCE_STATUS over the operator API, as JSON.
async fn status_json(cluster: &LocalMesos) -> Value {
    let (status, body) = operator(
        cluster,
        Codec::Json,
        &op_call(op::Type::GetMaintenanceStatus),
    )
    .await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["type"], "GET_MAINTENANCE_STATUS");
    v["get_maintenance_status"]["status"].clone()
}

/// A POST of JSON to one of Mesos' maintenance endpoints.
async fn post_json(cluster: &LocalMesos, path: &str, body: &Value) -> (u16, String) {
    let resp = client()
        .post(format!("{}{path}", cluster.master_url()))
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// Launches a long-running task of `resources` on the first offer, leaving
/// the rest refused for an hour so the next framework gets it; returns
/// the agent id once the task runs.
async fn run_task(sub: &mut Sub, id: &str, resources: &str) -> String {
    let offers = sub.offers().await;
    let offer = &offers[0];
    let task = command_task(id, offer, resources, "sleep 1000");
    let accepted = sub
        .accept(
            vec![offer.id.clone().unwrap()],
            vec![launch(vec![task])],
            Some(3600.0),
        )
        .await;
    assert_eq!(accepted, 202);
    let status = sub.update().await;
    assert_eq!(state_of(&status), TaskState::TaskRunning);
    assert_eq!(sub.ack(&status).await, 202);
    offer.agent_id.clone().unwrap().value
}

/// The next INVERSE_OFFERS' inverse offers.
async fn inverse_offers(sub: &mut Sub) -> Vec<InverseOffer> {
    sub.expect(event::Type::InverseOffers)
        .await
        .inverse_offers
        .unwrap()
        .inverse_offers
}

async fn answer(sub: &Sub, accept: bool, ids: Vec<OfferId>, refuse: Option<f64>) -> u16 {
    let filters = refuse.map(|s| Filters {
        refuse_seconds: Some(s),
    });
    let mut c = Call::default();
    if accept {
        c.r#type = Some(call::Type::AcceptInverseOffers as i32);
        c.accept_inverse_offers = Some(call::AcceptInverseOffers {
            inverse_offer_ids: ids,
            filters,
        });
    } else {
        c.r#type = Some(call::Type::DeclineInverseOffers as i32);
        c.decline_inverse_offers = Some(call::DeclineInverseOffers {
            inverse_offer_ids: ids,
            filters,
        });
    }
    sub.call(c).await.as_u16()
}

#[tokio::test]
async fn a_schedule_drains_offers_carry_unavailability_and_only_holders_get_inverse_offers() {
    let cluster = simulated_cluster(2).await;
    let mut a = subscribe(cluster.master_url(), Codec::Protobuf, framework("a", &[])).await;
    // A fills agent-0 with a task and holds an offer for agent-1.
    let offers = a.offers().await;
    let on0 = offers.iter().find(|o| o.hostname == "agent-0").unwrap();
    let task = command_task("t0", on0, "cpus:4;mem:8192", "sleep 1000");
    assert_eq!(a.launch(on0, vec![task]).await, 202);
    let running = a.update().await;
    assert_eq!(a.ack(&running).await, 202);
    // B holds nothing anywhere: it suppresses its offers.
    let mut b = subscribe(cluster.master_url(), Codec::Json, framework("b", &[])).await;
    assert_eq!(b.simple(call::Type::Suppress).await, 202);

    let (status, body) =
        update_schedule(&cluster, Codec::Json, schedule(&["agent-0", "AGENT-1"])).await;
    assert_eq!((status, body.as_str()), (200, ""));

    // A: agent-1's offer is rescinded and made again with the interval, and
    // an inverse offer comes for each agent it holds something on.
    let (mut offered, mut inverse) = (None, Vec::new());
    while offered.is_none() || inverse.len() < 2 {
        let ev = a.next().await.unwrap();
        match ev.kind() {
            Some(event::Type::Offers) => {
                for o in ev.offers.unwrap().offers {
                    offered = Some(o);
                }
            }
            Some(event::Type::InverseOffers) => {
                inverse.extend(ev.inverse_offers.unwrap().inverse_offers)
            }
            _ => {}
        }
    }
    let offer = offered.unwrap();
    assert_eq!(offer.hostname, "agent-1");
    assert_eq!(offer.unavailability, Some(unavailability()));
    let io = inverse
        .iter()
        .find(|io| io.agent_id.as_ref().unwrap().value == running.agent_id.clone().unwrap().value)
        .unwrap();
    assert_eq!(io.framework_id, Some(a.framework_id.clone()));
    assert_eq!(io.unavailability, Some(unavailability()));
    assert!(io.resources.is_empty(), "maintenance asks for everything");
    assert!(io.id.is_some());
    b.assert_none(event::Type::InverseOffers, QUIET).await;

    // The schedule reads back, as Mesos' JSON endpoint and the operator API.
    let got = get_json(&format!(
        "{}/master/maintenance/schedule",
        cluster.master_url()
    ))
    .await;
    assert_eq!(got["windows"][0]["machine_ids"][1]["hostname"], "AGENT-1");
    let (status, body) = operator(
        &cluster,
        Codec::Protobuf,
        &op_call(op::Type::GetMaintenanceSchedule),
    )
    .await;
    assert_eq!(status, 200);
    let r: master::Response = Codec::Protobuf.decode(&body).unwrap();
    assert_eq!(r.kind(), Some(response::Type::GetMaintenanceSchedule));
    assert_eq!(
        r.get_maintenance_schedule.unwrap().schedule,
        Some(schedule(&["agent-0", "AGENT-1"]))
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn accept_and_decline_show_in_the_maintenance_status() {
    let cluster = simulated_cluster(1).await;
    let mut a = subscribe(cluster.master_url(), Codec::Protobuf, framework("a", &[])).await;
    run_task(&mut a, "ta", "cpus:2;mem:4096").await;
    let mut b = subscribe(cluster.master_url(), Codec::Json, framework("b", &[])).await;
    run_task(&mut b, "tb", "cpus:2;mem:4096").await;
    assert_eq!(
        update_schedule(&cluster, Codec::Protobuf, schedule(&["agent-0"]))
            .await
            .0,
        200
    );

    let from_a = inverse_offers(&mut a).await;
    let from_b = inverse_offers(&mut b).await;
    let ids = |v: &[InverseOffer]| {
        v.iter()
            .map(|io| io.id.clone().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(answer(&a, true, ids(&from_a), Some(3600.0)).await, 202);
    assert_eq!(answer(&b, false, ids(&from_b), Some(3600.0)).await, 202);

    // Answers are recorded (before the 202) with their time.
    let s = status_json(&cluster).await;
    let statuses = s["draining_machines"][0]["statuses"]
        .as_array()
        .cloned()
        .unwrap();
    assert_eq!(statuses.len(), 2);
    let by = |fw: &str| {
        statuses
            .iter()
            .find(|s| s["framework_id"]["value"] == fw)
            .cloned()
            .unwrap()
    };
    assert_eq!(by(&a.framework_id.value)["status"], "ACCEPT");
    assert_eq!(by(&b.framework_id.value)["status"], "DECLINE");
    assert!(
        by(&a.framework_id.value)["timestamp"]["nanoseconds"]
            .as_i64()
            .unwrap()
            > 0
    );
    assert_eq!(
        s["draining_machines"][0]["id"],
        json!({"hostname": "agent-0", "ip": IP})
    );
    // The legacy endpoint says the same.
    let legacy = get_json(&format!("{}/maintenance/status", cluster.master_url())).await;
    assert_eq!(
        legacy["draining_machines"][0]["statuses"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(
        inverse_offer_status::Status::Accept.as_str_name(),
        "ACCEPT",
        "the wire names of allocator.InverseOfferStatus"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn refuse_seconds_hold_back_inverse_offers_on_the_master_clock() {
    let cluster = simulated_cluster(1).await;
    let mut a = subscribe(cluster.master_url(), Codec::Protobuf, framework("a", &[])).await;
    run_task(&mut a, "ta", "cpus:1;mem:1024").await;
    assert_eq!(
        update_schedule(&cluster, Codec::Json, schedule(&["agent-0"]))
            .await
            .0,
        200
    );
    let first = inverse_offers(&mut a).await;
    assert_eq!(first.len(), 1);

    // Declined for a minute: rounds go by without a new one...
    assert_eq!(
        answer(&a, false, vec![first[0].id.clone().unwrap()], Some(60.0)).await,
        202
    );
    a.assert_none(event::Type::InverseOffers, QUIET).await;
    // ...until the master's clock has passed the minute.
    cluster.advance_clock(Duration::from_secs(61));
    let again = inverse_offers(&mut a).await;
    assert_ne!(again[0].id, first[0].id, "a new inverse offer");

    // Without filters Mesos asks again at the next round.
    assert_eq!(
        answer(&a, true, vec![again[0].id.clone().unwrap()], None).await,
        202
    );
    let third = inverse_offers(&mut a).await;
    // An answer naming an unknown inverse offer is ignored, as Mesos does.
    assert_eq!(
        answer(&a, true, vec![OfferId::new("nope")], None).await,
        202
    );
    a.assert_none(event::Type::InverseOffers, QUIET).await;
    assert_eq!(
        answer(&a, true, vec![third[0].id.clone().unwrap()], Some(3600.0)).await,
        202
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn dropping_a_machine_from_the_schedule_rescinds_its_inverse_offers() {
    let cluster = simulated_cluster(1).await;
    let mut a = subscribe(cluster.master_url(), Codec::Json, framework("a", &[])).await;
    run_task(&mut a, "ta", "cpus:1;mem:1024").await;
    assert_eq!(
        update_schedule(&cluster, Codec::Json, schedule(&["agent-0"]))
            .await
            .0,
        200
    );
    let io = inverse_offers(&mut a).await.remove(0);
    let (status, _) = post_json(&cluster, "/master/maintenance/schedule", &json!({})).await;
    assert_eq!(status, 200);
    let ev = a.expect(event::Type::RescindInverseOffer).await;
    assert_eq!(ev.rescind_inverse_offer.unwrap().inverse_offer_id, io.id);
    assert_eq!(status_json(&cluster).await, json!({}));
    // The machine is UP again: offers carry no unavailability.
    assert_eq!(a.simple(call::Type::Revive).await, 202);
    let offers = a.offers().await;
    assert!(offers.iter().all(|o| o.unavailability.is_none()));
    cluster.shutdown().await;
}

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

#[tokio::test]
async fn unanswered_inverse_offers_are_rescinded_after_the_offer_timeout() {
    let timing = localmesos::Timing {
        offer_timeout: Some(Duration::from_secs(1)),
        ..fast_timing()
    };
    let cluster = cluster(vec![agent("cpus:2;mem:2048", true)], timing).await;
    let mut a = subscribe(cluster.master_url(), Codec::Protobuf, framework("a", &[])).await;
    run_task(&mut a, "ta", "cpus:1;mem:1024").await;
    assert_eq!(
        update_schedule(&cluster, Codec::Json, schedule(&["agent-0"]))
            .await
            .0,
        200
    );
    let first = inverse_offers(&mut a).await.remove(0);
    let ev = a.expect(event::Type::RescindInverseOffer).await;
    assert_eq!(ev.rescind_inverse_offer.unwrap().inverse_offer_id, first.id);
    let again = inverse_offers(&mut a).await.remove(0);
    assert_ne!(again.id, first.id);
    // No answer was recorded for the expired one.
    let s = status_json(&cluster).await;
    assert_eq!(s["draining_machines"][0].get("statuses"), None);
    cluster.shutdown().await;
}
