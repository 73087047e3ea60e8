//! PriorityClass (`scheduling.k8s.io/v1`): a name for a pod priority. Pod admission
//! (`api::priority`) resolves a pod's `priorityClassName` through these, and the
//! scheduler's queue orders pods by the `spec.priority` it fills in.
//!
//! As kube-apiserver: the two system classes exist from the start and cannot be
//! deleted; other `system-` names are reserved; a user class is at most 1e9; `value`
//! and `preemptionPolicy` never change; and at most one class is the global default
//! (its admission, checked against the stored classes).

use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::{Kind, col, name_and_age};
use crate::api::Api;
use crate::error::ApiError;
use crate::resource::Resource;
use crate::validation::Causes;

/// The highest value a user's class may have (`HighestUserDefinablePriority`).
pub(crate) const HIGHEST_USER_DEFINABLE: i32 = 1_000_000_000;

/// The prefix reserved for the system classes.
const SYSTEM_PREFIX: &str = "system-";

/// The preemption policy of a class (and so of its pods) that names none.
pub(crate) const DEFAULT_PREEMPTION_POLICY: &str = "PreemptLowerPriority";

const PREEMPTION_POLICIES: [&str; 2] = ["Never", "PreemptLowerPriority"];

/// The classes kube-apiserver creates at start: name, value and description.
const SYSTEM_CLASSES: [(&str, i32, &str); 2] = [
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

/// The system classes, as they are stored at start.
pub(crate) fn system_classes() -> Vec<PriorityClass> {
    SYSTEM_CLASSES
        .iter()
        .map(|(name, value, description)| PriorityClass {
            metadata: ObjectMeta {
                name: Some((*name).into()),
                ..Default::default()
            },
            value: *value,
            description: Some((*description).into()),
            global_default: Some(false),
            preemption_policy: Some(DEFAULT_PREEMPTION_POLICY.into()),
        })
        .collect()
}

/// kube's `IsKnownSystemPriorityClass`: why `name` with `value` and `global_default`
/// is not one of the system classes, if it is not.
fn not_a_system_class(name: &str, value: i32, global_default: bool) -> Option<String> {
    let Some((_, want, _)) = SYSTEM_CLASSES.iter().find(|(n, _, _)| *n == name) else {
        return Some(format!("{name} is not a known system priority class"));
    };
    if value != *want {
        return Some(format!("value of {name} PriorityClass must be {want}"));
    }
    if global_default {
        return Some(format!(
            "globalDefault of {name} PriorityClass must be false"
        ));
    }
    None
}

/// The refusal of deleting `name`, a system class.
pub(crate) fn refuse_delete(name: &str) -> Result<(), ApiError> {
    if SYSTEM_CLASSES.iter().any(|(n, _, _)| *n == name) {
        return Err(ApiError::Forbidden(format!(
            "priorityclasses.scheduling.k8s.io \"{name}\" is forbidden: this is a system priority class and cannot be deleted"
        )));
    }
    Ok(())
}

impl Kind for PriorityClass {
    const RESOURCE: Resource = Resource::PriorityClasses;

    fn normalize(&mut self) {
        if self.preemption_policy.is_none() {
            self.preemption_policy = Some(DEFAULT_PREEMPTION_POLICY.into());
        }
    }

    fn validate(&self, causes: &mut Causes) {
        let name = self.metadata.name.as_deref().unwrap_or_default();
        if name.starts_with(SYSTEM_PREFIX) {
            let global_default = self.global_default.unwrap_or(false);
            if let Some(why) = not_a_system_class(name, self.value, global_default) {
                causes.forbidden(
                    "metadata.name",
                    &format!(
                        "priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only. error: {why}"
                    ),
                );
            }
        } else if self.value > HIGHEST_USER_DEFINABLE {
            causes.forbidden(
                "value",
                &format!(
                    "maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE}"
                ),
            );
        }
        if let Some(policy) = &self.preemption_policy {
            if policy.is_empty() {
                causes.required("preemptionPolicy");
            } else if !PREEMPTION_POLICIES.contains(&policy.as_str()) {
                causes.unsupported("preemptionPolicy", policy, &PREEMPTION_POLICIES);
            }
        }
    }

    fn validate_update(old: &Self, new: &Self, causes: &mut Causes) {
        if new.value != old.value {
            causes.forbidden("value", "may not be changed in an update.");
        }
        if new.preemption_policy != old.preemption_policy {
            let shown = new.preemption_policy.as_deref().unwrap_or("null");
            causes.invalid("preemptionPolicy", shown, "field is immutable");
        }
    }

    fn admit_stored(&self, api: &Api, old: Option<&Self>) -> Result<(), ApiError> {
        if self.global_default != Some(true) {
            return Ok(());
        }
        let name = self.metadata.name.as_deref().unwrap_or_default();
        match global_default(api)? {
            // An update of the default itself is no second default.
            Some(other) if old.is_none() || other.metadata.name.as_deref() != Some(name) => {
                Err(ApiError::Forbidden(format!(
                    "priorityclasses.scheduling.k8s.io \"{name}\" is forbidden: PriorityClass {} is already marked as default. Only one default can exist",
                    other.metadata.name.as_deref().unwrap_or_default()
                )))
            }
            _ => Ok(()),
        }
    }
}

/// The global default class, if any: of several (two creates that raced), the one of
/// lowest value, as kube's admission picks.
///
/// Every pod create without a class asks, so the classes are read as stored and only
/// the default is decoded.
pub(crate) fn global_default(api: &Api) -> Result<Option<PriorityClass>, ApiError> {
    let (classes, _) = api.list_raw(
        Resource::PriorityClasses,
        None,
        &crate::selectors::Selectors::default(),
    );
    let chosen = classes
        .iter()
        .filter(|c| c.get("globalDefault") == Some(&Value::Bool(true)))
        .filter(|c| {
            c.pointer("/metadata/deletionTimestamp")
                .is_none_or(Value::is_null)
        })
        .min_by_key(|c| c.get("value").and_then(Value::as_i64).unwrap_or(0));
    chosen.map(|c| crate::api::typed(c.as_ref())).transpose()
}

pub(super) fn columns() -> Vec<Value> {
    let (name, age) = name_and_age();
    let mut value = col(
        "Value",
        "",
        "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec.",
    );
    value["type"] = json!("integer");
    let mut global = col(
        "Global-Default",
        "",
        "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority.",
    );
    global["type"] = json!("boolean");
    let policy = col(
        "PreemptionPolicy",
        "",
        "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.",
    );
    vec![name, value, global, age, policy]
}

/// VALUE, GLOBAL-DEFAULT, AGE and PREEMPTIONPOLICY after the name (kube's
/// `printPriorityClass`).
pub(super) fn cells(obj: &Value, age: String) -> Vec<Value> {
    vec![
        obj.get("value").cloned().unwrap_or(json!(0)),
        obj.get("globalDefault").cloned().unwrap_or(json!(false)),
        json!(age),
        json!(
            obj.get("preemptionPolicy")
                .and_then(Value::as_str)
                .unwrap_or("")
        ),
    ]
}

#[cfg(test)]
mod tests;
