//! Every message round-trips in both codecs, fully populated.
#![allow(clippy::unwrap_used, missing_docs)]

mod fixtures;

use std::fmt::Debug;

use mesos::codec::Codec;
use mesos::proto::json::WireEnum;
use mesos::proto::*;
use mesos::proto::{executor as ex, scheduler as sc};
use serde::Serialize;
use serde::de::DeserializeOwned;

fn roundtrip<M>(msg: &M)
where
    M: prost::Message + Serialize + DeserializeOwned + Default + PartialEq + Debug,
{
    for codec in [Codec::Protobuf, Codec::Json] {
        let bytes = codec.encode(msg);
        let back: M = codec.decode(&bytes).unwrap_or_else(|e| {
            panic!(
                "{codec:?} decode failed: {e}\n{}",
                String::from_utf8_lossy(&bytes)
            )
        });
        assert_eq!(&back, msg, "{codec:?}");
    }
}

/// The JSON text of a message, to check Mesos' mapping (names, base64).
fn json(msg: &impl Serialize) -> String {
    serde_json::to_string(msg).unwrap()
}

#[test]
fn every_scheduler_call_type_round_trips() {
    let calls = fixtures::scheduler_calls();
    assert_eq!(calls.len(), 18);
    for call in &calls {
        roundtrip(call);
        let name = call.kind().unwrap().wire_name();
        assert!(
            json(call).contains(&format!(r#""type":"{name}""#)),
            "{name}"
        );
    }
}

#[test]
fn every_scheduler_event_type_round_trips() {
    let events = fixtures::scheduler_events();
    assert_eq!(events.len(), 12);
    for event in &events {
        roundtrip(event);
    }
}

#[test]
fn every_executor_call_and_event_type_round_trips() {
    let calls = fixtures::executor_calls();
    assert_eq!(calls.len(), 5);
    calls.iter().for_each(roundtrip);
    let events = fixtures::executor_events();
    assert_eq!(events.len(), 10);
    events.iter().for_each(roundtrip);
}

#[test]
fn common_messages_round_trip() {
    roundtrip(&fixtures::framework_info());
    roundtrip(&fixtures::task_info());
    roundtrip(&fixtures::executor_info());
    roundtrip(&fixtures::agent_info());
    roundtrip(&fixtures::master_info());
    roundtrip(&fixtures::container_info());
    roundtrip(&fixtures::command_info());
    roundtrip(&fixtures::offer(7));
    roundtrip(&fixtures::realistic_offer(7));
    roundtrip(&TaskGroupInfo {
        tasks: vec![fixtures::task_info()],
    });
    roundtrip(&Filters {
        refuse_seconds: Some(0.0),
    });
    roundtrip(&KillPolicy {
        grace_period: Some(DurationInfo { nanoseconds: 0 }),
    });
    fixtures::operations().iter().for_each(roundtrip);
    fixtures::resources().iter().for_each(roundtrip);
    fixtures::attributes().iter().for_each(roundtrip);
}

#[test]
fn every_task_state_and_reason_round_trips() {
    for n in 0..=13 {
        let state = TaskState::try_from(n).unwrap();
        let status = fixtures::task_status(state);
        roundtrip(&status);
        assert!(json(&status).contains(&format!(r#""state":"{}""#, state.wire_name())));
    }
    for n in 0..=33 {
        let reason = task_status::Reason::try_from(n).unwrap();
        let status = TaskStatus {
            reason: Some(n),
            ..fixtures::task_status(TaskState::TaskLost)
        };
        roundtrip(&status);
        assert!(json(&status).contains(reason.wire_name()));
    }
}

#[test]
fn json_uses_mesos_names_and_base64() {
    let status = fixtures::task_status(TaskState::TaskRunning);
    let text = json(&status);
    assert!(text.contains(r#""source":"SOURCE_EXECUTOR""#), "{text}");
    assert!(
        text.contains(r#""data":"CQgH""#),
        "bytes are base64: {text}"
    );
    let text = json(&fixtures::resources()[2]);
    assert!(
        text.contains(r#""type":"RANGES""#) && text.contains(r#""type":"DYNAMIC""#),
        "{text}"
    );
}

#[test]
fn zero_values_survive_both_codecs() {
    // Range 0-0, a 0.0 scalar, TASK_STARTING, a 0 grace period: proto3 rules
    // would drop each; the round trip (and a real master) needs them.
    let res = &fixtures::resources();
    roundtrip(&res[1]);
    let bytes = Codec::Protobuf.encode(&res[2]);
    let back: Resource = Codec::Protobuf.decode(&bytes).unwrap();
    assert_eq!(
        back.ranges.unwrap().range[0],
        value::Range { begin: 0, end: 0 }
    );
}

#[test]
fn unknown_fields_and_keys_are_skipped() {
    let event = &fixtures::scheduler_events()[1];
    let mut bytes = Codec::Protobuf.encode(event);
    // field 99, length-delimited, 3 bytes
    bytes.extend_from_slice(&[0x9a, 0x06, 3, b'x', b'y', b'z']);
    assert_eq!(&Codec::Protobuf.decode::<sc::Event>(&bytes).unwrap(), event);

    let mut value: serde_json::Value = serde_json::to_value(event).unwrap();
    value["future_field"] = serde_json::json!({"nested": [1, 2]});
    value["subscribed"]["also_new"] = serde_json::json!(true);
    let text = serde_json::to_vec(&value).unwrap();
    assert_eq!(&Codec::Json.decode::<sc::Event>(&text).unwrap(), event);

    let call = &fixtures::executor_calls()[1];
    let mut bytes = Codec::Protobuf.encode(call);
    bytes.extend_from_slice(&[0xf8, 0x07, 0x01]); // field 127, varint 1
    assert_eq!(&Codec::Protobuf.decode::<ex::Call>(&bytes).unwrap(), call);
}
