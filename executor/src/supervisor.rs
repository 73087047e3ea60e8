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

mod adopt;
pub(crate) mod checkpoint;
mod containers;
mod finish;
mod images;
mod launch;
mod local;
mod probes;
mod progress;
mod report;
mod run;
mod stop;

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use mesos::proto::TaskId;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::events::ContainerEvent;
use crate::layout;
use crate::oci::runner::{Oci, Running, StartError};
use crate::pod::{ContainerPlan, PodPlan};
use crate::runtime::{Order, PodUpdate, RuntimeConfig};
use crate::status::{Conditions, ContainerRecord};

/// The pod Warning event of process mode.
const NOT_ISOLATED: &str = "NotIsolated";

/// A container slot: an init container or a regular one, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
enum Which {
    Init(usize),
    Main(usize),
}

enum Event {
    Exited(Which, u32, io::Result<ExitStatus>),
    /// A crash-loop back-off ended (the back-off's number, see `restarts_due`).
    RestartDue(Which, u64),
    /// A container runtime start ended (see `containers`), with the image it
    /// started.
    OciStarted(
        Which,
        Box<Result<Running, StartError>>,
        Vec<ContainerEvent>,
        String,
    ),
    /// A container runtime container exited: exit code, OOM-killed.
    OciExited(Which, u32, i32, bool),
    /// A failed pull or config turns into its back-off after a moment.
    PullBackOff(Which, Duration),
    /// The back-off is over: try to start the container again.
    Retry(Which),
    /// A probe kill's grace period ran out for this probe run.
    ProbeKillDue(Which, u64),
    /// The grace period of a container stopped for its new image ran out
    /// for this run (its runtime id, or process group).
    ImageKillDue(Which, String),
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
    kills: mpsc::UnboundedReceiver<Order>,
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
    /// The dead executor's record of this pod, until its containers are
    /// adopted (`adopt`).
    adopting: Option<checkpoint::Checkpoint>,
    /// Containers stopped because their image changed: each starts again
    /// with its new image as soon as it exits (`images`).
    changing: std::collections::HashSet<Which>,
    /// The crash-loop back-off each container waits out, by number: a restart
    /// made sooner (a new image) cancels it.
    restarts_due: HashMap<Which, u64>,
    /// Back-offs so far (numbers them).
    backoffs: u64,
}

impl Supervisor {
    pub(crate) fn new(
        task_id: TaskId,
        plan: PodPlan,
        config: Arc<RuntimeConfig>,
        oci: Option<Arc<Oci>>,
        updates: mpsc::UnboundedSender<PodUpdate>,
        kills: mpsc::UnboundedReceiver<Order>,
        adopt: Option<checkpoint::Checkpoint>,
    ) -> Self {
        let key = &plan.key;
        // An adopted pod stays where its containers' logs and volumes are.
        let pod_dir = adopt.as_ref().map_or_else(
            || {
                config
                    .sandbox
                    .join(layout::pod_dir(&key.namespace, &key.name, &key.uid))
            },
            |cp| cp.pod_dir().to_path_buf(),
        );
        if adopt.is_some() {
            adopt::link_pod_dir(
                &config
                    .sandbox
                    .join(layout::pod_dir(&key.namespace, &key.name, &key.uid)),
                &pod_dir,
            );
        }
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
        let sup = Supervisor {
            probes: HashMap::new(),
            probe_runs: 0,
            probe_grace: HashMap::new(),
            probe_tx,
            probe_rx,
            flush_armed: false,
            adopting: None,
            changing: std::collections::HashSet::new(),
            restarts_due: HashMap::new(),
            backoffs: 0,
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
        };
        match adopt {
            Some(cp) => sup.restore(cp),
            None => sup,
        }
    }

    fn all(&self) -> impl Iterator<Item = &ContainerRecord> {
        self.init.iter().chain(self.main.iter())
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
}
