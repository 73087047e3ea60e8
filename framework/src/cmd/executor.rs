//! `mesopod executor`: the custom executor a Mesos agent launches.
//!
//! Everything about the agent comes from the `MESOS_*` environment (see
//! [`executor::env`]); the flags only tune what Mesos does not describe.
//! Logs go to stderr, which the agent keeps in the executor's sandbox.

use std::time::Duration;

use std::sync::Arc;

use anyhow::Context;
use executor::apiclient::{ApiClient, Credential};
use executor::backoff::{Backoff, CRASH_LOOP};
use executor::{Executor, ExecutorEnv, Options};
use mesos::client::ExecutorClient;
use mesos::codec::Codec;

/// Flags of `mesopod executor`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Args {
    /// Encoding spoken to the agent: `protobuf` (default) or `json`.
    #[arg(long, env = "MESOPOD_EXECUTOR_CODEC")]
    pub codec: Option<String>,
    /// First crash-loop backoff, in Mesos duration syntax (default `10secs`).
    #[arg(long, env = "MESOPOD_RESTART_BACKOFF")]
    pub restart_backoff: Option<String>,
    /// Longest crash-loop backoff, in Mesos duration syntax (default `5mins`).
    #[arg(long, env = "MESOPOD_RESTART_BACKOFF_MAX")]
    pub restart_backoff_max: Option<String>,
    /// The API shim's URL, over the one the scheduler names when it registers this
    /// executor's node key.
    #[arg(long, env = "MESOPOD_API_SERVER")]
    pub api_server: Option<String>,
    /// The CA certificate (PEM file) of `--api-server`; `MESOPOD_API_CA` may hold the
    /// PEM itself.
    #[arg(long, env = "MESOPOD_API_CA_FILE")]
    pub api_ca_file: Option<std::path::PathBuf>,
    /// How often the executor tells the scheduler it is alive, in Mesos
    /// duration syntax (kubelet's flag; default `10secs`). The scheduler
    /// marks the Node NotReady when it hears nothing for
    /// `--node-monitor-grace-period`.
    #[arg(long, env = "MESOPOD_NODE_STATUS_UPDATE_FREQUENCY")]
    pub node_status_update_frequency: Option<String>,
    /// How often running containers' cgroups are sampled and pushed to the API
    /// for `kubectl top`, in Mesos duration syntax (metrics-server's flag;
    /// default `15secs`).
    #[arg(long, env = "MESOPOD_METRIC_RESOLUTION")]
    pub metric_resolution: Option<String>,
    /// How containers run.
    #[command(flatten)]
    pub containers: crate::cmd::containers::ContainerFlags,
}

/// Runs `mesopod executor` until the agent shuts it down.
pub fn run(args: Args) -> anyhow::Result<()> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // The agent keeps stderr in a sandbox file: no colour codes there.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .try_init();
    let env = ExecutorEnv::from_process_env()?;
    let codec = match args.codec.as_deref() {
        None | Some("protobuf") => Codec::Protobuf,
        Some("json") => Codec::Json,
        Some(other) => anyhow::bail!("--codec must be protobuf or json, got {other:?}"),
    };
    let duration =
        |flag: &str, value: &Option<String>, default: Duration| -> anyhow::Result<Duration> {
            match value {
                None => Ok(default),
                Some(v) => mesos::duration::parse(v).with_context(|| format!("--{flag}")),
            }
        };
    let restart_backoff = Backoff {
        initial: duration("restart-backoff", &args.restart_backoff, CRASH_LOOP.initial)?,
        max: duration(
            "restart-backoff-max",
            &args.restart_backoff_max,
            CRASH_LOOP.max,
        )?,
    };
    let credential = Arc::new(Credential::generate()?);
    let fixed = match &args.api_server {
        None => None,
        Some(server) => {
            let ca = match &args.api_ca_file {
                Some(path) => std::fs::read_to_string(path)
                    .with_context(|| format!("--api-ca-file {}", path.display()))?,
                None => std::env::var("MESOPOD_API_CA").unwrap_or_default(),
            };
            Some((server.clone(), ca))
        }
    };
    let node_status_update_frequency = duration(
        "node-status-update-frequency",
        &args.node_status_update_frequency,
        executor::NODE_STATUS_UPDATE_FREQUENCY,
    )?;
    anyhow::ensure!(
        !node_status_update_frequency.is_zero(),
        "--node-status-update-frequency must be more than 0"
    );
    let metric_resolution = duration(
        "metric-resolution",
        &args.metric_resolution,
        executor::metrics::METRIC_RESOLUTION,
    )?;
    anyhow::ensure!(
        metric_resolution >= Duration::from_secs(1),
        "--metric-resolution must be at least 1s"
    );
    let options = Options {
        metric_resolution,
        restart_backoff,
        node_status_update_frequency,
        containers: args.containers.settings().map_err(anyhow::Error::msg)?,
        objects: Arc::new(ApiClient::new(credential.clone(), fixed)),
        credential: Some(credential),
        ..Options::default()
    };
    let mut client = ExecutorClient::new(&env.agent_endpoint, codec)
        .with_context(|| format!("agent endpoint {:?}", env.agent_endpoint))?;
    // The agent's token for this executor (`--authenticate_http_executors`);
    // containers never see it: their environment starts empty.
    if let Some(token) = std::env::var("MESOS_EXECUTOR_AUTHENTICATION_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
    {
        client = client
            .with_token(&token)
            .context("MESOS_EXECUTOR_AUTHENTICATION_TOKEN")?;
    }
    tracing::info!(
        executor = %env.executor_id,
        framework = %env.framework_id,
        agent = %env.agent_endpoint,
        sandbox = %env.sandbox.display(),
        checkpoint = env.checkpoint,
        "mesopod executor starting"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    let exit = runtime.block_on(async move {
        let stop = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut sigterm) => {
                    sigterm.recv().await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for SIGTERM");
                    std::future::pending::<()>().await;
                }
            }
        };
        Executor::new(env, client, options)
            .with_stop(stop)
            .run()
            .await
    })?;
    // The probes' own runtime outlives the executor's; its thread is joined
    // here rather than torn down with the process mid-probe.
    executor::probe::runtime::shutdown();
    tracing::info!(?exit, "mesopod executor exiting");
    Ok(())
}
