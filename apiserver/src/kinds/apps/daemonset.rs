//! DaemonSet (`apps/v1`): one pod from a template on every eligible node. The daemon
//! controller places them; the shim defaults, validates and stores, and counts template
//! changes in the annotation `deprecated.daemonset.template.generation`, as
//! kube-apiserver's apps/v1 conversion shows its internal `spec.templateGeneration`
//! (the controller labels pods `pod-template-generation` with it).

use std::time::SystemTime;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetUpdateStrategy, RollingUpdateDaemonSet};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use super::deployment::check_int_or_percent;
use super::{WithStatus, check_selector_and_template, check_selector_unchanged, col, non_negative};
use crate::CauseKind;
use crate::kinds::Kind;
use crate::resource::Resource;
use crate::validation::Causes;

/// `revisionHistoryLimit` unless given.
const DEFAULT_HISTORY: i32 = 10;

/// The annotation that carries the template generation on apps/v1.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

impl Kind for DaemonSet {
    const RESOURCE: Resource = Resource::DaemonSets;

    fn normalize(&mut self) {
        let Some(spec) = self.spec.as_mut() else {
            return;
        };
        spec.revision_history_limit.get_or_insert(DEFAULT_HISTORY);
        let strategy = spec
            .update_strategy
            .get_or_insert_with(DaemonSetUpdateStrategy::default);
        let ty = strategy.type_.get_or_insert_with(|| "RollingUpdate".into());
        if ty == "RollingUpdate" {
            let ru = strategy
                .rolling_update
                .get_or_insert_with(RollingUpdateDaemonSet::default);
            ru.max_unavailable.get_or_insert(IntOrString::Int(1));
            ru.max_surge.get_or_insert(IntOrString::Int(0));
        }
        super::default_template(&mut spec.template);
    }

    fn validate(&self, causes: &mut Causes) {
        let Some(spec) = &self.spec else {
            causes.required("spec");
            return;
        };
        check_selector_and_template(causes, "DaemonSet", &spec.selector, Some(&spec.template));
        non_negative(causes, "spec.minReadySeconds", spec.min_ready_seconds);
        if let Some(strategy) = &spec.update_strategy {
            check_strategy(causes, strategy);
        }
        non_negative(
            causes,
            "spec.revisionHistoryLimit",
            spec.revision_history_limit,
        );
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
        let given = template_generation(self).filter(|g| *g >= 1);
        set_template_generation(self, given.unwrap_or(1));
    }

    fn prepare_update(&mut self, old: &Self) {
        self.status.clone_from(&old.status);
        let changed = self.spec != old.spec;
        super::next_generation(&mut self.metadata, &old.metadata, changed);
        let old_generation = template_generation(old).unwrap_or(1);
        let template_changed =
            self.spec.as_ref().map(|s| &s.template) != old.spec.as_ref().map(|s| &s.template);
        let generation = if template_changed {
            old_generation + 1
        } else {
            old_generation
        };
        set_template_generation(self, generation);
    }
}

impl WithStatus for DaemonSet {
    fn keep_for_status(&mut self, old: &Self) {
        self.spec.clone_from(&old.spec);
        super::keep_metadata(&mut self.metadata, &old.metadata, false);
    }
}

/// The template generation the object carries, if it parses.
fn template_generation(ds: &DaemonSet) -> Option<i64> {
    ds.metadata
        .annotations
        .as_ref()?
        .get(TEMPLATE_GENERATION)?
        .parse()
        .ok()
}

fn set_template_generation(ds: &mut DaemonSet, generation: i64) {
    ds.metadata
        .annotations
        .get_or_insert_default()
        .insert(TEMPLATE_GENERATION.into(), generation.to_string());
}

/// `spec.updateStrategy` (ValidateDaemonSetUpdateStrategy): a known type; with
/// RollingUpdate, ints or percents up to 100%, exactly one of them not 0.
fn check_strategy(causes: &mut Causes, strategy: &DaemonSetUpdateStrategy) {
    let path = "spec.updateStrategy";
    match strategy.type_.as_deref().unwrap_or("RollingUpdate") {
        "OnDelete" => {}
        "RollingUpdate" => {
            let Some(ru) = &strategy.rolling_update else {
                causes.required(format!("{path}.rollingUpdate"));
                return;
            };
            let path = format!("{path}.rollingUpdate");
            let unavailable_path = format!("{path}.maxUnavailable");
            let surge_path = format!("{path}.maxSurge");
            let unavailable =
                check_int_or_percent(causes, &unavailable_path, ru.max_unavailable.as_ref());
            let surge = check_int_or_percent(causes, &surge_path, ru.max_surge.as_ref());
            for (field, value, n) in [
                (&unavailable_path, &ru.max_unavailable, unavailable),
                (&surge_path, &ru.max_surge, surge),
            ] {
                if let Some(IntOrString::String(s)) = value
                    && n.is_some_and(|p| p > 100)
                {
                    causes.invalid(field, s, "must not be greater than 100%");
                }
            }
            let has_unavailable = unavailable.unwrap_or(0) != 0;
            let has_surge = surge.unwrap_or(0) != 0;
            if has_unavailable && has_surge {
                causes.push(
                    CauseKind::Invalid,
                    surge_path,
                    format!(
                        "Invalid value: {}: may not be set when maxUnavailable is non-zero",
                        go_int_or_string(ru.max_surge.as_ref())
                    ),
                );
            } else if !has_unavailable && !has_surge {
                causes.push(
                    CauseKind::Required,
                    unavailable_path,
                    "Required value: cannot be 0 when maxSurge is 0",
                );
            }
        }
        other => causes.push(
            CauseKind::NotSupported,
            path,
            format!(
                "Unsupported value: apps.DaemonSetUpdateStrategy{{Type:{other:?}, RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}}: supported values: \"RollingUpdate\", \"OnDelete\""
            ),
        ),
    }
}

/// An int-or-string as Go's `%#v` prints it in a validation message.
fn go_int_or_string(value: Option<&IntOrString>) -> String {
    match value {
        None => "null".into(),
        Some(IntOrString::Int(n)) => {
            format!("intstr.IntOrString{{Type:0, IntVal:{n}, StrVal:\"\"}}")
        }
        Some(IntOrString::String(s)) => {
            format!("intstr.IntOrString{{Type:1, IntVal:0, StrVal:{s:?}}}")
        }
    }
}

/// kube-apiserver's DaemonSet columns: NAME DESIRED CURRENT READY UP-TO-DATE AVAILABLE
/// NODE SELECTOR AGE, and with `-o wide` CONTAINERS IMAGES SELECTOR.
pub(crate) fn columns() -> Vec<Value> {
    let (name, age) = crate::kinds::name_and_age();
    vec![
        name,
        col(
            "Desired",
            "integer",
            0,
            "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
        ),
        col(
            "Current",
            "integer",
            0,
            "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
        ),
        col(
            "Ready",
            "integer",
            0,
            "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
        ),
        col(
            "Up-to-date",
            "integer",
            0,
            "The total number of nodes that are running updated daemon pod",
        ),
        col(
            "Available",
            "integer",
            0,
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
        ),
        col(
            "Node Selector",
            "string",
            0,
            "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/",
        ),
        age,
    ]
    .into_iter()
    .chain(super::wide_columns(
        "A label query over pods that are managed by the daemon set. Must match in order to be controlled. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
    ))
    .collect()
}

pub(crate) fn cells(obj: &Value, now: SystemTime) -> Option<Vec<Value>> {
    let ds: DaemonSet = serde_json::from_value(obj.clone()).ok()?;
    let status = ds.status.clone().unwrap_or_default();
    let spec = ds.spec.clone().unwrap_or_default();
    let node_selector = spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.node_selector.as_ref())
        .filter(|m| !m.is_empty())
        .map_or_else(
            || "<none>".to_owned(),
            |m| {
                m.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            },
        );
    Some(
        vec![
            json!(ds.metadata.name),
            json!(status.desired_number_scheduled),
            json!(status.current_number_scheduled),
            json!(status.number_ready),
            json!(status.updated_number_scheduled.unwrap_or(0)),
            json!(status.number_available.unwrap_or(0)),
            json!(node_selector),
            json!(crate::clock::age(crate::table::created(obj), now)),
        ]
        .into_iter()
        .chain(super::wide_cells(Some(&spec.template), &spec.selector))
        .collect(),
    )
}
