//! Serde helpers for Mesos' JSON mapping of protobuf messages.
//!
//! Mesos maps protobuf to JSON with the proto's snake_case field names, enum
//! values as their name strings and `bytes` as base64. prost keeps enums as
//! `i32` and bytes as `Vec<u8>`, so those fields route through the helpers
//! here. Unknown keys are ignored by serde's default, which is what Mesos does.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serializer};

/// An enum that has a wire name for every value (`TASK_RUNNING`, `SUBSCRIBE`…).
pub trait WireEnum: Sized + Copy {
    /// The proto name of the value.
    fn wire_name(self) -> &'static str;
    /// The value with this proto name, if any.
    fn from_wire_name(name: &str) -> Option<Self>;
    /// The value for this number, if any.
    fn from_number(n: i32) -> Option<Self>;
    /// The number of the value.
    fn number(self) -> i32;
}

/// Accepts a name (the Mesos form) or a number (what some clients send).
#[derive(Deserialize)]
#[serde(untagged)]
enum NameOrNumber {
    Name(String),
    Number(i32),
}

fn parse<E: WireEnum, Err: serde::de::Error>(raw: NameOrNumber) -> Result<i32, Err> {
    let value = match &raw {
        NameOrNumber::Name(name) => E::from_wire_name(name),
        NameOrNumber::Number(n) => E::from_number(*n),
    };
    match (value, raw) {
        (Some(v), _) => Ok(v.number()),
        (None, NameOrNumber::Name(name)) => {
            Err(Err::custom(format!("unknown enum value \"{name}\"")))
        }
        (None, NameOrNumber::Number(n)) => Err(Err::custom(format!("unknown enum number {n}"))),
    }
}

fn name_of<E: WireEnum>(n: i32) -> Result<&'static str, String> {
    E::from_number(n)
        .map(WireEnum::wire_name)
        .ok_or_else(|| format!("enum number {n} has no name"))
}

/// Serializes a required enum field as its name.
pub fn enum_ser<E: WireEnum, S: Serializer>(v: &i32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(name_of::<E>(*v).map_err(serde::ser::Error::custom)?)
}

/// Deserializes a required enum field from its name.
pub fn enum_de<'de, E: WireEnum, D: Deserializer<'de>>(d: D) -> Result<i32, D::Error> {
    parse::<E, D::Error>(NameOrNumber::deserialize(d)?)
}

/// Serializes an optional enum field as its name.
pub fn enum_opt_ser<E: WireEnum, S: Serializer>(v: &Option<i32>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(n) => s.serialize_some(name_of::<E>(*n).map_err(serde::ser::Error::custom)?),
        None => s.serialize_none(),
    }
}

/// Deserializes an optional enum field from its name.
pub fn enum_opt_de<'de, E: WireEnum, D: Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
    match Option::<NameOrNumber>::deserialize(d)? {
        Some(raw) => parse::<E, D::Error>(raw).map(Some),
        None => Ok(None),
    }
}

/// Serializes a repeated enum field as a list of names.
pub fn enum_vec_ser<E: WireEnum, S: Serializer>(v: &[i32], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(v.len()))?;
    for n in v {
        seq.serialize_element(name_of::<E>(*n).map_err(serde::ser::Error::custom)?)?;
    }
    seq.end()
}

/// Deserializes a repeated enum field from a list of names.
pub fn enum_vec_de<'de, E: WireEnum, D: Deserializer<'de>>(d: D) -> Result<Vec<i32>, D::Error> {
    Vec::<NameOrNumber>::deserialize(d)?
        .into_iter()
        .map(parse::<E, D::Error>)
        .collect()
}

/// `bytes` fields as base64 strings.
pub mod b64 {
    use super::*;

    /// Encodes bytes as standard base64.
    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(v))
    }

    /// Decodes standard base64.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD
            .decode(text.as_bytes())
            .map_err(|e| D::Error::custom(format!("invalid base64: {e}")))
    }
}

/// Optional `bytes` fields as base64 strings.
pub mod b64_opt {
    use super::*;

    /// Encodes bytes as standard base64.
    pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(bytes) => s.serialize_some(&STANDARD.encode(bytes)),
            None => s.serialize_none(),
        }
    }

    /// Decodes standard base64.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(text) => STANDARD
                .decode(text.as_bytes())
                .map(Some)
                .map_err(|e| D::Error::custom(format!("invalid base64: {e}"))),
            None => Ok(None),
        }
    }
}

/// Declares a protobuf enum that also knows its Mesos wire names.
macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $num:literal => $wire:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
        #[repr(i32)]
        pub enum $name {
            $($(#[$vmeta])* $variant = $num),+
        }

        impl $crate::proto::json::WireEnum for $name {
            fn wire_name(self) -> &'static str {
                match self { $(Self::$variant => $wire),+ }
            }
            fn from_wire_name(name: &str) -> Option<Self> {
                match name { $($wire => Some(Self::$variant),)+ _ => None }
            }
            fn from_number(n: i32) -> Option<Self> {
                Self::try_from(n).ok()
            }
            fn number(self) -> i32 {
                self as i32
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str($crate::proto::json::WireEnum::wire_name(*self))
            }
        }
    };
}
pub(crate) use wire_enum;
