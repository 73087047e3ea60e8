//! Mesos' duration syntax, as the agent writes it into the executor's
//! environment: a number (decimals allowed) followed by a unit, e.g. `5secs`,
//! `15mins`, `2.5secs`, `100ms`.
//!
//! Units: `ns`, `us`, `ms`, `secs`, `mins`, `hrs`, `days`, `weeks` (Mesos'
//! `Duration::parse`). A bare number has no unit and is rejected: guessing
//! seconds versus milliseconds would silently mistime shutdowns.

use std::time::Duration;

/// Why a duration string is not in Mesos' syntax.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Nothing to parse.
    #[error("empty duration")]
    Empty,
    /// No number before the unit, or not a valid decimal.
    #[error("invalid number in duration '{0}'")]
    BadNumber(String),
    /// A unit Mesos does not know (or none at all).
    #[error("unknown unit in duration '{0}' (expected ns, us, ms, secs, mins, hrs, days or weeks)")]
    BadUnit(String),
    /// Negative, not finite, or too large to represent.
    #[error("duration '{0}' is out of range")]
    OutOfRange(String),
}

/// Parses a Mesos duration such as `5secs` or `1.5mins`.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .ok_or_else(|| DurationError::BadUnit(text.to_owned()))?;
    let (number, unit) = text.split_at(split);
    if number.is_empty() {
        return Err(DurationError::BadNumber(text.to_owned()));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| DurationError::BadNumber(text.to_owned()))?;
    let nanos_per_unit: f64 = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "secs" => 1e9,
        "mins" => 60.0 * 1e9,
        "hrs" => 3600.0 * 1e9,
        "days" => 86_400.0 * 1e9,
        "weeks" => 7.0 * 86_400.0 * 1e9,
        _ => return Err(DurationError::BadUnit(text.to_owned())),
    };
    let nanos = value * nanos_per_unit;
    // u64 nanoseconds hold ~584 years; anything larger is a typo, not a timeout.
    if !nanos.is_finite() || nanos < 0.0 || nanos >= u64::MAX as f64 {
        return Err(DurationError::OutOfRange(text.to_owned()));
    }
    Ok(Duration::from_nanos(nanos.round() as u64))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_mesos_unit_parses() {
        let cases = [
            ("7ns", Duration::from_nanos(7)),
            ("3us", Duration::from_micros(3)),
            ("250ms", Duration::from_millis(250)),
            ("5secs", Duration::from_secs(5)),
            ("15mins", Duration::from_secs(15 * 60)),
            ("2hrs", Duration::from_secs(7200)),
            ("1days", Duration::from_secs(86_400)),
            ("1weeks", Duration::from_secs(604_800)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_duration(text).unwrap(), want, "{text}");
        }
    }

    #[test]
    fn decimals_are_accepted() {
        assert_eq!(
            parse_duration("2.5secs").unwrap(),
            Duration::from_millis(2500)
        );
        assert_eq!(parse_duration("0.5mins").unwrap(), Duration::from_secs(30));
    }

    #[test]
    fn bad_input_gets_a_typed_error() {
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert!(matches!(
            parse_duration("5"),
            Err(DurationError::BadUnit(_))
        ));
        assert!(matches!(
            parse_duration("5s"),
            Err(DurationError::BadUnit(_))
        ));
        assert!(matches!(
            parse_duration("secs"),
            Err(DurationError::BadNumber(_))
        ));
        assert!(matches!(
            parse_duration("1.2.3secs"),
            Err(DurationError::BadNumber(_))
        ));
        assert!(matches!(
            parse_duration("-1secs"),
            Err(DurationError::OutOfRange(_))
        ));
        assert!(matches!(
            parse_duration("1e30weeks"),
            Err(DurationError::BadNumber(_) | DurationError::BadUnit(_))
        ));
        assert!(matches!(
            parse_duration("100000000weeks"),
            Err(DurationError::OutOfRange(_))
        ));
    }
}
