//! `mesopod` / `mesopod scheduler`: the framework with its Kubernetes API.
//!
//! Without `--master` it starts an embedded localmesos cluster, so
//! `cargo run --release` gives a working mesopod on one machine.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use apiserver::SystemClock;
use localmesos::AgentConfig;
use mesos::codec::Codec;
use procurement::{PortStrategy, ResourceDefaults, Scoring, Strategy};

use crate::admission::{Admission, AdmissionConfig, Hook, WebhookHook};
use crate::app::{App, AppConfig};
use crate::config::{FrameworkConfig, SchedulingConfig};
use crate::launch::ExecutorCommand;

/// Flags of `mesopod scheduler` (also accepted without the subcommand).
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Where the Kubernetes API and the debug pages listen.
    #[arg(long, default_value = "127.0.0.1:8080", env = "MESOPOD_LISTEN")]
    pub listen: SocketAddr,
    /// The durable store's directory.
    #[arg(long, default_value = "mesopod-data", env = "MESOPOD_DATA_DIR")]
    pub data_dir: PathBuf,
    /// The store on etcd (`--etcd-servers` and the rest of kube-apiserver's flags).
    #[command(flatten)]
    pub etcd: crate::cmd::etcd::EtcdArgs,
    /// How pods' containers run (passed to every executor).
    #[command(flatten)]
    pub containers: crate::cmd::containers::ContainerFlags,
    /// Mesos master URL(s), comma-separated; none starts an embedded cluster.
    #[arg(long, value_delimiter = ',', env = "MESOPOD_MASTER")]
    pub master: Vec<String>,
    /// Agents of the embedded cluster.
    #[arg(long, default_value_t = 3)]
    pub agents: usize,
    /// Resources of each embedded agent, in Mesos' flag syntax.
    #[arg(long, default_value = "cpus:4;mem:8192;disk:20480;ports:[31000-32000]")]
    pub resources: String,
    /// Attributes of each embedded agent; `{i}` is the agent's index.
    #[arg(long, default_value = "rack:r{i}")]
    pub attributes: String,
    /// Roles the framework subscribes with.
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub roles: Vec<String>,
    /// Roles of pods without the mesopod.io/roles annotation.
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub default_pod_roles: Vec<String>,
    /// The framework's principal.
    #[arg(long)]
    pub principal: Option<String>,
    /// The user tasks run as.
    #[arg(long)]
    pub user: Option<String>,
    /// How long unused offers are kept before they are declined.
    #[arg(long, default_value = "5s", value_parser = mesos::duration::parse_flag)]
    pub offer_ttl: Duration,
    /// Longest time a launched pod may take to reach Running.
    #[arg(long, default_value = "5m", value_parser = mesos::duration::parse_flag)]
    pub start_deadline: Duration,
    /// Period of implicit reconciliation.
    #[arg(long, default_value = "15m", value_parser = mesos::duration::parse_flag)]
    pub implicit_reconcile: Duration,
    /// The largest ACCEPT call sent to the master, in bytes. Pods that do
    /// not fit in their offer's ACCEPT launch from the agent's next offer;
    /// keep it below the master's limit on a call's body.
    #[arg(long, default_value_t = crate::config::DEFAULT_MAX_ACCEPT_BYTES,
          value_parser = accept_bytes)]
    pub max_accept_bytes: usize,
    /// How long an agent's executor may go unheard (it reports every
    /// `--node-status-update-frequency`) before its Node is NotReady and
    /// its pods not ready (kube-controller-manager's flag).
    #[arg(long, default_value = "40s", value_parser = mesos::duration::parse_flag)]
    pub node_monitor_grace_period: Duration,
    /// How often the HorizontalPodAutoscaler controller syncs every
    /// autoscaler (kube-controller-manager's flag).
    #[arg(long, default_value = "15s", value_parser = mesos::duration::parse_flag)]
    pub horizontal_pod_autoscaler_sync_period: Duration,
    /// How often an idle mesopod (no pod pending, offers suppressed) revives
    /// offers for a moment so that agents that joined meanwhile become Nodes;
    /// 0 never does.
    #[arg(long, default_value = "30s", value_parser = mesos::duration::parse_flag)]
    pub node_discovery_interval: Duration,
    /// Default host port mapping: fixed or wildcard.
    #[arg(long, default_value = "fixed")]
    pub port_mapping: String,
    /// Offer scoring: binpack or spread.
    #[arg(long, default_value = "binpack")]
    pub scoring: String,
    /// Where a Mesos fetcher downloads the mesopod binary from (real clusters).
    #[arg(long)]
    pub executor_uri: Option<String>,
    /// Encoding towards Mesos: protobuf or json.
    #[arg(long, default_value = "protobuf")]
    pub codec: String,
    /// An admission webhook URL; repeat for several, run in order.
    #[arg(long = "admission-webhook")]
    pub admission_webhooks: Vec<String>,
    /// CA (PEM) that https admission webhooks' certificates must chain to.
    #[arg(long)]
    pub admission_webhook_cafile: Option<PathBuf>,
    /// Deadline of each admission hook call (at most 30s).
    #[arg(long, default_value = "10s", value_parser = mesos::duration::parse_flag)]
    pub admission_timeout: Duration,
    /// Let attempts through when a hook errs or is late (default: hold them).
    #[arg(long)]
    pub admission_fail_open: bool,
    /// How long a pod may stay held before it fails.
    #[arg(long, default_value = "10m", value_parser = mesos::duration::parse_flag)]
    pub admission_hold_window: Duration,
    /// Priority classes a hook may set (repeatable; none: any).
    #[arg(long = "admission-allow-priority-class")]
    pub admission_priority_classes: Vec<String>,
    /// Service accounts a hook may set (repeatable; none: any).
    #[arg(long = "admission-allow-service-account")]
    pub admission_service_accounts: Vec<String>,
    /// Mesos' agent `--recovery_timeout` for the embedded cluster: how long
    /// executors keep their pods running while mesopod is stopped; past
    /// it they stop their pods and exit.
    #[arg(long, default_value = "15mins", value_parser = mesos::duration::parse_flag)]
    pub recovery_timeout: Duration,
    /// Mesos' agent `--executor_reregistration_timeout` for the embedded
    /// cluster: how long a restarted agent waits for its executors.
    #[arg(long, default_value = "2secs", value_parser = mesos::duration::parse_flag)]
    pub executor_reregistration_timeout: Duration,
    /// Stop every pod of the embedded cluster that `--data-dir` recorded,
    /// wipe `--data-dir`, and exit.
    #[arg(long)]
    pub reset: bool,
    /// API limits, audit and encryption at rest (kube-apiserver's flags).
    #[command(flatten)]
    pub hardening: crate::hardening::ApiArgs,
    /// Mesos TLS and framework authentication (Mesos' flags).
    #[command(flatten)]
    pub mesos_security: crate::hardening::MesosArgs,
    /// A file of scheduler flags (`--flag value` per line, `#` comments),
    /// applied before the command line's own; read by `main` before parsing.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// TLS, authentication and authorization of the API.
    #[command(flatten)]
    pub security: crate::security::SecurityArgs,
    /// Leader election among replicas (kube-scheduler's flags).
    #[command(flatten)]
    pub leader: crate::leader::flags::LeaderArgs,
    /// How long Mesos keeps the framework's tasks after the scheduler disconnects
    /// (FrameworkInfo.failover_timeout): a new leader must subscribe within it.
    #[arg(long, default_value = "1weeks", value_parser = mesos::duration::parse_flag)]
    pub failover_timeout: Duration,
}

impl Args {
    /// The App configuration these flags describe.
    ///
    /// # Errors
    /// A flag whose value makes no sense.
    pub fn app_config(&self) -> anyhow::Result<AppConfig> {
        let mut agents = Vec::with_capacity(self.agents);
        for i in 0..self.agents {
            agents.push(
                AgentConfig::from_flags(
                    &self.resources,
                    &self.containers.agent_attributes(&self.attributes),
                    i,
                )
                .with_context(|| format!("bad --resources or --attributes for agent {i}"))?,
            );
        }
        let program = std::env::current_exe()
            .context("cannot find the mesopod binary for the executor")?
            .display()
            .to_string();
        let program = if self.executor_uri.is_some() {
            "./mesopod".to_owned()
        } else {
            program
        };
        let webhook_tls = crate::hardening::webhook_tls(self.admission_webhook_cafile.as_deref())?;
        let hooks: Vec<Arc<dyn Hook>> = self
            .admission_webhooks
            .iter()
            .map(|u| {
                let hook = match &webhook_tls {
                    Some(tls) => WebhookHook::with_tls(u.clone(), tls.clone()),
                    None => WebhookHook::new(u.clone()),
                };
                Arc::new(hook) as Arc<dyn Hook>
            })
            .collect();
        let mut framework = FrameworkConfig {
            masters: self.master.clone(),
            roles: self.roles.clone(),
            principal: self.principal.clone(),
            failover_timeout: self.failover_timeout,
            ..FrameworkConfig::default()
        };
        if let Some(user) = &self.user {
            framework.user.clone_from(user);
        }
        let (listen, security) = self
            .security
            .resolve(&self.data_dir, self.listen)
            .context("bad security flags")?;
        let mut hardening = crate::hardening::from_flags(
            &self.hardening,
            &self.mesos_security,
            self.principal.as_deref(),
        )?;
        let embedded_security = if self.master.is_empty() {
            if self.mesos_security.secret_file.is_some() {
                anyhow::bail!(
                    "--secret-file is for a --master; the embedded cluster authenticates with the credential mesopod makes in {}",
                    self.data_dir.join(crate::embedded_auth::DIR).display()
                );
            }
            let principal = self
                .principal
                .clone()
                .unwrap_or_else(|| crate::embedded_auth::DEFAULT_PRINCIPAL.to_owned());
            let auth = crate::embedded_auth::ensure(&self.data_dir, &principal)
                .context("cannot make the embedded cluster's credentials")?;
            framework.principal = Some(principal);
            hardening.mesos.credential = Some(auth.credential);
            auth.security
        } else {
            localmesos::Security::default()
        };
        Ok(AppConfig {
            listen,
            security,
            hardening,
            data_dir: Some(self.data_dir.clone()),
            etcd: self.etcd.config(),
            embedded: localmesos::Config {
                agents,
                // Agents checkpoint beside the store, so a restart of
                // mesopod recovers their executors and pods.
                work_dir: Some(embedded_work_dir(&self.data_dir)),
                timing: localmesos::Timing {
                    recovery_timeout: self.recovery_timeout,
                    executor_reregistration_timeout: self.executor_reregistration_timeout,
                    ..localmesos::Timing::default()
                },
                security: embedded_security,
                ..Default::default()
            },
            framework,
            scheduling: SchedulingConfig {
                offer_ttl: self.offer_ttl,
                start_deadline: self.start_deadline,
                implicit_reconcile_interval: self.implicit_reconcile,
                max_accept_bytes: self.max_accept_bytes,
                node_monitor_grace_period: self.node_monitor_grace_period,
                node_discovery_interval: self.node_discovery_interval,
                ..SchedulingConfig::default()
            },
            default_pod_roles: self.default_pod_roles.clone(),
            port_strategy: PortStrategy::parse(&self.port_mapping).with_context(|| {
                format!(
                    "--port-mapping must be fixed or wildcard, not {:?}",
                    self.port_mapping
                )
            })?,
            resource_defaults: ResourceDefaults::default(),
            scoring: Scoring {
                strategy: match self.scoring.as_str() {
                    "binpack" => Strategy::BinPack,
                    "spread" => Strategy::Spread,
                    other => anyhow::bail!("--scoring must be binpack or spread, not {other:?}"),
                },
                ..Scoring::default()
            },
            executor: ExecutorCommand {
                program,
                uri: self.executor_uri.clone(),
                shutdown_grace: Duration::from_secs(5),
                args: self.containers.executor_args(
                    self.master
                        .is_empty()
                        .then(|| crate::cmd::containers::absolute(&self.data_dir.join("images")))
                        .as_deref(),
                ),
            },
            admission: Admission::new(
                hooks,
                AdmissionConfig {
                    timeout: self.admission_timeout,
                    fail_open: self.admission_fail_open,
                    allowed_priority_classes: self.admission_priority_classes.clone(),
                    allowed_service_accounts: self.admission_service_accounts.clone(),
                    hold_window: self.admission_hold_window,
                },
            ),
            codec: match self.codec.as_str() {
                "protobuf" => Codec::Protobuf,
                "json" => Codec::Json,
                other => anyhow::bail!("--codec must be protobuf or json, not {other:?}"),
            },
            clock: Arc::new(SystemClock),
            ha: crate::app::HaConfig {
                store: None,
                // On by default where replicas can share the store (etcd), as
                // kube-scheduler's --leader-elect; redb is one process's file.
                election: self.leader.election_for(self.etcd.config().is_some())?,
            },
            controllers: controllers::runner::Options {
                hpa_sync_period: {
                    let p = self.horizontal_pod_autoscaler_sync_period;
                    anyhow::ensure!(
                        !p.is_zero(),
                        "--horizontal-pod-autoscaler-sync-period must be more than 0"
                    );
                    p
                },
            },
        })
    }
}

/// Where the embedded cluster's agents keep their sandboxes and
/// checkpoints: `<data-dir>/localmesos`.
pub fn embedded_work_dir(data_dir: &std::path::Path) -> PathBuf {
    data_dir.join("localmesos")
}

/// `mesopod --reset`: stops every executor (and so every pod) the embedded
/// cluster's checkpoints name, then removes the data directory.
async fn reset(args: &Args) -> anyhow::Result<()> {
    let stopped = localmesos::LocalMesos::reset(
        &embedded_work_dir(&args.data_dir),
        localmesos::DEFAULT_EXECUTOR_SHUTDOWN_GRACE,
    )
    .await
    .context("cannot stop the embedded cluster's executors")?;
    match std::fs::remove_dir_all(&args.data_dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("cannot remove {}", args.data_dir.display()));
        }
        _ => {}
    }
    println!(
        "mesopod reset: stopped {stopped} executor(s) and their pods, removed {}",
        args.data_dir.display()
    );
    Ok(())
}

/// Runs `mesopod scheduler`.
///
/// # Errors
/// Bad flags, a part that cannot start, or another scheduler taking over.
pub fn run(args: Args) -> anyhow::Result<()> {
    crate::cmd::init_logging("info");
    args.containers.warn_at_startup();
    args.containers.image_gc().map_err(anyhow::Error::msg)?;
    args.containers
        .registry_hosts()
        .map_err(anyhow::Error::msg)?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    if args.reset {
        return runtime.block_on(reset(&args));
    }
    runtime.block_on(async move {
        let config = args.app_config()?;
        match &config.security.secure {
            None => tracing::info!(
                "serving the Kubernetes API over plain HTTP without authentication on {}, which must be a loopback address; pass --secure-port for HTTPS with authentication and RBAC",
                config.listen
            ),
            Some(s) => tracing::info!(
                "serving the Kubernetes API over HTTPS on {} with authentication (client certificates{}{}) and authorization {}",
                config.listen,
                if s.token_file.is_some() { ", bearer tokens" } else { "" },
                if s.anonymous { ", anonymous" } else { "" },
                if s.rbac { "RBAC" } else { "AlwaysAllow" },
            ),
        }
        let embedded = args.master.is_empty();
        let mut app = App::start(config)
            .await
            .context("mesopod could not start")?;
        println!("mesopod is running.");
        println!("  Kubernetes API: {}", app.api_url());
        if embedded {
            println!(
                "  Mesos master:   {} (embedded localmesos, {} agents)",
                app.master_url(),
                args.agents
            );
        } else {
            println!("  Mesos master:   {}", app.master_url());
        }
        println!("  data directory: {}", args.data_dir.display());
        println!("  debug pages:    {}/debug/", app.api_url());
        println!();
        println!("Try:");
        let server = if args.security.secure_port.is_some() || args.security.tls_cert_file.is_some() {
            format!(" --kubeconfig {}", crate::pki::kubeconfig_path(&args.data_dir).display())
        } else if args.listen.port() == 8080 && args.listen.ip().is_loopback() {
            String::new()
        } else {
            format!(" --server {}", app.api_url())
        };
        println!("  kubectl{server} apply -f examples/hello.yaml");
        println!("  kubectl{server} get pods -o wide");
        println!("  kubectl{server} logs hello");
        let result = tokio::select! {
            r = app.wait() => r.map_err(anyhow::Error::from),
            _ = crate::cmd::shutdown_signal() => Ok(()),
        };
        app.shutdown().await;
        result
    })
}

/// `--max-accept-bytes`: at least 64 KiB, so that any pod fits.
fn accept_bytes(s: &str) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|e| format!("{e}"))?;
    if n < 64 * 1024 {
        return Err(format!("{n} is less than 65536"));
    }
    Ok(n)
}
