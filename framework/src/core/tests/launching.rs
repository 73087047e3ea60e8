//! A round on its way to Mesos: bindings, ACCEPTs, held KILLs, rescinds.

use super::*;
use crate::core::Launch;

#[test]
fn a_bound_round_is_launched_and_reconciled_only_once_its_accept_is_answered() {
    let mut core = cluster(&["h1"]);
    let (id, _) = launched(&mut core, pod("web", "1"), at(1));
    let bound = Step::Input(Input::Launch(Launch::Bound(vec![(id.clone(), Ok(()))])));
    assert!(core.step(bound, at(1)).is_empty());
    // Mesos has not heard of the task yet: an explicit reconciliation
    // leaves it out.
    let _ = core.step(Step::Input(Input::Reconcile { explicit: true }), at(1));
    assert_eq!(
        describe(&core.step(Step::Tick, at(1))),
        ["RECONCILE 0 tasks"]
    );
    let done = Step::Input(Input::Launch(Launch::Done {
        launched: vec![id],
        dropped: Vec::new(),
    }));
    assert!(core.step(done, at(2)).is_empty());
    let _ = core.step(Step::Input(Input::Reconcile { explicit: true }), at(2));
    assert_eq!(
        describe(&core.step(Step::Tick, at(2))),
        ["RECONCILE 1 tasks"]
    );
}

#[test]
fn a_pod_deleted_while_launching_is_killed_once_its_accept_is_answered() {
    let mut core = cluster(&["h1"]);
    let web = pod("web", "1");
    let (id, _) = launched(&mut core, web.clone(), at(1));
    let _ = core.step(
        Step::Input(Input::Launch(Launch::Bound(vec![(id.clone(), Ok(()))]))),
        at(1),
    );
    // The KILL would reach Mesos before the LAUNCH and be lost: held.
    let deleted = Step::Input(Input::PodDeleted(web));
    assert!(core.step(deleted, at(1)).is_empty());
    let done = Step::Input(Input::Launch(Launch::Done {
        launched: vec![id.clone()],
        dropped: Vec::new(),
    }));
    assert_eq!(describe(&core.step(done, at(2))), [format!("KILL {id}")]);
}

#[test]
fn a_pod_that_could_not_be_bound_loses_its_task_and_is_not_launched() {
    let mut core = cluster(&["h1"]);
    let web = pod("web", "1");
    let (id, _) = launched(&mut core, web.clone(), at(1));
    let failed = Step::Input(Input::Launch(Launch::Bound(vec![(
        id.clone(),
        Err("the pod was deleted".into()),
    )])));
    assert!(core.step(failed, at(1)).is_empty());
    // No task any more: a deletion has nothing to kill, and an update for
    // the task is for a task mesopod does not know.
    assert!(
        core.step(Step::Input(Input::PodDeleted(web)), at(1))
            .is_empty()
    );
    let running = update(status(&id, TaskState::TaskRunning, true));
    assert_eq!(
        describe(&core.step(running, at(2))),
        [format!("KILL {id}"), format!("ACK {id}")]
    );
}

#[test]
fn an_offer_rescinded_mid_round_drops_the_round_s_tasks_through_the_update_path() {
    let mut core = cluster(&["h1"]);
    let (id, _) = launched(&mut core, pod("web", "1"), at(1));
    let _ = core.step(
        Step::Input(Input::Launch(Launch::Bound(vec![(id.clone(), Ok(()))]))),
        at(1),
    );
    // The offer is the round's already: a rescind changes nothing here...
    assert!(core.step(rescind("offer-h1"), at(1)).is_empty());
    // ...and the master refuses the ACCEPT, so the launch task reports the
    // task dropped; its pod's status is written like any update's.
    let mut drop = status(&id, TaskState::TaskDropped, false);
    drop.source = Some(mesos::proto::task_status::Source::SourceMaster as i32);
    let done = Step::Input(Input::Launch(Launch::Done {
        launched: Vec::new(),
        dropped: vec![drop],
    }));
    let effects = core.step(done, at(2));
    assert_eq!(describe(&effects), ["write status web TASK_DROPPED"]);
    // Master-generated: nothing to acknowledge once written.
    let steps = written(&effects, true);
    assert!(
        core.step(steps.into_iter().next().unwrap(), at(2))
            .is_empty()
    );
}

#[test]
fn a_task_not_running_by_its_deadline_is_killed_and_the_kill_retried() {
    let mut core = cluster(&["h1"]);
    let (id, _) = launched(&mut core, pod("web", "1"), at(1));
    let _ = core.step(
        Step::Input(Input::Launch(Launch::Bound(vec![(id.clone(), Ok(()))]))),
        at(1),
    );
    let _ = core.step(
        Step::Input(Input::Launch(Launch::Done {
            launched: vec![id.clone()],
            dropped: Vec::new(),
        })),
        at(1),
    );
    let late = at(1) + crate::config::DEFAULT_START_DEADLINE;
    let kill = format!("KILL {id}");
    let effects = describe(&core.step(Step::Tick, late));
    assert!(effects.contains(&kill), "{effects:?}");
    // Sent once; again only after the retry interval.
    let effects = describe(&core.step(Step::Tick, late + Duration::from_secs(1)));
    assert!(!effects.contains(&kill), "{effects:?}");
    let retry = late + crate::core::sweep::KILL_RETRY;
    let effects = describe(&core.step(Step::Tick, retry));
    assert!(effects.contains(&kill), "{effects:?}");
}
