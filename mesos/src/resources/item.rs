//! One resource item: the wire resources callers build, the identity two
//! items merge by, and the validation every item passes on its way in.

use std::collections::BTreeSet;

use prost::Message as _;

use super::quantity::{
    Quantity, format_milli, format_ranges, format_set, milli_to_scalar, scalar_to_milli,
};
use super::{Entry, Key, ResourceError, UNRESERVED};
use crate::proto::json::WireEnum;
use crate::proto::{Resource, value};

/// An unreserved (`role` None) or statically reserved (pre-refinement
/// `role` field, understood by every framework) scalar resource.
pub fn scalar(name: &str, value: f64, role: Option<&str>) -> Resource {
    Resource {
        name: name.to_owned(),
        r#type: value::Type::Scalar as i32,
        scalar: Some(value::Scalar { value }),
        role: role_field(role),
        ..Default::default()
    }
}

/// A ranges resource (inclusive `(begin, end)` pairs); see [`scalar`] for `role`.
pub fn ranges(name: &str, ranges: &[(u64, u64)], role: Option<&str>) -> Resource {
    Resource {
        name: name.to_owned(),
        r#type: value::Type::Ranges as i32,
        ranges: Some(value::Ranges {
            range: ranges
                .iter()
                .map(|&(begin, end)| value::Range { begin, end })
                .collect(),
        }),
        role: role_field(role),
        ..Default::default()
    }
}

/// A set resource; see [`scalar`] for `role`.
pub fn set(name: &str, items: &[&str], role: Option<&str>) -> Resource {
    Resource {
        name: name.to_owned(),
        r#type: value::Type::Set as i32,
        set: Some(value::Set {
            item: items.iter().map(|s| (*s).to_owned()).collect(),
        }),
        role: role_field(role),
        ..Default::default()
    }
}

/// The role a resource belongs to: the last reservation's role, else the
/// deprecated `role` field, else `"*"`.
pub fn resource_role(r: &Resource) -> &str {
    r.reservations
        .last()
        .and_then(|res| res.role.as_deref())
        .or(r.role.as_deref())
        .unwrap_or(UNRESERVED)
}

fn role_field(role: Option<&str>) -> Option<String> {
    role.filter(|r| *r != UNRESERVED).map(str::to_owned)
}

/// Mesos' text form of an amount.
pub(super) fn describe(q: &Quantity) -> String {
    match q {
        Quantity::Scalar(m) => format_milli(*m),
        Quantity::Ranges(r) => format_ranges(r),
        Quantity::Set(s) => format_set(s),
    }
}

pub(super) fn key_of(proto: &Resource) -> Key {
    let mut identity = proto.clone();
    identity.scalar = None;
    identity.ranges = None;
    identity.set = None;
    if identity.role.as_deref() == Some(UNRESERVED) {
        identity.role = None;
    }
    Key {
        name: proto.name.clone(),
        role: resource_role(proto).to_owned(),
        identity: identity.encode_to_vec(),
    }
}

/// Writes `qty` into the proto's value fields (and only the matching one).
pub(super) fn set_value(proto: &mut Resource, qty: &Quantity) {
    proto.scalar = None;
    proto.ranges = None;
    proto.set = None;
    match qty {
        Quantity::Scalar(m) => {
            proto.scalar = Some(value::Scalar {
                value: milli_to_scalar(*m),
            });
        }
        Quantity::Ranges(r) => {
            proto.ranges = Some(value::Ranges {
                range: r
                    .iter()
                    .map(|&(begin, end)| value::Range { begin, end })
                    .collect(),
            });
        }
        Quantity::Set(s) => {
            proto.set = Some(value::Set {
                item: s.iter().cloned().collect(),
            });
        }
    }
}

pub(super) fn validate(mut proto: Resource) -> Result<(Key, Entry), ResourceError> {
    if proto.name.trim().is_empty() {
        return Err(ResourceError::EmptyName {
            item: format!("{proto:?}"),
        });
    }
    let name = proto.name.clone();
    for role in proto
        .role
        .iter()
        .chain(proto.reservations.iter().filter_map(|r| r.role.as_ref()))
    {
        validate_role(&name, role)?;
    }
    let kind =
        value::Type::from_number(proto.r#type).ok_or_else(|| ResourceError::UnsupportedType {
            name: name.clone(),
            kind: proto.r#type.to_string(),
        })?;
    let qty = match kind {
        value::Type::Scalar => {
            let v = proto
                .scalar
                .ok_or(ResourceError::MissingValue {
                    name: name.clone(),
                    kind: "SCALAR",
                })?
                .value;
            Quantity::Scalar(scalar_to_milli(v).ok_or(ResourceError::InvalidScalar {
                name: name.clone(),
                value: v,
            })?)
        }
        value::Type::Ranges => {
            let r = proto.ranges.take().ok_or(ResourceError::MissingValue {
                name: name.clone(),
                kind: "RANGES",
            })?;
            let mut intervals = Vec::with_capacity(r.range.len());
            for range in r.range {
                if range.begin > range.end {
                    return Err(ResourceError::InvalidRange {
                        name,
                        begin: range.begin,
                        end: range.end,
                    });
                }
                intervals.push((range.begin, range.end));
            }
            Quantity::Ranges(super::ranges::normalise(intervals))
        }
        value::Type::Set => {
            let s = proto.set.take().ok_or(ResourceError::MissingValue {
                name: name.clone(),
                kind: "SET",
            })?;
            let mut items = BTreeSet::new();
            for item in s.item {
                if items.contains(&item) {
                    return Err(ResourceError::DuplicateSetItem { name, item });
                }
                items.insert(item);
            }
            Quantity::Set(items)
        }
        value::Type::Text => {
            return Err(ResourceError::UnsupportedType {
                name,
                kind: "TEXT".to_owned(),
            });
        }
    };
    set_value(&mut proto, &qty);
    Ok((key_of(&proto), Entry { proto, qty }))
}

/// Mesos' role rules: `*`, or a `/`-separated path of non-empty segments
/// that are not `.` or `..`, do not start with `-`, and hold no whitespace,
/// control characters, backslash or `*`.
fn validate_role(name: &str, role: &str) -> Result<(), ResourceError> {
    if role == UNRESERVED {
        return Ok(());
    }
    let segment_ok = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && !s.starts_with('-')
            && !s
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || c == '\\' || c == '*')
    };
    if role.split('/').all(segment_ok) {
        Ok(())
    } else {
        Err(ResourceError::InvalidRole {
            name: name.to_owned(),
            role: role.to_owned(),
        })
    }
}
