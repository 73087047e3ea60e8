//! The mesopod framework: the scheduler that turns pending pods into Mesos
//! tasks, and the `mesopod` binary.
//!
//! # Contract
//!
//! - The [`core`] is the one writer of pod status and task state. Mesos
//!   updates, pod events, deletes and deadlines are inputs to it; sweeps
//!   only turn time into inputs. It owns the task registry; everyone else
//!   (the debug handlers, [`app::App::registry`]) holds a read-only
//!   [`registry::RegistryReader`].
//! - The core's decisions are a state machine without I/O
//!   ([`core::Core::step`]: a step in, effects out); its [`core::Runner`]
//!   performs the effects and feeds their results back. Where a pod goes
//!   is decided by the procurement crate's [`procurement::Placer`].
//! - A pod's task is registered and the pod bound durably before the
//!   ACCEPT that launches it, so a restart never launches a pod twice.
//!   The ACCEPTs run beside the core, and a KILL for a task whose ACCEPT is
//!   still under way waits for it: a KILL never overtakes its LAUNCH.
//! - Status updates are acknowledged only once their pod status is durable.
//! - Time comes from an injected [`apiserver::Clock`]; pure modules
//!   ([`offers`], [`queue`], [`reconcile`], [`podstatus`]) take `now`.
//!
//! [`app::App`] assembles everything; the binary, the end-to-end tests and
//! the benchmark all start mesopod through it.

pub mod admission;
pub mod app;
pub mod cli;
pub mod cmd;
pub mod config;
pub mod container_events;
pub mod core;
pub mod debug;
pub mod demand;
pub mod driver;
pub mod embedded_auth;
pub mod hardening;
pub mod launch;
pub mod leader;
pub mod logs;
pub mod metrics;
pub mod node_identity;
pub mod objects;
pub mod observe;
pub mod offers;
pub mod pki;
pub mod podstatus;
pub mod queue;
pub mod reconcile;
pub mod security;
pub mod streams;
