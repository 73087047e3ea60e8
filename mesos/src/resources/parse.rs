//! Mesos' text syntax for `--resources` and `--attributes`.
//!
//! Resources: `name(role):value` items separated by `;`, where a value is a
//! scalar (`4`, `0.5`), ranges (`[31000-32000, 40000-40010]`) or a set
//! (`{a,b}`). A repeated name adds up, as in Mesos. A spec starting with `[`
//! is the JSON array form instead.
//!
//! Attributes: `name:value` items; a value is ranges, a set, a scalar if it
//! reads as a number, otherwise text.

use super::error::ResourceError;
use super::quantity::{format_milli, format_ranges, format_set, scalar_to_milli};
use super::ranges::Interval;
use crate::proto::json::WireEnum;
use crate::proto::{Attribute, Resource, value};

/// A parsed value, before it becomes a resource or an attribute.
enum Parsed {
    Scalar(f64),
    Ranges(Vec<Interval>),
    Set(Vec<String>),
    Text(String),
}

/// `name(role):value;...` (or a JSON array) to wire resources, unvalidated
/// beyond syntax.
pub(crate) fn parse_resources(spec: &str) -> Result<Vec<Resource>, ResourceError> {
    if spec.trim_start().starts_with('[') {
        return serde_json::from_str::<Vec<Resource>>(spec).map_err(|e| ResourceError::Syntax {
            item: spec.to_owned(),
            reason: format!("not a JSON array of resources: {e}"),
        });
    }
    let mut out = Vec::new();
    for item in items(spec) {
        let (head, raw) = split_item(item)?;
        let (name, role) = match head.split_once('(') {
            Some((name, rest)) => {
                let role = rest
                    .strip_suffix(')')
                    .ok_or_else(|| syntax(item, "unclosed '(' in role"))?;
                (name.trim(), Some(role.trim()))
            }
            None => (head, None),
        };
        if name.is_empty() {
            return Err(ResourceError::EmptyName {
                item: item.to_owned(),
            });
        }
        let mut resource = Resource {
            name: name.to_owned(),
            role: role.filter(|r| *r != super::UNRESERVED).map(str::to_owned),
            ..Default::default()
        };
        match parse_value(item, raw)? {
            Parsed::Scalar(v) => {
                resource.r#type = value::Type::Scalar as i32;
                resource.scalar = Some(value::Scalar { value: v });
            }
            Parsed::Ranges(r) => {
                resource.r#type = value::Type::Ranges as i32;
                resource.ranges = Some(to_ranges(&r));
            }
            Parsed::Set(s) => {
                resource.r#type = value::Type::Set as i32;
                resource.set = Some(value::Set { item: s });
            }
            Parsed::Text(_) => return Err(syntax(item, "expected a number, [ranges] or {set}")),
        }
        out.push(resource);
    }
    Ok(out)
}

/// Parses `rack:r1;zone:z2;level:3;ports:[1-2];tags:{a,b}`.
///
/// # Errors
/// [`ResourceError::Syntax`] for an item without `:` or with a malformed
/// value, [`ResourceError::EmptyName`] for `:value`.
pub fn parse_attributes(spec: &str) -> Result<Vec<Attribute>, ResourceError> {
    let mut out = Vec::new();
    for item in items(spec) {
        let (name, raw) = split_item(item)?;
        if name.is_empty() {
            return Err(ResourceError::EmptyName {
                item: item.to_owned(),
            });
        }
        let mut attr = Attribute {
            name: name.to_owned(),
            ..Default::default()
        };
        match parse_value(item, raw)? {
            Parsed::Scalar(v) => {
                if scalar_to_milli(v.abs()).is_none() {
                    return Err(ResourceError::InvalidScalar {
                        name: name.to_owned(),
                        value: v,
                    });
                }
                attr.r#type = value::Type::Scalar as i32;
                attr.scalar = Some(value::Scalar { value: v });
            }
            Parsed::Ranges(r) => {
                attr.r#type = value::Type::Ranges as i32;
                attr.ranges = Some(to_ranges(&r));
            }
            Parsed::Set(s) => {
                attr.r#type = value::Type::Set as i32;
                attr.set = Some(value::Set { item: s });
            }
            Parsed::Text(t) => {
                attr.r#type = value::Type::Text as i32;
                attr.text = Some(value::Text { value: t });
            }
        }
        out.push(attr);
    }
    Ok(out)
}

/// An attribute's value in Mesos' text form: `r1`, `3`, `2.5`, `[1-2]`, `{a,b}`.
/// An attribute whose declared value is missing renders as the empty string.
pub fn attribute_text(a: &Attribute) -> String {
    match value::Type::from_number(a.r#type) {
        Some(value::Type::Scalar) => a
            .scalar
            .map(|s| {
                let milli = (s.value.abs() * 1000.0).round() as i64;
                let text = format_milli(milli);
                if s.value < 0.0 && milli != 0 {
                    format!("-{text}")
                } else {
                    text
                }
            })
            .unwrap_or_default(),
        Some(value::Type::Ranges) => a
            .ranges
            .as_ref()
            .map(|r| format_ranges(&r.range.iter().map(|r| (r.begin, r.end)).collect::<Vec<_>>()))
            .unwrap_or_default(),
        Some(value::Type::Set) => a
            .set
            .as_ref()
            .map(|s| format_set(&s.item))
            .unwrap_or_default(),
        Some(value::Type::Text) => a.text.as_ref().map(|t| t.value.clone()).unwrap_or_default(),
        None => String::new(),
    }
}

fn items(spec: &str) -> impl Iterator<Item = &str> {
    spec.split(';').map(str::trim).filter(|s| !s.is_empty())
}

fn split_item(item: &str) -> Result<(&str, &str), ResourceError> {
    let (head, raw) = item
        .split_once(':')
        .ok_or_else(|| syntax(item, "expected name:value"))?;
    Ok((head.trim(), raw.trim()))
}

fn syntax(item: &str, reason: &str) -> ResourceError {
    ResourceError::Syntax {
        item: item.to_owned(),
        reason: reason.to_owned(),
    }
}

fn parse_value(item: &str, raw: &str) -> Result<Parsed, ResourceError> {
    if let Some(inner) = raw.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or_else(|| syntax(item, "unclosed '['"))?;
        let mut out = Vec::new();
        for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (b, e) = part.split_once('-').unwrap_or((part, part));
            let num = |s: &str| {
                s.trim()
                    .parse::<u64>()
                    .map_err(|_| syntax(item, "a range is begin-end with unsigned integers"))
            };
            out.push((num(b)?, num(e)?));
        }
        return Ok(Parsed::Ranges(out));
    }
    if let Some(inner) = raw.strip_prefix('{') {
        let inner = inner
            .strip_suffix('}')
            .ok_or_else(|| syntax(item, "unclosed '{'"))?;
        let items = inner
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
        return Ok(Parsed::Set(items));
    }
    if raw.is_empty() {
        return Err(syntax(item, "missing value"));
    }
    match raw.parse::<f64>() {
        // "inf"/"nan" parse as f64 but are text to Mesos' attribute parser.
        Ok(v) if v.is_finite() => Ok(Parsed::Scalar(v)),
        _ => Ok(Parsed::Text(raw.to_owned())),
    }
}

fn to_ranges(r: &[Interval]) -> value::Ranges {
    value::Ranges {
        range: r
            .iter()
            .map(|&(begin, end)| value::Range { begin, end })
            .collect(),
    }
}
