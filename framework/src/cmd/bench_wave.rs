//! A wave of `mesopod bench`: pods created through the typed API, each timed
//! from its create to bound and to Running by the store's watch, and the pods
//! every scenario is made of.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use apiserver::{Api, EventKind};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, ContainerPort, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

pub(super) fn bench_pod(i: usize, constrained: bool, ns: &str) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.name = Some(format!("bench-{i}"));
    pod.metadata.namespace = Some(ns.into());
    pod.spec = Some(PodSpec {
        containers: vec![Container {
            ports: constrained.then(|| {
                vec![ContainerPort {
                    container_port: 8080,
                    host_port: Some(31000 + (i % 100) as i32),
                    ..Default::default()
                }]
            }),
            ..bench_container("registry.k8s.io/pause:3.9")
        }],
        node_selector: constrained.then(|| {
            [("zone".to_owned(), format!("z{}", i % 10))]
                .into_iter()
                .collect()
        }),
        ..Default::default()
    });
    pod
}

/// Every scenario's container: `main`, running `image`, asking 100m and 128Mi.
pub(super) fn bench_container(image: &str) -> Container {
    let requests = [
        ("cpu".to_owned(), Quantity("100m".into())),
        ("memory".to_owned(), Quantity("128Mi".into())),
    ];
    Container {
        name: "main".into(),
        image: Some(image.into()),
        resources: Some(ResourceRequirements {
            requests: Some(requests.into_iter().collect()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Creates `pods` pods and waits for all to run; returns create→bound and
/// create→Running latencies in ms, and the instants of the first create
/// and the last Running.
pub(super) async fn wave(
    api: &Api,
    (prefix, pods): (usize, usize),
    constrained: bool,
    namespaces: &[String],
    timeout: Duration,
) -> anyhow::Result<(Vec<f64>, Vec<f64>, Instant, Instant)> {
    let make: PodMaker = Arc::new(move |i, ns| bench_pod(i, constrained, ns));
    wave_of(api, (prefix, pods), make, namespaces, timeout).await
}

/// Makes the `i`-th pod of a wave in a namespace.
pub(super) type PodMaker = Arc<dyn Fn(usize, &str) -> Pod + Send + Sync>;

/// [`wave`] with pods of `make`'s making.
pub(super) async fn wave_of(
    api: &Api,
    (prefix, pods): (usize, usize),
    make: PodMaker,
    namespaces: &[String],
    timeout: Duration,
) -> anyhow::Result<(Vec<f64>, Vec<f64>, Instant, Instant)> {
    // The observer reads two fields of each stored object instead of decoding whole
    // pods, so that measuring costs the system under test as little as possible.
    let watched = match namespaces {
        [one] => Some(one.as_str()),
        _ => None,
    };
    let mut watch = api.watch_pods_raw(watched, api.resource_version())?;
    // Only this wave's pods count: an earlier wave's may change meanwhile (a
    // preemption victim's status is written).
    let expected: std::collections::HashSet<String> = (0..pods)
        .filter_map(|i| {
            make(prefix + i, &namespaces[i % namespaces.len()])
                .metadata
                .name
        })
        .collect();
    let namespaces = namespaces.to_vec();
    let mut created: HashMap<String, Instant> = HashMap::with_capacity(pods);
    let start = Instant::now();
    let creator = {
        let api = api.clone();
        tokio::spawn(async move {
            let mut times = Vec::with_capacity(pods);
            let mut batch = futures::stream::iter((0..pods).map(|i| {
                let api = api.clone();
                let ns = namespaces[i % namespaces.len()].clone();
                let make = Arc::clone(&make);
                async move {
                    let pod = make(prefix + i, &ns);
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    let t = Instant::now();
                    api.create_pod(&ns, pod).await.map(|_| (name, t))
                }
            }))
            .buffer_unordered(256);
            while let Some(r) = batch.next().await {
                times.push(r?);
            }
            Ok::<_, apiserver::ApiError>(times)
        })
    };
    let mut bound_at: HashMap<String, Instant> = HashMap::with_capacity(pods);
    let mut running_at: HashMap<String, Instant> = HashMap::with_capacity(pods);
    let deadline = tokio::time::Instant::now() + timeout;
    while running_at.len() < pods {
        let next = tokio::time::timeout_at(deadline, watch.next()).await;
        let ev = match next {
            Err(_) => break,
            Ok(None) => anyhow::bail!("the pod watch ended"),
            Ok(Some(ev)) => ev?,
        };
        let (kind, object) = ev;
        if kind == EventKind::Deleted {
            continue;
        }
        let now = Instant::now();
        let Some(name) = object.pointer("/metadata/name").and_then(|v| v.as_str()) else {
            continue;
        };
        if !expected.contains(name) {
            continue;
        }
        if object.pointer("/spec/nodeName").is_some() && !bound_at.contains_key(name) {
            bound_at.insert(name.to_owned(), now);
        }
        if object.pointer("/status/phase").and_then(|v| v.as_str()) == Some("Running")
            && !running_at.contains_key(name)
        {
            running_at.insert(name.to_owned(), now);
        }
    }
    for (name, t) in creator.await.context("pod creator")?? {
        created.insert(name, t);
    }
    let mut bound = Vec::new();
    let mut running = Vec::new();
    let mut last = start;
    for (name, c) in &created {
        if let Some(b) = bound_at.get(name) {
            bound.push(b.saturating_duration_since(*c).as_secs_f64() * 1000.0);
        }
        if let Some(r) = running_at.get(name) {
            running.push(r.saturating_duration_since(*c).as_secs_f64() * 1000.0);
            last = last.max(*r);
        }
    }
    Ok((bound, running, start, last))
}
