//! The Kubernetes API shim: pods, nodes, events, namespaces, ConfigMaps, Secrets and
//! ServiceAccounts, served to `kubectl` and to the framework in-process.
//!
//! # Contract
//!
//! - **Two faces, one path.** [`router`] serves the Kubernetes REST API (core `v1`:
//!   pods with `status` and `log` subresources, nodes, events, namespaces, configmaps,
//!   secrets, serviceaccounts; discovery, `/version`, OpenAPI v2 and v3 with the schemas
//!   of every served kind, generated from k8s-openapi's types) and [`Api`] offers the
//!   same operations typed, in-process.
//!   Every HTTP write decodes its body and then calls the same [`Api`] method the
//!   framework calls, so validation, defaulting and the store are shared.
//! - **The store** ([`store::Store`]) holds every object under one global
//!   resourceVersion, commits transactions atomically and durably in batches (group
//!   commit), and fans its change stream out to watches. [`store::RedbStore`] (a redb file
//!   in a data directory) is the default; [`store::MemoryStore`] serves tests.
//! - **Deleting a pod** that no node holds removes it at once. A bound pod gets
//!   `deletionTimestamp` and stays until the framework calls [`Api::finalize_pod`] (its
//!   task is terminal) or, for a shim on its own, its grace period runs out by the
//!   injected [`Clock`] ([`Api::expire_deletions`], swept by [`serve`]; an embedder
//!   whose node agents finalize pods sweeps with [`Deletions::FinalizedByNodes`]);
//!   either removes it with a DELETED event.
//! - **Logs** come from a [`LogSource`] the embedder provides; the shim only resolves the
//!   pod and container.
//! - **Limits** ([`limits`]): kube-apiserver's in-flight budgets (429), their
//!   seats shared fairly between users as API Priority and Fairness shares a
//!   priority level's, request timeout (504), bodies received whole before a
//!   seat is taken and within a body-read timeout (504), a per-client watch
//!   cap, and, through `connlimits`, a connection cap and header-read timeout.
//!   [`serve`] applies the defaults.
//! - **Audit** ([`audit`]): audit.k8s.io/v1 events at level Metadata, as a layer.
//! - **Resource metrics** ([`metrics`]): `metrics.k8s.io/v1beta1` for `kubectl top`,
//!   read only, from samples the executors push as their nodes, kept in memory only.
//! - **Encryption at rest** ([`store::encryption`]): an EncryptionConfiguration
//!   applied to the redb values of the resources it names (Secrets).
//! - **Pod status is the scheduler's.** The `status` subresource refuses every client
//!   write (403); only [`Api::update_pod_status`] (in process) writes it.
//! - **Namespaces** are created with their `default` ServiceAccount (one transaction) and
//!   deleted as in Kubernetes: `Terminating` (creates in it are 403), pods deleted with
//!   their grace periods, then everything else and the namespace
//!   ([`Api::finalize_namespaces`], swept by [`sweep`]). `default`, `kube-system` and
//!   `kube-public` always exist. A pod runs as `default` unless it names an account,
//!   which must exist (kube-apiserver's ServiceAccount admission).
//! - **Pod Security Admission** ([`pod_security`]): kube-apiserver's `PodSecurity`
//!   plugin on pod creates and updates and on namespace labels; an unlabelled namespace
//!   is `privileged` unless [`Api::set_pod_security`] configures other defaults.
//!   Its warnings reach the client as `Warning` headers and its audit annotations the
//!   audit log, through a request's [`notes`].
//! - **Secrets** never appear in a message: validation errors say
//!   `<secret contents redacted>` and a Secret body that does not decode is refused
//!   without quoting it. The shim logs no object bodies.
//! - **Security** ([`auth`], [`tls`]): served over rustls with kube-apiserver's
//!   authentication chain and RBAC (`rbac.authorization.k8s.io/v1`) when the embedder
//!   wraps [`router`] with [`auth::Auth::layer`]; a request without an accepted credential
//!   is 401, a denied one 403, before any handler runs.
//! - The shim implements Kubernetes **1.33** ([`discovery::KUBERNETES_VERSION`]) and
//!   reports it on `/version`.
//!
//! # Invariants
//!
//! - Every error is a [`ApiError`] whose `Status` code and reason are fixed in one place
//!   (`error.rs`), and a failed request changes nothing: validation happens before the
//!   store, and store transactions are all-or-nothing.
//! - No panic on input from the network, the store or a caller: bytes are decoded into
//!   typed errors (bodies over [`decode::MAX_BODY_BYTES`] are 413, malformed JSON/YAML 400).
//! - A write is visible (get, list, watch) only once durable; watchers see changes in
//!   resourceVersion order with no gaps, or a 410 Expired telling them to relist.
//! - Time comes from the injected [`Clock`] (AGE columns, event times, grace periods).
//!
//! # Architecture invariant
//!
//! This crate **knows nothing of Mesos**: no tasks, offers, agents or frameworks. Nodes,
//! bindings, annotations and log bytes are written by its embedder through [`Api`] and
//! [`LogSource`]; what they mean is the embedder's business.
//!
//! # The embedder's API
//!
//! Built once: [`Api::open`] (redb store in a data directory, system clock) or
//! [`Api::start`] (any [`store::Store`], [`Clock`] and [`LogSource`]); served with
//! [`serve`] / [`serve_with_shutdown`], or [`router`] merged into the embedder's own
//! axum router (then run the sweeps yourself, [`Api::expire_deletions`] and
//! [`Api::expire_events`], and call [`Api::close_watches`] when shutting down).
//!
//! - Pods: [`Api::create_pod`], [`Api::get_pod`], [`Api::list_pods`] (label and field
//!   selectors), [`Api::replace_pod`] and [`Api::patch_pod`] (resourceVersion
//!   preconditions), [`Api::update_pod_status`] (status subresource),
//!   [`Api::bind_pod`] (node, annotations and condition in one write; 409 if bound
//!   elsewhere), [`Api::delete_pod`], [`Api::finalize_pod`], [`Api::watch_pods`].
//! - Nodes: [`Api::upsert_node`], [`Api::delete_node`], [`Api::get_node`],
//!   [`Api::list_nodes`], [`Api::watch_nodes`].
//! - Events: [`Api::create_event`], [`Api::update_event`], [`Api::list_events`].
//! - Namespaces: [`Api::create_namespace`], [`Api::list_namespaces`],
//!   [`Api::delete_namespace`] (starts termination), [`Api::finalize_namespaces`].
//! - Any collected kind by its [`resource::Resource`] (the garbage collector's path):
//!   [`Api::get_metadata`], [`Api::list_stored`], [`Api::watch_stored`],
//!   [`Api::edit_metadata`] (owner references and finalizers), [`Api::delete_any`].
//! - Logs: [`Api::pod_logs`] (what `kubectl logs` calls) over the [`LogSource`].
//! - The embedder's own small durable state: [`Api::put_meta`], [`Api::get_meta`].
//!
//! # Caveats
//!
//! - Durable throughput comes from group commit: one fsync covers every write queued
//!   while the previous one ran, so it grows with the number of *concurrent* writers. A
//!   caller that awaits each write before issuing the next pays one fsync per write.
//! - Server-side apply merges the applied configuration (lists by merge key) and creates
//!   missing objects, but tracks no field ownership (`managedFields`): a field dropped
//!   from the configuration stays.
//! - Lists ignore `limit`/`continue` and answer everything at once.
//! - `metadata.finalizers` hold deletion for every kind; the `orphan` and
//!   `foregroundDeletion` finalizers are the controllers' garbage collector's to remove,
//!   so they wait for an embedder that runs it.
//! - Protobuf request bodies (kubectl's typed clients) are read for every kind of the
//!   core, apps, batch, coordination, RBAC, autoscaling, policy, networking, discovery,
//!   authentication and authorization `v1` schemas, by reflection over Kubernetes' wire
//!   schemas (`proto/`); fields a newer client adds are skipped, as kube-apiserver skips
//!   them. Responses are always JSON.
//! - The OpenAPI schemas carry no `x-kubernetes-patch-merge-key`s (k8s-openapi's do not),
//!   so kubectl's client-side apply uses its compiled-in patch metadata.
//! - A list or watch at a resourceVersion ahead of the store is answered 504 at once
//!   (kube-apiserver first waits up to 3 s for its watch cache).
//! - Lists of ConfigMaps, Secrets and ServiceAccounts take label selectors, and
//!   Secrets the `type` field selector.
//!
//! # Using it
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! let api = apiserver::Api::open("/var/lib/mesopod", Arc::new(apiserver::NoLogs)).await?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! let pending = api.list_pods(None, "", "spec.nodeName=")?;
//! let mut changes = api.watch_pods(None, pending.resource_version)?;
//! tokio::spawn(apiserver::serve(listener, api.clone()));
//! # Ok(()) }
//! ```

mod api;
pub mod audit;
pub mod auth;
pub mod clock;
pub mod cron;
pub mod decode;
pub mod discovery;
mod duplicates;
mod error;
mod http;
mod kinds;
pub mod limits;
pub mod logs;
pub mod metrics;
pub mod notes;
mod openapi;
pub mod patch;
pub mod pod_security;
mod protobuf;
pub mod quota;
pub mod resource;
pub mod selectors;
pub mod store;
pub mod streams;
pub mod table;
pub mod tls;
pub mod validation;

pub use api::finalizers::{FOREGROUND as FOREGROUND_FINALIZER, ORPHAN as ORPHAN_FINALIZER};
/// ServiceAccount admission's token volume (`kube-api-access-*`) and `kube-root-ca.crt`.
pub use api::sa_token;
pub use api::{
    Api, Binding, EventKind, Fence, Finalized, LogOptions, ObjectEvent, ObjectList, ObjectStream,
    PodHead, RawStream, Renewal, StatusWrite, WriteOptions, k8s_time, system_time,
};
pub use api::{EVENT_TTL, MetadataEdit, SYSTEM_NAMESPACES};
/// A Node under Mesos maintenance: its taint, annotations and window.
pub use api::{
    MAINTENANCE_CORDON_ANNOTATION, MAINTENANCE_END_ANNOTATION, MAINTENANCE_START_ANNOTATION,
    MAINTENANCE_TAINT, MaintenanceWindow, under_maintenance,
};
pub use clock::{Clock, ManualClock, OffsetClock, SystemClock};
pub use error::{ApiError, Cause, CauseKind};
pub use http::{
    Deletions, SWEEP_EVERY, router, serve, serve_with_limits, serve_with_shutdown, sweep,
    sweep_with,
};
pub use kinds::autoscaling::{DEFAULT_CPU_UTILIZATION, scale_down_defaults, scale_up_defaults};
pub use kinds::batch::check_job_status_update;
pub use kinds::policy::set_disruption_allowed;
pub use logs::{LogError, LogRequest, LogSource, LogStream, NoLogs};
