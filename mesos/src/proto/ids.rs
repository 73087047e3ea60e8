//! Identifiers: every one is a message with one required string, `value`.

use serde::{Deserialize, Serialize};

macro_rules! id_message {
    ($($(#[$meta:meta])* $name:ident),+ $(,)?) => {$(
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Message, Serialize, Deserialize)]
        #[serde(default)]
        pub struct $name {
            /// The identifier itself.
            #[prost(string, required, tag = "1")]
            pub value: String,
        }

        impl $name {
            /// Wraps a string as this identifier.
            pub fn new(value: impl Into<String>) -> Self {
                Self { value: value.into() }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.value)
            }
        }

        impl From<&str> for $name {
            fn from(value: &str) -> Self {
                Self::new(value)
            }
        }

        impl From<String> for $name {
            fn from(value: String) -> Self {
                Self::new(value)
            }
        }
    )+};
}

id_message!(
    /// `FrameworkID`.
    FrameworkId,
    /// `OfferID`.
    OfferId,
    /// `AgentID`.
    AgentId,
    /// `TaskID`.
    TaskId,
    /// `ExecutorID`.
    ExecutorId,
    /// `OperationID`.
    OperationId,
    /// `ResourceProviderID`.
    ResourceProviderId,
);

/// `ContainerID`: 1 value req; 2 parent.
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct ContainerId {
    /// The identifier itself.
    #[prost(string, required, tag = "1")]
    pub value: String,
    /// The parent container of a nested container.
    #[prost(message, optional, boxed, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<Box<ContainerId>>,
}

/// `DurationInfo`: 1 nanoseconds int64 req.
#[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct DurationInfo {
    /// The duration in nanoseconds.
    #[prost(int64, required, tag = "1")]
    pub nanoseconds: i64,
}

impl DurationInfo {
    /// The duration as a `std::time::Duration`; negative values count as zero.
    pub fn to_duration(self) -> std::time::Duration {
        std::time::Duration::from_nanos(u64::try_from(self.nanoseconds).unwrap_or(0))
    }

    /// A duration, saturating at `i64::MAX` nanoseconds.
    pub fn from_duration(d: std::time::Duration) -> Self {
        Self {
            nanoseconds: i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        }
    }
}

/// `TimeInfo`: 1 nanoseconds int64 req (since the epoch).
#[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct TimeInfo {
    /// Nanoseconds since the Unix epoch.
    #[prost(int64, required, tag = "1")]
    pub nanoseconds: i64,
}

/// `Label`: 1 key req; 2 value.
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Label {
    /// The key.
    #[prost(string, required, tag = "1")]
    pub key: String,
    /// The value, if any.
    #[prost(string, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// `Labels`: 1 labels rep.
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Labels {
    /// The labels, in order.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
}
