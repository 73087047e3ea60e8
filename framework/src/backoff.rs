//! Truncated exponential backoff, as a pure value: `next()` gives the delay
//! to wait and doubles the next one, up to a cap.

use std::time::Duration;

/// A doubling delay with a floor and a cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    current: Duration,
}

impl Backoff {
    /// Starts at `initial`, never exceeds `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        let initial = initial.min(max);
        Self {
            initial,
            max,
            current: initial,
        }
    }

    /// The delay to wait now; the following call returns twice as much (capped).
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.current;
        self.current = self.current.saturating_mul(2).min(self.max);
        delay
    }

    /// The delay `next_delay` would return, without advancing.
    pub fn peek(&self) -> Duration {
        self.current
    }

    /// Back to the initial delay, after a success.
    pub fn reset(&mut self) {
        self.current = self.initial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_until_the_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::from_secs(15));
        let seq: Vec<u64> = (0..7).map(|_| b.next_delay().as_secs()).collect();
        assert_eq!(seq, [1, 2, 4, 8, 15, 15, 15]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_secs(1));
    }

    #[test]
    fn an_initial_delay_above_the_cap_is_capped() {
        let mut b = Backoff::new(Duration::from_secs(100), Duration::from_secs(15));
        assert_eq!(b.next_delay(), Duration::from_secs(15));
    }
}
