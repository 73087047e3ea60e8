//! The amount of one resource: a fixed-point scalar, a range set or an item set.

use std::collections::BTreeSet;

use super::ranges::{self, Interval};

/// Mesos compares and adds scalars in fixed point with three decimals
/// (`Value::Scalar` arithmetic rounds to 0.001), so adding 0.1 ten times is
/// exactly 1. Storing milli-units as `i64` gives that for free.
pub(crate) const MILLIS_PER_UNIT: f64 = 1000.0;

/// The largest scalar accepted: 2^53 milli-units, beyond which an `f64`
/// on the wire can no longer carry every milli-unit exactly.
pub(crate) const MAX_SCALAR: f64 = 9_007_199_254_740.992;

/// A resource quantity. Variants always match the resource's `Value.Type`
/// (the type is part of the resource's identity).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Quantity {
    /// Milli-units.
    Scalar(i64),
    /// Normalised ranges.
    Ranges(Vec<Interval>),
    /// Distinct items.
    Set(BTreeSet<String>),
}

impl Quantity {
    /// True when nothing is left; empty quantities are never stored.
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Quantity::Scalar(m) => *m <= 0,
            Quantity::Ranges(r) => r.is_empty(),
            Quantity::Set(s) => s.is_empty(),
        }
    }

    /// `self += other` (union for ranges and sets).
    pub(crate) fn add(&mut self, other: &Quantity) {
        match (self, other) {
            (Quantity::Scalar(a), Quantity::Scalar(b)) => *a = a.saturating_add(*b),
            (Quantity::Ranges(a), Quantity::Ranges(b)) => *a = ranges::union(a, b),
            (Quantity::Set(a), Quantity::Set(b)) => a.extend(b.iter().cloned()),
            // Unreachable by construction (type is in the key); adding
            // nothing is the safe answer.
            _ => {}
        }
    }

    /// `self -= other`, never below empty.
    pub(crate) fn sub(&mut self, other: &Quantity) {
        match (self, other) {
            (Quantity::Scalar(a), Quantity::Scalar(b)) => *a = a.saturating_sub(*b).max(0),
            (Quantity::Ranges(a), Quantity::Ranges(b)) => *a = ranges::subtract(a, b),
            (Quantity::Set(a), Quantity::Set(b)) => a.retain(|i| !b.contains(i)),
            _ => {}
        }
    }

    /// Whether `other` fits in `self`.
    pub(crate) fn contains(&self, other: &Quantity) -> bool {
        match (self, other) {
            (Quantity::Scalar(a), Quantity::Scalar(b)) => a >= b,
            (Quantity::Ranges(a), Quantity::Ranges(b)) => ranges::contains(a, b),
            (Quantity::Set(a), Quantity::Set(b)) => b.is_subset(a),
            _ => false,
        }
    }
}

/// Rounds a wire scalar to milli-units; `None` if negative, not finite or
/// too large to be exact.
pub(crate) fn scalar_to_milli(value: f64) -> Option<i64> {
    if !value.is_finite() || !(0.0..=MAX_SCALAR).contains(&value) {
        return None;
    }
    // In range by the check above, so the cast neither saturates nor wraps.
    Some((value * MILLIS_PER_UNIT).round() as i64)
}

/// Milli-units back to the wire's `f64`.
pub(crate) fn milli_to_scalar(milli: i64) -> f64 {
    milli as f64 / MILLIS_PER_UNIT
}

/// Mesos' text form of a scalar: no trailing zeros, at most three decimals.
pub(crate) fn format_milli(milli: i64) -> String {
    let sign = if milli < 0 { "-" } else { "" };
    let abs = milli.unsigned_abs();
    let (whole, frac) = (abs / 1000, abs % 1000);
    if frac == 0 {
        format!("{sign}{whole}")
    } else {
        let frac = format!("{frac:03}");
        format!("{sign}{whole}.{}", frac.trim_end_matches('0'))
    }
}

/// `[1-2,5-6]`.
pub(crate) fn format_ranges(r: &[Interval]) -> String {
    let items: Vec<String> = r.iter().map(|(b, e)| format!("{b}-{e}")).collect();
    format!("[{}]", items.join(","))
}

/// `{a,b}`.
pub(crate) fn format_set<'a>(items: impl IntoIterator<Item = &'a String>) -> String {
    let items: Vec<&str> = items.into_iter().map(String::as_str).collect();
    format!("{{{}}}", items.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_are_fixed_point_with_three_decimals() {
        let tenth = scalar_to_milli(0.1).unwrap_or_default();
        let mut sum = Quantity::Scalar(0);
        for _ in 0..10 {
            sum.add(&Quantity::Scalar(tenth));
        }
        assert_eq!(sum, Quantity::Scalar(1000));
        assert_eq!(scalar_to_milli(0.0004), Some(0));
        assert_eq!(scalar_to_milli(0.0005), Some(1));
        assert_eq!(scalar_to_milli(-1.0), None);
        assert_eq!(scalar_to_milli(f64::NAN), None);
        assert_eq!(scalar_to_milli(1e300), None);
        assert_eq!(format_milli(2500), "2.5");
        assert_eq!(format_milli(4000), "4");
        assert_eq!(format_milli(1), "0.001");
    }

    #[test]
    fn scalar_subtraction_stops_at_zero() {
        let mut q = Quantity::Scalar(500);
        q.sub(&Quantity::Scalar(800));
        assert_eq!(q, Quantity::Scalar(0));
        assert!(q.is_empty());
    }
}
