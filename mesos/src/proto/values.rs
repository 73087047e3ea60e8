//! Values, attributes and resources (`Value`, `Attribute`, `Resource`).

use serde::{Deserialize, Serialize};

use super::ids::{Labels, ResourceProviderId};
use super::json;

/// `Value`: 1 type req; 2 scalar; 3 ranges; 4 set; 5 text.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Value {
    /// Which of the other fields holds the value.
    #[prost(enumeration = "value::Type", required, tag = "1")]
    #[serde(
        rename = "type",
        serialize_with = "json::enum_ser::<value::Type, _>",
        deserialize_with = "json::enum_de::<value::Type, _>"
    )]
    pub r#type: i32,
    /// Set when the type is SCALAR.
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scalar: Option<value::Scalar>,
    /// Set when the type is RANGES.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranges: Option<value::Ranges>,
    /// Set when the type is SET.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set: Option<value::Set>,
    /// Set when the type is TEXT.
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<value::Text>,
}

/// Nested types of `Value`.
pub mod value {
    use super::*;

    json::wire_enum!(
        /// `Value.Type`.
        Type {
            /// A number.
            Scalar = 0 => "SCALAR",
            /// Inclusive ranges of integers.
            Ranges = 1 => "RANGES",
            /// A set of strings.
            Set = 2 => "SET",
            /// A string.
            Text = 3 => "TEXT",
        }
    );

    /// `Value.Scalar`: 1 value double req.
    #[derive(Clone, Copy, PartialEq, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Scalar {
        /// The number.
        #[prost(double, required, tag = "1")]
        pub value: f64,
    }

    /// `Value.Range`: 1 begin req; 2 end req, both inclusive.
    #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Range {
        /// First value in the range.
        #[prost(uint64, required, tag = "1")]
        pub begin: u64,
        /// Last value in the range (inclusive).
        #[prost(uint64, required, tag = "2")]
        pub end: u64,
    }

    /// `Value.Ranges`: 1 range rep.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Ranges {
        /// The ranges.
        #[prost(message, repeated, tag = "1")]
        pub range: Vec<Range>,
    }

    /// `Value.Set`: 1 item rep.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Set {
        /// The items.
        #[prost(string, repeated, tag = "1")]
        pub item: Vec<String>,
    }

    /// `Value.Text`: 1 value req.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct Text {
        /// The string.
        #[prost(string, required, tag = "1")]
        pub value: String,
    }
}

/// `Attribute`: 1 name req; 2 type req; 3 scalar; 4 ranges; 5 text; 6 set.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Attribute {
    /// The attribute's name.
    #[prost(string, required, tag = "1")]
    pub name: String,
    /// Which field holds the value.
    #[prost(enumeration = "value::Type", required, tag = "2")]
    #[serde(
        rename = "type",
        serialize_with = "json::enum_ser::<value::Type, _>",
        deserialize_with = "json::enum_de::<value::Type, _>"
    )]
    pub r#type: i32,
    /// Set when the type is SCALAR.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scalar: Option<value::Scalar>,
    /// Set when the type is RANGES.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranges: Option<value::Ranges>,
    /// Set when the type is TEXT.
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<value::Text>,
    /// Set when the type is SET.
    #[prost(message, optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set: Option<value::Set>,
}

/// `Resource`: see the fields for tags.
#[derive(Clone, PartialEq, ::prost::Message, Serialize, Deserialize)]
#[serde(default)]
pub struct Resource {
    /// `cpus`, `mem`, `disk`, `ports`, `gpus`…
    #[prost(string, required, tag = "1")]
    pub name: String,
    /// Which field holds the quantity.
    #[prost(enumeration = "value::Type", required, tag = "2")]
    #[serde(
        rename = "type",
        serialize_with = "json::enum_ser::<value::Type, _>",
        deserialize_with = "json::enum_de::<value::Type, _>"
    )]
    pub r#type: i32,
    /// Set when the type is SCALAR.
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scalar: Option<value::Scalar>,
    /// Set when the type is RANGES.
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranges: Option<value::Ranges>,
    /// Set when the type is SET.
    #[prost(message, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set: Option<value::Set>,
    /// Deprecated pre-reservation-refinement role; absent means `*`.
    #[prost(string, optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Disk details (persistent volumes); kept opaque.
    #[prost(message, optional, tag = "7")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk: Option<resource::DiskInfo>,
    /// Deprecated single reservation.
    #[prost(message, optional, tag = "8")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reservation: Option<resource::ReservationInfo>,
    /// Present when the resource is revocable.
    #[prost(message, optional, tag = "9")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revocable: Option<resource::RevocableInfo>,
    /// Present when the resource is shared.
    #[prost(message, optional, tag = "10")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared: Option<resource::SharedInfo>,
    /// The role the resource is allocated to, in offers to MULTI_ROLE frameworks.
    #[prost(message, optional, tag = "11")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocation_info: Option<resource::AllocationInfo>,
    /// The resource provider, if not the agent itself.
    #[prost(message, optional, tag = "12")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<ResourceProviderId>,
    /// The stack of reservations, innermost last (reservation refinement).
    #[prost(message, repeated, tag = "13")]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<resource::ReservationInfo>,
}

/// Nested types of `Resource`.
pub mod resource {
    use super::*;

    /// `Resource.AllocationInfo`: 1 role.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct AllocationInfo {
        /// The role the resource is allocated to.
        #[prost(string, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub role: Option<String>,
    }

    /// `Resource.ReservationInfo`: 4 type; 3 role; 1 principal; 2 labels.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct ReservationInfo {
        /// STATIC or DYNAMIC.
        #[prost(enumeration = "reservation_info::Type", optional, tag = "4")]
        #[serde(
            rename = "type",
            skip_serializing_if = "Option::is_none",
            serialize_with = "json::enum_opt_ser::<reservation_info::Type, _>",
            deserialize_with = "json::enum_opt_de::<reservation_info::Type, _>"
        )]
        pub r#type: Option<i32>,
        /// The role reserved for.
        #[prost(string, optional, tag = "3")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub role: Option<String>,
        /// Who made the reservation.
        #[prost(string, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub principal: Option<String>,
        /// Free-form labels.
        #[prost(message, optional, tag = "2")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub labels: Option<Labels>,
    }

    /// Nested types of `ReservationInfo`.
    pub mod reservation_info {
        use super::*;

        json::wire_enum!(
            /// `Resource.ReservationInfo.Type`.
            Type {
                /// Not set.
                Unknown = 0 => "UNKNOWN",
                /// Set by the agent's configuration.
                Static = 1 => "STATIC",
                /// Made by a framework or operator at run time.
                Dynamic = 2 => "DYNAMIC",
            }
        );
    }

    /// `Resource.DiskInfo`: persistence and volume details, not interpreted here.
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    #[serde(default)]
    pub struct DiskInfo {
        /// `Persistence`: 1 id req; 2 principal.
        #[prost(message, optional, tag = "1")]
        #[serde(skip_serializing_if = "Option::is_none")]
        pub persistence: Option<disk_info::Persistence>,
    }

    /// Nested types of `DiskInfo`.
    pub mod disk_info {
        use super::*;

        /// `Resource.DiskInfo.Persistence`.
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
        #[serde(default)]
        pub struct Persistence {
            /// The volume's id.
            #[prost(string, required, tag = "1")]
            pub id: String,
            /// Who created it.
            #[prost(string, optional, tag = "2")]
            #[serde(skip_serializing_if = "Option::is_none")]
            pub principal: Option<String>,
        }
    }

    /// `Resource.RevocableInfo`: no fields.
    #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    pub struct RevocableInfo {}

    /// `Resource.SharedInfo`: no fields.
    #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message, Serialize, Deserialize)]
    pub struct SharedInfo {}
}
