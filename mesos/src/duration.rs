//! Mesos' duration syntax (stout's `Duration::parse`): a number, decimals
//! allowed, followed by a unit, e.g. `5secs`, `15mins`, `2.5secs`, `100ms`.
//! Agents write it into an executor's environment and masters and agents
//! take it in their flags.
//!
//! Units: `ns`, `us`, `ms`, `secs`, `mins`, `hrs`, `days`, `weeks`. A bare
//! number has no unit and is rejected, as Mesos rejects it: guessing seconds
//! versus milliseconds would silently mistime shutdowns.
//!
//! Where this is more lenient than Mesos, it is on purpose: spaces around the
//! text are ignored, a sign is read (so `-1secs` is out of range rather than
//! not a number), and the result is rounded to the nearest nanosecond
//! (Mesos truncates; the two differ by under 1 ns). [`parse_flag`] also takes
//! the short units `s`, `m`, `h`, `d` of mesopod's command-line flags.

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
///
/// # Errors
/// A [`DurationError`] naming the text: empty, no number, an unknown or
/// missing unit, or a value that is negative or over about 584 years.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
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

/// Parses a duration flag: Mesos' syntax ([`parse`]), or a number with one of
/// the short units `s`, `m`, `h`, `d` (`10s`, `5m`), which mesopod's flags
/// have always accepted.
///
/// # Errors
/// As [`parse`], naming the text as the user wrote it.
pub fn parse_flag(text: &str) -> Result<Duration, DurationError> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let unit = match unit {
        "s" => "secs",
        "m" => "mins",
        "h" => "hrs",
        "d" => "days",
        _ => return parse(t),
    };
    parse(&format!("{number}{unit}")).map_err(|e| match e {
        DurationError::BadNumber(_) => DurationError::BadNumber(t.to_owned()),
        DurationError::OutOfRange(_) => DurationError::OutOfRange(t.to_owned()),
        other => other,
    })
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
            assert_eq!(parse(text).unwrap(), want, "{text}");
            assert_eq!(parse_flag(text).unwrap(), want, "{text}");
        }
    }

    #[test]
    fn decimals_are_accepted() {
        assert_eq!(parse("2.5secs").unwrap(), Duration::from_millis(2500));
        assert_eq!(parse("0.5mins").unwrap(), Duration::from_secs(30));
    }

    #[test]
    fn bad_input_gets_a_typed_error() {
        assert_eq!(parse(""), Err(DurationError::Empty));
        assert!(matches!(parse("5"), Err(DurationError::BadUnit(_))));
        assert!(matches!(parse("5s"), Err(DurationError::BadUnit(_))));
        assert!(matches!(parse("secs"), Err(DurationError::BadNumber(_))));
        assert!(matches!(
            parse("1.2.3secs"),
            Err(DurationError::BadNumber(_))
        ));
        assert!(matches!(parse("-1secs"), Err(DurationError::OutOfRange(_))));
        assert!(matches!(
            parse("1e30weeks"),
            Err(DurationError::BadNumber(_) | DurationError::BadUnit(_))
        ));
        assert!(matches!(
            parse("100000000weeks"),
            Err(DurationError::OutOfRange(_))
        ));
    }

    #[test]
    fn flags_also_take_the_short_units() {
        let cases = [
            ("10s", Duration::from_secs(10)),
            ("1.5s", Duration::from_millis(1500)),
            ("5m", Duration::from_secs(300)),
            ("1h", Duration::from_secs(3600)),
            ("2d", Duration::from_secs(2 * 86_400)),
            (" 500ms ", Duration::from_millis(500)),
            ("2mins", Duration::from_secs(120)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_flag(text).unwrap(), want, "{text}");
        }
    }

    #[test]
    fn flag_errors_name_the_text_as_written() {
        assert_eq!(
            parse_flag("1.2.3s"),
            Err(DurationError::BadNumber("1.2.3s".into()))
        );
        assert_eq!(
            parse_flag("-1s"),
            Err(DurationError::OutOfRange("-1s".into()))
        );
        assert_eq!(parse_flag("5"), Err(DurationError::BadUnit("5".into())));
        assert_eq!(parse_flag("5x"), Err(DurationError::BadUnit("5x".into())));
        assert_eq!(
            parse_flag("5parsecs"),
            Err(DurationError::BadUnit("5parsecs".into()))
        );
        assert_eq!(parse_flag(""), Err(DurationError::Empty));
    }
}
