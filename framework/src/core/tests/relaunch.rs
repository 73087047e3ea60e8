//! A bound pod whose task never reached Mesos runs on its node anyway.

use mesos::proto::task_status::{Reason, Source};

use super::*;
use crate::core::Launch;

/// A store holding fixed pods.
pub(super) struct Pods(pub(super) Vec<Pod>);

impl Lookup for Pods {
    fn meta(&self, _key: &str) -> Option<Vec<u8>> {
        None
    }
    fn pods(&self) -> Vec<Pod> {
        self.0.clone()
    }
}

pub(super) const OLD: &str = "default.web.0000000000";

/// Pod `web` as a leader that died before its ACCEPT left it: bound to
/// `h1`, naming task [`OLD`], in `phase`.
pub(super) fn bound_web(phase: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "uid-web",
            "creationTimestamp": "2023-11-14T22:13:20Z",
            "annotations": {
                "mesopod.io/task-id": OLD,
                "mesopod.io/agent-id": "agent-h1",
                "mesopod.io/offer-id": "offer-dead-leader",
                "mesopod.io/executor-id": "mesopod-executor",
                "mesopod.io/hostname": "h1",
                "mesopod.io/ports": "[]",
            }},
        "spec": {"nodeName": "h1", "containers": [{"name": "c", "image": "busybox",
            "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}}]},
        "status": {"phase": phase},
    }))
    .unwrap()
}

/// A core recovered from `pod`, subscribed, with offers from `hosts`.
pub(super) fn recovered(pod: Pod, hosts: &[&str]) -> Core {
    let mut core = core_reading(Admission::none(), Box::new(Pods(vec![pod.clone()])));
    let _ = core.step(Step::Recovered(vec![Arc::new(pod)]), at(0));
    let _ = core.step(subscribed(), at(0));
    let _ = core.step(offers(hosts.iter().map(|h| offer(h, 4.0)).collect()), at(0));
    core
}

/// The master's answer to reconciliation for a task a registered agent
/// does not have.
fn gone(id: &TaskId) -> Step {
    let mut s = status(id, TaskState::TaskGone, false);
    s.source = Some(Source::SourceMaster as i32);
    s.reason = Some(Reason::ReasonReconciliation as i32);
    s.message = Some("Reconciliation: Task is unknown to the agent".into());
    update(s)
}

#[test]
fn a_recovered_task_the_master_never_heard_of_is_launched_again_on_its_node_once() {
    let mut core = recovered(bound_web("Pending"), &["h2", "h1"]);
    let old = TaskId::new(OLD);
    // No status is written (the pod stays Pending) and nothing is killed.
    assert!(core.step(gone(&old), at(1)).is_empty());
    let effects = core.step(Step::Schedule, at(1));
    let launched = rounds(&effects);
    assert_eq!(launched.len(), 1, "{:?}", describe(&effects));
    let placed = launched[0];
    assert_eq!(placed.len(), 1);
    assert_eq!(placed[0].offer.value, "offer-h1", "pinned to its node");
    assert!(
        placed[0].binding.relaunch,
        "bound already: no second Binding"
    );
    let new = placed[0].task.clone();
    assert_ne!(new, old, "a new task, whose annotations replace the old");
    // The same answer again (a reconciliation retried) is about a task
    // mesopod forgot: nothing more is launched, killed or written.
    assert!(core.step(gone(&old), at(2)).is_empty());
    let _ = core.step(bound(std::slice::from_ref(&new)), at(2));
    let _ = core.step(accepted(std::slice::from_ref(&new)), at(2));
    let effects = core.step(Step::Schedule, at(3));
    assert!(rounds(&effects).is_empty(), "{:?}", describe(&effects));
    // The new task runs as any other.
    let running = update(status(&new, TaskState::TaskRunning, true));
    assert_eq!(
        describe(&core.step(running, at(3))),
        ["write status web TASK_RUNNING"]
    );
}

#[test]
fn a_pod_relaunched_on_its_node_waits_for_that_node_and_stays_scheduled() {
    let mut core = recovered(bound_web("Pending"), &["h2"]);
    assert!(core.step(gone(&TaskId::new(OLD)), at(1)).is_empty());
    // Only another agent offers: not placed there, and not called
    // unschedulable (no event, no PodScheduled=False on a bound pod).
    assert!(core.step(Step::Schedule, at(1)).is_empty());
    // Watch events about the bound pod do not take it out of the queue.
    let _ = core.step(
        Step::Input(Input::PodSettled(
            registry::PodKey::of(&bound_web("Pending")).unwrap(),
        )),
        at(1),
    );
    let _ = core.step(offers(vec![offer("h1", 4.0)]), at(1));
    let effects = core.step(Step::Schedule, at(60));
    let launched = rounds(&effects);
    assert_eq!(launched.len(), 1, "{:?}", describe(&effects));
    assert_eq!(launched[0][0].offer.value, "offer-h1");
}

#[test]
fn a_task_that_reported_is_not_launched_again() {
    // Launched by this core and RUNNING: a later GONE ends it as before.
    let mut core = cluster(&["h1"]);
    let (id, _) = launched(&mut core, pod("web", "1"), at(1));
    let _ = core.step(bound(std::slice::from_ref(&id)), at(1));
    let _ = core.step(accepted(std::slice::from_ref(&id)), at(1));
    let running = core.step(update(status(&id, TaskState::TaskRunning, true)), at(2));
    for step in written(&running, true) {
        let _ = core.step(step, at(2));
    }
    assert_eq!(
        describe(&core.step(gone(&id), at(3))),
        ["write status web TASK_GONE"]
    );
    let _ = core.step(offers(vec![offer("h1", 4.0)]), at(3));
    assert!(rounds(&core.step(Step::Schedule, at(4))).is_empty());
}

#[test]
fn a_recovered_running_pod_answered_gone_ends_as_before() {
    let mut core = recovered(bound_web("Running"), &["h1"]);
    assert_eq!(
        describe(&core.step(gone(&TaskId::new(OLD)), at(1))),
        ["write status web TASK_GONE"]
    );
    assert!(rounds(&core.step(Step::Schedule, at(2))).is_empty());
}

#[test]
fn other_terminal_answers_for_a_never_run_task_end_it_as_before() {
    for (state, reason) in [
        (TaskState::TaskUnknown, Reason::ReasonReconciliation),
        (TaskState::TaskUnreachable, Reason::ReasonReconciliation),
        (TaskState::TaskGone, Reason::ReasonExecutorTerminated),
    ] {
        let mut core = recovered(bound_web("Pending"), &["h1"]);
        let mut s = status(&TaskId::new(OLD), state, false);
        s.source = Some(Source::SourceMaster as i32);
        s.reason = Some(reason as i32);
        let effects = core.step(update(s), at(1));
        assert_eq!(
            describe(&effects),
            [format!("write status web {}", state.wire_name())],
            "{state:?} {reason:?}"
        );
        assert!(rounds(&core.step(Step::Schedule, at(2))).is_empty());
    }
}

/// After a failover the new leader places pods from its first offers before
/// the master's answer sends a bound pod back to its node; while that pod
/// waits (its node's offer out, or a backoff), a pod that could run anywhere
/// must not take its room (the HA test saw its node filled for good).
#[test]
fn a_pod_sent_back_to_its_node_is_offered_it_before_pods_that_could_go_anywhere() {
    let mut core = recovered(bound_web("Pending"), &["h2"]);
    let _ = core.step(offers(vec![offer("h2", 0.5)]), at(0));
    assert!(core.step(gone(&TaskId::new(OLD)), at(1)).is_empty());
    // h1 offers nothing yet: web waits, and is not due again at once.
    assert!(rounds(&core.step(Step::Schedule, at(1))).is_empty());
    // A pod that fits anywhere arrives as h1's offer does, and is due.
    let _ = core.step(Step::Input(Input::PodUpsert(pod("big", "3.5"))), at(1));
    let _ = core.step(offers(vec![offer("h1", 4.0)]), at(1));
    let effects = core.step(Step::Schedule, at(1));
    let launched = rounds(&effects);
    assert_eq!(launched.len(), 1, "{:?}", describe(&effects));
    let placed: Vec<(String, &str)> = launched[0]
        .iter()
        .map(|p| (p.key.name.clone(), p.offer.value.as_str()))
        .collect();
    // Both cannot fit on h1: the bound pod gets its node.
    assert_eq!(placed, [("web".to_string(), "offer-h1")]);
}

fn bound_failed(id: &TaskId) -> Step {
    Step::Input(Input::Launch(Launch::Bound(vec![(
        id.clone(),
        Err("Operation cannot be fulfilled: the object has been modified".into()),
    )])))
}

#[test]
fn a_relaunch_whose_annotations_could_not_be_written_goes_back_to_its_node() {
    let mut core = recovered(bound_web("Pending"), &["h1"]);
    assert!(core.step(gone(&TaskId::new(OLD)), at(1)).is_empty());
    let effects = core.step(Step::Schedule, at(1));
    let first = rounds(&effects)[0][0].task.clone();
    let _ = core.step(bound_failed(&first), at(1));
    let _ = core.step(offers(vec![offer("h1", 4.0)]), at(1));
    // It waits out a backoff, then goes to its node again, still bound.
    assert!(rounds(&core.step(Step::Schedule, at(1))).is_empty());
    let effects = core.step(Step::Schedule, at(60));
    let launched = rounds(&effects);
    assert_eq!(launched.len(), 1, "{:?}", describe(&effects));
    let placed = &launched[0][0];
    assert_eq!(placed.offer.value, "offer-h1");
    assert!(placed.binding.relaunch, "no second Binding");
    assert_ne!(placed.task, first);
}

#[test]
fn a_pod_whose_binding_failed_while_it_changed_is_placed_again() {
    let api = pod("api", "1");
    let mut core = core_reading(Admission::none(), Box::new(Pods(vec![(*api).clone()])));
    let _ = core.step(subscribed(), at(0));
    let _ = core.step(offers(vec![offer("h1", 4.0)]), at(0));
    let _ = core.step(Step::Input(Input::PodUpsert(api.clone())), at(0));
    let effects = core.step(Step::Schedule, at(0));
    let first = rounds(&effects)[0][0].task.clone();
    // Its change arrives while its task is registered (so it is taken as
    // settled), and the binding then fails on it.
    let _ = core.step(Step::Input(Input::PodUpsert(api.clone())), at(0));
    let _ = core.step(bound_failed(&first), at(0));
    let _ = core.step(offers(vec![offer("h1", 4.0)]), at(0));
    let effects = core.step(Step::Schedule, at(60));
    let launched = rounds(&effects);
    assert_eq!(launched.len(), 1, "{:?}", describe(&effects));
    assert!(!launched[0][0].binding.relaunch, "unbound: a Binding again");
    assert_ne!(launched[0][0].task, first);
}

/// Until the master answers for a recovered task that never reported, it may
/// or may not run on its agent: that agent's room is its pod's, as a bound
/// pod's requests count on its node in Kubernetes, so no pod that could go
/// anywhere is put there first (the HA test saw the new leader fill the node
/// in the ~300 ms before the answer, and the pod sent back to it wait for
/// ever).
#[test]
fn the_node_of_a_recovered_task_not_yet_answered_for_takes_no_other_pod() {
    let mut core = recovered(bound_web("Pending"), &["h1", "h2"]);
    for name in ["a", "b", "c", "d"] {
        let _ = core.step(Step::Input(Input::PodUpsert(pod(name, "1"))), at(0));
    }
    let effects = core.step(Step::Schedule, at(0));
    let on: Vec<&str> = rounds(&effects)
        .iter()
        .flat_map(|r| r.iter().map(|p| p.offer.value.as_str()))
        .collect();
    assert!(
        !on.is_empty(),
        "h2 takes what fits: {:?}",
        describe(&effects)
    );
    assert!(on.iter().all(|o| *o == "offer-h2"), "{on:?}");
    // The answer sends web back to h1, whose offer is still there.
    assert!(core.step(gone(&TaskId::new(OLD)), at(1)).is_empty());
    let effects = core.step(Step::Schedule, at(1));
    let launched = rounds(&effects);
    assert_eq!(launched.len(), 1, "{:?}", describe(&effects));
    let first = &launched[0][0];
    assert_eq!(
        (first.key.name.as_str(), first.offer.value.as_str()),
        ("web", "offer-h1")
    );
}

/// A recovered task the master answers for as running holds nothing more.
#[test]
fn once_the_master_answers_the_node_takes_pods_again() {
    let mut core = recovered(bound_web("Pending"), &["h1"]);
    let _ = core.step(Step::Input(Input::PodUpsert(pod("a", "1"))), at(0));
    assert!(rounds(&core.step(Step::Schedule, at(0))).is_empty());
    let mut running = status(&TaskId::new(OLD), TaskState::TaskRunning, false);
    running.source = Some(Source::SourceMaster as i32);
    running.reason = Some(Reason::ReasonReconciliation as i32);
    let _ = core.step(update(running), at(1));
    let effects = core.step(Step::Schedule, at(1));
    let launched = rounds(&effects);
    assert_eq!(launched.len(), 1, "{:?}", describe(&effects));
    assert_eq!(launched[0][0].offer.value, "offer-h1");
}

#[test]
fn a_scheduler_that_subscribes_asks_the_executors_of_its_tasks_to_register_with_it() {
    let pod = bound_web("Running");
    let mut core = core_reading(Admission::none(), Box::new(Pods(vec![pod.clone()])));
    let _ = core.step(Step::Recovered(vec![Arc::new(pod)]), at(0));
    let asks = |effects: &[Effect]| -> Vec<(String, String)> {
        effects
            .iter()
            .filter_map(|e| match e {
                Effect::Call(c, _) => c.message.as_ref(),
                _ => None,
            })
            .filter(|m| m.data == executor::apiclient::protocol::REGISTER_AGAIN_MESSAGE)
            .map(|m| {
                (
                    m.agent_id
                        .as_ref()
                        .map(|a| a.value.clone())
                        .unwrap_or_default(),
                    m.executor_id
                        .as_ref()
                        .map(|e| e.value.clone())
                        .unwrap_or_default(),
                )
            })
            .collect()
    };
    let expected = vec![("agent-h1".to_owned(), "mesopod-executor".to_owned())];
    assert_eq!(asks(&core.step(subscribed(), at(1))), expected);
    // Again on every later subscription (a failover to another master, a new leader).
    let _ = core.step(
        driver(DriverEvent::Disconnected {
            reason: "master gone".into(),
        }),
        at(2),
    );
    assert_eq!(asks(&core.step(subscribed(), at(3))), expected);
    // A scheduler without tasks asks nobody.
    assert!(asks(&super::core().step(subscribed(), at(0))).is_empty());
}

/// A pod deleted while no leader could act (they were all frozen) is
/// recovered being deleted: its KILL may never have been sent, so the new
/// leader sends it as soon as it is subscribed, not after a retry interval.
#[test]
fn a_recovered_pod_being_deleted_is_killed_once_subscribed() {
    let mut pod = bound_web("Running");
    pod.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        crate::podstatus::timestamp(at(0)),
    ));
    pod.metadata.deletion_grace_period_seconds = Some(1);
    let mut core = core_reading(Admission::none(), Box::new(Pods(vec![pod.clone()])));
    // Not subscribed yet: the KILL asked for now cannot reach Mesos...
    let _ = core.step(Step::Recovered(vec![Arc::new(pod)]), at(0));
    // ...so it goes with the subscription.
    let effects = describe(&core.step(subscribed(), at(1)));
    assert!(effects.contains(&format!("KILL {OLD}")), "{effects:?}");
}
