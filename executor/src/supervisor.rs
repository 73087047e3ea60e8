//! One pod's supervisor: starts its containers, watches them, restarts them
//! by policy, stops them on request, and reports every change.
//!
//! ```text
//! Starting ──init 0..n exit 0──▶ start every container ──▶ Running
//!    │ init fails, policy Never                 │ exits: restart by policy
//!    ▼                                          ▼ (CrashLoopBackOff waits)
//!  Failed                     all exited for good: Finished (all 0) / Failed
//! any state ── kill order ──▶ SIGTERM groups ── grace ──▶ SIGKILL ──▶ Killed
//! any state ── activeDeadlineSeconds ──▶ (same stop) ──▶ Failed, DeadlineExceeded
//! ```
//!
//! The supervisor is the only writer of its pod's container records; every
//! update it sends carries a full status rendered from them.

mod containers;
mod finish;
mod launch;
mod probes;

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use mesos::proto::TaskId;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::events::ContainerEvent;
use crate::layout;
use crate::oci::runner::{Oci, Running, StartError};
use crate::pod::{ContainerPlan, PodPlan, RestartPolicy};
use crate::process::{self, KILL, TERM};
use crate::runtime::{KillOrder, PodState, PodUpdate, RuntimeConfig};
use crate::status::{
    CRASH_LOOP_BACK_OFF, Conditions, ContainerRecord, DEADLINE_EXCEEDED, Exit, Life, START_ERROR,
    Snapshot,
};

/// The pod Warning event of process mode.
const NOT_ISOLATED: &str = "NotIsolated";

/// A container slot: an init container or a regular one, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Which {
    Init(usize),
    Main(usize),
}

enum Event {
    Exited(Which, u32, io::Result<ExitStatus>),
    RestartDue(Which),
    /// A container runtime start ended (see `containers`).
    OciStarted(Which, Box<Result<Running, StartError>>, Vec<ContainerEvent>),
    /// A container runtime container exited: exit code, OOM-killed.
    OciExited(Which, u32, i32, bool),
    /// A failed pull or config turns into its back-off after a moment.
    PullBackOff(Which, Duration),
    /// The back-off is over: try to start the container again.
    Retry(Which),
    /// A probe kill's grace period ran out for this probe run.
    ProbeKillDue(Which, u64),
    /// Queued probe events go out now.
    FlushEvents,
}

#[derive(Debug, Clone, Copy)]
struct Killing {
    grace: Duration,
    sigkill_at: Instant,
    sigkilled: bool,
}

pub(crate) struct Supervisor {
    task_id: TaskId,
    plan: PodPlan,
    config: Arc<RuntimeConfig>,
    updates: mpsc::UnboundedSender<PodUpdate>,
    kills: mpsc::UnboundedReceiver<KillOrder>,
    kills_open: bool,
    pod_dir: PathBuf,
    node_name: String,
    start_time: SystemTime,
    init: Vec<ContainerRecord>,
    main: Vec<ContainerRecord>,
    /// Backoff attempts, parallel to `init` and `main`.
    init_attempts: Vec<u32>,
    main_attempts: Vec<u32>,
    /// Index of the init container running now; `init.len()` once all are done.
    next_init: usize,
    init_failed: bool,
    running_reported: bool,
    killing: Option<Killing>,
    deadline_exceeded: bool,
    conditions: Conditions,
    events: FuturesUnordered<BoxFuture<'static, Event>>,
    /// The container runtime; `None` in process mode.
    oci: Option<Arc<Oci>>,
    /// Containers the runtime runs now.
    handles: HashMap<Which, Arc<Running>>,
    /// Pull (or config) failures in a row, per container.
    pull_attempts: HashMap<Which, u32>,
    /// Whether each main container was started (or failed to) once.
    started_once: Vec<bool>,
    /// Events for the next update.
    out_events: Vec<ContainerEvent>,
    /// Containers whose start is in flight.
    starting: std::collections::HashSet<Which>,
    /// Runtime starts so far (names each run's container).
    runs: u32,
    /// Pull and config back-off.
    oci_backoff: crate::backoff::Backoff,
    /// The pod's shared namespaces, made by its first container start.
    sandbox: Arc<tokio::sync::OnceCell<crate::oci::sandbox::PodSandbox>>,
    /// Volumes, objects and the pod's values for container starts.
    inputs: crate::volumes::StartInputs,
    /// Eviction messages from the volume watch (an `emptyDir` past its limit).
    evictions: mpsc::UnboundedReceiver<String>,
    evict_tx: mpsc::UnboundedSender<String>,
    /// Why the pod was evicted, once it was.
    evicted: Option<String>,
    /// Each running container's probes, by probe run.
    probes: HashMap<Which, (u64, crate::probe::worker::ProbeSet)>,
    /// Probe runs so far (names each run's reports).
    probe_runs: u64,
    /// The liveness and startup probes' own grace periods, per container.
    probe_grace: HashMap<Which, (Option<Duration>, Option<Duration>)>,
    probe_tx: mpsc::Sender<crate::probe::worker::Report<Which>>,
    probe_rx: mpsc::Receiver<crate::probe::worker::Report<Which>>,
    /// A flush of queued probe events is pending.
    flush_armed: bool,
}

impl Supervisor {
    pub(crate) fn new(
        task_id: TaskId,
        plan: PodPlan,
        config: Arc<RuntimeConfig>,
        oci: Option<Arc<Oci>>,
        updates: mpsc::UnboundedSender<PodUpdate>,
        kills: mpsc::UnboundedReceiver<KillOrder>,
    ) -> Self {
        let key = &plan.key;
        let pod_dir = config
            .sandbox
            .join(layout::pod_dir(&key.namespace, &key.name, &key.uid));
        let node_name = plan
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| config.node_name.clone());
        let record = |c: &ContainerPlan| ContainerRecord::new(&c.name, &c.image);
        let oci_backoff = config.containers.image_backoff;
        if let Some(oci) = &oci {
            let images = plan.init_containers.iter().chain(&plan.containers);
            oci.gc
                .hold(&task_id.value, images.map(|c| c.image.clone()).collect());
        }
        let volumes = crate::volumes::PodVolumes::new(
            &pod_dir,
            &plan,
            config.containers.volumes.clone(),
            Arc::clone(&config.objects),
        );
        let inputs = crate::volumes::StartInputs {
            info: Arc::new(crate::volumes::PodInfo {
                plan: Arc::new(plan.clone()),
                node_name: node_name.clone(),
                host_ip: config.host_ip.clone(),
            }),
            volumes: Arc::new(volumes),
            objects: Arc::clone(&config.objects),
        };
        let (evict_tx, evictions) = mpsc::unbounded_channel();
        let (probe_tx, probe_rx) = mpsc::channel(probes::REPORTS);
        Supervisor {
            probes: HashMap::new(),
            probe_runs: 0,
            probe_grace: HashMap::new(),
            probe_tx,
            probe_rx,
            flush_armed: false,
            inputs,
            evictions,
            evict_tx,
            evicted: None,
            init: plan.init_containers.iter().map(record).collect(),
            main: plan.containers.iter().map(record).collect(),
            init_attempts: vec![0; plan.init_containers.len()],
            main_attempts: vec![0; plan.containers.len()],
            started_once: vec![false; plan.containers.len()],
            task_id,
            plan,
            config,
            updates,
            kills,
            kills_open: true,
            pod_dir,
            node_name,
            start_time: SystemTime::now(),
            next_init: 0,
            init_failed: false,
            running_reported: false,
            killing: None,
            deadline_exceeded: false,
            conditions: Conditions::default(),
            events: FuturesUnordered::new(),
            oci,
            handles: HashMap::new(),
            pull_attempts: HashMap::new(),
            out_events: Vec::new(),
            starting: std::collections::HashSet::new(),
            runs: 0,
            oci_backoff,
            sandbox: Arc::default(),
        }
    }

    pub(crate) async fn run(mut self) {
        if self.oci.is_none() {
            self.out_events.push(ContainerEvent::new(
                "Warning",
                NOT_ISOLATED,
                format!(
                    "container runtime is \"process\" on node {}: the pod's containers run as host processes, without isolation",
                    self.node_name
                ),
                String::new(),
            ));
        }
        self.report(PodState::Starting, None);
        if let Err(e) = std::fs::create_dir_all(&self.pod_dir) {
            let msg = format!(
                "cannot create the pod directory {}: {e}",
                self.pod_dir.display()
            );
            self.report(PodState::Failed, Some(msg));
            return;
        }
        let deadline = self.plan.active_deadline.map(|d| Instant::now() + d);
        let watch = (!self.inputs.volumes.is_empty()).then(|| {
            let volumes = Arc::clone(&self.inputs.volumes);
            tokio::spawn(volumes.watch(Arc::clone(&self.inputs.info), self.evict_tx.clone()))
        });
        self.advance();
        while !self.is_over() {
            let sigkill_at = self.killing.filter(|k| !k.sigkilled).map(|k| k.sigkill_at);
            let deadline_armed = deadline.is_some() && self.killing.is_none();
            tokio::select! {
                order = self.kills.recv(), if self.kills_open => match order {
                    Some(order) => self.begin_kill(order),
                    None => {
                        // The runtime is gone: nobody will hear about a grace period.
                        self.kills_open = false;
                        self.begin_kill(KillOrder { grace: Some(Duration::ZERO), cap: Duration::ZERO });
                    }
                },
                Some(event) = self.events.next() => self.handle(event),
                Some(report) = self.probe_rx.recv() => self.on_probe(report),
                Some(message) = self.evictions.recv(), if self.evicted.is_none() => self.evict(message),
                () = sleep_until(deadline), if deadline_armed => {
                    self.deadline_exceeded = true;
                    self.begin_kill(KillOrder { grace: None, cap: Duration::MAX });
                }
                () = sleep_until(sigkill_at), if sigkill_at.is_some() => self.sigkill_all(),
                else => break,
            }
        }
        if let Some(watch) = watch {
            watch.abort();
        }
        if !self.inputs.volumes.is_empty() {
            self.inputs.volumes.teardown().await;
        }
        if let (Some(sandbox), Some(oci)) = (self.sandbox.get(), &self.oci) {
            oci.remove_sandbox(sandbox).await;
        }
        if let Some(oci) = &self.oci {
            oci.gc.release(&self.task_id.value);
        }
        self.report_final();
    }

    /// Kubelet's eviction: stop every container now; the pod ends Failed,
    /// reason `Evicted`.
    fn evict(&mut self, message: String) {
        tracing::warn!(task = %self.task_id, %message, "evicting pod");
        self.out_events.push(ContainerEvent::new(
            "Warning",
            crate::status::EVICTED,
            message.clone(),
            String::new(),
        ));
        self.evicted = Some(message);
        self.begin_kill(KillOrder {
            grace: Some(Duration::ZERO),
            cap: Duration::ZERO,
        });
    }

    fn is_over(&self) -> bool {
        if self.killing.is_some() {
            return !self.all().any(ContainerRecord::is_running) && self.starting.is_empty();
        }
        self.init_failed
            || (self.next_init >= self.init.len()
                && self
                    .main
                    .iter()
                    .all(|c| matches!(c.life, Life::Terminated(_))))
    }

    fn all(&self) -> impl Iterator<Item = &ContainerRecord> {
        self.init.iter().chain(self.main.iter())
    }

    /// Starts the next init container, or every container once init is done.
    fn advance(&mut self) {
        if self.next_init < self.init.len() {
            self.start(Which::Init(self.next_init));
            return;
        }
        for j in 0..self.main.len() {
            self.start(Which::Main(j));
        }
        self.maybe_report_running();
    }

    /// Reports Running once every container was started (or failed to).
    fn maybe_report_running(&mut self) {
        if !self.running_reported
            && self.killing.is_none()
            && self.next_init >= self.init.len()
            && self.started_once.iter().all(|s| *s)
            && !self.is_over()
        {
            self.running_reported = true;
            self.report(PodState::Running, None);
        }
    }

    fn plan_of(&self, which: Which) -> &ContainerPlan {
        match which {
            Which::Init(i) => &self.plan.init_containers[i],
            Which::Main(j) => &self.plan.containers[j],
        }
    }

    fn record_ref(&self, which: Which) -> &ContainerRecord {
        match which {
            Which::Init(i) => &self.init[i],
            Which::Main(j) => &self.main[j],
        }
    }

    fn record(&mut self, which: Which) -> &mut ContainerRecord {
        match which {
            Which::Init(i) => &mut self.init[i],
            Which::Main(j) => &mut self.main[j],
        }
    }

    fn attempts(&mut self, which: Which) -> &mut u32 {
        match which {
            Which::Init(i) => &mut self.init_attempts[i],
            Which::Main(j) => &mut self.main_attempts[j],
        }
    }

    fn start(&mut self, which: Which) {
        if self.oci.is_some() {
            self.start_oci(which);
            return;
        }
        if let Which::Main(j) = which {
            self.started_once[j] = true;
        }
        let plan = self.plan_of(which).clone();
        let key = &self.plan.key;
        let dir = self.config.sandbox.join(layout::container_dir(
            &key.namespace,
            &key.name,
            &key.uid,
            &plan.name,
        ));
        let (plan, env) = self.inputs.prepare_local(&plan);
        let run = crate::logs::RunLog::new(
            &dir,
            key,
            &self.plan.pod,
            &plan.name,
            self.record_ref(which).restart_count,
        );
        let started = crate::logs::start(&run, self.config.containers.logs)
            .and_then(|output| process::spawn(&plan, &dir, &key.name, &env, output));
        match started {
            Ok(started) => {
                let pgid = started.pgid;
                let mut child = started.child;
                let exec =
                    crate::probe::exec::ProcessExec::for_container(&plan, &dir, &key.name, &env);
                self.record(which).life = Life::Running {
                    pgid,
                    started_at: SystemTime::now(),
                };
                self.events.push(Box::pin(async move {
                    let status = child.wait().await;
                    Event::Exited(which, pgid, status)
                }));
                self.start_probes(which, Arc::new(exec));
                tracing::info!(task = %self.task_id, container = %plan.name, pgid, "container started");
            }
            Err(e) => {
                let message = format!(
                    "{e} (image {:?} is recorded, not pulled: without a container runtime the \
                     command runs on the agent's host)",
                    plan.image
                );
                tracing::warn!(task = %self.task_id, container = %plan.name, %message, "container did not start");
                let exit = Exit {
                    exit_code: 128,
                    reason: START_ERROR.into(),
                    message: Some(message),
                    started_at: None,
                    finished_at: SystemTime::now(),
                    pgid: None,
                };
                self.exited(which, exit);
            }
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Exited(which, pgid, status) => {
                // Whatever the leader left behind in its group goes with it.
                process::signal_group(pgid, KILL);
                let started_at = match self.record(which).life {
                    Life::Running { started_at, .. } => Some(started_at),
                    _ => None,
                };
                let (exit_code, message) = match status {
                    Ok(status) => (process::exit_code(status), None),
                    Err(e) => (128, Some(format!("cannot wait for the process: {e}"))),
                };
                let exit = Exit {
                    exit_code,
                    reason: Exit::reason_for(exit_code).into(),
                    message,
                    started_at,
                    finished_at: SystemTime::now(),
                    pgid: Some(pgid),
                };
                tracing::info!(task = %self.task_id, container = %self.plan_of(which).name, exit_code, "container exited");
                self.exited(which, exit);
            }
            Event::RestartDue(which) => {
                if self.killing.is_some() {
                    return;
                }
                self.record(which).restart_count += 1;
                self.start(which);
                self.report_progress();
            }
            Event::OciStarted(which, result, events) => self.oci_started(which, *result, events),
            Event::OciExited(which, pid, code, oom) => self.oci_exited(which, pid, code, oom),
            Event::PullBackOff(which, rest) => self.pull_back_off(which, rest),
            Event::Retry(which) => {
                if self.killing.is_none() {
                    self.start(which);
                    self.report_progress();
                }
            }
            Event::ProbeKillDue(which, run) => self.probe_kill_due(which, run),
            Event::FlushEvents => self.flush_events(),
        }
    }

    /// A container ended (or never started): restart it, move on, or give up.
    fn exited(&mut self, which: Which, exit: Exit) {
        self.stop_probes(which);
        let code = exit.exit_code;
        self.record(which).life = Life::Terminated(exit);
        if self.killing.is_some() {
            return;
        }
        let policy = self.plan.restart_policy;
        match which {
            Which::Init(i) if code == 0 => {
                self.next_init = i + 1;
                self.advance();
            }
            Which::Init(_) if policy == RestartPolicy::Never => self.init_failed = true,
            Which::Init(_) => {
                self.schedule_restart(which);
                self.report_progress();
            }
            Which::Main(_) => {
                if policy.restarts(code) {
                    self.schedule_restart(which);
                }
                if self.running_reported && !self.is_over() {
                    self.report(PodState::Running, None);
                }
            }
        }
    }

    fn schedule_restart(&mut self, which: Which) {
        let backoff = self.config.backoff;
        let pod_name = self.plan.key.name.clone();
        let record = self.record(which);
        let Life::Terminated(exit) = record.life.clone() else {
            return;
        };
        let name = record.name.clone();
        let ran_for = exit
            .started_at
            .and_then(|s| exit.finished_at.duration_since(s).ok())
            .unwrap_or_default();
        let attempts = self.attempts(which);
        if ran_for >= backoff.reset_after() {
            *attempts = 0;
        }
        let delay = backoff.delay(*attempts);
        *attempts = attempts.saturating_add(1);
        let record = self.record(which);
        record.last = Some(exit);
        record.life = Life::Waiting {
            reason: CRASH_LOOP_BACK_OFF.into(),
            message: Some(format!(
                "back-off {delay:?} restarting failed container={name} pod={pod_name}"
            )),
        };
        self.events.push(Box::pin(async move {
            tokio::time::sleep(delay).await;
            Event::RestartDue(which)
        }));
    }

    fn begin_kill(&mut self, order: KillOrder) {
        let grace = order
            .grace
            .unwrap_or(self.plan.termination_grace)
            .min(order.cap);
        if let Some(k) = &mut self.killing {
            // Already stopping: a later, shorter order (SHUTDOWN after a KILL
            // with a long grace period) moves SIGKILL earlier, never later.
            let at = Instant::now().checked_add(grace);
            if !k.sigkilled && at.is_some_and(|at| at < k.sigkill_at) {
                k.sigkill_at = at.unwrap_or(k.sigkill_at);
                k.grace = grace;
                if grace.is_zero() {
                    self.sigkill_all();
                }
            }
            return;
        }
        self.kill_events();
        self.probes.clear();
        for (_, running) in self.handles.iter() {
            crate::oci::runner::signal(running, TERM);
        }
        let oci = self.oci.is_some();
        for record in self.init.iter_mut().chain(self.main.iter_mut()) {
            if let Some(pgid) = record.pgid().filter(|_| !oci) {
                process::signal_group(pgid, TERM);
            } else if let (Life::Waiting { .. }, Some(last)) = (&record.life, &record.last) {
                // A restart that will not happen: show how the last run ended.
                record.life = Life::Terminated(last.clone());
            }
        }
        let sigkill_at = Instant::now()
            .checked_add(grace)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
        self.killing = Some(Killing {
            grace,
            sigkill_at,
            sigkilled: false,
        });
        tracing::info!(task = %self.task_id, ?grace, "stopping pod");
        if grace.is_zero() {
            self.sigkill_all();
        }
    }

    fn sigkill_all(&mut self) {
        for (_, running) in self.handles.iter() {
            crate::oci::runner::signal(running, KILL);
        }
        if self.oci.is_none() {
            for pgid in self.all().filter_map(ContainerRecord::pgid) {
                process::signal_group(pgid, KILL);
            }
        }
        if let Some(k) = &mut self.killing {
            k.sigkilled = true;
        }
    }

    /// An update for a restart or a backoff, in the pod's current task state.
    fn report_progress(&mut self) {
        let state = if self.running_reported {
            PodState::Running
        } else {
            PodState::Starting
        };
        self.report(state, None);
    }

    fn report(&mut self, state: PodState, message: Option<String>) {
        let reason = self
            .deadline_exceeded
            .then_some(DEADLINE_EXCEEDED)
            .or(self.evicted.as_ref().map(|_| crate::status::EVICTED));
        // On a CNI agent the pod has an IP of its own once its sandbox exists.
        let pod_ip = self.pod_ip();
        let status = Snapshot {
            phase: self.phase(state),
            reason,
            message: if state.is_terminal() {
                message.clone()
            } else {
                None
            },
            initialized: self.next_init >= self.init.len(),
            init: &self.init,
            main: &self.main,
            host_ip: &self.config.host_ip,
            pod_ip: &pod_ip,
            start_time: self.start_time,
            now: SystemTime::now(),
        }
        .render(&mut self.conditions);
        let update = PodUpdate {
            task_id: self.task_id.clone(),
            state,
            message,
            deadline_exceeded: self.deadline_exceeded,
            status: Some(status),
            pod_dir: Some(self.pod_dir.clone()),
            events: crate::events::coalesce(std::mem::take(&mut self.out_events)),
        };
        // A closed channel means the executor is going away; the kill path
        // still stops every container.
        let _ = self.updates.send(update);
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
