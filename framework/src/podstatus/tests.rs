#![allow(clippy::unwrap_used)]
use super::*;
use k8s_openapi::api::core::v1::ContainerStatus;
use mesos::proto::TaskId;

fn update(state: TaskState) -> TaskStatus {
    TaskStatus {
        task_id: Some(TaskId::new("t")),
        state: state as i32,
        ..Default::default()
    }
}

fn scheduled() -> PodStatus {
    PodStatus {
        phase: Some("Pending".into()),
        conditions: Some(vec![PodCondition {
            type_: "PodScheduled".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        ..Default::default()
    }
}

#[test]
fn the_executors_report_is_taken_and_pod_scheduled_survives() {
    let reported = PodStatus {
        phase: Some("Running".into()),
        pod_ip: Some("127.0.0.1".into()),
        host_ip: Some("127.0.0.1".into()),
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        container_statuses: Some(vec![ContainerStatus {
            name: "main".into(),
            ready: true,
            restart_count: 0,
            ..Default::default()
        }]),
        ..Default::default()
    };
    let mut u = update(TaskState::TaskRunning);
    u.data = Some(serde_json::to_vec(&reported).unwrap());
    let s = pod_status_for(&u, Some(&scheduled()), SystemTime::UNIX_EPOCH);
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(s.pod_ip.as_deref(), Some("127.0.0.1"));
    let types: Vec<_> = s
        .conditions
        .unwrap()
        .iter()
        .map(|c| c.type_.clone())
        .collect();
    assert_eq!(types, ["PodScheduled", "Ready"]);
    assert_eq!(s.container_statuses.unwrap()[0].name, "main");
}

#[test]
fn a_task_running_without_a_report_is_ready_unless_an_executor_said_otherwise() {
    let cond = |s: &PodStatus, t: &str| {
        s.conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == t)
            .map(|c| (c.status.clone(), c.reason.clone()))
    };
    let s = pod_status_for(
        &update(TaskState::TaskRunning),
        Some(&scheduled()),
        SystemTime::UNIX_EPOCH,
    );
    assert_eq!(cond(&s, "Ready"), Some(("True".into(), None)));
    assert_eq!(cond(&s, "ContainersReady"), Some(("True".into(), None)));

    // An executor's probe said not ready; a reconciliation's RUNNING keeps that.
    let mut probing = running_pod();
    for c in probing.conditions.iter_mut().flatten() {
        if c.type_ != "PodScheduled" {
            c.status = "False".into();
        }
    }
    let s = pod_status_for(
        &update(TaskState::TaskRunning),
        Some(&probing),
        SystemTime::UNIX_EPOCH,
    );
    assert_eq!(cond(&s, "Ready").map(|c| c.0), Some("False".into()));
}

fn running_pod() -> PodStatus {
    let mut s = scheduled();
    s.phase = Some("Running".into());
    s.conditions
        .as_mut()
        .unwrap()
        .extend(["Ready", "ContainersReady"].map(|t| PodCondition {
            type_: t.into(),
            status: "True".into(),
            ..Default::default()
        }));
    s.container_statuses = Some(vec![ContainerStatus {
        name: "main".into(),
        ready: true,
        started: Some(true),
        state: Some(ContainerState {
            running: Some(Default::default()),
            ..Default::default()
        }),
        ..Default::default()
    }]);
    s
}

fn condition(s: &PodStatus, kind: &str) -> String {
    s.conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.clone())
        .unwrap_or_default()
}

#[test]
fn a_lost_pod_claims_no_ready_or_running_container() {
    for state in [
        TaskState::TaskUnreachable,
        TaskState::TaskLost,
        TaskState::TaskGone,
        TaskState::TaskGoneByOperator,
        TaskState::TaskUnknown,
    ] {
        let s = pod_status_for(&update(state), Some(&running_pod()), SystemTime::UNIX_EPOCH);
        assert_eq!(condition(&s, "Ready"), "False", "{state}");
        assert_eq!(condition(&s, "ContainersReady"), "False", "{state}");
        assert_eq!(condition(&s, "PodScheduled"), "True", "{state}");
        let c = &s.container_statuses.as_ref().unwrap()[0];
        assert!(!c.ready && c.started == Some(false), "{state}");
        let st = c.state.as_ref().unwrap();
        assert!(st.running.is_none(), "{state}: {st:?}");
        assert!(c.last_state.as_ref().unwrap().running.is_some(), "{state}");
        let (phase, reason) = (s.phase.as_deref(), s.reason.as_deref());
        match state {
            TaskState::TaskUnreachable => {
                assert_eq!((phase, reason), (Some("Running"), Some(REASON_NODE_LOST)));
                assert!(st.waiting.is_some());
            }
            TaskState::TaskUnknown => assert_eq!(phase, Some("Unknown")),
            _ => {
                assert_eq!((phase, reason), (Some("Failed"), Some(REASON_NODE_LOST)));
                assert_eq!(condition(&s, DISRUPTION_TARGET), "True", "{state}");
                let t = st.terminated.as_ref().unwrap();
                assert_eq!(t.exit_code, 137);
                assert_eq!(t.reason.as_deref(), Some(CONTAINER_STATUS_UNKNOWN));
            }
        }
    }
    // The agent is back: the executor's report makes it ready again.
    let lost = pod_status_for(
        &update(TaskState::TaskUnreachable),
        Some(&running_pod()),
        SystemTime::UNIX_EPOCH,
    );
    let mut u = update(TaskState::TaskRunning);
    let mut reported = running_pod();
    reported.conditions.as_mut().unwrap().remove(0);
    u.data = Some(serde_json::to_vec(&reported).unwrap());
    let back = pod_status_for(&u, Some(&lost), SystemTime::UNIX_EPOCH);
    assert_eq!(condition(&back, "Ready"), "True");
    assert!(back.container_statuses.unwrap()[0].ready);
    assert_eq!(back.reason, None);
}

#[test]
fn terminal_states_map_to_succeeded_or_failed_with_a_reason() {
    let s = pod_status_for(
        &update(TaskState::TaskFinished),
        Some(&scheduled()),
        SystemTime::UNIX_EPOCH,
    );
    assert_eq!(s.phase.as_deref(), Some("Succeeded"));
    let mut u = update(TaskState::TaskError);
    u.reason = Some(Reason::ReasonTaskInvalid as i32);
    u.message = Some("bad pod".into());
    let s = pod_status_for(&u, None, SystemTime::UNIX_EPOCH);
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("TaskInvalid"));
    assert_eq!(s.message.as_deref(), Some("bad pod"));
}

#[test]
fn a_pod_that_failed_without_a_report_is_not_ready() {
    let mut u = update(TaskState::TaskFailed);
    u.reason = Some(Reason::ReasonContainerLaunchFailed as i32);
    let s = pod_status_for(&u, Some(&running_pod()), SystemTime::UNIX_EPOCH);
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some("Error"));
    assert_eq!(condition(&s, "Ready"), "False");
    let c = &s.container_statuses.unwrap()[0];
    assert!(!c.ready);
    let t = c.state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(t.reason.as_deref(), Some(CONTAINER_STATUS_UNKNOWN));
}

#[test]
fn containers_killed_with_their_executor_say_so() {
    let mut pod = running_pod();
    let started = Time(timestamp(SystemTime::UNIX_EPOCH));
    let cs = pod.container_statuses.as_mut().unwrap();
    cs[0].container_id = Some("mesopod://t-main".into());
    cs[0]
        .state
        .as_mut()
        .unwrap()
        .running
        .as_mut()
        .unwrap()
        .started_at = Some(started.clone());
    cs.push(ContainerStatus {
        name: "later".into(),
        state: Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("ContainerCreating".into()),
                message: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    let mut u = update(TaskState::TaskFailed);
    u.reason = Some(Reason::ReasonExecutorTerminated as i32);
    u.message = Some("Executor killed".into());
    let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(60);
    let s = pod_status_for(&u, Some(&pod), now);
    assert_eq!(s.reason.as_deref(), Some("ExecutorTerminated"));
    // A Job's podFailurePolicy can tell this from a failed command.
    assert_eq!(condition(&s, DISRUPTION_TARGET), "True");
    let cs = s.container_statuses.unwrap();
    let t = cs[0].state.as_ref().unwrap().terminated.clone().unwrap();
    assert_eq!((t.exit_code, t.signal), (137, Some(9)));
    assert_eq!(t.reason.as_deref(), Some(REASON_ERROR));
    assert_eq!(
        t.message.as_deref(),
        Some(
            "The container was killed with its executor (Executor killed); no executor adopted it"
        )
    );
    assert_eq!(t.started_at, Some(started));
    assert_eq!(t.finished_at, Some(Time(timestamp(now))));
    assert_eq!(t.container_id.as_deref(), Some("mesopod://t-main"));
    assert!(
        cs[0].last_state.is_none(),
        "kubelet keeps lastState for earlier runs"
    );
    assert!(!cs[0].ready);
    // A container that never started was not killed: it is unknown.
    let t = cs[1].state.as_ref().unwrap().terminated.clone().unwrap();
    assert_eq!(t.reason.as_deref(), Some(CONTAINER_STATUS_UNKNOWN));
    // A report from the executor itself is taken as it is.
    let mut reported = running_pod();
    reported.phase = Some("Failed".into());
    u.data = Some(serde_json::to_vec(&reported).unwrap());
    let s = pod_status_for(&u, Some(&pod), now);
    assert!(
        s.container_statuses.unwrap()[0]
            .state
            .as_ref()
            .unwrap()
            .running
            .is_some()
    );
}

#[test]
fn garbage_in_data_is_ignored_not_fatal() {
    let mut u = update(TaskState::TaskRunning);
    u.data = Some(b"\xff not json".to_vec());
    let s = pod_status_for(&u, Some(&scheduled()), SystemTime::UNIX_EPOCH);
    assert_eq!(s.phase.as_deref(), Some("Running"));
}

#[test]
fn a_pod_killed_by_an_agent_drain_is_a_disruption_not_a_failure() {
    let mut reported = running_pod();
    reported.phase = Some("Failed".into());
    reported.reason = Some("Error".into());
    let mut u = update(TaskState::TaskKilled);
    u.reason = Some(Reason::ReasonAgentDraining as i32);
    u.data = Some(serde_json::to_vec(&reported).unwrap());
    let s = pod_status_for(&u, Some(&running_pod()), SystemTime::UNIX_EPOCH);
    assert_eq!(s.phase.as_deref(), Some("Failed"));
    assert_eq!(s.reason.as_deref(), Some(REASON_NODE_SHUTDOWN));
    assert_eq!(
        s.message.as_deref(),
        Some("Pod was terminated in response to the drain of its Mesos agent (DRAIN_AGENT).")
    );
    let target = s
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == DISRUPTION_TARGET)
        .unwrap();
    assert_eq!(
        (target.status.as_str(), target.reason.as_deref()),
        ("True", Some(DISRUPTION_BY_KUBELET))
    );
    // Killed for any other reason, it is an ordinary failure.
    u.reason = None;
    let s = pod_status_for(&u, Some(&running_pod()), SystemTime::UNIX_EPOCH);
    assert_eq!(s.reason.as_deref(), Some("Error"));
    assert!(
        !s.conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == DISRUPTION_TARGET)
    );
}
