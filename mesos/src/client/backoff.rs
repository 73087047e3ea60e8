//! Truncated exponential backoff for whoever retries: the clients never do,
//! so the framework (reconnecting, asking again) and the executor
//! (resubscribing, restarting containers) wait by this one rule.
//!
//! [`Backoff`] is the rule, a pure value: the wait before a given attempt is
//! `initial` doubled once per earlier attempt, never above `max`.
//! [`Retry`] is a retry in progress: it counts the attempts for a caller
//! that keeps one per thing it retries.

use std::time::Duration;

/// Exponential backoff with a cap: `initial`, doubling, never above `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first wait (an `initial` above `max` waits `max`).
    pub initial: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Backoff {
    /// Starts at `initial`, never exceeds `max`.
    pub const fn new(initial: Duration, max: Duration) -> Self {
        Self { initial, max }
    }

    /// The wait before retry number `attempt + 1` (0 = the first retry).
    pub fn delay(&self, attempt: u32) -> Duration {
        let mut delay = self.initial.min(self.max);
        // Once at the cap it stays there; a non-zero delay reaches any cap
        // within 128 doublings (a `Duration` holds under 2^94 ns).
        for _ in 0..attempt.min(128) {
            if delay >= self.max {
                break;
            }
            delay = delay.saturating_mul(2).min(self.max);
        }
        delay
    }

    /// How long a success must last before the backoff starts over: twice the
    /// cap, as the kubelet does, so only something that stayed up well past
    /// the longest wait counts as healthy again.
    pub fn reset_after(&self) -> Duration {
        self.max.saturating_mul(2)
    }
}

/// A retry in progress: [`Retry::next_delay`] gives the wait and counts the
/// attempt, [`Retry::reset`] starts over after a success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    backoff: Backoff,
    attempt: u32,
}

impl Retry {
    /// A retry that waits `initial` first, doubling, never above `max`.
    pub const fn new(initial: Duration, max: Duration) -> Self {
        Self {
            backoff: Backoff::new(initial, max),
            attempt: 0,
        }
    }

    /// The delay to wait now; the following call returns twice as much (capped).
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.peek();
        self.attempt = self.attempt.saturating_add(1);
        delay
    }

    /// The delay `next_delay` would return, without advancing.
    pub fn peek(&self) -> Duration {
        self.backoff.delay(self.attempt)
    }

    /// Back to the initial delay, after a success.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_until_the_cap_and_resets() {
        let mut b = Retry::new(Duration::from_secs(1), Duration::from_secs(15));
        let seq: Vec<u64> = (0..7).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(seq, [1, 2, 4, 8, 15, 15, 15]);
        b.reset();
        assert_eq!(b.peek(), Duration::from_secs(1));
        assert_eq!(b.next_delay(), Duration::from_secs(1));
    }

    #[test]
    fn an_initial_delay_above_the_cap_is_capped() {
        let mut b = Retry::new(Duration::from_secs(100), Duration::from_secs(15));
        assert_eq!(b.next_delay(), Duration::from_secs(15));
        assert_eq!(
            Backoff::new(Duration::from_secs(100), Duration::from_secs(15)).delay(0),
            Duration::from_secs(15)
        );
    }

    #[test]
    fn a_scaled_backoff_keeps_its_shape() {
        let b = Backoff {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(50),
        };
        let waits: Vec<u128> = (0..4).map(|a| b.delay(a).as_millis()).collect();
        assert_eq!(waits, vec![10, 20, 40, 50]);
        assert_eq!(b.reset_after(), Duration::from_millis(100));
    }

    #[test]
    fn the_cap_holds_for_any_attempt_and_any_scale() {
        let b = Backoff::new(Duration::from_nanos(1), Duration::from_secs(3600));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(3600));
        assert_eq!(b.delay(40), Duration::from_nanos(1 << 40));
        assert_eq!(b.delay(42), Duration::from_secs(3600));
        assert_eq!(b.delay(31), Duration::from_nanos(1 << 31));
        let zero = Backoff::new(Duration::ZERO, Duration::from_secs(1));
        assert_eq!(zero.delay(u32::MAX), Duration::ZERO);
    }

    #[test]
    fn a_retry_waits_what_its_backoff_says_for_each_attempt() {
        let b = Backoff::new(Duration::from_millis(3), Duration::from_millis(100));
        let mut r = Retry::new(b.initial, b.max);
        for attempt in 0..10 {
            assert_eq!(r.next_delay(), b.delay(attempt), "attempt {attempt}");
        }
    }
}
