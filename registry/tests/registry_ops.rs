//! Registry operations other than status updates.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Update, at, pod, task};
use mesos::proto::TaskState::*;
use mesos::proto::{AgentId, OfferId, TaskId};
use registry::{
    Flag, InMemoryRegistry, PodTask, RegisterError, Registry, Retention, Spec, State, UpdateError,
};

#[test]
fn a_pod_gets_one_live_task_and_the_refusal_names_it() {
    let reg = InMemoryRegistry::new();
    let first = reg.register(task("ns", "web")).unwrap();
    let err = reg.register(task("ns", "web")).unwrap_err();
    assert_eq!(
        err,
        RegisterError::AlreadyLive {
            pod: first.pod_key(),
            existing: first.id.clone()
        }
    );
    assert_eq!(reg.len(), 1);
    // Same name, other namespace or other uid: another pod.
    reg.register(task("other", "web")).unwrap();
    let recreated = PodTask::new(pod("ns", "web", "new-uid"), vec![], at(0)).unwrap();
    reg.register(recreated).unwrap();
    assert_eq!(reg.len(), 3);
}

#[test]
fn a_task_id_is_registered_once() {
    let reg = InMemoryRegistry::new();
    let t = reg.register(task("ns", "a")).unwrap();
    assert_eq!(
        reg.register(t.clone()).unwrap_err(),
        RegisterError::DuplicateTaskId(t.id.clone())
    );
    let mut other_pod_same_id = task("ns", "b");
    other_pod_same_id.id = t.id.clone();
    assert_eq!(
        reg.register(other_pod_same_id).unwrap_err(),
        RegisterError::DuplicateTaskId(t.id.clone())
    );
    // The failed attempt claimed nothing.
    assert!(reg.for_pod(&task("ns", "b").pod_key()).is_none());
    assert!(reg.register(task("ns", "b")).is_ok());
}

#[test]
fn update_stores_placement_and_flags_but_never_rolls_back_the_state() {
    let reg = InMemoryRegistry::new();
    let stale_copy = reg.register(task("ns", "web")).unwrap();
    // Meanwhile Mesos reports the task running.
    let _ = reg.update_status(&Update::new(&stale_copy.id, TaskRunning).status, at(5));
    let mut mine = stale_copy.clone();
    mine.spec = Some(Arc::new(Spec {
        agent_id: AgentId::new("agent-1"),
        hostname: "host-1".into(),
        ..Spec::default()
    }));
    mine.offer_id = Some(OfferId::new("offer-1"));
    mine.set(Flag::Bound);
    mine.updated = at(3);
    let stored = reg.update(mine).unwrap();
    assert_eq!(
        stored.state,
        State::Running,
        "the stale copy's Pending must not win"
    );
    assert_eq!(stored.spec.as_ref().unwrap().hostname, "host-1");
    assert_eq!(stored.offer_id, Some(OfferId::new("offer-1")));
    assert!(stored.has(Flag::Bound));
    assert_eq!(stored.updated, at(5), "updated only moves forward");
    // A copy without the flag does not clear it: flags record facts.
    let mut without = stale_copy.clone();
    without.set(Flag::Deleted);
    let stored = reg.update(without).unwrap();
    assert!(stored.has(Flag::Bound) && stored.has(Flag::Deleted));
    assert_eq!(reg.get(&stored.id).unwrap(), stored);
}

#[test]
fn update_refuses_unknown_tasks_and_a_change_of_pod() {
    let reg = InMemoryRegistry::new();
    let t = reg.register(task("ns", "web")).unwrap();
    // Same task id, another pod.
    let moved = PodTask::with_id(t.id.clone(), pod("ns", "elsewhere", "x"), vec![], at(0)).unwrap();
    assert!(matches!(
        reg.update(moved).unwrap_err(),
        UpdateError::PodMismatch { .. }
    ));
    assert_eq!(reg.get(&t.id).unwrap(), t);
    let stranger = task("ns", "stranger");
    assert_eq!(
        reg.update(stranger.clone()).unwrap_err(),
        UpdateError::NotFound(stranger.id)
    );
}

#[test]
fn unregister_frees_the_pod() {
    // Used as a trait object, as the framework shares it.
    let reg: Arc<dyn Registry> = Arc::new(InMemoryRegistry::new());
    let t = reg.register(task("ns", "web")).unwrap();
    assert_eq!(reg.unregister(&t.id).unwrap().id, t.id);
    assert!(reg.get(&t.id).is_none());
    assert!(reg.for_pod(&t.pod_key()).is_none());
    assert!(reg.unregister(&t.id).is_none());
    reg.register(task("ns", "web")).unwrap();
}

#[test]
fn list_filters() {
    let reg = InMemoryRegistry::new();
    for name in ["a", "b", "c"] {
        reg.register(task("ns", name)).unwrap();
    }
    let b = reg.for_pod(&task("ns", "b").pod_key()).unwrap();
    let _ = reg.update_status(&Update::new(&b.id, TaskRunning).status, at(1));
    let running = reg.list(&|t| t.state == State::Running);
    assert_eq!(running.len(), 1);
    assert_eq!(running[0].id, b.id);
    assert_eq!(reg.list(&|_| true).len(), 3);
}

#[test]
fn a_finished_task_can_be_registered_without_claiming_its_pod() {
    let reg = InMemoryRegistry::new();
    let mut done = task("ns", "web");
    done.state = State::Finished;
    reg.register(done.clone()).unwrap();
    assert!(reg.for_pod(&done.pod_key()).is_none());
    reg.register(task("ns", "web")).unwrap();
}

fn finish(reg: &InMemoryRegistry, name: &str, secs: u64) -> TaskId {
    let id = reg.register(task("ns", name)).unwrap().id;
    let _ = reg.update_status(&Update::new(&id, TaskFinished).status, at(secs));
    id
}

#[test]
fn gc_keeps_the_newest_finished_within_the_period_and_returns_the_rest() {
    let reg = InMemoryRegistry::with_retention(Retention {
        max_finished: 2,
        max_age: Duration::from_secs(60),
    });
    let old = finish(&reg, "old", 100);
    let a = finish(&reg, "a", 150);
    let b = finish(&reg, "b", 160);
    let c = finish(&reg, "c", 170);
    let live = reg.register(task("ns", "live")).unwrap().id;

    let mut removed: Vec<TaskId> = reg.gc(at(175)).into_iter().map(|t| t.id).collect();
    removed.sort();
    let mut want = vec![old, a];
    want.sort();
    assert_eq!(removed, want, "over the count of 2");
    assert!(reg.get(&b).is_some() && reg.get(&c).is_some());

    let removed: Vec<TaskId> = reg.gc(at(225)).into_iter().map(|t| t.id).collect();
    assert_eq!(
        removed,
        vec![b],
        "b finished 65 s ago, past the 60 s period"
    );
    assert!(reg.gc(at(225)).is_empty(), "gc is idempotent");
    assert!(reg.get(&c).is_some());
    assert!(reg.get(&live).is_some(), "live tasks are never collected");
    assert!(
        reg.gc(at(100_000))
            .iter()
            .all(|t| t.state == State::Finished)
    );
    assert!(reg.get(&live).is_some());
}

#[test]
fn a_reader_sees_every_change_the_writer_makes() {
    let reg = InMemoryRegistry::new();
    let reader = reg.reader();
    assert!(reader.is_empty());
    let t = reg.register(task("ns", "web")).unwrap();
    let copy = reader.clone();
    assert_eq!(copy.get(&t.id).map(|t| t.id), Some(t.id.clone()));
    assert_eq!(copy.for_pod(&t.pod_key()).map(|t| t.id), Some(t.id.clone()));
    assert_eq!(copy.list(&|_: &PodTask| true).len(), 1);
    reg.unregister(&t.id);
    assert!(copy.get(&t.id).is_none() && copy.is_empty());
}
