//! The v1 scheduler API: `Call` (scheduler → master) and `Event` (master → scheduler).

use serde::{Deserialize, Serialize};

use super::cluster::{FrameworkInfo, MasterInfo, Offer, offer};
use super::ids::{AgentId, ExecutorId, FrameworkId, OfferId, TaskId};
use super::json;
use super::tasks::{Filters, KillPolicy, TaskStatus};

/// A scheduler call.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Call {
    /// Required on every call but SUBSCRIBE.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub framework_id: Option<FrameworkId>,
    /// Which call.
    #[prost(enumeration = "call::Type", optional, tag = "2")]
    #[serde(
        rename = "type",
        skip_serializing_if = "Option::is_none",
        serialize_with = "json::enum_opt_ser::<call::Type, _>",
        deserialize_with = "json::enum_opt_de::<call::Type, _>"
    )]
    pub r#type: Option<i32>,
    /// SUBSCRIBE.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<call::Subscribe>,
    /// ACCEPT.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accept: Option<call::Accept>,
    /// DECLINE.
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decline: Option<call::Decline>,
    /// KILL.
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kill: Option<call::Kill>,
    /// SHUTDOWN.
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shutdown: Option<call::Shutdown>,
    /// ACKNOWLEDGE.
    #[prost(message, optional, tag = "8")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acknowledge: Option<call::Acknowledge>,
    /// RECONCILE.
    #[prost(message, optional, tag = "9")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconcile: Option<call::Reconcile>,
    /// MESSAGE.
    #[prost(message, optional, tag = "10")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<call::Message>,
    /// REVIVE (tag 15, not 5).
    #[prost(message, optional, tag = "15")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revive: Option<call::Revive>,
    /// SUPPRESS (tag 16).
    #[prost(message, optional, tag = "16")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suppress: Option<call::Suppress>,
    /// UPDATE_FRAMEWORK.
    #[prost(message, optional, tag = "19")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update_framework: Option<call::UpdateFramework>,
}

impl Call {
    /// The call's type, if it is one this crate knows.
    pub fn kind(&self) -> Option<call::Type> {
        self.r#type.and_then(|t| call::Type::try_from(t).ok())
    }
}

/// Nested types of the scheduler `Call`.
pub mod call {
    use super::*;

    json::wire_enum!(
        /// `Call.Type`.
        Type {
            /// Not set.
            Unknown = 0 => "UNKNOWN",
            /// Open the event stream.
            Subscribe = 1 => "SUBSCRIBE",
            /// Remove the framework.
            Teardown = 2 => "TEARDOWN",
            /// Use offers.
            Accept = 3 => "ACCEPT",
            /// Decline offers.
            Decline = 4 => "DECLINE",
            /// Clear filters and un-suppress.
            Revive = 5 => "REVIVE",
            /// Kill a task.
            Kill = 6 => "KILL",
            /// Shut an executor down.
            Shutdown = 7 => "SHUTDOWN",
            /// Acknowledge a status update.
            Acknowledge = 8 => "ACKNOWLEDGE",
            /// Ask for task states.
            Reconcile = 9 => "RECONCILE",
            /// Send data to an executor.
            Message = 10 => "MESSAGE",
            /// Ask for resources.
            Request = 11 => "REQUEST",
            /// Stop offers.
            Suppress = 12 => "SUPPRESS",
            /// Accept inverse offers.
            AcceptInverseOffers = 13 => "ACCEPT_INVERSE_OFFERS",
            /// Decline inverse offers.
            DeclineInverseOffers = 14 => "DECLINE_INVERSE_OFFERS",
            /// Acknowledge an operation status.
            AcknowledgeOperationStatus = 15 => "ACKNOWLEDGE_OPERATION_STATUS",
            /// Ask for operation states.
            ReconcileOperations = 16 => "RECONCILE_OPERATIONS",
            /// Change the FrameworkInfo.
            UpdateFramework = 17 => "UPDATE_FRAMEWORK",
        }
    );

    /// `Call.Subscribe`: 1 framework_info req; 2 suppressed_roles rep.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Subscribe {
        /// Who is subscribing.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub framework_info: Option<FrameworkInfo>,
        /// Roles that start suppressed.
        #[prost(string, repeated, tag = "2")]
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub suppressed_roles: Vec<String>,
    }

    /// `Call.Accept`: 1 offer_ids rep; 2 operations rep; 3 filters.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Accept {
        /// Offers used (all from one agent).
        #[prost(message, repeated, tag = "1")]
        pub offer_ids: Vec<OfferId>,
        /// What to do with them.
        #[prost(message, repeated, tag = "2")]
        pub operations: Vec<offer::Operation>,
        /// Refusal for what is left.
        #[prost(message, optional, tag = "3")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub filters: Option<Filters>,
    }

    /// `Call.Decline`: 1 offer_ids rep; 2 filters.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Decline {
        /// Offers declined.
        #[prost(message, repeated, tag = "1")]
        pub offer_ids: Vec<OfferId>,
        /// How long to refuse them.
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub filters: Option<Filters>,
    }

    /// `Call.Revive`: 1 roles rep (empty means all).
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Revive {
        /// Roles to revive.
        #[prost(string, repeated, tag = "1")]
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub roles: Vec<String>,
    }

    /// `Call.Suppress`: 1 roles rep (empty means all).
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Suppress {
        /// Roles to suppress.
        #[prost(string, repeated, tag = "1")]
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub roles: Vec<String>,
    }

    /// `Call.Kill`: 1 task_id req; 2 agent_id; 3 kill_policy.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Kill {
        /// The task.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub task_id: Option<TaskId>,
        /// Its agent.
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub agent_id: Option<AgentId>,
        /// Overrides the task's kill policy.
        #[prost(message, optional, tag = "3")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub kill_policy: Option<KillPolicy>,
    }

    /// `Call.Shutdown`: 1 executor_id req; 2 agent_id req.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Shutdown {
        /// The executor.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub executor_id: Option<ExecutorId>,
        /// Its agent.
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub agent_id: Option<AgentId>,
    }

    /// `Call.Acknowledge`: 1 agent_id req; 2 task_id req; 3 uuid req.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Acknowledge {
        /// The agent.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub agent_id: Option<AgentId>,
        /// The task.
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub task_id: Option<TaskId>,
        /// The update's uuid.
        #[prost(bytes = "vec", required, tag = "3")]
        #[serde(with = "json::b64")]
        pub uuid: Vec<u8>,
    }

    /// `Call.Reconcile`: 1 tasks rep.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Reconcile {
        /// Tasks to reconcile; empty means implicit reconciliation.
        #[prost(message, repeated, tag = "1")]
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub tasks: Vec<reconcile::Task>,
    }

    /// Nested types of `Reconcile`.
    pub mod reconcile {
        use super::*;

        /// `Call.Reconcile.Task`: 1 task_id req; 2 agent_id.
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
        #[serde(default)]
        pub struct Task {
            /// The task.
            #[prost(message, optional, tag = "1")]
            #[serde(skip_serializing_if = "Option::is_none")]
            pub task_id: Option<TaskId>,
            /// Its agent, if known.
            #[prost(message, optional, tag = "2")]
            #[serde(skip_serializing_if = "Option::is_none")]
            pub agent_id: Option<AgentId>,
        }
    }

    /// `Call.Message`: 1 agent_id req; 2 executor_id req; 3 data req.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Message {
        /// The agent.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub agent_id: Option<AgentId>,
        /// The executor.
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub executor_id: Option<ExecutorId>,
        /// The payload.
        #[prost(bytes = "vec", required, tag = "3")]
        #[serde(with = "json::b64")]
        pub data: Vec<u8>,
    }

    /// `Call.UpdateFramework`: 1 framework_info req; 2 suppressed_roles rep.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct UpdateFramework {
        /// The new FrameworkInfo.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub framework_info: Option<FrameworkInfo>,
        /// Roles that are suppressed.
        #[prost(string, repeated, tag = "2")]
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub suppressed_roles: Vec<String>,
    }
}

/// A scheduler event.
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
    /// OFFERS.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offers: Option<event::Offers>,
    /// RESCIND.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rescind: Option<event::Rescind>,
    /// UPDATE.
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update: Option<event::Update>,
    /// MESSAGE.
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<event::Message>,
    /// FAILURE.
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<event::Failure>,
    /// ERROR.
    #[prost(message, optional, tag = "8")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<event::Error>,
}

impl Event {
    /// The event's type, if it is one this crate knows.
    pub fn kind(&self) -> Option<event::Type> {
        self.r#type.and_then(|t| event::Type::try_from(t).ok())
    }
}

/// Nested types of the scheduler `Event`.
pub mod event {
    use super::*;

    json::wire_enum!(
        /// `Event.Type`.
        Type {
            /// Not set.
            Unknown = 0 => "UNKNOWN",
            /// The subscription is open.
            Subscribed = 1 => "SUBSCRIBED",
            /// New offers.
            Offers = 2 => "OFFERS",
            /// An offer is withdrawn.
            Rescind = 3 => "RESCIND",
            /// A task status update.
            Update = 4 => "UPDATE",
            /// Data from an executor.
            Message = 5 => "MESSAGE",
            /// An agent or executor failed.
            Failure = 6 => "FAILURE",
            /// The subscription is over.
            Error = 7 => "ERROR",
            /// Keep-alive.
            Heartbeat = 8 => "HEARTBEAT",
            /// Inverse offers.
            InverseOffers = 9 => "INVERSE_OFFERS",
            /// An inverse offer is withdrawn.
            RescindInverseOffer = 10 => "RESCIND_INVERSE_OFFER",
            /// An operation status update.
            UpdateOperationStatus = 11 => "UPDATE_OPERATION_STATUS",
        }
    );

    /// `Event.Subscribed`: 1 framework_id req; 2 heartbeat_interval_seconds; 3 master_info.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Subscribed {
        /// The framework's id (new or the one re-subscribed with).
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub framework_id: Option<FrameworkId>,
        /// Seconds between HEARTBEAT events.
        #[prost(double, optional, tag = "2")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub heartbeat_interval_seconds: Option<f64>,
        /// The leading master.
        #[prost(message, optional, tag = "3")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub master_info: Option<MasterInfo>,
    }

    /// `Event.Offers`: 1 offers rep.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Offers {
        /// The offers.
        #[prost(message, repeated, tag = "1")]
        pub offers: Vec<Offer>,
    }

    /// `Event.Rescind`: 1 offer_id req.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Rescind {
        /// The offer withdrawn.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub offer_id: Option<OfferId>,
    }

    /// `Event.Update`: 1 status req.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Update {
        /// The status.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub status: Option<TaskStatus>,
    }

    /// `Event.Message`: 1 agent_id req; 2 executor_id req; 3 data req.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Message {
        /// The agent.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub agent_id: Option<AgentId>,
        /// The executor.
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub executor_id: Option<ExecutorId>,
        /// The payload.
        #[prost(bytes = "vec", required, tag = "3")]
        #[serde(with = "json::b64")]
        pub data: Vec<u8>,
    }

    /// `Event.Failure`: 1 agent_id; 2 executor_id; 3 status.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Failure {
        /// The agent.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub agent_id: Option<AgentId>,
        /// The executor, when an executor failed.
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub executor_id: Option<ExecutorId>,
        /// The executor's exit status.
        #[prost(int32, optional, tag = "3")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub status: Option<i32>,
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
