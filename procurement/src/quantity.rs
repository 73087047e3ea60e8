//! Kubernetes quantities ("500m", "1.5", "128Mi", "1e3", "2G") as exact
//! Mesos fixed-point amounts.
//!
//! Mesos keeps scalars to three decimal places, so every amount in this crate
//! is an `i64` count of thousandths ("millis") of the Mesos unit. Conversion
//! rounds *up*: a pod asking for 1 byte more than a MiB boundary must not be
//! given less than it asked for.

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

/// Parses `s` and returns it in thousandths of `unit`, rounded up.
pub(crate) fn parse_millis(s: &str, unit: Unit) -> Result<i64, QuantityError> {
    let syntax = || QuantityError::Syntax(s.to_owned());
    let too_large = || QuantityError::TooLarge(s.to_owned());
    let t = s.trim();
    let (negative, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    // Split the number from its suffix.
    let num_end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, suffix) = t.split_at(num_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(syntax());
    }
    // mantissa * 10^exp10 * 2^exp2
    let mut mantissa: i128 = 0;
    let mut exp10: i32 = 0;
    let mut after_point = false;
    for c in number.bytes() {
        if c == b'.' {
            after_point = true;
            continue;
        }
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
    let (e10, e2): (i32, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        s if s.starts_with(['e', 'E']) => {
            let e: i32 = s[1..].parse().map_err(|_| syntax())?;
            if !(-30..=30).contains(&e) {
                return Err(too_large());
            }
            (e, 0)
        }
        _ => return Err(syntax()),
    };
    if negative && mantissa != 0 {
        return Err(QuantityError::Negative(s.to_owned()));
    }
    exp10 += e10;
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
pub(crate) fn f64_to_millis(v: f64) -> i64 {
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
