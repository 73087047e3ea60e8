//! Durable pod writes per second through group commit: many concurrent writers on the
//! redb store (raw store commits, and full `Api::create_pod` with validation), plus one
//! writer alone to show what a single fsync per write would cap throughput at.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use apiserver::store::{Precondition, RedbStore, Store, WriteOp};
use apiserver::{Api, NoLogs, SystemClock};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

/// Concurrent writers: about what a busy framework plus kubectl clients produce.
const WRITERS: usize = 64;
/// Pods written per measured iteration.
const PODS: usize = 2048;

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "bench", "tier": "web"},
            "annotations": {"mesopod.io/task-id": "0123456789abcdef"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.25", "ports": [{"containerPort": 80}],
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}},
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]},
        "status": {"phase": "Pending"}})
}

fn writes(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(RedbStore::open(dir.path()).unwrap());
    let api = rt
        .block_on(Api::start(
            Arc::clone(&store),
            Arc::new(SystemClock),
            Arc::new(NoLogs),
        ))
        .unwrap();
    let next = Arc::new(AtomicU64::new(0));

    let mut group = c.benchmark_group("store_writes");
    group.sample_size(10);
    group.throughput(Throughput::Elements(PODS as u64));
    group.bench_function("redb_commit_64_writers", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let mut tasks = Vec::with_capacity(WRITERS);
                    for _ in 0..WRITERS {
                        let (store, next) = (Arc::clone(&store), Arc::clone(&next));
                        tasks.push(tokio::spawn(async move {
                            for _ in 0..PODS / WRITERS {
                                let name = format!("p{}", next.fetch_add(1, Ordering::Relaxed));
                                let op = WriteOp::Put {
                                    key: format!("pods/default/{name}"),
                                    object: pod(&name),
                                    precondition: Precondition::Absent,
                                };
                                store.commit(vec![op]).await.unwrap();
                            }
                        }));
                    }
                    for t in tasks {
                        t.await.unwrap();
                    }
                }
                start.elapsed()
            })
        })
    });
    group.bench_function("api_create_pod_64_writers", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let mut tasks = Vec::with_capacity(WRITERS);
                    for _ in 0..WRITERS {
                        let (api, next) = (api.clone(), Arc::clone(&next));
                        tasks.push(tokio::spawn(async move {
                            for _ in 0..PODS / WRITERS {
                                let name = format!("a{}", next.fetch_add(1, Ordering::Relaxed));
                                let p: Pod = serde_json::from_value(pod(&name)).unwrap();
                                api.create_pod("default", p).await.unwrap();
                            }
                        }));
                    }
                    for t in tasks {
                        t.await.unwrap();
                    }
                }
                start.elapsed()
            })
        })
    });
    group.throughput(Throughput::Elements(1));
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("redb_commit_1_writer", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let name = format!("s{}", next.fetch_add(1, Ordering::Relaxed));
                    let op = WriteOp::Put {
                        key: format!("pods/default/{name}"),
                        object: pod(&name),
                        precondition: Precondition::Absent,
                    };
                    store.commit(vec![op]).await.unwrap();
                }
                start.elapsed()
            })
        })
    });
    group.finish();
}

criterion_group!(benches, writes);
criterion_main!(benches);
