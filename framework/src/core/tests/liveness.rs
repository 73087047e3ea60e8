//! Executor liveness: a quiet executor makes its Node NotReady and its pods
//! not ready; heard again, both come back.

use mesos::proto::ExecutorId;

use super::*;

/// A core whose pod `web` runs on h1, reported RUNNING at `at(1)`.
fn running_web() -> (Core, TaskId) {
    let mut core = cluster(&["h1", "h2"]);
    let (id, _) = launched(&mut core, pod("web", "1"), at(1));
    let _ = core.step(bound(std::slice::from_ref(&id)), at(1));
    let _ = core.step(accepted(std::slice::from_ref(&id)), at(1));
    let effects = core.step(update(status(&id, TaskState::TaskRunning, true)), at(1));
    for step in written(&effects, true) {
        let _ = core.step(step, at(1));
    }
    (core, id)
}

/// What the executor on h1 sends every 10 s.
fn node_status() -> Step {
    mesos_event(Event {
        r#type: Some(event::Type::Message as i32),
        message: Some(event::Message {
            agent_id: Some(AgentId::new("agent-h1")),
            executor_id: Some(ExecutorId::new("mesopod-executor")),
            data: executor::NODE_STATUS_MESSAGE.to_vec(),
        }),
        ..Default::default()
    })
}

fn ticks(core: &mut Core, from: u64, to: u64) -> Vec<String> {
    (from..=to)
        .flat_map(|s| describe(&core.step(Step::Tick, at(s))))
        .filter(|l| l.contains("node") || l.contains("not ready") || l.contains("MESSAGE"))
        .collect()
}

#[test]
fn an_executor_heard_from_keeps_its_node_ready() {
    let (mut core, _) = running_web();
    for s in (2..120).step_by(10) {
        let _ = core.step(node_status(), at(s));
        assert!(ticks(&mut core, s, s + 9).is_empty());
    }
}

#[test]
fn a_quiet_executor_makes_its_node_not_ready_and_its_pods_not_ready_then_both_come_back() {
    let (mut core, _) = running_web();
    let _ = core.step(node_status(), at(2));
    // Quiet for the grace period (40 s): nothing yet.
    assert!(ticks(&mut core, 3, 42).is_empty());
    // Past it: the Node, then each pod on it, with kube's event.
    let effects = ticks(&mut core, 43, 50);
    assert_eq!(
        effects,
        ["node h1", "not ready web, then event NodeNotReady web"]
    );
    // A NotReady agent takes no pod, though it offers.
    let _ = core.step(offers(vec![offer("h1", 4.0)]), at(50));
    let _ = core.step(Step::Input(Input::PodUpsert(pod("new", "1"))), at(50));
    assert!(rounds(&core.step(Step::Schedule, at(50))).is_empty());
    // Heard again: Ready, and the executor reports every pod again.
    let effects = describe(&core.step(node_status(), at(60)));
    assert_eq!(effects, ["node h1", "MESSAGE"]);
    assert_eq!(
        describe(&core.step(Step::Schedule, at(60))),
        ["launch new on offer-h1"]
    );
}

#[test]
fn the_node_is_judged_only_while_a_pod_of_ours_runs_there() {
    // h2 runs nothing of ours: no executor is expected there.
    let mut core = cluster(&["h1", "h2"]);
    assert!(ticks(&mut core, 1, 200).is_empty());
}

#[test]
fn an_executor_never_heard_is_not_judged() {
    // A simulated agent's tasks run with no executor, and an executor from
    // before node status existed never sends one: their Nodes stay Ready.
    let (mut core, _) = running_web();
    assert!(ticks(&mut core, 2, 300).is_empty());
}

#[test]
fn a_restarted_core_gives_every_executor_a_full_grace_period_from_when_it_hears_it() {
    let (mut core, _) = running_web();
    let late = 1_000;
    let _ = core.step(node_status(), at(late));
    assert!(ticks(&mut core, late, late + 40).is_empty());
    assert_eq!(ticks(&mut core, late + 41, late + 50).len(), 2);
}
