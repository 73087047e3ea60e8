//! `mesopod bench --scenario jobs`: one Job of `--pods` completions (10,000 by default)
//! and parallelism 2,000 on the basic scenario's simulated agents, whose tasks finish
//! after a short, fixed run ([`TASK_RUN`]). It is measured from the Job's create to
//! its `Complete` condition. Each completion costs a pod's create, bind, Running,
//! Succeeded, the removal of its tracking finalizer, and the Job's status.
//!
//! It prints:
//!
//! `bench scenario=jobs agents=A pods=P completions_per_s=X complete_s=X created_s=X rss_mib=X cpu_s=X store=redb|etcd`
//!
//! where `completions_per_s` is completions over `complete_s`, `created_s` is when the
//! last pod was created (the controller's share), and `cpu_s` is the whole process'
//! (set it beside `--scenario basic`'s for the same pod count).

use std::time::{Duration, Instant};

use anyhow::Context as _;
use apiserver::Api;
use futures::StreamExt as _;
use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// How long each simulated task runs before it finishes.
pub(super) const TASK_RUN: Duration = Duration::from_millis(100);

/// Pods the Job runs at once.
const PARALLELISM: i32 = 2000;

/// What one run measured.
#[derive(Debug)]
pub(super) struct Measured {
    pub(super) complete_s: f64,
    pub(super) created_s: f64,
    pub(super) cpu_s: f64,
}

/// Creates the Job and waits for its `Complete` condition.
pub(super) async fn run(
    api: &Api,
    completions: usize,
    timeout: Duration,
) -> anyhow::Result<Measured> {
    let completions = i32::try_from(completions).context("too many completions")?;
    let cpu_before = super::bench_measure::cpu_seconds();
    let start = Instant::now();
    let created = tokio::spawn(last_created(
        api.clone(),
        usize::try_from(completions).unwrap_or(0),
        api.resource_version(),
    ));
    api.create_job("default", job(completions))
        .await
        .context("creating the job")?;
    let from = api.resource_version();
    let complete = completed(api, from, timeout).await?;
    let since = |t: Instant| t.saturating_duration_since(start).as_secs_f64();
    let created = created.await.context("the pod watch")??;
    Ok(Measured {
        complete_s: since(complete),
        created_s: since(created),
        cpu_s: super::bench_measure::cpu_seconds() - cpu_before,
    })
}

/// When the `completions`-th pod of the Job was created, read from the pods' watch.
async fn last_created(api: Api, completions: usize, from: u64) -> anyhow::Result<Instant> {
    let mut watch = api.watch_pods_raw(Some("default"), from)?;
    let mut created = std::collections::HashSet::new();
    while let Some(item) = watch.next().await {
        let (_, pod) = item?;
        if pod
            .pointer("/metadata/labels/batch.kubernetes.io~1job-name")
            .and_then(|v| v.as_str())
            != Some("bench")
        {
            continue;
        }
        let name = pod
            .pointer("/metadata/name")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned();
        created.insert(name);
        if created.len() >= completions {
            return Ok(Instant::now());
        }
    }
    anyhow::bail!("the pod watch ended")
}

/// Waits for the Job's `Complete` condition; a `Failed` one is an error.
async fn completed(api: &Api, from: u64, timeout: Duration) -> anyhow::Result<Instant> {
    let finished = |j: &Job| -> Option<Result<(), String>> {
        let conditions = j.status.as_ref()?.conditions.as_ref()?;
        conditions
            .iter()
            .filter(|c| c.status == "True")
            .find_map(|c| match c.type_.as_str() {
                "Complete" => Some(Ok(())),
                "Failed" => Some(Err(c.message.clone().unwrap_or_default())),
                _ => None,
            })
    };
    super::bench_measure::first_watched(
        "the job",
        &api.get_job("default", "bench")?,
        api.watch_jobs(Some("default"), from)?,
        timeout,
        |j| match finished(j) {
            Some(Ok(())) => Ok(true),
            Some(Err(why)) => anyhow::bail!("the job failed: {why}"),
            None => Ok(false),
        },
    )
    .await
}

fn job(completions: i32) -> Job {
    Job {
        metadata: ObjectMeta {
            name: Some("bench".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        spec: Some(JobSpec {
            completions: Some(completions),
            parallelism: Some(PARALLELISM.min(completions)),
            // A simulated task never fails; a limit that high only keeps a run that
            // goes wrong from ending early.
            backoff_limit: Some(completions),
            template: PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    restart_policy: Some("Never".into()),
                    containers: vec![super::bench_wave::bench_container(
                        "registry.k8s.io/pause:3.9",
                    )],
                    ..PodSpec::default()
                }),
            },
            ..JobSpec::default()
        }),
        status: None,
    }
}
