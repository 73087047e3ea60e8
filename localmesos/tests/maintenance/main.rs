//! Maintenance: schedules, DRAINING machines' offers and inverse offers,
//! the frameworks' answers and filters. `operator` covers START/STOP
//! maintenance, validation, the v1 operator API (`POST /api/v1`, JSON and
//! protobuf), Mesos' JSON endpoints and read-write authentication;
//! `drain` covers agent deactivation and draining.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/mod.rs"]
mod common;
mod drain;
mod operator;
mod support;

use std::time::Duration;

use common::*;
use mesos::codec::Codec;
use mesos::proto::allocator::inverse_offer_status;
use mesos::proto::master::{self, call as op, response};
use mesos::proto::scheduler::call;
use mesos::proto::scheduler::event;
use mesos::proto::{InverseOffer, OfferId};
use serde_json::json;
use support::*;

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
