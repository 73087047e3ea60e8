//! Tasks, executors and their statuses (`TaskInfo`, `ExecutorInfo`, `TaskStatus`…).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ids::{
    AgentId, ContainerId, DurationInfo, ExecutorId, FrameworkId, Labels, TaskId, TimeInfo,
};
use super::json;
use super::values::{Resource, value};

json::wire_enum!(
    /// `TaskState`. Terminal: FINISHED, FAILED, KILLED, ERROR, DROPPED, GONE,
    /// GONE_BY_OPERATOR. LOST is terminal for the framework, but the task may
    /// turn up again when a partition heals.
    TaskState {
        /// The executor has started the task.
        TaskStarting = 0 => "TASK_STARTING",
        /// The task runs.
        TaskRunning = 1 => "TASK_RUNNING",
        /// The task ended successfully.
        TaskFinished = 2 => "TASK_FINISHED",
        /// The task ended with a failure.
        TaskFailed = 3 => "TASK_FAILED",
        /// The task was killed.
        TaskKilled = 4 => "TASK_KILLED",
        /// Lost (frameworks without PARTITION_AWARE).
        TaskLost = 5 => "TASK_LOST",
        /// The agent has the task but the executor has not started it.
        TaskStaging = 6 => "TASK_STAGING",
        /// The task description is invalid.
        TaskError = 7 => "TASK_ERROR",
        /// The task is being killed.
        TaskKilling = 8 => "TASK_KILLING",
        /// The task never started (transient failure).
        TaskDropped = 9 => "TASK_DROPPED",
        /// The agent is partitioned away; the task may still run.
        TaskUnreachable = 10 => "TASK_UNREACHABLE",
        /// The task is gone for good.
        TaskGone = 11 => "TASK_GONE",
        /// The operator says the agent is gone.
        TaskGoneByOperator = 12 => "TASK_GONE_BY_OPERATOR",
        /// The master knows nothing of the task.
        TaskUnknown = 13 => "TASK_UNKNOWN",
    }
);

impl TaskState {
    /// Whether Mesos counts the state as terminal. LOST is not on the list:
    /// a lost task may turn up again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::TaskFinished
                | TaskState::TaskFailed
                | TaskState::TaskKilled
                | TaskState::TaskError
                | TaskState::TaskDropped
                | TaskState::TaskGone
                | TaskState::TaskGoneByOperator
        )
    }
}

/// `TaskStatus`.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct TaskStatus {
    /// The task.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<TaskId>,
    /// Its new state.
    #[prost(enumeration = "TaskState", required, tag = "2")]
    #[serde(
        serialize_with = "json::enum_ser::<TaskState, _>",
        deserialize_with = "json::enum_de::<TaskState, _>"
    )]
    pub state: i32,
    /// Why, in words.
    #[prost(string, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Who produced the update.
    #[prost(enumeration = "task_status::Source", optional, tag = "9")]
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "json::enum_opt_ser::<task_status::Source, _>",
        deserialize_with = "json::enum_opt_de::<task_status::Source, _>"
    )]
    pub source: Option<i32>,
    /// Why, as a code.
    #[prost(enumeration = "task_status::Reason", optional, tag = "10")]
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "json::enum_opt_ser::<task_status::Reason, _>",
        deserialize_with = "json::enum_opt_de::<task_status::Reason, _>"
    )]
    pub reason: Option<i32>,
    /// Executor-defined payload (mesopod: the pod status as JSON).
    #[prost(bytes = "vec", optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none", with = "json::b64_opt")]
    pub data: Option<Vec<u8>>,
    /// The agent the task is on.
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<AgentId>,
    /// The executor running the task.
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executor_id: Option<ExecutorId>,
    /// Seconds since the epoch.
    #[prost(double, optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<f64>,
    /// Present on updates delivered reliably; the scheduler acknowledges those.
    #[prost(bytes = "vec", optional, tag = "11")]
    #[serde(skip_serializing_if = "Option::is_none", with = "json::b64_opt")]
    pub uuid: Option<Vec<u8>>,
    /// Health check verdict.
    #[prost(bool, optional, tag = "8")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthy: Option<bool>,
    /// Free-form labels.
    #[prost(message, optional, tag = "12")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
    /// Container details such as its IP addresses.
    #[prost(message, optional, tag = "13")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_status: Option<ContainerStatus>,
    /// When the agent became unreachable.
    #[prost(message, optional, tag = "14")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreachable_time: Option<TimeInfo>,
}

/// Nested types of `TaskStatus`.
pub mod task_status {
    use super::*;

    json::wire_enum!(
        /// `TaskStatus.Source`.
        Source {
            /// The master.
            SourceMaster = 0 => "SOURCE_MASTER",
            /// The agent.
            SourceAgent = 1 => "SOURCE_AGENT",
            /// The executor.
            SourceExecutor = 2 => "SOURCE_EXECUTOR",
        }
    );

    json::wire_enum!(
        /// `TaskStatus.Reason`.
        Reason {
            /// Unused default.
            ReasonCommandExecutorFailed = 0 => "REASON_COMMAND_EXECUTOR_FAILED",
            /// The executor exited.
            ReasonExecutorTerminated = 1 => "REASON_EXECUTOR_TERMINATED",
            /// No longer used.
            ReasonExecutorUnregistered = 2 => "REASON_EXECUTOR_UNREGISTERED",
            /// The framework was removed.
            ReasonFrameworkRemoved = 3 => "REASON_FRAMEWORK_REMOVED",
            /// Garbage collection failed.
            ReasonGcError = 4 => "REASON_GC_ERROR",
            /// The framework id is invalid.
            ReasonInvalidFrameworkid = 5 => "REASON_INVALID_FRAMEWORKID",
            /// The offers used were invalid or rescinded.
            ReasonInvalidOffers = 6 => "REASON_INVALID_OFFERS",
            /// The master disconnected.
            ReasonMasterDisconnected = 7 => "REASON_MASTER_DISCONNECTED",
            /// Out of memory.
            ReasonContainerLimitationMemory = 8 => "REASON_CONTAINER_LIMITATION_MEMORY",
            /// An answer to reconciliation.
            ReasonReconciliation = 9 => "REASON_RECONCILIATION",
            /// The agent disconnected.
            ReasonAgentDisconnected = 10 => "REASON_AGENT_DISCONNECTED",
            /// The agent was removed.
            ReasonAgentRemoved = 11 => "REASON_AGENT_REMOVED",
            /// The agent restarted.
            ReasonAgentRestarted = 12 => "REASON_AGENT_RESTARTED",
            /// The agent is unknown.
            ReasonAgentUnknown = 13 => "REASON_AGENT_UNKNOWN",
            /// The task is invalid.
            ReasonTaskInvalid = 14 => "REASON_TASK_INVALID",
            /// The task is not authorized.
            ReasonTaskUnauthorized = 15 => "REASON_TASK_UNAUTHORIZED",
            /// The task is unknown.
            ReasonTaskUnknown = 16 => "REASON_TASK_UNKNOWN",
            /// Preempted.
            ReasonContainerPreempted = 17 => "REASON_CONTAINER_PREEMPTED",
            /// Resources unknown.
            ReasonResourcesUnknown = 18 => "REASON_RESOURCES_UNKNOWN",
            /// A container limit was hit.
            ReasonContainerLimitation = 19 => "REASON_CONTAINER_LIMITATION",
            /// The disk limit was hit.
            ReasonContainerLimitationDisk = 20 => "REASON_CONTAINER_LIMITATION_DISK",
            /// The container failed to launch.
            ReasonContainerLaunchFailed = 21 => "REASON_CONTAINER_LAUNCH_FAILED",
            /// The container update failed.
            ReasonContainerUpdateFailed = 22 => "REASON_CONTAINER_UPDATE_FAILED",
            /// The executor did not register in time.
            ReasonExecutorRegistrationTimeout = 23 => "REASON_EXECUTOR_REGISTRATION_TIMEOUT",
            /// The executor did not re-register in time.
            ReasonExecutorReregistrationTimeout = 24 => "REASON_EXECUTOR_REREGISTRATION_TIMEOUT",
            /// The task group is invalid.
            ReasonTaskGroupInvalid = 25 => "REASON_TASK_GROUP_INVALID",
            /// The task group is not authorized.
            ReasonTaskGroupUnauthorized = 26 => "REASON_TASK_GROUP_UNAUTHORIZED",
            /// The IO switchboard exited.
            ReasonIoSwitchboardExited = 27 => "REASON_IO_SWITCHBOARD_EXITED",
            /// A check status changed.
            ReasonTaskCheckStatusUpdated = 28 => "REASON_TASK_CHECK_STATUS_UPDATED",
            /// A health check status changed.
            ReasonTaskHealthCheckStatusUpdated = 29 => "REASON_TASK_HEALTH_CHECK_STATUS_UPDATED",
            /// Killed before it launched.
            ReasonTaskKilledDuringLaunch = 30 => "REASON_TASK_KILLED_DURING_LAUNCH",
            /// The operator removed the agent.
            ReasonAgentRemovedByOperator = 31 => "REASON_AGENT_REMOVED_BY_OPERATOR",
            /// The agent re-registered.
            ReasonAgentReregistered = 32 => "REASON_AGENT_REREGISTERED",
            /// `max_completion_time` was reached.
            ReasonMaxCompletionTimeReached = 33 => "REASON_MAX_COMPLETION_TIME_REACHED",
        }
    );
}

/// `TaskInfo`. Exactly one of `executor` and `command` is set.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct TaskInfo {
    /// Human-readable name.
    #[prost(string, required, tag = "1")]
    pub name: String,
    /// Unique within the framework.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_id: Option<TaskId>,
    /// Where to run it.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<AgentId>,
    /// What it uses.
    #[prost(message, repeated, tag = "4")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<Resource>,
    /// A custom executor to run it.
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executor: Option<ExecutorInfo>,
    /// Payload for the executor (mesopod: the pod as JSON).
    #[prost(bytes = "vec", optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none", with = "json::b64_opt")]
    pub data: Option<Vec<u8>>,
    /// A command for the built-in command executor.
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandInfo>,
    /// Container settings.
    #[prost(message, optional, tag = "9")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerInfo>,
    /// Free-form labels.
    #[prost(message, optional, tag = "10")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
    /// How to kill it.
    #[prost(message, optional, tag = "12")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kill_policy: Option<KillPolicy>,
    /// The longest the task may run.
    #[prost(message, optional, tag = "14")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_completion_time: Option<DurationInfo>,
    /// Resource limits above the requests.
    #[prost(btree_map = "string, message", tag = "15")]
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, value::Scalar>,
}

/// `TaskGroupInfo`: 1 tasks rep.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct TaskGroupInfo {
    /// The tasks, delivered to one executor atomically.
    #[prost(message, repeated, tag = "1")]
    pub tasks: Vec<TaskInfo>,
}

/// `CommandInfo`.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct CommandInfo {
    /// Files to fetch into the sandbox first.
    #[prost(message, repeated, tag = "1")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub uris: Vec<command_info::Uri>,
    /// Environment variables.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
    /// Run `value` with `/bin/sh -c` (default true).
    #[prost(bool, optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shell: Option<bool>,
    /// The shell command, or the program when `shell` is false.
    #[prost(string, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// argv when `shell` is false.
    #[prost(string, repeated, tag = "7")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<String>,
    /// The user to run as.
    #[prost(string, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// Nested types of `CommandInfo`.
pub mod command_info {
    use super::*;

    /// `CommandInfo.URI`.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Uri {
        /// Where to fetch from.
        #[prost(string, required, tag = "1")]
        pub value: String,
        /// Make it executable.
        #[prost(bool, optional, tag = "2")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub executable: Option<bool>,
        /// Extract archives (default true).
        #[prost(bool, optional, tag = "3")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub extract: Option<bool>,
        /// Use the fetcher cache.
        #[prost(bool, optional, tag = "4")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub cache: Option<bool>,
        /// File name in the sandbox.
        #[prost(string, optional, tag = "5")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub output_file: Option<String>,
    }
}

/// `Environment`: 1 variables rep.
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Environment {
    /// The variables.
    #[prost(message, repeated, tag = "1")]
    pub variables: Vec<environment::Variable>,
}

/// Nested types of `Environment`.
pub mod environment {
    use super::*;

    /// `Environment.Variable`: 1 name req; 3 type; 2 value.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Variable {
        /// The name.
        #[prost(string, required, tag = "1")]
        pub name: String,
        /// VALUE (the default) or SECRET.
        #[prost(enumeration = "variable::Type", optional, tag = "3")]
        #[serde(
            rename = "type",
            skip_serializing_if = "Option::is_none",
            serialize_with = "json::enum_opt_ser::<variable::Type, _>",
            deserialize_with = "json::enum_opt_de::<variable::Type, _>"
        )]
        pub r#type: Option<i32>,
        /// The value.
        #[prost(string, optional, tag = "2")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub value: Option<String>,
    }

    /// Nested types of `Variable`.
    pub mod variable {
        use super::*;

        json::wire_enum!(
            /// `Environment.Variable.Type`.
            Type {
                /// Not set.
                Unknown = 0 => "UNKNOWN",
                /// A plain value.
                Value = 1 => "VALUE",
                /// A secret.
                Secret = 2 => "SECRET",
            }
        );
    }
}

/// `ExecutorInfo`.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct ExecutorInfo {
    /// DEFAULT or CUSTOM.
    #[prost(enumeration = "executor_info::Type", optional, tag = "15")]
    #[serde(
        rename = "type",
        skip_serializing_if = "Option::is_none",
        serialize_with = "json::enum_opt_ser::<executor_info::Type, _>",
        deserialize_with = "json::enum_opt_de::<executor_info::Type, _>"
    )]
    pub r#type: Option<i32>,
    /// Unique per framework and agent.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executor_id: Option<ExecutorId>,
    /// The owning framework.
    #[prost(message, optional, tag = "8")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub framework_id: Option<FrameworkId>,
    /// The command that starts the executor (CUSTOM).
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<CommandInfo>,
    /// Container settings.
    #[prost(message, optional, tag = "11")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerInfo>,
    /// The executor's own resources.
    #[prost(message, repeated, tag = "5")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<Resource>,
    /// Human-readable name.
    #[prost(string, optional, tag = "9")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Opaque payload.
    #[prost(bytes = "vec", optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none", with = "json::b64_opt")]
    pub data: Option<Vec<u8>>,
    /// Time the executor gets to exit on SHUTDOWN.
    #[prost(message, optional, tag = "13")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shutdown_grace_period: Option<DurationInfo>,
    /// Free-form labels.
    #[prost(message, optional, tag = "14")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
}

/// Nested types of `ExecutorInfo`.
pub mod executor_info {
    use super::*;

    json::wire_enum!(
        /// `ExecutorInfo.Type`.
        Type {
            /// Not set.
            Unknown = 0 => "UNKNOWN",
            /// Mesos' default executor (task groups).
            Default = 1 => "DEFAULT",
            /// A framework's own executor.
            Custom = 2 => "CUSTOM",
        }
    );
}

/// `ContainerInfo`: 1 type req; 4 hostname; 3 docker; 5 mesos; 7 network_infos.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct ContainerInfo {
    /// DOCKER or MESOS.
    #[prost(enumeration = "container_info::Type", required, tag = "1")]
    #[serde(
        rename = "type",
        serialize_with = "json::enum_ser::<container_info::Type, _>",
        deserialize_with = "json::enum_de::<container_info::Type, _>"
    )]
    pub r#type: i32,
    /// The container's hostname.
    #[prost(string, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// Docker settings.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub docker: Option<container_info::DockerInfo>,
    /// Networks to join.
    #[prost(message, repeated, tag = "7")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub network_infos: Vec<NetworkInfo>,
}

/// Nested types of `ContainerInfo`.
pub mod container_info {
    use super::*;

    json::wire_enum!(
        /// `ContainerInfo.Type` (no zero value on the wire).
        Type {
            /// Docker containerizer.
            Docker = 1 => "DOCKER",
            /// Mesos containerizer.
            Mesos = 2 => "MESOS",
        }
    );

    /// `ContainerInfo.DockerInfo`: 1 image req.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct DockerInfo {
        /// The image name.
        #[prost(string, required, tag = "1")]
        pub image: String,
    }
}

/// `NetworkInfo`: 5 ip_addresses rep; 6 name.
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct NetworkInfo {
    /// Addresses requested or assigned.
    #[prost(message, repeated, tag = "5")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<network_info::IpAddress>,
    /// The network's name.
    #[prost(string, optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Nested types of `NetworkInfo`.
pub mod network_info {
    use super::*;

    json::wire_enum!(
        /// `NetworkInfo.Protocol`.
        Protocol {
            /// IPv4.
            IPv4 = 1 => "IPv4",
            /// IPv6.
            IPv6 = 2 => "IPv6",
        }
    );

    /// `NetworkInfo.IPAddress`: 1 protocol; 2 ip_address.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct IpAddress {
        /// IPv4 or IPv6.
        #[prost(enumeration = "Protocol", optional, tag = "1")]
        #[serde(
            skip_serializing_if = "Option::is_none",
            serialize_with = "json::enum_opt_ser::<Protocol, _>",
            deserialize_with = "json::enum_opt_de::<Protocol, _>"
        )]
        pub protocol: Option<i32>,
        /// The address.
        #[prost(string, optional, tag = "2")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub ip_address: Option<String>,
    }
}

/// `ContainerStatus`: 4 container_id; 1 network_infos rep; 3 executor_pid.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct ContainerStatus {
    /// The container.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_id: Option<ContainerId>,
    /// The networks and addresses the container has.
    #[prost(message, repeated, tag = "1")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub network_infos: Vec<NetworkInfo>,
    /// The executor's process id.
    #[prost(uint32, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executor_pid: Option<u32>,
}

/// `KillPolicy`: 1 grace_period.
#[derive(Clone, Copy, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct KillPolicy {
    /// Time between SIGTERM and SIGKILL.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace_period: Option<DurationInfo>,
}

/// `Filters`: 1 refuse_seconds (default 5 s, capped at a year).
#[derive(Clone, Copy, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Filters {
    /// How long the declined resources stay away.
    #[prost(double, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refuse_seconds: Option<f64>,
}

impl Filters {
    /// Mesos' default refusal when no filter is given.
    pub const DEFAULT_REFUSE_SECONDS: f64 = 5.0;
    /// Mesos caps refusals at 365 days.
    pub const MAX_REFUSE_SECONDS: f64 = 31_536_000.0;

    /// The effective refusal, with Mesos' default and cap applied.
    pub fn effective_refuse_seconds(&self) -> f64 {
        match self.refuse_seconds {
            Some(s) if s.is_finite() && s >= 0.0 => s.min(Self::MAX_REFUSE_SECONDS),
            _ => Self::DEFAULT_REFUSE_SECONDS,
        }
    }
}
