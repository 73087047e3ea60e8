//! Assembling mesopod: the store and API shim, the Mesos connection (an
//! embedded localmesos or real masters), the driver, the core and the HTTP
//! listener. The binary, the end-to-end tests and the benchmark all start
//! mesopod through [`App::start`], so they run the same thing.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use apiserver::store::{EtcdStore, MemoryStore, RedbStore, Store};
use apiserver::{Api, Clock};
use futures::future::BoxFuture;
use localmesos::LocalMesos;
use mesos::client::scheduler::SchedulerClient;
use mesos::codec::Codec;
use procurement::{PipelineConfig, PortStrategy, ResourceDefaults, Scoring, default_pipeline};
use registry::RegistryReader;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::admission::Admission;
use crate::config::{FrameworkConfig, SchedulingConfig};
use crate::core::{CoreError, Input};
use crate::driver::{FRAMEWORK_ID_KEY, FrameworkIdStore};
use crate::launch::{ExecutorCommand, executor_prototype};
use crate::leader::Elector;
use crate::leader::current::Current;
use crate::leader::term::Term;
use crate::logs::{AgentDirectory, AgentLogSource};
use crate::observe::Observed;

mod terms;

/// Everything [`App::start`] needs.
pub struct AppConfig {
    /// Where the Kubernetes API and debug pages listen.
    pub listen: SocketAddr,
    /// The durable store's directory; `None` keeps everything in memory.
    pub data_dir: Option<PathBuf>,
    /// The store on etcd instead (`--etcd-servers`); `data_dir` then holds only what
    /// the embedded cluster keeps.
    pub etcd: Option<apiserver::store::EtcdConfig>,
    /// An embedded localmesos, used when `framework.masters` is empty.
    pub embedded: localmesos::Config,
    /// Mesos-side settings.
    pub framework: FrameworkConfig,
    /// Scheduling settings.
    pub scheduling: SchedulingConfig,
    /// Default pod roles.
    pub default_pod_roles: Vec<String>,
    /// Port mapping of pods without the annotation.
    pub port_strategy: PortStrategy,
    /// Pod resource defaults and minimums.
    pub resource_defaults: ResourceDefaults,
    /// Offer scoring.
    pub scoring: Scoring,
    /// How agents start the executor.
    pub executor: ExecutorCommand,
    /// Admission hooks.
    pub admission: Admission,
    /// Encoding towards Mesos.
    pub codec: Codec,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// TLS, authentication and authorization of the API (default: plain HTTP, loopback).
    pub security: crate::security::Security,
    /// API limits, audit log, encryption at rest, Mesos TLS and credentials.
    pub hardening: crate::hardening::Hardening,
    /// Replicas: a shared store and leader election (default: one replica, its own store).
    pub ha: HaConfig,
    /// The workload controllers' settings (the HPA's sync period).
    pub controllers: controllers::runner::Options,
}

/// How this replica shares the cluster with others.
#[derive(Default, Clone)]
pub struct HaConfig {
    /// The store to use instead of opening `data_dir` (replicas sharing one store).
    pub store: Option<Arc<dyn Store>>,
    /// Elect a leader on the Lease `kube-system/mesopod`; only the leader schedules.
    pub election: Option<crate::leader::ElectionConfig>,
}

impl std::fmt::Debug for HaConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HaConfig")
            .field("store", &self.store.is_some())
            .field("election", &self.election)
            .finish()
    }
}

/// Why mesopod could not start.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The store could not be opened.
    #[error("cannot open the store: {0}")]
    Store(String),
    /// The API shim could not start.
    #[error(transparent)]
    Api(#[from] apiserver::ApiError),
    /// The embedded cluster could not start.
    #[error("cannot start the embedded Mesos cluster: {0}")]
    Local(#[from] localmesos::Error),
    /// The Mesos client could not be built.
    #[error("bad Mesos master: {0}")]
    Client(#[from] mesos::client::ClientError),
    /// The pipeline settings cannot work.
    #[error("bad scheduling settings: {0}")]
    Pipeline(#[from] procurement::ConfigError),
    /// The API would be open to the network without TLS and authentication.
    #[error("{0}")]
    Insecure(String),
    /// The security configuration cannot be used.
    #[error(transparent)]
    Security(#[from] crate::security::SecurityError),
    /// The audit log could not be opened.
    #[error(transparent)]
    Audit(#[from] apiserver::audit::AuditError),
    /// The leader election settings cannot work.
    #[error("bad leader election settings: {0}")]
    LeaderElection(String),
    /// The client that reads pod logs from the agents could not be built.
    #[error("cannot build the HTTP client for the agents' logs: {0}")]
    LogClient(#[from] reqwest::Error),
    /// The listener could not bind.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// A running mesopod.
pub struct App {
    api: Api,
    /// The scheduler's handle: fenced by the leader Lease under leader election.
    scheduler_api: Api,
    elector: Option<Arc<Elector>>,
    addr: SocketAddr,
    https: bool,
    master_url: String,
    local: Option<LocalMesos>,
    /// The scheduler term running now (or the last one).
    term: Current,
    observed: Arc<Observed>,
    node_keys: Arc<apiserver::auth::node_keys::NodeKeys>,
    /// The scheduler's terms (`terms::supervise`), until `wait` has collected their end.
    core: Option<JoinHandle<Result<(), CoreError>>>,
    tasks: Vec<JoinHandle<()>>,
    stop_http: Option<oneshot::Sender<()>>,
}

struct MetaIds(Api);

impl FrameworkIdStore for MetaIds {
    fn load(&self) -> Option<String> {
        self.0
            .get_meta(FRAMEWORK_ID_KEY)
            .and_then(|b| String::from_utf8(b).ok())
            .filter(|s| !s.is_empty())
    }

    fn save<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            self.0
                .put_meta(FRAMEWORK_ID_KEY, id.as_bytes().to_vec())
                .await
                .map_err(|e| e.to_string())
        })
    }
}

impl App {
    /// Starts everything and returns once the API listens.
    ///
    /// # Errors
    /// [`AppError`] naming the part that failed.
    pub async fn start(mut cfg: AppConfig) -> Result<App, AppError> {
        refuse_insecure(&cfg)?;
        let store: Arc<dyn Store> = match (&cfg.ha.store, &cfg.etcd, &cfg.data_dir) {
            (Some(store), _, _) => store.clone(),
            (None, Some(etcd), _) => Arc::new(
                EtcdStore::connect(etcd.clone(), cfg.hardening.encryption.clone())
                    .await
                    .map_err(|e| AppError::Store(e.to_string()))?,
            ),
            (None, None, Some(dir)) => Arc::new(
                RedbStore::open_encrypted(dir, cfg.hardening.encryption.clone())
                    .map_err(|e| AppError::Store(e.to_string()))?,
            ),
            (None, None, None) => {
                Arc::new(MemoryStore::new().map_err(|e| AppError::Store(e.to_string()))?)
            }
        };
        let directory = Arc::new(AgentDirectory::default());
        let logs = Arc::new(AgentLogSource::new(
            directory.clone(),
            cfg.hardening.mesos.credential.as_ref(),
        )?);
        let api = Api::start(store, cfg.clock.clone(), logs.clone()).await?;
        if let Some(config) = &cfg.hardening.pod_security {
            api.set_pod_security(config.clone());
        }
        logs.set_api(api.clone());
        let term = Term::begin(&api, cfg.ha.election.clone(), &cfg.clock)
            .map_err(AppError::LeaderElection)?;
        let scheduler_api = term.api.clone();

        let local = if cfg.framework.masters.is_empty() {
            let local = LocalMesos::start(cfg.embedded.clone()).await?;
            cfg.framework.masters = vec![local.master_url().to_owned()];
            Some(local)
        } else {
            None
        };
        let master_url = cfg.framework.masters.join(",");
        let client = SchedulerClient::with_security(
            cfg.framework.masters.clone(),
            cfg.codec,
            &cfg.hardening.mesos,
        )?;

        let pipeline = PipelineConfig {
            framework_roles: cfg.framework.roles.clone(),
            default_pod_roles: cfg.default_pod_roles.clone(),
            default_port_strategy: cfg.port_strategy,
            resources: cfg.resource_defaults,
            executor: executor_prototype(&cfg.executor),
        };
        // Checked here, so that a bad setting stops the start, not a later term.
        default_pipeline(&pipeline)?;
        let observed = Arc::new(Observed::default());
        let serving = match &cfg.security.secure {
            Some(secure) => Some(secure.serving(&api).await?),
            None => None,
        };

        let listener = TcpListener::bind(cfg.listen)
            .await
            .map_err(|source| AppError::Listen {
                addr: cfg.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| AppError::Listen {
            addr: cfg.listen,
            source,
        })?;
        if let Some(secure) = &cfg.security.secure
            && let Some(path) = secure.write_kubeconfig(addr)?
        {
            tracing::info!(path = %path.display(), "wrote the admin kubeconfig");
        }

        let endpoint = crate::node_identity::ApiEndpoint::of(
            addr,
            cfg.security.secure.as_ref(),
            local.is_some(),
        );
        // Pods get the token volume only where the shim signs their tokens.
        if cfg
            .security
            .secure
            .as_ref()
            .is_some_and(|s| s.sa_signing_key.is_some())
        {
            api.enable_service_account_token_volume(endpoint.ca_pem.clone())
                .await?;
        }
        let node_keys = cfg
            .security
            .secure
            .as_ref()
            .map(|s| s.node_keys.clone())
            .unwrap_or_default();
        let streams = crate::streams::ExecutorStreams::generate()
            .map_err(|e| AppError::Store(format!("cannot make the stream signing key: {e}")))?;
        let stream_keys = (streams.endpoints().clone(), streams.public_key());
        api.set_container_streams(Arc::new(streams));
        let kit = terms::Kit {
            framework: cfg.framework.clone(),
            client,
            ids: Arc::new(MetaIds(scheduler_api.clone())),
            pipeline,
            scoring: cfg.scoring,
            admission: cfg.admission,
            resource_defaults: cfg.resource_defaults,
            scheduling: cfg.scheduling.clone(),
            controllers: cfg.controllers,
            directory,
            observed: observed.clone(),
            clock: cfg.clock.clone(),
            api: scheduler_api.clone(),
            node_keys: node_keys.clone(),
            endpoint,
            streams: stream_keys,
        };
        let first = kit.build(&term)?;
        let current = Current::new(first.handles.clone());
        let elector = term.elector.clone();
        let core = tokio::spawn(terms::supervise(kit, term, first, current.clone()));

        let (stop_http, stopped) = oneshot::channel::<()>();
        let router = apiserver::router(api.clone())
            .merge(crate::debug::router(crate::debug::DebugState {
                term: current.clone(),
                observed: observed.clone(),
                api: api.clone(),
                clock: cfg.clock.clone(),
                elector: elector.clone(),
            }))
            .merge(crate::leader::http::router());
        // kube-apiserver's order: authentication, then audit and the
        // limits (which name the user), then authorization.
        let (router, auth, tls) = match serving {
            Some(s) => (s.auth.authorize_layer(router), Some(s.auth), Some(s.tls)),
            None => (router, None, None),
        };
        let https = tls.is_some();
        let router = crate::hardening::layer(router, &cfg.hardening, cfg.clock.clone())?;
        let router = match auth {
            Some(auth) => auth.authenticate_layer(router),
            None => router,
        };
        let conn_limits = cfg.hardening.limits.connections();
        let http = tokio::spawn(async move {
            let stopped = async move {
                let _ = stopped.await;
            };
            // Plain or TLS, one accept loop: the connection cap and the
            // header-read timeout (which bounds the TLS handshake too).
            let served = apiserver::tls::serve(listener, router, tls, conn_limits, stopped).await;
            if let Err(e) = served {
                tracing::error!(error = %e, "the HTTP listener failed");
            }
        });
        Ok(App {
            api,
            scheduler_api,
            elector,
            addr,
            https,
            master_url,
            local,
            term: current,
            observed,
            node_keys,
            core: Some(core),
            tasks: vec![http],
            stop_http: Some(stop_http),
        })
    }

    /// The API shim's base URL (`http://127.0.0.1:PORT`, or `https://` when secure).
    pub fn api_url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// Executors' node keys, as registered through Mesos.
    pub fn node_keys(&self) -> &Arc<apiserver::auth::node_keys::NodeKeys> {
        &self.node_keys
    }

    /// The address the API listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The Mesos master(s) mesopod registers with.
    pub fn master_url(&self) -> &str {
        &self.master_url
    }

    /// The in-process API.
    pub fn api(&self) -> &Api {
        &self.api
    }

    /// The handle the scheduler writes through: under leader election, every write
    /// needs the leader Lease at our last renewal (`apiserver::Fence`).
    pub fn scheduler_api(&self) -> &Api {
        &self.scheduler_api
    }

    /// The leader election, when on.
    pub fn elector(&self) -> Option<&Arc<Elector>> {
        self.elector.as_ref()
    }

    /// The embedded cluster, if mesopod started one.
    pub fn local(&self) -> Option<&LocalMesos> {
        self.local.as_ref()
    }

    /// The current scheduler term's task registry, read-only: only its core writes.
    pub fn registry(&self) -> RegistryReader {
        self.term.registry()
    }

    /// Why this replica's last scheduler term ended (its core's error, such as
    /// [`CoreError::LostLease`]), if one did; under leader election the replica then
    /// follows until it leads again.
    pub fn last_term_end(&self) -> Option<String> {
        self.term.last_end()
    }

    /// Snapshots and metrics.
    pub fn observed(&self) -> &Arc<Observed> {
        &self.observed
    }

    /// Asks for a reconciliation round.
    pub async fn reconcile(&self, explicit: bool) {
        let _ = self.term.inputs().send(Input::Reconcile { explicit });
    }

    /// Waits until the scheduler stops for good: without leader election, when its core
    /// stops (another scheduler took over, or a fatal store error); under leader
    /// election a replica steps down and leads again later, so this waits for ever
    /// unless the scheduler cannot be started again.
    ///
    /// # Errors
    /// Why the core stopped.
    pub async fn wait(&mut self) -> Result<(), CoreError> {
        let Some(core) = self.core.as_mut() else {
            return Ok(());
        };
        let result = core.await;
        self.core = None;
        match result {
            Ok(r) => r,
            Err(e) => Err(CoreError::Panicked(e.to_string())),
        }
    }

    /// Stops everything this App started, the embedded cluster included.
    pub async fn shutdown(mut self) {
        // Followers take over at their next round, not after the lease duration.
        if let Some(elector) = &self.elector {
            elector.release().await;
        }
        // Open watches (kubectl get -w) would hold the graceful stop open.
        self.api.close_watches();
        if let Some(stop) = self.stop_http.take() {
            let _ = stop.send(());
        }
        if let Some(core) = &self.core {
            core.abort();
        }
        for t in &self.tasks {
            t.abort();
        }
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
        if let Some(core) = self.core.take() {
            let _ = core.await;
        }
        if let Some(local) = self.local.take() {
            local.shutdown().await;
        }
    }
}

/// Refuses to open the API beyond loopback without TLS and authentication.
fn refuse_insecure(cfg: &AppConfig) -> Result<(), AppError> {
    if cfg.listen.ip().is_loopback() {
        return Ok(());
    }
    match &cfg.security.secure {
        None => Err(AppError::Insecure(format!(
            "refusing to serve the Kubernetes API on {} over plain HTTP without authentication: \
             pass --secure-port (with --tls-cert-file and --tls-private-key-file, or let mesopod \
             make them in --data-dir) and --client-ca-file or --token-auth-file, or --listen on a \
             loopback address",
            cfg.listen
        ))),
        Some(s) if s.anonymous && !s.rbac => Err(AppError::Insecure(format!(
            "refusing to serve the Kubernetes API on {} to anonymous users with \
             --authorization-mode=AlwaysAllow: drop --anonymous-auth=true or use \
             --authorization-mode=RBAC",
            cfg.listen
        ))),
        Some(_) => Ok(()),
    }
}
