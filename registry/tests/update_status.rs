//! update_status rules beyond the table: duplicates, order, unknown tasks,
//! malformed input, partition heal, and what the registry does around them.

#![allow(clippy::unwrap_used)]

mod common;

use common::{Update, at, task};
use mesos::proto::TaskState::*;
use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{TaskId, TaskStatus};
use registry::{InMemoryRegistry, InvalidStatus, Registry, StaleReason, State, StatusOutcome};

fn registered() -> (InMemoryRegistry, TaskId) {
    let reg = InMemoryRegistry::new();
    let id = reg.register(task("ns", "web")).unwrap().id;
    (reg, id)
}

/// The earlier system panicked here.
#[test]
fn finished_for_a_pending_task_finishes_it() {
    let (reg, id) = registered();
    let out = reg.update_status(&Update::new(&id, TaskFinished).ts(5.0).status, at(5));
    let StatusOutcome::Applied(t) = out else {
        panic!("{out:?}")
    };
    assert_eq!((t.previous, t.current), (State::Pending, State::Finished));
    assert_eq!(t.task.finished_at(), Some(at(5)));
    assert_eq!(t.task.last_status.unwrap().state, TaskFinished);
}

#[test]
fn a_redelivered_update_is_a_duplicate_and_changes_nothing() {
    let (reg, id) = registered();
    let running = Update::new(&id, TaskRunning).ts(10.0).uuid(7);
    assert!(reg.update_status(&running.status, at(10)).changed_state());
    let before = reg.get(&id).unwrap();
    let again = reg.update_status(&running.status, at(99));
    assert!(
        matches!(again, StatusOutcome::Duplicate { .. }),
        "{again:?}"
    );
    assert_eq!(
        reg.get(&id).unwrap(),
        before,
        "a duplicate must not touch the task"
    );
}

#[test]
fn a_repeated_master_update_without_uuid_is_a_duplicate() {
    let (reg, id) = registered();
    let recon = Update::new(&id, TaskRunning)
        .ts(10.0)
        .source(Source::SourceMaster)
        .reason(Reason::ReasonReconciliation);
    assert!(matches!(
        reg.update_status(&recon.status, at(10)),
        StatusOutcome::Applied(_)
    ));
    let out = reg.update_status(&recon.status, at(11));
    assert!(matches!(out, StatusOutcome::Duplicate { .. }), "{out:?}");
    assert_eq!(reg.get(&id).unwrap().updated, at(10));
}

#[test]
fn a_fresh_update_repeating_the_state_is_applied_as_a_self_loop() {
    let (reg, id) = registered();
    let _ = reg.update_status(
        &Update::new(&id, TaskRunning).ts(10.0).uuid(1).status,
        at(10),
    );
    let mut health = Update::new(&id, TaskRunning).ts(20.0).uuid(2);
    health.status.healthy = Some(false);
    let StatusOutcome::Applied(t) = reg.update_status(&health.status, at(20)) else {
        panic!()
    };
    assert!(!t.changed());
    assert_eq!(t.task.last_status.unwrap().healthy, Some(false));
    assert_eq!(t.task.updated, at(20));
}

fn older_than_last(out: &StatusOutcome) -> bool {
    matches!(
        out,
        StatusOutcome::Stale {
            why: StaleReason::OlderThanLastApplied { .. },
            ..
        }
    )
}

#[test]
fn an_old_unreachable_does_not_mark_a_running_task_partitioned() {
    let (reg, id) = registered();
    let _ = reg.update_status(
        &Update::new(&id, TaskRunning).ts(20.0).uuid(2).status,
        at(20),
    );
    let late = Update::new(&id, TaskUnreachable)
        .ts(10.0)
        .source(Source::SourceMaster);
    let out = reg.update_status(&late.status, at(21));
    match out {
        StatusOutcome::Stale {
            why: StaleReason::OlderThanLastApplied { last, got },
            task,
        } => {
            assert_eq!((last, got), (20.0, 10.0));
            assert_eq!(task.state, State::Running);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(reg.get(&id).unwrap().state, State::Running);
}

#[test]
fn an_old_running_does_not_heal_a_partitioned_task() {
    let (reg, id) = registered();
    let _ = reg.update_status(
        &Update::new(&id, TaskRunning).ts(10.0).uuid(1).status,
        at(10),
    );
    let _ = reg.update_status(&Update::new(&id, TaskUnreachable).ts(30.0).status, at(30));
    let old = reg.update_status(
        &Update::new(&id, TaskRunning).ts(20.0).uuid(2).status,
        at(31),
    );
    assert!(older_than_last(&old), "{old:?}");
    assert_eq!(reg.get(&id).unwrap().state, State::Unreachable);
}

#[test]
fn an_old_self_loop_does_not_overwrite_newer_details() {
    let (reg, id) = registered();
    let mut fresh = Update::new(&id, TaskRunning).ts(20.0).uuid(2);
    fresh.status.healthy = Some(true);
    let _ = reg.update_status(&fresh.status, at(20));
    let mut old = Update::new(&id, TaskRunning).ts(10.0).uuid(1);
    old.status.healthy = Some(false);
    assert!(older_than_last(&reg.update_status(&old.status, at(21))));
    assert_eq!(
        reg.get(&id).unwrap().last_status.unwrap().healthy,
        Some(true)
    );
}

/// A master answers reconciliation with its current time, so an agent's
/// terminal update that waited for an acknowledgement can look older than a
/// reconciliation answer that overtook it. It is progress and must apply.
#[test]
fn progress_applies_even_when_a_reconciliation_answer_looks_newer() {
    let (reg, id) = registered();
    let _ = reg.update_status(
        &Update::new(&id, TaskRunning).ts(100.0).uuid(1).status,
        at(100),
    );
    let recon = Update::new(&id, TaskRunning)
        .ts(105.0)
        .source(Source::SourceMaster)
        .reason(Reason::ReasonReconciliation);
    let _ = reg.update_status(&recon.status, at(105));
    let killing = Update::new(&id, TaskKilling).ts(103.0).uuid(2);
    assert!(reg.update_status(&killing.status, at(106)).changed_state());
    // The watermark stayed at 105: an UNREACHABLE from 104 is still old.
    let unreachable = Update::new(&id, TaskUnreachable).ts(104.0);
    assert!(older_than_last(
        &reg.update_status(&unreachable.status, at(107))
    ));
    let finished = Update::new(&id, TaskKilled).ts(104.0).uuid(3);
    let StatusOutcome::Applied(t) = reg.update_status(&finished.status, at(108)) else {
        panic!()
    };
    assert_eq!((t.previous, t.current), (State::Killing, State::Finished));
}

/// After a heal the executor reports every pod again while mesopod
/// reconciles: an answer stamped by the master's clock may overtake a
/// report the executor stamped a moment before. The report's details (the
/// pod's readiness) are the newest word on the pod and must apply.
#[test]
fn an_executor_report_overtaken_by_a_reconciliation_answer_still_applies() {
    let (reg, id) = registered();
    let mut before = Update::new(&id, TaskRunning).ts(100.0).uuid(1);
    before.status.healthy = Some(false);
    let _ = reg.update_status(&before.status, at(100));
    let recon = Update::new(&id, TaskRunning)
        .ts(105.0)
        .source(Source::SourceMaster)
        .reason(Reason::ReasonReconciliation);
    let _ = reg.update_status(&recon.status, at(105));
    let mut report = Update::new(&id, TaskRunning).ts(103.0).uuid(2);
    report.status.healthy = Some(true);
    let out = reg.update_status(&report.status, at(106));
    assert!(matches!(out, StatusOutcome::Applied(_)), "{out:?}");
    assert_eq!(
        reg.get(&id).unwrap().last_status.unwrap().healthy,
        Some(true)
    );
    // Among the executor's own reports the order still holds.
    let mut older = Update::new(&id, TaskRunning).ts(102.0).uuid(3);
    older.status.healthy = Some(false);
    assert!(older_than_last(&reg.update_status(&older.status, at(107))));
}

#[test]
fn an_update_without_timestamp_is_still_ordered_by_the_state_machine() {
    let (reg, id) = registered();
    let _ = reg.update_status(&Update::new(&id, TaskRunning).ts(20.0).status, at(20));
    let out = reg.update_status(&Update::new(&id, TaskStarting).status, at(21));
    assert!(
        matches!(
            out,
            StatusOutcome::Stale {
                why: StaleReason::Regression {
                    from: State::Running,
                    to: State::Pending
                },
                ..
            }
        ),
        "{out:?}"
    );
}

#[test]
fn unreachable_comes_back_to_running_when_the_partition_heals() {
    let (reg, id) = registered();
    let _ = reg.update_status(&Update::new(&id, TaskRunning).ts(1.0).uuid(1).status, at(1));
    let out = reg.update_status(
        &Update::new(&id, TaskUnreachable)
            .ts(2.0)
            .source(Source::SourceMaster)
            .status,
        at(2),
    );
    assert_eq!(out.task().unwrap().state, State::Unreachable);
    // Still live: nobody may launch a second copy of the pod meanwhile.
    let key = out.task().unwrap().pod_key();
    assert_eq!(reg.for_pod(&key).unwrap().id, id);
    let StatusOutcome::Applied(t) =
        reg.update_status(&Update::new(&id, TaskRunning).ts(3.0).uuid(3).status, at(3))
    else {
        panic!()
    };
    assert_eq!(
        (t.previous, t.current),
        (State::Unreachable, State::Running)
    );
}

#[test]
fn lost_from_the_master_may_heal_but_gone_is_final() {
    let (reg, id) = registered();
    let _ = reg.update_status(&Update::new(&id, TaskRunning).ts(1.0).status, at(1));
    let _ = reg.update_status(
        &Update::new(&id, TaskLost)
            .ts(2.0)
            .source(Source::SourceMaster)
            .status,
        at(2),
    );
    let _ = reg.update_status(&Update::new(&id, TaskRunning).ts(3.0).status, at(3));
    assert_eq!(reg.get(&id).unwrap().state, State::Running);
    let _ = reg.update_status(&Update::new(&id, TaskGone).ts(4.0).status, at(4));
    let out = reg.update_status(&Update::new(&id, TaskRunning).ts(5.0).status, at(5));
    assert!(
        matches!(
            out,
            StatusOutcome::Absorbed {
                observed: TaskRunning,
                ..
            }
        ),
        "{out:?}"
    );
    assert_eq!(reg.get(&id).unwrap().state, State::Finished);
}

#[test]
fn an_update_for_an_unknown_task_is_reported_for_reconciliation() {
    let reg = InMemoryRegistry::new();
    let stranger = TaskId::new("ns.ghost.123");
    let out = reg.update_status(&Update::new(&stranger, TaskRunning).status, at(1));
    assert_eq!(
        out,
        StatusOutcome::UnknownTask {
            task_id: stranger,
            observed: TaskRunning
        }
    );
    assert!(reg.is_empty());
}

#[test]
fn malformed_updates_are_invalid_and_change_nothing() {
    let (reg, id) = registered();
    let before = reg.get(&id).unwrap();
    let no_id = TaskStatus {
        state: TaskRunning as i32,
        ..TaskStatus::default()
    };
    assert_eq!(
        reg.update_status(&no_id, at(1)),
        StatusOutcome::Invalid(InvalidStatus::MissingTaskId)
    );
    let empty_id = TaskStatus {
        task_id: Some(TaskId::new("")),
        ..no_id.clone()
    };
    assert_eq!(
        reg.update_status(&empty_id, at(1)),
        StatusOutcome::Invalid(InvalidStatus::MissingTaskId)
    );
    let mut odd_state = Update::new(&id, TaskRunning);
    odd_state.status.state = 99;
    assert_eq!(
        reg.update_status(&odd_state.status, at(1)),
        StatusOutcome::Invalid(InvalidStatus::UnknownState {
            task_id: id.clone(),
            number: 99
        })
    );
    assert_eq!(reg.get(&id).unwrap(), before);
}

#[test]
fn unknown_reasons_and_sources_and_odd_timestamps_do_not_make_an_update_unusable() {
    let (reg, id) = registered();
    let mut u = Update::new(&id, TaskRunning);
    u.status.reason = Some(12345);
    u.status.source = Some(-3);
    u.status.timestamp = Some(f64::NAN);
    let out = reg.update_status(&u.status, at(1));
    assert!(out.changed_state(), "{out:?}");
    // NaN was not recorded as an order: a later normal update still applies.
    let u = Update::new(&id, TaskFinished).ts(-5.0);
    assert!(reg.update_status(&u.status, at(2)).changed_state());
}

#[test]
fn a_finished_task_frees_its_pod_for_a_new_task() {
    let reg = InMemoryRegistry::new();
    let first = reg.register(task("ns", "web")).unwrap();
    let key = first.pod_key();
    assert!(reg.register(task("ns", "web")).is_err());
    let _ = reg.update_status(&Update::new(&first.id, TaskFailed).status, at(3));
    assert!(reg.for_pod(&key).is_none());
    let second = reg.register(task("ns", "web")).unwrap();
    assert_eq!(reg.for_pod(&key).unwrap().id, second.id);
    // The finished one is still there to absorb late updates.
    let late = reg.update_status(&Update::new(&first.id, TaskRunning).status, at(4));
    assert!(matches!(late, StatusOutcome::Absorbed { .. }));
    assert_eq!(reg.for_pod(&key).unwrap().id, second.id);
}
