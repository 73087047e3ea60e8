//! Mesos' JSON mapping of the protobuf messages.
//!
//! Mesos maps protobuf to JSON with the proto's snake_case field names, enum
//! values as their name strings, `bytes` as base64 and 64-bit integers as
//! JSON numbers. An absent optional field is left out; a proto2 `required`
//! scalar is always written, zero or not. Decoding starts from the message's
//! default, so a missing key keeps it, and unknown keys are ignored, as
//! Mesos does.
//!
//! `build.rs` walks the `.proto` files and writes one `message!` call per
//! message and one `wire_enum!` call per enum; the serde code itself is
//! here, written once.

use std::fmt;
use std::marker::PhantomData;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::de::{DeserializeSeed, Error as _, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

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

/// An enum field's number, written as its name and read from a name or a
/// number; a value the enum does not have is an error both ways.
pub(crate) struct EnumField<E>(pub(crate) i32, PhantomData<E>);

impl<E> EnumField<E> {
    /// Wraps an enum field's number.
    pub(crate) fn new(n: i32) -> Self {
        Self(n, PhantomData)
    }
}

impl<E: WireEnum> Serialize for EnumField<E> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let name = E::from_number(self.0)
            .map(WireEnum::wire_name)
            .ok_or_else(|| {
                serde::ser::Error::custom(format!("enum number {} has no name", self.0))
            })?;
        s.serialize_str(name)
    }
}

impl<'de, E: WireEnum> Deserialize<'de> for EnumField<E> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = NameOrNumber::deserialize(d)?;
        let value = match &raw {
            NameOrNumber::Name(name) => E::from_wire_name(name),
            NameOrNumber::Number(n) => E::from_number(*n),
        };
        match (value, raw) {
            (Some(v), _) => Ok(Self::new(v.number())),
            (None, NameOrNumber::Name(name)) => {
                Err(D::Error::custom(format!("unknown enum value \"{name}\"")))
            }
            (None, NameOrNumber::Number(n)) => {
                Err(D::Error::custom(format!("unknown enum number {n}")))
            }
        }
    }
}

/// A `bytes` field, as a standard base64 string.
pub(crate) struct Base64(pub(crate) Vec<u8>);

/// A borrowed `bytes` field, for writing.
pub(crate) struct Base64Ref<'a>(pub(crate) &'a [u8]);

impl Serialize for Base64Ref<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(self.0))
    }
}

impl<'de> Deserialize<'de> for Base64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD
            .decode(text.as_bytes())
            .map(Base64)
            .map_err(|e| D::Error::custom(format!("invalid base64: {e}")))
    }
}

/// Reads an object key as the index of the message field it names, without
/// allocating; `None` for a key the message does not have.
pub(crate) struct FieldKey(pub(crate) &'static [&'static str]);

impl<'de> DeserializeSeed<'de> for FieldKey {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl Visitor<'_> for FieldKey {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().position(|name| *name == key))
    }
}

/// The fields already read from one object: a key given twice is an error,
/// as it was with serde's derive.
#[derive(Default)]
pub(crate) struct Seen(u64);

impl Seen {
    /// Marks field `i` read, or fails if it already was.
    pub(crate) fn first<E: serde::de::Error>(
        &mut self,
        fields: &[&'static str],
        i: usize,
    ) -> Result<(), E> {
        let bit = 1u64 << i;
        if self.0 & bit != 0 {
            return Err(E::duplicate_field(fields[i]));
        }
        self.0 |= bit;
        Ok(())
    }
}

/// Whether a field is written (1) or left out (0), for the length that
/// `serialize_struct` announces, as serde's derive counts it.
macro_rules! field_len {
    ($v:expr, opt) => {
        usize::from($v.is_some())
    };
    ($v:expr, bytes_opt) => {
        usize::from($v.is_some())
    };
    ($v:expr, enum_opt($e:ty)) => {
        usize::from($v.is_some())
    };
    ($v:expr, list) => {
        usize::from(!$v.is_empty())
    };
    ($v:expr, map) => {
        usize::from(!$v.is_empty())
    };
    // value, list_always, bytes, enum_value: always written.
    ($v:expr, $kind:ident $(($e:ty))?) => {
        1usize
    };
}
pub(crate) use field_len;

/// Writes one field of a message; how depends on its kind (see `message!`).
macro_rules! ser_field {
    ($st:ident, $key:literal, $v:expr, value) => {
        $st.serialize_field($key, $v)?
    };
    ($st:ident, $key:literal, $v:expr, list_always) => {
        $st.serialize_field($key, $v)?
    };
    ($st:ident, $key:literal, $v:expr, opt) => {
        match $v {
            Some(v) => $st.serialize_field($key, v)?,
            None => $st.skip_field($key)?,
        }
    };
    ($st:ident, $key:literal, $v:expr, list) => {
        match $v.is_empty() {
            false => $st.serialize_field($key, $v)?,
            true => $st.skip_field($key)?,
        }
    };
    ($st:ident, $key:literal, $v:expr, map) => {
        $crate::proto::json::ser_field!($st, $key, $v, list)
    };
    ($st:ident, $key:literal, $v:expr, bytes) => {
        $st.serialize_field($key, &$crate::proto::json::Base64Ref($v))?
    };
    ($st:ident, $key:literal, $v:expr, bytes_opt) => {
        match $v {
            Some(v) => $st.serialize_field($key, &$crate::proto::json::Base64Ref(v))?,
            None => $st.skip_field($key)?,
        }
    };
    ($st:ident, $key:literal, $v:expr, enum_value($e:ty)) => {
        $st.serialize_field($key, &$crate::proto::json::EnumField::<$e>::new(*$v))?
    };
    ($st:ident, $key:literal, $v:expr, enum_opt($e:ty)) => {
        match $v {
            Some(n) => $st.serialize_field($key, &$crate::proto::json::EnumField::<$e>::new(*n))?,
            None => $st.skip_field($key)?,
        }
    };
}
pub(crate) use ser_field;

/// Reads one field of a message from the map's next value.
macro_rules! de_field {
    ($map:ident, $place:expr, bytes) => {
        $place = $map.next_value::<$crate::proto::json::Base64>()?.0
    };
    ($map:ident, $place:expr, bytes_opt) => {
        $place = $map
            .next_value::<Option<$crate::proto::json::Base64>>()?
            .map(|b| b.0)
    };
    ($map:ident, $place:expr, enum_value($e:ty)) => {
        $place = $map.next_value::<$crate::proto::json::EnumField<$e>>()?.0
    };
    ($map:ident, $place:expr, enum_opt($e:ty)) => {
        $place = $map
            .next_value::<Option<$crate::proto::json::EnumField<$e>>>()?
            .map(|e| e.0)
    };
    // value, opt, list, list_always, map: serde's own impls for the type.
    ($map:ident, $place:expr, $kind:ident) => {
        $place = $map.next_value()?
    };
}
pub(crate) use de_field;

/// Implements Mesos' JSON mapping for one message.
///
/// Each field is `index name: "key" kind`, where kind is `value` (a
/// required scalar, always written), `opt` (an `Option`, left out when
/// absent), `list` (left out when empty), `list_always` (written even when
/// empty), `map`, `bytes`, `bytes_opt`, `enum_value(Enum)` or
/// `enum_opt(Enum)`.
macro_rules! message {
    ($ty:ty, $name:literal {
        $($i:literal $field:ident: $key:literal $kind:ident $(($e:ty))?,)*
    }) => {
        impl ::serde::Serialize for $ty {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use ::serde::ser::SerializeStruct as _;
                let len = 0 $(+ $crate::proto::json::field_len!(&self.$field, $kind $(($e))?))*;
                #[allow(unused_mut)]
                let mut st = s.serialize_struct($name, len)?;
                $($crate::proto::json::ser_field!(st, $key, &self.$field, $kind $(($e))?);)*
                st.end()
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $ty {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                const FIELDS: &[&str] = &[$($key),*];
                struct MessageVisitor;
                impl<'de> ::serde::de::Visitor<'de> for MessageVisitor {
                    type Value = $ty;

                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        f.write_str(concat!("struct ", $name))
                    }

                    fn visit_map<A: ::serde::de::MapAccess<'de>>(
                        self,
                        mut map: A,
                    ) -> Result<$ty, A::Error> {
                        #[allow(unused_mut)]
                        let mut msg = <$ty>::default();
                        #[allow(unused_mut, unused_variables)]
                        let mut seen = $crate::proto::json::Seen::default();
                        while let Some(i) = map.next_key_seed($crate::proto::json::FieldKey(FIELDS))? {
                            match i {
                                $(Some($i) => {
                                    seen.first::<A::Error>(FIELDS, $i)?;
                                    $crate::proto::json::de_field!(map, msg.$field, $kind $(($e))?);
                                })*
                                _ => {
                                    map.next_value::<::serde::de::IgnoredAny>()?;
                                }
                            }
                        }
                        Ok(msg)
                    }
                }
                d.deserialize_struct($name, FIELDS, MessageVisitor)
            }
        }
    };
}
pub(crate) use message;

/// Gives generated protobuf enums their Mesos wire names ([`WireEnum`],
/// `Display`), which are the names in the `.proto` file.
macro_rules! wire_enum {
    ($($ty:ty),* $(,)?) => {$(
        impl $crate::proto::json::WireEnum for $ty {
            fn wire_name(self) -> &'static str {
                self.as_str_name()
            }
            fn from_wire_name(name: &str) -> Option<Self> {
                Self::from_str_name(name)
            }
            fn from_number(n: i32) -> Option<Self> {
                Self::try_from(n).ok()
            }
            fn number(self) -> i32 {
                self as i32
            }
        }

        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str_name())
            }
        }
    )*};
}
pub(crate) use wire_enum;
