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
/// The pod condition that says a pod failed for something other than its own
/// command: a Job's `podFailurePolicy` matches it (`onPodConditions`), so a lost
/// agent need not count against `backoffLimit`.
pub const DISRUPTION_TARGET: &str = "DisruptionTarget";
/// Kubernetes' DisruptionTarget reason when a pod's node is gone (PodGC); a Mesos
/// agent that is lost or removed is that node.
pub const DISRUPTION_BY_POD_GC: &str = "DeletionByPodGC";
/// Kubernetes' DisruptionTarget reason when the node agent ended the pod; an
/// executor that died under its pod is mesopod's kubelet doing so.
pub const DISRUPTION_BY_KUBELET: &str = "TerminationByKubelet";
/// Kubelet's reason for a pod stopped by a graceful node shutdown (`nodeShutdownReason`),
/// which a drained agent's pods are given.
pub const REASON_NODE_SHUTDOWN: &str = "Terminated";
/// Their message, in the words kubelet's shutdown manager uses for its own.
const AGENT_DRAINED: &str =
    "Pod was terminated in response to the drain of its Mesos agent (DRAIN_AGENT).";
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
        TaskState::TaskFailed | TaskState::TaskKilled | TaskState::TaskError
            if reason == Some(Reason::ReasonAgentDraining) =>
        {
            // The operator drained the agent (DRAIN_AGENT), and its agent killed
            // what ran: kubelet's graceful node shutdown says it this way, so a Job's
            // podFailurePolicy and a budget's controller see a disruption, not a
            // failed command.
            status.phase = Some("Failed".into());
            status.reason = Some(REASON_NODE_SHUTDOWN.into());
            status.message = Some(AGENT_DRAINED.into());
            disrupted(
                &mut status,
                DISRUPTION_BY_KUBELET,
                AGENT_DRAINED.into(),
                now,
            );
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
                disrupted(
                    &mut status,
                    DISRUPTION_BY_KUBELET,
                    "the pod's executor ended and no executor adopted its containers".into(),
                    now,
                );
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
            disrupted(
                &mut status,
                DISRUPTION_BY_POD_GC,
                format!(
                    "the pod's Mesos agent is gone ({}): its containers did not fail",
                    state.wire_name()
                ),
                now,
            );
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

/// Marks the pod `DisruptionTarget` True, as kube-controller-manager does to a pod
/// it ends for reasons outside the pod.
fn disrupted(status: &mut PodStatus, reason: &str, message: String, now: SystemTime) {
    set_condition(status, DISRUPTION_TARGET, "True", reason, now);
    if let Some(c) = status
        .conditions
        .iter_mut()
        .flatten()
        .find(|c| c.type_ == DISRUPTION_TARGET)
    {
        c.message = Some(message);
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
mod tests;
