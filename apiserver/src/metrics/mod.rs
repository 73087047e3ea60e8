//! The resource metrics API (`metrics.k8s.io/v1beta1`, what `kubectl top`
//! reads), served by the shim itself from what the executors push.
//!
//! # How the numbers travel
//!
//! Every executor samples its running containers' cgroups each metric
//! resolution and pushes them ([`push`]) over the authenticated client it
//! already holds as its node (`system:node:<name>`). The Node authorizer
//! lets a node push only its own metrics, and the push handler drops or
//! refuses pods that are not bound to it. [`MetricsStore`] keeps, in memory
//! only, the last two samples of each container; reads compute the rates
//! ([`rate`]) as metrics-server does and join them with the stored pods and
//! nodes, so label selectors, namespaces, RBAC and 404s are the API's own.
//!
//! # Guarantees
//!
//! - No write verb is served on `metrics.k8s.io` (405, as kube answers).
//! - A pod or node without two samples of one container run, or whose
//!   executor has not pushed for three resolutions, has no metrics: a list
//!   leaves it out and a get is metrics-server's 404
//!   (`podmetrics.metrics.k8s.io "default/web" not found`).
//! - A node's usage is the sum of its pods' (see the README for why).
//!
//! # Caveats
//!
//! The samples live in the memory of the replica the executors push to: the
//! one whose API URL their node credential was registered with, the leader.
//! Another replica, or a new leader, shows none until they pushed twice to it.

pub(crate) mod http;
pub mod push;
pub mod rate;
pub mod schema;
pub mod store;

pub use store::MetricsStore;

/// The API group.
pub const GROUP: &str = "metrics.k8s.io";
/// Its one version.
pub const VERSION: &str = "v1beta1";
