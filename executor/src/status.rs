//! A pod's status in Kubernetes terms, as carried in `TaskStatus.data`.
//!
//! The runtime keeps one record per container and renders the
//! whole [`PodStatus`] from them on every change, so what the scheduler sees
//! is always a complete snapshot, never a diff.

use std::time::SystemTime;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, HostIP, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Kubernetes' waiting reason while a crashed container waits to restart.
pub const CRASH_LOOP_BACK_OFF: &str = "CrashLoopBackOff";
/// Terminated reason of a container that could not be started at all.
pub const START_ERROR: &str = "StartError";
/// Pod reason when `activeDeadlineSeconds` ran out.
pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
/// Pod reason (and event reason) when kubelet's eviction stopped it.
pub const EVICTED: &str = "Evicted";

/// Where a container is in its life.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Life {
    /// Not started yet, or waiting to restart.
    Waiting {
        reason: String,
        message: Option<String>,
    },
    /// Running as process group `pgid`.
    Running { pgid: u32, started_at: SystemTime },
    /// Exited.
    Terminated(Exit),
}

/// How a container run ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Exit {
    pub(crate) exit_code: i32,
    pub(crate) reason: String,
    pub(crate) message: Option<String>,
    pub(crate) started_at: Option<SystemTime>,
    pub(crate) finished_at: SystemTime,
    pub(crate) pgid: Option<u32>,
}

impl Exit {
    /// Kubernetes' reasons: `Completed` for 0, `Error` otherwise.
    pub(crate) fn reason_for(code: i32) -> &'static str {
        if code == 0 { "Completed" } else { "Error" }
    }
}

/// One container's history.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct ContainerRecord {
    pub(crate) name: String,
    pub(crate) image: String,
    pub(crate) restart_count: i32,
    pub(crate) life: Life,
    pub(crate) last: Option<Exit>,
    /// The runtime's id of the latest run (`mesopod://…`); process mode
    /// names a run by its process group instead.
    pub(crate) container_id: Option<String>,
    /// `imageID` once an image was pulled.
    pub(crate) image_id: String,
    /// The startup probe passed in this run (true without one).
    pub(crate) probe_started: bool,
    /// The readiness probe's result in this run (true without one).
    pub(crate) probe_ready: bool,
}

impl ContainerRecord {
    pub(crate) fn new(name: &str, image: &str) -> Self {
        ContainerRecord {
            name: name.to_owned(),
            image: image.to_owned(),
            restart_count: 0,
            life: Life::Waiting {
                reason: "PodInitializing".into(),
                message: None,
            },
            last: None,
            container_id: None,
            image_id: String::new(),
            probe_started: true,
            probe_ready: true,
        }
    }

    /// kubelet's `ready`: running, started, and passing its readiness probe.
    pub(crate) fn is_ready(&self) -> bool {
        self.is_running() && self.probe_started && self.probe_ready
    }

    pub(crate) fn is_running(&self) -> bool {
        matches!(self.life, Life::Running { .. })
    }

    pub(crate) fn pgid(&self) -> Option<u32> {
        match self.life {
            Life::Running { pgid, .. } => Some(pgid),
            _ => None,
        }
    }

    fn render(&self) -> ContainerStatus {
        let (state, started) = match &self.life {
            Life::Waiting { reason, message } => (
                ContainerState {
                    waiting: Some(ContainerStateWaiting {
                        reason: Some(reason.clone()),
                        message: message.clone(),
                    }),
                    ..Default::default()
                },
                false,
            ),
            Life::Running { started_at, .. } => (
                ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: time(*started_at),
                    }),
                    ..Default::default()
                },
                true,
            ),
            Life::Terminated(exit) => {
                let mut state = terminated(exit);
                if let (Some(t), Some(id)) = (state.terminated.as_mut(), &self.container_id) {
                    t.container_id = Some(id.clone());
                }
                (state, false)
            }
        };
        let container_id = match &self.life {
            Life::Running { pgid, .. } => Some(*pgid),
            Life::Terminated(exit) => exit.pgid,
            Life::Waiting { .. } => None,
        }
        .map(|pgid| format!("process://{pgid}"))
        .map(|process_id| self.container_id.clone().unwrap_or(process_id));
        ContainerStatus {
            name: self.name.clone(),
            image: self.image.clone(),
            image_id: self.image_id.clone(),
            container_id,
            ready: started && self.is_ready(),
            started: Some(started && self.probe_started),
            restart_count: self.restart_count,
            state: Some(state),
            last_state: self.last.as_ref().map(terminated),
            ..Default::default()
        }
    }
}

fn terminated(exit: &Exit) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: exit.exit_code,
            reason: Some(exit.reason.clone()),
            message: exit.message.clone(),
            started_at: exit.started_at.and_then(time),
            finished_at: time(exit.finished_at),
            container_id: exit.pgid.map(|p| format!("process://{p}")),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A wall-clock time as Kubernetes serialises it; `None` before the epoch.
pub(crate) fn time(t: SystemTime) -> Option<Time> {
    let since = t.duration_since(SystemTime::UNIX_EPOCH).ok()?;
    let secs = i64::try_from(since.as_secs()).ok()?;
    // Kubernetes times have whole seconds on the wire (RFC 3339, no fraction).
    k8s_openapi::jiff::Timestamp::new(secs, 0).ok().map(Time)
}

/// Kubernetes' pod phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Accepted, init containers running or containers not started.
    Pending,
    /// At least one container runs or will be restarted.
    Running,
    /// Every container exited 0 and none restarts.
    Succeeded,
    /// Some container failed and none restarts, or the pod was stopped.
    Failed,
}

impl Phase {
    /// The phase as Kubernetes spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
        }
    }
}

/// The pod's four conditions and when each last changed, so
/// `lastTransitionTime` means a transition, not the latest update.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Conditions {
    /// (status, since) of PodScheduled, Initialized, ContainersReady, Ready.
    last: Option<[(bool, SystemTime); 4]>,
}

impl Conditions {
    const KINDS: [&'static str; 4] = ["PodScheduled", "Initialized", "ContainersReady", "Ready"];

    fn observe(&mut self, values: [bool; 4], now: SystemTime) -> Vec<PodCondition> {
        let mut next = [(false, now); 4];
        for (i, value) in values.into_iter().enumerate() {
            next[i] = match self.last {
                Some(last) if last[i].0 == value => last[i],
                _ => (value, now),
            };
        }
        self.last = Some(next);
        Self::KINDS
            .iter()
            .zip(next)
            .map(|(kind, (status, since))| PodCondition {
                type_: (*kind).to_owned(),
                status: if status { "True" } else { "False" }.to_owned(),
                last_transition_time: time(since),
                ..Default::default()
            })
            .collect()
    }
}

/// Everything a pod status is rendered from.
pub(crate) struct Snapshot<'a> {
    pub(crate) phase: Phase,
    pub(crate) reason: Option<&'a str>,
    pub(crate) message: Option<String>,
    pub(crate) initialized: bool,
    pub(crate) init: &'a [ContainerRecord],
    pub(crate) main: &'a [ContainerRecord],
    pub(crate) host_ip: &'a str,
    /// The agent's IP, or the pod's own on a CNI agent.
    pub(crate) pod_ip: &'a str,
    pub(crate) start_time: SystemTime,
    pub(crate) now: SystemTime,
}

impl Snapshot<'_> {
    pub(crate) fn render(&self, conditions: &mut Conditions) -> PodStatus {
        let ready = self.phase == Phase::Running && self.main.iter().all(ContainerRecord::is_ready);
        let mut conditions = conditions.observe([true, self.initialized, ready, ready], self.now);
        let unready: Vec<&str> = (self.main.iter())
            .filter(|c| !c.is_ready())
            .map(|c| c.name.as_str())
            .collect();
        if !ready && !unready.is_empty() && !matches!(self.phase, Phase::Succeeded | Phase::Failed)
        {
            // kubelet's words, so `kubectl describe` explains READY 0/1.
            for c in conditions.iter_mut().filter(|c| c.type_.contains("Ready")) {
                c.reason = Some("ContainersNotReady".into());
                c.message = Some(format!(
                    "containers with unready status: [{}]",
                    unready.join(" ")
                ));
            }
        }
        PodStatus {
            phase: Some(self.phase.as_str().to_owned()),
            reason: self.reason.map(str::to_owned),
            message: self.message.clone(),
            conditions: Some(conditions),
            host_ip: Some(self.host_ip.to_owned()),
            host_ips: Some(vec![HostIP {
                ip: self.host_ip.to_owned(),
            }]),
            pod_ip: Some(self.pod_ip.to_owned()),
            pod_ips: Some(vec![PodIP {
                ip: self.pod_ip.to_owned(),
            }]),
            start_time: time(self.start_time),
            init_container_statuses: (!self.init.is_empty())
                .then(|| self.init.iter().map(ContainerRecord::render).collect()),
            container_statuses: Some(self.main.iter().map(ContainerRecord::render).collect()),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_condition_keeps_its_transition_time_until_it_changes() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let t1 = t0 + Duration::from_secs(5);
        let t2 = t1 + Duration::from_secs(5);
        let mut c = Conditions::default();
        let first = c.observe([true, false, false, false], t0);
        let second = c.observe([true, true, false, false], t1);
        let third = c.observe([true, true, true, true], t2);
        let at = |v: &[PodCondition], i: usize| v[i].last_transition_time.clone();
        assert_eq!(at(&second, 0), time(t0), "PodScheduled never changed");
        assert_eq!(at(&second, 1), time(t1), "Initialized changed at t1");
        assert_eq!(at(&third, 1), time(t1));
        assert_eq!(at(&third, 3), time(t2));
        assert_eq!(third[3].type_, "Ready");
        assert_eq!(third[3].status, "True");
        assert_eq!(first[1].status, "False");
    }
}
