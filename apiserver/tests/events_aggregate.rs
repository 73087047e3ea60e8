//! `Api::record_event` as client-go's `EventCorrelator`: events alike but
//! for their message become one "(combined from similar events)" event
//! from the tenth distinct message on, whose count and message follow the
//! latest; a quiet group starts afresh after 10 minutes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use apiserver::Api;
use common::*;
use k8s_openapi::api::core::v1::Event;

fn probe_failed(message: &str) -> Event {
    serde_json::from_value(serde_json::json!({
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default",
                           "uid": "u-1", "fieldPath": "spec.containers{main}"},
        "source": {"component": "kubelet", "host": "a1"},
        "type": "Warning", "reason": "Unhealthy", "message": message}))
    .unwrap()
}

/// `(message, count)` of every event, sorted by message.
fn events(api: &Api) -> Vec<(String, i32)> {
    let mut all: Vec<(String, i32)> = api
        .list_events(Some("default"), "", "")
        .unwrap()
        .items
        .into_iter()
        .map(|e| (e.message.unwrap_or_default(), e.count.unwrap_or(0)))
        .collect();
    all.sort();
    all
}

#[tokio::test]
async fn the_tenth_distinct_message_starts_one_combined_event() {
    let (api, clock) = api_with_clock().await;
    for i in 0..9 {
        let e = api
            .record_event("default", probe_failed(&format!("attempt {i}")))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(e.message.as_deref(), Some(format!("attempt {i}").as_str()));
        clock.advance(Duration::from_secs(1));
    }
    for i in 9..12 {
        api.record_event("default", probe_failed(&format!("attempt {i}")))
            .await
            .unwrap();
        clock.advance(Duration::from_secs(1));
    }
    let all = events(&api);
    assert_eq!(all.len(), 10, "nine events and the combined one: {all:?}");
    assert!(
        all.contains(&("(combined from similar events): attempt 11".to_owned(), 3)),
        "{all:?}"
    );
    let combined = api
        .list_events(Some("default"), "", "")
        .unwrap()
        .items
        .into_iter()
        .find(|e| e.message.as_deref().unwrap().starts_with("(combined"))
        .unwrap();
    assert_eq!(combined.reason.as_deref(), Some("Unhealthy"));
    assert_eq!(combined.type_.as_deref(), Some("Warning"));
    assert_eq!(combined.involved_object.name.as_deref(), Some("p"));
    assert!(combined.first_timestamp < combined.last_timestamp);

    // Ten quiet minutes later the group starts afresh.
    clock.advance(Duration::from_secs(601));
    let e = api
        .record_event("default", probe_failed("attempt 12"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e.message.as_deref(), Some("attempt 12"));
}
