//! The Eviction subresource (`POST pods/NAME/eviction`, `policy/v1`): a pod's delete
//! that its PodDisruptionBudget may refuse. kube-apiserver's rules, in its order and
//! with its answers:
//!
//! - a pod that is Pending, finished or already being deleted is deleted at once (it
//!   disrupts nothing more);
//! - a pod no budget selects is deleted; one that two budgets select is refused (500);
//! - an unready pod is deleted without spending the budget when the budget's policy is
//!   `AlwaysAllow`, or (`IfHealthyBudget`, the default) when the budget is met anyway;
//! - otherwise the budget must allow a disruption: one is taken from
//!   `status.disruptionsAllowed` and the pod noted in `status.disruptedPods`, by a
//!   compare-and-set on the budget (a conflict reads it again), so two evictions never
//!   spend the same disruption; none left is 429, with the budget's numbers.
//!
//! The budget's status has two writers, as in Kubernetes: the disruption controller
//! recomputes it from the pods, and this takes one disruption from it under its
//! resourceVersion. The evicted pod gets `DisruptionTarget` (`EvictionByEvictionAPI`)
//! before its delete.

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::api::policy::v1::{Eviction, PodDisruptionBudget};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, Preconditions};

use super::{Api, WriteOptions};
use crate::error::ApiError;
use crate::resource::Resource;

/// How often a budget's compare-and-set is tried before giving up (kube-apiserver
/// tries 20 times over 10 s; in-process, conflicts come from a few writers at most).
const BUDGET_RETRIES: usize = 20;

/// More unconfirmed evictions than this on one budget refuse the next
/// (`MaxDisruptedPodSize`).
const MAX_DISRUPTED_PODS: usize = 2000;

/// The message of a refused eviction.
const VIOLATES: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

impl Api {
    /// Evicts the pod `name` in `ns` as `eviction` asks (its `deleteOptions`, with
    /// `dry_run` from the request).
    ///
    /// # Errors
    /// 400 if the names differ, 404 for no pod, 429 when its budget allows no
    /// disruption now, 500 when two budgets select it, and the delete's own errors.
    pub async fn evict_pod(
        &self,
        ns: &str,
        name: &str,
        eviction: Eviction,
        dry_run: bool,
    ) -> Result<(), ApiError> {
        if eviction.metadata.name.as_deref() != Some(name) {
            return Err(ApiError::BadRequest(
                "name in URL does not match name in Eviction object".into(),
            ));
        }
        let mut opts = eviction.delete_options.unwrap_or_default();
        let asked_dry_run = opts.dry_run.iter().flatten().any(|d| d == "All");
        if dry_run && !asked_dry_run {
            opts.dry_run = Some(vec!["All".into()]);
        }
        let dry_run = dry_run || asked_dry_run;
        let (pod, rv) = self.get_typed::<Pod>(Resource::Pods, ns, name)?;
        if can_ignore_budget(&pod) {
            // A finished or deleting pod's resourceVersion need not hold: it changes
            // nothing a budget counts. A Pending one must not have become Ready since.
            if !finished_or_deleting(&pod) && unset_resource_version(&opts) {
                set_resource_version(&mut opts, rv);
            }
            return self.delete_evicted(ns, name, opts, dry_run).await;
        }
        let budgets = self.budgets_of(ns, &pod)?;
        let budget = match budgets.as_slice() {
            [] => return self.delete_evicted(ns, name, opts, dry_run).await,
            [one] => one.clone(),
            _ => {
                return Err(ApiError::Internal(
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.".into(),
                ));
            }
        };
        let budget_name = budget.metadata.name.clone().unwrap_or_default();
        if !is_ready(&pod) && unready_may_go(&budget) {
            let guarded = unset_resource_version(&opts);
            if guarded {
                set_resource_version(&mut opts, rv);
            }
            return match self.delete_evicted(ns, name, opts, dry_run).await {
                Err(ApiError::Conflict { .. }) if guarded => Err(still_processed(&budget_name)),
                other => other,
            };
        }
        self.take_disruption(ns, name, budget, dry_run).await?;
        self.delete_evicted(ns, name, opts, dry_run).await
    }

    /// The budgets in `ns` whose selector selects `pod` (a budget whose selector does not
    /// parse selects nothing; neither does one without a selector).
    fn budgets_of(&self, ns: &str, pod: &Pod) -> Result<Vec<PodDisruptionBudget>, ApiError> {
        let labels: serde_json::Map<String, serde_json::Value> = pod
            .metadata
            .labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
            .collect();
        let all = self.list_typed::<PodDisruptionBudget>(
            Resource::PodDisruptionBudgets,
            Some(ns),
            "",
            "",
        )?;
        Ok(all
            .items
            .into_iter()
            .filter(|b| {
                b.spec
                    .as_ref()
                    .and_then(|s| s.selector.as_ref())
                    .and_then(|s| crate::selectors::LabelSelector::from_api(s).ok())
                    .is_some_and(|s| s.matches(Some(&labels)))
            })
            .collect())
    }

    /// kube-apiserver's `checkAndDecrement`, retried on a fresh read while the budget
    /// changes under it.
    async fn take_disruption(
        &self,
        ns: &str,
        pod: &str,
        mut budget: PodDisruptionBudget,
        dry_run: bool,
    ) -> Result<(), ApiError> {
        let name = budget.metadata.name.clone().unwrap_or_default();
        for _ in 0..BUDGET_RETRIES {
            let Some(taken) = take_one(&budget, pod, self.now())? else {
                return Err(ApiError::TooManyRequests {
                    message: VIOLATES.into(),
                    cause: Some(disruption_cause(&budget)),
                    retry_after_seconds: 0,
                });
            };
            if dry_run {
                return Ok(());
            }
            let opts = WriteOptions::default();
            match self.replace_status(ns, &name, taken, opts, None).await {
                Ok(_) => return Ok(()),
                Err(ApiError::Conflict { .. }) => {
                    budget = self
                        .get_typed::<PodDisruptionBudget>(
                            Resource::PodDisruptionBudgets,
                            ns,
                            &name,
                        )?
                        .0;
                }
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::Timeout(format!(
            "couldn't update PodDisruptionBudget \"{name}\" due to conflicts"
        )))
    }

    /// Marks the pod `DisruptionTarget` and deletes it with `opts` (nothing is written
    /// on a dry run).
    async fn delete_evicted(
        &self,
        ns: &str,
        name: &str,
        mut opts: DeleteOptions,
        dry_run: bool,
    ) -> Result<(), ApiError> {
        if !dry_run {
            let expected = opts
                .preconditions
                .as_ref()
                .and_then(|p| p.resource_version.as_deref())
                .and_then(|v| v.parse::<u64>().ok());
            let uid = opts.preconditions.as_ref().and_then(|p| p.uid.clone());
            let now = self.now();
            let marked = self
                .write_status(ns, name, expected, false, |pod| {
                    if uid.as_deref().is_some_and(|u| Some(u) != pod.metadata.uid.as_deref()) {
                        return Err(ApiError::Conflict {
                            resource: "Pod".into(),
                            name: name.into(),
                            detail: format!(
                                "the UID in the precondition ({}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                                uid.as_deref().unwrap_or_default(),
                                pod.metadata.uid.as_deref().unwrap_or_default()
                            ),
                        });
                    }
                    Ok(with_disruption_target(
                        pod,
                        now,
                        "EvictionByEvictionAPI",
                        "Eviction API: evicting",
                    ))
                })
                .await?;
            // The mark is this eviction's own write: the delete's precondition moves
            // past it.
            if expected.is_some()
                && let Some(rv) = marked.metadata.resource_version.clone()
            {
                opts.preconditions.get_or_insert_default().resource_version = Some(rv);
            }
        }
        self.delete_pod(ns, name, &opts).await.map(|_| ())
    }
}

/// kube's `canIgnorePDB`: finished, Pending or being deleted.
fn can_ignore_budget(pod: &Pod) -> bool {
    finished_or_deleting(pod) || phase(pod) == Some("Pending")
}

fn finished_or_deleting(pod: &Pod) -> bool {
    matches!(phase(pod), Some("Succeeded" | "Failed")) || pod.metadata.deletion_timestamp.is_some()
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// An unready pod goes without spending the budget: `AlwaysAllow`, or the budget is met
/// without it.
fn unready_may_go(budget: &PodDisruptionBudget) -> bool {
    let policy = budget
        .spec
        .as_ref()
        .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref());
    if policy == Some("AlwaysAllow") {
        return true;
    }
    let status = budget.status.clone().unwrap_or_default();
    status.current_healthy >= status.desired_healthy && status.desired_healthy > 0
}

/// The budget with one disruption taken for `pod` at `now`, `None` when it allows none,
/// or kube-apiserver's refusals of a budget it cannot trust yet.
fn take_one(
    budget: &PodDisruptionBudget,
    pod: &str,
    now: std::time::SystemTime,
) -> Result<Option<PodDisruptionBudget>, ApiError> {
    let name = budget.metadata.name.clone().unwrap_or_default();
    let mut status = budget.status.clone().unwrap_or_default();
    if status.observed_generation.unwrap_or(0) < budget.metadata.generation.unwrap_or(0) {
        return Err(still_processed(&name));
    }
    if status.disruptions_allowed < 0 {
        return Err(ApiError::Forbidden(format!(
            "poddisruptionbudgets.policy \"{name}\" is forbidden: pdb disruptions allowed is negative"
        )));
    }
    if status
        .disrupted_pods
        .as_ref()
        .is_some_and(|d| d.len() > MAX_DISRUPTED_PODS)
    {
        return Err(ApiError::Forbidden(format!(
            "poddisruptionbudgets.policy \"{name}\" is forbidden: DisruptedPods map too big - too many evictions not confirmed by PDB controller"
        )));
    }
    if status.disruptions_allowed == 0 {
        return Ok(None);
    }
    status.disruptions_allowed -= 1;
    if status.disruptions_allowed == 0 {
        crate::kinds::policy::set_disruption_allowed(&mut status, now);
    }
    status
        .disrupted_pods
        .get_or_insert_default()
        .insert(pod.to_owned(), crate::k8s_time(now));
    let mut taken = budget.clone();
    taken.status = Some(status);
    Ok(Some(taken))
}

/// The 429 of a budget whose controller has not caught up with its spec (or a pod that
/// changed while it was judged).
fn still_processed(budget: &str) -> ApiError {
    ApiError::TooManyRequests {
        message: VIOLATES.into(),
        cause: Some(format!(
            "The disruption budget {budget} is still being processed by the server."
        )),
        retry_after_seconds: 10,
    }
}

fn disruption_cause(budget: &PodDisruptionBudget) -> String {
    let status = budget.status.clone().unwrap_or_default();
    format!(
        "The disruption budget {} needs {} healthy pods and has {} currently",
        budget.metadata.name.as_deref().unwrap_or_default(),
        status.desired_healthy,
        status.current_healthy
    )
}

fn unset_resource_version(opts: &DeleteOptions) -> bool {
    opts.preconditions
        .as_ref()
        .is_none_or(|p| p.resource_version.is_none())
}

fn set_resource_version(opts: &mut DeleteOptions, rv: u64) {
    opts.preconditions
        .get_or_insert_with(Preconditions::default)
        .resource_version = Some(rv.to_string());
}

/// `pod`'s status with `DisruptionTarget` True, for `reason`.
pub(super) fn with_disruption_target(
    pod: &Pod,
    now: std::time::SystemTime,
    reason: &str,
    message: &str,
) -> k8s_openapi::api::core::v1::PodStatus {
    let mut status = pod.status.clone().unwrap_or_default();
    let conditions = status.conditions.get_or_insert_default();
    let condition = PodCondition {
        type_: "DisruptionTarget".into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_transition_time: Some(crate::k8s_time(now)),
        ..PodCondition::default()
    };
    match conditions
        .iter_mut()
        .find(|c| c.type_ == "DisruptionTarget")
    {
        Some(c) if c.status == "True" => {
            c.reason = condition.reason;
            c.message = condition.message;
        }
        Some(c) => *c = condition,
        None => conditions.push(condition),
    }
    status
}

#[cfg(test)]
mod tests;
