//! Losing the leader lease: the core steps down and asks for nothing more.

use super::*;
use mesos::proto::TaskState;

/// Long enough for every offer to have outlived its TTL.
const LATER: u64 = 3600;

fn lease_lost() -> Step {
    Step::Input(Input::LeaseLost)
}

#[test]
fn a_leader_that_loses_the_lease_steps_down_and_declines_none_of_its_offers() {
    // The same core, twice: as leader its expired offers are declined...
    let mut leading = cluster(&["h1", "h2"]);
    let declined = describe(&leading.step(Step::Tick, at(LATER)));
    assert!(
        declined.iter().any(|l| l.starts_with("DECLINE")),
        "{declined:?}"
    );
    // ...and after losing the lease, nothing goes to Mesos for them.
    let mut core = cluster(&["h1", "h2"]);
    assert_eq!(describe(&core.step(lease_lost(), at(1))), ["step down"]);
    assert!(core.stepped_down());
    assert!(core.step(Step::Tick, at(LATER)).is_empty());
    // A pod that arrives finds no offer and no round: the new leader places it.
    assert!(
        core.step(Step::Input(Input::PodUpsert(pod("late", "1"))), at(2))
            .is_empty()
    );
    assert!(core.step(Step::Schedule, at(2)).is_empty());
    assert!(
        core.step(Step::Input(Input::Reconcile { explicit: true }), at(2))
            .is_empty()
    );
    assert!(core.step(Step::Tick, at(LATER + 1)).is_empty());
    // Reported once: a second loss (a late signal) asks for nothing.
    assert!(core.step(lease_lost(), at(3)).is_empty());
}

#[test]
fn after_stepping_down_updates_are_neither_written_nor_acknowledged() {
    let mut core = cluster(&["h1"]);
    let (id, _) = launched(&mut core, pod("web", "1"), at(1));
    for report in [
        bound(std::slice::from_ref(&id)),
        accepted(std::slice::from_ref(&id)),
    ] {
        let _ = core.step(report, at(1));
    }
    assert_eq!(describe(&core.step(lease_lost(), at(2))), ["step down"]);
    // The new leader writes this pod's status and acknowledges the update
    // (Mesos resends it to the new subscription); this replica does neither.
    let running = update(status(&id, TaskState::TaskRunning, true));
    assert!(core.step(running, at(2)).is_empty());
    // Nor does it kill what it launched when the pod goes.
    let deleted = Step::Input(Input::PodDeleted(pod("web", "1")));
    assert!(core.step(deleted, at(3)).is_empty());
}

#[test]
fn a_kill_held_behind_a_launch_is_dropped_when_the_lease_is_lost() {
    let mut core = cluster(&["h1"]);
    let web = pod("web", "1");
    let (id, _) = launched(&mut core, web.clone(), at(1));
    let _ = core.step(bound(std::slice::from_ref(&id)), at(1));
    assert!(
        core.step(Step::Input(Input::PodDeleted(web)), at(1))
            .is_empty()
    );
    // The lease goes while the ACCEPT is under way.
    assert_eq!(describe(&core.step(lease_lost(), at(1))), ["step down"]);
    // As leader the core would KILL it now (launching.rs); stepped down, it
    // leaves that to the new leader, which reconciles the task.
    let done = accepted(&[id]);
    assert!(core.step(done, at(2)).is_empty());
}
