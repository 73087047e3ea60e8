//! The disruption controller (kube-controller-manager's `DisruptionController`): a
//! PodDisruptionBudget's status from the pods it selects, so that the Eviction
//! subresource knows how many of them may go now.
//!
//! One sync, as KCM's `trySync`:
//! 1. the pods of the budget's namespace its selector selects (none without a
//!    selector; all with an empty one);
//! 2. how many are expected and how many must stay healthy: an integer
//!    `minAvailable` against the pods there are; a percentage, or `maxUnavailable`,
//!    against the scale of the pods' controllers (a Deployment through its
//!    ReplicaSet, a ReplicaSet, a ReplicationController, a StatefulSet), which a pod
//!    without a known controller makes impossible to know (the sync fails safe:
//!    nothing may be disrupted);
//! 3. the pods an eviction took a disruption for (`disruptedPods`) stay counted as
//!    going for two minutes, unless they are gone or being deleted by then;
//! 4. healthy pods (Ready, not being deleted, not just disrupted), and
//!    `disruptionsAllowed = healthy − desired` (0 with no pods expected);
//! 5. the status is written when it changed, with the `DisruptionAllowed` condition.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::action::{Action, Event, Reconciled, Status};
use crate::pod_state::is_ready;
use crate::selector::Selector;
use crate::time::requeue_at;

/// How long a pod an eviction took a disruption for is counted as going
/// (`DeletionTimeout`).
pub const DELETION_TIMEOUT: Duration = Duration::from_secs(120);

/// The controller that a pod's controllerRef names, as far as the runner knows it:
/// the uid of what scales it (a Deployment for its ReplicaSets) and its replicas.
pub type ScaleOf<'a> = &'a dyn Fn(&OwnerReference) -> Option<(String, i32)>;

/// Reconcile one budget against `pods` (its namespace's; others are ignored).
pub fn reconcile(
    pdb: &PodDisruptionBudget,
    pods: &[&Pod],
    scale_of: ScaleOf<'_>,
    now: Timestamp,
) -> Reconciled {
    let mut actions = Vec::new();
    let spec = pdb.spec.clone().unwrap_or_default();
    let selected: Vec<&Pod> = match spec.selector.as_ref().map(Selector::new) {
        Some(Ok(selector)) => pods
            .iter()
            .copied()
            .filter(|p| selector.matches(p.metadata.labels.as_ref()))
            .collect(),
        // Validation refuses a selector that does not parse; one stored from before
        // selects nothing, as apimachinery's conversion of it does.
        Some(Err(_)) | None => Vec::new(),
    };
    if selected.is_empty() {
        actions.push(Action::Event(Event::normal(
            "NoPods",
            "No matching pods found".into(),
        )));
    }
    let expected = match expected_and_desired(&spec, &selected, scale_of) {
        Ok(e) => e,
        Err(e) => {
            actions.push(Action::Event(Event::warning(
                "CalculateExpectedPodCountFailed",
                format!("Failed to calculate the number of expected pods: {e}"),
            )));
            actions.extend(fail_safe(pdb, &e, now));
            return Reconciled {
                actions,
                requeue_after: None,
            };
        }
    };
    if expected.unmanaged {
        actions.push(Action::Event(Event::warning(
            "UnmanagedPods",
            format!(
                "Pods selected by this PodDisruptionBudget (selector: {}) were found to be unmanaged. As a result, the status of the PDB cannot be calculated correctly, which may result in undefined behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an integer value.",
                spec.selector
                    .as_ref()
                    .and_then(|s| Selector::new(s).ok())
                    .map(|s| s.to_string())
                    .unwrap_or_default()
            ),
        )));
    }
    let current = pdb.status.clone().unwrap_or_default();
    let (disrupted, recheck) = still_disrupted(&selected, current.disrupted_pods.as_ref(), now);
    let healthy = healthy(&selected, &disrupted);
    let allowed = match expected.count <= 0 {
        true => 0,
        false => (healthy - expected.desired).max(0),
    };
    let mut status = PodDisruptionBudgetStatus {
        current_healthy: healthy,
        desired_healthy: expected.desired,
        expected_pods: expected.count,
        disruptions_allowed: allowed,
        disrupted_pods: (!disrupted.is_empty()).then_some(disrupted),
        observed_generation: pdb.metadata.generation,
        conditions: current.conditions.clone(),
    };
    apiserver::set_disruption_allowed(&mut status, now.into());
    if !same_status(&current, &status) {
        actions.push(Action::WriteStatus(Status::PodDisruptionBudget(status)));
    }
    Reconciled {
        actions,
        requeue_after: recheck.map(|at| requeue_at(now, at)),
    }
}

/// How many pods are expected and how many must stay healthy.
struct Expected {
    count: i32,
    desired: i32,
    /// Some selected pods have no controller (a percentage then counts without them).
    unmanaged: bool,
}

/// KCM's `getExpectedPodCount`.
fn expected_and_desired(
    spec: &k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec,
    pods: &[&Pod],
    scale_of: ScaleOf<'_>,
) -> Result<Expected, String> {
    let scaled = |value: &IntOrString, pods: &[&Pod]| -> Result<(Expected, i32), String> {
        let (count, unmanaged) = expected_scale(pods, scale_of)?;
        let n = crate::scaled_value(value, count, true).map_err(|e| e.to_string())?;
        Ok((
            Expected {
                count,
                desired: 0,
                unmanaged,
            },
            n,
        ))
    };
    if let Some(max) = &spec.max_unavailable {
        let (mut e, max) = scaled(max, pods)?;
        e.desired = (e.count - max).max(0);
        return Ok(e);
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok(Expected {
            count: i32::try_from(pods.len()).unwrap_or(i32::MAX),
            desired: *n,
            unmanaged: false,
        }),
        Some(percent @ IntOrString::String(_)) => {
            let (mut e, min) = scaled(percent, pods)?;
            e.desired = min;
            Ok(e)
        }
        None => Ok(Expected {
            count: 0,
            desired: 0,
            unmanaged: false,
        }),
    }
}

/// KCM's `getExpectedScale`: the sum of the scales of the pods' controllers, each once;
/// whether some pod has no controller.
fn expected_scale(pods: &[&Pod], scale_of: ScaleOf<'_>) -> Result<(i32, bool), String> {
    let mut scales: HashMap<String, i32> = HashMap::new();
    let mut unmanaged = false;
    for pod in pods {
        let Some(controller) = crate::controller_of(&pod.metadata) else {
            unmanaged = true;
            continue;
        };
        if scales.contains_key(&controller.uid) {
            continue;
        }
        match scale_of(controller) {
            Some((uid, replicas)) => {
                scales.insert(uid, replicas);
            }
            None => {
                return Err(format!(
                    "found no controllers for pod {:?}",
                    pod.metadata.name.as_deref().unwrap_or_default()
                ));
            }
        }
    }
    let total = scales.values().fold(0i32, |sum, n| sum.saturating_add(*n));
    Ok((total, unmanaged))
}

/// The `disruptedPods` still counted as going at `now` (KCM's `buildDisruptedPodMap`),
/// and when the first of them stops being.
fn still_disrupted(
    pods: &[&Pod],
    disrupted: Option<&BTreeMap<String, Time>>,
    now: Timestamp,
) -> (BTreeMap<String, Time>, Option<Timestamp>) {
    let mut kept = BTreeMap::new();
    let mut recheck: Option<Timestamp> = None;
    let Some(disrupted) = disrupted else {
        return (kept, recheck);
    };
    let timeout = SignedDuration::try_from(DELETION_TIMEOUT).unwrap_or(SignedDuration::MAX);
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let Some(at) = disrupted.get(name) else {
            continue;
        };
        let Ok(until) = at.0.checked_add(timeout) else {
            continue;
        };
        if until > now {
            recheck = Some(recheck.map_or(until, |r| r.min(until)));
            kept.insert(name.to_owned(), at.clone());
        }
    }
    (kept, recheck)
}

/// Ready pods not being deleted and not just disrupted (KCM's `countHealthyPods`).
fn healthy(pods: &[&Pod], disrupted: &BTreeMap<String, Time>) -> i32 {
    let n = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| !disrupted.contains_key(p.metadata.name.as_deref().unwrap_or_default()))
        .filter(|p| is_ready(p))
        .count();
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// KCM's `failSafe`: nothing may be disrupted, and the condition says why.
fn fail_safe(pdb: &PodDisruptionBudget, why: &str, now: Timestamp) -> Option<Action> {
    let mut status = pdb.status.clone().unwrap_or_default();
    status.disruptions_allowed = 0;
    let observed = status.observed_generation;
    let conditions = status.conditions.get_or_insert_default();
    let failed = Condition {
        type_: "DisruptionAllowed".into(),
        status: "False".into(),
        reason: "SyncFailed".into(),
        message: why.to_owned(),
        last_transition_time: crate::time::wire_time(now),
        observed_generation: observed,
    };
    match conditions.iter_mut().find(|c| c.type_ == failed.type_) {
        Some(c) if c.status == failed.status => {
            c.reason = failed.reason;
            c.message = failed.message;
        }
        Some(c) => *c = failed,
        None => conditions.push(failed),
    }
    let current = pdb.status.clone().unwrap_or_default();
    (!same_status(&current, &status))
        .then_some(Action::WriteStatus(Status::PodDisruptionBudget(status)))
}

/// Equal for what the status says (a condition's transition time aside when nothing
/// else of it changed, as `ConditionsAreUpToDate` judges).
fn same_status(a: &PodDisruptionBudgetStatus, b: &PodDisruptionBudgetStatus) -> bool {
    let strip = |s: &PodDisruptionBudgetStatus| {
        let mut s = s.clone();
        for c in s.conditions.iter_mut().flatten() {
            c.last_transition_time = Time(Timestamp::UNIX_EPOCH);
        }
        if s.disrupted_pods.as_ref().is_some_and(BTreeMap::is_empty) {
            s.disrupted_pods = None;
        }
        s
    };
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests;
