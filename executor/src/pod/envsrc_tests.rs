#![allow(clippy::unwrap_used)]
use super::*;
use crate::objects::StaticObjects;
use crate::pod::PodPlan;
use futures::FutureExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use serde_json::json;

fn plan(container: serde_json::Value) -> PodPlan {
    let pod = json!({
        "metadata": {"name": "web", "namespace": "prod", "uid": "u-1",
                     "labels": {"app": "shop", "tier": "front"}, "annotations": {"note": "hi"}},
        "spec": {"nodeName": "node-a", "serviceAccountName": "robot", "containers": [container]}
    });
    PodPlan::from_pod(serde_json::from_value(pod).unwrap()).unwrap()
}

fn objects() -> StaticObjects {
    let o = StaticObjects::default();
    o.set_config_map(
        serde_json::from_value::<ConfigMap>(json!({
            "metadata": {"name": "cfg", "namespace": "prod"},
            "data": {"COLOR": "blue", "SIZE": "L", "bad key": "x", "1st": "y"}
        }))
        .unwrap(),
    );
    o.set_secret(
        serde_json::from_value::<Secret>(json!({
            "metadata": {"name": "sec", "namespace": "prod"},
            "data": {"PASSWORD": "aHVudGVyMg=="}
        }))
        .unwrap(),
    );
    o
}

fn run(p: &PodPlan, o: &StaticObjects) -> Result<Resolved, String> {
    let cx = PodContext {
        pod: &p.pod,
        key: &p.key,
        node_name: "node-a",
        host_ip: "10.0.0.5",
        pod_ip: "10.0.0.5",
        containers: &p.containers,
    };
    resolve(&p.containers[0], &cx, o, ExecLimits::of_this_process())
        .now_or_never()
        .unwrap()
}

fn get<'a>(r: &'a Resolved, k: &str) -> Option<&'a str> {
    r.env
        .iter()
        .rev()
        .find(|(n, _)| n == k)
        .map(|(_, v)| v.as_str())
}

#[test]
fn every_source_resolves_as_kubelet_does() {
    let p = plan(json!({"name": "c", "image": "i",
        "resources": {"limits": {"memory": "64Mi"}},
        "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CM_"},
                    {"secretRef": {"name": "missing", "optional": true}}],
        "env": [
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "NOTE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['note']"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "SA", "valueFrom": {"fieldRef": {"fieldPath": "spec.serviceAccountName"}}},
            {"name": "HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
            {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
            {"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "COLOR"}}},
            {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "PASSWORD"}}},
            {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k", "optional": true}}},
            {"name": "MSG", "value": "$(POD) on $(NODE) is $(COLOR), $$(POD) $(UNSET)"}
        ],
        "command": ["echo", "$(MSG)"]}));
    let r = run(&p, &objects()).unwrap();
    for (k, v) in [
        ("POD", "web"),
        ("APP", "shop"),
        ("NOTE", "hi"),
        ("NODE", "node-a"),
        ("SA", "robot"),
        ("HOST", "10.0.0.5"),
        ("MEM", "64"),
        ("COLOR", "blue"),
        ("PW", "hunter2"),
        ("CM_SIZE", "L"),
        ("MSG", "web on node-a is blue, $(POD) $(UNSET)"),
    ] {
        assert_eq!(get(&r, k), Some(v), "{k}: {:?}", r.env);
    }
    assert_eq!(get(&r, "OPT"), None);
    assert_eq!(get(&r, "CM_bad key"), None);
    assert_eq!(
        get(&r, "CM_1st"),
        Some("y"),
        "a prefix makes a digit-first key valid"
    );
    assert_eq!(r.warnings.len(), 1);
    assert_eq!(
        r.warnings[0].1,
        "Keys [CM_bad key] from the EnvFrom configMap prod/cfg were skipped since they are considered invalid environment variable names."
    );
    let e = expanded(&p.containers[0], &r.env, ExecLimits::of_this_process()).unwrap();
    assert_eq!(e.argv, ["echo", "web on node-a is blue, $(POD) $(UNSET)"]);
}

#[test]
fn missing_objects_are_kubelets_errors_unless_optional() {
    let o = objects();
    let cases = [
        (
            json!({"configMapKeyRef": {"name": "gone", "key": "k"}}),
            "configmap \"gone\" not found",
        ),
        (
            json!({"secretKeyRef": {"name": "gone", "key": "k"}}),
            "secret \"gone\" not found",
        ),
        (
            json!({"configMapKeyRef": {"name": "cfg", "key": "NOPE"}}),
            "couldn't find key NOPE in ConfigMap prod/cfg",
        ),
        (
            json!({"secretKeyRef": {"name": "sec", "key": "NOPE"}}),
            "couldn't find key NOPE in Secret prod/sec",
        ),
    ];
    for (from, want) in cases {
        let p = plan(json!({"name": "c", "env": [{"name": "X", "valueFrom": from}]}));
        assert_eq!(run(&p, &o).unwrap_err(), want);
    }
    let p = plan(json!({"name": "c", "envFrom": [{"secretRef": {"name": "gone"}}]}));
    assert_eq!(run(&p, &o).unwrap_err(), "secret \"gone\" not found");
    let p = plan(
        json!({"name": "c", "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "NOPE", "optional": true}}}]}),
    );
    assert!(run(&p, &o).unwrap().env.is_empty());
}

/// A chain of variables that double each other stops at the first value
/// past one string's limit, with kubelet's config error naming it; the
/// same pod with a short chain starts as before.
#[test]
fn a_doubling_chain_is_a_config_error_naming_the_variable() {
    let chain = |n: usize| {
        let mut env = vec![json!({"name": "V0", "value": "x".repeat(4096)})];
        for i in 1..n {
            env.push(
                json!({"name": format!("V{i}"), "value": format!("$(V{})$(V{})", i - 1, i - 1)}),
            );
        }
        plan(json!({"name": "c", "env": env, "command": ["echo", "$(V3)"]}))
    };
    let err = run(&chain(18), &objects()).unwrap_err();
    assert_eq!(
        err,
        "env var \"V5\" would be longer than 131072 bytes, the most the kernel takes in one string (MAX_ARG_STRLEN)"
    );
    let r = run(&chain(4), &objects()).unwrap();
    assert_eq!(get(&r, "V3").map(str::len), Some(4096 * 8));
    let p = chain(4);
    let e = expanded(&p.containers[0], &r.env, ExecLimits::of_this_process()).unwrap();
    assert_eq!(e.argv[1].len(), 4096 * 8);
    // `command` and `args` share what the environment leaves.
    let tight = ExecLimits {
        total: crate::pod::expand::env_cost(&r.env) + 4096 * 8,
        string: crate::pod::expand::MAX_ARG_STRLEN,
    };
    assert_eq!(
        expanded(&p.containers[0], &r.env, tight).unwrap_err(),
        "command[1] would take the container's environment and arguments past 94256 bytes, the most the kernel takes (ARG_MAX)"
    );
}
