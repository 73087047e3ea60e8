//! Recovery annotations: save, then recover, gives the same task.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{at, pod};
use k8s_openapi::api::core::v1::{Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mesos::proto::{AgentId, ExecutorId, ExecutorInfo, OfferId, TaskId};
use registry::annotations::{self, BINDING_KEYS};
use registry::{
    Flag, InMemoryRegistry, PodTask, PortMapping, RecoveryError, Registry, Spec, State, TaskError,
    recover_from, save_recovery_info,
};

/// A placed, launched and bound task whose every field is recoverable.
fn placed() -> PodTask {
    let mut t = PodTask::with_id(
        TaskId::new("web.nginx.0123456789ab"),
        pod("web", "nginx", "uid-7"),
        vec!["prod".into(), "*".into()],
        at(42),
    )
    .unwrap();
    t.spec = Some(Arc::new(Spec {
        agent_id: AgentId::new("agent-S1"),
        hostname: "node-1.example".into(),
        resources: Vec::new(),
        port_mappings: vec![
            PortMapping {
                container: "nginx".into(),
                container_port: 80,
                host_port: 31080,
                protocol: "TCP".into(),
                name: Some("http".into()),
            },
            PortMapping {
                container: "dns".into(),
                container_port: 53,
                host_port: 31053,
                protocol: "UDP".into(),
                name: None,
            },
        ],
        executor: Some(Arc::new(ExecutorInfo {
            executor_id: Some(ExecutorId::new("mesopod-exec-4f2a")),
            ..ExecutorInfo::default()
        })),
    }));
    t.offer_id = Some(OfferId::new("offer-99"));
    t.set(Flag::Launched);
    t.set(Flag::Bound);
    t
}

/// The pod as the binder stores it: its own annotations plus ours.
fn bind(task: &PodTask) -> Pod {
    let mut pod = (**task.pod().expect("a placed task keeps its pod")).clone();
    let ann = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
    ann.insert("team".into(), "blue".into());
    ann.extend(save_recovery_info(task));
    pod
}

#[test]
fn save_then_recover_gives_an_equal_task() {
    let original = placed();
    let bound = bind(&original);
    let recovered = recover_from(&bound, at(42)).unwrap().unwrap();
    // A recovered task is launched: it keeps the pod's key and grace period,
    // as the original does once released.
    let mut expected = original;
    expected.release_pod();
    assert_eq!(recovered, expected);
    assert!(recovered.pod().is_none());
}

#[test]
fn each_field_survives_the_round_trip() {
    let original = placed();
    let recovered = recover_from(&bind(&original), at(42)).unwrap().unwrap();
    let (o, r) = (
        original.spec.as_ref().unwrap(),
        recovered.spec.as_ref().unwrap(),
    );
    assert_eq!(recovered.id, original.id);
    assert_eq!(r.agent_id, o.agent_id);
    assert_eq!(r.hostname, o.hostname);
    assert_eq!(recovered.offer_id, original.offer_id);
    assert_eq!(r.executor_id(), o.executor_id());
    assert_eq!(r.port_mappings, o.port_mappings);
    assert_eq!(recovered.roles, original.roles);
    assert!(recovered.has(Flag::Launched) && recovered.has(Flag::Bound));
    assert!(!recovered.has(Flag::Deleted));
    assert_eq!(recovered.state, State::Pending);
    assert_eq!(recovered.pod_key(), original.pod_key());
}

#[test]
fn the_annotations_are_the_documented_words() {
    let saved = save_recovery_info(&placed());
    let want: BTreeMap<String, String> = [
        ("mesopod.io/task-id", "web.nginx.0123456789ab"),
        ("mesopod.io/agent-id", "agent-S1"),
        ("mesopod.io/offer-id", "offer-99"),
        ("mesopod.io/executor-id", "mesopod-exec-4f2a"),
        ("mesopod.io/hostname", "node-1.example"),
        (
            "mesopod.io/ports",
            r#"[{"container":"nginx","containerPort":80,"hostPort":31080,"protocol":"TCP","name":"http"},{"container":"dns","containerPort":53,"hostPort":31053,"protocol":"UDP"}]"#,
        ),
        ("mesopod.io/roles", "prod,*"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(saved, want);
}

#[test]
fn resources_and_executor_details_are_not_recovered() {
    let mut t = placed();
    let mut spec = (**t.spec.as_ref().unwrap()).clone();
    spec.resources = vec![mesos::proto::Resource {
        name: "cpus".into(),
        ..Default::default()
    }];
    Arc::make_mut(spec.executor.as_mut().unwrap()).name = Some("mesopod".into());
    t.spec = Some(Arc::new(spec));
    let r = recover_from(&bind(&t), at(0)).unwrap().unwrap();
    let r = r.spec.unwrap();
    assert!(r.resources.is_empty());
    assert_eq!(r.executor.as_ref().unwrap().name, None);
    assert_eq!(r.executor_id().unwrap().value, "mesopod-exec-4f2a");
}

#[test]
fn a_pod_without_our_binding_annotations_is_not_ours() {
    let plain = (*pod("ns", "p", "u")).clone();
    assert_eq!(recover_from(&plain, at(0)), Ok(None));
    let mut asked_for_roles = plain.clone();
    asked_for_roles.metadata.annotations = Some(BTreeMap::from([
        (annotations::ROLES.to_owned(), "prod".to_owned()),
        ("mesopod.io/port-mapping".to_owned(), "wildcard".to_owned()),
        ("other/key".to_owned(), "x".to_owned()),
    ]));
    assert_eq!(recover_from(&asked_for_roles, at(0)), Ok(None));
}

#[test]
fn each_missing_binding_annotation_is_named() {
    let bound = bind(&placed());
    for key in BINDING_KEYS {
        let mut p = bound.clone();
        p.metadata.annotations.as_mut().unwrap().remove(key);
        assert_eq!(
            recover_from(&p, at(0)),
            Err(RecoveryError::Missing { key }),
            "without {key}"
        );
    }
}

#[test]
fn missing_roles_recover_as_none_since_the_task_is_placed() {
    let mut p = bind(&placed());
    p.metadata
        .annotations
        .as_mut()
        .unwrap()
        .remove(annotations::ROLES);
    let t = recover_from(&p, at(0)).unwrap().unwrap();
    assert!(t.roles.is_empty());
}

#[test]
fn malformed_annotations_are_named() {
    let bound = bind(&placed());
    let cases = [
        (annotations::PORTS, "not json"),
        (
            annotations::PORTS,
            r#"[{"container":"x","containerPort":70000,"hostPort":1,"protocol":"TCP"}]"#,
        ),
        (annotations::AGENT_ID, "  "),
        (annotations::TASK_ID, ""),
        (annotations::ROLES, "prod,,*"),
    ];
    for (key, value) in cases {
        let mut p = bound.clone();
        p.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(key.to_owned(), value.to_owned());
        match recover_from(&p, at(0)) {
            Err(RecoveryError::Malformed { key: k, .. }) => assert_eq!(k, key, "{value:?}"),
            other => panic!("{key}={value:?}: {other:?}"),
        }
    }
}

#[test]
fn a_nameless_pod_is_a_typed_error() {
    let mut p = bind(&placed());
    p.metadata.name = None;
    assert_eq!(
        recover_from(&p, at(0)),
        Err(RecoveryError::Pod(TaskError::MissingName))
    );
}

#[test]
fn phase_and_deletion_shape_the_recovered_task() {
    let bound = bind(&placed());
    let with_phase = |phase: &str| {
        let mut p = bound.clone();
        p.status = Some(PodStatus {
            phase: Some(phase.into()),
            ..PodStatus::default()
        });
        recover_from(&p, at(7)).unwrap().unwrap()
    };
    assert_eq!(with_phase("Running").state, State::Running);
    assert_eq!(with_phase("Pending").state, State::Pending);
    let done = with_phase("Succeeded");
    assert_eq!(done.state, State::Finished);
    assert_eq!(done.finished_at(), Some(at(7)));
    assert_eq!(with_phase("Failed").state, State::Finished);

    // Being deleted: not flagged, so the core sends the KILL whether or not
    // the leader before it did.
    let mut deleting = bound.clone();
    deleting.metadata.deletion_timestamp = Some(Time(Default::default()));
    assert!(
        !recover_from(&deleting, at(0))
            .unwrap()
            .unwrap()
            .has(Flag::Deleted)
    );
}

#[test]
fn a_recovered_running_task_registers_and_follows_reconciliation() {
    let reg = InMemoryRegistry::new();
    let mut p = bind(&placed());
    p.status = Some(PodStatus {
        phase: Some("Running".into()),
        ..PodStatus::default()
    });
    let t = reg
        .register(recover_from(&p, at(0)).unwrap().unwrap())
        .unwrap();
    assert_eq!(reg.for_pod(&t.pod_key()).unwrap().id, t.id);
    // Reconciliation says it is gone: the task finishes, the pod is freed.
    let gone = common::Update::new(&t.id, mesos::proto::TaskState::TaskGone).status;
    assert!(reg.update_status(&gone, at(1)).changed_state());
    assert!(reg.for_pod(&t.pod_key()).is_none());
}
