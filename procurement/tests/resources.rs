//! Roles and pod-resources procurements, table-driven.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use procurement::{
    AllOrNothing, Owner, PodResourcesProcurement, ProcureError, Procurement, ResourceDefaults,
    ResourceKind, RolesProcurement, Stage,
};
use serde_json::{Value, json};

fn needs(spec: Value) -> Result<[f64; 4], ProcureError> {
    PodResourcesProcurement::new(ResourceDefaults::default())
        .unwrap()
        .pod_needs(&task(spec, Value::Null))
}

#[test]
fn pod_resources_follow_kubernetes_rules() {
    let c = |name: &str, req: Value, lim: Value| container(name, req, lim, Value::Null);
    let n = Value::Null;
    // [cpus, mem MB, disk MB, gpus]
    let cases: Vec<(&str, Value, [f64; 4])> = vec![
        (
            "sum of requests",
            json!({"containers": [c("a", json!({"cpu": "500m", "memory": "128Mi"}), n.clone()),
                                   c("b", json!({"cpu": "250m", "memory": "64Mi"}), n.clone())]}),
            [0.75, 192.0, 0.0, 0.0],
        ),
        (
            "limits stand in for missing requests",
            json!({"containers": [c("a", n.clone(), json!({"cpu": "1", "memory": "1Gi"}))]}),
            [1.0, 1024.0, 0.0, 0.0],
        ),
        (
            "a request wins over a limit",
            json!({"containers": [c("a", json!({"cpu": "200m"}), json!({"cpu": "1", "memory": "256Mi"}))]}),
            [0.2, 256.0, 0.0, 0.0],
        ),
        (
            "defaults when a container sets nothing",
            json!({"containers": [c("a", n.clone(), n.clone()), c("b", json!({"cpu": "1"}), n.clone())]}),
            [1.25, 128.0, 0.0, 0.0],
        ),
        (
            "minimums raise tiny pods",
            json!({"containers": [c("a", json!({"cpu": "1m", "memory": "1Mi"}), n.clone())]}),
            [0.01, 32.0, 0.0, 0.0],
        ),
        (
            "disk from ephemeral-storage, gpus from nvidia.com/gpu",
            json!({"containers": [c("a", json!({"cpu": "1", "memory": "64Mi", "ephemeral-storage": "2Gi"}),
                                      json!({"nvidia.com/gpu": "2"}))]}),
            [1.0, 64.0, 2048.0, 2.0],
        ),
        (
            "a larger init container wins",
            json!({"initContainers": [c("i", json!({"cpu": "2", "memory": "64Mi"}), n.clone())],
                   "containers": [c("a", json!({"cpu": "500m", "memory": "512Mi"}), n.clone())]}),
            [2.0, 512.0, 0.0, 0.0],
        ),
        (
            "sidecars run beside the app and later init containers",
            json!({"initContainers": [
                       {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}},
                       c("i", json!({"cpu": "2", "memory": "64Mi"}), n.clone())],
                   "containers": [c("a", json!({"cpu": "500m", "memory": "64Mi"}), n.clone())]}),
            [3.0, 128.0, 0.0, 0.0],
        ),
        (
            "overhead is added",
            json!({"overhead": {"cpu": "250m", "memory": "32Mi"},
                   "containers": [c("a", json!({"cpu": "1", "memory": "64Mi"}), n.clone())]}),
            [1.25, 96.0, 0.0, 0.0],
        ),
        (
            "pod-level resources replace the containers' sum",
            json!({"resources": {"requests": {"cpu": "3", "memory": "1Gi"}},
                   "containers": [c("a", json!({"cpu": "1", "memory": "64Mi"}), n.clone())]}),
            [3.0, 1024.0, 0.0, 0.0],
        ),
    ];
    for (name, spec, want) in cases {
        assert_eq!(needs(spec).unwrap(), want, "{name}");
    }
}

#[test]
fn malformed_quantities_make_the_pod_invalid_for_the_resources_stage() {
    let spec =
        json!({"containers": [container("a", json!({"cpu": "lots"}), Value::Null, Value::Null)]});
    let e = needs(spec).unwrap_err();
    assert!(
        matches!(
            e,
            ProcureError::InvalidPod {
                stage: Stage::PodResources,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("lots"), "{e}");
}

/// A valid quantity past anything Mesos holds (kube-apiserver caps it at
/// 2^63-1 and accepts it) is more than any offer: insufficient, as
/// kube-scheduler says, not an invalid pod; sums with it saturate.
#[test]
fn a_quantity_past_any_agent_is_insufficient_not_invalid() {
    // (key, quantity, kind, its place in `needs`)
    for (key, q, kind, at) in [
        ("memory", "99999999999999999999Ei", ResourceKind::Mem, 1),
        ("cpu", "9999999999999999999999999", ResourceKind::Cpus, 0),
    ] {
        let spec = json!({"containers": [
            container("a", json!({key: q}), Value::Null, Value::Null),
            container("b", json!({key: q}), Value::Null, Value::Null),
        ]});
        let want = needs(spec.clone()).unwrap();
        assert!(want[at] > 1e15, "{key}: {want:?}");
        let o = offer(
            "h1",
            vec![scalar("cpus", 64.0, None), scalar("mem", 1048576.0, None)],
            vec![],
        );
        let (node, mut state) = node_and_state(&o);
        let mut t = task(spec, Value::Null);
        let e = PodResourcesProcurement::new(ResourceDefaults::default())
            .unwrap()
            .procure(&mut t, &node, &mut state)
            .unwrap_err();
        assert!(
            matches!(e, ProcureError::Insufficient { resource, owner: Owner::Pod, .. } if resource == kind),
            "{key}: {e:?}"
        );
    }
}

fn pipeline() -> AllOrNothing {
    AllOrNothing::new()
        .then(RolesProcurement::new(&["prod".into(), "*".into()], &["*".into()]).unwrap())
        .then(PodResourcesProcurement::new(ResourceDefaults::default()).unwrap())
}

fn one_cpu_pod(roles: Option<&str>) -> registry::PodTask {
    let ann = roles
        .map(|r| json!({"mesopod.io/roles": r}))
        .unwrap_or(Value::Null);
    task(
        json!({"containers": [container("a", json!({"cpu": "1", "memory": "100Mi"}), Value::Null, Value::Null)]}),
        ann,
    )
}

#[test]
fn roles_come_from_the_annotation_filtered_to_framework_roles_else_the_defaults() {
    let o = offer(
        "h1",
        vec![
            scalar("cpus", 4.0, None),
            scalar("mem", 1000.0, None),
            scalar("cpus", 0.5, Some("prod")),
            scalar("mem", 50.0, Some("prod")),
            scalar("cpus", 8.0, Some("other")),
        ],
        vec![],
    );
    #[derive(Debug)]
    enum Want {
        // cpus taken from (prod, *)
        Took(f64, f64),
        Empty,
        NoRole,
    }
    let cases = [
        ("absent: default roles (*)", None, Want::Took(0.0, 1.0)),
        (
            "reserved before unreserved, in any listed order",
            Some("*,prod"),
            Want::Took(0.5, 0.5),
        ),
        ("prod then *", Some("prod, *"), Want::Took(0.5, 0.5)),
        (
            "non-framework roles are dropped",
            Some("other,*"),
            Want::Took(0.0, 1.0),
        ),
        ("present but empty", Some(""), Want::Empty),
        ("present but only blanks", Some(" , "), Want::Empty),
        ("no framework role", Some("other"), Want::NoRole),
    ];
    for (name, ann, want) in cases {
        let (node, mut state) = node_and_state(&o);
        let mut t = one_cpu_pod(ann);
        let r = pipeline().procure(&mut t, &node, &mut state);
        let spec = state.spec();
        let cpus_in = |role: &str| {
            spec.resources
                .iter()
                .filter(|r| r.name == "cpus" && mesos::resources::resource_role(r) == role)
                .map(|r| r.scalar.unwrap().value)
                .sum::<f64>()
        };
        match (&r, &want) {
            (Ok(()), Want::Took(prod, star)) => {
                assert_eq!((cpus_in("prod"), cpus_in("*")), (*prod, *star), "{name}");
                assert_eq!(cpus_in("other"), 0.0, "{name}");
            }
            (Err(ProcureError::RolesAnnotationEmpty), Want::Empty)
            | (Err(ProcureError::NoFrameworkRole { .. }), Want::NoRole) => {
                assert_eq!(r.as_ref().unwrap_err().stage(), Stage::Roles);
                assert!(spec.resources.is_empty(), "{name}");
            }
            _ => panic!("{name}: got {r:?}, want {want:?}"),
        }
    }
}

#[test]
fn roles_configuration_is_checked() {
    assert!(RolesProcurement::new(&[], &[]).is_err());
    assert!(RolesProcurement::new(&["prod".into()], &["*".into()]).is_err());
}

#[test]
fn insufficient_resources_name_the_resource_asked_and_available_and_take_nothing() {
    let cases: [(&str, Vec<mesos::proto::Resource>, ResourceKind, f64, f64); 3] = [
        (
            "cpus short",
            vec![scalar("cpus", 0.5, None), scalar("mem", 1000.0, None)],
            ResourceKind::Cpus,
            1.0,
            0.5,
        ),
        (
            "mem short",
            vec![scalar("cpus", 2.0, None), scalar("mem", 99.5, None)],
            ResourceKind::Mem,
            100.0,
            99.5,
        ),
        (
            "reserved for a role the pod may not use does not count",
            vec![
                scalar("cpus", 4.0, Some("other")),
                scalar("mem", 1000.0, None),
            ],
            ResourceKind::Cpus,
            1.0,
            0.0,
        ),
    ];
    for (name, resources, kind, asked, available) in cases {
        let o = offer("h1", resources, vec![]);
        let (node, mut state) = node_and_state(&o);
        let before = state.remaining();
        let mut t = one_cpu_pod(None);
        let e = pipeline().procure(&mut t, &node, &mut state).unwrap_err();
        assert_eq!(
            e,
            ProcureError::Insufficient {
                resource: kind,
                owner: Owner::Pod,
                asked,
                available
            },
            "{name}"
        );
        assert_eq!(state.remaining(), before, "{name}: all or none");
    }
}

#[test]
fn gpus_and_disk_are_taken_when_asked_and_only_then() {
    let o = offer(
        "h1",
        vec![
            scalar("cpus", 4.0, None),
            scalar("mem", 1000.0, None),
            scalar("disk", 1000.0, None),
            scalar("gpus", 2.0, None),
        ],
        vec![],
    );
    let (node, mut state) = node_and_state(&o);
    let mut t = one_cpu_pod(None);
    pipeline().procure(&mut t, &node, &mut state).unwrap();
    let spec = state.spec();
    assert_eq!(amount(&spec.resources, "gpus"), 0.0);
    assert_eq!(amount(&spec.resources, "disk"), 0.0);

    let spec_json = json!({"containers": [container("a", json!({"cpu": "1", "memory": "64Mi", "ephemeral-storage": "100Mi"}), json!({"nvidia.com/gpu": "1"}), Value::Null)]});
    let mut t = task(spec_json, Value::Null);
    let (node, mut state) = node_and_state(&o);
    pipeline().procure(&mut t, &node, &mut state).unwrap();
    let spec = state.spec();
    assert_eq!(amount(&spec.resources, "gpus"), 1.0);
    assert_eq!(amount(&spec.resources, "disk"), 100.0);
}
