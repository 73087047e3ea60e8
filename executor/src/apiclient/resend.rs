//! When the executor sends its node key again: Mesos messages are best effort (a master
//! drops an executor's message while its scheduler is not subscribed, say during a
//! restart of mesopod; an agent still recovering answers 503), so every key
//! registration is sent until the scheduler answers it. A send the agent refused goes
//! again after [`UNDELIVERED`]; one it took and nobody answered, after [`FIRST`], then
//! twice as long each time up to [`MOST`].
//!
//! Pure bookkeeping over an injected `now`; the executor loop owns the timer and the
//! calls.

use std::time::Duration;

use tokio::time::Instant;

/// The wait for an answer before sending again: an answer on loopback takes
/// milliseconds.
pub const FIRST: Duration = Duration::from_millis(500);
/// The longest wait between two sends, so a scheduler that comes back is answered
/// within this long (one small message per executor each time).
pub const MOST: Duration = Duration::from_secs(4);
/// The wait after the agent refused the message (503 while it recovers): it takes
/// messages again as soon as it is done, and it answers at once.
pub const UNDELIVERED: Duration = Duration::from_millis(250);

/// An unanswered key registration, if any.
#[derive(Debug, Default)]
pub struct KeyResend {
    pending: Option<Pending>,
}

#[derive(Debug)]
struct Pending {
    /// The credential's answer count when the key was first sent.
    answers: u64,
    at: Instant,
    /// The wait after the next delivered send.
    wait: Duration,
}

impl KeyResend {
    /// The key is sent afresh, when `answers` answers had come; say how the send went
    /// with [`Self::delivered`] or [`Self::undelivered`].
    pub fn sent(&mut self, answers: u64, now: Instant) {
        self.pending = Some(Pending {
            answers,
            at: now + FIRST,
            wait: FIRST,
        });
    }

    /// The agent took the send at `now`: look for the answer after the current wait,
    /// and wait twice as long after the next.
    pub fn delivered(&mut self, now: Instant) {
        if let Some(p) = self.pending.as_mut() {
            p.at = now + p.wait;
            p.wait = (p.wait * 2).min(MOST);
        }
    }

    /// The agent refused the send at `now`: send again soon, and then wait for an
    /// answer from the first wait on.
    pub fn undelivered(&mut self, now: Instant) {
        if let Some(p) = self.pending.as_mut() {
            p.at = now + UNDELIVERED;
            p.wait = FIRST;
        }
    }

    /// When to look again, if a registration is unanswered.
    pub fn due(&self) -> Option<Instant> {
        self.pending.as_ref().map(|p| p.at)
    }

    /// The timer fired with `answers` answers come: true if the key must be sent again
    /// (no answer yet), false if it was answered (nothing is pending any more).
    pub fn fire(&mut self, answers: u64) -> bool {
        match &self.pending {
            None => false,
            Some(p) if answers != p.answers => {
                self.pending = None;
                false
            }
            Some(_) => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unanswered_keys_are_sent_again_ever_less_often_until_answered() {
        let t0 = Instant::now();
        let mut r = KeyResend::default();
        assert_eq!(r.due(), None);
        assert!(!r.fire(0), "nothing was sent");
        r.sent(3, t0);
        r.delivered(t0);
        assert_eq!(r.due(), Some(t0 + FIRST));
        let mut now = t0 + FIRST;
        let mut waits = Vec::new();
        for _ in 0..5 {
            assert!(r.fire(3), "no answer yet: send again");
            r.delivered(now);
            let next = r.due().expect("an unanswered key is looked at again");
            waits.push(next - now);
            now = next;
        }
        assert_eq!(
            waits,
            [1000, 2000, 4000, 4000, 4000].map(Duration::from_millis)
        );
        assert!(!r.fire(4), "answered: done");
        assert_eq!(r.due(), None);
        // A fresh send starts over from the first wait.
        r.sent(4, now);
        r.delivered(now);
        assert_eq!(r.due(), Some(now + FIRST));
    }

    #[test]
    fn a_refused_send_goes_again_soon_and_then_waits_from_the_start() {
        let t0 = Instant::now();
        let mut r = KeyResend::default();
        r.sent(0, t0);
        r.undelivered(t0);
        assert_eq!(r.due(), Some(t0 + UNDELIVERED));
        // Refused while the agent recovers, again and again: never backs off.
        let mut now = t0 + UNDELIVERED;
        for _ in 0..10 {
            assert!(r.fire(0));
            r.undelivered(now);
            assert_eq!(r.due(), Some(now + UNDELIVERED));
            now += UNDELIVERED;
        }
        // Taken at last: the answer is waited for as after a first send.
        assert!(r.fire(0));
        r.delivered(now);
        assert_eq!(r.due(), Some(now + FIRST));
        assert!(!r.fire(1));
    }
}
