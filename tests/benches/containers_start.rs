//! Benchmark: time to start 100 pods of one cached image on one agent,
//! create → Running, median and wall time, in containers on the embedded
//! runtime against process mode, with the CPU the agent's executor and its
//! containers spent (the figure a loaded machine disturbs least). It fails if the median in containers is
//! more than twice process mode's.
//!
//! `cargo bench -p tests --bench containers_start` (root and
//! busybox-static needed; `PODS=N` changes the count, `ROUNDS=N` the
//! number of alternating process/embedded rounds, 3 by default).
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

/// `/proc/PID/stat`'s fields after the command name.
fn stat(pid: u32) -> Option<Vec<u64>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 2..];
    Some(
        rest.split_whitespace()
            .skip(1)
            .map(|f| f.parse().unwrap_or(0))
            .collect(),
    )
}

/// CPU time (ms) of the executor `root` and everything under it: its own,
/// and its live descendants' (the containers' shims and the containers),
/// each with its reaped children's (the runtime's processes).
fn tree_cpu_ms(root: u32) -> f64 {
    // After the state field: ppid is [0], utime [10], stime [11],
    // cutime [12], cstime [13] (proc(5), counting from ppid).
    let mut parents = HashMap::new();
    let mut cpu = HashMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Some(f) = stat(pid).filter(|f| f.len() > 13) {
            parents.insert(pid, f[0] as u32);
            cpu.insert(pid, (f[10] + f[11], f[12] + f[13]));
        }
    }
    let under = |mut pid: u32| {
        while pid > 1 {
            if pid == root {
                return true;
            }
            pid = parents.get(&pid).copied().unwrap_or(0);
        }
        false
    };
    let ticks: u64 = cpu
        .iter()
        .filter(|(pid, _)| under(**pid))
        // A live process' reaped children (a shim's runtime, the root's)
        // are counted in it, and nowhere else.
        .map(|(_, (own, reaped))| own + reaped)
        .sum();
    ticks as f64 * 10.0 // USER_HZ is 100 on Linux
}

/// Median create → Running (ms), the wall time of the wave (s) and the CPU
/// the agent's executor and its containers spent on it (ms).
async fn run(runtime: &str, pods: usize) -> (f64, f64, f64) {
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
    let work = app.local().unwrap().work_dir().to_path_buf();
    let executor = executors_under(&work)[0];
    let cpu_before = tree_cpu_ms(executor);
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
    let cpu = tree_cpu_ms(executor) - cpu_before;
    let mut ms: Vec<f64> = running
        .iter()
        .map(|(n, r)| r.duration_since(created[n]).as_secs_f64() * 1000.0)
        .collect();
    ms.sort_by(f64::total_cmp);
    app.shutdown().await;
    (ms[ms.len() / 2], wall, cpu)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if !prerequisites(false) {
        return;
    }
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|p| p.parse().ok())
            .unwrap_or(default)
    };
    let pods = env("PODS", 100);
    // The machine is shared: the modes alternate, so a burst of load from
    // elsewhere falls on both, and the ratio is of the rounds' medians.
    let rounds = env("ROUNDS", 3).max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (mut process, mut embedded) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let (process_ms, process_wall, process_cpu) = rt.block_on(run("process", pods));
        let (embedded_ms, embedded_wall, embedded_cpu) = rt.block_on(run("embedded", pods));
        println!(
            "round {round}/{rounds} pods={pods} process_p50_ms={process_ms:.0} process_wall_s={process_wall:.2} \
             process_cpu_ms={process_cpu:.0} embedded_p50_ms={embedded_ms:.0} embedded_wall_s={embedded_wall:.2} \
             embedded_cpu_ms={embedded_cpu:.0} ratio={:.2}",
            embedded_ms / process_ms
        );
        process.push(process_ms);
        embedded.push(embedded_ms);
    }
    let (process_ms, embedded_ms) = (median(process), median(embedded));
    let ratio = embedded_ms / process_ms;
    println!(
        "bench containers_start pods={pods} rounds={rounds} process_p50_ms={process_ms:.0} \
         embedded_p50_ms={embedded_ms:.0} ratio={ratio:.2}"
    );
    assert!(
        ratio <= 2.0,
        "containers start more than 2x slower than processes: {ratio:.2}"
    );
}
