//! The network probes' own runtime: one `current_thread` tokio runtime on
//! one OS thread (`mesopod-probes`), with its own reactor and timer.
//!
//! A network probe is a timer tick, a connection and a read: a few
//! microseconds of work. On the executor's runtime (two workers) each
//! wakeup of one worker also tends to wake the other to look for work to
//! steal, a futex round trip per attempt that costs more than the attempt.
//! On a thread of their own, the probes due in one grid step are all run by
//! the one thread that woke for them, and nothing else is woken.
//!
//! The runtime is started by the first network probe and lives as long as
//! the process: an executor starts and stops probes with every container
//! run, and a thread per run would cost more than it saves. Probes stop
//! with their `ProbeSet` (its tasks are aborted; their sockets close with
//! a FIN), so an idle prober holds nothing but a parked thread.
//! [`shutdown`] drops the runtime, with every task still on it, and joins
//! its thread; probes started after that run on the caller's runtime.
//! Exec probes never come here: they run the executor's own exec, which
//! belongs to its runtime.

use std::future::Future;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle as Thread;

use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The running probe runtime: how to reach it, and how to stop it.
struct Prober {
    handle: Handle,
    stop: Mutex<Option<(oneshot::Sender<()>, Thread<()>)>>,
}

static PROBER: OnceLock<Option<Prober>> = OnceLock::new();

fn prober() -> Option<&'static Prober> {
    PROBER
        .get_or_init(|| match start() {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the probe runtime; probes share the executor's");
                None
            }
        })
        .as_ref()
}

fn start() -> std::io::Result<Prober> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let handle = rt.handle().clone();
    let (stop, stopped) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("mesopod-probes".into())
        .spawn(move || {
            // Either a stop or a dropped sender (never, it is static) ends it.
            let _ = rt.block_on(stopped);
        })?;
    Ok(Prober {
        handle,
        stop: Mutex::new(Some((stop, thread))),
    })
}

fn running() -> Option<&'static Prober> {
    prober().filter(|p| {
        p.stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    })
}

/// Runs `task` on the probe runtime (the caller's, when there is none).
pub(crate) fn spawn<F>(task: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match running() {
        Some(p) => p.handle.spawn(task),
        None => tokio::spawn(task),
    }
}

/// Stops the probe runtime: its tasks are dropped (their sockets closed)
/// and its thread joined. For the end of a process; later probes run on
/// their caller's runtime.
pub fn shutdown() {
    // A process that never probed has no runtime to stop (and starts none).
    let Some(Some(p)) = PROBER.get() else { return };
    let taken = p.stop.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some((stop, thread)) = taken {
        let _ = stop.send(());
        if thread.join().is_err() {
            tracing::warn!("the probe runtime's thread panicked");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn probes_run_on_one_thread_of_their_own() {
        let name = || std::thread::current().name().map(str::to_owned);
        let first = spawn(async move { (name(), std::thread::current().id()) });
        let second = spawn(async move { (name(), std::thread::current().id()) });
        let (first, second) = (first.await.unwrap(), second.await.unwrap());
        assert_eq!(first.0.as_deref(), Some("mesopod-probes"));
        assert_eq!(first.1, second.1, "one runtime per process");
    }
}
