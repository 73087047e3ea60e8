//! Test helpers shared by every crate's tests and the end-to-end tests.
//!
//! # Contract
//!
//! - [`Kubectl`] runs a real kubectl against a server with a private cache
//!   and no kubeconfig, and every run is bounded by a timeout: a hung
//!   kubectl fails its test instead of hanging it.
//! - [`ProcessGuard`] owns a child started in its own process group and
//!   ends the whole group when dropped (SIGTERM, then SIGKILL after a
//!   grace), so a failing test leaves no process behind.
//! - [`wait_until`] polls an observation with a deadline and, on timeout,
//!   panics with what it last saw. It is for conditions no event tells of
//!   (another process's state); what can be awaited is awaited instead.
//!
//! - [`init_crypto`] installs ring as rustls' process-wide crypto
//!   provider, as the `mesopod` binary does first thing; a test that builds
//!   any reqwest client (directly, or through a Mesos client, an image
//!   store or `App`) calls it first.
//!
//! - [`etcd::Etcd`] starts a throwaway etcd on loopback (skipped, or failed
//!   under `CI=true`, when etcd is not installed).
//!
//! testkit depends on none of mesopod's crates, so that any of them can
//! take it as a dev-dependency without cargo building that crate twice.

pub mod etcd;
mod kubectl;
mod process;
mod wait;

pub use kubectl::{KUBECTL, Kubectl, KubectlChild, ok, stderr, stdout};
pub use process::{GroupCommand, ProcessGuard, Reap};
pub use wait::{wait_until, wait_until_blocking, wait_until_explained};

/// Installs ring as rustls' process-wide crypto provider, as `mesopod`'s
/// main does. reqwest is built without a provider of its own (the workspace
/// allows ring only), so building a client before this panics. Idempotent.
pub fn init_crypto() {
    // Err only when a provider is installed already: then there is one.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
