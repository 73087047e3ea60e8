//! What the maintenance tests share: schedules of the cluster's machines,
//! operator calls (`POST /api/v1` and Mesos' JSON endpoints), a framework
//! with a task running, and inverse-offer answers.

use std::time::Duration;

use crate::common::*;
use localmesos::LocalMesos;
use mesos::codec::Codec;
use mesos::proto::maintenance::{Schedule, Window};
use mesos::proto::master::{self, call as op};
use mesos::proto::scheduler::{Call, call, event};
use mesos::proto::{
    DurationInfo, Filters, InverseOffer, MachineId, OfferId, TaskState, TimeInfo, Unavailability,
};
use serde_json::Value;

/// Every localmesos agent advertises loopback.
pub(crate) const IP: &str = "127.0.0.1";
/// How long a test waits to be sure something does not happen (several
/// allocation rounds of `fast_timing`).
pub(crate) const QUIET: Duration = Duration::from_millis(500);

pub(crate) fn machine(host: &str) -> MachineId {
    MachineId {
        hostname: Some(host.into()),
        ip: Some(IP.into()),
    }
}

pub(crate) fn unavailability() -> Unavailability {
    Unavailability {
        start: Some(TimeInfo {
            nanoseconds: 1_900_000_000_000_000_000,
        }),
        duration: Some(DurationInfo {
            nanoseconds: 3_600_000_000_000,
        }),
    }
}

pub(crate) fn schedule(hosts: &[&str]) -> Schedule {
    Schedule {
        windows: vec![Window {
            machine_ids: hosts.iter().map(|h| machine(h)).collect(),
            unavailability: Some(unavailability()),
        }],
    }
}

pub(crate) fn client() -> reqwest::Client {
    testkit::init_crypto();
    reqwest::Client::new()
}

/// `POST /api/v1` in `codec`, answered in `codec`: status and body.
pub(crate) async fn operator(
    cluster: &LocalMesos,
    codec: Codec,
    c: &master::Call,
) -> (u16, Vec<u8>) {
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

pub(crate) fn op_call(kind: op::Type) -> master::Call {
    master::Call {
        r#type: Some(kind as i32),
        ..Default::default()
    }
}

pub(crate) async fn update_schedule(
    cluster: &LocalMesos,
    codec: Codec,
    s: Schedule,
) -> (u16, String) {
    let c = master::Call {
        update_maintenance_schedule: Some(op::UpdateMaintenanceSchedule { schedule: Some(s) }),
        ..op_call(op::Type::UpdateMaintenanceSchedule)
    };
    let (status, body) = operator(cluster, codec, &c).await;
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// START or STOP_MAINTENANCE over the operator API (JSON).
pub(crate) async fn machines_call(
    cluster: &LocalMesos,
    kind: op::Type,
    hosts: &[&str],
) -> (u16, String) {
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
pub(crate) async fn status_json(cluster: &LocalMesos) -> Value {
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
pub(crate) async fn post_json(cluster: &LocalMesos, path: &str, body: &Value) -> (u16, String) {
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
pub(crate) async fn run_task(sub: &mut Sub, id: &str, resources: &str) -> String {
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
pub(crate) async fn inverse_offers(sub: &mut Sub) -> Vec<InverseOffer> {
    sub.expect(event::Type::InverseOffers)
        .await
        .inverse_offers
        .unwrap()
        .inverse_offers
}

pub(crate) async fn answer(sub: &Sub, accept: bool, ids: Vec<OfferId>, refuse: Option<f64>) -> u16 {
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
