//! The maintenance messages: the operator API's maintenance calls and
//! responses, schedules and cluster status, in both codecs and in the JSON
//! shape Mesos' docs show.
#![allow(clippy::unwrap_used, missing_docs)]

mod fixtures;

use mesos::codec::Codec;
use mesos::proto::allocator::{InverseOfferStatus, inverse_offer_status};
use mesos::proto::json::WireEnum;
use mesos::proto::maintenance::{ClusterStatus, Schedule, Window, cluster_status};
use mesos::proto::master::{self, call, response};
use mesos::proto::*;
use serde_json::json;

fn roundtrip<M>(msg: &M)
where
    M: prost::Message + serde::Serialize + serde::de::DeserializeOwned + Default + PartialEq,
    M: std::fmt::Debug,
{
    for codec in [Codec::Protobuf, Codec::Json] {
        let back: M = codec.decode(&codec.encode(msg)).unwrap();
        assert_eq!(&back, msg, "{codec:?}");
    }
}

fn machine(host: &str, ip: &str) -> MachineId {
    MachineId {
        hostname: Some(host.into()),
        ip: Some(ip.into()),
    }
}

fn schedule() -> Schedule {
    Schedule {
        windows: vec![Window {
            machine_ids: vec![
                machine("machine1", "10.0.0.1"),
                machine("machine2", "10.0.0.2"),
            ],
            unavailability: Some(fixtures::unavailability()),
        }],
    }
}

#[test]
fn every_operator_call_type_decodes_and_maintenance_bodies_round_trip() {
    for n in 0..=39 {
        let t = call::Type::from_number(n).unwrap();
        let mut c = master::Call {
            r#type: Some(n),
            ..Default::default()
        };
        match t {
            call::Type::UpdateMaintenanceSchedule => {
                c.update_maintenance_schedule = Some(call::UpdateMaintenanceSchedule {
                    schedule: Some(schedule()),
                })
            }
            call::Type::StartMaintenance => {
                c.start_maintenance = Some(call::StartMaintenance {
                    machines: vec![machine("machine1", "10.0.0.1")],
                })
            }
            call::Type::StopMaintenance => {
                c.stop_maintenance = Some(call::StopMaintenance {
                    machines: vec![machine("machine1", "10.0.0.1")],
                })
            }
            _ => {}
        }
        roundtrip(&c);
        assert_eq!(c.kind(), Some(t));
    }
}

#[test]
fn maintenance_responses_and_status_round_trip() {
    let status = ClusterStatus {
        draining_machines: vec![cluster_status::DrainingMachine {
            id: Some(machine("machine1", "10.0.0.1")),
            statuses: vec![InverseOfferStatus {
                status: inverse_offer_status::Status::Decline as i32,
                framework_id: Some(FrameworkId::new("fw-1")),
                timestamp: Some(TimeInfo { nanoseconds: 5 }),
            }],
        }],
        down_machines: vec![machine("machine3", "10.0.0.3")],
    };
    roundtrip(&status);
    let r = master::Response {
        r#type: Some(response::Type::GetMaintenanceStatus as i32),
        get_maintenance_status: Some(response::GetMaintenanceStatus {
            status: Some(status),
        }),
        ..Default::default()
    };
    roundtrip(&r);
    let text = serde_json::to_value(&r).unwrap();
    assert_eq!(text["type"], "GET_MAINTENANCE_STATUS");
    assert_eq!(
        text["get_maintenance_status"]["status"]["draining_machines"][0]["statuses"][0]["status"],
        "DECLINE"
    );
    let r = master::Response {
        r#type: Some(response::Type::GetMaintenanceSchedule as i32),
        get_maintenance_schedule: Some(response::GetMaintenanceSchedule {
            schedule: Some(schedule()),
        }),
        ..Default::default()
    };
    roundtrip(&r);
    assert_eq!(r.kind(), Some(response::Type::GetMaintenanceSchedule));
    roundtrip(&MachineInfo {
        id: Some(machine("m", "10.0.0.9")),
        mode: Some(machine_info::Mode::Draining as i32),
        unavailability: Some(fixtures::unavailability()),
    });
}

#[test]
fn schedule_reads_the_json_of_mesos_docs() {
    // docs/maintenance.md's example, as operators post it.
    let text = json!({
        "windows": [{
            "machine_ids": [
                {"hostname": "machine1", "ip": "10.0.0.1"},
                {"hostname": "machine2", "ip": "10.0.0.2"}
            ],
            "unavailability": {"start": {"nanoseconds": 1443830400000000000_i64}}
        }]
    });
    let parsed: Schedule = serde_json::from_value(text.clone()).unwrap();
    assert_eq!(
        parsed.windows[0].machine_ids[1],
        machine("machine2", "10.0.0.2")
    );
    assert_eq!(serde_json::to_value(&parsed).unwrap(), text);
    assert_eq!(
        serde_json::to_value(Schedule::default()).unwrap(),
        json!({})
    );
}

#[test]
fn inverse_offer_events_and_calls_use_mesos_json_names() {
    let event = &fixtures::scheduler_events()[9];
    let text = serde_json::to_value(event).unwrap();
    assert_eq!(text["type"], "INVERSE_OFFERS");
    let io = &text["inverse_offers"]["inverse_offers"][0];
    assert_eq!(io["agent_id"]["value"], "agent-0");
    assert_eq!(
        io["unavailability"]["duration"]["nanoseconds"],
        3_600_000_000_000_i64
    );
    let rescind = serde_json::to_value(&fixtures::scheduler_events()[10]).unwrap();
    assert_eq!(
        rescind["rescind_inverse_offer"]["inverse_offer_id"]["value"],
        "inverse-0"
    );

    let accept = serde_json::to_value(&fixtures::scheduler_calls()[13]).unwrap();
    assert_eq!(accept["type"], "ACCEPT_INVERSE_OFFERS");
    assert_eq!(
        accept["accept_inverse_offers"]["inverse_offer_ids"][0]["value"],
        "inverse-1"
    );
    assert_eq!(
        accept["accept_inverse_offers"]["filters"]["refuse_seconds"],
        120.0
    );
    let offer = serde_json::to_value(fixtures::offer(1)).unwrap();
    assert!(offer["unavailability"]["start"]["nanoseconds"].is_i64());
}
