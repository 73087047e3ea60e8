//! Pod tasks and the task registry: one Kubernetes pod is one Mesos task.
//!
//! # Contract
//!
//! - [`PodTask`] is a value. Its unchanging parts (pod, roles, spec) are
//!   shared behind `Arc`, so clones are cheap and a task handed out never
//!   changes under its holder.
//! - The [`Registry`] holds at most one live task per pod, claimed
//!   atomically. Its [`InMemoryRegistry`] is safe to share between threads.
//! - **One writer, by type.** An [`InMemoryRegistry`] is not `Clone`: its
//!   owner is the only one that can change it. Every other holder gets a
//!   [`RegistryReader`] ([`InMemoryRegistry::reader`]), which reads the
//!   same tasks and has no method that writes.
//! - A task's state moves only by Mesos status updates through one total
//!   state machine ([`machine`]): no input panics, duplicates change
//!   nothing, an old update never moves a task backwards, Finished absorbs
//!   everything, and UNREACHABLE/LOST tasks may come back to RUNNING.
//! - Recovery ([`save_recovery_info`], [`recover_from`]) writes and reads
//!   back the `mesopod.io/` annotations ([`annotations`]), including the
//!   executor id and the port mappings; a pod that cannot be recovered
//!   yields a typed error naming the key.
//! - Finished tasks are kept within a [`Retention`] bound; [`Registry::gc`]
//!   returns what it removed.
//! - States ([`State`]) and flags ([`Flag`], [`Flags`]) are words on the
//!   wire and in `Display`, never numbers.
//!
//! # Architecture invariant
//!
//! This crate knows the Mesos *types* and the Kubernetes `Pod` type, nothing
//! else. It does no I/O, reads no clock (every time is passed in), never
//! talks to Mesos or the API store, and never deletes a pod: removing a
//! task from the registry is all it can do.

pub mod annotations;
pub mod machine;

mod memory;
mod recovery;
mod registry;
mod retention;
mod state;
mod task;

pub use machine::{InvalidStatus, StaleReason, StatusOutcome, Transition};
pub use memory::{InMemoryRegistry, RegistryReader};
pub use recovery::{RecoveryError, recover_from, save_recovery_info};
pub use registry::{RegisterError, Registry, UpdateError};
pub use retention::Retention;
pub use state::{Flag, Flags, State};
pub use task::{LastStatus, PodKey, PodTask, PortMapping, Spec, TaskError};
