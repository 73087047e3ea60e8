//! A pod whose executor died goes back to its node, for the next executor
//! to adopt its containers; it is not failed.

use mesos::proto::ExecutorId;
use mesos::proto::task_status::{Reason, Source};

use super::relaunch::{OLD, bound_web, recovered};
use super::*;

/// The agent's word that the task's executor ended.
pub(super) fn executor_died(id: &TaskId, source: Source) -> Step {
    let mut s = status(id, TaskState::TaskFailed, true);
    s.source = Some(source as i32);
    s.reason = Some(Reason::ReasonExecutorTerminated as i32);
    s.message = Some("Executor terminated".into());
    update(s)
}

/// The executor's own update.
fn from_executor(id: &TaskId, state: TaskState) -> Step {
    let mut s = status(id, state, true);
    s.source = Some(Source::SourceExecutor as i32);
    update(s)
}

/// A core whose pod `web` runs on h1 as task [`OLD`].
pub(super) fn running(pod: Pod) -> Core {
    let mut core = recovered(pod, &["h1"]);
    let effects = core.step(
        from_executor(&TaskId::new(OLD), TaskState::TaskRunning),
        at(1),
    );
    for step in written(&effects, true) {
        let _ = core.step(step, at(1));
    }
    core
}

/// Relaunches web after its executor died: the new task, and the labels of
/// its `TaskInfo`.
pub(super) fn relaunched(core: &mut Core, now: SystemTime) -> (TaskId, Vec<String>) {
    let effects = core.step(Step::Schedule, now);
    let launched = rounds(&effects);
    assert_eq!(launched.len(), 1, "{:?}", describe(&effects));
    let placed = &launched[0][0];
    assert_eq!(placed.offer.value, "offer-h1", "back on its node");
    assert!(placed.binding.relaunch, "bound already: no second Binding");
    let new = placed.task.clone();
    let effects = core.step(bound(std::slice::from_ref(&new)), now);
    let labels = accepts(&effects)
        .iter()
        .flat_map(|a| a.call.accept.iter().flat_map(|c| &c.operations))
        .flat_map(|o| o.launch.iter().flat_map(|l| &l.task_infos))
        .flat_map(|t| t.labels.iter().flat_map(|l| &l.labels))
        .map(|l| format!("{}={}", l.key, l.value.as_deref().unwrap_or("")))
        .collect();
    (new, labels)
}

#[test]
fn a_pod_whose_executor_died_goes_back_to_its_node_to_be_adopted() {
    let mut core = running(bound_web("Running"));
    // Not applied: the pod runs on (no status written), and the update is
    // acknowledged.
    let effects = core.step(executor_died(&TaskId::new(OLD), Source::SourceAgent), at(2));
    assert_eq!(describe(&effects), [format!("ACK {OLD}")]);
    let (new, labels) = relaunched(&mut core, at(2));
    assert_ne!(new.value, OLD);
    assert!(
        labels.contains(&format!("{}=true", executor::ADOPT_LABEL)),
        "{labels:?}"
    );
    // The adopting executor's report is the pod's, as any.
    let _ = core.step(accepted(std::slice::from_ref(&new)), at(3));
    assert_eq!(
        describe(&core.step(from_executor(&new, TaskState::TaskRunning), at(3))),
        ["write status web TASK_RUNNING"]
    );
}

#[test]
fn an_executor_that_cannot_adopt_fails_the_pod() {
    let mut core = running(bound_web("Running"));
    let _ = core.step(executor_died(&TaskId::new(OLD), Source::SourceAgent), at(2));
    let (new, _) = relaunched(&mut core, at(2));
    let _ = core.step(accepted(std::slice::from_ref(&new)), at(3));
    // The new executor's own EXECUTOR_TERMINATED is the end.
    let effects = core.step(executor_died(&new, Source::SourceExecutor), at(3));
    assert_eq!(describe(&effects), ["write status web TASK_FAILED"]);
    let _ = core.step(offers(vec![offer("h1", 4.0)]), at(4));
    assert!(rounds(&core.step(Step::Schedule, at(4))).is_empty());
}

#[test]
fn offers_that_list_the_dead_executor_go_back_at_once() {
    let mut core = running(bound_web("Running"));
    let mut listing = offer("h1", 4.0);
    listing.id = Some(OfferId::new("offer-h1-listing"));
    listing.executor_ids = vec![ExecutorId::new("mesopod-executor")];
    let _ = core.step(offers(vec![listing]), at(1));
    let effects = core.step(executor_died(&TaskId::new(OLD), Source::SourceAgent), at(2));
    assert_eq!(
        describe(&effects),
        ["DECLINE offer-h1-listing".to_owned(), format!("ACK {OLD}")]
    );
}

#[test]
fn a_deleted_pods_kill_waits_for_the_executor_that_adopts_it() {
    let mut terminating = bound_web("Running");
    terminating.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(crate::podstatus::timestamp(at(1))),
    );
    terminating.metadata.deletion_grace_period_seconds = Some(5);
    let mut core = running(terminating.clone());
    let _ = core.step(executor_died(&TaskId::new(OLD), Source::SourceAgent), at(2));
    // Its new task's binding comes back as a pod event: still being deleted.
    let (new, _) = relaunched(&mut core, at(2));
    let effects = core.step(Step::Input(Input::PodUpsert(Arc::new(terminating))), at(2));
    assert!(describe(&effects).is_empty(), "{:?}", describe(&effects));
    let effects = core.step(accepted(std::slice::from_ref(&new)), at(3));
    assert!(
        !describe(&effects).iter().any(|l| l.starts_with("KILL")),
        "no KILL before the executor has the task: {:?}",
        describe(&effects)
    );
    let effects = core.step(from_executor(&new, TaskState::TaskRunning), at(3));
    assert_eq!(
        describe(&effects),
        [
            format!("KILL {new}"),
            "write status web TASK_RUNNING".to_owned()
        ]
    );
}
