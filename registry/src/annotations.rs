//! The pod annotation keys this crate writes at bind time and reads back on
//! recovery (DESIGN.md, "Names on the wire").
//!
//! Every key lives under `mesopod.io/`, which the admission hook may not set,
//! so a value found under these keys was written by the framework.

/// The Mesos task id.
pub const TASK_ID: &str = "mesopod.io/task-id";
/// The agent the task was launched on.
pub const AGENT_ID: &str = "mesopod.io/agent-id";
/// The offer the task was launched with.
pub const OFFER_ID: &str = "mesopod.io/offer-id";
/// The executor running the task.
pub const EXECUTOR_ID: &str = "mesopod.io/executor-id";
/// The agent's hostname (also the Node the pod is bound to).
pub const HOSTNAME: &str = "mesopod.io/hostname";
/// The port mappings, as a JSON array of
/// [`PortMapping`](crate::PortMapping) (camelCase keys).
pub const PORTS: &str = "mesopod.io/ports";
/// The pod's roles, comma-separated in preference order. Users may set this
/// key before scheduling to ask for roles; at bind time the framework
/// overwrites it with the roles in effect.
pub const ROLES: &str = "mesopod.io/roles";

/// The keys whose presence means "bound by mesopod". The roles key is not
/// among them: a user may set it on a pod that was never scheduled.
pub const BINDING_KEYS: [&str; 6] = [TASK_ID, AGENT_ID, OFFER_ID, EXECUTOR_ID, HOSTNAME, PORTS];
