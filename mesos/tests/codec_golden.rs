//! Wire facts that third-party clients and real masters depend on.
#![allow(clippy::unwrap_used, missing_docs)]

use mesos::codec::{Codec, MediaTypeError};
use mesos::proto::scheduler::{Call, call};
use mesos::proto::{FrameworkInfo, Resource, TaskId, TaskState, TaskStatus, value};

fn subscribe_call(user: &str, name: &str) -> Call {
    Call {
        r#type: Some(call::Type::Subscribe as i32),
        subscribe: Some(call::Subscribe {
            framework_info: Some(FrameworkInfo {
                user: user.into(),
                name: name.into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn subscribe_encodes_to_the_golden_bytes_of_a_third_party_client() {
    let golden: [u8; 21] = [
        0x10, 0x01, 0x1a, 0x11, 0x0a, 0x0f, 0x0a, 0x06, b'n', b'o', b'b', b'o', b'd', b'y', 0x12,
        0x05, b'p', b'r', b'o', b'b', b'e',
    ];
    let bytes = Codec::Protobuf.encode(&subscribe_call("nobody", "probe"));
    assert_eq!(bytes, golden);
    let back: Call = Codec::Protobuf.decode(&golden).unwrap();
    assert_eq!(back, subscribe_call("nobody", "probe"));
}

#[test]
fn json_subscribe_from_third_party_clients_parses() {
    let body = br#"{"type":"SUBSCRIBE","subscribe":{"framework_info":{"user":"nobody","name":"probe","failover_timeout":100}}}"#;
    let call: Call = Codec::Json.decode(body).unwrap();
    assert_eq!(call.kind(), Some(call::Type::Subscribe));
    let info = call.subscribe.unwrap().framework_info.unwrap();
    assert_eq!(info.user, "nobody");
    assert_eq!(info.name, "probe");
    assert_eq!(info.failover_timeout, Some(100.0));
}

#[test]
fn zero_valued_required_fields_are_still_on_the_wire() {
    // TASK_STARTING is 0 and SCALAR is 0: proto3 rules would drop both.
    let status = TaskStatus {
        task_id: Some(TaskId::new("t")),
        state: TaskState::TaskStarting as i32,
        ..Default::default()
    };
    let bytes = Codec::Protobuf.encode(&status);
    // field 2, varint, value 0
    assert!(bytes.windows(2).any(|w| w == [0x10, 0x00]), "{bytes:02x?}");

    let res = Resource {
        name: "cpus".into(),
        r#type: value::Type::Scalar as i32,
        scalar: Some(value::Scalar { value: 0.0 }),
        ..Default::default()
    };
    let bytes = Codec::Protobuf.encode(&res);
    assert!(
        bytes.windows(2).any(|w| w == [0x10, 0x00]),
        "type missing: {bytes:02x?}"
    );
    // Scalar{value: 0.0} is field 3 holding 9 bytes: tag 0x09 + 8 zero bytes.
    assert!(
        bytes.windows(3).any(|w| w == [0x1a, 0x09, 0x09]),
        "scalar missing: {bytes:02x?}"
    );
}

#[test]
fn unknown_fields_and_keys_are_skipped() {
    // A Call with an unknown field 99 (varint) in front.
    let mut bytes = vec![0x98, 0x06, 0x07];
    bytes.extend(Codec::Protobuf.encode(&subscribe_call("u", "n")));
    let call: Call = Codec::Protobuf.decode(&bytes).unwrap();
    assert_eq!(call, subscribe_call("u", "n"));

    let json = br#"{"type":"SUBSCRIBE","future_field":{"x":1},"subscribe":{"framework_info":{"user":"u","name":"n","shiny":true}}}"#;
    let call: Call = Codec::Json.decode(json).unwrap();
    assert_eq!(call, subscribe_call("u", "n"));
}

#[test]
fn json_uses_enum_names_and_base64_bytes() {
    let status = TaskStatus {
        task_id: Some(TaskId::new("t")),
        state: TaskState::TaskRunning as i32,
        uuid: Some(vec![0xde, 0xad, 0xbe, 0xef]),
        ..Default::default()
    };
    let text = String::from_utf8(Codec::Json.encode(&status)).unwrap();
    assert!(text.contains(r#""state":"TASK_RUNNING""#), "{text}");
    assert!(text.contains(r#""uuid":"3q2+7w==""#), "{text}");
    assert!(text.contains(r#""task_id":{"value":"t"}"#), "{text}");
}

#[test]
fn json_rejects_unknown_enum_names_with_a_clear_error() {
    let err = Codec::Json
        .decode::<Call>(br#"{"type":"LAUNCH_ROCKETS"}"#)
        .unwrap_err();
    assert!(err.to_string().contains("LAUNCH_ROCKETS"), "{err}");
}

#[test]
fn content_negotiation_follows_mesos() {
    assert_eq!(Codec::from_content_type(None), Err(MediaTypeError::Missing));
    assert!(matches!(
        Codec::from_content_type(Some("text/plain")),
        Err(MediaTypeError::Unsupported(_))
    ));
    assert_eq!(
        Codec::from_content_type(Some("application/json; charset=utf-8")),
        Ok(Codec::Json)
    );
    assert_eq!(Codec::from_accept(None), Ok(Codec::Json));
    assert_eq!(Codec::from_accept(Some("*/*")), Ok(Codec::Json));
    assert_eq!(
        Codec::from_accept(Some("application/x-protobuf")),
        Ok(Codec::Protobuf)
    );
    assert_eq!(
        Codec::from_accept(Some("application/x-protobuf;q=0, application/json")),
        Ok(Codec::Json)
    );
    assert!(matches!(
        Codec::from_accept(Some("text/html")),
        Err(MediaTypeError::NotAcceptable(_))
    ));
}
