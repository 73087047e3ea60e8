//! Memory per task: 100,000 typical tasks in the registry, counted by a
//! counting global allocator, beyond the pods themselves. Also times the
//! clone of a task, which the registry does on every read.
//!
//! Run: `cargo bench -p registry --bench memory -- --warm-up-time 1 --measurement-time 3`

#![allow(missing_docs, clippy::unwrap_used)]

mod fixtures;

use std::alloc::System;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group};
use fixtures::{TASKS, at, typical_pod, typical_spec, typical_task};
use mesos::proto::{ExecutorInfo, Resource, TaskState, TaskStatus};
use registry::{InMemoryRegistry, PodTask, Registry, Spec};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The budget per task, beyond the pod.
const BUDGET_PER_TASK: f64 = 4096.0;

/// glibc malloc spends about 16 bytes of bookkeeping per small allocation,
/// which byte counting does not see; it is added to a second, printed
/// estimate.
const MALLOC_OVERHEAD_PER_ALLOC: f64 = 16.0;

fn net(stats: stats_alloc::Stats) -> f64 {
    let net = stats.bytes_allocated as i128 - stats.bytes_deallocated as i128
        + stats.bytes_reallocated as i128;
    net as f64
}

fn live_allocations(stats: stats_alloc::Stats) -> f64 {
    stats.allocations as f64 - stats.deallocations as f64
}

fn per_task<T>(build: impl FnOnce() -> T) -> (T, f64, f64) {
    let region = Region::new(GLOBAL);
    let value = build();
    let stats = region.change();
    (
        value,
        net(stats) / TASKS as f64,
        live_allocations(stats) / TASKS as f64,
    )
}

fn report_memory() {
    let (pods, per_pod, _) = per_task(|| {
        (0..TASKS)
            .map(|i| Arc::new(typical_pod(i)))
            .collect::<Vec<_>>()
    });
    // The procured spec alone, for the breakdown (the tasks below build their own).
    let (specs, per_spec, _) = per_task(|| (0..TASKS).map(typical_spec).collect::<Vec<_>>());
    let executor = typical_spec(0).executor.unwrap();
    let (executors, per_executor, _) =
        per_task(|| (0..TASKS).map(|_| executor.clone()).collect::<Vec<_>>());
    drop((specs, executors));

    let (reg, per_task_bytes, allocs_per_task) = per_task(|| {
        let reg = InMemoryRegistry::new();
        for (i, pod) in pods.iter().enumerate() {
            let t = reg.register(typical_task(Arc::clone(pod), i)).unwrap();
            // A delivered RUNNING update, so the task carries its status bookkeeping.
            let running = TaskStatus {
                task_id: Some(t.id.clone()),
                state: TaskState::TaskRunning as i32,
                timestamp: Some(1_000.0),
                uuid: Some(vec![7; 16]),
                ..TaskStatus::default()
            };
            assert!(reg.update_status(&running, at(2)).changed_state());
        }
        reg
    });
    let with_overhead = per_task_bytes + allocs_per_task * MALLOC_OVERHEAD_PER_ALLOC;
    println!(
        "memory: {TASKS} tasks; typical pod itself {per_pod:.0} B; \
         per task beyond the pod {per_task_bytes:.0} B in {allocs_per_task:.1} live allocations \
         (~{with_overhead:.0} B with malloc bookkeeping); budget {BUDGET_PER_TASK:.0} B"
    );
    println!(
        "memory breakdown: procured spec (resources, ports, executor info) {per_spec:.0} B, \
         of which the executor info {per_executor:.0} B; size_of PodTask {} B, Spec {} B, ExecutorInfo {} B, Resource {} B",
        size_of::<PodTask>(),
        size_of::<Spec>(),
        size_of::<ExecutorInfo>(),
        size_of::<Resource>(),
    );
    // The budget is checked on what the counting allocator sees; the malloc
    // estimate above is printed so the margin is never overstated.
    assert!(
        per_task_bytes <= BUDGET_PER_TASK,
        "{per_task_bytes:.0} B per task is over the {BUDGET_PER_TASK:.0} B budget"
    );
    drop(reg);
    drop(pods);
}

fn clone_bench(c: &mut Criterion) {
    let t = typical_task(Arc::new(typical_pod(1)), 1);
    c.bench_function("podtask_clone_typical", |b| b.iter(|| black_box(t.clone())));
}

criterion_group!(memory, clone_bench);

fn main() {
    report_memory();
    memory();
    Criterion::default().configure_from_args().final_summary();
}
