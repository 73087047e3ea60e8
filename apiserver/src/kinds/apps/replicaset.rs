//! ReplicaSet (`apps/v1`): a number of pods from one template. The replicaset
//! controller keeps the count; the shim defaults, validates and stores.

use std::time::SystemTime;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Value, json};

use super::{check_selector_and_template, check_selector_unchanged, col, non_negative};
use crate::kinds::Kind;
use crate::resource::Resource;
use crate::validation::Causes;

impl Kind for ReplicaSet {
    const RESOURCE: Resource = Resource::ReplicaSets;

    fn normalize(&mut self) {
        if let Some(spec) = self.spec.as_mut() {
            spec.replicas.get_or_insert(1);
            if let Some(t) = spec.template.as_mut() {
                super::default_template(t);
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
        check_selector_and_template(causes, "ReplicaSet", &spec.selector, spec.template.as_ref());
    }

    fn validate_update(old: &Self, new: &Self, causes: &mut Causes) {
        if let (Some(o), Some(n)) = (&old.spec, &new.spec) {
            check_selector_unchanged(causes, &o.selector, &n.selector);
        }
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

replicated_workload!(
    ReplicaSet,
    keep_labels: false,
    status_replicas: |s| s.replicas,
    selector: |s| Some(&s.selector)
);

/// kube-apiserver's ReplicaSet columns: NAME DESIRED CURRENT READY AGE, and with `-o
/// wide` CONTAINERS IMAGES SELECTOR.
pub(crate) fn columns() -> Vec<Value> {
    let (name, age) = crate::kinds::name_and_age();
    vec![
        name,
        col(
            "Desired",
            "integer",
            0,
            "Number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1.",
        ),
        col(
            "Current",
            "integer",
            0,
            "Replicas is the most recently observed number of replicas.",
        ),
        col(
            "Ready",
            "integer",
            0,
            "The number of ready replicas for this replica set.",
        ),
        age,
    ]
    .into_iter()
    .chain(super::wide_columns(
        "Selector is a label query over pods that should match the replica count.",
    ))
    .collect()
}

pub(crate) fn cells(obj: &Value, now: SystemTime) -> Option<Vec<Value>> {
    let rs: ReplicaSet = serde_json::from_value(obj.clone()).ok()?;
    let status = rs.status.clone().unwrap_or_default();
    let spec = rs.spec.clone().unwrap_or_default();
    Some(
        vec![
            json!(rs.metadata.name),
            json!(spec.replicas.unwrap_or(1)),
            json!(status.replicas),
            json!(status.ready_replicas.unwrap_or(0)),
            json!(crate::clock::age(crate::table::created(obj), now)),
        ]
        .into_iter()
        .chain(super::wide_cells(spec.template.as_ref(), &spec.selector))
        .collect(),
    )
}
