//! ResourceQuota (`v1`, with `status`): the most a namespace's objects may use. The
//! resource quota controller keeps `status.hard` (a copy of `spec.hard`) and
//! `status.used`; the quota admission (`api::quota_admission`) charges each create to
//! it, and refuses one that would pass `hard`.
//!
//! As kube-apiserver: names are standard quota resources or qualified
//! (`count/deployments.apps`, `requests.nvidia.com/gpu`); amounts are non-negative,
//! whole for the object counts, and kept in canonical form; scopes are kube's, pairs
//! that contradict each other are refused, and a scope applies only to pod
//! resources (`BestEffort` only to `pods`).
//!
//! mesopod's own refusal: `count/events`, for events are written around the
//! admission, so a quota on them could not hold.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceQuota;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Value, json};

use super::apps::{WithStatus, keep_metadata};
use super::{Kind, col, name_and_age};
use crate::CauseKind;
use crate::quota::{POD_COMPUTE, SCOPES};
use crate::resource::Resource;
use crate::validation::{Causes, QUALIFIED_NAME_MSG, is_qualified_name};

/// kube's `standardQuotaResources`.
const STANDARD: [&str; 19] = [
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
];

/// kube's `integerResources`: counts, which must be whole.
const INTEGER: [&str; 9] = [
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
];

impl Kind for ResourceQuota {
    const RESOURCE: Resource = Resource::ResourceQuotas;

    fn normalize(&mut self) {
        if let Some(hard) = self.spec.as_mut().and_then(|s| s.hard.as_mut()) {
            super::canonicalize_quantities(hard);
        }
    }

    fn validate(&self, causes: &mut Causes) {
        let spec = self.spec.clone().unwrap_or_default();
        let hard = spec.hard.clone().unwrap_or_default();
        check_list(causes, "spec.hard", &hard);
        check_scopes(causes, spec.scopes.as_deref().unwrap_or_default(), &hard);
        let expressions = spec
            .scope_selector
            .as_ref()
            .and_then(|s| s.match_expressions.clone())
            .unwrap_or_default();
        for (i, e) in expressions.iter().enumerate() {
            let at = format!("spec.scopeSelector.matchExpressions[{i}]");
            if !SCOPES.contains(&e.scope_name.as_str()) {
                causes.invalid(
                    format!("{at}.scopeName"),
                    &e.scope_name,
                    "unsupported scope",
                );
            }
            let values = e.values.as_deref().unwrap_or_default();
            match e.operator.as_str() {
                "In" | "NotIn" if values.is_empty() => causes.invalid(
                    format!("{at}.values"),
                    "null",
                    "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
                ),
                "Exists" | "DoesNotExist" if !values.is_empty() => causes.invalid(
                    format!("{at}.values"),
                    &format!("{values:?}"),
                    "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
                ),
                "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
                other => causes.unsupported(
                    format!("{at}.operator"),
                    other,
                    &["DoesNotExist", "Exists", "In", "NotIn"],
                ),
            }
            if e.scope_name != "PriorityClass"
                && SCOPES.contains(&e.scope_name.as_str())
                && !matches!(e.operator.as_str(), "Exists" | "DoesNotExist")
            {
                causes.invalid(
                    format!("{at}.operator"),
                    &e.operator,
                    "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
                );
            }
        }
        if let Some(status) = &self.status {
            check_list(
                causes,
                "status.hard",
                &status.hard.clone().unwrap_or_default(),
            );
            check_list(
                causes,
                "status.used",
                &status.used.clone().unwrap_or_default(),
            );
        }
    }

    fn prepare_create(&mut self) {
        self.status = None;
    }

    fn prepare_update(&mut self, old: &Self) {
        self.status.clone_from(&old.status);
    }
}

impl WithStatus for ResourceQuota {
    fn keep_for_status(&mut self, old: &Self) {
        self.spec.clone_from(&old.spec);
        keep_metadata(&mut self.metadata, &old.metadata, false);
    }
}

/// kube's `ValidateResourceQuotaResourceName` and `ValidateResourceQuantityValue` for
/// each entry of a resource list.
fn check_list(causes: &mut Causes, at: &str, list: &BTreeMap<String, Quantity>) {
    for (name, q) in list {
        let field = format!("{at}[{name}]");
        if !is_qualified_name(name) {
            causes.invalid(&field, name, QUALIFIED_NAME_MSG);
        } else if !name.contains('/') && !STANDARD.contains(&name.as_str()) && !hugepages(name) {
            causes.invalid(&field, name, "must be a standard resource for quota");
        } else if matches!(name.as_str(), "count/events" | "count/events.events.k8s.io") {
            causes.forbidden(
                &field,
                "not supported by mesopod: events are written around the quota admission",
            );
        }
        match quantity::Quantity::parse(&q.0)
            .ok()
            .and_then(|p| p.amount())
        {
            None => causes.invalid_quantity(&field, &q.0),
            Some(a) if a.nanos() < 0 => {
                causes.invalid(&field, &q.0, "must be greater than or equal to 0")
            }
            Some(a) if INTEGER.contains(&name.as_str()) && a.millis() % 1000 != 0 => {
                causes.invalid(&field, &q.0, "must be an integer")
            }
            Some(_) => {}
        }
    }
}

fn hugepages(name: &str) -> bool {
    ["hugepages-", "requests.hugepages-", "limits.hugepages-"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// kube's `validateResourceQuotaScopes`.
fn check_scopes(causes: &mut Causes, scopes: &[String], hard: &BTreeMap<String, Quantity>) {
    if scopes.is_empty() {
        return;
    }
    let shown = format!(
        "[]core.ResourceQuotaScope{{{}}}",
        scopes
            .iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Go prints the list itself, unquoted.
    let mut invalid = |detail: &str| {
        causes.push(
            CauseKind::Invalid,
            "spec.scopes",
            format!("Invalid value: {shown}: {detail}"),
        );
    };
    for scope in scopes {
        if !SCOPES.contains(&scope.as_str()) {
            invalid("unsupported scope");
        }
        for k in hard.keys() {
            let standard = STANDARD.contains(&k.as_str()) || hugepages(k);
            let valid = match scope.as_str() {
                "BestEffort" => k == "pods",
                // Pod resources (kube's object count and compute ones).
                s if SCOPES.contains(&s) => k == "pods" || POD_COMPUTE.contains(&k.as_str()),
                _ => true,
            };
            if standard && !valid {
                invalid("unsupported scope applied to resource");
            }
        }
    }
    for pair in [
        ["BestEffort", "NotBestEffort"],
        ["Terminating", "NotTerminating"],
    ] {
        if pair.iter().all(|p| scopes.iter().any(|s| s == p)) {
            invalid("conflicting scopes");
        }
    }
}

/// kube's columns: NAME, AGE, REQUEST, LIMIT.
pub(super) fn columns() -> Vec<Value> {
    let (name, age) = name_and_age();
    vec![
        name,
        age,
        col(
            "Request",
            "",
            "Request represents a minimum amount of cpu/memory that a container may consume.",
        ),
        col(
            "Limit",
            "",
            "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
        ),
    ]
}

/// The AGE, REQUEST and LIMIT cells: each hard resource as `name: used/hard`, those
/// named `limits.*` under LIMIT.
pub(super) fn cells(obj: &Value, age: String) -> Vec<Value> {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("0").to_owned();
    let hard = obj.pointer("/spec/hard").and_then(Value::as_object);
    let mut request = Vec::new();
    let mut limit = Vec::new();
    for name in hard.into_iter().flat_map(|h| h.keys()) {
        let used = text(obj.pointer(&format!("/status/used/{}", escape(name))));
        let hard = text(obj.pointer(&format!("/status/hard/{}", escape(name))));
        let cell = format!("{name}: {used}/{hard}");
        match name.split_once('.') {
            Some(("limits", _)) => limit.push(cell),
            _ => request.push(cell),
        }
    }
    vec![
        json!(age),
        json!(request.join(", ")),
        json!(limit.join(", ")),
    ]
}

/// A map key as a JSON pointer token.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests;
