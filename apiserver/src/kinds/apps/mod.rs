//! The workload kinds of `apps/v1` (ReplicaSet, Deployment, StatefulSet, and the
//! ControllerRevisions that record a StatefulSet's templates): what they share beyond a
//! plain kind. Their status is written only through `/status` (the main endpoint keeps
//! the stored one, `/status` keeps the stored spec); `metadata.generation` starts at 1
//! and counts spec changes, so `status.observedGeneration` can tell a controller's
//! view is current; `/scale` reads and writes `spec.replicas` as an `autoscaling/v1`
//! Scale; and the pod template is defaulted and validated as its pods will be, with
//! kube-apiserver's field paths (`spec.template.spec.containers[0].image`).

/// The [`Workload`] of a kind with `spec.replicas` (1 when unset) and `status.replicas`:
/// `/status` keeps the stored spec and metadata (and the labels too when
/// `keep_labels`, as a Deployment's status strategy does); `status_replicas` reads
/// `status.replicas` from the status, `selector` the `LabelSelector` from the spec
/// (`None` for a plain map). Items after them go into the impl as they are.
macro_rules! replicated_workload {
    (
        $ty:ty,
        keep_labels: $labels:expr,
        status_replicas: |$st:ident| $status:expr,
        selector: |$sp:ident| $selector:expr
        $(, $extra:item)* $(,)?
    ) => {
        impl super::Workload for $ty {
            fn prepare_status_update(&mut self, old: &Self) {
                self.spec.clone_from(&old.spec);
                super::keep_metadata(&mut self.metadata, &old.metadata, $labels);
            }

            fn replicas(&self) -> i32 {
                self.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
            }

            fn set_replicas(&mut self, replicas: i32) {
                self.spec.get_or_insert_default().replicas = Some(replicas);
            }

            fn status_replicas(&self) -> i32 {
                self.status.as_ref().map_or(0, |$st| $status)
            }

            fn selector(&self) -> Option<&LabelSelector> {
                self.spec.as_ref().and_then(|$sp| $selector)
            }

            $($extra)*
        }
    };
}

mod controllerrevision;
mod daemonset;
mod deployment;
mod replicaset;
mod replicationcontroller;
pub(crate) mod scale;
mod statefulset;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde_json::Value;

pub(crate) use controllerrevision::{
    cells as controllerrevision_cells, columns as controllerrevision_columns,
};
pub(crate) use daemonset::{cells as daemonset_cells, columns as daemonset_columns};
pub(crate) use deployment::{
    cells as deployment_cells, check_int_or_percent, columns as deployment_columns,
};
pub(crate) use replicaset::{cells as replicaset_cells, columns as replicaset_columns};
pub(crate) use replicationcontroller::{cells as rc_cells, columns as rc_columns};
pub(crate) use statefulset::{cells as statefulset_cells, columns as statefulset_columns};

use super::Kind;
use crate::CauseKind;
use crate::error::ApiError;
use crate::validation::Causes;

/// A kind with a status subresource (every workload kind; a DaemonSet has no scale).
pub(crate) trait WithStatus: Kind {
    /// Through `/status`: everything but the status stays as stored.
    fn keep_for_status(&mut self, old: &Self);

    /// The kind's own checks of a write through `/status` over the stored `old`
    /// (metadata is checked besides). Unless the kind says otherwise, those of any
    /// update; a Job's are kube's rules for status transitions alone
    /// (`crate::kinds::batch`).
    fn validate_status(&self, old: &Self, causes: &mut Causes) {
        self.validate_against(Some(old), causes);
    }
}

impl<K: Workload> WithStatus for K {
    fn keep_for_status(&mut self, old: &Self) {
        self.prepare_status_update(old);
    }
}

/// A kind with a status subresource and a scale subresource.
pub(crate) trait Workload: Kind {
    /// Through `/status`: everything but the status stays as stored.
    fn prepare_status_update(&mut self, old: &Self);

    /// `spec.replicas` (defaulted on write, so present on every stored object).
    fn replicas(&self) -> i32;

    /// Sets `spec.replicas` (a write through `/scale`).
    fn set_replicas(&mut self, replicas: i32);

    /// `status.replicas`.
    fn status_replicas(&self) -> i32;

    /// `spec.selector`, when the kind's is a `LabelSelector`.
    fn selector(&self) -> Option<&LabelSelector>;

    /// The selector as a string (`app=web`), as the Scale's `status.selector` gives it.
    fn selector_string(&self) -> String {
        self.selector().map(selector_string).unwrap_or_default()
    }
}

/// `metadata.generation` on an update through the main endpoint: the stored one, plus
/// one when `changed`.
pub(crate) fn next_generation(new: &mut ObjectMeta, old: &ObjectMeta, changed: bool) {
    let old_generation = old.generation.unwrap_or(1);
    new.generation = Some(if changed {
        old_generation + 1
    } else {
        old_generation
    });
}

/// kube's warnings for a workload with a pod `template` at `spec.template`: on create
/// the name when `names_pods` and it is no DNS label, then the template's; on an
/// update, the template's only when the generation moved (the spec changed).
pub(super) fn template_warnings(
    meta: &ObjectMeta,
    old: Option<&ObjectMeta>,
    template: Option<&PodTemplateSpec>,
    names_pods: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    match old {
        None if names_pods => {
            let name = meta.name.as_deref().unwrap_or_default();
            out.extend(crate::validation::name_not_dns_label(
                name,
                "Pod names and hostnames",
            ));
        }
        Some(old) if old.generation == meta.generation => return out,
        _ => {}
    }
    if let Some(t) = template {
        out.extend(crate::validation::pod_template_warnings("spec.template", t));
    }
    out
}

/// What `/status` keeps of the stored metadata besides what every update keeps: the
/// generation, and for a Deployment the labels (kube-apiserver's status strategies;
/// annotations do change through `/status`, which is how the deployment controller
/// writes its revision annotation without bumping the generation).
pub(crate) fn keep_metadata(new: &mut ObjectMeta, old: &ObjectMeta, labels: bool) {
    if labels {
        new.labels.clone_from(&old.labels);
    }
    new.generation = old.generation;
}

/// Defaults a pod template as its pods are defaulted.
pub(super) fn default_template(template: &mut PodTemplateSpec) {
    if let Some(spec) = template.spec.as_mut() {
        crate::api::default_template_spec(spec);
    }
}

/// `field: Invalid value: N: must be greater than or equal to 0`.
pub(crate) fn non_negative(causes: &mut Causes, field: &str, value: Option<i32>) {
    if let Some(v) = value
        && v < 0
    {
        causes.invalid_number(field, v.into(), "must be greater than or equal to 0");
    }
}

/// The selector and the template of a workload `kind`: a selector that is not empty and
/// parses, a template whose labels it selects, whose restart policy is `Always` and
/// whose pod is valid (its causes at `spec.template.…`).
fn check_selector_and_template(
    causes: &mut Causes,
    kind: &str,
    selector: &LabelSelector,
    template: Option<&PodTemplateSpec>,
) {
    let empty = selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty);
    let parsed = match crate::selectors::LabelSelector::from_api(selector) {
        Ok(p) => Some(p),
        Err(e) => {
            causes.push(
                CauseKind::Invalid,
                "spec.selector",
                format!("Invalid value: {}: {e}", go_selector(selector)),
            );
            None
        }
    };
    if empty {
        if matches!(kind, "Deployment" | "DaemonSet" | "StatefulSet") {
            causes.push(
                CauseKind::Invalid,
                "spec.selector",
                format!(
                    "Invalid value: {}: empty selector is invalid for {}",
                    go_selector(selector),
                    kind.to_lowercase()
                ),
            );
        } else {
            causes.required("spec.selector");
        }
    }
    let Some(template) = template else {
        causes.required("spec.template");
        return;
    };
    let labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let as_json: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    if !empty && parsed.is_some_and(|p| !p.matches(Some(&as_json))) {
        causes.push(
            CauseKind::Invalid,
            "spec.template.metadata.labels",
            format!(
                "Invalid value: {}: `selector` does not match template `labels`",
                go_map(&labels)
            ),
        );
    }
    let Some(spec) = &template.spec else {
        causes.required("spec.template.spec");
        return;
    };
    let policy = spec.restart_policy.as_deref().unwrap_or("Always");
    if policy != "Always" {
        causes.unsupported("spec.template.spec.restartPolicy", policy, &["Always"]);
    }
    if spec.active_deadline_seconds.is_some() {
        causes.forbidden(
            "spec.template.spec.activeDeadlineSeconds",
            &format!("activeDeadlineSeconds in {kind} is not Supported"),
        );
    }
    check_template_pod(causes, template);
}

/// The template validated as a pod (named, so that only the template's own problems
/// show), every cause moved under `spec.template`.
fn check_template_pod(causes: &mut Causes, template: &PodTemplateSpec) {
    check_template_pod_at(causes, template, "spec.template");
}

/// [`check_template_pod`] of a template at `path` (a CronJob's is
/// `spec.jobTemplate.spec.template`).
pub(super) fn check_template_pod_at(causes: &mut Causes, template: &PodTemplateSpec, path: &str) {
    let mut metadata = template.metadata.clone().unwrap_or_default();
    metadata.name = Some("template".into());
    metadata.generate_name = None;
    let pod = Pod {
        metadata,
        spec: template.spec.clone(),
        status: None,
    };
    if let Err(ApiError::Invalid { causes: found, .. }) = crate::validation::validate_pod(&pod) {
        for mut c in found {
            c.field = format!("{path}.{}", c.field);
            causes.0.push(c);
        }
    }
}

/// An immutable `spec.selector` changed: `field is immutable`, as kube-apiserver says it.
fn check_selector_unchanged(causes: &mut Causes, old: &LabelSelector, new: &LabelSelector) {
    if old != new {
        causes.push(
            CauseKind::Invalid,
            "spec.selector",
            format!("Invalid value: {}: field is immutable", go_selector(new)),
        );
    }
}

/// A label map as Go prints it in validation messages (`map[string]string{"app":"web"}`).
pub(super) fn go_map(labels: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k:?}:{v:?}")).collect();
    format!("map[string]string{{{}}}", pairs.join(", "))
}

/// A selector as Go prints it in validation messages (`v1.LabelSelector{…}`), shortened
/// to what a reader needs: its labels and expressions.
pub(crate) fn go_selector(selector: &LabelSelector) -> String {
    let labels = selector.match_labels.clone().unwrap_or_default();
    let expressions: Vec<String> = selector
        .match_expressions
        .iter()
        .flatten()
        .map(|e| {
            format!(
                "{{Key:{:?}, Operator:{:?}, Values:{:?}}}",
                e.key,
                e.operator,
                e.values.clone().unwrap_or_default()
            )
        })
        .collect();
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:[{}]}}",
        go_map(&labels),
        expressions.join(" ")
    )
}

/// The CONTAINERS, IMAGES and SELECTOR columns every workload's Table adds with `-o
/// wide`, the selector described as the kind describes it.
pub(super) fn wide_columns(selector: &str) -> [Value; 3] {
    [
        col(
            "Containers",
            "string",
            1,
            "Names of each container in the template.",
        ),
        col(
            "Images",
            "string",
            1,
            "Images referenced by each container in the template.",
        ),
        col("Selector", "string", 1, selector),
    ]
}

/// The cells of [`wide_columns`]: names and images comma-separated, as kubectl prints
/// them, and the selector as a string.
pub(super) fn wide_cells(
    template: Option<&PodTemplateSpec>,
    selector: &LabelSelector,
) -> [Value; 3] {
    let containers = template
        .and_then(|t| t.spec.as_ref())
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let names: Vec<&str> = containers.iter().map(|c| c.name.as_str()).collect();
    let images: Vec<&str> = containers
        .iter()
        .map(|c| c.image.as_deref().unwrap_or(""))
        .collect();
    [
        Value::String(names.join(",")),
        Value::String(images.join(",")),
        Value::String(selector_string(selector)),
    ]
}

/// The selector as a string (`app=web`), `<none>` when it selects nothing parseable.
pub(crate) fn selector_string(selector: &LabelSelector) -> String {
    crate::selectors::LabelSelector::from_api(selector)
        .map(|s| s.to_string())
        .unwrap_or_else(|_| "<none>".into())
}

/// A Table column definition; priority 1 shows only with `-o wide`.
pub(super) fn col(name: &str, ty: &str, priority: u8, description: &str) -> Value {
    serde_json::json!({"name": name, "type": ty, "format": "", "description": description, "priority": priority})
}
