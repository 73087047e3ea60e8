//! The v1 executor API: `Call` (executor → agent) and `Event` (agent → executor).

use serde::{Deserialize, Serialize};

use super::cluster::{AgentInfo, FrameworkInfo};
use super::ids::{ContainerId, ExecutorId, FrameworkId, TaskId};
use super::json;
use super::tasks::{ExecutorInfo, KillPolicy, TaskGroupInfo, TaskInfo, TaskStatus};

/// An executor call.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Call {
    /// The executor.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executor_id: Option<ExecutorId>,
    /// Its framework.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub framework_id: Option<FrameworkId>,
    /// Which call.
    #[prost(enumeration = "call::Type", optional, tag = "3")]
    #[serde(
        rename = "type",
        skip_serializing_if = "Option::is_none",
        serialize_with = "json::enum_opt_ser::<call::Type, _>",
        deserialize_with = "json::enum_opt_de::<call::Type, _>"
    )]
    pub r#type: Option<i32>,
    /// SUBSCRIBE.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<call::Subscribe>,
    /// UPDATE.
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update: Option<call::Update>,
    /// MESSAGE.
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<call::Message>,
}

impl Call {
    /// The call's type, if it is one this crate knows.
    pub fn kind(&self) -> Option<call::Type> {
        self.r#type.and_then(|t| call::Type::try_from(t).ok())
    }
}

/// Nested types of the executor `Call`.
pub mod call {
    use super::*;

    json::wire_enum!(
        /// `Call.Type`.
        Type {
            /// Not set.
            Unknown = 0 => "UNKNOWN",
            /// Open the event stream.
            Subscribe = 1 => "SUBSCRIBE",
            /// Send a status update.
            Update = 2 => "UPDATE",
            /// Send data to the scheduler.
            Message = 3 => "MESSAGE",
            /// Keep-alive.
            Heartbeat = 4 => "HEARTBEAT",
        }
    );

    /// `Call.Subscribe`: 1 unacknowledged_tasks rep; 2 unacknowledged_updates rep.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Subscribe {
        /// Tasks launched but not yet acknowledged by the agent.
        #[prost(message, repeated, tag = "1")]
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub unacknowledged_tasks: Vec<TaskInfo>,
        /// Updates sent but not yet acknowledged.
        #[prost(message, repeated, tag = "2")]
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub unacknowledged_updates: Vec<Update>,
    }

    /// `Call.Update`: 1 status req.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Update {
        /// The status.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub status: Option<TaskStatus>,
    }

    /// `Call.Message`: 2 data req (tag 2, not 1).
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Message {
        /// The payload.
        #[prost(bytes = "vec", required, tag = "2")]
        #[serde(with = "json::b64")]
        pub data: Vec<u8>,
    }
}

/// An executor event.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Event {
    /// Which event.
    #[prost(enumeration = "event::Type", optional, tag = "1")]
    #[serde(
        rename = "type",
        skip_serializing_if = "Option::is_none",
        serialize_with = "json::enum_opt_ser::<event::Type, _>",
        deserialize_with = "json::enum_opt_de::<event::Type, _>"
    )]
    pub r#type: Option<i32>,
    /// SUBSCRIBED.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscribed: Option<event::Subscribed>,
    /// ACKNOWLEDGED.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acknowledged: Option<event::Acknowledged>,
    /// LAUNCH.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch: Option<event::Launch>,
    /// KILL.
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kill: Option<event::Kill>,
    /// MESSAGE.
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<event::Message>,
    /// ERROR.
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<event::Error>,
    /// LAUNCH_GROUP.
    #[prost(message, optional, tag = "8")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch_group: Option<event::LaunchGroup>,
}

impl Event {
    /// The event's type, if it is one this crate knows.
    pub fn kind(&self) -> Option<event::Type> {
        self.r#type.and_then(|t| event::Type::try_from(t).ok())
    }
}

/// Nested types of the executor `Event`.
pub mod event {
    use super::*;

    json::wire_enum!(
        /// `Event.Type`.
        Type {
            /// Not set.
            Unknown = 0 => "UNKNOWN",
            /// The subscription is open.
            Subscribed = 1 => "SUBSCRIBED",
            /// Run a task.
            Launch = 2 => "LAUNCH",
            /// Kill a task.
            Kill = 3 => "KILL",
            /// The agent stored an update.
            Acknowledged = 4 => "ACKNOWLEDGED",
            /// Data from the scheduler.
            Message = 5 => "MESSAGE",
            /// Something went wrong.
            Error = 6 => "ERROR",
            /// Kill everything and exit.
            Shutdown = 7 => "SHUTDOWN",
            /// Run a task group.
            LaunchGroup = 8 => "LAUNCH_GROUP",
            /// Keep-alive.
            Heartbeat = 9 => "HEARTBEAT",
        }
    );

    /// `Event.Subscribed`: 1 executor_info req; 2 framework_info req; 3 agent_info req; 4 container_id.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Subscribed {
        /// The executor.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub executor_info: Option<ExecutorInfo>,
        /// Its framework.
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub framework_info: Option<FrameworkInfo>,
        /// The agent.
        #[prost(message, optional, tag = "3")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub agent_info: Option<AgentInfo>,
        /// The executor's container.
        #[prost(message, optional, tag = "4")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub container_id: Option<ContainerId>,
    }

    /// `Event.Acknowledged`: 1 task_id req; 2 uuid req.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Acknowledged {
        /// The task.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub task_id: Option<TaskId>,
        /// The update's uuid.
        #[prost(bytes = "vec", required, tag = "2")]
        #[serde(with = "json::b64")]
        pub uuid: Vec<u8>,
    }

    /// `Event.Launch`: 1 task req.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Launch {
        /// The task.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub task: Option<TaskInfo>,
    }

    /// `Event.LaunchGroup`: 1 task_group req.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct LaunchGroup {
        /// The tasks.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub task_group: Option<TaskGroupInfo>,
    }

    /// `Event.Kill`: 1 task_id req; 2 kill_policy.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Kill {
        /// The task.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub task_id: Option<TaskId>,
        /// Overrides the task's kill policy.
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub kill_policy: Option<KillPolicy>,
    }

    /// `Event.Message`: 1 data req.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Message {
        /// The payload.
        #[prost(bytes = "vec", required, tag = "1")]
        #[serde(with = "json::b64")]
        pub data: Vec<u8>,
    }

    /// `Event.Error`: 1 message req.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Error {
        /// What went wrong.
        #[prost(string, required, tag = "1")]
        pub message: String,
    }
}
