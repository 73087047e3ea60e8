//! Node procurement rules, table-driven.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use procurement::{NodeProcurement, ProcureError, Procurement, Stage};
use serde_json::{Value, json};

fn pod_with(extra: Value) -> registry::PodTask {
    let mut spec = json!({"containers": [{"name": "c"}]});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    task(spec, Value::Null)
}

fn affinity(terms: Value) -> Value {
    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})
}

fn expr(key: &str, op: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": op, "values": values})
}

fn run(pod_extra: Value, attrs: Vec<mesos::proto::Attribute>) -> Result<(), ProcureError> {
    let o = offer("h1", vec![scalar("cpus", 1.0, None)], attrs);
    let (node, mut state) = node_and_state(&o);
    let mut t = pod_with(pod_extra);
    let before = state.remaining();
    let r = NodeProcurement.procure(&mut t, &node, &mut state);
    assert_eq!(
        state.remaining(),
        before,
        "the node procurement takes nothing"
    );
    r
}

#[derive(Debug)]
enum Want {
    Ok,
    NodeName,
    Selector,
    Affinity,
    Taint(&'static str),
    Invalid,
}

fn check(name: &str, r: Result<(), ProcureError>, want: Want) {
    match (&r, &want) {
        (Ok(()), Want::Ok)
        | (Err(ProcureError::NodeNameMismatch { .. }), Want::NodeName)
        | (Err(ProcureError::NodeSelectorMismatch { .. }), Want::Selector)
        | (Err(ProcureError::NodeAffinityMismatch), Want::Affinity)
        | (
            Err(ProcureError::InvalidPod {
                stage: Stage::Node, ..
            }),
            Want::Invalid,
        ) => {}
        (Err(ProcureError::UntoleratedTaint { taint }), Want::Taint(k)) if taint.key == *k => {}
        _ => panic!("{name}: got {r:?}, want {want:?}"),
    }
}

#[test]
fn node_name_and_node_selector_match_hostname_agent_id_and_attributes() {
    let attrs = || vec![text_attr("rack", "r1"), text_attr("zone", "z1")];
    let cases = [
        ("no constraint", json!({}), Want::Ok),
        ("nodeName = hostname", json!({"nodeName": "h1"}), Want::Ok),
        (
            "nodeName other host",
            json!({"nodeName": "h2"}),
            Want::NodeName,
        ),
        (
            "selector on attribute",
            json!({"nodeSelector": {"rack": "r1"}}),
            Want::Ok,
        ),
        (
            "selector on two attributes",
            json!({"nodeSelector": {"rack": "r1", "zone": "z1"}}),
            Want::Ok,
        ),
        (
            "selector wrong value",
            json!({"nodeSelector": {"rack": "r2"}}),
            Want::Selector,
        ),
        (
            "selector missing label",
            json!({"nodeSelector": {"gpu": "yes"}}),
            Want::Selector,
        ),
        (
            "selector on hostname label",
            json!({"nodeSelector": {"kubernetes.io/hostname": "h1"}}),
            Want::Ok,
        ),
        (
            "selector on agent id label",
            json!({"nodeSelector": {"mesopod.io/agent-id": "agent-h1"}}),
            Want::Ok,
        ),
        (
            "selector on other agent id",
            json!({"nodeSelector": {"mesopod.io/agent-id": "agent-h2"}}),
            Want::Selector,
        ),
    ];
    for (name, extra, want) in cases {
        check(name, run(extra, attrs()), want);
    }
}

#[test]
fn required_node_affinity_operators_behave_as_in_kubernetes() {
    let attrs = || vec![text_attr("rack", "r1"), text_attr("cores", "16")];
    let one = |e: Value| affinity(json!([{"matchExpressions": [e]}]));
    let cases = [
        ("In match", one(expr("rack", "In", &["r0", "r1"])), Want::Ok),
        (
            "In no match",
            one(expr("rack", "In", &["r2"])),
            Want::Affinity,
        ),
        (
            "In absent label",
            one(expr("gpu", "In", &["x"])),
            Want::Affinity,
        ),
        ("NotIn match", one(expr("rack", "NotIn", &["r2"])), Want::Ok),
        (
            "NotIn no match",
            one(expr("rack", "NotIn", &["r1"])),
            Want::Affinity,
        ),
        (
            "NotIn absent label matches",
            one(expr("gpu", "NotIn", &["x"])),
            Want::Ok,
        ),
        ("Exists", one(expr("rack", "Exists", &[])), Want::Ok),
        (
            "Exists absent",
            one(expr("gpu", "Exists", &[])),
            Want::Affinity,
        ),
        (
            "DoesNotExist",
            one(expr("gpu", "DoesNotExist", &[])),
            Want::Ok,
        ),
        (
            "DoesNotExist present",
            one(expr("rack", "DoesNotExist", &[])),
            Want::Affinity,
        ),
        ("Gt", one(expr("cores", "Gt", &["8"])), Want::Ok),
        (
            "Gt equal is not greater",
            one(expr("cores", "Gt", &["16"])),
            Want::Affinity,
        ),
        (
            "Gt non-integer label",
            one(expr("rack", "Gt", &["1"])),
            Want::Affinity,
        ),
        ("Lt", one(expr("cores", "Lt", &["32"])), Want::Ok),
        (
            "Lt no match",
            one(expr("cores", "Lt", &["4"])),
            Want::Affinity,
        ),
        (
            "Gt two values is invalid",
            one(expr("cores", "Gt", &["1", "2"])),
            Want::Invalid,
        ),
        (
            "Gt non-integer value is invalid",
            one(expr("cores", "Gt", &["x"])),
            Want::Invalid,
        ),
        (
            "In without values is invalid",
            one(expr("rack", "In", &[])),
            Want::Invalid,
        ),
        (
            "unknown operator is invalid",
            one(expr("rack", "Near", &["r1"])),
            Want::Invalid,
        ),
        (
            "terms are ORed",
            affinity(json!([
                {"matchExpressions": [expr("rack", "In", &["r9"])]},
                {"matchExpressions": [expr("rack", "In", &["r1"])]}
            ])),
            Want::Ok,
        ),
        (
            "expressions in a term are ANDed",
            affinity(
                json!([{"matchExpressions": [expr("rack", "In", &["r1"]), expr("cores", "Lt", &["8"])]}]),
            ),
            Want::Affinity,
        ),
        (
            "an empty term matches nothing",
            affinity(json!([{}])),
            Want::Affinity,
        ),
        (
            "no terms match nothing",
            affinity(json!([])),
            Want::Affinity,
        ),
        (
            "matchFields metadata.name",
            affinity(json!([{"matchFields": [expr("metadata.name", "In", &["h1"])]}])),
            Want::Ok,
        ),
        (
            "matchFields other name",
            affinity(json!([{"matchFields": [expr("metadata.name", "NotIn", &["h1"])]}])),
            Want::Affinity,
        ),
    ];
    for (name, extra, want) in cases {
        check(name, run(extra, attrs()), want);
    }
}

#[test]
fn taints_from_attributes_refuse_pods_that_do_not_tolerate_them() {
    let taint = |v: &str| vec![text_attr("taint.mesopod.io/dedicated", v)];
    let tol = |t: Value| json!({"tolerations": [t]});
    let cases = [
        (
            "NoSchedule untolerated",
            json!({}),
            taint("gpu:NoSchedule"),
            Want::Taint("dedicated"),
        ),
        (
            "NoExecute untolerated",
            json!({}),
            taint("gpu:NoExecute"),
            Want::Taint("dedicated"),
        ),
        (
            "PreferNoSchedule never refuses",
            json!({}),
            taint("gpu:PreferNoSchedule"),
            Want::Ok,
        ),
        (
            "Equal with matching value",
            tol(
                json!({"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}),
            ),
            taint("gpu:NoSchedule"),
            Want::Ok,
        ),
        (
            "Equal is the default operator",
            tol(json!({"key": "dedicated", "value": "gpu"})),
            taint("gpu:NoExecute"),
            Want::Ok,
        ),
        (
            "Equal with other value",
            tol(json!({"key": "dedicated", "value": "db"})),
            taint("gpu:NoSchedule"),
            Want::Taint("dedicated"),
        ),
        (
            "Exists on the key",
            tol(json!({"key": "dedicated", "operator": "Exists"})),
            taint("gpu:NoSchedule"),
            Want::Ok,
        ),
        (
            "Exists without key tolerates all",
            tol(json!({"operator": "Exists"})),
            taint("gpu:NoExecute"),
            Want::Ok,
        ),
        (
            "effect must match",
            tol(json!({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"})),
            taint("gpu:NoExecute"),
            Want::Taint("dedicated"),
        ),
        (
            "other key",
            tol(json!({"key": "other", "operator": "Exists"})),
            taint("gpu:NoSchedule"),
            Want::Taint("dedicated"),
        ),
        (
            "empty taint value",
            tol(json!({"key": "dedicated", "value": ""})),
            taint("NoSchedule"),
            Want::Ok,
        ),
        (
            "bad toleration operator is invalid",
            tol(json!({"key": "dedicated", "operator": "Maybe"})),
            taint("gpu:NoSchedule"),
            Want::Invalid,
        ),
    ];
    for (name, extra, attrs, want) in cases {
        check(name, run(extra, attrs), want);
    }
}
