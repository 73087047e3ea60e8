//! Many probes run by the executor's own worker, for the probe benchmark
//! (`cargo bench -p executor --bench probes`): the same tasks, handlers and
//! thresholds a pod's supervisor starts, without the pods around them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::ProbeSpec;
use super::exec::ProbeExec;
use super::worker::{Context, Observed, ProbeSet, Report, start};

/// Running probes, one container run each; dropping it stops them.
#[derive(Debug)]
pub struct Load {
    _sets: Vec<ProbeSet>,
    ready: mpsc::Receiver<Result<(), ()>>,
    drain: JoinHandle<()>,
    failures: Arc<AtomicU64>,
    last_failure: Arc<Mutex<Option<String>>>,
    count: usize,
}

impl Drop for Load {
    fn drop(&mut self) {
        self.drain.abort();
    }
}

impl Load {
    /// Starts `specs`, each as its own container run probing `host`
    /// through `exec` for exec probes, their first attempts spread evenly
    /// over `spread` (containers start at different times).
    pub fn start(
        specs: Vec<ProbeSpec>,
        host: &str,
        exec: Arc<dyn ProbeExec>,
        spread: Duration,
    ) -> Load {
        let (tx, mut rx) = mpsc::channel::<Report<usize>>(64);
        let count = specs.len();
        let now = Instant::now();
        let sets = (specs.into_iter().enumerate())
            .map(|(i, spec)| {
                let offset = spread.mul_f64(i as f64 / count.max(1) as f64);
                let ctx = Context {
                    container: i,
                    run: 1,
                    host: host.to_owned(),
                    exec: Arc::clone(&exec),
                    started: Arc::new(AtomicBool::new(true)),
                    started_at: now + offset,
                    reports: tx.clone(),
                };
                start(vec![spec], ctx)
            })
            .collect();
        let failures = Arc::new(AtomicU64::new(0));
        let (ready_tx, ready) = mpsc::channel(count.max(1));
        let last_failure = Arc::new(Mutex::new(None));
        let (counted, last) = (Arc::clone(&failures), Arc::clone(&last_failure));
        // What a supervisor would do with the reports: take them, so no
        // worker waits on a full channel.
        let drain = tokio::spawn(async move {
            while let Some(report) = rx.recv().await {
                let verdict = match report.what {
                    Observed::Result(true) => Ok(()),
                    Observed::Result(false) => Err(()),
                    Observed::Failed(out) | Observed::Errored(out) => {
                        counted.fetch_add(1, Ordering::Relaxed);
                        *last.lock().unwrap_or_else(PoisonError::into_inner) = Some(out);
                        Err(())
                    }
                    Observed::Warning(_) => continue,
                };
                let _ = ready_tx.try_send(verdict);
            }
        });
        Load {
            _sets: sets,
            ready,
            drain,
            failures,
            last_failure,
            count,
        }
    }

    /// Waits until every probe has passed once (failed attempts before
    /// that are counted in [`Load::failures`], as a pod's would be).
    pub async fn all_passed(&mut self) {
        let mut passed = 0;
        while passed < self.count {
            match self.ready.recv().await {
                Some(Ok(())) => passed += 1,
                Some(Err(_)) => {}
                None => return,
            }
        }
    }

    /// The output of the last attempt that failed.
    pub fn last_failure(&self) -> Option<String> {
        (self
            .last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner))
        .clone()
    }

    /// How many attempts failed (or errored) so far.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }
}
