//! PodDisruptionBudget (`policy/v1`): how many of a set of pods must stay available
//! while someone evicts them (`kubectl drain`, Mesos maintenance). The disruption
//! controller keeps its status; the Eviction subresource (`api::eviction`) reads it and
//! takes one disruption from it per pod it evicts.
//!
//! As kube-apiserver: `minAvailable` and `maxUnavailable` exclude each other, each is a
//! non-negative int or a percent up to 100%, the selector must parse (an empty one
//! selects every pod of the namespace; a missing one none), the spec may change, and
//! the status's counts are never negative.

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use std::time::SystemTime;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde_json::{Value, json};

use super::apps::{
    WithStatus, check_int_or_percent, go_selector, keep_metadata, next_generation, non_negative,
};
use super::{Kind, col, name_and_age};
use crate::CauseKind;
use crate::resource::Resource;
use crate::validation::Causes;

/// The condition a budget's status carries.
const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";

/// `spec.unhealthyPodEvictionPolicy`'s values, as kube-apiserver lists them.
const UNHEALTHY_POD_EVICTION_POLICIES: [&str; 2] = ["AlwaysAllow", "IfHealthyBudget"];

impl Kind for PodDisruptionBudget {
    const RESOURCE: Resource = Resource::PodDisruptionBudgets;

    fn validate(&self, causes: &mut Causes) {
        let spec = self.spec.clone().unwrap_or_default();
        if spec.min_available.is_some() && spec.max_unavailable.is_some() {
            let shown = serde_json::to_string(&spec).unwrap_or_default();
            causes.invalid(
                "spec",
                &shown,
                "minAvailable and maxUnavailable cannot be both set",
            );
        }
        for (field, value) in [
            ("spec.minAvailable", spec.min_available.as_ref()),
            ("spec.maxUnavailable", spec.max_unavailable.as_ref()),
        ] {
            let percent = check_int_or_percent(causes, field, value);
            if let Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s)) =
                value
                && percent.is_some_and(|p| p > 100)
            {
                causes.invalid(field, s, "must not be greater than 100%");
            }
        }
        if let Some(selector) = &spec.selector
            && let Err(e) = crate::selectors::LabelSelector::from_api(selector)
        {
            causes.push(
                CauseKind::Invalid,
                "spec.selector",
                format!("Invalid value: {}: {e}", go_selector(selector)),
            );
        }
        if let Some(policy) = spec.unhealthy_pod_eviction_policy.as_deref()
            && !UNHEALTHY_POD_EVICTION_POLICIES.contains(&policy)
        {
            causes.unsupported(
                "spec.unhealthyPodEvictionPolicy",
                policy,
                &UNHEALTHY_POD_EVICTION_POLICIES,
            );
        }
        validate_status(self.status.as_ref(), causes);
    }

    fn prepare_create(&mut self) {
        self.metadata.generation = Some(1);
        self.status = None;
    }

    fn prepare_update(&mut self, old: &Self) {
        self.status.clone_from(&old.status);
        let changed = self.spec != old.spec;
        next_generation(&mut self.metadata, &old.metadata, changed);
    }
}

impl WithStatus for PodDisruptionBudget {
    fn keep_for_status(&mut self, old: &Self) {
        self.spec.clone_from(&old.spec);
        keep_metadata(&mut self.metadata, &old.metadata, false);
    }
}

/// The `DisruptionAllowed` condition for `status.disruptionsAllowed`, as kube's
/// `UpdateDisruptionAllowedCondition` sets it: True (`SufficientPods`) while a
/// disruption is allowed, else False (`InsufficientPods`); its transition time moves
/// only when its status does. The disruption controller and the Eviction subresource
/// both keep it.
pub fn set_disruption_allowed(status: &mut PodDisruptionBudgetStatus, now: SystemTime) {
    let (value, reason) = match status.disruptions_allowed > 0 {
        true => ("True", "SufficientPods"),
        false => ("False", "InsufficientPods"),
    };
    let observed = status.observed_generation;
    let conditions = status.conditions.get_or_insert_default();
    match conditions
        .iter_mut()
        .find(|c| c.type_ == DISRUPTION_ALLOWED)
    {
        Some(c) => {
            if c.status != value {
                c.status = value.into();
                c.last_transition_time = crate::k8s_time(now);
            }
            c.reason = reason.into();
            c.message = String::new();
            c.observed_generation = observed;
        }
        None => conditions.push(Condition {
            type_: DISRUPTION_ALLOWED.into(),
            status: value.into(),
            reason: reason.into(),
            message: String::new(),
            last_transition_time: crate::k8s_time(now),
            observed_generation: observed,
        }),
    }
}

/// `ValidatePodDisruptionBudgetStatus`: no count below zero.
fn validate_status(status: Option<&PodDisruptionBudgetStatus>, causes: &mut Causes) {
    let Some(s) = status else {
        return;
    };
    for (field, value) in [
        ("status.disruptionsAllowed", s.disruptions_allowed),
        ("status.currentHealthy", s.current_healthy),
        ("status.desiredHealthy", s.desired_healthy),
        ("status.expectedPods", s.expected_pods),
    ] {
        non_negative(causes, field, Some(value));
    }
}

/// kube-apiserver's PodDisruptionBudget columns: NAME, MIN AVAILABLE, MAX UNAVAILABLE,
/// ALLOWED DISRUPTIONS, AGE.
pub(crate) fn columns() -> Vec<Value> {
    let (name, age) = name_and_age();
    let mut allowed = col(
        "Allowed Disruptions",
        "",
        "Calculated number of pods that may be disrupted at this time.",
    );
    allowed["type"] = json!("integer");
    vec![
        name,
        col(
            "Min Available",
            "",
            "The minimum number of pods that must be available.",
        ),
        col(
            "Max Unavailable",
            "",
            "The maximum number of pods that may be unavailable.",
        ),
        allowed,
        age,
    ]
}

/// The cells after the name: either bound, or `N/A`, then the disruptions allowed and
/// the age (kube's `printPodDisruptionBudget`).
pub(crate) fn cells(obj: &Value, age: String) -> Vec<Value> {
    let bound = |field: &str| match obj.pointer(&format!("/spec/{field}")) {
        Some(Value::Number(n)) => json!(n.to_string()),
        Some(Value::String(s)) => json!(s),
        _ => json!("N/A"),
    };
    vec![
        bound("minAvailable"),
        bound("maxUnavailable"),
        obj.pointer("/status/disruptionsAllowed")
            .cloned()
            .unwrap_or(json!(0)),
        json!(age),
    ]
}

#[cfg(test)]
mod tests;
