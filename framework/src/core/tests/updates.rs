//! Status updates: durability before the ACK, duplicates, unknown tasks,
//! reconciliation answers.

use super::*;

/// A core whose pod `web` runs task `id` on h1 (its ACCEPT answered).
fn running() -> (Core, TaskId) {
    let mut core = cluster(&["h1"]);
    let (id, _) = launched(&mut core, pod("web", "1"), at(1));
    for report in [
        bound(std::slice::from_ref(&id)),
        accepted(std::slice::from_ref(&id)),
    ] {
        let _ = core.step(report, at(1));
    }
    (core, id)
}

#[test]
fn an_update_is_acknowledged_only_after_its_status_write_is_durable() {
    let (mut core, id) = running();
    let effects = core.step(update(status(&id, TaskState::TaskRunning, true)), at(2));
    assert_eq!(describe(&effects), ["write status web TASK_RUNNING"]);
    // The write failed: no ACK, so Mesos sends the update again.
    for step in written(&effects, false) {
        assert!(core.step(step, at(2)).is_empty());
    }
    for step in written(&effects, true) {
        assert_eq!(describe(&core.step(step, at(2))), [format!("ACK {id}")]);
    }
}

#[test]
fn a_duplicate_update_is_acknowledged_without_a_second_write() {
    let (mut core, id) = running();
    let first = core.step(update(status(&id, TaskState::TaskRunning, true)), at(2));
    for step in written(&first, true) {
        let _ = core.step(step, at(2));
    }
    let again = core.step(update(status(&id, TaskState::TaskRunning, true)), at(3));
    assert_eq!(describe(&again), [format!("ACK {id}")]);
}

#[test]
fn an_update_for_an_unknown_task_kills_it_unless_it_is_over() {
    let mut core = cluster(&["h1"]);
    let stray = TaskId::new("stray");
    let running = update(status(&stray, TaskState::TaskRunning, true));
    assert_eq!(
        describe(&core.step(running, at(1))),
        ["KILL stray", "ACK stray"]
    );
    let finished = update(status(&stray, TaskState::TaskFinished, true));
    assert_eq!(describe(&core.step(finished, at(1))), ["ACK stray"]);
}

#[test]
fn a_reconciliation_answer_gone_fails_the_pod_and_is_not_acknowledged() {
    let (mut core, id) = running();
    let mut gone = status(&id, TaskState::TaskGone, false);
    gone.reason = Some(mesos::proto::task_status::Reason::ReasonReconciliation as i32);
    let effects = core.step(update(gone), at(5));
    assert_eq!(describe(&effects), ["write status web TASK_GONE"]);
    for step in written(&effects, true) {
        assert!(core.step(step, at(5)).is_empty(), "no uuid, no ACK");
    }
    // The task is over: the pod's deletion kills nothing.
    assert!(
        core.step(Step::Input(Input::PodDeleted(pod("web", "1"))), at(6))
            .is_empty()
    );
}

#[test]
fn a_durable_terminal_update_of_a_deleted_pod_finalizes_it() {
    let (mut core, id) = running();
    let _ = core.step(Step::Input(Input::PodDeleted(pod("web", "1"))), at(2));
    let effects = core.step(update(status(&id, TaskState::TaskKilled, true)), at(3));
    assert_eq!(describe(&effects), ["write status web TASK_KILLED"]);
    let done = Step::StatusWritten {
        task: match &effects[0] {
            Effect::WriteStatus(w) => w.task.clone(),
            _ => unreachable!(),
        },
        written: Some(Written {
            finalize: true,
            running_since: None,
        }),
        ack: None,
    };
    assert_eq!(describe(&core.step(done, at(3))), ["finalize web"]);
    // Nothing left to retry.
    let later = at(3) + crate::core::sweep::KILL_RETRY;
    assert!(
        !describe(&core.step(Step::Tick, later))
            .iter()
            .any(|l| l.starts_with("KILL"))
    );
}

fn executor_failed(agent: &str, executor: &str) -> Step {
    mesos_event(Event {
        r#type: Some(event::Type::Failure as i32),
        failure: Some(event::Failure {
            agent_id: Some(AgentId::new(agent)),
            executor_id: Some(mesos::proto::ExecutorId::new(executor)),
            status: Some(9),
        }),
        ..Default::default()
    })
}

#[test]
fn offers_that_list_an_executor_that_ended_go_back_at_once() {
    let mut core = core();
    let _ = core.step(subscribed(), at(0));
    let mut listing = offer("h1", 4.0);
    listing.executor_ids = vec![mesos::proto::ExecutorId::new("mesopod-x")];
    let _ = core.step(offers(vec![listing, offer("h2", 4.0)]), at(0));
    // Another executor's end, or another agent's, leaves them alone.
    assert!(describe(&core.step(executor_failed("agent-h1", "other"), at(1))).is_empty());
    assert!(describe(&core.step(executor_failed("agent-h2", "mesopod-x"), at(1))).is_empty());
    // A pod placed on h1's offer would reuse the dead executor, whose
    // resources the offer lacks: the master would refuse the task.
    let effects = core.step(executor_failed("agent-h1", "mesopod-x"), at(1));
    assert_eq!(describe(&effects), ["DECLINE offer-h1"]);
    // Unfiltered, so the master offers the agent again as it is now.
    let refuse = effects.iter().find_map(|e| match e {
        Effect::Call(c, _) => c.decline.as_ref()?.filters.as_ref()?.refuse_seconds,
        _ => None,
    });
    assert_eq!(refuse, Some(0.0));
    // It is no longer held: nothing is declined twice.
    assert!(describe(&core.step(executor_failed("agent-h1", "mesopod-x"), at(2))).is_empty());
}
