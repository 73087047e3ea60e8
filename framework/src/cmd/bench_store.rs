//! `mesopod bench --scenario store`: the store alone, a pod's three writes at a time.
//!
//! The basic scenario's pods/s on etcd mixes three costs on one machine's cores:
//! the rest of mesopod, mesopod's etcd client, and etcd itself. This scenario takes
//! the scheduler and Mesos away and commits, per pod, what the basic scenario commits:
//! a create (precondition: absent), then two compare-and-swap updates on its
//! resourceVersion (the binding and the Running status), from 256 concurrent writers
//! as the basic scenario's creator has. It prints the CPU per commit on each side:
//!
//! `bench scenario=store pods=P commits=C commits_per_s=X cpu_us_per_commit=X store=redb|etcd [etcd_cpu_us_per_commit=X]`
//!
//! so the CPU a pod's writes cost mesopod on etcd can be set beside what they cost it
//! on redb, and beside what they cost etcd.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::Context as _;
use apiserver::store::{EtcdConfig, EtcdStore, Precondition, RedbStore, Store, WriteOp};
use serde_json::{Value, json};

/// Writers at once: the basic scenario's creator keeps 256 creates in flight.
const WRITERS: usize = 256;

/// Commits per pod: create, binding, Running status.
const COMMITS_PER_POD: usize = 3;

/// A bound pod as the basic scenario stores it (about 1.1 KB of JSON).
fn pod(i: usize, phase: &str) -> Value {
    let name = format!("bench-{i}");
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default",
            "uid": "8360eadd-9a38-4f0f-bbce-55b7868ff935", "creationTimestamp": "2026-12-05T06:11:38Z",
            "annotations": {"mesopod.io/agent-id": "05a4b4fd-4e3e-49c6-ab9f-29cd05e5a272-S1",
                "mesopod.io/executor-id": "mesopod-991a38e2aa3855a2",
                "mesopod.io/task-id": format!("default.{name}.148b61d4b66a"),
                "mesopod.io/hostname": "agent-1", "mesopod.io/roles": "*", "mesopod.io/ports": "[]"}},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9",
                "imagePullPolicy": "IfNotPresent",
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
            "dnsPolicy": "ClusterFirst", "nodeName": "agent-1", "restartPolicy": "Always",
            "schedulerName": "default-scheduler", "serviceAccount": "default",
            "serviceAccountName": "default", "terminationGracePeriodSeconds": 30},
        "status": {"phase": phase, "qosClass": "Burstable",
            "conditions": [{"type": "PodScheduled", "status": "True",
                "lastTransitionTime": "2026-12-05T06:11:38Z"}]}})
}

/// One pod's three commits, each on the resourceVersion the last one returned.
async fn write_pod(store: &dyn Store, i: usize) -> anyhow::Result<()> {
    let key = format!("pods/default/bench-{i}");
    let mut precondition = Precondition::Absent;
    for phase in ["Pending", "Pending", "Running"] {
        let changes = store
            .commit(vec![WriteOp::Put {
                key: key.clone(),
                object: pod(i, phase),
                precondition,
            }])
            .await?;
        let rv = changes
            .first()
            .map(|c| c.rv)
            .context("a put reported no change")?;
        precondition = Precondition::ResourceVersion(rv);
    }
    Ok(())
}

/// Runs the scenario on redb (in `data_dir`) or on etcd, and prints its line.
pub(crate) async fn run(
    pods: usize,
    data_dir: &std::path::Path,
    etcd: Option<EtcdConfig>,
) -> anyhow::Result<()> {
    let servers = etcd.as_ref().map(|c| c.servers.clone());
    let store: Arc<dyn Store> = match etcd {
        Some(config) => Arc::new(EtcdStore::connect(config, None).await?),
        None => Arc::new(RedbStore::open(data_dir)?),
    };
    let on_etcd = servers.is_some();
    let etcd_meter = crate::cmd::etcd_cpu::Meter::start(servers).await;
    let cpu_before = super::bench_measure::cpu_seconds();
    let start = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..WRITERS {
        let (store, next) = (Arc::clone(&store), Arc::clone(&next));
        writers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= pods {
                    return Ok::<_, anyhow::Error>(());
                }
                write_pod(store.as_ref(), i).await?;
            }
        });
    }
    while let Some(done) = writers.join_next().await {
        done.context("a writer panicked")??;
    }
    let elapsed = start.elapsed().as_secs_f64().max(1e-9);
    let cpu = super::bench_measure::cpu_seconds() - cpu_before;
    let commits = (pods * COMMITS_PER_POD) as f64;
    let per_commit = |seconds: f64| seconds * 1e6 / commits.max(1.0);
    let etcd_part = match etcd_meter.elapsed().await {
        Some(seconds) => format!(" etcd_cpu_us_per_commit={:.1}", per_commit(seconds)),
        None => String::new(),
    };
    println!(
        "bench scenario=store pods={pods} commits={commits} commits_per_s={:.0} cpu_us_per_commit={:.1} store={}{etcd_part}",
        commits / elapsed,
        per_commit(cpu),
        if on_etcd { "etcd" } else { "redb" },
    );
    Ok(())
}
