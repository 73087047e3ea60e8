//! LimitRange (`v1`): per-namespace defaults and bounds for what a pod's containers
//! request and may use. The LimitRanger admission (`api::limit_ranger`) applies them
//! to every pod created in the namespace, the controllers' pods included.
//!
//! As kube-apiserver: a `Container` item's missing `default` is its `max`, a missing
//! `defaultRequest` its `default`, else its `min` (`SetDefaults_LimitRangeItem`); the
//! quantities are kept in kube's canonical form; each type appears once; `min ≤
//! defaultRequest ≤ default ≤ max` and `1 ≤ maxLimitRequestRatio ≤ max/min`, with
//! kube's messages.
//!
//! mesopod's own refusals: a resource its containers cannot be given (only `cpu` and
//! `memory` are limits that cgroups enforce; `ephemeral-storage` may be requested), and
//! the `PersistentVolumeClaim` type, for there are no persistent volumes.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{LimitRange, LimitRangeItem};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Value, json};

use super::{Kind, col};
use crate::CauseKind;
use crate::resource::Resource;
use crate::validation::{Causes, QUALIFIED_NAME_MSG, is_qualified_name};

/// The limit types kube-apiserver knows.
pub(crate) const CONTAINER: &str = "Container";
pub(crate) const POD: &str = "Pod";
const PERSISTENT_VOLUME_CLAIM: &str = "PersistentVolumeClaim";

/// What a container may be given as a limit (cgroups enforce these).
const LIMITABLE: [&str; 2] = ["cpu", "memory"];
/// What a container may request (ephemeral-storage is procured as Mesos disk).
const REQUESTABLE: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];

impl Kind for LimitRange {
    const RESOURCE: Resource = Resource::LimitRanges;

    fn normalize(&mut self) {
        for item in self.spec.iter_mut().flat_map(|s| s.limits.iter_mut()) {
            default_item(item);
            for map in maps_mut(item) {
                super::canonicalize_quantities(map);
            }
        }
    }

    fn validate(&self, causes: &mut Causes) {
        let mut types = BTreeSet::new();
        for (i, item) in self.spec.iter().flat_map(|s| s.limits.iter()).enumerate() {
            let at = format!("spec.limits[{i}]");
            check_type(causes, &format!("{at}.type"), &item.type_);
            if !types.insert(item.type_.as_str()) {
                causes.push(
                    CauseKind::Duplicate,
                    format!("{at}.type"),
                    format!("Duplicate value: \"{}\"", item.type_),
                );
            }
            check_item(causes, &at, item);
        }
    }
}

/// kube's `SetDefaults_LimitRangeItem` (see the module doc).
fn default_item(item: &mut LimitRangeItem) {
    if item.type_ != CONTAINER {
        return;
    }
    let mut default = item.default.take().unwrap_or_default();
    let mut default_request = item.default_request.take().unwrap_or_default();
    for (k, v) in item.max.iter().flatten() {
        default.entry(k.clone()).or_insert_with(|| v.clone());
    }
    for (k, v) in &default {
        default_request
            .entry(k.clone())
            .or_insert_with(|| v.clone());
    }
    for (k, v) in item.min.iter().flatten() {
        default_request
            .entry(k.clone())
            .or_insert_with(|| v.clone());
    }
    item.default = (!default.is_empty()).then_some(default);
    item.default_request = (!default_request.is_empty()).then_some(default_request);
}

fn maps_mut(item: &mut LimitRangeItem) -> impl Iterator<Item = &mut BTreeMap<String, Quantity>> {
    [
        &mut item.max,
        &mut item.min,
        &mut item.default,
        &mut item.default_request,
        &mut item.max_limit_request_ratio,
    ]
    .into_iter()
    .flatten()
}

/// kube's `validateLimitRangeTypeName`, then mesopod's refusal of claims.
fn check_type(causes: &mut Causes, field: &str, ty: &str) {
    if ty.is_empty() {
        causes.invalid(field, ty, "name part must be non-empty");
        causes.invalid(field, ty, QUALIFIED_NAME_MSG);
        return;
    }
    if !is_qualified_name(ty) {
        causes.invalid(field, ty, QUALIFIED_NAME_MSG);
        return;
    }
    if ty.contains('/') {
        return;
    }
    match ty {
        CONTAINER | POD => {}
        PERSISTENT_VOLUME_CLAIM => causes.forbidden(
            field,
            "not supported by mesopod: there are no persistent volumes",
        ),
        _ => causes.invalid(
            field,
            ty,
            "must be a standard limit type or fully qualified",
        ),
    }
}

/// One item's quantities, as kube's `ValidateLimitRange` checks them.
fn check_item(causes: &mut Causes, at: &str, item: &LimitRangeItem) {
    let pod_or_container = matches!(item.type_.as_str(), CONTAINER | POD);
    let mut parsed: BTreeMap<&str, BTreeMap<&str, quantity::Amount>> = BTreeMap::new();
    let named = [
        ("max", &item.max),
        ("min", &item.min),
        ("default", &item.default),
        ("defaultRequest", &item.default_request),
        ("maxLimitRequestRatio", &item.max_limit_request_ratio),
    ];
    for (which, map) in named {
        let Some(map) = map else { continue };
        if item.type_ == POD && matches!(which, "default" | "defaultRequest") {
            if !map.is_empty() {
                causes.forbidden(
                    format!("{at}.{which}"),
                    "may not be specified when `type` is 'Pod'",
                );
            }
            continue;
        }
        for (name, q) in map {
            let field = format!("{at}.{which}[{name}]");
            if pod_or_container {
                check_container_resource(causes, &field, which, name);
            }
            match quantity::Quantity::parse(&q.0)
                .ok()
                .and_then(|p| p.amount())
            {
                Some(amount) => {
                    parsed.entry(which).or_default().insert(name, amount);
                }
                None => causes.invalid_quantity(field, &q.0),
            }
        }
    }
    let get = |which: &str, k: &str| parsed.get(which).and_then(|m| m.get(k)).copied();
    let keys: BTreeSet<&str> = parsed.values().flat_map(|m| m.keys().copied()).collect();
    for k in keys {
        let (min, max) = (get("min", k), get("max", k));
        let (default, request) = (get("default", k), get("defaultRequest", k));
        let ratio = get("maxLimitRequestRatio", k);
        let mut invalid = |which: &str, value: quantity::Amount, detail: String| {
            causes.invalid(format!("{at}.{which}[{k}]"), &value.to_string(), &detail)
        };
        if let (Some(min), Some(max)) = (min, max)
            && min > max
        {
            invalid(
                "min",
                min,
                format!("min value {min} is greater than max value {max}"),
            );
        }
        if let (Some(request), Some(min)) = (request, min)
            && min > request
        {
            invalid(
                "defaultRequest",
                request,
                format!("min value {min} is greater than default request value {request}"),
            );
        }
        if let (Some(request), Some(max)) = (request, max)
            && request > max
        {
            invalid(
                "defaultRequest",
                request,
                format!("default request value {request} is greater than max value {max}"),
            );
        }
        if let (Some(request), Some(default)) = (request, default)
            && request > default
        {
            invalid(
                "defaultRequest",
                request,
                format!(
                    "default request value {request} is greater than default limit value {default}"
                ),
            );
        }
        if let (Some(default), Some(min)) = (default, min)
            && min > default
        {
            invalid(
                "default",
                min,
                format!("min value {min} is greater than default value {default}"),
            );
        }
        if let (Some(default), Some(max)) = (default, max)
            && default > max
        {
            invalid(
                "default",
                max,
                format!("default value {default} is greater than max value {max}"),
            );
        }
        if let Some(ratio) = ratio {
            if ratio < quantity::Amount::from_units(1, quantity::Format::DecimalSi) {
                invalid(
                    "maxLimitRequestRatio",
                    ratio,
                    format!("ratio {ratio} is less than 1"),
                );
            }
            if let (Some(min), Some(max)) = (min, max) {
                let limit = max.millis() as f64 / min.millis() as f64;
                if ratio.millis() as f64 / 1000.0 > limit {
                    invalid(
                        "maxLimitRequestRatio",
                        ratio,
                        format!("ratio {ratio} is greater than max/min = {limit:.6}"),
                    );
                }
            }
        }
    }
}

/// kube's `validateContainerResourceName`, then what mesopod can give a container.
fn check_container_resource(causes: &mut Causes, field: &str, which: &str, name: &str) {
    let standard = REQUESTABLE.contains(&name) || name.starts_with("hugepages-");
    if !name.contains('/') && !standard {
        causes.invalid(field, name, "must be a standard resource for containers");
        return;
    }
    // `max`, `default` and the ratio bound a limit; `min` and `defaultRequest` a request.
    let (allowed, why): (&[&str], _) = match which {
        "min" | "defaultRequest" => (
            &REQUESTABLE,
            "only cpu, memory and ephemeral-storage (Mesos disk) are procured and given to the container",
        ),
        _ => (
            &LIMITABLE,
            "only cpu and memory limits are enforced (cgroups)",
        ),
    };
    if !allowed.contains(&name) {
        causes.forbidden(field, &format!("not supported by mesopod: {why}"));
    }
}

/// kube's columns: NAME, CREATED AT.
pub(super) fn columns() -> Vec<Value> {
    let (name, _) = super::name_and_age();
    let mut created = col(
        "Created At",
        "",
        "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    );
    created["type"] = json!("date");
    vec![name, created]
}

/// The CREATED AT cell: the creation time in RFC 3339, UTC.
pub(super) fn created_at(obj: &Value) -> Value {
    obj.pointer("/metadata/creationTimestamp")
        .cloned()
        .unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests;
