//! Crash-loop backoff: how long a container waits before it is started again.
//!
//! The rule is Mesos-facing retry's one [`Backoff`] (re-exported here);
//! this module holds the executor's setting of it.

use std::time::Duration;

pub use mesos::client::backoff::Backoff;

/// Kubernetes' crash-loop backoff: 10 s doubling to 5 min, so a broken
/// container costs little while a flapping dependency still gets retried
/// every few minutes.
pub const CRASH_LOOP: Backoff = Backoff::new(Duration::from_secs(10), Duration::from_secs(300));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crash_loop_doubles_from_ten_seconds_to_five_minutes() {
        let b = CRASH_LOOP;
        let waits: Vec<u64> = (0..8).map(|a| b.delay(a).as_secs()).collect();
        assert_eq!(waits, vec![10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(300));
        assert_eq!(b.reset_after(), Duration::from_secs(600));
    }
}
