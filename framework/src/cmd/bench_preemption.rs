//! `mesopod bench --scenario preemption`: #46's figure for priority and
//! preemption. basic's 5,000 agents (4 cpus each) are first filled by
//! low-priority pods of 900m, four to an agent (`--warmup`, 20,000 by
//! default), so that no agent has room for one more; then `--pods` (1,000)
//! high-priority pods of 900m arrive. Each fits only where one low pod
//! goes, so the fewest victims is one per preemptor.
//!
//! It prints:
//!
//! `bench scenario=preemption agents=A pods=P low=L pods_per_s=X running_s=X running_p50_ms=X running_p99_ms=X victims=V victims_per_preemptor=X rss_mib=X cpu_s=X store=redb|etcd`
//!
//! where `running_s` runs from the first high-priority create to the last
//! one Running, `victims` counts the `Preempted` events, and `cpu_s` is the
//! process' over the high-priority wave.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use apiserver::Api;
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::bench_measure::{cpu_seconds, percentile};
use super::bench_wave::{PodMaker, bench_container, wave_of};

/// Pods of each class, and agents' capacity, fit four to an agent.
const POD_CPU: &str = "900m";

/// What one run measured.
#[derive(Debug)]
pub(super) struct Measured {
    pub(super) running_s: f64,
    pub(super) running_ms: (f64, f64),
    pub(super) placed: usize,
    pub(super) victims: usize,
    pub(super) cpu_s: f64,
}

/// Fills the agents with `low` pods, then measures `high` preemptors.
pub(super) async fn run(
    api: &Api,
    low: usize,
    high: usize,
    timeout: Duration,
) -> anyhow::Result<Measured> {
    for (name, value) in [("bench-low", 10), ("bench-high", 1000)] {
        let mut class = PriorityClass {
            value,
            ..PriorityClass::default()
        };
        class.metadata.name = Some(name.into());
        api.create_priorityclass(class)
            .await
            .with_context(|| format!("creating PriorityClass {name}"))?;
    }
    let default = ["default".to_owned()];
    let (_, running, ..) =
        wave_of(api, (0, low), pods("low", "bench-low"), &default, timeout).await?;
    anyhow::ensure!(
        running.len() == low,
        "only {} of {low} low-priority pods reached Running: the agents are not full",
        running.len()
    );
    let cpu_before = cpu_seconds();
    let (_, mut running, start, last) = wave_of(
        api,
        (0, high),
        pods("high", "bench-high"),
        &default,
        timeout,
    )
    .await?;
    let cpu_s = cpu_seconds() - cpu_before;
    running.sort_by(f64::total_cmp);
    let victims = api
        .list_events(Some("default"), "", "")
        .context("listing the events")?
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("Preempted"))
        .count();
    Ok(Measured {
        running_s: last.saturating_duration_since(start).as_secs_f64(),
        running_ms: (percentile(&running, 0.5), percentile(&running, 0.99)),
        placed: running.len(),
        victims,
        cpu_s,
    })
}

/// Pods `<prefix>-<i>` of 900m in `class`.
fn pods(prefix: &'static str, class: &'static str) -> PodMaker {
    Arc::new(move |i, ns| {
        let mut container = bench_container("registry.k8s.io/pause:3.9");
        if let Some(requests) = container
            .resources
            .as_mut()
            .and_then(|r| r.requests.as_mut())
        {
            requests.insert("cpu".into(), Quantity(POD_CPU.into()));
        }
        let mut pod = Pod {
            spec: Some(PodSpec {
                containers: vec![container],
                priority_class_name: Some(class.into()),
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        pod.metadata.name = Some(format!("{prefix}-{i}"));
        pod.metadata.namespace = Some(ns.into());
        pod
    })
}
