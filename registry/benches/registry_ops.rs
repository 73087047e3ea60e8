//! Registry operations with 100,000 tasks in the registry.
//!
//! Run: `cargo bench -p registry --bench registry_ops -- --warm-up-time 1 --measurement-time 3`

#![allow(missing_docs, clippy::unwrap_used)]

mod fixtures;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use fixtures::{TASKS, at};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use mesos::proto::{TaskId, TaskState, TaskStatus};
use registry::{InMemoryRegistry, PodKey, PodTask, Registry};

/// Operation speed does not depend on the pod's size (it sits behind an
/// `Arc`), so these pods carry only what identifies them.
fn small_pod(i: usize) -> Arc<Pod> {
    Arc::new(Pod {
        metadata: ObjectMeta {
            namespace: Some("shop".into()),
            name: Some(format!("web-{i:06}")),
            uid: Some(format!("uid-{i:06}")),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    })
}

fn task(i: usize) -> PodTask {
    let mut t = fixtures::typical_task(small_pod(i), i);
    // Ids in a registry are unique; make them deterministic for the bench.
    t.id = TaskId::new(format!("shop.web-{i:06}.bench"));
    t
}

/// A registry holding `TASKS` tasks, their ids and pod keys in a scrambled
/// order (so lookups do not walk the maps in insertion order).
fn filled() -> (InMemoryRegistry, Vec<TaskId>, Vec<PodKey>) {
    let reg = InMemoryRegistry::new();
    let mut ids = Vec::with_capacity(TASKS);
    let mut keys = Vec::with_capacity(TASKS);
    for i in 0..TASKS {
        let t = reg.register(task(i)).unwrap();
        keys.push(t.pod_key());
        ids.push(t.id);
    }
    // A fixed stride coprime with TASKS visits every index once, out of order.
    let order: Vec<usize> = (0..TASKS).map(|k| (k * 7919) % TASKS).collect();
    let ids = order.iter().map(|&k| ids[k].clone()).collect();
    let keys = order.iter().map(|&k| keys[k].clone()).collect();
    (reg, ids, keys)
}

fn status(id: &TaskId, state: TaskState, seq: u64) -> TaskStatus {
    TaskStatus {
        task_id: Some(id.clone()),
        state: state as i32,
        timestamp: Some(1_000.0 + seq as f64),
        uuid: Some(seq.to_le_bytes().repeat(2)),
        ..TaskStatus::default()
    }
}

fn benches(c: &mut Criterion) {
    let (reg, ids, keys) = filled();
    let mut g = c.benchmark_group("registry_100k");

    let mut i = 0usize;
    g.bench_function("get", |b| {
        b.iter(|| {
            i = (i + 1) % TASKS;
            black_box(reg.get(&ids[i]))
        })
    });

    let mut i = 0usize;
    g.bench_function("for_pod", |b| {
        b.iter(|| {
            i = (i + 1) % TASKS;
            black_box(reg.for_pod(&keys[i]))
        })
    });

    // Fresh RUNNING updates (new uuid, later timestamp): the first per task
    // moves Pending → Running, later ones are applied self-loops. The status
    // is built outside the timing, as the framework receives it decoded.
    let mut seq = 0u64;
    g.bench_function("update_status", |b| {
        b.iter_batched(
            || {
                seq += 1;
                let id = &ids[usize::try_from(seq).unwrap() % TASKS];
                status(id, TaskState::TaskRunning, seq)
            },
            |s| black_box(reg.update_status(&s, at(3))),
            BatchSize::SmallInput,
        )
    });

    // A redelivered update (same uuid): recognised as a duplicate.
    let dup = status(&ids[0], TaskState::TaskRunning, u64::MAX / 2);
    let _ = reg.update_status(&dup, at(1));
    g.bench_function("update_status_duplicate", |b| {
        b.iter(|| black_box(reg.update_status(&dup, at(2))))
    });

    // Registering into a registry of 100,000: tasks are built and removed
    // outside the timing, in chunks, so the registry stays near 100,000.
    let mut next = TASKS;
    g.bench_function("register", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(10_000);
                left -= n;
                let chunk: Vec<PodTask> = (0..n)
                    .map(|_| {
                        next += 1;
                        task(next)
                    })
                    .collect();
                let chunk_ids: Vec<TaskId> = chunk.iter().map(|t| t.id.clone()).collect();
                let start = Instant::now();
                for t in chunk {
                    black_box(reg.register(t).unwrap());
                }
                total += start.elapsed();
                for id in &chunk_ids {
                    reg.unregister(id);
                }
            }
            total
        })
    });
    g.finish();
}

criterion_group!(registry_ops, benches);
criterion_main!(registry_ops);
