//! Helpers for identifiers and durations.

use super::{
    AgentId, DurationInfo, ExecutorId, FrameworkId, OfferId, OperationId, ResourceProviderId,
    TaskId,
};

/// Every identifier is a message with one required string, `value`.
macro_rules! id_helpers {
    ($($name:ident),+ $(,)?) => {$(
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

id_helpers!(
    FrameworkId,
    OfferId,
    AgentId,
    TaskId,
    ExecutorId,
    OperationId,
    ResourceProviderId,
);

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
