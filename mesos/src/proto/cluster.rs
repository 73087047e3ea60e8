//! Frameworks, masters, agents and offers.

use serde::{Deserialize, Serialize};

use super::ids::{AgentId, ExecutorId, FrameworkId, Labels, OfferId, OperationId};
use super::json;
use super::tasks::{ExecutorInfo, TaskGroupInfo, TaskInfo};
use super::values::{Attribute, Resource, resource};

/// `FrameworkInfo`.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct FrameworkInfo {
    /// The user tasks run as.
    #[prost(string, required, tag = "1")]
    pub user: String,
    /// The framework's name.
    #[prost(string, required, tag = "2")]
    pub name: String,
    /// Set when re-subscribing (failover).
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<FrameworkId>,
    /// Seconds the master keeps tasks after the scheduler disconnects (default 0).
    #[prost(double, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failover_timeout: Option<f64>,
    /// Whether agents checkpoint the framework's tasks.
    #[prost(bool, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<bool>,
    /// Deprecated single role.
    #[prost(string, optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Roles (needs MULTI_ROLE).
    #[prost(string, repeated, tag = "12")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
    /// The scheduler's hostname.
    #[prost(string, optional, tag = "7")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// Who the framework authenticates as.
    #[prost(string, optional, tag = "8")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub principal: Option<String>,
    /// The framework's web UI.
    #[prost(string, optional, tag = "9")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webui_url: Option<String>,
    /// What the framework supports.
    #[prost(message, repeated, tag = "10")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<framework_info::Capability>,
    /// Free-form labels.
    #[prost(message, optional, tag = "11")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Labels>,
}

impl FrameworkInfo {
    /// Whether the framework declares the capability.
    pub fn has_capability(&self, cap: framework_info::capability::Type) -> bool {
        self.capabilities
            .iter()
            .any(|c| c.r#type == Some(cap as i32))
    }

    /// The roles the framework subscribes with: `roles` under MULTI_ROLE,
    /// otherwise the single `role`, otherwise `*`.
    pub fn effective_roles(&self) -> Vec<String> {
        if self.has_capability(framework_info::capability::Type::MultiRole) {
            return self.roles.clone();
        }
        vec![self.role.clone().unwrap_or_else(|| "*".to_owned())]
    }
}

/// Nested types of `FrameworkInfo`.
pub mod framework_info {
    use super::*;

    /// `FrameworkInfo.Capability`: 1 type.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Capability {
        /// The capability.
        #[prost(enumeration = "capability::Type", optional, tag = "1")]
        #[serde(
            rename = "type",
            skip_serializing_if = "Option::is_none",
            serialize_with = "json::enum_opt_ser::<capability::Type, _>",
            deserialize_with = "json::enum_opt_de::<capability::Type, _>"
        )]
        pub r#type: Option<i32>,
    }

    impl Capability {
        /// A capability of this type.
        pub fn of(t: capability::Type) -> Self {
            Self {
                r#type: Some(t as i32),
            }
        }
    }

    /// Nested types of `Capability`.
    pub mod capability {
        use super::*;

        json::wire_enum!(
            /// `FrameworkInfo.Capability.Type`.
            Type {
                /// Not set.
                Unknown = 0 => "UNKNOWN",
                /// Accepts revocable resources.
                RevocableResources = 1 => "REVOCABLE_RESOURCES",
                /// Understands TASK_KILLING.
                TaskKillingState = 2 => "TASK_KILLING_STATE",
                /// Accepts GPUs.
                GpuResources = 3 => "GPU_RESOURCES",
                /// Accepts shared resources.
                SharedResources = 4 => "SHARED_RESOURCES",
                /// Understands UNREACHABLE, GONE, DROPPED…
                PartitionAware = 5 => "PARTITION_AWARE",
                /// Subscribes with several roles.
                MultiRole = 6 => "MULTI_ROLE",
                /// Understands refined reservations.
                ReservationRefinement = 7 => "RESERVATION_REFINEMENT",
                /// Understands fault domains.
                RegionAware = 8 => "REGION_AWARE",
            }
        );
    }
}

/// `MasterInfo`: 1 id req; 2 ip req; 3 port req; 5 hostname; 6 version; 7 address.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct MasterInfo {
    /// The master's id.
    #[prost(string, required, tag = "1")]
    pub id: String,
    /// IPv4 address in network order, as Mesos packs it.
    #[prost(uint32, required, tag = "2")]
    pub ip: u32,
    /// The port (5050 by default).
    #[prost(uint32, required, tag = "3")]
    pub port: u32,
    /// The master's hostname.
    #[prost(string, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// The Mesos version.
    #[prost(string, optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Where to reach it.
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<Address>,
}

/// `Address`: 1 hostname; 2 ip; 3 port req.
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Address {
    /// Hostname.
    #[prost(string, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// IP address as text.
    #[prost(string, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    /// Port.
    #[prost(int32, required, tag = "3")]
    pub port: i32,
}

/// `URL`: 1 scheme req; 2 address req; 3 path; 5 fragment.
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Url {
    /// `http` or `https`.
    #[prost(string, required, tag = "1")]
    pub scheme: String,
    /// Host and port.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<Address>,
    /// Path, e.g. `/slave(1)`.
    #[prost(string, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Fragment.
    #[prost(string, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fragment: Option<String>,
}

impl Url {
    /// `scheme://host:port` of the address, preferring the IP.
    pub fn base(&self) -> Option<String> {
        let addr = self.address.as_ref()?;
        let host = addr.ip.as_deref().or(addr.hostname.as_deref())?;
        Some(format!("{}://{}:{}", self.scheme, host, addr.port))
    }
}

/// `AgentInfo`: 1 hostname req; 8 port; 3 resources; 5 attributes; 6 id.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentInfo {
    /// The agent's hostname.
    #[prost(string, required, tag = "1")]
    pub hostname: String,
    /// The agent's port (5051 by default).
    #[prost(int32, optional, tag = "8")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    /// Total resources.
    #[prost(message, repeated, tag = "3")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<Resource>,
    /// Attributes.
    #[prost(message, repeated, tag = "5")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<Attribute>,
    /// The agent's id.
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<AgentId>,
}

/// `Offer`.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Offer {
    /// The offer's id.
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<OfferId>,
    /// The framework it is made to.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub framework_id: Option<FrameworkId>,
    /// The agent the resources are on.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<AgentId>,
    /// The agent's hostname.
    #[prost(string, required, tag = "4")]
    pub hostname: String,
    /// The resources offered.
    #[prost(message, repeated, tag = "5")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<Resource>,
    /// The framework's executors already running on the agent.
    #[prost(message, repeated, tag = "6")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub executor_ids: Vec<ExecutorId>,
    /// The agent's attributes.
    #[prost(message, repeated, tag = "7")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<Attribute>,
    /// How to reach the agent's own HTTP endpoints (sandbox files).
    #[prost(message, optional, tag = "8")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<Url>,
    /// The role the offer is allocated to.
    #[prost(message, optional, tag = "10")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocation_info: Option<resource::AllocationInfo>,
}

/// Nested types of `Offer`.
pub mod offer {
    use super::*;

    /// `Offer.Operation`.
    #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Operation {
        /// Which operation.
        #[prost(enumeration = "operation::Type", optional, tag = "1")]
        #[serde(
            rename = "type",
            skip_serializing_if = "Option::is_none",
            serialize_with = "json::enum_opt_ser::<operation::Type, _>",
            deserialize_with = "json::enum_opt_de::<operation::Type, _>"
        )]
        pub r#type: Option<i32>,
        /// Operation id for feedback (not to be set, per Mesos).
        #[prost(message, optional, tag = "12")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub id: Option<OperationId>,
        /// LAUNCH.
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub launch: Option<operation::Launch>,
        /// RESERVE.
        #[prost(message, optional, tag = "3")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub reserve: Option<operation::Reserve>,
        /// UNRESERVE.
        #[prost(message, optional, tag = "4")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub unreserve: Option<operation::Reserve>,
        /// CREATE.
        #[prost(message, optional, tag = "5")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub create: Option<operation::Volumes>,
        /// DESTROY.
        #[prost(message, optional, tag = "6")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub destroy: Option<operation::Volumes>,
        /// LAUNCH_GROUP.
        #[prost(message, optional, tag = "7")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub launch_group: Option<operation::LaunchGroup>,
    }

    /// Nested types of `Operation`.
    pub mod operation {
        use super::*;

        json::wire_enum!(
            /// `Offer.Operation.Type`.
            Type {
                /// Not set.
                Unknown = 0 => "UNKNOWN",
                /// Launch tasks.
                Launch = 1 => "LAUNCH",
                /// Reserve resources.
                Reserve = 2 => "RESERVE",
                /// Unreserve resources.
                Unreserve = 3 => "UNRESERVE",
                /// Create volumes.
                Create = 4 => "CREATE",
                /// Destroy volumes.
                Destroy = 5 => "DESTROY",
                /// Launch a task group.
                LaunchGroup = 6 => "LAUNCH_GROUP",
            }
        );

        /// `Offer.Operation.Launch`: 1 task_infos rep.
        #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
        #[serde(default)]
        pub struct Launch {
            /// The tasks.
            #[prost(message, repeated, tag = "1")]
            pub task_infos: Vec<TaskInfo>,
        }

        /// `Offer.Operation.LaunchGroup`: 1 executor req; 2 task_group req.
        #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
        #[serde(default)]
        pub struct LaunchGroup {
            /// The executor for the group.
            #[prost(message, optional, tag = "1")]
            #[serde(skip_serializing_if = "Option::is_none")]
            pub executor: Option<ExecutorInfo>,
            /// The tasks.
            #[prost(message, optional, tag = "2")]
            #[serde(skip_serializing_if = "Option::is_none")]
            pub task_group: Option<TaskGroupInfo>,
        }

        /// `Reserve` / `Unreserve`: 1 resources rep.
        #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
        #[serde(default)]
        pub struct Reserve {
            /// The resources.
            #[prost(message, repeated, tag = "1")]
            pub resources: Vec<Resource>,
        }

        /// `Create` / `Destroy`: 1 volumes rep.
        #[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
        #[serde(default)]
        pub struct Volumes {
            /// The volumes.
            #[prost(message, repeated, tag = "1")]
            pub volumes: Vec<Resource>,
        }
    }
}
