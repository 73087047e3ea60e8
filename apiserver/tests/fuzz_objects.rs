//! Random and mutated bodies for ConfigMaps, Secrets and ServiceAccounts, over HTTP
//! against an in-process server: every one is answered (2xx or 4xx, never a 5xx or a
//! dropped connection), and a Secret's error never quotes its values.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};

const KINDS: [(&str, &str); 3] = [
    ("configmaps", "ConfigMap"),
    ("secrets", "Secret"),
    ("serviceaccounts", "ServiceAccount"),
];

/// A value no validation message may repeat when it sits in a Secret's data.
const MARKER: &str = "zq9SecretValue";

/// JSON shaped like the three kinds' fields, nested a few levels.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-zA-Z0-9+/=._-]{0,12}".prop_map(Value::String),
        Just(json!(format!("{MARKER}!"))),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let keys = prop_oneof![
            Just("metadata".to_string()),
            Just("name".to_string()),
            Just("annotations".to_string()),
            Just("labels".to_string()),
            Just("data".to_string()),
            Just("binaryData".to_string()),
            Just("stringData".to_string()),
            Just("type".to_string()),
            Just("immutable".to_string()),
            Just("secrets".to_string()),
            Just("automountServiceAccountToken".to_string()),
            Just(".dockerconfigjson".to_string()),
            Just("tls.crt".to_string()),
            "[a-z.]{1,6}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(keys, inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A valid object of `kind` with random parts grafted in: mostly close to valid, so
/// validation (not only decoding) is exercised.
fn mutated(kind: &str, graft: Value, at: usize, name: &str) -> Value {
    let mut obj = json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name}});
    let field = [
        "data",
        "stringData",
        "binaryData",
        "type",
        "immutable",
        "metadata",
        "secrets",
    ][at % 7];
    if field == "metadata" {
        obj["metadata"]["annotations"] = graft;
    } else {
        obj[field] = graft;
    }
    obj
}

fn answered(code: u16, body: &Value, what: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        (200..300).contains(&code) || (400..500).contains(&code),
        "{what}: {code} {body}"
    );
    if code >= 400 {
        prop_assert_eq!(&body["kind"], "Status", "{}: {}", what, body);
    }
    Ok(())
}

#[test]
fn random_and_mutated_bodies_for_the_new_kinds_are_answered_with_a_status_never_a_5xx() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(Server::start());
    let http = Http::new(&server);
    let mut runner = TestRunner::new(Config {
        cases: 300,
        ..Config::default()
    });
    let strategy = (
        json_value(),
        any::<usize>(),
        prop::collection::vec(any::<u8>(), 0..256),
        0usize..3,
    );
    let n = std::sync::atomic::AtomicUsize::new(0);
    runner
        .run(&strategy, |(graft, at, bytes, k)| {
            let n = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let (plural, kind) = KINDS[k];
            let base = format!("/api/v1/namespaces/default/{plural}");
            let name = format!("fuzz-{n}");
            rt.block_on(async {
                let (code, body) = http
                    .send("POST", &base, "application/json", bytes.clone())
                    .await;
                answered(code, &body, "random bytes")?;
                let (code, body) = http.json("POST", &base, &graft).await;
                answered(code, &body, "random JSON")?;
                let obj = mutated(kind, graft.clone(), at, &name);
                let strict = format!("{base}?fieldValidation=Strict");
                let (code, body) = http.json("POST", &strict, &obj).await;
                answered(code, &body, "mutated object")?;
                if kind == "Secret" && code >= 400 {
                    prop_assert!(
                        !body.to_string().contains(MARKER),
                        "a Secret error quoted a value: {body}"
                    );
                }
                let (code, body) = http
                    .send(
                        "PATCH",
                        &format!("{base}/{name}"),
                        "application/merge-patch+json",
                        serde_json::to_vec(&json!({"data": graft})).unwrap(),
                    )
                    .await;
                answered(code, &body, "patch")?;
                let (code, body) = http.json("PUT", &format!("{base}/{name}"), &obj).await;
                answered(code, &body, "replace")?;
                Ok(())
            })
        })
        .unwrap();
    let (code, _) = rt.block_on(http.get("/api/v1/namespaces/default/configmaps"));
    assert_eq!(code, 200, "the server still answers");
    rt.block_on(server.stop());
}
