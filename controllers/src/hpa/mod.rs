//! The HorizontalPodAutoscaler controller, as kube-controller-manager's `podautoscaler`
//! (`horizontal.go`, `replica_calculator.go`): from the target's scale, its pods and
//! their metrics, the replicas the target should run, then the status and events.
//!
//! - [`replicas`]: each metric's proposal (the calculator: tolerance, missing and
//!   unready pods).
//! - [`behavior`]: stabilization and scale rates, over the [`Memory`] the runner
//!   keeps per autoscaler.
//! - [`conditions`]: `AbleToScale`, `ScalingActive`, `ScalingLimited`.
//!
//! [`reconcile`] is pure: the runner reads the scale and the metrics, calls it, writes
//! the scale when the [`Plan`] says so, and then the status ([`Plan::rescaled`] or
//! [`Plan::rescale_failed`] first). It never writes the target's spec otherwise.

pub mod behavior;
pub mod conditions;
pub mod replicas;

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricStatus, HPAScalingRules, HorizontalPodAutoscaler,
    HorizontalPodAutoscalerStatus, MetricSpec, MetricStatus, MetricValueStatus,
    ResourceMetricStatus,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

pub use behavior::Memory;
use conditions::{ABLE_TO_SCALE, SCALING_ACTIVE, SCALING_LIMITED, set};
pub use replicas::{PodMetric, Target};

use crate::Event;

/// One pod's usage, by container: millicores and millibytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodUsage {
    /// `(container, millicores, millibytes)`.
    pub containers: Vec<(String, i64, i64)>,
    /// When the latest sample was taken.
    pub timestamp: Timestamp,
    /// The window of the rates.
    pub window: k8s_openapi::jiff::SignedDuration,
}

/// What the runner read for one sync.
pub struct Observed<'a> {
    /// The target's scale, or why it could not be read.
    pub scale: Result<Scale, String>,
    /// The pods the scale's selector selects.
    pub pods: Vec<&'a Pod>,
    /// Their usage, by pod name.
    pub usage: BTreeMap<String, PodUsage>,
}

/// A scale to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rescale {
    /// The replicas before.
    pub from: i32,
    /// The replicas to set.
    pub to: i32,
    /// Why, as the event says it.
    pub reason: String,
}

/// One sync's decisions.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The scale to write, if any.
    pub rescale: Option<Rescale>,
    /// The status to write (after [`Plan::rescaled`] or [`Plan::rescale_failed`]
    /// when there is a rescale).
    pub status: HorizontalPodAutoscalerStatus,
    /// The events to record.
    pub events: Vec<Event>,
    /// Whether the sync failed (KCM returns an error, which retries with backoff).
    pub failed: bool,
}

impl Plan {
    /// The rescale succeeded: `AbleToScale` `SucceededRescale`, the event, the desired
    /// replicas and the scale time.
    pub fn rescaled(&mut self, now: Timestamp) {
        let Some(r) = &self.rescale else {
            return;
        };
        set(
            &mut self.status,
            ABLE_TO_SCALE,
            true,
            "SucceededRescale",
            format!(
                "the HPA controller was able to update the target scale to {}",
                r.to
            ),
            now,
        );
        self.events.push(Event::normal(
            "SuccessfulRescale",
            format!("New size: {}; reason: {}", r.to, r.reason),
        ));
        self.status.desired_replicas = r.to;
        self.status.last_scale_time = Some(Time(now));
    }

    /// The rescale failed with `error`: `AbleToScale` `FailedUpdateScale`, the event,
    /// and the status keeps the current replicas as desired.
    pub fn rescale_failed(&mut self, error: &str, now: Timestamp) {
        let Some(r) = &self.rescale else {
            return;
        };
        self.events.push(Event::warning(
            "FailedRescale",
            format!("New size: {}; reason: {}; error: {error}", r.to, r.reason),
        ));
        set(
            &mut self.status,
            ABLE_TO_SCALE,
            false,
            "FailedUpdateScale",
            format!("the HPA controller was unable to update the target scale: {error}"),
            now,
        );
        self.status.desired_replicas = r.from;
        self.failed = true;
    }
}

/// One metric's outcome.
struct Proposal {
    replicas: i32,
    name: String,
    status: MetricStatus,
}

/// Millis as kube's `NewMilliQuantity(v, DecimalSI)` writes them.
fn milli_quantity(v: i64) -> Quantity {
    Quantity(quantity::Amount::from_millis(v).to_string())
}

/// The metric's resource, container and target.
fn source(m: &MetricSpec) -> Option<(&str, Option<&str>, Target)> {
    let (name, container, target) = match (m.type_.as_str(), &m.resource, &m.container_resource) {
        ("Resource", Some(r), _) => (r.name.as_str(), None, &r.target),
        ("ContainerResource", _, Some(r)) => {
            (r.name.as_str(), Some(r.container.as_str()), &r.target)
        }
        _ => return None,
    };
    let target = match (&target.average_value, target.average_utilization) {
        (Some(v), _) => Target::AverageValue(
            quantity::Quantity::parse(&v.0)
                .ok()?
                .amount()
                .map(|a| i64::try_from(a.millis()).unwrap_or(i64::MAX))?,
        ),
        (None, Some(u)) => Target::Utilization(u),
        (None, None) => return None,
    };
    Some((name, container, target))
}

/// One metric's proposal (`computeStatusForResourceMetric`), or the error KCM wraps.
fn propose(
    m: &MetricSpec,
    current: i32,
    observed: &Observed<'_>,
    now: Timestamp,
) -> Result<Proposal, (String, String)> {
    let Some((resource, container, target)) = source(m) else {
        let e = "invalid resource metric source: neither an average utilization target nor an average value (usage) target was set".to_owned();
        return Err((e.clone(), e));
    };
    let metrics: BTreeMap<String, PodMetric> = observed
        .usage
        .iter()
        .filter_map(|(pod, u)| {
            let mut value = 0i64;
            let mut found = false;
            for (c, cpu, mem) in &u.containers {
                if container.is_none_or(|n| n == c) {
                    found = true;
                    value = value.saturating_add(if resource == "cpu" { *cpu } else { *mem });
                }
            }
            found.then(|| {
                (
                    pod.clone(),
                    PodMetric {
                        value,
                        timestamp: u.timestamp,
                        window: u.window,
                    },
                )
            })
        })
        .collect();
    let what = match (container, target) {
        (None, Target::Utilization(_)) => {
            format!("{resource} resource utilization (percentage of request)")
        }
        (None, Target::AverageValue(_)) => format!("{resource} resource"),
        (Some(_), Target::Utilization(_)) => {
            format!("{resource} container resource utilization (percentage of request)")
        }
        (Some(_), Target::AverageValue(_)) => format!("{resource} container resource"),
    };
    let p = replicas::replicas(
        current,
        target,
        resource,
        container,
        &observed.pods,
        &metrics,
        now,
    )
    .map_err(|e| {
        let inner = match target {
            Target::Utilization(_) => format!("failed to get {resource} utilization: {e}"),
            Target::AverageValue(_) => format!("failed to get {resource} usage: {e}"),
        };
        let kind = if container.is_some() {
            "container resource"
        } else {
            "resource"
        };
        (
            inner.clone(),
            format!("failed to get {resource} {kind} metric value: {inner}"),
        )
    })?;
    let value = MetricValueStatus {
        average_utilization: p.utilization,
        average_value: Some(milli_quantity(p.raw)),
        value: None,
    };
    let status = match container {
        None => MetricStatus {
            type_: "Resource".into(),
            resource: Some(ResourceMetricStatus {
                name: resource.into(),
                current: value,
            }),
            ..MetricStatus::default()
        },
        Some(c) => MetricStatus {
            type_: "ContainerResource".into(),
            container_resource: Some(ContainerResourceMetricStatus {
                name: resource.into(),
                container: c.into(),
                current: value,
            }),
            ..MetricStatus::default()
        },
    };
    Ok(Proposal {
        replicas: p.replicas,
        name: what,
        status,
    })
}

/// The autoscaler's rules, its `behavior` with kube's defaults where unset (`None`
/// without `behavior`: the legacy rules apply).
fn rules(hpa: &HorizontalPodAutoscaler) -> Option<(HPAScalingRules, HPAScalingRules)> {
    let b = hpa.spec.as_ref()?.behavior.as_ref()?;
    Some((
        b.scale_up
            .clone()
            .unwrap_or_else(apiserver::scale_up_defaults),
        b.scale_down
            .clone()
            .unwrap_or_else(apiserver::scale_down_defaults),
    ))
}

/// One sync of `hpa` (KCM's `reconcileAutoscaler`) at `now`, with the autoscaler's
/// `memory` of recommendations and scales.
pub fn reconcile(
    hpa: &HorizontalPodAutoscaler,
    observed: &Observed<'_>,
    memory: &mut Memory,
    now: Timestamp,
) -> Plan {
    let spec = hpa.spec.clone().unwrap_or_default();
    let mut status = hpa.status.clone().unwrap_or_default();
    let mut events = Vec::new();
    let min = spec.min_replicas.unwrap_or(1);
    let max = spec.max_replicas;
    let scale = match &observed.scale {
        Ok(s) => s,
        Err(e) => {
            set(
                &mut status,
                ABLE_TO_SCALE,
                false,
                "FailedGetScale",
                format!("the HPA controller was unable to get the target's current scale: {e}"),
                now,
            );
            events.push(Event::warning("FailedGetScale", e.clone()));
            status.observed_generation = hpa.metadata.generation;
            return Plan {
                rescale: None,
                status,
                events,
                failed: true,
            };
        }
    };
    set(
        &mut status,
        ABLE_TO_SCALE,
        true,
        "SucceededGetScale",
        "the HPA controller was able to get the target's current scale".into(),
        now,
    );
    let current = scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    memory.start(current, now);
    status.observed_generation = hpa.metadata.generation;
    let mut desired = 0;
    let mut reason = String::new();
    let rescale;
    // Only the metrics branch reads metrics; the others write none (KCM's nil).
    status.current_metrics = None;
    if current == 0 && min != 0 {
        set(
            &mut status,
            SCALING_ACTIVE,
            false,
            "ScalingDisabled",
            "scaling is disabled since the replica count of the target is zero".into(),
            now,
        );
        rescale = false;
    } else if current > max {
        reason = "Current number of replicas above Spec.MaxReplicas".into();
        desired = max;
        rescale = true;
    } else if current < min {
        reason = "Current number of replicas below Spec.MinReplicas".into();
        desired = min;
        rescale = true;
    } else {
        let metrics = spec.metrics.clone().unwrap_or_default();
        let mut statuses = vec![MetricStatus::default(); metrics.len()];
        let mut best: Option<(i32, String)> = None;
        let mut invalid: Vec<(String, String)> = Vec::new();
        for (i, m) in metrics.iter().enumerate() {
            match propose(m, current, observed, now) {
                Ok(p) => {
                    statuses[i] = p.status;
                    if best.as_ref().is_none_or(|(r, _)| p.replicas > *r) {
                        best = Some((p.replicas, p.name));
                    }
                }
                Err(e) => invalid.push(e),
            }
        }
        status.current_metrics = Some(statuses);
        let proposed = best.as_ref().map_or(0, |(r, _)| *r);
        if let Some((inner, _)) = invalid.first() {
            // KCM's condition and event for the first failed metric.
            events.push(Event::warning("FailedGetResourceMetric", inner.clone()));
            if invalid.len() >= metrics.len() || proposed < current {
                set(
                    &mut status,
                    SCALING_ACTIVE,
                    false,
                    "FailedGetResourceMetric",
                    format!("the HPA was unable to compute the replica count: {inner}"),
                    now,
                );
                let (_, outer) = &invalid[0];
                events.push(Event::warning(
                    "FailedComputeMetricsReplicas",
                    format!(
                        "invalid metrics ({} invalid out of {}), first error is: {outer}",
                        invalid.len(),
                        metrics.len()
                    ),
                ));
                status.current_replicas = Some(current);
                return Plan {
                    rescale: None,
                    status,
                    events,
                    failed: true,
                };
            }
        }
        let metric = best.map(|(_, n)| n).unwrap_or_default();
        set(
            &mut status,
            SCALING_ACTIVE,
            true,
            "ValidMetricFound",
            format!("the HPA was able to successfully calculate a replica count from {metric}"),
            now,
        );
        desired = proposed;
        if desired > current {
            reason = format!("{metric} above target");
        } else if desired < current {
            reason = "All metrics below target".into();
        }
        let limited = match rules(hpa) {
            None => {
                let stabilized = memory.stabilize_legacy(desired, now);
                if stabilized == desired {
                    set(
                        &mut status,
                        ABLE_TO_SCALE,
                        true,
                        "ReadyForNewScale",
                        "recommended size matches current size".into(),
                        now,
                    );
                } else {
                    set(&mut status, ABLE_TO_SCALE, true, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation".into(), now);
                }
                (
                    stabilized,
                    behavior::legacy_limit((min, max), current, stabilized),
                )
            }
            Some((up, down)) => {
                let s = memory.stabilize(&up, &down, current, desired, now);
                if s.replicas == desired {
                    set(
                        &mut status,
                        ABLE_TO_SCALE,
                        true,
                        "ReadyForNewScale",
                        "recommended size matches current size".into(),
                        now,
                    );
                } else {
                    set(
                        &mut status,
                        ABLE_TO_SCALE,
                        true,
                        s.reason,
                        s.message.into(),
                        now,
                    );
                }
                (
                    s.replicas,
                    memory.rate_limit(&up, &down, (min, max), current, s.replicas, now),
                )
            }
        };
        let (stabilized, l) = limited;
        set(
            &mut status,
            SCALING_LIMITED,
            l.replicas != stabilized,
            l.reason,
            l.message.into(),
            now,
        );
        desired = l.replicas;
        rescale = desired != current;
    }
    // KCM's currentReplicas is the target's spec.replicas.
    status.current_replicas = Some(current);
    if !rescale {
        desired = current;
    }
    status.desired_replicas = desired;
    Plan {
        rescale: rescale.then_some(Rescale {
            from: current,
            to: desired,
            reason,
        }),
        status,
        events,
        failed: false,
    }
}

/// Records a successful rescale in `memory` (only an autoscaler with `behavior` keeps
/// scale events).
pub fn remember_rescale(
    hpa: &HorizontalPodAutoscaler,
    memory: &mut Memory,
    r: &Rescale,
    now: Timestamp,
) {
    let rules = rules(hpa);
    memory.scaled(rules.as_ref().map(|(u, d)| (u, d)), r.from, r.to, now);
}

#[cfg(test)]
mod tests;
