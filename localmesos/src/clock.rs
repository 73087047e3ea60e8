//! The master's time: wall-clock timestamps, as Mesos writes them in
//! statuses and `/state`, and the [`MasterClock`] the master's own
//! timeouts read (agent ping timeouts), which tests advance instead of
//! waiting (`POST /admin/clock/advance`, `LocalMesos::advance_clock`).

use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Seconds since the epoch, as Mesos timestamps are.
pub(crate) fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// The monotonic clock plus how far it was advanced. Only moves forward.
#[derive(Debug)]
pub(crate) struct MasterClock {
    start: Instant,
    advanced: Mutex<Duration>,
}

impl MasterClock {
    pub(crate) fn new() -> Self {
        MasterClock {
            start: Instant::now(),
            advanced: Mutex::new(Duration::ZERO),
        }
    }

    fn advanced(&self) -> Duration {
        *self.advanced.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Time since the master started, advances included.
    pub(crate) fn now(&self) -> Duration {
        self.start.elapsed() + self.advanced()
    }

    /// Moves the clock `by` forward.
    pub(crate) fn advance(&self, by: Duration) {
        let mut a = self.advanced.lock().unwrap_or_else(|e| e.into_inner());
        *a = a.saturating_add(by);
    }

    /// [`now_secs`] on this clock: the timestamps of what its timeouts do
    /// (an agent's `unreachable_time`) agree with it.
    pub(crate) fn wall_secs(&self) -> f64 {
        now_secs() + self.advanced().as_secs_f64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancing_moves_both_readings_forward_by_as_much() {
        let c = MasterClock::new();
        let (before, wall) = (c.now(), c.wall_secs());
        c.advance(Duration::from_secs(120));
        assert!(c.now() >= before + Duration::from_secs(120));
        assert!(c.wall_secs() - wall >= 120.0);
    }
}
