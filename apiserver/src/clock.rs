//! The injected clock: deletion grace periods, event times and AGE columns read it, so
//! tests control time instead of sleeping.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// A source of the current wall-clock time.
pub trait Clock: Send + Sync + 'static {
    /// Now.
    fn now(&self) -> SystemTime;
}

/// The system's clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that moves only when told to, for tests.
#[derive(Debug)]
pub struct ManualClock(Mutex<SystemTime>);

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: SystemTime) -> Self {
        Self(Mutex::new(start))
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut now = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *now += by;
    }

    /// Sets the clock to `to`.
    pub fn set(&self, to: SystemTime) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = to;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A clock that runs with the system's and that tests move forward: for a
/// whole cluster under test, where rate limits and timeouts measured by the
/// same clock must see time pass (a standing clock would hold a REVIVE back
/// for ever), while a test still jumps over a backoff or a TTL.
#[derive(Debug, Default)]
pub struct OffsetClock(Mutex<Duration>);

impl OffsetClock {
    /// The system's clock, not yet moved.
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `by`, on top of the time that passes.
    pub fn advance(&self, by: Duration) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) += by;
    }
}

impl Clock for OffsetClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
            + *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Formats a time as Kubernetes does on the wire (RFC 3339, whole seconds, UTC).
pub fn format_time(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    match k8s_openapi::jiff::Timestamp::from_second(secs) {
        Ok(ts) => k8s_openapi::jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", ts)
            .unwrap_or_else(|_| "1970-01-01T00:00:00Z".into()),
        Err(_) => "1970-01-01T00:00:00Z".into(),
    }
}

/// Parses a Kubernetes wire time (RFC 3339, optionally with fractional seconds).
pub fn parse_time(s: &str) -> Option<SystemTime> {
    let ts: k8s_openapi::jiff::Timestamp = s.parse().ok()?;
    let secs = ts.as_second();
    if secs >= 0 {
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(secs as u64))
    } else {
        None
    }
}

/// Kubernetes' human duration (`HumanDuration` in apimachinery), used for AGE columns.
pub fn human_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// The AGE of something stamped `at` (wire time), as of `now`; `<unknown>` if unparseable.
pub fn age(at: Option<&str>, now: SystemTime) -> String {
    since(at.and_then(parse_time), now)
}

/// The time since `at` as an AGE column shows it; `<unknown>` without a time.
pub fn since(at: Option<SystemTime>, now: SystemTime) -> String {
    match at {
        Some(t) => human_duration(now.duration_since(t).unwrap_or_default()),
        None => "<unknown>".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_clock_is_the_systems_plus_what_it_was_moved() {
        let clock = OffsetClock::new();
        let before = SystemTime::now();
        assert!(clock.now() >= before);
        clock.advance(Duration::from_secs(3600));
        let moved = clock.now();
        assert!(moved >= before + Duration::from_secs(3600), "{moved:?}");
        assert!(moved < SystemTime::now() + Duration::from_secs(3601));
    }
}
