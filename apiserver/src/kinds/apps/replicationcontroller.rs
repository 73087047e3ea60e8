//! ReplicationController (core `v1`): the ReplicaSet's predecessor, with a plain label
//! map for a selector. The replication controller (the replicaset controller's code)
//! keeps the count; the shim defaults, validates and stores. Unlike a ReplicaSet's, its
//! selector may change, and it defaults from the template's labels, as do the
//! object's own labels (kube-apiserver's `SetDefaults_ReplicationController`).

use std::time::SystemTime;

use k8s_openapi::api::core::v1::ReplicationController;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};

use super::{check_selector_and_template, col, non_negative};
use crate::kinds::Kind;
use crate::resource::Resource;
use crate::validation::Causes;

impl Kind for ReplicationController {
    const RESOURCE: Resource = Resource::ReplicationControllers;

    fn normalize(&mut self) {
        let Some(spec) = self.spec.as_mut() else {
            return;
        };
        spec.replicas.get_or_insert(1);
        let Some(template) = spec.template.as_mut() else {
            return;
        };
        super::default_template(template);
        if let Some(labels) = template.metadata.as_ref().and_then(|m| m.labels.as_ref()) {
            if spec.selector.as_ref().is_none_or(|s| s.is_empty()) {
                spec.selector = Some(labels.clone());
            }
            if self.metadata.labels.as_ref().is_none_or(|l| l.is_empty()) {
                self.metadata.labels = Some(labels.clone());
            }
        }
    }

    fn validate(&self, causes: &mut Causes) {
        let Some(spec) = &self.spec else {
            causes.required("spec");
            return;
        };
        non_negative(causes, "spec.replicas", spec.replicas);
        non_negative(causes, "spec.minReadySeconds", spec.min_ready_seconds);
        check_selector_and_template(
            causes,
            "ReplicationController",
            &as_selector(spec.selector.as_ref()),
            spec.template.as_ref(),
        );
    }

    /// kube's warnings: the name (it names pods) and the template on create, the
    /// template on an update that changed the spec.
    fn warnings(&self, old: Option<&Self>) -> Vec<String> {
        super::template_warnings(
            &self.metadata,
            old.map(|o| &o.metadata),
            self.spec.as_ref().and_then(|s| s.template.as_ref()),
            true,
        )
    }

    fn prepare_create(&mut self) {
        self.metadata.generation = Some(1);
        self.status = None;
    }

    fn prepare_update(&mut self, old: &Self) {
        self.status.clone_from(&old.status);
        let changed = self.spec != old.spec;
        super::next_generation(&mut self.metadata, &old.metadata, changed);
    }
}

/// The plain map as a `LabelSelector` of `matchLabels`, which is what it means.
fn as_selector(map: Option<&std::collections::BTreeMap<String, String>>) -> LabelSelector {
    LabelSelector {
        match_labels: map.filter(|m| !m.is_empty()).cloned(),
        match_expressions: None,
    }
}

replicated_workload!(
    ReplicationController,
    keep_labels: false,
    status_replicas: |s| s.replicas,
    selector: |_spec| None,
    fn selector_string(&self) -> String {
        super::selector_string(&as_selector(
            self.spec.as_ref().and_then(|s| s.selector.as_ref()),
        ))
    }
);

/// kube-apiserver's ReplicationController columns: NAME DESIRED CURRENT READY AGE, and
/// with `-o wide` CONTAINERS IMAGES SELECTOR.
pub(crate) fn columns() -> Vec<Value> {
    let (name, age) = crate::kinds::name_and_age();
    vec![
        name,
        col(
            "Desired",
            "integer",
            0,
            "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller",
        ),
        col(
            "Current",
            "integer",
            0,
            "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller",
        ),
        col(
            "Ready",
            "integer",
            0,
            "The number of ready replicas for this replication controller.",
        ),
        age,
    ]
    .into_iter()
    .chain(super::wide_columns(
        "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template. Label keys and values that must match in order to be controlled by this replication controller, if empty defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
    ))
    .collect()
}

pub(crate) fn cells(obj: &Value, now: SystemTime) -> Option<Vec<Value>> {
    let rc: ReplicationController = serde_json::from_value(obj.clone()).ok()?;
    let status = rc.status.clone().unwrap_or_default();
    let spec = rc.spec.clone().unwrap_or_default();
    Some(
        vec![
            json!(rc.metadata.name),
            json!(spec.replicas.unwrap_or(1)),
            json!(status.replicas),
            json!(status.ready_replicas.unwrap_or(0)),
            json!(crate::clock::age(crate::table::created(obj), now)),
        ]
        .into_iter()
        .chain(super::wide_cells(
            spec.template.as_ref(),
            &as_selector(spec.selector.as_ref()),
        ))
        .collect(),
    )
}
