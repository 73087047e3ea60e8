//! Benchmark: time to start 100 pods of one cached image on one agent,
//! create → Running, median and wall time, in containers on the embedded
//! runtime against process mode. It fails if the median in containers is
//! more than twice process mode's.
//!
//! `cargo bench -p tests --bench containers_start` (root and
//! busybox-static needed; `PODS=N` changes the count).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/containers_support/mod.rs"]
mod containers_support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use apiserver::EventKind;
use containers_support::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;

fn pod(i: usize) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("b{i}"), "namespace": "default"},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "main", "image": IMAGE, "command": ["sleep", "3600"],
                "resources": {"requests": {"cpu": "10m", "memory": "8Mi"}}
            }]
        }
    }))
    .unwrap()
}

/// Median create → Running (ms) and the wall time of the wave (s).
async fn run(runtime: &str, pods: usize) -> (f64, f64) {
    let (_keep, store) = store();
    load_image(&store, IMAGE).await;
    let app = cluster(runtime, &store).await;
    let api = app.api().clone();
    // One pod first, so the executor is up and the image's layers are warm.
    api.create_pod("default", pod(pods)).await.unwrap();
    common::cluster::wait_pod(
        &api,
        "default",
        &format!("b{pods}"),
        Duration::from_secs(60),
        |p| common::cluster::phase(p) == "Running",
    )
    .await;
    let mut watch = api
        .watch_pods(Some("default"), api.resource_version())
        .unwrap();
    let start = Instant::now();
    let mut created = HashMap::new();
    for i in 0..pods {
        created.insert(format!("b{i}"), Instant::now());
        api.create_pod("default", pod(i)).await.unwrap();
    }
    let mut running: HashMap<String, Instant> = HashMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    while running.len() < pods {
        let ev = tokio::time::timeout_at(deadline, watch.next())
            .await
            .expect("all pods Running in time");
        let ev = ev.unwrap().unwrap();
        let name = ev.object.metadata.name.clone().unwrap_or_default();
        if ev.kind != EventKind::Deleted
            && created.contains_key(&name)
            && common::cluster::phase(&ev.object) == "Running"
        {
            running.entry(name).or_insert_with(Instant::now);
        }
    }
    let wall = start.elapsed().as_secs_f64();
    let mut ms: Vec<f64> = running
        .iter()
        .map(|(n, r)| r.duration_since(created[n]).as_secs_f64() * 1000.0)
        .collect();
    ms.sort_by(f64::total_cmp);
    app.shutdown().await;
    (ms[ms.len() / 2], wall)
}

fn main() {
    if !prerequisites(false) {
        return;
    }
    let pods: usize = std::env::var("PODS")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(100);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (process_ms, process_wall) = rt.block_on(run("process", pods));
    let (embedded_ms, embedded_wall) = rt.block_on(run("embedded", pods));
    let ratio = embedded_ms / process_ms;
    println!(
        "bench containers_start pods={pods} process_p50_ms={process_ms:.0} process_wall_s={process_wall:.2} \
         embedded_p50_ms={embedded_ms:.0} embedded_wall_s={embedded_wall:.2} ratio={ratio:.2}"
    );
    assert!(
        ratio <= 2.0,
        "containers start more than 2x slower than processes: {ratio:.2}"
    );
}
