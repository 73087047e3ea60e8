//! The supervisor's side of probes: start a container run's probes when it
//! runs, stop them when it ends, and act on what they report — readiness
//! and started in the status, `Unhealthy` events, and the restart a
//! failed liveness or startup probe asks for (kubelet's `Killing`).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio::time::Instant;

use super::{Event, Supervisor, Which};
use crate::oci::exec::{ContainerExec, ExecError, ExecTarget};
use crate::pod::RestartPolicy;
use crate::probe::MAX_OUTPUT;
use crate::probe::exec::{ExecResult, NoExec, ProbeExec};
use crate::probe::worker::{self, Context, Observed, Report};
use crate::probe::{ProbeKind, ProbeSpec};
use crate::process::{self, KILL, TERM};

/// Probe events wait this long for more before an update carries them, so
/// a probe failing every second costs one update per pod per interval,
/// its repeats counted.
const EVENT_FLUSH: Duration = Duration::from_secs(5);

/// How many probe reports may wait for the supervisor (workers then wait).
pub(super) const REPORTS: usize = 64;

impl Supervisor {
    /// The pod's IP: its own on a CNI agent, else the agent's.
    pub(super) fn pod_ip(&self) -> String {
        (self.sandbox.get().and_then(|s| s.ip))
            .map_or_else(|| self.config.host_ip.clone(), |ip| ip.to_string())
    }

    /// Starts the probes of `which`'s new run, which runs `exec` for exec
    /// probes; sets its `started` and `ready` to where kubelet starts them.
    pub(super) fn start_probes(&mut self, which: Which, exec: Arc<dyn ProbeExec>) {
        self.probes.remove(&which);
        let Which::Main(j) = which else { return };
        let specs = (self.plan.pod.spec.as_ref())
            .and_then(|s| s.containers.get(j))
            .map(ProbeSpec::all)
            .unwrap_or_default();
        let has = |kind| specs.iter().any(|s: &ProbeSpec| s.kind == kind);
        let (started, ready) = (!has(ProbeKind::Startup), !has(ProbeKind::Readiness));
        let record = self.record(which);
        record.probe_started = started;
        record.probe_ready = ready;
        if specs.is_empty() {
            return;
        }
        self.probe_runs += 1;
        let run = self.probe_runs;
        self.probe_grace.insert(
            which,
            (
                grace_of(&specs, ProbeKind::Liveness),
                grace_of(&specs, ProbeKind::Startup),
            ),
        );
        let ctx = Context {
            container: which,
            run,
            host: self.pod_ip(),
            exec,
            started: Arc::new(AtomicBool::new(started)),
            started_at: Instant::now(),
            reports: self.probe_tx.clone(),
        };
        self.probes.insert(which, (run, worker::start(specs, ctx)));
    }

    /// What exec probes run through in a container runtime: the runtime's
    /// own exec into `which`'s running container (its namespaces, user and
    /// environment), as kubelet's exec probes go through the CRI.
    pub(super) fn oci_probe_exec(&self, which: Which) -> Arc<dyn ProbeExec> {
        let Some(running) = self.handles.get(&which) else {
            return Arc::new(NoExec(format!("container {which:?} is not running")));
        };
        Arc::new(OciProbeExec {
            exec: ContainerExec::new(&self.config.containers, &self.config.sandbox),
            target: ExecTarget::Container(running.id.clone()),
        })
    }

    /// Stops `which`'s probes (its run ended).
    pub(super) fn stop_probes(&mut self, which: Which) {
        self.probes.remove(&which);
    }

    pub(super) fn on_probe(&mut self, report: Report<Which>) {
        let which = report.container;
        let current = self.probes.get(&which).map(|(run, _)| *run);
        if current != Some(report.run) || self.killing.is_some() {
            return;
        }
        let kind = report.kind.as_str();
        match report.what {
            Observed::Failed(out) => {
                self.probe_event(which, "Unhealthy", format!("{kind} probe failed: {out}"));
            }
            Observed::Warning(w) => {
                self.probe_event(which, "ProbeWarning", format!("{kind} probe warning: {w}"));
            }
            Observed::Errored(e) => {
                self.probe_event(
                    which,
                    "Unhealthy",
                    format!("{kind} probe errored and resulted in unknown state: {e}"),
                );
            }
            Observed::Result(ok) => match report.kind {
                ProbeKind::Readiness => {
                    self.record(which).probe_ready = ok;
                    self.report_progress();
                }
                ProbeKind::Startup if ok => {
                    self.record(which).probe_started = true;
                    self.report_progress();
                }
                ProbeKind::Startup | ProbeKind::Liveness => {
                    self.probe_kill(which, report.kind, report.run);
                }
            },
        }
    }

    /// Queues a probe event and arms the flush.
    fn probe_event(&mut self, which: Which, reason: &str, message: String) {
        self.event(which, "Warning", reason, message);
        if !self.flush_armed {
            self.flush_armed = true;
            self.events.push(Box::pin(async {
                tokio::time::sleep(EVENT_FLUSH).await;
                Event::FlushEvents
            }));
        }
    }

    pub(super) fn flush_events(&mut self) {
        self.flush_armed = false;
        if !self.out_events.is_empty() && self.killing.is_none() && !self.is_over() {
            self.report_progress();
        }
    }

    /// A liveness or startup probe failed: stop the container (SIGTERM,
    /// SIGKILL after the grace period) and let its restart policy decide.
    fn probe_kill(&mut self, which: Which, kind: ProbeKind, run: u64) {
        let name = self.plan_of(which).name.clone();
        let what = kind.as_str().to_lowercase();
        let mut message = format!("Container {name} failed {what} probe");
        if self.plan.restart_policy != RestartPolicy::Never {
            message.push_str(", will be restarted");
        }
        self.event(which, "Normal", "Killing", message);
        tracing::info!(task = %self.task_id, container = %name, probe = what, "probe failed: stopping the container");
        self.signal_container(which, TERM);
        let (liveness, startup) = self.probe_grace.get(&which).copied().unwrap_or_default();
        let grace = match kind {
            ProbeKind::Startup => startup,
            _ => liveness,
        }
        .unwrap_or(self.plan.termination_grace);
        self.events.push(Box::pin(async move {
            tokio::time::sleep(grace).await;
            Event::ProbeKillDue(which, run)
        }));
        self.report_progress();
    }

    /// The grace period of a probe kill ran out: SIGKILL, if that run still runs.
    pub(super) fn probe_kill_due(&mut self, which: Which, run: u64) {
        if self.probes.get(&which).map(|(r, _)| *r) == Some(run) {
            self.signal_container(which, KILL);
        }
    }

    pub(super) fn signal_container(&self, which: Which, signal: rustix::process::Signal) {
        if let Some(running) = self.handles.get(&which) {
            crate::oci::runner::signal(running, signal);
        } else if self.oci.is_none()
            && let Some(pgid) = self.record_ref(which).pgid()
        {
            process::signal_group(pgid, signal);
        }
    }
}

/// The probe-level `terminationGracePeriodSeconds` of `kind`'s probe.
fn grace_of(specs: &[ProbeSpec], kind: ProbeKind) -> Option<Duration> {
    specs
        .iter()
        .find(|s| s.kind == kind)
        .and_then(|s| s.termination_grace)
}

/// An exec probe through the container runtime.
struct OciProbeExec {
    exec: ContainerExec,
    target: ExecTarget,
}

impl ProbeExec for OciProbeExec {
    fn exec<'a>(
        &'a self,
        command: &'a [String],
        timeout: Duration,
    ) -> futures::future::BoxFuture<'a, Result<ExecResult, String>> {
        Box::pin(async move {
            match self
                .exec
                .run(&self.target, command, timeout, MAX_OUTPUT)
                .await
            {
                Ok(o) => Ok(ExecResult::Exited {
                    code: o.exit_code,
                    output: o.output,
                }),
                Err(ExecError::Timeout(_)) => Ok(ExecResult::TimedOut),
                Err(e) => Err(e.to_string()),
            }
        })
    }
}
