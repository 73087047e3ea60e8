//! `mesopod bench --scenario deployment`: one Deployment of `--pods` replicas (10,000
//! by default) on the basic scenario's simulated agents, measured from its create to
//! all replicas available, then its rolling update (a new image, the default 25%
//! surge and unavailability) to all new replicas available. Pods are made by the
//! controllers, in process, and placed by the scheduler as any pod is.
//!
//! It prints:
//!
//! `bench scenario=deployment agents=A pods=P pods_per_s=X create_s=X created_s=X running_s=X update_s=X update_ratio=X rss_mib=X cpu_s=X update_cpu_s=X store=redb|etcd`
//!
//! where `pods_per_s` is replicas over `create_s`, `created_s` and `running_s` are when
//! the controllers had created every replica and when every replica was Running (so
//! `create_s` splits into the controllers' share, the scheduler's, and availability
//! reaching the Deployment's status), `update_ratio` is `update_s` over
//! `create_s`, and the CPU times are the whole process' over each phase (set them
//! beside `--scenario basic`'s `cpu_s` for the same pod count: the difference is what
//! the controllers cost).

use std::time::{Duration, Instant};

use anyhow::Context as _;
use apiserver::Api;
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

/// What one run measured.
#[derive(Debug)]
pub(super) struct Measured {
    pub(super) create_s: f64,
    pub(super) created_s: f64,
    pub(super) running_s: f64,
    pub(super) update_s: f64,
    pub(super) cpu_s: f64,
    pub(super) update_cpu_s: f64,
}

/// Creates the Deployment, waits until all `replicas` are available, updates its image
/// and waits until all new replicas are available.
pub(super) async fn run(api: &Api, replicas: usize, timeout: Duration) -> anyhow::Result<Measured> {
    let replicas = i32::try_from(replicas).context("too many replicas")?;
    let cpu_before = super::bench_measure::cpu_seconds();
    let start = Instant::now();
    let milestones = tokio::spawn(milestones(
        api.clone(),
        usize::try_from(replicas).unwrap_or(0),
        api.resource_version(),
    ));
    api.create_deployment("default", deployment(replicas, "registry.k8s.io/pause:3.9"))
        .await
        .context("creating the deployment")?;
    let from = api.resource_version();
    let created = settled(api, replicas, from, timeout).await?;
    let create_s = created.saturating_duration_since(start).as_secs_f64();
    let (all_created, all_running) = milestones.await.context("the pod watch")??;
    let since = |t: Instant| t.saturating_duration_since(start).as_secs_f64();
    let cpu_s = super::bench_measure::cpu_seconds() - cpu_before;

    let cpu_before = super::bench_measure::cpu_seconds();
    let start = Instant::now();
    let mut d = api.get_deployment("default", "bench")?;
    if let Some(pod) = d.spec.as_mut().and_then(|s| s.template.spec.as_mut())
        && let Some(c) = pod.containers.first_mut()
    {
        c.image = Some("registry.k8s.io/pause:3.10".into());
    }
    api.replace_deployment("default", "bench", d)
        .await
        .context("updating the deployment's image")?;
    let from = api.resource_version();
    let updated = settled(api, replicas, from, timeout).await?;
    Ok(Measured {
        create_s,
        created_s: since(all_created),
        running_s: since(all_running),
        update_s: updated.saturating_duration_since(start).as_secs_f64(),
        cpu_s,
        update_cpu_s: super::bench_measure::cpu_seconds() - cpu_before,
    })
}

/// When the `replicas`-th pod of the Deployment was created, and when the last of them
/// became Running, read from the pods' watch after `from`.
async fn milestones(api: Api, replicas: usize, from: u64) -> anyhow::Result<(Instant, Instant)> {
    let mut watch = api.watch_pods_raw(Some("default"), from)?;
    let mut created = std::collections::HashSet::new();
    let mut running = std::collections::HashSet::new();
    let mut all_created = None;
    while let Some(item) = watch.next().await {
        let (_, pod) = item?;
        if pod.pointer("/metadata/labels/app").and_then(|v| v.as_str()) != Some("bench") {
            continue;
        }
        let name = pod
            .pointer("/metadata/name")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned();
        if pod.pointer("/status/phase").and_then(|v| v.as_str()) == Some("Running") {
            running.insert(name.clone());
        }
        created.insert(name);
        if all_created.is_none() && created.len() >= replicas {
            all_created = Some(Instant::now());
        }
        if running.len() >= replicas {
            let now = Instant::now();
            return Ok((all_created.unwrap_or(now), now));
        }
    }
    anyhow::bail!("the pod watch ended")
}

/// Waits until the Deployment's status says its current generation rolled out:
/// observed, every replica updated and available, no old one left.
async fn settled(
    api: &Api,
    replicas: i32,
    from: u64,
    timeout: Duration,
) -> anyhow::Result<Instant> {
    let done = |d: &Deployment| {
        let s = d.status.clone().unwrap_or_default();
        s.observed_generation >= d.metadata.generation
            && s.updated_replicas == Some(replicas)
            && s.available_replicas == Some(replicas)
            && s.replicas == Some(replicas)
    };
    super::bench_measure::first_watched(
        "the deployment's rollout",
        &api.get_deployment("default", "bench")?,
        api.watch_deployments(Some("default"), from)?,
        timeout,
        |d| Ok(done(d)),
    )
    .await
}

fn deployment(replicas: i32, image: &str) -> Deployment {
    let labels: std::collections::BTreeMap<String, String> =
        [("app".to_owned(), "bench".to_owned())]
            .into_iter()
            .collect();
    Deployment {
        metadata: ObjectMeta {
            name: Some("bench".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![super::bench_wave::bench_container(image)],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}
