//! Kubernetes quantities ("500m", "1.5", "128Mi", "1e3", "2G") as exact
//! Mesos fixed-point amounts, from the `quantity` crate's exact parse.
//!
//! Mesos keeps scalars to three decimal places, so every amount in this crate
//! is an `i64` count of thousandths ("millis") of the Mesos unit. Conversion
//! rounds *up*: a pod asking for 1 byte more than a MiB boundary must not be
//! given less than it asked for.

use quantity::{ParseError, Quantity};
use thiserror::Error;

/// Bytes in one Mesos MB (Mesos' `mem` and `disk` are in MiB).
const MIB: i128 = 1 << 20;

/// The largest amount this crate handles, in millis: 2^53 keeps every value
/// exactly representable as the `f64` Mesos puts on the wire.
const MAX_MILLIS: i128 = 1 << 53;

/// A quantity that is not valid Kubernetes syntax, or too large to schedule.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QuantityError {
    /// Not a Kubernetes quantity.
    #[error("{0:?} is not a Kubernetes quantity")]
    Syntax(String),
    /// Negative amounts cannot be requested.
    #[error("{0:?} is negative")]
    Negative(String),
    /// Larger than any Mesos agent offers.
    #[error("{0:?} is too large")]
    TooLarge(String),
}

/// The unit a quantity is converted into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// Cores (cpus) or devices (gpus): the quantity's own unit.
    Count,
    /// Mesos MB (MiB), from a quantity in bytes.
    Mebibytes,
}

/// Parses `s` (spaces around it allowed) and returns it in thousandths of
/// `unit`, rounded up.
pub(crate) fn parse_millis(s: &str, unit: Unit) -> Result<i64, QuantityError> {
    let too_large = || QuantityError::TooLarge(s.to_owned());
    let q = Quantity::parse(s.trim()).map_err(|e| match e {
        ParseError::Syntax => QuantityError::Syntax(s.to_owned()),
        ParseError::ExponentOutOfRange => too_large(),
    })?;
    // mantissa * 10^exp10 * 2^exp2
    let mut mantissa: i128 = 0;
    let mut exp10: i32 = 0;
    let integer = q.integer_digits().bytes().map(|c| (c, false));
    let fraction = q.fraction_digits().bytes().map(|c| (c, true));
    for (c, after_point) in integer.chain(fraction) {
        // Digits past what can matter are dropped, rounding up below if any was non-zero.
        if mantissa > 1_000_000_000_000_000_000_000 {
            if after_point {
                if c != b'0' {
                    mantissa += 1;
                }
                continue;
            }
            return Err(too_large());
        }
        mantissa = mantissa * 10 + i128::from(c - b'0');
        if after_point {
            exp10 -= 1;
        }
    }
    if q.is_negative() {
        return Err(QuantityError::Negative(s.to_owned()));
    }
    exp10 += q.exp10();
    let e2 = q.exp2();
    // value * 1000 / divisor, rounded up.
    let divisor = match unit {
        Unit::Count => 1,
        Unit::Mebibytes => MIB,
    };
    let mut num = mantissa
        .checked_mul(1000)
        .and_then(|n| n.checked_mul(1i128 << e2))
        .ok_or_else(too_large)?;
    let mut den = divisor;
    if exp10 >= 0 {
        num = num
            .checked_mul(
                10i128
                    .checked_pow(exp10.unsigned_abs())
                    .ok_or_else(too_large)?,
            )
            .ok_or_else(too_large)?;
    } else {
        den = den
            .checked_mul(
                10i128
                    .checked_pow(exp10.unsigned_abs())
                    .ok_or_else(too_large)?,
            )
            .ok_or_else(too_large)?;
    }
    let millis = (num + den - 1) / den;
    if millis > MAX_MILLIS {
        return Err(too_large());
    }
    i64::try_from(millis).map_err(|_| too_large())
}

/// Millis to the `f64` Mesos puts on the wire.
pub(crate) fn millis_to_f64(m: i64) -> f64 {
    m as f64 / 1000.0
}

/// A Mesos scalar to millis, as Mesos itself rounds it (to the nearest thousandth).
pub fn f64_to_millis(v: f64) -> i64 {
    if !v.is_finite() || v <= 0.0 {
        return 0;
    }
    let m = (v * 1000.0).round();
    if m >= MAX_MILLIS as f64 {
        MAX_MILLIS as i64
    } else {
        m as i64
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn kubernetes_quantities_convert_exactly_and_round_up() {
        let cases: &[(&str, Unit, i64)] = &[
            ("1", Unit::Count, 1000),
            ("500m", Unit::Count, 500),
            ("0.25", Unit::Count, 250),
            ("1.5", Unit::Count, 1500),
            ("1e3", Unit::Count, 1_000_000),
            ("2k", Unit::Count, 2_000_000),
            ("1n", Unit::Count, 1), // rounds up, never to zero
            ("0", Unit::Count, 0),
            ("128Mi", Unit::Mebibytes, 128_000),
            ("1Gi", Unit::Mebibytes, 1_024_000),
            ("1048576", Unit::Mebibytes, 1000),
            ("1048577", Unit::Mebibytes, 1001),
            ("1M", Unit::Mebibytes, 954), // 10^6 B = 0.9537 MiB
            ("0.5Gi", Unit::Mebibytes, 512_000),
        ];
        for (s, unit, want) in cases {
            assert_eq!(parse_millis(s, *unit).unwrap(), *want, "{s}");
        }
    }

    #[test]
    fn bad_quantities_are_typed_errors() {
        for s in ["", "abc", "1.2.3", "5x", ".", "1Zi"] {
            assert!(
                matches!(parse_millis(s, Unit::Count), Err(QuantityError::Syntax(_))),
                "{s}"
            );
        }
        assert!(matches!(
            parse_millis("-1", Unit::Count),
            Err(QuantityError::Negative(_))
        ));
        assert!(matches!(
            parse_millis("9Ei", Unit::Count),
            Err(QuantityError::TooLarge(_))
        ));
        assert!(matches!(
            parse_millis("1e99", Unit::Count),
            Err(QuantityError::TooLarge(_))
        ));
    }
}
