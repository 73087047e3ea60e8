//! Many threads against one registry.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Barrier;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use common::{Update, at, task};
use mesos::proto::TaskState::*;
use registry::{InMemoryRegistry, RegisterError, Registry, Retention, State, StatusOutcome};

const THREADS: usize = 16;

#[test]
fn racing_registrations_give_each_pod_exactly_one_task() {
    let reg = InMemoryRegistry::new();
    let pods = 200;
    let wins = AtomicUsize::new(0);
    let barrier = Barrier::new(THREADS);
    thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                barrier.wait();
                for p in 0..pods {
                    match reg.register(task("ns", &format!("pod-{p}"))) {
                        Ok(_) => {
                            wins.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(RegisterError::AlreadyLive { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            });
        }
    });
    assert_eq!(wins.load(Ordering::Relaxed), pods);
    assert_eq!(reg.len(), pods);
    for p in 0..pods {
        assert!(
            reg.for_pod(&task("ns", &format!("pod-{p}")).pod_key())
                .is_some()
        );
    }
}

/// Threads keep launching, running and finishing tasks for a few pods while
/// GC runs. Each pod has a counter of live tasks that a thread raises after
/// its registration succeeds and lowers before it finishes the task: if the
/// registry ever let two live tasks coexist, a raise would see 1, not 0.
#[test]
fn churn_never_leaves_two_live_tasks_for_one_pod() {
    let reg = InMemoryRegistry::with_retention(Retention {
        max_finished: 16,
        max_age: Duration::from_secs(1),
    });
    let pods = 8;
    let live: Vec<AtomicI32> = (0..pods).map(|_| AtomicI32::new(0)).collect();
    let launched = AtomicUsize::new(0);
    let barrier = Barrier::new(THREADS + 1);
    thread::scope(|s| {
        for worker in 0..THREADS {
            let (reg, live, launched, barrier) = (&reg, &live, &launched, &barrier);
            s.spawn(move || {
                barrier.wait();
                for round in 0..400u64 {
                    let p = (worker + usize::try_from(round).unwrap()) % pods;
                    let Ok(t) = reg.register(task("ns", &format!("pod-{p}"))) else {
                        continue;
                    };
                    assert_eq!(
                        live[p].fetch_add(1, Ordering::SeqCst),
                        0,
                        "two live tasks for pod-{p}"
                    );
                    launched.fetch_add(1, Ordering::Relaxed);
                    let now = at(round);
                    let running = Update::new(&t.id, TaskRunning).ts(1.0).uuid(1);
                    assert!(reg.update_status(&running.status, now).changed_state());
                    // A redelivery racing nobody: still a duplicate.
                    assert!(matches!(
                        reg.update_status(&running.status, now),
                        StatusOutcome::Duplicate { .. }
                    ));
                    live[p].fetch_sub(1, Ordering::SeqCst);
                    let done = Update::new(&t.id, TaskFinished).ts(2.0).uuid(2);
                    assert!(reg.update_status(&done.status, now).changed_state());
                }
            });
        }
        s.spawn(|| {
            barrier.wait();
            for i in 0..200 {
                let _ = reg.gc(at(i * 10));
                thread::yield_now();
            }
        });
    });
    assert!(launched.load(Ordering::Relaxed) >= pods);
    assert!(reg.list(&|t| t.is_live()).is_empty());
    assert!(reg.list(&|t| !t.is_live()).len() <= reg.len());
}

/// Every thread delivers the same four updates of one task, in its own
/// order. Whatever the interleaving, the task ends Finished, and each
/// thread saw only forward moves.
#[test]
fn concurrent_duplicate_and_reordered_updates_converge() {
    for _ in 0..20 {
        let reg = InMemoryRegistry::new();
        let id = reg.register(task("ns", "web")).unwrap().id;
        let updates = [
            Update::new(&id, TaskStaging).ts(1.0).uuid(1),
            Update::new(&id, TaskRunning).ts(2.0).uuid(2),
            Update::new(&id, TaskKilling).ts(3.0).uuid(3),
            Update::new(&id, TaskKilled).ts(4.0).uuid(4),
        ];
        let barrier = Barrier::new(THREADS);
        thread::scope(|s| {
            for worker in 0..THREADS {
                let (reg, updates, barrier) = (&reg, &updates, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    for k in 0..updates.len() {
                        let u = &updates[(k + worker) % updates.len()];
                        if let StatusOutcome::Applied(t) = reg.update_status(&u.status, at(1)) {
                            assert!(t.previous.is_live());
                            assert!(
                                !(matches!(t.previous, State::Running | State::Killing)
                                    && t.current == State::Pending),
                                "{t:?}"
                            );
                        }
                    }
                });
            }
        });
        let t = reg.get(&id).unwrap();
        assert_eq!(t.state, State::Finished);
        assert_eq!(t.last_status.as_ref().unwrap().state, TaskKilled);
        assert!(reg.for_pod(&t.pod_key()).is_none());
    }
}
