//! KCM's replica calculator (`replica_calculator.go`) for resource metrics: the pods
//! grouped into ready, unready, missing and ignored, the usage ratio over the pods
//! with metrics, then the missing and unready pods counted at their worst for the
//! direction of the change, and no change within the tolerance or when counting them
//! would turn the direction around.
//!
//! Values are in thousandths of a unit, as KCM's metrics client reads them
//! (`MilliValue`): millicores for CPU, millibytes for memory.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// One pod's usage of the metric's resource, as the metrics store last rated it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodMetric {
    /// Thousandths of a unit (millicores, millibytes).
    pub value: i64,
    /// When the latest sample was taken.
    pub timestamp: Timestamp,
    /// The window the rate is over.
    pub window: SignedDuration,
}

/// How long after its start a pod's CPU samples may still be of its start-up
/// (`--horizontal-pod-autoscaler-cpu-initialization-period`, 5 min).
pub const CPU_INITIALIZATION_PERIOD: SignedDuration = SignedDuration::from_secs(300);

/// How long after its start a pod not yet Ready is taken to be starting, not failing
/// (`--horizontal-pod-autoscaler-initial-readiness-delay`, 30 s).
pub const INITIAL_READINESS_DELAY: SignedDuration = SignedDuration::from_secs(30);

/// The change of usage within which nothing scales
/// (`--horizontal-pod-autoscaler-tolerance`, 0.1).
pub const TOLERANCE: f64 = 0.1;

/// What a metric is compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A percentage of the pods' requests.
    Utilization(i32),
    /// An average per pod, in thousandths of a unit.
    AverageValue(i64),
}

/// The calculator's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proposal {
    /// The replicas the metric asks for.
    pub replicas: i32,
    /// The utilization in percent, for a utilization target.
    pub utilization: Option<i32>,
    /// The average usage per pod with metrics, in thousandths of a unit.
    pub raw: i64,
    /// The latest sample's time.
    pub timestamp: Timestamp,
}

/// The pods' groups (`groupPods`).
struct Groups<'a> {
    ready: usize,
    unready: Vec<&'a str>,
    missing: Vec<&'a str>,
    ignored: Vec<&'a str>,
}

fn group<'a>(
    pods: &[&'a Pod],
    metrics: &BTreeMap<String, PodMetric>,
    cpu: bool,
    now: Timestamp,
) -> Groups<'a> {
    let mut g = Groups {
        ready: 0,
        unready: Vec::new(),
        missing: Vec::new(),
        ignored: Vec::new(),
    };
    for pod in pods {
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let status = pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.as_deref());
        if pod.metadata.deletion_timestamp.is_some() || phase == Some("Failed") {
            g.ignored.push(name);
            continue;
        }
        if phase == Some("Pending") {
            g.unready.push(name);
            continue;
        }
        let Some(metric) = metrics.get(name) else {
            g.missing.push(name);
            continue;
        };
        if cpu && unready_for_cpu(pod, metric, now) {
            g.unready.push(name);
            continue;
        }
        g.ready += 1;
    }
    g
}

/// KCM's rule: within the initialization period a sample counts only if the pod is
/// Ready and the sample's window started after it became so; after it, a pod that
/// is not Ready counts only if it has been Ready before (it became unready later
/// than the readiness delay after its start).
fn unready_for_cpu(pod: &Pod, metric: &PodMetric, now: Timestamp) -> bool {
    let status = pod.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
    let (Some(ready), Some(start)) = (ready, status.and_then(|s| s.start_time.as_ref())) else {
        return true;
    };
    let start = start.0;
    let transition = ready
        .last_transition_time
        .as_ref()
        .map_or(Timestamp::UNIX_EPOCH, |t| t.0);
    if after(start, CPU_INITIALIZATION_PERIOD) > now {
        ready.status == "False" || metric.timestamp < after(transition, metric.window)
    } else {
        ready.status == "False" && after(start, INITIAL_READINESS_DELAY) > transition
    }
}

fn after(t: Timestamp, d: SignedDuration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

/// Each pod's request of the resource (`calculatePodRequests`): the sum over its
/// containers and sidecars (init containers of `restartPolicy: Always`, which run
/// beside them and whose use the pod's metrics count), or the one `container`'s; a
/// container without one is an error.
fn requests(
    pods: &[&Pod],
    resource: &str,
    container: Option<&str>,
) -> Result<BTreeMap<String, i64>, String> {
    let mut out = BTreeMap::new();
    for pod in pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let mut sum = 0i64;
        let Some(spec) = pod.spec.as_ref() else {
            out.insert(name, sum);
            continue;
        };
        let sidecars = spec
            .init_containers
            .iter()
            .flatten()
            .filter(|c| c.restart_policy.as_deref() == Some("Always"));
        for c in spec
            .containers
            .iter()
            .chain(sidecars)
            .filter(|c| container.is_none_or(|n| n == c.name))
        {
            let request = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get(resource))
                .and_then(|q| quantity::Quantity::parse(&q.0).ok()?.amount())
                .ok_or_else(|| {
                    format!(
                        "missing request for {resource} in container {} of Pod {name}",
                        c.name
                    )
                })?;
            sum = sum.saturating_add(i64::try_from(request.millis()).unwrap_or(i64::MAX));
        }
        out.insert(name, sum);
    }
    Ok(out)
}

/// `GetResourceUtilizationRatio`: (ratio, utilization %, average raw) over the pods
/// with both a metric and a request.
fn utilization_ratio(
    metrics: &BTreeMap<String, i64>,
    requests: &BTreeMap<String, i64>,
    target: i32,
) -> Result<(f64, i32, i64), String> {
    let (mut used, mut requested, mut n) = (0i64, 0i64, 0i64);
    for (pod, value) in metrics {
        let Some(r) = requests.get(pod) else {
            continue;
        };
        used = used.saturating_add(*value);
        requested = requested.saturating_add(*r);
        n += 1;
    }
    if requested == 0 {
        return Err("no metrics returned matched known pods".into());
    }
    let utilization = i32::try_from(used.saturating_mul(100) / requested).unwrap_or(i32::MAX);
    Ok((
        f64::from(utilization) / f64::from(target),
        utilization,
        used / n,
    ))
}

/// `GetMetricUsageRatio`: (ratio, average) of plain values.
fn usage_ratio(metrics: &BTreeMap<String, i64>, target: i64) -> (f64, i64) {
    let n = i64::try_from(metrics.len()).unwrap_or(i64::MAX).max(1);
    let average = metrics.values().fold(0i64, |a, v| a.saturating_add(*v)) / n;
    #[allow(clippy::cast_precision_loss)]
    let ratio = average as f64 / target as f64;
    (ratio, average)
}

fn within_tolerance(ratio: f64) -> bool {
    (1.0 - ratio).abs() <= TOLERANCE
}

#[allow(clippy::cast_possible_truncation)]
fn ceil(x: f64) -> i32 {
    x.ceil().clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
}

/// The replicas `target` asks for given the selected `pods` and their `metrics` (by
/// pod name) of `resource` (`cpu` or `memory`), the target running `current`.
///
/// # Errors
/// KCM's words: no pods, no metrics of ready pods, a missing request, no request at
/// all.
pub fn replicas(
    current: i32,
    target: Target,
    resource: &str,
    container: Option<&str>,
    pods: &[&Pod],
    metrics: &BTreeMap<String, PodMetric>,
    now: Timestamp,
) -> Result<Proposal, String> {
    if metrics.is_empty() {
        return Err(format!(
            "unable to get metrics for resource {resource}: no metrics returned from resource metrics API"
        ));
    }
    if pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    let timestamp = metrics.values().map(|m| m.timestamp).max().unwrap_or(now);
    let g = group(pods, metrics, resource == "cpu", now);
    let mut values: BTreeMap<String, i64> = metrics
        .iter()
        .filter(|(p, _)| {
            pods.iter()
                .any(|pod| pod.metadata.name.as_deref() == Some(p.as_str()))
        })
        .filter(|(p, _)| !g.ignored.contains(&p.as_str()) && !g.unready.contains(&p.as_str()))
        .map(|(p, m)| (p.clone(), m.value))
        .collect();
    if values.is_empty() {
        return Err("did not receive metrics for targeted pods (pods might be unready)".into());
    }
    let (ratio, utilization, raw, requests) = match target {
        Target::Utilization(t) => {
            let requests = requests(pods, resource, container)?;
            let (ratio, u, raw) = utilization_ratio(&values, &requests, t)?;
            (ratio, Some(u), raw, Some((requests, t)))
        }
        Target::AverageValue(t) => {
            let (ratio, raw) = usage_ratio(&values, t);
            (ratio, None, raw, None)
        }
    };
    let proposal = |replicas| Proposal {
        replicas,
        utilization,
        raw,
        timestamp,
    };
    let with_unready = !g.unready.is_empty() && ratio > 1.0;
    if !with_unready && g.missing.is_empty() {
        if within_tolerance(ratio) {
            return Ok(proposal(current));
        }
        #[allow(clippy::cast_precision_loss)]
        return Ok(proposal(ceil(ratio * g.ready as f64)));
    }
    if !g.missing.is_empty() {
        for pod in &g.missing {
            let fallback = if ratio < 1.0 {
                // A scale-down counts them at 100% of their request (or the target
                // if higher); a scale-up at nothing.
                match (&requests, target) {
                    (Some((r, t)), _) => {
                        r.get(*pod).copied().unwrap_or(0) * i64::from((*t).max(100)) / 100
                    }
                    (None, Target::AverageValue(t)) => t,
                    (None, Target::Utilization(_)) => 0,
                }
            } else {
                0
            };
            if ratio != 1.0 {
                values.insert((*pod).to_owned(), fallback);
            }
        }
    }
    if with_unready {
        for pod in &g.unready {
            values.insert((*pod).to_owned(), 0);
        }
    }
    let new_ratio = match (&requests, target) {
        (Some((r, t)), _) => utilization_ratio(&values, r, *t)?.0,
        (None, Target::AverageValue(t)) => usage_ratio(&values, t).0,
        (None, Target::Utilization(_)) => ratio,
    };
    if within_tolerance(new_ratio)
        || (ratio < 1.0 && new_ratio > 1.0)
        || (ratio > 1.0 && new_ratio < 1.0)
    {
        return Ok(proposal(current));
    }
    #[allow(clippy::cast_precision_loss)]
    let new = ceil(new_ratio * values.len() as f64);
    if (new_ratio < 1.0 && new > current) || (new_ratio > 1.0 && new < current) {
        return Ok(proposal(current));
    }
    Ok(proposal(new))
}
