//! The mesopod executor: runs pods as supervised processes on a Mesos agent.
//!
//! `mesopod executor` is what a Mesos agent launches for the framework. One
//! executor per agent runs many pods; each pod is one Mesos task whose
//! `TaskInfo.data` is the Kubernetes Pod as JSON, and whose status travels
//! back as the pod status JSON in `TaskStatus.data`.
//!
//! # Contract
//!
//! - [`env`]: the `MESOS_*` environment (durations in Mesos' syntax).
//! - [`pod`]: a pod is checked into a [`pod::PodPlan`] before anything runs;
//!   a pod that cannot run is refused with TASK_ERROR and a clear message.
//! - [`runtime`]: containers run as processes, each the leader of its own
//!   process group, in `<sandbox>/pods/<ns>_<name>_<uid>/<container>/`
//!   with `stdout` and `stderr` files there ([`layout`]). Init containers run
//!   first, in order; restart policies use crash-loop backoff ([`backoff`]).
//! - [`executor`]: the v1 executor API loop: subscribe, launch, kill,
//!   shutdown, and reliable status updates.
//!
//! # Invariants
//!
//! - Every status update is kept until the agent ACKNOWLEDGES it and is
//!   resent in the next SUBSCRIBE; update uuids are random (v4).
//! - Every update carries the pod's complete status, never a diff.
//! - No process outlives the executor's orderly exit: every path out of the
//!   loop stops every container group first.
//! - There is no container runtime: images are recorded, never pulled, and
//!   the status says so where it matters (a container that cannot start).
//!
//! This crate knows nothing of the framework's registry, the API shim or
//! scheduling: its only inputs are the agent's events and the pods in them.

pub mod agent;
pub mod backoff;
pub mod duration;
pub mod env;
pub mod executor;
pub mod layout;
pub mod pod;
pub mod reliable;
pub mod runtime;
pub mod status;

mod process;
mod supervisor;

pub use env::{EnvError, ExecutorEnv};
pub use executor::{Executor, ExecutorError, Exit, Options, POD_DIR_LABEL};
pub use pod::{PodError, PodPlan};
pub use runtime::{PodState, PodUpdate, Runtime, RuntimeConfig};
