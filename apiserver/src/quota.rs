//! ResourceQuota's arithmetic, pure, shared by the quota admission
//! (`api::quota_admission`, which charges what a create adds) and the resource quota
//! controller (which recounts a namespace): what an object uses, which quotas it falls
//! under, and the refusals in kube-apiserver's words.
//!
//! # What is counted (kube's evaluators)
//! - A pod: `count/pods` always; while it is neither finished nor past its deletion
//!   grace, also `pods` and its requests and limits (`cpu`, `memory`,
//!   `ephemeral-storage`, bare names being requests), summed as kube sums a pod
//!   (sidecars beside the containers, other init containers alone).
//! - Any other object: `count/<resource>[.<group>]`, and the old names of
//!   ConfigMaps, Secrets, ReplicationControllers and ResourceQuotas.
//! - A quota with scopes (`spec.scopes`, `spec.scopeSelector`) covers only the pods
//!   its scopes select (Terminating, NotTerminating, BestEffort, NotBestEffort,
//!   PriorityClass, CrossNamespacePodAffinity), never other objects.
//!
//! # Guarantees
//! Sums are exact ([`Amount`]); a quota charges only what its `status.hard` names, and
//! a refusal names the quota and, in sorted order, what was asked, used and allowed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Container, Pod, ResourceQuota};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use quantity::{Amount, Format};

use crate::resource::Resource;

mod ledger;

pub use ledger::{Ledger, charge};

/// Resource name → amount.
pub type Usage = BTreeMap<String, Amount>;

/// The scopes kube-apiserver knows.
pub const SCOPES: [&str; 6] = [
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
];

/// The compute resources a pod is counted under (kube's `podComputeQuotaResources`).
pub const POD_COMPUTE: [&str; 9] = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
];

/// What a quota is asked to cover: a pod, or one more object of another resource.
#[derive(Debug, Clone, Copy)]
pub enum Subject<'a> {
    /// A pod.
    Pod(&'a Pod),
    /// An object of a resource other than pods.
    Object(Resource),
}

/// The names under which objects of `resource` are counted.
pub fn count_names(resource: Resource) -> Vec<String> {
    let mut names = vec![format!("count/{}", resource.qualified())];
    let old = match resource {
        Resource::ConfigMaps => Some("configmaps"),
        Resource::Secrets => Some("secrets"),
        Resource::ReplicationControllers => Some("replicationcontrollers"),
        Resource::ResourceQuotas => Some("resourcequotas"),
        _ => None,
    };
    names.extend(old.map(str::to_owned));
    names
}

/// Whether `name` is one a pod is counted under (kube's `podResources`).
fn pod_tracks(name: &str) -> bool {
    matches!(name, "pods" | "count/pods") || POD_COMPUTE.contains(&name)
}

/// The names of `hard` that `subject` is counted under (kube's `MatchingResources`).
pub fn tracked(hard: &Usage, subject: Subject<'_>) -> Vec<String> {
    hard.keys()
        .filter(|k| match subject {
            Subject::Pod(_) => pod_tracks(k),
            Subject::Object(r) => count_names(r).contains(k),
        })
        .cloned()
        .collect()
}

/// What one object uses (kube's `Usage`); `now` decides whether a deleting pod's grace
/// has run out.
pub fn usage(subject: Subject<'_>, now: SystemTime) -> Usage {
    let one = Amount::from_units(1, Format::DecimalSi);
    match subject {
        Subject::Object(r) => count_names(r).into_iter().map(|n| (n, one)).collect(),
        Subject::Pod(pod) => {
            let mut u = Usage::from([("count/pods".to_owned(), one)]);
            if !charged(pod, now) {
                return u;
            }
            u.insert("pods".into(), one);
            let (requests, limits) = pod_requests_and_limits(pod);
            for resource in ["cpu", "memory", "ephemeral-storage"] {
                if let Some(r) = requests.get(resource) {
                    u.insert(resource.into(), *r);
                    u.insert(format!("requests.{resource}"), *r);
                }
                if let Some(l) = limits.get(resource) {
                    u.insert(format!("limits.{resource}"), *l);
                }
            }
            u
        }
    }
}

/// Whether a pod's compute resources count (kube's `QuotaV1Pod`): not finished, and
/// not still there past its deletion's grace (a lost agent's pod must not hold the
/// quota its replacement needs).
fn charged(pod: &Pod, now: SystemTime) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return false;
    }
    match (
        &pod.metadata.deletion_timestamp,
        pod.metadata.deletion_grace_period_seconds,
    ) {
        (Some(at), Some(grace)) => {
            let at = SystemTime::UNIX_EPOCH
                + Duration::from_secs(u64::try_from(at.0.as_second()).unwrap_or(0));
            now <= at + Duration::from_secs(u64::try_from(grace).unwrap_or(0))
        }
        _ => true,
    }
}

/// The selectors of a quota: its `scopes` (as `Exists`) and its `scopeSelector`.
fn selectors(q: &ResourceQuota) -> Vec<(String, String, Vec<String>)> {
    let spec = q.spec.as_ref();
    let scopes = spec
        .and_then(|s| s.scopes.as_ref())
        .into_iter()
        .flatten()
        .map(|s| (s.clone(), "Exists".to_owned(), Vec::new()));
    let expressions = spec
        .and_then(|s| s.scope_selector.as_ref())
        .and_then(|s| s.match_expressions.as_ref())
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e.scope_name.clone(),
                e.operator.clone(),
                e.values.clone().unwrap_or_default(),
            )
        });
    scopes.chain(expressions).collect()
}

/// Whether `pod` is in one scope selector (kube's `podMatchesScopeFunc`).
fn pod_in_scope(pod: &Pod, (scope, operator, values): &(String, String, Vec<String>)) -> bool {
    let spec = pod.spec.as_ref();
    match scope.as_str() {
        "Terminating" => terminating(pod),
        "NotTerminating" => !terminating(pod),
        "BestEffort" => best_effort(pod),
        "NotBestEffort" => !best_effort(pod),
        "PriorityClass" => {
            let class = spec
                .and_then(|s| s.priority_class_name.as_deref())
                .filter(|c| !c.is_empty());
            match (operator.as_str(), class) {
                ("Exists", c) => c.is_some(),
                ("DoesNotExist", c) => c.is_none(),
                ("In", Some(c)) => values.iter().any(|v| v == c),
                ("In", None) => false,
                ("NotIn", Some(c)) => !values.iter().any(|v| v == c),
                ("NotIn", None) => true,
                _ => false,
            }
        }
        "CrossNamespacePodAffinity" => cross_namespace_affinity(pod),
        _ => false,
    }
}

/// Whether a pod (anti-)affinity term of `pod`, required or preferred, reaches other
/// namespaces (`namespaces` or `namespaceSelector`; kube's
/// `usesCrossNamespacePodAffinity`). mesopod refuses required terms and keeps
/// preferred ones as soft hints, and a quota scoped to them still counts them.
fn cross_namespace_affinity(pod: &Pod) -> bool {
    use k8s_openapi::api::core::v1::PodAffinityTerm;
    let Some(affinity) = pod.spec.as_ref().and_then(|s| s.affinity.as_ref()) else {
        return false;
    };
    let crosses = |t: &PodAffinityTerm| {
        t.namespaces.as_ref().is_some_and(|n| !n.is_empty()) || t.namespace_selector.is_some()
    };
    let terms =
        |required: Option<&Vec<PodAffinityTerm>>,
         preferred: Option<&Vec<k8s_openapi::api::core::v1::WeightedPodAffinityTerm>>| {
            required.into_iter().flatten().any(crosses)
                || preferred
                    .into_iter()
                    .flatten()
                    .any(|w| crosses(&w.pod_affinity_term))
        };
    let near = affinity.pod_affinity.as_ref().is_some_and(|a| {
        terms(
            a.required_during_scheduling_ignored_during_execution
                .as_ref(),
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
        )
    });
    let apart = affinity.pod_anti_affinity.as_ref().is_some_and(|a| {
        terms(
            a.required_during_scheduling_ignored_during_execution
                .as_ref(),
            a.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
        )
    });
    near || apart
}

fn terminating(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.active_deadline_seconds)
        .is_some_and(|d| d >= 0)
}

fn best_effort(pod: &Pod) -> bool {
    let containers = pod.spec.iter().flat_map(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
    });
    containers.into_iter().all(|c| {
        let r = c.resources.as_ref();
        let empty = |m: Option<&BTreeMap<String, Quantity>>| {
            m.is_none_or(|m| {
                m.iter()
                    .filter(|(k, _)| matches!(k.as_str(), "cpu" | "memory"))
                    .all(|(_, q)| parse(q).is_none_or(|a| a.is_zero()))
            })
        };
        empty(r.and_then(|r| r.requests.as_ref())) && empty(r.and_then(|r| r.limits.as_ref()))
    })
}

/// Whether quota `q` covers `subject` (kube's `Matches`): it tracks something the
/// subject is counted under, and every scope selects it (only pods can be selected).
pub fn covers(q: &ResourceQuota, hard: &Usage, subject: Subject<'_>) -> bool {
    if tracked(hard, subject).is_empty() {
        return false;
    }
    let selectors = selectors(q);
    match subject {
        Subject::Pod(pod) => selectors.iter().all(|s| pod_in_scope(pod, s)),
        Subject::Object(_) => selectors.is_empty(),
    }
}

/// kube's pod `Constraints`: when a quota tracks cpu or memory, every container must
/// ask for it (`Err` with kube's text).
pub fn constraints(tracked: &[String], subject: Subject<'_>) -> Result<(), String> {
    const VALIDATED: [&str; 6] = [
        "cpu",
        "memory",
        "requests.cpu",
        "requests.memory",
        "limits.cpu",
        "limits.memory",
    ];
    let Subject::Pod(pod) = subject else {
        return Ok(());
    };
    let required: BTreeSet<&str> = tracked
        .iter()
        .map(String::as_str)
        .filter(|t| VALIDATED.contains(t))
        .collect();
    let mut missing: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let spec = pod.spec.as_ref();
    let containers = spec.into_iter().flat_map(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
    });
    for c in containers {
        let has = container_names(c);
        for r in &required {
            if !has.contains(*r) {
                missing.entry(r).or_default().insert(c.name.as_str());
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(r, names)| {
            let names: Vec<&str> = names.iter().copied().collect();
            format!("{r} for: {}", names.join(","))
        })
        .collect();
    Err(format!("must specify {}", parts.join("; ")))
}

/// The compute names one container's requests and limits count under.
fn container_names(c: &Container) -> BTreeSet<String> {
    let r = c.resources.as_ref();
    let mut names = BTreeSet::new();
    for k in r
        .and_then(|r| r.requests.as_ref())
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        names.insert(k.clone());
        names.insert(format!("requests.{k}"));
    }
    for k in r
        .and_then(|r| r.limits.as_ref())
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        names.insert(format!("limits.{k}"));
    }
    names
}

/// A quota's `status.hard` (or its `spec.hard` until the controller has copied it) and
/// `status.used`, parsed.
pub fn hard_and_used(q: &ResourceQuota) -> (Usage, Option<Usage>) {
    let status = q.status.as_ref();
    let hard = status.and_then(|s| s.hard.as_ref());
    let used = status
        .and_then(|s| s.used.as_ref())
        .map(|u| amounts(Some(u)));
    (amounts(hard), used)
}

/// What a quota's status should be (the resource quota controller's count): `hard` is
/// `spec.hard`, and `used` holds each of its names summed over `pods` and counted over
/// `count_of` (the number of objects of a resource in the namespace; `None` for one
/// mesopod does not serve, which counts 0).
pub fn recount(
    q: &ResourceQuota,
    pods: &[&Pod],
    count_of: &dyn Fn(&str) -> Option<usize>,
    now: SystemTime,
) -> (Usage, Usage) {
    let hard = amounts(q.spec.as_ref().and_then(|s| s.hard.as_ref()));
    let mut used: Usage = hard.keys().map(|k| (k.clone(), Amount::ZERO)).collect();
    for pod in pods {
        let subject = Subject::Pod(pod);
        if !covers(q, &hard, subject) {
            continue;
        }
        for (k, v) in usage(subject, now) {
            if let Some(total) = used.get_mut(&k) {
                *total = total.checked_add(v).unwrap_or(*total);
            }
        }
    }
    if selectors(q).is_empty() {
        for (k, total) in used.iter_mut() {
            if pod_tracks(k) {
                continue;
            }
            let n = count_of(k).unwrap_or(0);
            *total = Amount::from_units(i64::try_from(n).unwrap_or(i64::MAX), Format::DecimalSi);
        }
    }
    (hard, used)
}

/// The resource a count name counts (`count/deployments.apps`, or an old name such
/// as `configmaps`), if mesopod serves it.
pub fn counted_resource(name: &str) -> Option<Resource> {
    Resource::COLLECTED
        .into_iter()
        .find(|r| *r != Resource::Pods && count_names(*r).iter().any(|n| n == name))
}

/// A usage as a status map, in kube's canonical text.
pub fn to_quantities(u: &Usage) -> BTreeMap<String, Quantity> {
    u.iter()
        .map(|(k, v)| (k.clone(), Quantity(v.to_string())))
        .collect()
}

/// The quantities of a map that parse (validation let no other in).
pub(crate) fn amounts(map: Option<&BTreeMap<String, Quantity>>) -> Usage {
    map.into_iter()
        .flatten()
        .filter_map(|(k, q)| Some((k.clone(), parse(q)?)))
        .collect()
}

fn parse(q: &Quantity) -> Option<Amount> {
    quantity::Quantity::parse(&q.0).ok()?.amount()
}

/// A pod's requests and limits as kube sums them (`PodRequests`, `PodLimits`): the
/// containers and restartable init containers (sidecars) together, or any other init
/// container with the sidecars started before it, whichever is larger.
pub(crate) fn pod_requests_and_limits(pod: &Pod) -> (Usage, Usage) {
    let Some(spec) = pod.spec.as_ref() else {
        return Default::default();
    };
    let mut total = (Usage::new(), Usage::new());
    for c in &spec.containers {
        let (r, l) = container_amounts(c);
        add(&mut total.0, &r);
        add(&mut total.1, &l);
    }
    let mut sidecars = (Usage::new(), Usage::new());
    let mut init_peak = (Usage::new(), Usage::new());
    for c in spec.init_containers.iter().flatten() {
        let (r, l) = container_amounts(c);
        let during = if c.restart_policy.as_deref() == Some("Always") {
            add(&mut total.0, &r);
            add(&mut total.1, &l);
            add(&mut sidecars.0, &r);
            add(&mut sidecars.1, &l);
            sidecars.clone()
        } else {
            let mut during = (r, l);
            add(&mut during.0, &sidecars.0);
            add(&mut during.1, &sidecars.1);
            during
        };
        max_into(&mut init_peak.0, &during.0);
        max_into(&mut init_peak.1, &during.1);
    }
    max_into(&mut total.0, &init_peak.0);
    max_into(&mut total.1, &init_peak.1);
    total
}

/// A container's requests and limits, parsed.
pub(crate) fn container_amounts(c: &Container) -> (Usage, Usage) {
    let r = c.resources.as_ref();
    (
        amounts(r.and_then(|r| r.requests.as_ref())),
        amounts(r.and_then(|r| r.limits.as_ref())),
    )
}

fn add(sum: &mut Usage, more: &Usage) {
    for (k, v) in more {
        let entry = sum.entry(k.clone()).or_insert(Amount::ZERO);
        // Past i128 there is no resource; keep the larger term rather than wrap.
        *entry = entry.checked_add(*v).unwrap_or((*entry).max(*v));
    }
}

fn max_into(peak: &mut Usage, other: &Usage) {
    for (k, v) in other {
        match peak.get(k) {
            Some(have) if have >= v => {}
            _ => {
                peak.insert(k.clone(), *v);
            }
        }
    }
}

#[cfg(test)]
mod tests;
