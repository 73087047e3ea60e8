//! The workload controllers' decisions, as pure functions: each controller
//! is `reconcile(object, what it owns, now) -> actions`, the shape
//! kube-rs' runtime gives a reconciler, with the behaviour of
//! kube-controller-manager (KCM) to the field, because `kubectl describe`
//! and `kubectl rollout status` read what they write.
//!
//! # Contract
//! - **Pure.** No I/O, no clock, no randomness, no async: time comes in as
//!   `now` (a [`Timestamp`](k8s_openapi::jiff::Timestamp), what
//!   `metav1.Time` wraps). The same inputs give the same actions, so a
//!   runner can replay a sync and tests drive reconciles step by step.
//! - **Level-triggered and idempotent.** A reconcile looks only at the
//!   object and what it owns now, never at what it did before: running it
//!   twice on the same state asks for the same calls, and after the calls
//!   succeed it asks for none. (What it cannot see, a watch that lags, is
//!   what [`Expectations`] are for.)
//! - **Actions are data** ([`Action`], in [`Reconciled`]): the runner
//!   performs them in order and stops at the first failure; events report
//!   only writes listed before them. A status is listed only when it
//!   differs from the stored one, so a steady state costs no writes.
//! - **One writer per status.** A controller's only status write is its own
//!   kind's ([`Status`]). Two statuses have a second writer, as in
//!   Kubernetes, each writing by compare-and-set: a PodDisruptionBudget's
//!   (the Eviction subresource takes one disruption from it, [`disruption`]
//!   recomputes it from the pods) and a ResourceQuota's (the quota admission
//!   charges each create, [`quota`] recounts the namespace). The
//!   HorizontalPodAutoscaler controller ([`hpa`]) also sets its targets'
//!   `spec.replicas`, through their `scale`, as KCM's does; its decisions
//!   are a [`hpa::Plan`], not [`Action`]s, since its status depends on
//!   whether that write succeeded.
//! - **No panics on any input.** A stored object validation never saw (a
//!   percentage `"abc%"`, an unknown selector operator) gives a
//!   [`ReconcileError`] or, where KCM reports it on the object, a
//!   condition; arithmetic saturates instead of overflowing.
//!
//! # What it must not know
//! The API server, watches, the work queue, retries, rate limits and
//! leader election: the runner owns those, and calls [`Expectations`]
//! itself. Nothing here knows of Mesos.
//!
//! # Controllers
//! - [`replicaset`]: ReplicaSets and ReplicationControllers.
//! - [`deployment`]: Deployments (RollingUpdate, Recreate, proportional
//!   scaling, pause, progress deadline, revision history).
//! - [`daemonset`]: DaemonSets (one pod per eligible node, pinned by node
//!   affinity; RollingUpdate with maxUnavailable or maxSurge, OnDelete).
//! - [`statefulset`]: StatefulSets (ordinal pods, OrderedReady and Parallel,
//!   RollingUpdate with a partition, OnDelete), their history in
//!   ControllerRevisions through [`history`], which a DaemonSet can share.
//! - [`job`]: Jobs (NonIndexed and Indexed completions, parallelism,
//!   suspend, activeDeadlineSeconds, backoffLimit with the exponential
//!   re-create backoff, backoffLimitPerIndex, podFailurePolicy,
//!   successPolicy), each finished pod counted exactly once through the
//!   `batch.kubernetes.io/job-tracking` finalizer.
//! - [`cronjob`]: CronJobs (one Job per slot of the schedule, named from the
//!   slot so its existence is the tick's dedup guard; concurrency policies,
//!   starting deadline, suspend, history limits within a floor that keeps a
//!   tick's Job while any replica could still evaluate the tick).
//! - [`ttl`]: `ttlSecondsAfterFinished` of finished Jobs, within the same
//!   floor for the Jobs a CronJob scheduled.
//! - [`disruption`]: PodDisruptionBudgets' status (healthy, desired and
//!   expected pods, the disruptions allowed now), which evictions spend.
//! - [`quota`]: ResourceQuotas' status (what the namespace's pods and
//!   objects use), which the quota admission charges as it admits.
//! - [`hpa`]: HorizontalPodAutoscalers (CPU and memory of the pods against
//!   their requests or an average, kube's tolerance, missing and unready
//!   pods, stabilization windows and scaling policies, with a
//!   recommendation history the runner keeps per autoscaler).

mod action;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
mod error;
mod expectations;
pub mod history;
pub mod hpa;
mod intstr;
pub mod job;
mod owner;
mod pod_state;
pub mod quota;
pub mod replicaset;
pub mod runner;
mod selector;
pub mod statefulset;
mod template;
mod time;
pub mod ttl;

pub use action::{
    Action, Event, EventType, Propagation, Reconciled, Status, adopt_patch, release_patch,
};
pub use error::ReconcileError;
pub use expectations::{EXPECTATIONS_TIMEOUT, Expectations};
pub use intstr::{IntOrPercentError, scaled_value};
pub use owner::{Claim, claim, controller_of, controller_ref, is_controlled_by};
pub use pod_state::{becomes_available_at, is_active, is_available, is_ready, ready_since};
pub use selector::{Selector, SelectorError};
pub use template::{TemplateError, generate_name_prefix, pod_from_template};
