//! The pod runtime: many pods, each supervised by its own task.
//!
//! The runtime knows nothing of Mesos' wire protocol: it takes pods and kill
//! orders, and emits [`PodUpdate`]s on one channel. The executor loop turns
//! those into Mesos status updates.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::PodStatus;
use mesos::proto::TaskId;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::backoff::Backoff;
use crate::events::ContainerEvent;
use crate::oci::ContainerSettings;
use crate::oci::runner::{Adoptable, Oci};
use crate::pod::{PodError, PodPlan};
use crate::supervisor::Supervisor;
use crate::supervisor::checkpoint;

/// Where and how pods run.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// The sandbox: pods live in `<sandbox>/pods/…` (see [`crate::layout`]).
    pub sandbox: PathBuf,
    /// The agent's IP: processes share the host network, so it is also
    /// every pod's IP.
    pub host_ip: String,
    /// The node name for pods that do not carry `spec.nodeName`.
    pub node_name: String,
    /// Crash-loop backoff ([`CRASH_LOOP`](crate::backoff::CRASH_LOOP) in production).
    pub backoff: Backoff,
    /// How containers run (process mode by default in the library; the
    /// `mesopod executor` command defaults to the embedded runtime).
    pub containers: ContainerSettings,
    /// Where the ConfigMaps, Secrets and tokens pods reference come from.
    pub objects: crate::objects::SharedObjects,
}

/// The task-level outcome an update stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodState {
    /// Accepted; init containers or starts in progress (TASK_STARTING).
    Starting,
    /// Every container was started (TASK_RUNNING); later updates in this
    /// state carry container exits, restarts and backoffs.
    Running,
    /// Every container exited 0 (TASK_FINISHED).
    Finished,
    /// A container failed for good, or the deadline ran out (TASK_FAILED).
    Failed,
    /// Stopped on request (TASK_KILLED).
    Killed,
    /// The pod could not be run at all (TASK_ERROR).
    Error,
    /// Its executor died and its containers cannot be adopted: nothing
    /// recorded them (TASK_FAILED, REASON_EXECUTOR_TERMINATED).
    NotAdopted,
}

impl PodState {
    /// Whether no update follows this one.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            PodState::Finished
                | PodState::Failed
                | PodState::Killed
                | PodState::Error
                | PodState::NotAdopted
        )
    }
}

/// A change in one pod.
#[derive(Debug, Clone)]
pub struct PodUpdate {
    /// The pod's Mesos task.
    pub task_id: TaskId,
    /// Its state.
    pub state: PodState,
    /// Why, for people (exit codes, errors).
    pub message: Option<String>,
    /// The deadline ran out (Mesos reason MAX_COMPLETION_TIME_REACHED).
    pub deadline_exceeded: bool,
    /// The pod's full status; `None` only for a pod that could not be decoded.
    pub status: Option<PodStatus>,
    /// The pod's directory (absolute): its container logs are below it.
    pub pod_dir: Option<PathBuf>,
    /// Container events since the previous update.
    pub events: Vec<ContainerEvent>,
}

/// Why a kill order could not be given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuntimeError {
    /// The task id is already running.
    #[error("task {0} is already running on this executor")]
    Duplicate(String),
}

/// A kill order: the grace period is `grace` (the pod's own when `None`),
/// never longer than `cap`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KillOrder {
    pub(crate) grace: Option<Duration>,
    pub(crate) cap: Duration,
}

/// What a pod's supervisor is told while it runs.
#[derive(Debug, Clone)]
pub(crate) enum Order {
    /// Stop the pod.
    Kill(KillOrder),
    /// Run the containers with these images (kubelet's restart of a container
    /// whose definition changed).
    Images(crate::images_message::ImageUpdate),
}

struct Pod {
    uid: String,
    kill: mpsc::UnboundedSender<Order>,
    join: JoinHandle<()>,
}

/// Once the adoption timeout is over: what the pods of dead executors left
/// that no launch adopted goes (their shims have killed the containers by
/// then).
struct AdoptionSweep {
    oci: Arc<Oci>,
    agent_dir: std::path::PathBuf,
    own: std::path::PathBuf,
    supervised: Arc<std::sync::Mutex<HashSet<String>>>,
}

impl AdoptionSweep {
    fn run(self) {
        let live = |uid: &str| self.supervised.lock().is_ok_and(|s| s.contains(uid));
        for cp in checkpoint::all(&self.agent_dir, &self.own) {
            if !live(cp.uid()) {
                self.oci.abandon(&cp);
            }
        }
        let adopted = |p: &std::path::Path| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.rsplit_once('_'))
                .is_some_and(|(_, uid)| live(uid))
        };
        let left = crate::volumes::leftovers::clean(&self.agent_dir, &self.own, &adopted);
        if !left.unmounted.is_empty() || !left.removed.is_empty() {
            tracing::warn!(unmounted = ?left.unmounted, removed = ?left.removed, "unmounted and removed what unadopted pods left");
        }
    }
}

/// The set of pods this executor runs.
pub struct Runtime {
    config: Arc<RuntimeConfig>,
    oci: Option<Arc<Oci>>,
    /// Why containers cannot run here (the runtime could not be set up):
    /// every pod fails with it rather than running unisolated.
    broken: Option<String>,
    updates: mpsc::UnboundedSender<PodUpdate>,
    pods: HashMap<TaskId, Pod>,
    /// The uids of the pods supervised now (the adoption sweep keeps theirs).
    supervised: Arc<std::sync::Mutex<HashSet<String>>>,
    /// The sweep waiting out the adoption timeout, if pods wait to be
    /// adopted: its trigger, to sweep at once, and its task.
    adoption: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
}

impl Runtime {
    /// A runtime and the receiving end of its updates.
    pub fn new(config: RuntimeConfig) -> (Runtime, mpsc::UnboundedReceiver<PodUpdate>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (oci, broken) = match Oci::new(&config.containers, &config.sandbox) {
            Ok(oci) => (oci.map(Arc::new), None),
            Err(e) => {
                tracing::error!(error = %e, "containers cannot run on this agent; every pod will fail");
                (None, Some(e))
            }
        };
        let supervised = Arc::new(std::sync::Mutex::new(HashSet::new()));
        let mut adoption = None;
        if let Some(oci) = &oci {
            oci.gc.trigger();
            let agent_dir = crate::oci::agent_dir(&config.sandbox);
            // The pods dead executors ran here wait for their scheduler to
            // launch them again, for this executor to adopt.
            let adoptable = checkpoint::all(&agent_dir, &config.sandbox);
            let keep = Adoptable::of(&adoptable);
            let orphans = oci.clean_orphans(&keep);
            if !orphans.is_empty() {
                tracing::warn!(
                    count = orphans.len(),
                    ?orphans,
                    "killed the containers an earlier executor left running"
                );
            }
            let keep_dir = |p: &std::path::Path| keep.keeps_pod_dir(p);
            let left = crate::volumes::leftovers::clean(&agent_dir, &config.sandbox, &keep_dir);
            if !left.unmounted.is_empty() || !left.removed.is_empty() {
                tracing::warn!(unmounted = ?left.unmounted, removed = ?left.removed, "unmounted and removed what an earlier executor's pods left");
            }
            if !adoptable.is_empty() {
                tracing::info!(
                    pods = adoptable.len(),
                    timeout = ?config.containers.adoption_timeout,
                    "pods of an earlier executor wait to be adopted"
                );
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    let sweep = AdoptionSweep {
                        oci: Arc::clone(oci),
                        agent_dir,
                        own: config.sandbox.clone(),
                        supervised: Arc::clone(&supervised),
                    };
                    let after = config.containers.adoption_timeout;
                    let (now, at_once) = oneshot::channel::<()>();
                    let task = rt.spawn(async move {
                        tokio::select! {
                            () = tokio::time::sleep(after) => {}
                            _ = at_once => {}
                        }
                        let _ = tokio::task::spawn_blocking(move || sweep.run()).await;
                    });
                    adoption = Some((now, task));
                }
            }
        } else if broken.is_none() {
            tracing::warn!(
                "container runtime is `process`: pods run as host processes, without isolation"
            );
        }
        let rt = Runtime {
            config: Arc::new(config),
            oci,
            broken,
            updates: tx,
            pods: HashMap::new(),
            supervised,
            adoption,
        };
        (rt, rx)
    }

    /// The agent's image store as last listed, for its Node; `None` in
    /// process mode or when the runtime could not be set up.
    pub(crate) fn node_images(
        &self,
    ) -> Option<tokio::sync::watch::Receiver<Option<Arc<crate::node_images::NodeImages>>>> {
        self.oci.as_ref().map(|oci| oci.gc.listed())
    }

    /// The node name for pods launched from now on that carry no
    /// `spec.nodeName` (the agent's hostname, known once subscribed).
    pub fn set_node_name(&mut self, node_name: &str) {
        if self.config.node_name != node_name {
            let mut config = (*self.config).clone();
            config.node_name = node_name.to_owned();
            self.config = Arc::new(config);
        }
    }

    /// Starts a pod. Its first update is [`PodState::Starting`], or, for a
    /// pod a dead executor ran here (its checkpoint is found), the pod as it
    /// is once its containers are adopted ([`crate::supervisor`]).
    pub fn launch(&mut self, task_id: TaskId, plan: PodPlan) -> Result<(), RuntimeError> {
        self.launch_with(task_id, plan, false)
    }

    /// Takes over a pod whose executor died on this agent: its containers
    /// are adopted; with no record of them to adopt, the pod ends
    /// [`PodState::NotAdopted`] and nothing of it is started again (a
    /// `restartPolicy: Never` pod must not run twice).
    pub fn adopt(&mut self, task_id: TaskId, plan: PodPlan) -> Result<(), RuntimeError> {
        self.launch_with(task_id, plan, true)
    }

    fn launch_with(
        &mut self,
        task_id: TaskId,
        plan: PodPlan,
        must_adopt: bool,
    ) -> Result<(), RuntimeError> {
        self.reap();
        if self.pods.contains_key(&task_id) {
            return Err(RuntimeError::Duplicate(task_id.value));
        }
        if let Some(why) = &self.broken {
            self.reject(
                task_id,
                format!("containers cannot run on this agent: {why}"),
            );
            return Ok(());
        }
        if self.oci.is_none()
            && let Some(c) = plan
                .init_containers
                .iter()
                .chain(&plan.containers)
                .find(|c| c.argv.is_empty())
        {
            let e = PodError::NoCommand {
                container: c.name.clone(),
                image: c.image.clone(),
            };
            self.reject(task_id, e.to_string());
            return Ok(());
        }
        if let Some(why) = crate::volumes::launch_refusal(
            &plan,
            &self.config.containers.volumes,
            self.oci.is_some(),
        ) {
            self.reject(task_id, why);
            return Ok(());
        }
        let uid = plan.key.uid.clone();
        let checkpoint = self.oci.as_ref().and_then(|_| {
            let key = &plan.key;
            let name = crate::layout::pod_dir(&key.namespace, &key.name, &key.uid);
            let name = name.file_name()?.to_string_lossy().into_owned();
            let agent_dir = crate::oci::agent_dir(&self.config.sandbox);
            crate::supervisor::checkpoint::find(&agent_dir, &self.config.sandbox, &name)
        });
        if must_adopt && checkpoint.is_none() {
            let why = match &self.oci {
                Some(oci) if oci.adopts() => {
                    "no checkpoint of its containers was found on the agent"
                }
                Some(_) => "a rootless executor's containers die with it",
                None => {
                    "its containers ran as host processes (--container-runtime=process), which die with their executor"
                }
            };
            self.not_adopted(
                task_id,
                format!("Executor terminated; its containers cannot be adopted: {why}"),
            );
            return Ok(());
        }
        let (kill_tx, kill_rx) = mpsc::unbounded_channel();
        let sup = Supervisor::new(
            task_id.clone(),
            plan,
            Arc::clone(&self.config),
            self.oci.clone(),
            self.updates.clone(),
            kill_rx,
            checkpoint,
        );
        let join = tokio::spawn(sup.run());
        if let Ok(mut s) = self.supervised.lock() {
            s.insert(uid.clone());
        }
        self.pods.insert(
            task_id,
            Pod {
                uid,
                kill: kill_tx,
                join,
            },
        );
        Ok(())
    }

    /// Reports a pod that cannot be run: one [`PodState::Error`] update.
    pub fn reject(&self, task_id: TaskId, message: String) {
        let _ = self.updates.send(PodUpdate {
            task_id,
            state: PodState::Error,
            message: Some(message),
            deadline_exceeded: false,
            status: None,
            pod_dir: None,
            events: Vec::new(),
        });
    }

    /// Reports a pod whose containers died with their executor.
    fn not_adopted(&self, task_id: TaskId, message: String) {
        tracing::warn!(task = %task_id, %message, "cannot adopt a pod");
        let _ = self.updates.send(PodUpdate {
            task_id,
            state: PodState::NotAdopted,
            message: Some(message),
            deadline_exceeded: false,
            status: None,
            pod_dir: None,
            events: Vec::new(),
        });
    }

    /// Stops a pod: SIGTERM to every container, SIGKILL after `grace` (the
    /// pod's own terminationGracePeriodSeconds when `None`), then
    /// [`PodState::Killed`]. Returns false if the task is not running here.
    pub fn kill(&mut self, task_id: &TaskId, grace: Option<Duration>) -> bool {
        self.reap();
        match self.pods.get(task_id) {
            Some(pod) => pod
                .kill
                .send(Order::Kill(KillOrder {
                    grace,
                    cap: Duration::MAX,
                }))
                .is_ok(),
            None => false,
        }
    }

    /// Hands a pod the images its containers should run now (see
    /// [`crate::images_message`]). Returns false if the task is not running here.
    pub fn update_images(&mut self, update: crate::images_message::ImageUpdate) -> bool {
        self.reap();
        let task_id = TaskId::new(update.task_id.clone());
        match self.pods.get(&task_id) {
            Some(pod) => pod.kill.send(Order::Images(update)).is_ok(),
            None => false,
        }
    }

    /// Stops every pod, none waiting longer than `grace_cap`.
    pub fn kill_all(&mut self, grace_cap: Duration) {
        for pod in self.pods.values() {
            let _ = pod.kill.send(Order::Kill(KillOrder {
                grace: None,
                cap: grace_cap,
            }));
        }
    }

    /// Whether a task is still supervised.
    pub fn contains(&mut self, task_id: &TaskId) -> bool {
        self.reap();
        self.pods.contains_key(task_id)
    }

    /// How many pods are still supervised.
    pub fn len(&mut self) -> usize {
        self.reap();
        self.pods.len()
    }

    /// Whether no pod is supervised.
    pub fn is_empty(&mut self) -> bool {
        self.len() == 0
    }

    /// Waits until every supervisor has ended (after [`Runtime::kill_all`]),
    /// then gives up on the pods still waiting to be adopted: an executor
    /// that stops in order is told to stop its pods, and those are its
    /// pods too, so their containers go now rather than after the adoption
    /// timeout.
    pub async fn wait_all(&mut self) {
        for (_, pod) in self.pods.drain() {
            let _ = pod.join.await;
        }
        if let Some((now, task)) = self.adoption.take() {
            let _ = now.send(());
            let _ = task.await;
        }
    }

    fn reap(&mut self) {
        let supervised = &self.supervised;
        self.pods.retain(|_, pod| {
            let over = pod.join.is_finished();
            if over && let Ok(mut s) = supervised.lock() {
                s.remove(&pod.uid);
            }
            !over
        });
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // A supervisor whose kill channel closes stops its containers at once,
        // so dropping the runtime never leaves processes behind.
        self.pods.clear();
    }
}
