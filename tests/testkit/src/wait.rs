//! A bounded poll that says what it last saw.

use std::fmt::Debug;
use std::time::Duration;

/// How often [`wait_until`] looks again.
const POLL: Duration = Duration::from_millis(20);

/// Looks with `look` until `done` holds for what it saw, and returns that.
///
/// # Panics
///
/// When `within` passes first, with `what` and the last observation.
pub async fn wait_until<T: Debug>(
    what: &str,
    within: Duration,
    look: impl AsyncFnMut() -> T,
    done: impl Fn(&T) -> bool,
) -> T {
    wait_until_explained(what, within, look, done, async || String::new()).await
}

/// [`wait_until`], whose timeout also shows what `explain` gathers then (a
/// component's debug pages): for a wait that failed once in CI and could
/// not be made to fail again.
///
/// # Panics
///
/// As [`wait_until`].
pub async fn wait_until_explained<T: Debug>(
    what: &str,
    within: Duration,
    mut look: impl AsyncFnMut() -> T,
    done: impl Fn(&T) -> bool,
    explain: impl AsyncFnOnce() -> String,
) -> T {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let seen = look().await;
        if done(&seen) {
            return seen;
        }
        if tokio::time::Instant::now() >= deadline {
            let context = explain().await;
            panic!("timed out after {within:?} waiting for {what}; last saw: {seen:?}{context}");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// [`wait_until`] for a test with no runtime: `look` runs on this thread.
///
/// # Panics
///
/// As [`wait_until`], and when no runtime can be built.
pub fn wait_until_blocking<T: Debug>(
    what: &str,
    within: Duration,
    mut look: impl FnMut() -> T,
    done: impl Fn(&T) -> bool,
) -> T {
    current_thread().block_on(wait_until(what, within, async || look(), done))
}

/// A runtime for the blocking forms of these helpers.
pub(crate) fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_the_first_observation_that_is_done() {
        let mut n = 0;
        let seen = wait_until(
            "three",
            Duration::from_secs(5),
            async || {
                n += 1;
                n
            },
            |n| *n == 3,
        )
        .await;
        assert_eq!(seen, 3);
    }

    #[test]
    fn a_timeout_names_the_condition_and_the_last_observation() {
        let panic = std::panic::catch_unwind(|| {
            wait_until_blocking("never", Duration::from_millis(50), || "still 7", |_| false)
        })
        .expect_err("it times out");
        let text = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(text.contains("never") && text.contains("still 7"), "{text}");
    }
}
