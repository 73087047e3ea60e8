//! Crash-loop backoff: how long a container waits before it is started again.

use std::time::Duration;

/// Exponential backoff with a cap: `initial`, doubling, never above `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first wait.
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Backoff {
    /// Kubernetes' crash-loop backoff: 10 s doubling to 5 min, so a broken
    /// container costs little while a flapping dependency still gets retried
    /// every few minutes.
    pub const CRASH_LOOP: Backoff = Backoff {
        initial: Duration::from_secs(10),
        max: Duration::from_secs(300),
    };

    /// The wait before restart number `attempt + 1` (0 = first restart).
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// How long a container must run before its backoff starts over: twice the
    /// cap, as the kubelet does, so only a container that stayed up well past
    /// the longest wait counts as healthy again.
    pub fn reset_after(&self) -> Duration {
        self.max.saturating_mul(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_loop_doubles_from_ten_seconds_to_five_minutes() {
        let b = Backoff::CRASH_LOOP;
        let waits: Vec<u64> = (0..8).map(|a| b.delay(a).as_secs()).collect();
        assert_eq!(waits, vec![10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(300));
        assert_eq!(b.reset_after(), Duration::from_secs(600));
    }

    #[test]
    fn a_scaled_backoff_keeps_its_shape() {
        let b = Backoff {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(50),
        };
        let waits: Vec<u128> = (0..4).map(|a| b.delay(a).as_millis()).collect();
        assert_eq!(waits, vec![10, 20, 40, 50]);
    }
}
