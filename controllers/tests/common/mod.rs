//! Builders shared by the integration tests: a Deployment `web`, its
//! ReplicaSets as the controller makes them, and ready pods.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::collections::BTreeMap;

use controllers::deployment::{
    DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, POD_TEMPLATE_HASH_LABEL,
    REVISION_ANNOTATION, pod_template_hash, resolve_fenceposts,
};
use controllers::{Action, Reconciled, Status, controller_ref};
use k8s_openapi::api::apps::v1::DeploymentCondition;
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStatus, DeploymentStrategy, ReplicaSet, ReplicaSetSpec,
    ReplicaSetStatus, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::{
    Container, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

pub const NOW: &str = "2024-06-01T12:00:00Z";

pub fn ts(s: &str) -> Timestamp {
    s.parse().expect("test timestamp")
}

/// `NOW` plus `secs` (negative for the past).
pub fn at(secs: i64) -> Timestamp {
    ts(NOW)
        .checked_add(SignedDuration::from_secs(secs))
        .expect("in range")
}

pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Deployment `default/web`, selector and template labels `app=web`, one
/// container running `image`, generation 1, RollingUpdate defaults.
pub fn deployment(replicas: i32, image: &str) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("d-uid".into()),
            generation: Some(1),
            creation_timestamp: Some(Time(at(-86_400))),
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels(&[("app", "web")])),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(&[("app", "web")])),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "web".into(),
                        image: Some(image.into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        status: None,
    }
}

pub fn spec(d: &mut Deployment) -> &mut DeploymentSpec {
    d.spec.get_or_insert_with(Default::default)
}

pub fn set_image(d: &mut Deployment, image: &str) {
    if let Some(c) = spec(d)
        .template
        .spec
        .as_mut()
        .and_then(|s| s.containers.first_mut())
    {
        c.image = Some(image.into());
    }
    d.metadata.generation = Some(d.metadata.generation.unwrap_or(0) + 1);
}

pub fn set_rolling(d: &mut Deployment, surge: IntOrString, unavailable: IntOrString) {
    spec(d).strategy = Some(DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(surge),
            max_unavailable: Some(unavailable),
        }),
    });
}

pub fn set_recreate(d: &mut Deployment) {
    spec(d).strategy = Some(DeploymentStrategy {
        type_: Some("Recreate".into()),
        rolling_update: None,
    });
}

pub fn replicas_of(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// `replicas + maxSurge` for `d` (0 surge for Recreate).
pub fn max_total(d: &Deployment) -> i32 {
    let spec = d.spec.as_ref().expect("spec");
    let replicas = replicas_of(d);
    let recreate = spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) == Some("Recreate");
    if recreate {
        return replicas;
    }
    let ru = spec
        .strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref());
    let (surge, _) = resolve_fenceposts(
        ru.and_then(|r| r.max_surge.as_ref()),
        ru.and_then(|r| r.max_unavailable.as_ref()),
        replicas,
    )
    .expect("fenceposts");
    replicas + surge
}

/// The ReplicaSet `d`'s controller would make for `d`'s current template,
/// at `revision`, sized `replicas`, with that many pods of which
/// `available` are available (and ready), created `age` seconds ago.
pub fn rs_for(
    d: &Deployment,
    revision: i64,
    replicas: i32,
    available: i32,
    age: i64,
) -> ReplicaSet {
    let mut template = d.spec.as_ref().expect("spec").template.clone();
    let hash = pod_template_hash(&template, None);
    let mut l = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    l.insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
    template
        .metadata
        .get_or_insert_with(Default::default)
        .labels = Some(l.clone());
    let mut selector = d.spec.as_ref().expect("spec").selector.clone();
    selector
        .match_labels
        .get_or_insert_with(BTreeMap::new)
        .insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("web-{hash}")),
            namespace: Some("default".into()),
            uid: Some(format!("rs-{hash}")),
            generation: Some(1),
            creation_timestamp: Some(Time(at(-age))),
            owner_references: Some(vec![controller_ref(d)]),
            labels: Some(l),
            annotations: Some(labels(&[
                (REVISION_ANNOTATION, &revision.to_string()),
                (DESIRED_REPLICAS_ANNOTATION, &replicas_of(d).to_string()),
                (MAX_REPLICAS_ANNOTATION, &max_total(d).to_string()),
            ])),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            min_ready_seconds: None,
            selector,
            template: Some(template),
        }),
        status: Some(ReplicaSetStatus {
            replicas,
            ready_replicas: Some(available),
            available_replicas: Some(available),
            fully_labeled_replicas: Some(replicas),
            observed_generation: Some(1),
            ..Default::default()
        }),
    }
}

pub fn rs_name(rs: &ReplicaSet) -> String {
    rs.metadata.name.clone().unwrap_or_default()
}

pub fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

pub fn annotation(meta: &ObjectMeta, key: &str) -> Option<String> {
    meta.annotations.as_ref()?.get(key).cloned()
}

/// A running pod controlled by `owner`, ready since `ready_secs_ago` (not
/// ready if `None`).
pub fn pod_of(owner: &ReplicaSet, name: &str, ready_secs_ago: Option<i64>) -> Pod {
    let l = owner
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone());
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("{name}-uid")),
            labels: l,
            creation_timestamp: Some(Time(at(-3600))),
            owner_references: Some(vec![controller_ref(owner)]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some("node-1".into()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: ready_secs_ago.map(|s| {
                vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(at(-s))),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }),
    }
}

pub fn deployment_status(r: &Reconciled) -> Option<DeploymentStatus> {
    match r.status() {
        Some(Status::Deployment(s)) => Some(s.clone()),
        _ => None,
    }
}

/// ReplicaSets created or updated by `r`, in order.
pub fn written_rses(r: &Reconciled) -> Vec<ReplicaSet> {
    r.actions
        .iter()
        .filter_map(|a| match a {
            Action::CreateReplicaSet { rs } | Action::UpdateReplicaSet { rs } => Some(rs.clone()),
            _ => None,
        })
        .collect()
}

/// Event messages of `r`, in order.
pub fn event_messages(r: &Reconciled) -> Vec<String> {
    r.events().map(|e| e.message.clone()).collect()
}

/// One sync of `d` at `NOW`, no pods.
pub fn run(d: &k8s_openapi::api::apps::v1::Deployment, rses: &[ReplicaSet]) -> Reconciled {
    controllers::deployment::reconcile(d, rses, &[], at(0)).expect("reconcile")
}

pub fn condition(s: &DeploymentStatus, type_: &str) -> DeploymentCondition {
    s.conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .cloned()
        .unwrap_or_else(|| panic!("no {type_} condition in {s:?}"))
}

pub fn reason_message(c: &DeploymentCondition) -> (String, String, String) {
    (
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    )
}

pub fn progressing(reason: &str, status: &str, updated_secs_ago: i64) -> DeploymentCondition {
    DeploymentCondition {
        type_: "Progressing".into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some("m".into()),
        last_update_time: Some(Time(at(-updated_secs_ago))),
        last_transition_time: Some(Time(at(-3600))),
    }
}
