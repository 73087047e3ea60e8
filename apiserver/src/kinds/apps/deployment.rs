//! Deployment (`apps/v1`): a template rolled out through ReplicaSets. The deployment
//! controller does the rolling; the shim defaults, validates and stores.

use std::time::SystemTime;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use super::{check_selector_and_template, check_selector_unchanged, col, non_negative};
use crate::CauseKind;
use crate::kinds::Kind;
use crate::resource::Resource;
use crate::validation::Causes;

/// `progressDeadlineSeconds` unless given.
const DEFAULT_PROGRESS_DEADLINE: i32 = 600;
/// `revisionHistoryLimit` unless given.
const DEFAULT_HISTORY: i32 = 10;

impl Kind for Deployment {
    const RESOURCE: Resource = Resource::Deployments;

    fn normalize(&mut self) {
        let Some(spec) = self.spec.as_mut() else {
            return;
        };
        spec.replicas.get_or_insert(1);
        spec.revision_history_limit.get_or_insert(DEFAULT_HISTORY);
        spec.progress_deadline_seconds
            .get_or_insert(DEFAULT_PROGRESS_DEADLINE);
        let strategy = spec
            .strategy
            .get_or_insert_with(DeploymentStrategy::default);
        let ty = strategy.type_.get_or_insert_with(|| "RollingUpdate".into());
        if ty == "RollingUpdate" {
            let quarter = || Some(IntOrString::String("25%".into()));
            let ru = strategy
                .rolling_update
                .get_or_insert_with(RollingUpdateDeployment::default);
            if ru.max_surge.is_none() {
                ru.max_surge = quarter();
            }
            if ru.max_unavailable.is_none() {
                ru.max_unavailable = quarter();
            }
        }
        super::default_template(&mut spec.template);
    }

    fn validate(&self, causes: &mut Causes) {
        let Some(spec) = &self.spec else {
            causes.required("spec");
            return;
        };
        non_negative(causes, "spec.replicas", spec.replicas);
        non_negative(causes, "spec.minReadySeconds", spec.min_ready_seconds);
        non_negative(
            causes,
            "spec.revisionHistoryLimit",
            spec.revision_history_limit,
        );
        check_selector_and_template(causes, "Deployment", &spec.selector, Some(&spec.template));
        if let Some(strategy) = &spec.strategy {
            check_strategy(causes, strategy);
        }
        if let Some(deadline) = spec.progress_deadline_seconds {
            non_negative(causes, "spec.progressDeadlineSeconds", Some(deadline));
            if deadline <= spec.min_ready_seconds.unwrap_or(0) {
                causes.invalid_number(
                    "spec.progressDeadlineSeconds",
                    deadline.into(),
                    "must be greater than minReadySeconds",
                );
            }
        }
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
            self.spec.as_ref().map(|s| &s.template),
            true,
        )
    }

    fn prepare_create(&mut self) {
        self.metadata.generation = Some(1);
        self.status = None;
    }

    fn prepare_update(&mut self, old: &Self) {
        self.status.clone_from(&old.status);
        // kube-apiserver counts annotation changes too (rollbacks once went through one).
        let changed =
            self.spec != old.spec || self.metadata.annotations != old.metadata.annotations;
        super::next_generation(&mut self.metadata, &old.metadata, changed);
    }
}

/// `spec.strategy`: a known type, `rollingUpdate` only with RollingUpdate, and surge and
/// unavailability that parse and are not both 0 (ValidateDeploymentStrategy).
fn check_strategy(causes: &mut Causes, strategy: &DeploymentStrategy) {
    let ty = strategy.type_.as_deref().unwrap_or("RollingUpdate");
    match ty {
        "Recreate" => {
            if strategy.rolling_update.is_some() {
                causes.forbidden(
                    "spec.strategy.rollingUpdate",
                    "may not be specified when strategy `type` is 'Recreate'",
                );
            }
        }
        "RollingUpdate" => {
            let Some(ru) = &strategy.rolling_update else {
                causes.required("spec.strategy.rollingUpdate");
                return;
            };
            let path = "spec.strategy.rollingUpdate";
            let surge =
                check_int_or_percent(causes, &format!("{path}.maxSurge"), ru.max_surge.as_ref());
            let unavailable = check_int_or_percent(
                causes,
                &format!("{path}.maxUnavailable"),
                ru.max_unavailable.as_ref(),
            );
            if let Some(IntOrString::String(s)) = &ru.max_unavailable
                && unavailable.is_some_and(|p| p > 100)
            {
                causes.invalid(
                    format!("{path}.maxUnavailable"),
                    s,
                    "must not be greater than 100%",
                );
            }
            if surge == Some(0) && unavailable == Some(0) {
                causes.push(
                    CauseKind::Invalid,
                    format!("{path}.maxUnavailable"),
                    "Invalid value: 0: may not be 0 when `maxSurge` is 0",
                );
            }
        }
        other => causes.unsupported("spec.strategy.type", other, &["Recreate", "RollingUpdate"]),
    }
}

/// An int or a percent (`25%`): its number, or a cause and `None`.
pub(crate) fn check_int_or_percent(
    causes: &mut Causes,
    field: &str,
    value: Option<&IntOrString>,
) -> Option<i64> {
    match value? {
        IntOrString::Int(n) => {
            let n = i64::from(*n);
            if n < 0 {
                causes.invalid_number(field, n, "must be greater than or equal to 0");
                return None;
            }
            Some(n)
        }
        IntOrString::String(s) => {
            let parsed = s
                .strip_suffix('%')
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<i64>().ok());
            if parsed.is_none() {
                causes.invalid(
                    field,
                    s,
                    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
                );
            }
            parsed
        }
    }
}

replicated_workload!(
    Deployment,
    keep_labels: true,
    status_replicas: |s| s.replicas.unwrap_or(0),
    selector: |s| Some(&s.selector)
);

/// kube-apiserver's Deployment columns: NAME READY UP-TO-DATE AVAILABLE AGE, and with
/// `-o wide` CONTAINERS IMAGES SELECTOR.
pub(crate) fn columns() -> Vec<Value> {
    let (name, age) = crate::kinds::name_and_age();
    vec![
        name,
        col("Ready", "string", 0, "Number of the pod with ready state"),
        col(
            "Up-to-date",
            "string",
            0,
            "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
        ),
        col(
            "Available",
            "string",
            0,
            "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
        ),
        age,
    ]
    .into_iter()
    .chain(super::wide_columns(
        "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
    ))
    .collect()
}

pub(crate) fn cells(obj: &Value, now: SystemTime) -> Option<Vec<Value>> {
    let d: Deployment = serde_json::from_value(obj.clone()).ok()?;
    let status = d.status.clone().unwrap_or_default();
    let spec = d.spec.clone().unwrap_or_default();
    Some(
        vec![
            json!(d.metadata.name),
            json!(format!(
                "{}/{}",
                status.ready_replicas.unwrap_or(0),
                spec.replicas.unwrap_or(1)
            )),
            json!(status.updated_replicas.unwrap_or(0)),
            json!(status.available_replicas.unwrap_or(0)),
            json!(crate::clock::age(crate::table::created(obj), now)),
        ]
        .into_iter()
        .chain(super::wide_cells(Some(&spec.template), &spec.selector))
        .collect(),
    )
}
