//! CronJob schedules, as kube-controller-manager reads them: robfig/cron v3's
//! standard parser (five fields, the `@hourly`-style descriptors and `@every`),
//! with its error texts, and the next activation in an IANA time zone.
//!
//! # Why not a cron crate
//! Kubernetes' answer to a schedule is robfig's: a CronJob that another cron
//! dialect accepts (`L`, `W`, `#`, a seconds field) is one Kubernetes refuses at
//! create, and the two differ on when `0 0 1 * MON` fires. Both the API's
//! validation and the controller read this one parser, so what is accepted at
//! create is exactly what runs.
//!
//! # Time zones
//! Zones come from the tz database bundled into the binary
//! ([`jiff::tz::TimeZoneDatabase::bundled`]), never from the host's, so every
//! replica computes the same ticks, and so derives the same Job name for a tick.
//! A CronJob without `spec.timeZone` runs in UTC (KCM uses its own local zone,
//! which differs between hosts).

use std::time::Duration;

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::{TimeZone, TimeZoneDatabase};
use jiff::{Timestamp, ToSpan as _};

/// A parsed schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule(Kind);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Fields(Fields),
    /// `@every <duration>`: a constant delay, whole seconds, at least one.
    Every(Duration),
}

/// One bit per allowed value, and [`STAR`] when the field was `*` or `?`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fields {
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    dow: u64,
}

/// robfig's star bit: a day field written as `*` does not widen the other one.
const STAR: u64 = 1 << 63;

struct Bounds {
    min: u32,
    max: u32,
    names: &'static [(&'static str, u32)],
}

const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DOM: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

/// How far ahead a schedule is searched, as robfig does: a schedule with no
/// activation within five years (`0 0 30 2 *`) has none.
const YEARS_AHEAD: i16 = 5;

impl Schedule {
    /// Parses a schedule as `cron.ParseStandard` does; the error is robfig's text,
    /// which kube-apiserver returns as the field's message.
    pub fn parse(spec: &str) -> Result<Self, String> {
        if spec.is_empty() {
            return Err("empty spec string".into());
        }
        if let Some(descriptor) = spec.strip_prefix('@') {
            return descriptor_schedule(descriptor, spec);
        }
        let fields: Vec<&str> = spec.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "expected exactly 5 fields, found {}: [{}]",
                fields.len(),
                fields.join(" ")
            ));
        }
        Ok(Self(Kind::Fields(Fields {
            minute: field(fields[0], &MINUTES)?,
            hour: field(fields[1], &HOURS)?,
            dom: field(fields[2], &DOM)?,
            month: field(fields[3], &MONTHS)?,
            dow: field(fields[4], &DOW)?,
        })))
    }

    /// The first activation strictly after `after`, in `zone`; `None` when there
    /// is none within five years.
    pub fn next_after(&self, after: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        match &self.0 {
            Kind::Every(delay) => {
                // robfig: the delay from the whole second at or before `after`.
                let whole = Timestamp::from_second(after.as_second()).ok()?;
                let secs = i64::try_from(delay.as_secs()).ok()?;
                whole.checked_add(secs.seconds()).ok()
            }
            Kind::Fields(f) => f.next_after(after, zone),
        }
    }
}

impl Fields {
    fn next_after(&self, after: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        // Cron has no seconds: start at the first whole minute after `after`, in
        // wall-clock time, and move field by field as robfig does.
        let local = zone.to_datetime(after);
        let minute_start = local.with().second(0).subsec_nanosecond(0).build().ok()?;
        let mut t = minute_start.checked_add(1.minute()).ok()?;
        let limit = t.year().saturating_add(YEARS_AHEAD);
        loop {
            if t.year() > limit {
                return None;
            }
            if !has(self.month, t.month()) {
                t = first_of_next_month(t.date())?;
                continue;
            }
            if !self.day_matches(t.date()) {
                t = t.date().tomorrow().ok()?.to_datetime(Time::midnight());
                continue;
            }
            if !has(self.hour, t.hour()) {
                t = t
                    .with()
                    .minute(0)
                    .build()
                    .ok()?
                    .checked_add(1.hour())
                    .ok()?;
                continue;
            }
            if !has(self.minute, t.minute()) {
                t = t.checked_add(1.minute()).ok()?;
                continue;
            }
            // A wall-clock time skipped by a DST change runs at the shifted
            // instant; in a repeated hour the earlier instant is taken, and a
            // candidate that maps to or before `after` is passed over.
            let at = zone.to_ambiguous_timestamp(t).compatible().ok()?;
            if at > after {
                return Some(at);
            }
            t = t.checked_add(1.minute()).ok()?;
        }
    }

    /// robfig's day rule: when either day field is `*`, both must match;
    /// otherwise either may.
    fn day_matches(&self, date: Date) -> bool {
        let dom = has(self.dom, date.day());
        let dow = has(self.dow, date.weekday().to_sunday_zero_offset());
        if self.dom & STAR != 0 || self.dow & STAR != 0 {
            dom && dow
        } else {
            dom || dow
        }
    }
}

fn has(bits: u64, value: impl Into<i64>) -> bool {
    u32::try_from(value.into())
        .ok()
        .filter(|v| *v < 63)
        .is_some_and(|v| bits & (1 << v) != 0)
}

fn first_of_next_month(date: Date) -> Option<DateTime> {
    let first = date.first_of_month().checked_add(1.month()).ok()?;
    Some(first.to_datetime(Time::midnight()))
}

/// A field: comma-separated ranges.
fn field(text: &str, bounds: &Bounds) -> Result<u64, String> {
    text.split(',')
        .filter(|r| !r.is_empty())
        .try_fold(0, |bits, expr| Ok(bits | range(expr, bounds)?))
}

/// `number | number "-" number [ "/" number ]`, `*` or `?`, as robfig's getRange.
fn range(expr: &str, bounds: &Bounds) -> Result<u64, String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_and_high: Vec<&str> = range_and_step[0].split('-').collect();
    let single = low_and_high.len() == 1;
    let (start, mut end, mut extra) = if low_and_high[0] == "*" || low_and_high[0] == "?" {
        (bounds.min, bounds.max, STAR)
    } else {
        let start = int_or_name(low_and_high[0], bounds)?;
        let end = match low_and_high.len() {
            1 => start,
            2 => int_or_name(low_and_high[1], bounds)?,
            _ => return Err(format!("too many hyphens: {expr}")),
        };
        (start, end, 0)
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = int(range_and_step[1])?;
            // "N/step" means "N-max/step".
            if single {
                end = bounds.max;
            }
            if step > 1 {
                extra = 0;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < bounds.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            bounds.min
        ));
    }
    if end > bounds.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            bounds.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    let mut bits = 0u64;
    let mut v = start;
    while v <= end {
        bits |= 1 << v;
        v = v.saturating_add(step);
    }
    Ok(bits | extra)
}

fn int_or_name(expr: &str, bounds: &Bounds) -> Result<u32, String> {
    let lower = expr.to_ascii_lowercase();
    match bounds.names.iter().find(|(name, _)| *name == lower) {
        Some((_, v)) => Ok(*v),
        None => int(expr),
    }
}

/// Go's `strconv.Atoi`, then robfig's refusal of negatives.
fn int(expr: &str) -> Result<u32, String> {
    let n: i64 = expr.parse().map_err(|_| {
        let why = if expr
            .trim_start_matches(['+', '-'])
            .bytes()
            .all(|b| b.is_ascii_digit())
            && !expr.trim_start_matches(['+', '-']).is_empty()
        {
            "value out of range"
        } else {
            "invalid syntax"
        };
        format!("failed to parse int from {expr}: strconv.Atoi: parsing {expr:?}: {why}")
    })?;
    if n < 0 {
        return Err(format!("negative number ({n}) not allowed: {expr}"));
    }
    // Any value past a field's maximum is refused by the bounds check.
    Ok(u32::try_from(n).unwrap_or(u32::MAX))
}

fn descriptor_schedule(descriptor: &str, spec: &str) -> Result<Schedule, String> {
    let all = |b: &Bounds| range("*", b).unwrap_or(0);
    let first = |b: &Bounds| 1u64 << b.min;
    let fields = match descriptor {
        "yearly" | "annually" => Fields {
            minute: first(&MINUTES),
            hour: first(&HOURS),
            dom: first(&DOM),
            month: first(&MONTHS),
            dow: all(&DOW),
        },
        "monthly" => Fields {
            minute: first(&MINUTES),
            hour: first(&HOURS),
            dom: first(&DOM),
            month: all(&MONTHS),
            dow: all(&DOW),
        },
        "weekly" => Fields {
            minute: first(&MINUTES),
            hour: first(&HOURS),
            dom: all(&DOM),
            month: all(&MONTHS),
            dow: first(&DOW),
        },
        "daily" | "midnight" => Fields {
            minute: first(&MINUTES),
            hour: first(&HOURS),
            dom: all(&DOM),
            month: all(&MONTHS),
            dow: all(&DOW),
        },
        "hourly" => Fields {
            minute: first(&MINUTES),
            hour: all(&HOURS),
            dom: all(&DOM),
            month: all(&MONTHS),
            dow: all(&DOW),
        },
        _ => {
            let Some(text) = descriptor.strip_prefix("every ") else {
                return Err(format!("unrecognized descriptor: {spec}"));
            };
            let delay = go_duration(text).ok_or_else(|| {
                format!("failed to parse duration {spec}: time: invalid duration {text:?}")
            })?;
            // robfig: under a second rounds up to one, else down to whole seconds.
            let secs = delay.as_secs().max(1);
            return Ok(Schedule(Kind::Every(Duration::from_secs(secs))));
        }
    };
    Ok(Schedule(Kind::Fields(fields)))
}

/// Go's `time.ParseDuration` for the values a schedule can hold (non-negative).
fn go_duration(text: &str) -> Option<Duration> {
    const UNITS: [(&str, f64); 8] = [
        ("ns", 1e-9),
        ("us", 1e-6),
        ("µs", 1e-6),
        ("μs", 1e-6),
        ("ms", 1e-3),
        ("s", 1.0),
        ("m", 60.0),
        ("h", 3600.0),
    ];
    let mut rest = text.strip_prefix('+').unwrap_or(text);
    if rest == "0" {
        return Some(Duration::ZERO);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, scale) = UNITS
            .iter()
            .filter(|(u, _)| rest.starts_with(u))
            .max_by_key(|(u, _)| u.len())?;
        rest = &rest[unit.len()..];
        total += number * scale;
    }
    Duration::try_from_secs_f64(total).ok()
}

/// The zone a CronJob's schedule runs in: `spec.timeZone` from the bundled tz
/// database, or UTC when unset. The error is kube-apiserver's message for the field.
pub fn time_zone(name: Option<&str>) -> Result<TimeZone, String> {
    let Some(name) = name else {
        return Ok(TimeZone::UTC);
    };
    if name.is_empty() {
        return Err("timeZone must be nil or non-empty string".into());
    }
    let unknown = || format!("unknown time zone {name}");
    let valid_part = |p: &str| {
        p != "."
            && p != ".."
            && !p.starts_with('-')
            && (1..=14).contains(&p.len())
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b))
    };
    if !name.split('/').all(valid_part) {
        return Err(unknown());
    }
    if name.eq_ignore_ascii_case("local") {
        return Err(
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
                .into(),
        );
    }
    bundled().get(name).map_err(|_| unknown())
}

fn bundled() -> &'static TimeZoneDatabase {
    static DB: std::sync::OnceLock<TimeZoneDatabase> = std::sync::OnceLock::new();
    DB.get_or_init(TimeZoneDatabase::bundled)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn next(spec: &str, zone: &str, after: &str) -> Option<String> {
        let zone = time_zone(Some(zone)).unwrap();
        Schedule::parse(spec)
            .unwrap()
            .next_after(ts(after), &zone)
            .map(|t| t.to_string())
    }

    #[test]
    fn standard_fields_and_descriptors_fire_when_robfig_does() {
        let cases = [
            ("* * * * *", "2026-12-06T23:10:30Z", "2026-12-06T23:11:00Z"),
            ("* * * * *", "2026-12-06T23:10:00Z", "2026-12-06T23:11:00Z"),
            (
                "*/15 * * * *",
                "2026-12-06T23:10:00Z",
                "2026-12-06T23:15:00Z",
            ),
            (
                "5/20 * * * *",
                "2026-12-06T23:26:00Z",
                "2026-12-06T23:45:00Z",
            ),
            ("0 0 * * *", "2026-12-31T23:59:59Z", "2027-01-01T00:00:00Z"),
            (
                "0 9 * * MON-FRI",
                "2026-12-05T10:00:00Z",
                "2026-12-07T09:00:00Z",
            ),
            ("0 0 29 2 *", "2026-03-01T00:00:00Z", "2028-02-29T00:00:00Z"),
            ("@hourly", "2026-12-06T23:10:00Z", "2026-12-07T00:00:00Z"),
            ("@weekly", "2026-12-06T23:10:00Z", "2026-12-13T00:00:00Z"),
            ("@yearly", "2026-12-06T23:10:00Z", "2027-01-01T00:00:00Z"),
            (
                "@every 90s",
                "2026-12-06T23:10:00.5Z",
                "2026-12-06T23:11:30Z",
            ),
        ];
        for (spec, after, want) in cases {
            assert_eq!(next(spec, "UTC", after).as_deref(), Some(want), "{spec}");
        }
    }

    #[test]
    fn day_of_month_and_day_of_week_are_either_unless_one_is_a_star() {
        // The 1st or any Monday.
        assert_eq!(
            next("0 0 1 * MON", "UTC", "2026-12-01T01:00:00Z").as_deref(),
            Some("2026-12-07T00:00:00Z")
        );
        // Only Mondays: the star day-of-month does not widen it.
        assert_eq!(
            next("0 0 * * 1", "UTC", "2026-12-01T01:00:00Z").as_deref(),
            Some("2026-12-07T00:00:00Z")
        );
        // A stepped star is not a star (step > 1 clears the bit).
        assert_eq!(
            next("0 0 */2 * MON", "UTC", "2026-12-01T01:00:00Z").as_deref(),
            Some("2026-12-03T00:00:00Z")
        );
    }

    #[test]
    fn a_time_zone_moves_the_ticks_and_a_skipped_hour_runs_after_the_gap() {
        assert_eq!(
            next("0 9 * * *", "Asia/Tokyo", "2026-12-06T00:00:00Z").as_deref(),
            Some("2026-12-07T00:00:00Z")
        );
        // 02:30 does not exist in New York on 2026-03-08: it runs at 03:30 EDT.
        assert_eq!(
            next("30 2 * * *", "America/New_York", "2026-03-08T05:00:00Z").as_deref(),
            Some("2026-03-08T07:30:00Z")
        );
    }

    #[test]
    fn impossible_dates_have_no_activation() {
        assert_eq!(next("0 0 30 2 *", "UTC", "2026-01-01T00:00:00Z"), None);
    }

    #[test]
    fn bad_schedules_get_robfigs_messages() {
        let cases = [
            ("", "empty spec string"),
            ("* * *", "expected exactly 5 fields, found 3: [* * *]"),
            ("60 * * * *", "end of range (60) above maximum (59): 60"),
            ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
            (
                "5-1 * * * *",
                "beginning of range (5) beyond end of range (1): 5-1",
            ),
            (
                "*/0 * * * *",
                "step of range should be a positive number: */0",
            ),
            ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
            ("1/2/3 * * * *", "too many slashes: 1/2/3"),
            ("@fortnightly", "unrecognized descriptor: @fortnightly"),
            (
                "L * * * *",
                "failed to parse int from L: strconv.Atoi: parsing \"L\": invalid syntax",
            ),
            (
                "@every soon",
                "failed to parse duration @every soon: time: invalid duration \"soon\"",
            ),
            ("* * * * 7", "end of range (7) above maximum (6): 7"),
        ];
        for (spec, want) in cases {
            assert_eq!(Schedule::parse(spec).unwrap_err(), want, "{spec:?}");
        }
    }

    #[test]
    fn time_zones_come_from_the_bundled_database() {
        assert!(time_zone(Some("Europe/Berlin")).is_ok());
        assert_eq!(time_zone(None).unwrap(), TimeZone::UTC);
        assert_eq!(
            time_zone(Some("Mars/Olympus")).unwrap_err(),
            "unknown time zone Mars/Olympus"
        );
        assert_eq!(
            time_zone(Some("../etc/passwd")).unwrap_err(),
            "unknown time zone ../etc/passwd"
        );
        assert_eq!(
            time_zone(Some("")).unwrap_err(),
            "timeZone must be nil or non-empty string"
        );
        assert!(
            time_zone(Some("Local"))
                .unwrap_err()
                .contains("explicit time zone")
        );
    }
}
