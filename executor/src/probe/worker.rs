//! One probe of one container run: a tokio task ticking at its period,
//! with kubelet's thresholds (`pkg/kubelet/prober/worker.go`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use super::exec::ProbeExec;
use super::{Handler, Outcome, ProbeKind, ProbeSpec, run_once, runtime};

/// What a worker tells its supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Observed {
    /// An attempt failed: the `Unhealthy` event's output.
    Failed(String),
    /// An attempt passed with a warning (`ProbeWarning`).
    Warning(String),
    /// The prober itself failed; the attempt does not count.
    Errored(String),
    /// The probe's result changed (crossed its threshold).
    Result(bool),
}

/// One report, naming the container run it is about.
#[derive(Debug, Clone)]
pub(crate) struct Report<K> {
    pub(crate) container: K,
    pub(crate) run: u64,
    pub(crate) kind: ProbeKind,
    pub(crate) what: Observed,
}

/// Consecutive results against the thresholds. Returns a result only when
/// the probe's published result changes, or, for liveness and startup,
/// when failure is reached (the container is then restarted).
#[derive(Debug, Clone)]
pub(crate) struct Verdicts {
    kind: ProbeKind,
    success_threshold: u32,
    failure_threshold: u32,
    last: Option<bool>,
    streak: u32,
    published: bool,
}

impl Verdicts {
    pub(crate) fn new(spec: &ProbeSpec) -> Verdicts {
        Verdicts {
            kind: spec.kind,
            success_threshold: spec.success_threshold,
            failure_threshold: spec.failure_threshold,
            last: None,
            streak: 0,
            published: match spec.kind {
                // Startup publishes its first success even though "not
                // started" is also false: started is a one-way switch.
                ProbeKind::Startup => false,
                kind => kind.initial(),
            },
        }
    }

    pub(crate) fn observe(&mut self, success: bool) -> Option<bool> {
        if self.last == Some(success) {
            self.streak = self.streak.saturating_add(1);
        } else {
            self.last = Some(success);
            self.streak = 1;
        }
        let threshold = if success {
            self.success_threshold
        } else {
            self.failure_threshold
        };
        if self.streak < threshold {
            return None;
        }
        let restarts = !success && self.kind != ProbeKind::Readiness;
        if self.published == success && !restarts && !(success && self.kind == ProbeKind::Startup) {
            return None;
        }
        self.published = success;
        Some(success)
    }
}

/// What every probe of one container run shares.
pub(crate) struct Context<K> {
    pub(crate) container: K,
    pub(crate) run: u64,
    /// The pod's IP (the default host of network probes).
    pub(crate) host: String,
    pub(crate) exec: Arc<dyn ProbeExec>,
    /// The startup probe succeeded (true from the start without one).
    pub(crate) started: Arc<AtomicBool>,
    /// When the container started.
    pub(crate) started_at: Instant,
    pub(crate) reports: mpsc::Sender<Report<K>>,
}

/// The running probes of one container run; dropping it stops them.
#[derive(Debug, Default)]
pub(crate) struct ProbeSet {
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for ProbeSet {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Starts one worker per probe: network probes on the probe runtime
/// ([`runtime`]), exec probes on the caller's, where the executor's exec is.
pub(crate) fn start<K: Copy + Send + Sync + 'static>(
    specs: Vec<ProbeSpec>,
    ctx: Context<K>,
) -> ProbeSet {
    let ctx = Arc::new(ctx);
    let tasks = specs
        .into_iter()
        .map(|spec| {
            let network = !matches!(spec.handler, Handler::Exec { .. } | Handler::Invalid(_));
            let task = run(spec, Arc::clone(&ctx));
            if network {
                runtime::spawn(task)
            } else {
                tokio::spawn(task)
            }
        })
        .collect();
    ProbeSet { tasks }
}

/// Every worker ticks on one shared grid of this step, so the runtime
/// wakes once for all the probes due in a step rather than once per
/// probe: 500 pods' 1 s probes wake it at most 20 times a second, not
/// 500, and an httpGet or grpc answer is read in the step after its
/// request. A probe's ticks move later by less than a step, and an answer
/// is seen at most a step after it came; its period (whole seconds) and
/// timeout (a second at least) are unchanged. Each wakeup of the probe
/// thread from idle costs more than the attempts it runs: in the probe
/// bench a 10 ms step cost 5.7% of a core for httpGet, 25 ms 4.0% for
/// grpc, 50 ms 3.5% for either.
const GRID: Duration = Duration::from_millis(50);

/// The first grid point at or after `at`.
fn on_grid(at: Instant) -> Instant {
    static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(std::time::Instant::now);
    let since = at.into_std().saturating_duration_since(epoch).as_nanos();
    let step = GRID.as_nanos();
    let up = u64::try_from(since.div_ceil(step) * step).unwrap_or(u64::MAX);
    Instant::from_std(epoch) + Duration::from_nanos(up)
}

/// The grid's next step after now: when the probes due next are run.
pub(super) fn next_step() -> Instant {
    on_grid(Instant::now() + Duration::from_nanos(1))
}

async fn run<K: Copy + Send + Sync + 'static>(spec: ProbeSpec, ctx: Arc<Context<K>>) {
    let mut tick = tokio::time::interval_at(on_grid(ctx.started_at), spec.period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut verdicts = Verdicts::new(&spec);
    let send = |what: Observed| {
        ctx.reports.send(Report {
            container: ctx.container,
            run: ctx.run,
            kind: spec.kind,
            what,
        })
    };
    loop {
        tick.tick().await;
        // kubelet skips attempts until initialDelaySeconds have passed since
        // the container started, and liveness/readiness until it started.
        if ctx.started_at.elapsed().as_secs() < spec.initial_delay.as_secs() {
            continue;
        }
        if spec.kind != ProbeKind::Startup && !ctx.started.load(Ordering::Acquire) {
            continue;
        }
        let success = match run_once(&spec.handler, &ctx.host, spec.timeout, &*ctx.exec).await {
            Outcome::Success => true,
            Outcome::Warning(w) => {
                let _ = send(Observed::Warning(w)).await;
                true
            }
            Outcome::Failure(out) => {
                let _ = send(Observed::Failed(out)).await;
                false
            }
            Outcome::Error(e) => {
                let _ = send(Observed::Errored(e)).await;
                continue;
            }
        };
        let Some(result) = verdicts.observe(success) else {
            continue;
        };
        if spec.kind == ProbeKind::Startup && result {
            ctx.started.store(true, Ordering::Release);
        }
        if send(Observed::Result(result)).await.is_err() {
            return;
        }
        // Startup is done once it passed; a liveness or startup failure
        // ends this run (kubelet holds until it sees a new container).
        if spec.kind == ProbeKind::Startup || (!result && spec.kind != ProbeKind::Readiness) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: ProbeKind, success: u32, failure: u32) -> ProbeSpec {
        ProbeSpec {
            kind,
            handler: Handler::Invalid(String::new()),
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            success_threshold: success,
            failure_threshold: failure,
            termination_grace: None,
        }
    }

    #[test]
    fn ticks_fall_on_the_shared_grid_less_than_a_step_late() {
        let now = Instant::now();
        let points: Vec<Instant> = (0..50)
            .map(|i| on_grid(now + Duration::from_micros(i * 997)))
            .collect();
        for (i, p) in points.iter().enumerate() {
            let at = now + Duration::from_micros(i as u64 * 997);
            assert!(*p >= at && *p - at < GRID, "{i}: {:?}", *p - at);
            assert_eq!(on_grid(*p), *p, "a grid point is its own");
            assert_eq!(
                (*p - points[0]).as_nanos() % GRID.as_nanos(),
                0,
                "one grid for all"
            );
        }
    }

    #[test]
    fn readiness_flips_only_past_its_thresholds() {
        let mut v = Verdicts::new(&spec(ProbeKind::Readiness, 2, 3));
        let seen: Vec<Option<bool>> = [true, true, true, false, false, true, false, false, false]
            .into_iter()
            .map(|s| v.observe(s))
            .collect();
        assert_eq!(
            seen,
            [
                None,
                Some(true),
                None,
                None,
                None,
                None,
                None,
                None,
                Some(false)
            ]
        );
    }

    #[test]
    fn liveness_reports_failure_at_the_threshold_and_startup_its_first_success() {
        let mut live = Verdicts::new(&spec(ProbeKind::Liveness, 1, 2));
        assert_eq!(live.observe(true), None, "liveness starts as success");
        assert_eq!(live.observe(false), None);
        assert_eq!(live.observe(false), Some(false));
        let mut startup = Verdicts::new(&spec(ProbeKind::Startup, 1, 3));
        assert_eq!(startup.observe(false), None);
        assert_eq!(startup.observe(true), Some(true));
    }

    struct Flaky(std::sync::Mutex<u32>);
    impl ProbeExec for Flaky {
        fn exec<'a>(
            &'a self,
            _command: &'a [String],
            _timeout: Duration,
        ) -> futures::future::BoxFuture<'a, Result<crate::probe::exec::ExecResult, String>>
        {
            let mut n = self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *n += 1;
            let code = if *n >= 3 { 0 } else { 1 };
            Box::pin(async move {
                Ok(crate::probe::exec::ExecResult::Exited {
                    code,
                    output: b"not yet".to_vec(),
                })
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_readiness_worker_waits_its_initial_delay_and_then_reports_each_step() {
        let (tx, mut rx) = mpsc::channel(16);
        let mut s = spec(ProbeKind::Readiness, 1, 3);
        s.handler = Handler::Exec {
            command: vec!["x".into()],
        };
        s.initial_delay = Duration::from_secs(2);
        let t0 = Instant::now();
        let _set = start(
            vec![s],
            Context {
                container: 0usize,
                run: 7,
                host: "127.0.0.1".into(),
                exec: Arc::new(Flaky(std::sync::Mutex::new(0))),
                started: Arc::new(AtomicBool::new(true)),
                started_at: t0,
                reports: tx,
            },
        );
        let mut seen = Vec::new();
        for _ in 0..3 {
            let r = rx.recv().await.expect("a report");
            assert_eq!((r.container, r.run, r.kind), (0, 7, ProbeKind::Readiness));
            seen.push((t0.elapsed().as_secs(), r.what));
        }
        assert_eq!(
            seen,
            [
                (2, Observed::Failed("not yet".into())),
                (3, Observed::Failed("not yet".into())),
                (4, Observed::Result(true)),
            ]
        );
    }
}
