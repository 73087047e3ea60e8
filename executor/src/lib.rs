//! The mesopod executor: runs pods as supervised processes on a Mesos agent.
//!
//! `mesopod executor` is what a Mesos agent launches for the framework. One
//! executor per agent runs many pods; each pod is one Mesos task whose
//! `TaskInfo.data` is the Kubernetes Pod as JSON, and whose status travels
//! back as the pod status JSON in `TaskStatus.data`.
//!
//! # Contract
//!
//! - [`env`](mod@env): the `MESOS_*` environment (durations in Mesos' syntax).
//! - [`pod`]: a pod is checked into a [`pod::PodPlan`] before anything runs;
//!   a pod that cannot run is refused with TASK_ERROR and a clear message.
//! - [`runtime`]: containers run as processes, each the leader of its own
//!   process group, in `<sandbox>/pods/<ns>_<name>_<uid>/<container>/`
//!   with `stdout` and `stderr` files there ([`layout`]). Init containers run
//!   first, in order; restart policies use crash-loop backoff ([`backoff`]).
//! - [`executor`]: the v1 executor API loop: subscribe, launch, kill,
//!   shutdown, and reliable status updates ([`reliable`]), over the
//!   [`agent::Agent`] trait (HTTP in production, in-process in tests).
//! - Every update carries the pod's directory in the `TaskStatus` label
//!   [`POD_DIR_LABEL`]; with [`layout`] that names the log files the agent's
//!   `/files/read` serves (`kubectl logs`, follow included: files are only
//!   appended to).
//! - [`metrics`]: every `--metric-resolution`, running containers' cgroup
//!   samples go to the API shim as the node, for `kubectl top`.
//!
//! # Status mapping
//!
//! | runtime | Mesos | pod phase |
//! |---|---|---|
//! | accepted, init containers | TASK_STARTING | Pending |
//! | every container started; later restarts and backoffs | TASK_RUNNING | Running |
//! | every container exited 0 | TASK_FINISHED | Succeeded |
//! | a container failed for good (exit codes in the message) | TASK_FAILED | Failed |
//! | activeDeadlineSeconds ran out | TASK_FAILED, REASON_MAX_COMPLETION_TIME_REACHED | Failed, DeadlineExceeded |
//! | KILL or SHUTDOWN | TASK_KILLED | Failed (Succeeded if all exited 0) |
//! | pod cannot be decoded or run | TASK_ERROR, REASON_TASK_INVALID | — (no data) |
//!
//! # Invariants
//!
//! - Every status update is kept until the agent ACKNOWLEDGES it and is
//!   resent in the next SUBSCRIBE; update uuids are random (v4).
//! - Every update carries the pod's complete status, never a diff.
//! - No process outlives the executor's orderly exit (SHUTDOWN, SIGTERM, a
//!   lost agent): every path out of the loop stops every container group
//!   first. An executor that dies otherwise (SIGKILL, a crash) leaves its
//!   containers to their shims ([`shim`]), outside its cgroup: the next
//!   executor on the agent adopts them from the pods' checkpoints, and a
//!   shim nobody adopts within the recovery timeout kills its container.
//!   Process mode's processes have no shim: the agent's cgroup of the
//!   executor takes them with it (Mesos' containerizer, and localmesos'
//!   agents as root), and their pods cannot be adopted.
//! - A pod launched with [`ADOPT_LABEL`] (its executor died) is adopted or
//!   failed (TASK_FAILED, REASON_EXECUTOR_TERMINATED), never started
//!   afresh.
//! - With checkpointing (`MESOS_CHECKPOINT=1`) a lost agent is waited for:
//!   SUBSCRIBE is retried every random interval up to
//!   `MESOS_SUBSCRIPTION_BACKOFF_MAX`; past `MESOS_RECOVERY_TIMEOUT` every
//!   pod is stopped and the executor exits. [`RESEND_STATUS_MESSAGE`] from
//!   the scheduler makes it report every pod's status again.
//! - [`UPDATE_IMAGES_MESSAGE`] from the scheduler gives a running pod's
//!   containers new images: a running container restarts with its new
//!   image as kubelet restarts a container whose definition changed.
//! - [`NODE_IMAGES_MESSAGE`] to the scheduler says what the agent's image
//!   store holds ([`NodeImages`]), for its Node's `status.images`.
//! - Containers run in real containers ([`oci`]): the image's root
//!   filesystem, their own mount, PID, UTS and IPC namespaces, cgroups under
//!   their shims' anchors beside the executor's, through a runc-compatible
//!   runtime (the embedded `mesopod runtime` by default). Process mode (`--container-runtime
//!   process`) runs host processes and says so on every pod.
//!
//! This crate knows nothing of the framework's registry, the API shim or
//! scheduling: its only inputs are the agent's events and the pods in them.

pub mod agent;
pub mod apiclient;
pub mod backoff;
pub mod env;
pub mod events;
pub mod executor;
pub mod images_message;
pub mod layout;
pub mod logs;
pub mod metrics;
pub mod network;
pub mod node_images;
pub mod objects;
pub mod oci;
pub mod pod;
pub mod probe;
pub mod reliable;
pub mod runtime;
pub mod shim;
pub mod status;
pub mod streaming;
pub mod volumes;

mod process;
mod supervisor;

pub use env::{EnvError, ExecutorEnv};
pub use executor::{
    ADOPT_LABEL, Executor, ExecutorError, Exit, NODE_STATUS_MESSAGE, NODE_STATUS_UPDATE_FREQUENCY,
    Options, POD_DIR_LABEL, RESEND_STATUS_MESSAGE,
};
pub use images_message::{ContainerImage, ImageUpdate, UPDATE_IMAGES_MESSAGE};
pub use node_images::{NODE_IMAGES_MESSAGE, NodeImages};
pub use pod::{PodError, PodPlan};
pub use runtime::{PodState, PodUpdate, Runtime, RuntimeConfig};
