#![allow(clippy::unwrap_used)]
use serde_json::{Value, json};

use super::*;

fn quota(status: Option<Value>) -> ResourceQuota {
    let mut q = json!({"metadata": {"name": "q", "namespace": "ns"}, "spec": {"hard": {"pods": "5", "requests.cpu": "2"}}});
    if let Some(s) = status {
        q["status"] = s;
    }
    serde_json::from_value(q).unwrap()
}

fn pod(cpu: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}))
    .unwrap()
}

fn written(r: &Reconciled) -> Option<Value> {
    match r.actions.as_slice() {
        [] => None,
        [Action::WriteStatus(Status::ResourceQuota(s))] => Some(serde_json::to_value(s).unwrap()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_new_quota_gets_its_hard_and_what_the_namespace_uses() {
    let (a, b) = (pod("500m"), pod("250m"));
    let none = |_: &str| None;
    let r = reconcile(&quota(None), &[&a, &b], &none, Timestamp::UNIX_EPOCH);
    assert_eq!(
        written(&r),
        Some(
            json!({"hard": {"pods": "5", "requests.cpu": "2"}, "used": {"pods": "2", "requests.cpu": "750m"}})
        )
    );
}

#[test]
fn a_true_status_costs_no_write_whatever_the_format_it_was_written_in() {
    let a = pod("500m");
    let none = |_: &str| None;
    let stored = quota(Some(
        json!({"hard": {"pods": "5", "requests.cpu": "2"}, "used": {"pods": "1", "requests.cpu": "0.5"}}),
    ));
    assert_eq!(
        written(&reconcile(&stored, &[&a], &none, Timestamp::UNIX_EPOCH)),
        None
    );
    // A delete gives back: the recount lowers used.
    let r = reconcile(&stored, &[], &none, Timestamp::UNIX_EPOCH);
    assert_eq!(
        written(&r).unwrap()["used"],
        json!({"pods": "0", "requests.cpu": "0"})
    );
}
