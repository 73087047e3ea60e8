//! The HTTP face of the API: routes, and a server with the deletion sweep.

mod collection;
pub(crate) mod extract;
mod hpa_v1;
mod kinds;
mod list_options;
mod logs;
mod objects;
mod others;
mod paging;
mod pods;
pub(crate) mod respond;
mod served;
mod watch;

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{MethodRouter, get};
use tokio::net::TcpListener;

use crate::api::Api;
use crate::resource::Resource;
use crate::{discovery, openapi};
use extract::{ApiPath, Params};
use served::Served;

/// How often [`serve`] removes pods whose deletion grace period ran out. Grace periods are
/// whole seconds, so checking every second keeps `kubectl delete` waits close to them.
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Event expiry runs once per this many deletion sweeps: events live an hour, so a
/// minute's slack costs nothing and spares reading every event every second.
const EVENT_SWEEP_RATIO: u32 = 60;

/// `GET` of a list: cluster-wide for a namespaced resource, or a cluster-scoped one.
fn list_all(served: impl Into<Served>) -> MethodRouter<Api> {
    let served = served.into();
    get(move |State(api): State<Api>, p: Params, h: HeaderMap| {
        objects::list(api, served, None, p, h)
    })
}

/// `GET` of a namespace's list (`/namespaces/{ns}/<resource>`).
fn list_in_namespace(served: impl Into<Served>) -> MethodRouter<Api> {
    let served = served.into();
    get(
        move |State(api): State<Api>, ApiPath(ns): ApiPath<String>, p: Params, h: HeaderMap| {
            objects::list(api, served, Some(ns), p, h)
        },
    )
}

/// `GET` of one object in a namespace (`/namespaces/{ns}/<resource>/{name}`).
fn get_in_namespace(served: impl Into<Served>) -> MethodRouter<Api> {
    let served = served.into();
    get(
        move |State(api): State<Api>,
              ApiPath((ns, name)): ApiPath<(String, String)>,
              p: Params,
              h: HeaderMap| async move { objects::get(&api, served, &ns, &name, &p, &h) },
    )
}

/// `GET` of one cluster-scoped object (`/<resource>/{name}`).
fn get_cluster_scoped(resource: Resource) -> MethodRouter<Api> {
    get(
        move |State(api): State<Api>, ApiPath(name): ApiPath<String>, p: Params, h: HeaderMap| async move {
            objects::get(&api, resource.into(), "", &name, &p, &h)
        },
    )
}

/// All routes of the shim, with `api` as their state. The framework may merge its own
/// routes onto this router (e.g. debug pages) and serve them on the same listener.
pub fn router(api: Api) -> Router {
    use Resource::{Events, Namespaces, Nodes, Pods};
    use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet};
    use k8s_openapi::api::batch::v1::{CronJob, Job};
    use k8s_openapi::api::core::v1::{ConfigMap, ReplicationController, Secret, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    let router = Router::new()
        .route("/version", get(discovery::version))
        .route("/api", get(discovery::api_versions))
        .route("/apis", get(discovery::api_groups))
        .route("/api/v1", get(discovery::core_v1))
        .route("/apis/apps", get(discovery::apps))
        .route("/apis/apps/v1", get(discovery::apps_v1))
        .route("/apis/batch", get(discovery::batch))
        .route("/apis/batch/v1", get(discovery::batch_v1))
        .route("/apis/coordination.k8s.io", get(discovery::coordination))
        .route(
            "/apis/coordination.k8s.io/v1",
            get(discovery::coordination_v1),
        )
        .route("/apis/policy", get(discovery::policy))
        .route("/apis/policy/v1", get(discovery::policy_v1))
        .route("/apis/autoscaling", get(discovery::autoscaling))
        .route("/apis/autoscaling/v2", get(discovery::autoscaling_v2))
        .route("/apis/autoscaling/v1", get(discovery::autoscaling_v1))
        .route("/apis/scheduling.k8s.io", get(discovery::scheduling))
        .route("/apis/scheduling.k8s.io/v1", get(discovery::scheduling_v1))
        .route("/openapi/v2", get(openapi::v2))
        .route("/openapi/v3", get(openapi::index))
        .route("/openapi/v3/api/v1", get(openapi::core_v1))
        .route("/openapi/v3/apis/{group}/{version}", get(openapi::apis))
        .route("/api/v1/pods", list_all(Pods))
        .route(
            "/api/v1/namespaces/{ns}/pods",
            list_in_namespace(Pods)
                .post(pods::create)
                .merge(collection::in_namespace(Pods)),
        )
        .route(
            "/api/v1/namespaces/{ns}/pods/{name}",
            get_in_namespace(Pods)
                .put(pods::replace)
                .patch(pods::patch)
                .delete(pods::delete),
        )
        .route(
            "/api/v1/namespaces/{ns}/pods/{name}/status",
            get(pods::get_status)
                .put(pods::replace_status)
                .patch(pods::patch_status),
        )
        .route("/api/v1/namespaces/{ns}/pods/{name}/log", get(logs::get))
        .route(
            "/api/v1/namespaces/{ns}/pods/{name}/eviction",
            axum::routing::post(pods::evict),
        )
        .route("/api/v1/nodes/{name}/status", get_cluster_scoped(Nodes))
        .route("/api/v1/events", list_all(Events))
        .route(
            "/api/v1/namespaces/{ns}/events",
            list_in_namespace(Events)
                .post(others::create_event)
                .merge(collection::in_namespace(Events)),
        )
        .route(
            "/api/v1/namespaces/{ns}/events/{name}",
            get_in_namespace(Events).delete(others::delete_event),
        )
        .route(
            "/api/v1/namespaces",
            list_all(Namespaces).post(others::create_namespace),
        )
        .route(
            "/api/v1/namespaces/{ns}",
            get_cluster_scoped(Namespaces)
                .put(others::replace_namespace)
                .patch(others::patch_namespace)
                .delete(others::delete_namespace),
        );
    let router = crate::streams::http::routes(router);
    let router = kinds::update_routes::<k8s_openapi::api::core::v1::Node>(router);
    let router = kinds::routes::<ConfigMap>(router);
    let router = kinds::routes::<Secret>(router);
    let router = kinds::routes::<ServiceAccount>(router);
    let router = kinds::routes::<k8s_openapi::api::core::v1::LimitRange>(router);
    let router = kinds::routes::<k8s_openapi::api::core::v1::ResourceQuota>(router);
    let router = kinds::status_routes::<k8s_openapi::api::core::v1::ResourceQuota>(router);
    let router =
        kinds::routes::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>(router);
    let router =
        kinds::status_routes::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>(router);
    let router = hpa_v1::routes(router);
    let router = kinds::routes::<k8s_openapi::api::coordination::v1::Lease>(router);
    let router = kinds::routes::<k8s_openapi::api::scheduling::v1::PriorityClass>(router);
    let router = kinds::routes::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(router);
    let router = kinds::status_routes::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(router);
    let router = kinds::routes::<Role>(router);
    let router = kinds::routes::<ClusterRole>(router);
    let router = kinds::routes::<RoleBinding>(router);
    let router = kinds::routes::<ClusterRoleBinding>(router);
    let router = kinds::routes::<ReplicaSet>(router);
    let router = kinds::workload_routes::<ReplicaSet>(router);
    let router = kinds::routes::<Deployment>(router);
    let router = kinds::workload_routes::<Deployment>(router);
    let router = kinds::routes::<ReplicationController>(router);
    let router = kinds::workload_routes::<ReplicationController>(router);
    let router = kinds::routes::<DaemonSet>(router);
    let router = kinds::status_routes::<DaemonSet>(router);
    let router = kinds::routes::<k8s_openapi::api::apps::v1::StatefulSet>(router);
    let router = kinds::workload_routes::<k8s_openapi::api::apps::v1::StatefulSet>(router);
    let router = kinds::routes::<k8s_openapi::api::apps::v1::ControllerRevision>(router);
    let router = kinds::routes::<Job>(router);
    let router = kinds::status_routes::<Job>(router);
    let router = kinds::routes::<CronJob>(router);
    kinds::status_routes::<CronJob>(router)
        .merge(crate::auth::routes())
        .merge(crate::metrics::http::routes())
        .fallback(respond::no_route)
        .method_not_allowed_fallback(respond::method_not_allowed)
        .layer(axum::middleware::from_fn(crate::notes::layer))
        .with_state(api)
}

/// Serves [`router`] on `listener` until `shutdown` resolves (then ends open watches
/// and finishes other open requests), running the sweeps alongside: every [`SWEEP_EVERY`], by the API's clock,
/// [`Api::expire_deletions`] and [`Api::expire_events`].
pub async fn serve_with_shutdown(
    listener: TcpListener,
    api: Api,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with_limits(listener, api, crate::limits::Limits::default(), shutdown).await
}

/// [`serve_with_shutdown`] with `limits` instead of kube-apiserver's defaults.
pub async fn serve_with_limits(
    listener: TcpListener,
    api: Api,
    limits: crate::limits::Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let sweeper = tokio::spawn(sweep(api.clone()));
    let closer = api.clone();
    let signal = async move {
        shutdown.await;
        closer.close_watches();
    };
    let result = connlimits::serve_with_shutdown(
        listener,
        crate::limits::requests::layer(router(api), &limits),
        limits.connections(),
        signal,
    )
    .await;
    sweeper.abort();
    let _ = sweeper.await;
    result
}

/// Serves [`router`] on `listener` forever (see [`serve_with_shutdown`]).
pub async fn serve(listener: TcpListener, api: Api) -> std::io::Result<()> {
    serve_with_shutdown(listener, api, std::future::pending()).await
}

/// The shim's background duties, forever: expired deletions and terminating
/// namespaces every [`SWEEP_EVERY`] and expired events now and then, by the API's clock.
/// [`serve_with_shutdown`] runs it; a caller serving [`router`] on its own
/// listener spawns it.
pub async fn sweep(api: Api) {
    sweep_with(api, Deletions::ExpireAfterGrace).await;
}

/// Who ends a terminating pod's deletion besides [`Api::finalize_pod`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletions {
    /// The shim on its own: [`Api::expire_deletions`] removes a pod once its
    /// grace period has run out, since no node agent will say its containers
    /// are gone.
    ExpireAfterGrace,
    /// A node agent does, as kubelet does in Kubernetes: only once the pod's
    /// containers are known to be gone ([`Api::finalize_pod`]). A pod whose
    /// node stopped reporting stays Terminating until then (or until a
    /// `--grace-period=0 --force` delete).
    FinalizedByNodes,
}

/// [`sweep`], with deletions ended as `deletions` says.
pub async fn sweep_with(api: Api, deletions: Deletions) {
    let mut tick = tokio::time::interval(SWEEP_EVERY);
    let mut round: u32 = 0;
    loop {
        tick.tick().await;
        let now = api.now();
        if deletions == Deletions::ExpireAfterGrace
            && let Err(e) = api.expire_deletions(now).await
        {
            tracing::warn!(error = %e, "deletion sweep failed");
        }
        if let Err(e) = api.finalize_namespaces().await {
            tracing::warn!(error = %e, "namespace finalization failed");
        }
        if round.is_multiple_of(EVENT_SWEEP_RATIO)
            && let Err(e) = api.expire_events(now).await
        {
            tracing::warn!(error = %e, "event sweep failed");
        }
        round = round.wrapping_add(1);
    }
}
