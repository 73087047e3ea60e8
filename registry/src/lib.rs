//! Pod tasks and the task registry: one Kubernetes pod is one Mesos task.
//!
//! # Contract
//!
//! - [`PodTask`] is a value. Its unchanging parts (pod, roles, spec) are
//!   shared behind `Arc`, so clones are cheap and a task handed out can never
//!   change under its holder.
//! - States ([`State`]) and flags ([`Flag`], [`Flags`]) are words on the wire
//!   and in `Display`, never numbers.
//!
//! # Architecture invariant
//!
//! This crate knows the Mesos *types* and the Kubernetes `Pod` type, nothing
//! else: it does no I/O, reads no clock (every time is passed in), never
//! talks to Mesos or to the API store, and never deletes a pod.

mod state;
mod task;

pub use state::{Flag, Flags, State};
pub use task::{LastStatus, PodKey, PodTask, PortMapping, Spec, TaskError};
