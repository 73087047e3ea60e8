//! From a Mesos task status to the pod status users see.
//!
//! # Contract
//!
//! `pod_status_for(update, current, now)` is a pure function. The executor
//! reports the pod's own status as JSON in `TaskStatus.data`; when it is
//! there and parses, its phase, conditions, container statuses and IPs are
//! taken as they are. States the executor cannot report (the agent or the
//! master decided: lost, unreachable, gone, dropped, invalid) are mapped
//! here, with the Kubernetes reasons users search for (`NodeLost`).
//! mesopod's own `PodScheduled` condition always survives the merge.

use std::time::SystemTime;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStateWaiting, PodCondition, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mesos::proto::json::WireEnum;
use mesos::proto::{TaskState, TaskStatus, task_status::Reason};

/// Kubernetes' reason for pods on a node that stopped answering.
pub const REASON_NODE_LOST: &str = "NodeLost";
/// Kubernetes' Ready reason for a pod whose containers all ended.
pub const REASON_POD_COMPLETED: &str = "PodCompleted";
/// containerd's reason for a container that exited non-zero (a killed one too).
pub const REASON_ERROR: &str = "Error";
/// Kubelet's reason for a container it cannot locate.
pub const CONTAINER_STATUS_UNKNOWN: &str = "ContainerStatusUnknown";

/// The pod status after `update`, starting from `current`.
pub fn pod_status_for(
    update: &TaskStatus,
    current: Option<&PodStatus>,
    now: SystemTime,
) -> PodStatus {
    let state = TaskState::try_from(update.state).unwrap_or(TaskState::TaskUnknown);
    let reason = update.reason.and_then(|r| Reason::try_from(r).ok());
    let message = update.message.clone().filter(|m| !m.is_empty());
    let mut status = current.cloned().unwrap_or_default();

    let reported = update
        .data
        .as_deref()
        .and_then(|d| serde_json::from_slice::<PodStatus>(d).ok());
    let from_executor = reported.is_some();
    if let Some(reported) = reported {
        merge_reported(&mut status, reported);
    }
    // A finished pod runs nothing: the executor's report says how each
    // container ended; without one (an executor that died, an agent that
    // decided) none may still claim to run.
    let finished = |status: &mut PodStatus| {
        if from_executor {
            set_condition(status, "Ready", "False", REASON_POD_COMPLETED, now);
            set_condition(
                status,
                "ContainersReady",
                "False",
                REASON_POD_COMPLETED,
                now,
            );
        } else {
            not_ready(status, REASON_POD_COMPLETED, true, now);
        }
    };

    match state {
        TaskState::TaskStaging | TaskState::TaskStarting => {
            if status.phase.is_none() {
                status.phase = Some("Pending".into());
            }
        }
        TaskState::TaskRunning => {
            status.phase = Some("Running".into());
            status.reason = None;
            status.message = None;
            // An executor that reports no pod status (Mesos' own, a simulated
            // agent's) vouches only for a running task: the pod is Ready as one
            // without readiness probes is once its containers run. A pod whose
            // executor ever reported has its Ready condition from that executor,
            // which a later data-less update (a reconciliation) must not undo.
            let ever_reported = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready");
            if !from_executor && !ever_reported {
                for kind in ["Ready", "ContainersReady"] {
                    set_condition(&mut status, kind, "True", "", now);
                }
                // kubelet gives a True readiness no reason.
                for c in status.conditions.iter_mut().flatten() {
                    if c.status == "True" && c.reason.as_deref() == Some("") {
                        c.reason = None;
                    }
                }
            }
        }
        TaskState::TaskKilling => {}
        TaskState::TaskFinished => {
            status.phase = Some("Succeeded".into());
            finished(&mut status);
        }
        TaskState::TaskFailed | TaskState::TaskKilled | TaskState::TaskError => {
            status.phase = Some("Failed".into());
            if status.reason.is_none() {
                status.reason = Some(reason_word(state, reason));
            }
            if status.message.is_none() {
                status.message = message
                    .clone()
                    .or_else(|| Some(format!("task {}", state.wire_name())));
            }
            // Mesos destroys an executor's container when the executor
            // ends, and every container of the pod nests in it: what ran
            // was killed, not lost.
            if !from_executor && reason == Some(Reason::ReasonExecutorTerminated) {
                killed_with_executor(&mut status, message.as_deref(), now);
            }
            finished(&mut status);
        }
        TaskState::TaskDropped => {
            status.phase = Some("Failed".into());
            status.reason = Some("TaskDropped".into());
            status.message =
                Some(message.unwrap_or_else(|| "Mesos dropped the task before it started".into()));
            finished(&mut status);
        }
        TaskState::TaskUnreachable => {
            // Like a pod on a NotReady node: it keeps its phase, but nothing
            // vouches for its containers until the agent is back.
            status.reason = Some(REASON_NODE_LOST.into());
            status.message = Some(message.unwrap_or_else(|| {
                "the agent running this pod is unreachable (TASK_UNREACHABLE)".into()
            }));
            not_ready(&mut status, REASON_NODE_LOST, false, now);
        }
        TaskState::TaskLost | TaskState::TaskGone | TaskState::TaskGoneByOperator => {
            status.phase = Some("Failed".into());
            status.reason = Some(REASON_NODE_LOST.into());
            status.message = Some(message.unwrap_or_else(|| {
                format!("the agent running this pod is gone ({})", state.wire_name())
            }));
            not_ready(&mut status, REASON_NODE_LOST, true, now);
        }
        TaskState::TaskUnknown => {
            status.phase = Some("Unknown".into());
            status.reason = Some("TaskUnknown".into());
            status.message =
                Some(message.unwrap_or_else(|| "Mesos does not know this pod's task".into()));
            not_ready(&mut status, "TaskUnknown", false, now);
        }
    }
    status
}

/// Takes the executor's view of the pod, keeping our PodScheduled condition.
fn merge_reported(status: &mut PodStatus, reported: PodStatus) {
    let scheduled = status
        .conditions
        .as_ref()
        .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled").cloned());
    let mut conditions: Vec<PodCondition> = reported
        .conditions
        .unwrap_or_default()
        .into_iter()
        .filter(|c| c.type_ != "PodScheduled")
        .collect();
    if let Some(s) = scheduled {
        conditions.insert(0, s);
    }
    status.conditions = Some(conditions);
    if reported.phase.is_some() {
        status.phase = reported.phase;
    }
    status.reason = reported.reason.or(status.reason.take());
    status.message = reported.message.or(status.message.take());
    for (dst, src) in [
        (&mut status.container_statuses, reported.container_statuses),
        (
            &mut status.init_container_statuses,
            reported.init_container_statuses,
        ),
    ] {
        if src.is_some() {
            *dst = src;
        }
    }
    if reported.pod_ip.is_some() {
        status.pod_ip = reported.pod_ip;
        status.pod_ips = reported.pod_ips;
    }
    if reported.host_ip.is_some() {
        status.host_ip = reported.host_ip;
        status.host_ips = reported.host_ips;
    }
    if reported.start_time.is_some() {
        status.start_time = reported.start_time;
    }
}

/// What Kubernetes shows for a pod whose node is lost: Ready and
/// ContainersReady False, and no container ready or running. A container
/// that was running moves to `lastState`; it is `terminated` with kubelet's
/// `ContainerStatusUnknown` (exit code 137) when the task is gone for good,
/// else `waiting` with that reason until the agent reports again.
fn not_ready(status: &mut PodStatus, reason: &str, gone: bool, now: SystemTime) {
    set_condition(status, "Ready", "False", reason, now);
    set_condition(status, "ContainersReady", "False", reason, now);
    for list in [
        &mut status.container_statuses,
        &mut status.init_container_statuses,
    ] {
        for c in list.iter_mut().flatten() {
            c.ready = false;
            c.started = Some(false);
            let was_running = c.state.as_ref().is_some_and(|s| s.running.is_some());
            if was_running {
                c.last_state = c.state.take();
            }
            let terminated = c.state.as_ref().is_some_and(|s| s.terminated.is_some());
            if terminated {
                continue;
            }
            c.state = Some(if gone {
                ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: 137,
                        reason: Some(CONTAINER_STATUS_UNKNOWN.into()),
                        message: Some(
                            "The container could not be located when the pod was terminated".into(),
                        ),
                        finished_at: Some(Time(timestamp(now))),
                        ..Default::default()
                    }),
                    ..Default::default()
                }
            } else {
                ContainerState {
                    waiting: Some(ContainerStateWaiting {
                        reason: Some(CONTAINER_STATUS_UNKNOWN.into()),
                        message: Some(
                            "The container's state is unknown while its agent is unreachable"
                                .into(),
                        ),
                    }),
                    ..Default::default()
                }
            });
        }
    }
}

/// kubelet's view of containers whose processes were killed under them
/// (containerd's `Error` with SIGKILL's exit code 137): every container that
/// was running is terminated, naming its executor's end.
fn killed_with_executor(status: &mut PodStatus, why: Option<&str>, now: SystemTime) {
    let why = why.unwrap_or("Executor terminated");
    for list in [
        &mut status.container_statuses,
        &mut status.init_container_statuses,
    ] {
        for c in list.iter_mut().flatten() {
            let Some(running) = c.state.as_ref().and_then(|s| s.running.as_ref()) else {
                continue;
            };
            c.state = Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: 137,
                    signal: Some(9),
                    reason: Some(REASON_ERROR.into()),
                    message: Some(format!(
                        "The container was killed with its executor ({why}); no executor adopted it"
                    )),
                    started_at: running.started_at.clone(),
                    finished_at: Some(Time(timestamp(now))),
                    container_id: c.container_id.clone(),
                }),
                ..Default::default()
            });
            c.ready = false;
            c.started = Some(false);
        }
    }
}

fn set_condition(status: &mut PodStatus, kind: &str, value: &str, reason: &str, now: SystemTime) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let cond = PodCondition {
        type_: kind.into(),
        status: value.into(),
        reason: Some(reason.into()),
        last_transition_time: Some(Time(timestamp(now))),
        ..Default::default()
    };
    match conditions.iter_mut().find(|c| c.type_ == kind) {
        Some(existing) if existing.status == value => existing.reason = Some(reason.into()),
        Some(existing) => *existing = cond,
        None => conditions.push(cond),
    }
}

/// A Kubernetes-style reason word for a failed task.
fn reason_word(state: TaskState, reason: Option<Reason>) -> String {
    match (state, reason) {
        (_, Some(Reason::ReasonContainerLimitationMemory)) => "OOMKilled".into(),
        (_, Some(Reason::ReasonTaskInvalid)) => "TaskInvalid".into(),
        (_, Some(Reason::ReasonExecutorTerminated)) => "ExecutorTerminated".into(),
        (TaskState::TaskKilled, _) => "Killed".into(),
        (TaskState::TaskError, _) => "TaskError".into(),
        _ => "Error".into(),
    }
}

/// A k8s-openapi timestamp for a system time (seconds precision).
pub fn timestamp(t: SystemTime) -> k8s_openapi::jiff::Timestamp {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    k8s_openapi::jiff::Timestamp::from_second(secs)
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
}

/// The pod's status with its `Ready` condition False, as the node
/// lifecycle controller's `MarkPodsNotReady` leaves a pod whose node went
/// quiet: only that condition changes (its transition time too, if it was
/// not False already).
pub fn marked_not_ready(status: Option<&PodStatus>, now: SystemTime) -> PodStatus {
    let mut status = status.cloned().unwrap_or_default();
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == "Ready") {
        Some(c) if c.status == "False" => {}
        Some(c) => {
            c.status = "False".into();
            c.last_transition_time = Some(Time(timestamp(now)));
        }
        None => conditions.push(PodCondition {
            type_: "Ready".into(),
            status: "False".into(),
            last_transition_time: Some(Time(timestamp(now))),
            ..Default::default()
        }),
    }
    status
}

#[cfg(test)]
mod tests {
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
}
