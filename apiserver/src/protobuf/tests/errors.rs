//! Malformed bodies: every one a 400 with a clear message, none a panic.

use k8s_openapi::api::core::v1::Secret;
use serde_json::json;

use super::kinds::{cluster_role_body, deployment_body, pod_body};
use super::{body, build, envelope_with, status};
use crate::decode::{FieldValidation, decode_resource_body};
use crate::protobuf::{PROTOBUF, decode, decode_object};

fn message(body: &[u8], api_version: &str, kind: &str) -> String {
    decode_object(body, api_version, kind)
        .unwrap_err()
        .to_string()
}

#[test]
fn garbage_is_a_bad_request_not_a_panic() {
    for body in [
        &b""[..],
        b"k8s\0",
        b"k8s\0\xff",
        b"k8s\0\x0a\x05ab",
        b"nope",
        b"{}",
    ] {
        assert_eq!(status(body, "v1", "Namespace"), 400, "{body:?}");
        assert_eq!(decode(body).unwrap_err().code_and_reason().0, 400);
    }
}

#[test]
fn a_field_of_the_wrong_wire_type_is_a_bad_request() {
    // Deployment field 2 (spec) as a varint instead of a message.
    let msg = message(
        &envelope_with("apps/v1", "Deployment", &[0x10, 0x01]),
        "apps/v1",
        "Deployment",
    );
    assert_eq!(
        msg,
        "error decoding protobuf body: Deployment: invalid wire type: Varint (expected LengthDelimited)"
    );
}

#[test]
fn truncated_bodies_are_bad_requests() {
    let full = deployment_body();
    for len in 0..full.len() {
        let code = status(&full[..len], "apps/v1", "Deployment");
        // A cut exactly between two fields of the envelope leaves a smaller, whole one.
        assert!(code == 400 || code == 200, "cut at {len}: {code}");
    }
    // A cut inside the object's bytes always breaks the length before it.
    assert_eq!(
        status(&full[..full.len() - 1], "apps/v1", "Deployment"),
        400
    );
}

#[test]
fn strings_that_are_not_utf8_are_refused_without_quoting_them() {
    // ObjectMeta (field 1) with name (field 1) = "ab\xff".
    let raw = [0x0a, 0x05, 0x0a, 0x03, b'a', b'b', 0xff];
    let msg = message(&envelope_with("v1", "ConfigMap", &raw), "v1", "ConfigMap");
    assert!(msg.contains("UTF-8"), "{msg}");

    // A Secret's stringData value (field 4, an entry of key "k" and value "s3cr\xff").
    let entry = [0x0a, 0x01, b'k', 0x12, 0x05, b's', b'3', b'c', b'r', 0xff];
    let raw = [&[0x22, 0x0a][..], &entry].concat();
    let body = envelope_with("v1", "Secret", &raw);
    let msg = message(&body, "v1", "Secret");
    assert!(msg.contains("UTF-8") && !msg.contains("s3cr"), "{msg}");
    let e = decode_resource_body::<Secret>(&body, PROTOBUF, FieldValidation::Strict).unwrap_err();
    assert!(!e.to_string().contains("s3cr"), "{e}");
}

#[test]
fn another_kind_is_400_and_a_kind_without_schema_415() {
    let body = deployment_body();
    let msg = message(&body, "apps/v1", "ReplicaSet");
    assert_eq!(
        msg,
        "expected a ReplicaSet in the protobuf body, got \"Deployment (apps/v1)\""
    );
    assert_eq!(status(&body, "apps/v1", "ReplicaSet"), 400);
    let widget = envelope_with("example.com/v1", "Widget", b"");
    assert_eq!(status(&widget, "example.com/v1", "Widget"), 415);
    let e = decode(&widget).unwrap_err();
    assert_eq!(e.code_and_reason().0, 400);
    assert!(
        e.to_string().contains("no schema for kind \"Widget\""),
        "{e}"
    );
    assert_eq!(
        decode(&envelope_with("", "", b""))
            .unwrap_err()
            .code_and_reason()
            .0,
        400
    );
}

#[test]
fn values_go_cannot_write_as_json_are_refused_with_their_path() {
    let pod = |port: serde_json::Value| {
        let p = build(
            "k8s.io.api.core.v1.Pod",
            &json!({"spec": {"containers": [{"name": "c", "livenessProbe": {"handler": {"httpGet": {"port": port}}}}]}}),
        );
        message(&body("v1", "Pod", &p), "v1", "Pod")
    };
    assert_eq!(
        pod(json!({"type": 2})),
        "error decoding protobuf body: spec.containers[0].livenessProbe.httpGet.port: an IntOrString of no known type"
    );
    let late = build(
        "k8s.io.api.core.v1.Pod",
        &json!({"metadata": {"creationTimestamp": {"seconds": 253_402_300_800_i64}}}),
    );
    assert!(
        message(&body("v1", "Pod", &late), "v1", "Pod")
            .contains("metadata.creationTimestamp: a time outside")
    );
    let rev = build(
        "k8s.io.api.apps.v1.ControllerRevision",
        &json!({"data": {"raw": "k8s\u{0}not json"}}),
    );
    assert!(
        message(
            &body("apps/v1", "ControllerRevision", &rev),
            "apps/v1",
            "ControllerRevision"
        )
        .contains("data: an embedded object that is not JSON")
    );
}

#[test]
fn deeply_nested_groups_hit_the_recursion_limit_not_the_stack() {
    // Field 999 opened as a group (wire type 3) a hundred thousand times.
    let raw: Vec<u8> = std::iter::repeat_n([0xbb, 0x3e], 100_000)
        .flatten()
        .collect();
    assert_eq!(status(&envelope_with("v1", "Pod", &raw), "v1", "Pod"), 400);
}

/// xorshift64: a fixed sequence, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(n.max(1)).unwrap()).unwrap()
    }
}

#[test]
fn mutated_and_random_bodies_never_panic_and_fail_only_as_400() {
    let seeds = [
        ("apps/v1", "Deployment", deployment_body()),
        ("v1", "Pod", pod_body()),
        (
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            cluster_role_body(),
        ),
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut decoded = 0;
    for _ in 0..3000 {
        let (api_version, kind, seed) = &seeds[rng.below(seeds.len())];
        let mut b = seed.clone();
        for _ in 0..=rng.below(3) {
            let at = rng.below(b.len());
            match rng.below(4) {
                0 => b[at] = rng.next().to_le_bytes()[0],
                1 => b[at] ^= 1 << rng.below(8),
                2 => b.insert(at, rng.next().to_le_bytes()[0]),
                _ => {
                    b.remove(at);
                }
            }
        }
        let code = status(&b, api_version, kind);
        assert!(code == 200 || code == 400, "{code} for {b:?}");
        decoded += usize::from(code == 200);
        if let Err(e) = decode(&b) {
            assert_eq!(e.code_and_reason().0, 400, "{e}");
        }
    }
    for _ in 0..1000 {
        let len = rng.below(300);
        let random: Vec<u8> = (0..len).map(|_| rng.next().to_le_bytes()[0]).collect();
        let b = [b"k8s\0".as_slice(), &random].concat();
        let code = status(&b, "v1", "Pod");
        assert!(code == 200 || code == 400, "{code} for {b:?}");
    }
    // Some mutations leave a decodable body (a changed letter in a string, say).
    assert!(decoded > 0);
}
