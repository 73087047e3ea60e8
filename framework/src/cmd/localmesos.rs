//! `mesopod localmesos`: a standalone local Mesos master with agents, on
//! loopback, until SIGTERM (or Ctrl-C). Prints one line, the master URL.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use localmesos::{AgentConfig, Config, LocalMesos, Timing};

/// Flags of `mesopod localmesos`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Args {
    /// Where the master listens; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:5050")]
    pub listen: Option<SocketAddr>,
    /// How many agents to start.
    #[arg(long, default_value_t = 3)]
    pub agents: usize,
    /// Each agent's resources, in Mesos' `--resources` syntax; `{i}` is the
    /// agent's index. `cpus(role):n` reserves statically to a role.
    #[arg(long, default_value = "cpus:4;mem:8192;disk:20480;ports:[31000-32000]")]
    pub resources: String,
    /// Each agent's attributes, in Mesos' `--attributes` syntax (`rack:r{i}`).
    #[arg(long, default_value = "")]
    pub attributes: String,
    /// Agent hostnames; `{i}` is the agent's index.
    #[arg(long, default_value = "agent-{i}")]
    pub hostname: String,
    /// Between allocation rounds (`1s`, `500ms`).
    #[arg(long, value_parser = mesos::duration::parse_flag, default_value = "1s")]
    pub allocation_interval: Option<Duration>,
    /// Between HEARTBEAT events.
    #[arg(long, value_parser = mesos::duration::parse_flag, default_value = "15s")]
    pub heartbeat_interval: Option<Duration>,
    /// Rescind offers not used within this time (default: never).
    #[arg(long, value_parser = mesos::duration::parse_flag)]
    pub offer_timeout: Option<Duration>,
    /// Simulate tasks: no process runs, tasks go RUNNING at once.
    #[arg(long)]
    pub simulate: bool,
    /// With `--simulate`, tasks finish after this long (default: never).
    #[arg(long, value_parser = mesos::duration::parse_flag)]
    pub task_duration: Option<Duration>,
    /// Where sandboxes and agent checkpoints go (default: a temporary
    /// directory). With one, a restart on it recovers the agents (Mesos'
    /// `--recover=reconnect`).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Mesos' agent `--recover`: `reconnect` recovers the agents checkpointed
    /// in `--work-dir`; `cleanup` stops their executors (and pods), removes
    /// the work dir and exits.
    #[arg(long, default_value = "reconnect", value_parser = ["reconnect", "cleanup"])]
    pub recover: Option<String>,
    /// Mesos' agent `--recovery_timeout`, given to checkpointing executors.
    #[arg(long, value_parser = mesos::duration::parse_flag, default_value = "15mins")]
    pub recovery_timeout: Option<Duration>,
    /// Mesos' agent `--executor_reregistration_timeout`.
    #[arg(long, value_parser = mesos::duration::parse_flag, default_value = "2secs")]
    pub executor_reregistration_timeout: Option<Duration>,
    /// Mesos' master `--agent_ping_timeout`: how long each ping to an agent
    /// waits for its answer.
    #[arg(long, alias = "agent_ping_timeout", value_parser = mesos::duration::parse_flag, default_value = "15secs")]
    pub agent_ping_timeout: Option<Duration>,
    /// Mesos' master `--max_agent_ping_timeouts`: unanswered pings in a row
    /// before an agent is marked unreachable.
    #[arg(long, alias = "max_agent_ping_timeouts", default_value = "5")]
    pub max_agent_ping_timeouts: Option<u32>,
    /// Security: Mesos' authentication flags and the fault routes.
    #[command(flatten)]
    pub security: SecurityArgs,
}

/// Mesos' authentication flags (with Mesos' underscore spellings as
/// aliases) and the fault routes.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SecurityArgs {
    /// Frameworks must authenticate (HTTP basic) with `--credentials`.
    #[arg(
        long,
        alias = "authenticate_http_frameworks",
        alias = "authenticate_frameworks"
    )]
    pub authenticate_frameworks: bool,
    /// `/state` and the sandbox files need the same HTTP basic credentials
    /// (needs `--authenticate-frameworks`).
    #[arg(long, alias = "authenticate_http_readonly")]
    pub authenticate_http_readonly: bool,
    /// The write operator endpoints (`/api/v1`, the maintenance schedule,
    /// `machine/down` and `up`) need the same HTTP basic credentials (needs
    /// `--authenticate-frameworks`).
    #[arg(long, alias = "authenticate_http_readwrite")]
    pub authenticate_http_readwrite: bool,
    /// Mesos' JSON credentials: `{"credentials":[{"principal":"…","secret":"…"}]}`.
    #[arg(long)]
    pub credentials: Option<PathBuf>,
    /// Key file agents sign executor tokens with (HS256).
    #[arg(long, alias = "jwt_secret_key", alias = "executor_secret_key")]
    pub jwt_secret_key: Option<PathBuf>,
    /// Agents refuse executor calls without a valid token (needs `--jwt-secret-key`).
    #[arg(long, alias = "authenticate_http_executors")]
    pub authenticate_http_executors: bool,
    /// Serve the `/admin/` fault routes (never on a non-loopback `--listen`).
    #[arg(long)]
    pub enable_faults: bool,
}

impl SecurityArgs {
    /// What these flags ask localmesos to enforce.
    ///
    /// # Errors
    /// A flag without the file it needs, or a file that cannot be used.
    pub fn security(&self, listen: SocketAddr) -> anyhow::Result<localmesos::Security> {
        let mut s = localmesos::Security::default();
        for (asked, flag) in [
            (
                self.authenticate_http_readonly,
                "--authenticate-http-readonly",
            ),
            (
                self.authenticate_http_readwrite,
                "--authenticate-http-readwrite",
            ),
        ] {
            if asked && !self.authenticate_frameworks {
                // One credentials list serves both, so it turns framework
                // authentication on as well; say so rather than do it silently.
                anyhow::bail!(
                    "{flag} needs --authenticate-frameworks (localmesos checks both against one --credentials)"
                );
            }
        }
        if self.authenticate_frameworks {
            let path = self
                .credentials
                .as_ref()
                .context("--authenticate-frameworks needs --credentials")?;
            s.framework_credentials = Some(localmesos::Credentials::load(path)?);
        }
        s.authenticate_http_readonly = self.authenticate_http_readonly;
        s.authenticate_http_readwrite = self.authenticate_http_readwrite;
        if let Some(path) = &self.jwt_secret_key {
            s.jwt_secret_key = Some(localmesos::security::load_jwt_secret_key(path)?);
        }
        s.authenticate_http_executors = self.authenticate_http_executors;
        if self.enable_faults && !listen.ip().is_loopback() {
            anyhow::bail!("--enable-faults is refused on a non-loopback --listen ({listen})");
        }
        s.enable_faults = self.enable_faults;
        s.validate().map_err(anyhow::Error::msg)?;
        Ok(s)
    }
}

fn config(args: &Args) -> anyhow::Result<Config> {
    let mut timing = Timing::default();
    if let Some(d) = args.allocation_interval {
        timing.allocation_interval = d;
    }
    if let Some(d) = args.heartbeat_interval {
        timing.heartbeat_interval = d;
    }
    timing.offer_timeout = args.offer_timeout;
    if let Some(d) = args.recovery_timeout {
        timing.recovery_timeout = d;
    }
    if let Some(d) = args.executor_reregistration_timeout {
        timing.executor_reregistration_timeout = d;
    }
    if let Some(d) = args.agent_ping_timeout {
        timing.agent_ping_timeout = d;
    }
    if let Some(n) = args.max_agent_ping_timeouts {
        timing.max_agent_ping_timeouts = n;
    }
    let mut agents = Vec::with_capacity(args.agents);
    for i in 0..args.agents {
        let mut agent = AgentConfig::from_flags(&args.resources, &args.attributes, i)
            .with_context(|| format!("agent {i}"))?
            .with_hostname(args.hostname.replace("{i}", &i.to_string()));
        if args.simulate {
            agent = agent.simulated(args.task_duration);
        }
        agents.push(agent);
    }
    let listen = args
        .listen
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 5050)));
    Ok(Config {
        listen,
        agents,
        timing,
        work_dir: args.work_dir.clone(),
        redirect_to: None,
        security: args.security.security(listen)?,
    })
}

/// Runs `mesopod localmesos`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let config = config(&args)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    if args.recover.as_deref() == Some("cleanup") {
        let dir = args
            .work_dir
            .as_ref()
            .context("--recover=cleanup needs --work-dir")?;
        let grace = config.timing.executor_shutdown_grace;
        let stopped = rt
            .block_on(LocalMesos::reset(dir, grace))
            .context("cleaning up the work dir")?;
        println!("stopped {stopped} executor(s); removed {}", dir.display());
        return Ok(());
    }
    rt.block_on(serve(
        config,
        |url| println!("{url}"),
        wait_for_termination(),
    ))
}

/// Starts the cluster, announces its URL, serves until `until` completes.
async fn serve(
    config: Config,
    announce: impl FnOnce(&str),
    until: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    let cluster = LocalMesos::start(config)
        .await
        .context("starting localmesos")?;
    announce(cluster.master_url());
    let outcome = until.await;
    cluster.shutdown().await;
    outcome
}

async fn wait_for_termination() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    tokio::select! {
        _ = term.recv() => {}
        r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn serves_three_agents_on_a_free_port_until_told_to_stop() {
        testkit::init_crypto();
        let args = Args {
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            agents: 3,
            resources: "cpus:4;mem:8192;disk:20480;ports:[31000-32000]".into(),
            attributes: "rack:r{i}".into(),
            hostname: "agent-{i}".into(),
            simulate: true,
            ..Args::default()
        };
        let (url_tx, url_rx) = tokio::sync::oneshot::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(
            config(&args).unwrap_or_default(),
            move |url| {
                let _ = url_tx.send(url.to_owned());
            },
            async move {
                let _ = stop_rx.await;
                Ok(())
            },
        ));
        let url = url_rx.await.unwrap_or_default();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        let state: serde_json::Value = reqwest::get(format!("{url}/state"))
            .await
            .expect("GET /state")
            .json()
            .await
            .expect("JSON /state");
        let mut hosts: Vec<String> = state["slaves"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s["hostname"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        hosts.sort();
        assert_eq!(hosts, ["agent-0", "agent-1", "agent-2"]);
        assert_eq!(state["slaves"][1]["attributes"]["rack"], "r1");
        let _ = stop_tx.send(());
        assert!(server.await.is_ok_and(|r| r.is_ok()));
    }

    #[test]
    fn agents_get_indexed_hostnames_and_attributes() {
        let args = Args {
            agents: 2,
            resources: "cpus:1;mem:64".into(),
            attributes: "rack:r{i}".into(),
            hostname: "agent-{i}".into(),
            simulate: true,
            ..Args::default()
        };
        let c = config(&args).unwrap_or_default();
        assert_eq!(c.agents.len(), 2);
        assert_eq!(c.agents[1].hostname.as_deref(), Some("agent-1"));
        assert_eq!(
            mesos::resources::attribute_text(&c.agents[1].attributes[0]),
            "r1"
        );
        assert!(c.agents[0].simulated);
    }
}
