//! kube-apiserver's LimitRanger admission for a pod being created, in its two halves:
//!
//! - [`apply_defaults`] (mutating, before the ServiceAccount and Priority admissions):
//!   each `Container` item's `defaultRequest` and `default` fill what a container or
//!   init container does not ask for, and the pod is annotated
//!   `kubernetes.io/limit-ranger: LimitRanger plugin set: cpu, memory request for
//!   container app; …`.
//! - [`check`] (validating, before PodSecurity): every `min`, `max` and
//!   `maxLimitRequestRatio` of each `Container` item holds for each container and init
//!   container, and of each `Pod` item for the pod's total (kube's sidecar-aware sum).
//!   The first range that does not hold refuses the pod, 403, with kube's messages
//!   (several joined in `[…]`).
//!
//! Pod updates are not limited (kube's LimitRanger skips them: a container's resources
//! cannot change). Comparisons are in thousandths rounded up, as kube compares.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, LimitRange, LimitRangeItem, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use quantity::Amount;

use super::Api;
use crate::error::ApiError;
use crate::kinds::limitrange::{CONTAINER, POD};
use crate::quota;
use crate::resource::Resource;

/// The annotation that says what the LimitRanger filled in.
const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// Parsed resources (name → amount) of a container or a pod.
type Amounts = quota::Usage;

impl Api {
    /// The LimitRanges of namespace `ns`, in name order.
    pub(super) fn limit_ranges(&self, ns: &str) -> Result<Vec<LimitRange>, ApiError> {
        let (items, _) = self.list_raw(
            Resource::LimitRanges,
            Some(ns),
            &crate::selectors::Selectors::default(),
        );
        items.iter().map(|v| super::typed(v.as_ref())).collect()
    }
}

/// The name an admission refusal shows for an object being created: its name, or its
/// `generateName` before a name is generated (kube's `extractResourceName`).
pub(super) fn admission_name(meta: &ObjectMeta) -> String {
    match (meta.name.as_deref(), meta.generate_name.as_deref()) {
        (Some(name), _) if !name.is_empty() => name.to_owned(),
        (_, Some(prefix)) if !prefix.is_empty() => prefix.to_owned(),
        _ => "Unknown".to_owned(),
    }
}

/// The mutating half (see the module doc); whether anything was filled in.
pub(super) fn apply_defaults(pod: &mut Pod, ranges: &[LimitRange]) -> bool {
    let mut changed = false;
    for range in ranges {
        let (requests, limits) = container_defaults(range);
        if requests.is_empty() && limits.is_empty() {
            continue;
        }
        let Some(spec) = pod.spec.as_mut() else {
            return changed;
        };
        let mut notes = Vec::new();
        for c in &mut spec.containers {
            fill(c, "container", &requests, &limits, &mut notes);
        }
        for c in spec.init_containers.iter_mut().flatten() {
            fill(c, "init container", &requests, &limits, &mut notes);
        }
        if !notes.is_empty() {
            // As kube: each range that fills something in rewrites the annotation.
            pod.metadata.annotations.get_or_insert_default().insert(
                ANNOTATION.to_owned(),
                format!("LimitRanger plugin set: {}", notes.join("; ")),
            );
            changed = true;
        }
    }
    changed
}

/// The validating half (see the module doc): `Err` with the refusal's text.
pub(super) fn check(pod: &Pod, ranges: &[LimitRange]) -> Result<(), String> {
    for range in ranges {
        let mut errors = Vec::new();
        for item in range.spec.iter().flat_map(|s| s.limits.iter()) {
            check_item(pod, item, &mut errors);
        }
        if !errors.is_empty() {
            return Err(aggregate(errors));
        }
    }
    Ok(())
}

/// A range's `Container` requests and limits to fill in (`defaultRequest`, `default`).
fn container_defaults(
    range: &LimitRange,
) -> (BTreeMap<String, Quantity>, BTreeMap<String, Quantity>) {
    let mut requests = BTreeMap::new();
    let mut limits = BTreeMap::new();
    for item in range.spec.iter().flat_map(|s| s.limits.iter()) {
        if item.type_ == CONTAINER {
            requests.extend(item.default_request.clone().unwrap_or_default());
            limits.extend(item.default.clone().unwrap_or_default());
        }
    }
    (requests, limits)
}

/// kube's `mergeContainerResources`.
fn fill(
    c: &mut Container,
    what: &str,
    requests: &BTreeMap<String, Quantity>,
    limits: &BTreeMap<String, Quantity>,
    notes: &mut Vec<String>,
) {
    let resources = c.resources.get_or_insert_default();
    let set = |have: &mut Option<BTreeMap<String, Quantity>>,
               defaults: &BTreeMap<String, Quantity>| {
        let have_map = have.get_or_insert_default();
        let mut names = Vec::new();
        for (k, v) in defaults {
            if !have_map.contains_key(k) {
                have_map.insert(k.clone(), v.clone());
                names.push(k.clone());
            }
        }
        if have_map.is_empty() {
            *have = None;
        }
        names
    };
    let set_limits = set(&mut resources.limits, limits);
    let set_requests = set(&mut resources.requests, requests);
    if !set_requests.is_empty() {
        notes.push(format!(
            "{} request for {what} {}",
            set_requests.join(", "),
            c.name
        ));
    }
    if !set_limits.is_empty() {
        notes.push(format!(
            "{} limit for {what} {}",
            set_limits.join(", "),
            c.name
        ));
    }
}

/// One item's bounds against the pod (kube's `PodValidateLimitFunc`).
fn check_item(pod: &Pod, item: &LimitRangeItem, errors: &mut Vec<String>) {
    let Some(spec) = pod.spec.as_ref() else {
        return;
    };
    match item.type_.as_str() {
        CONTAINER => {
            let init = spec.init_containers.iter().flatten();
            for c in spec.containers.iter().chain(init) {
                let (requests, limits) = quota::container_amounts(c);
                check_bounds(CONTAINER, item, &requests, &limits, errors);
            }
        }
        POD => {
            let (requests, limits) = quota::pod_requests_and_limits(pod);
            check_bounds(POD, item, &requests, &limits, errors);
        }
        _ => {}
    }
}

fn check_bounds(
    ty: &str,
    item: &LimitRangeItem,
    requests: &Amounts,
    limits: &Amounts,
    errors: &mut Vec<String>,
) {
    for (name, bound) in quota::amounts(item.min.as_ref()) {
        let (req, lim) = (requests.get(&name), limits.get(&name));
        let bound_m = bound.millis();
        match (req, lim) {
            (None, _) => errors.push(format!(
                "minimum {name} usage per {ty} is {bound}.  No request is specified"
            )),
            (Some(req), _) if req.millis() < bound_m => errors.push(format!(
                "minimum {name} usage per {ty} is {bound}, but request is {req}"
            )),
            (_, Some(lim)) if lim.millis() < bound_m => errors.push(format!(
                "minimum {name} usage per {ty} is {bound}, but limit is {lim}"
            )),
            _ => {}
        }
    }
    for (name, bound) in quota::amounts(item.max.as_ref()) {
        let (req, lim) = (requests.get(&name), limits.get(&name));
        let bound_m = bound.millis();
        match (lim, req) {
            (None, _) => errors.push(format!(
                "maximum {name} usage per {ty} is {bound}.  No limit is specified"
            )),
            (Some(lim), _) if lim.millis() > bound_m => errors.push(format!(
                "maximum {name} usage per {ty} is {bound}, but limit is {lim}"
            )),
            (_, Some(req)) if req.millis() > bound_m => errors.push(format!(
                "maximum {name} usage per {ty} is {bound}, but request is {req}"
            )),
            _ => {}
        }
    }
    for (name, bound) in quota::amounts(item.max_limit_request_ratio.as_ref()) {
        let req = requests.get(&name).map_or(0, Amount::millis);
        let lim = limits.get(&name).map_or(0, Amount::millis);
        if req == 0 {
            errors.push(format!(
                "{name} max limit to request ratio per {ty} is {bound}, but no request is specified or request is 0"
            ));
        } else if lim == 0 {
            errors.push(format!(
                "{name} max limit to request ratio per {ty} is {bound}, but no limit is specified or limit is 0"
            ));
        } else {
            let ratio = lim as f64 / req as f64;
            if ratio * 1000.0 > bound.millis() as f64 {
                errors.push(format!(
                    "{name} max limit to request ratio per {ty} is {bound}, but provided ratio is {ratio:.6}"
                ));
            }
        }
    }
}

/// kube's `utilerrors.NewAggregate(...).Error()`: one message alone, several (repeats
/// dropped) in brackets.
fn aggregate(errors: Vec<String>) -> String {
    let mut unique: Vec<String> = Vec::new();
    for e in errors {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    match unique.len() {
        1 => unique.remove(0),
        _ => format!("[{}]", unique.join(", ")),
    }
}

#[cfg(test)]
mod tests;
