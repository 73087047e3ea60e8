//! The end-to-end binary's one tracing subscriber. Its tests share a process, and a
//! process has one global subscriber, so no test installs its own: a test that reads
//! the logs opens a [`Capture`] (everything, at TRACE, while it is open), and one
//! that only wants to show them calls [`install`] (`RUST_LOG`, to the test's output).
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Once};

use tracing_subscriber::filter::{EnvFilter, dynamic_filter_fn};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer as _, fmt};

/// Open captures: while there is one, every event is formatted into [`CAPTURED`].
static CAPTURING: AtomicUsize = AtomicUsize::new(0);
static CAPTURED: Mutex<Vec<u8>> = Mutex::new(Vec::new());

/// Installs the subscriber once per process: the capture layer, and `RUST_LOG`'s
/// events (none when it is unset) to the test's output.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let capture = fmt::layer()
            .with_ansi(false)
            .with_writer(|| CaptureWriter)
            // Dynamic: a plain `filter_fn` caches its first answer per callsite.
            .with_filter(dynamic_filter_fn(|_, _| {
                CAPTURING.load(Ordering::Acquire) > 0
            }));
        let shown = fmt::layer()
            .with_test_writer()
            .with_filter(EnvFilter::from_default_env());
        // Another subscriber would mean a test broke the rule above: say so.
        tracing_subscriber::registry()
            .with(capture)
            .with(shown)
            .try_init()
            .expect("the e2e binary's tests install no tracing subscriber of their own");
    });
}

/// Every event logged in this process while it is open, any test's; what it
/// captured is [`Capture::take`]n.
pub struct Capture(());

impl Capture {
    pub fn start() -> Capture {
        install();
        CAPTURING.fetch_add(1, Ordering::AcqRel);
        Capture(())
    }

    /// What was logged so far (by every test running meanwhile, too).
    pub fn take(&self) -> Vec<u8> {
        CAPTURED.lock().unwrap().clone()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if CAPTURING.fetch_sub(1, Ordering::AcqRel) == 1 {
            CAPTURED.lock().unwrap().clear();
        }
    }
}

struct CaptureWriter;

impl std::io::Write for CaptureWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        CAPTURED.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
