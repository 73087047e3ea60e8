//! The runner: the I/O around the pure reconciles, as kube-rs' runtime and client-go's
//! informers and work queues provide it.
//!
//! - **Caches** of Pods, ReplicaSets, Deployments, ReplicationControllers, DaemonSets,
//!   Nodes, StatefulSets, ControllerRevisions, Jobs, CronJobs,
//!   PodDisruptionBudgets, ResourceQuotas and HorizontalPodAutoscalers, kept by list and watch through the
//!   in-process [`Api`] ([`cache`]). Reconciles read only these.
//! - **A work queue per controller**, keyed by object and level-triggered: each change
//!   queues the keys it concerns (a pod's controller, or the owners that select an
//!   orphan; a ReplicaSet's Deployment; the disruption budgets that select a pod;
//!   every DaemonSet when a Node comes, goes or
//!   changes its labels or taints), a burst of changes costs one reconcile per key,
//!   and a key is never reconciled by two workers at once ([`queue`]).
//! - **Retries with backoff** for a sync that fails, and requeues when a reconcile says
//!   something will change with time alone (minReadySeconds, a progress deadline).
//! - **Expectations** ([`crate::Expectations`]): set before a ReplicaSet's creates and
//!   deletes and lowered by the watch, so a cache that lags never makes the controller
//!   create a pod twice.
//! - **The HPA controller** ([`hpa`]): every autoscaler on a timer of its own
//!   (`--horizontal-pod-autoscaler-sync-period`) besides its spec changes, reading the
//!   target's scale, the pods and the API's metrics store live.
//! - **The garbage collector** ([`gc`]): Background, Orphan and Foreground
//!   propagation for every collected kind, from its own graph of owners and
//!   dependents, confirmed by live reads.
//!
//! # Invariants
//! - Every write goes through the [`Api`] handle given to [`run`]: the leader's
//!   fenced handle, so a replica that lost its lease writes nothing. The runner runs
//!   only while its replica leads; a new term starts from a fresh list, never from
//!   memory.
//! - One writer per status: a controller writes only its own kind's status (a
//!   disruption budget's is shared with the Eviction subresource and a quota's with
//!   the quota admission, as in Kubernetes, each writing under the resourceVersion it
//!   read).

mod cache;
mod changes;
mod cronjobs;
mod daemonsets;
mod deadlines;
mod deployments;
mod disruption;
mod events;
mod gc;
mod hpa;
mod jobs;
mod queue;
mod quota;
mod replicasets;
mod statefulsets;
mod written;

use std::sync::{Arc, Mutex, MutexGuard};

use apiserver::patch::PatchType;
use apiserver::resource::Resource;
use apiserver::{Api, ApiError};
use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Node, Pod, ReplicationController, ResourceQuota};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;

use crate::{Action, Expectations};
use cache::{Change, Objects, key_of};
use changes::{
    daemonset_changed, deployment_changed, job_changed, node_changed, pod_changed, rc_changed,
    replicaset_changed, revision_changed, statefulset_changed,
};
use queue::Queue;

/// Workers per controller: reconciles of different objects overlap, those of one
/// object never do.
const WORKERS: usize = 4;

/// How long a ReplicaSet's or a Job's pod events gather before its sync: a sync reads
/// all its pods, and while 10,000 of them are placed and start, a sync per event would
/// keep a core busy recounting them (KCM batches a Job's for 1 s; in-process, 20 ms
/// served a Job of short pods as well as 100 ms or 1 s, and replaces them sooner). Its
/// own changes (a scale) still sync at once.
const POD_EVENTS_WINDOW: std::time::Duration = std::time::Duration::from_millis(20);

/// The caches every controller reads.
#[derive(Default)]
pub(crate) struct Caches {
    pub(crate) pods: Arc<Objects<Pod>>,
    pub(crate) replicasets: Arc<Objects<ReplicaSet>>,
    pub(crate) deployments: Arc<Objects<Deployment>>,
    pub(crate) replicationcontrollers: Arc<Objects<ReplicationController>>,
    pub(crate) daemonsets: Arc<Objects<DaemonSet>>,
    pub(crate) nodes: Arc<Objects<Node>>,
    pub(crate) statefulsets: Arc<Objects<StatefulSet>>,
    pub(crate) revisions: Arc<Objects<ControllerRevision>>,
    pub(crate) jobs: Arc<Objects<Job>>,
    pub(crate) cronjobs: Arc<Objects<CronJob>>,
    pub(crate) pdbs: Arc<Objects<PodDisruptionBudget>>,
    pub(crate) quotas: Arc<Objects<ResourceQuota>>,
    pub(crate) hpas: Arc<Objects<HorizontalPodAutoscaler>>,
}

/// The controllers' settings (kube-controller-manager's flags of the same names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// How often every HorizontalPodAutoscaler syncs
    /// (`--horizontal-pod-autoscaler-sync-period`, 15 s).
    pub hpa_sync_period: std::time::Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            hpa_sync_period: hpa::DEFAULT_SYNC_PERIOD,
        }
    }
}

/// What the controllers share.
pub(crate) struct Cx {
    pub(crate) api: Api,
    pub(crate) caches: Caches,
    expectations: Mutex<Expectations>,
    /// Owners (expectations key → `uid/generation`) whose last creates all succeeded:
    /// their next creates skip the slow start, which only guards a template the API
    /// refuses.
    proven_creators: Mutex<std::collections::HashMap<String, String>>,
    /// Whether any ReplicaSet, ReplicationController or DaemonSet exists: until one
    /// does, pods without owners are not cached (nothing could adopt them), so bare
    /// pods cost the controllers nothing.
    pods_wanted: tokio::sync::watch::Sender<bool>,
    replicasets: Queue,
    deployments: Queue,
    replicationcontrollers: Queue,
    daemonsets: Queue,
    failed_pod_backoff: daemonsets::FailedPodBackoff,
    statefulsets: Queue,
    gc: Queue,
    gc_graph: Arc<gc::graph::Graph>,
    jobs: Queue,
    /// Pods that hold a Job's tracking finalizer after their Job is gone or finished.
    job_orphans: Queue,
    job_memory: Mutex<jobs::Memory>,
    cronjobs: Queue,
    cronjobs_written: written::Written<CronJob>,
    jobs_written: written::Written<Job>,
    job_ttl: Queue,
    pdbs: Queue,
    quotas: Queue,
    hpas: Queue,
    hpa_memories: hpa::Memories,
    options: Options,
    /// The run controllers' deadlines, by the API's clock (see [`deadlines`]).
    job_deadlines: deadlines::Deadlines,
    cronjob_deadlines: deadlines::Deadlines,
    ttl_deadlines: deadlines::Deadlines,
}

impl Cx {
    pub(crate) fn expectations(&self) -> MutexGuard<'_, Expectations> {
        self.expectations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn proven_creators(
        &self,
    ) -> MutexGuard<'_, std::collections::HashMap<String, String>> {
        self.proven_creators
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Runs the controllers with the default [`Options`] until the future is dropped.
pub async fn run(api: Api) {
    run_with(api, Options::default()).await;
}

/// Runs the controllers until the future is dropped (the term ends).
pub async fn run_with(api: Api, options: Options) {
    let cx = Arc::new(Cx {
        api,
        caches: Caches::default(),
        expectations: Mutex::new(Expectations::new()),
        proven_creators: Mutex::default(),
        pods_wanted: tokio::sync::watch::Sender::new(false),
        replicasets: Queue::default(),
        deployments: Queue::default(),
        replicationcontrollers: Queue::default(),
        daemonsets: Queue::default(),
        failed_pod_backoff: daemonsets::FailedPodBackoff::default(),
        statefulsets: Queue::default(),
        gc: Queue::default(),
        gc_graph: Arc::default(),
        jobs: Queue::default(),
        job_orphans: Queue::default(),
        job_memory: Mutex::default(),
        cronjobs: Queue::default(),
        cronjobs_written: written::Written::default(),
        jobs_written: written::Written::default(),
        job_ttl: Queue::default(),
        pdbs: Queue::default(),
        quotas: Queue::default(),
        hpas: Queue::default(),
        hpa_memories: hpa::Memories::default(),
        options,
        job_deadlines: deadlines::Deadlines::default(),
        cronjob_deadlines: deadlines::Deadlines::default(),
        ttl_deadlines: deadlines::Deadlines::default(),
    });
    // ReplicaSets and Deployments are always kept whole.
    let (_whole, whole) = tokio::sync::watch::channel(true);
    let pods = cache::reflect(
        cx.api.clone(),
        Arc::clone(&cx.caches.pods),
        cx.pods_wanted.subscribe(),
        {
            let cx = Arc::clone(&cx);
            move |c: &Change<Pod>| pod_changed(&cx, c)
        },
    );
    let replicasets = cache::reflect(
        cx.api.clone(),
        Arc::clone(&cx.caches.replicasets),
        whole.clone(),
        {
            let cx = Arc::clone(&cx);
            move |c: &Change<ReplicaSet>| replicaset_changed(&cx, c)
        },
    );
    let deployments = cache::reflect(
        cx.api.clone(),
        Arc::clone(&cx.caches.deployments),
        whole.clone(),
        {
            let cx = Arc::clone(&cx);
            move |c: &Change<Deployment>| deployment_changed(&cx, c)
        },
    );
    let rcs = cache::reflect(
        cx.api.clone(),
        Arc::clone(&cx.caches.replicationcontrollers),
        whole.clone(),
        {
            let cx = Arc::clone(&cx);
            move |c: &Change<ReplicationController>| rc_changed(&cx, c)
        },
    );
    let dses = cache::reflect(
        cx.api.clone(),
        Arc::clone(&cx.caches.daemonsets),
        whole.clone(),
        {
            let cx = Arc::clone(&cx);
            move |c: &Change<DaemonSet>| daemonset_changed(&cx, c)
        },
    );
    let nodes = cache::reflect(
        cx.api.clone(),
        Arc::clone(&cx.caches.nodes),
        whole.clone(),
        {
            let cx = Arc::clone(&cx);
            move |c: &Change<Node>| node_changed(&cx, c)
        },
    );
    let statefulsets = cache::reflect(
        cx.api.clone(),
        Arc::clone(&cx.caches.statefulsets),
        whole.clone(),
        {
            let cx = Arc::clone(&cx);
            move |c: &Change<StatefulSet>| statefulset_changed(&cx, c)
        },
    );
    let revisions = cache::reflect(
        cx.api.clone(),
        Arc::clone(&cx.caches.revisions),
        whole.clone(),
        {
            let cx = Arc::clone(&cx);
            move |c: &Change<ControllerRevision>| revision_changed(&cx, c)
        },
    );
    let jobs = cache::reflect(
        cx.api.clone(),
        Arc::clone(&cx.caches.jobs),
        whole.clone(),
        {
            let cx = Arc::clone(&cx);
            move |c: &Change<Job>| job_changed(&cx, c)
        },
    );
    let pdbs = cache::reflect(
        cx.api.clone(),
        Arc::clone(&cx.caches.pdbs),
        whole.clone(),
        {
            let cx = Arc::clone(&cx);
            move |c: &Change<PodDisruptionBudget>| {
                disruption::pdb_changed(&cx, c.old.as_deref(), c.new.as_deref());
            }
        },
    );
    let quotas = cache::reflect(
        cx.api.clone(),
        Arc::clone(&cx.caches.quotas),
        whole.clone(),
        {
            let cx = Arc::clone(&cx);
            move |c: &Change<ResourceQuota>| quota::quota_changed(&cx, c)
        },
    );
    let hpas = cache::reflect(
        cx.api.clone(),
        Arc::clone(&cx.caches.hpas),
        whole.clone(),
        {
            let cx = Arc::clone(&cx);
            move |c: &Change<HorizontalPodAutoscaler>| hpa::hpa_changed(&cx, c)
        },
    );
    let cronjobs = cache::reflect(cx.api.clone(), Arc::clone(&cx.caches.cronjobs), whole, {
        let cx = Arc::clone(&cx);
        move |c: &Change<CronJob>| {
            if let Some(cj) = c.new.as_deref().or(c.old.as_deref()) {
                cx.cronjobs.add(key_of(&cj.metadata));
            }
        }
    });
    let rs_workers =
        futures::future::join_all((0..WORKERS).map(|_| work(&cx, Controller::ReplicaSets)));
    let deployment_workers =
        futures::future::join_all((0..WORKERS).map(|_| work(&cx, Controller::Deployments)));
    let gc_workers =
        futures::future::join_all((0..WORKERS).map(|_| work(&cx, Controller::GarbageCollector)));
    let rc_workers = futures::future::join_all(
        (0..WORKERS).map(|_| work(&cx, Controller::ReplicationControllers)),
    );
    let ds_workers =
        futures::future::join_all((0..WORKERS).map(|_| work(&cx, Controller::DaemonSets)));
    let gc_graph = futures::future::join_all(Resource::COLLECTED.into_iter().map(|r| {
        let cx = Arc::clone(&cx);
        let graph = Arc::clone(&cx.gc_graph);
        let seen = Arc::clone(&cx);
        gc::graph::reflect(
            cx.api.clone(),
            graph,
            r,
            move |k| cx.gc.add(gc::key(&k)),
            move |kind, v| quota::object_changed(&seen, r, kind, v),
        )
    }));
    let pdb_workers =
        futures::future::join_all((0..WORKERS).map(|_| work(&cx, Controller::Disruption)));
    let quota_workers =
        futures::future::join_all((0..WORKERS).map(|_| work(&cx, Controller::Quota)));
    let sts_workers =
        futures::future::join_all((0..WORKERS).map(|_| work(&cx, Controller::StatefulSets)));
    let hpa_workers =
        futures::future::join_all((0..WORKERS).map(|_| work(&cx, Controller::Autoscalers)));
    let run_workers = futures::future::join_all(
        [
            Controller::Jobs,
            Controller::JobOrphans,
            Controller::CronJobs,
            Controller::JobTtl,
        ]
        .into_iter()
        .flat_map(|c| std::iter::repeat_n(c, WORKERS))
        .map(|c| work(&cx, c)),
    );
    let now = || cx.api.now();
    let sweeps = async {
        tokio::join!(
            deadlines::sweep(&cx.job_deadlines, &cx.jobs, now),
            deadlines::sweep(&cx.cronjob_deadlines, &cx.cronjobs, now),
            deadlines::sweep(&cx.ttl_deadlines, &cx.job_ttl, now),
        )
    };
    tokio::join!(
        pods,
        replicasets,
        deployments,
        rs_workers,
        deployment_workers,
        gc_workers,
        async { tokio::join!(rcs, rc_workers) },
        async { tokio::join!(dses, nodes, ds_workers) },
        async { tokio::join!(statefulsets, revisions, sts_workers) },
        async { tokio::join!(jobs, cronjobs, run_workers, sweeps) },
        async { tokio::join!(pdbs, pdb_workers) },
        async { tokio::join!(quotas, quota_workers) },
        async { tokio::join!(hpas, hpa_workers, hpa::resync(&cx)) },
        gc_graph
    );
}

/// Which controller a worker serves.
#[derive(Debug, Clone, Copy)]
enum Controller {
    ReplicaSets,
    Deployments,
    ReplicationControllers,
    DaemonSets,
    StatefulSets,
    GarbageCollector,
    Jobs,
    JobOrphans,
    CronJobs,
    JobTtl,
    Disruption,
    Quota,
    Autoscalers,
}

/// One worker: takes keys from its controller's queue and syncs them, for ever.
async fn work(cx: &Cx, which: Controller) {
    let queue = match which {
        Controller::ReplicaSets => &cx.replicasets,
        Controller::Deployments => &cx.deployments,
        Controller::ReplicationControllers => &cx.replicationcontrollers,
        Controller::DaemonSets => &cx.daemonsets,
        Controller::StatefulSets => &cx.statefulsets,
        Controller::GarbageCollector => &cx.gc,
        Controller::Jobs => &cx.jobs,
        Controller::JobOrphans => &cx.job_orphans,
        Controller::CronJobs => &cx.cronjobs,
        Controller::JobTtl => &cx.job_ttl,
        Controller::Disruption => &cx.pdbs,
        Controller::Quota => &cx.quotas,
        Controller::Autoscalers => &cx.hpas,
    };
    // Deadlines of the run controllers are also kept by the API's clock, for the sweep.
    let deadlines = match which {
        Controller::Jobs => Some(&cx.job_deadlines),
        Controller::CronJobs => Some(&cx.cronjob_deadlines),
        Controller::JobTtl => Some(&cx.ttl_deadlines),
        _ => None,
    };
    loop {
        let key = queue.next().await;
        let synced = match which {
            Controller::ReplicaSets => replicasets::sync::<ReplicaSet>(cx, &key).await,
            Controller::ReplicationControllers => {
                replicasets::sync::<ReplicationController>(cx, &key).await
            }
            Controller::DaemonSets => daemonsets::sync(cx, &key).await,
            Controller::Deployments => deployments::sync(cx, &key).await,
            Controller::StatefulSets => statefulsets::sync(cx, &key).await,
            Controller::GarbageCollector => gc::sync(cx, &key).await,
            Controller::Jobs => jobs::sync(cx, &key).await,
            Controller::JobOrphans => jobs::sync_orphan(cx, &key).await,
            Controller::CronJobs => cronjobs::sync(cx, &key).await,
            Controller::JobTtl => cronjobs::sync_ttl(cx, &key).await,
            Controller::Disruption => disruption::sync(cx, &key).await,
            Controller::Quota => quota::sync(cx, &key).await,
            Controller::Autoscalers => hpa::sync(cx, &key).await,
        };
        match synced {
            Ok(after) => {
                queue.succeeded(&key);
                if let Some(after) = after {
                    queue.add_after(key.clone(), after);
                    if let Some(d) = deadlines {
                        d.set(key.clone(), cx.api.now() + after);
                    }
                }
            }
            Err(e) => {
                tracing::debug!(controller = ?which, namespace = %key.0, name = %key.1, error = %e, "sync failed; retrying");
                queue.retry(key.clone());
            }
        }
        queue.done(&key);
    }
}

/// Adopts or releases a pod (a strategic merge patch that names the pod's uid, so it
/// fails if the name now belongs to another pod); a pod already gone is no failure.
pub(crate) async fn patch_pod(cx: &Cx, ns: &str, action: &Action) -> Result<(), ApiError> {
    let (Some(patch), Action::AdoptPod { name, .. } | Action::ReleasePod { name, .. }) =
        (action.patch(), action)
    else {
        return Ok(());
    };
    match cx
        .api
        .patch_pod(ns, name, PatchType::Strategic, &patch)
        .await
    {
        Ok(_) | Err(ApiError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The API clock's now, as the reconciles take it.
pub(crate) fn timestamp(now: std::time::SystemTime) -> Timestamp {
    let since = now
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = i64::try_from(since.as_secs()).unwrap_or(i64::MAX);
    let nanos = i32::try_from(since.subsec_nanos()).unwrap_or(0);
    Timestamp::new(secs, nanos).unwrap_or(Timestamp::UNIX_EPOCH)
}
