//! `mesopod bench`: the scale benchmark, all in one process.
//!
//! localmesos runs in simulated mode with `--agents` agents (4 cpus, 16 GiB
//! and one port range each); the framework and the durable store run as in
//! production. Pods are created through the same typed API the HTTP path
//! uses (same validation, same store). The benchmark then measures, by the
//! monotonic clock of this process:
//!
//! - pods/s from the first create to the last pod Running;
//! - p50 and p99 of create → bound and create → Running;
//! - peak RSS (VmHWM) and CPU time (user + system) of the process;
//! - on etcd, etcd's own CPU time over the measured wave (`etcd_cpu_s`, from
//!   each member's `process_cpu_seconds_total`; plain `http://` members only).
//!
//! It prints one line per scenario:
//!
//! `bench scenario=NAME agents=A pods=P pods_per_s=X bound_p50_ms=X bound_p99_ms=X running_p50_ms=X running_p99_ms=X rss_mib=X cpu_s=X store=redb|etcd [etcd_cpu_s=X]`
//!
//! and exits non-zero if a run fails to place all its pods.
//!
//! `--scenario store` measures the store alone instead (see `bench_store.rs`):
//! each pod's three writes, and the CPU per commit on mesopod's side and etcd's.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use apiserver::SystemClock;
use localmesos::{AgentConfig, Timing};
use mesos::codec::Codec;
use procurement::{PortStrategy, ResourceDefaults, Scoring, Strategy};

use super::bench_measure::{cpu_seconds, peak_rss_mib, percentile};
use super::bench_wave::wave;
use crate::admission::Admission;
use crate::app::{App, AppConfig};
use crate::config::{FrameworkConfig, SchedulingConfig};
use crate::launch::ExecutorCommand;

/// Flags of `mesopod bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// basic, large, constrained, deployment, jobs, preemption, or store (the store
    /// alone: CPU per commit).
    #[arg(long, default_value = "basic")]
    pub scenario: String,
    /// Overrides the scenario's agent count.
    #[arg(long)]
    pub agents: Option<usize>,
    /// Overrides the scenario's pod count.
    #[arg(long)]
    pub pods: Option<usize>,
    /// Overrides the scenario's warm-up pod count.
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Store directory; default: a fresh temporary directory (durable store).
    #[arg(long)]
    pub data_dir: Option<std::path::PathBuf>,
    /// Runs on etcd instead of redb (`--etcd-servers` and the rest).
    #[command(flatten)]
    pub etcd: crate::cmd::etcd::EtcdArgs,
    /// The simulated master's allocation interval (Mesos' default is 1s).
    #[arg(long, default_value = "1s", value_parser = mesos::duration::parse_flag)]
    pub allocation_interval: Duration,
    /// Give up after this long.
    #[arg(long, default_value = "10m", value_parser = mesos::duration::parse_flag)]
    pub timeout: Duration,
    /// basic, large, constrained: spread the pods over this many namespaces, each
    /// under a ResourceQuota that charges every create (0: all in `default`, no quota).
    #[arg(long, default_value_t = 0)]
    pub quota_namespaces: usize,
}

/// A scenario's shape.
#[derive(Debug, Clone, Copy)]
struct Scenario {
    name: &'static str,
    agents: usize,
    pods: usize,
    warmup: usize,
    constrained: bool,
    /// How long a simulated task runs before it finishes; `None`: until killed.
    task_duration: Option<Duration>,
}

fn scenario(name: &str) -> anyhow::Result<Scenario> {
    Ok(match name {
        // kube-scheduler's SchedulingBasic: 5,000 nodes, 1,000 warm-up pods, 10,000 measured.
        "basic" => Scenario {
            name: "basic",
            agents: 5000,
            pods: 10_000,
            warmup: 1000,
            constrained: false,
            task_duration: None,
        },
        "large" => Scenario {
            name: "large",
            agents: 5000,
            pods: 50_000,
            warmup: 0,
            constrained: false,
            task_duration: None,
        },
        "constrained" => Scenario {
            name: "constrained",
            agents: 5000,
            pods: 10_000,
            warmup: 0,
            constrained: true,
            task_duration: None,
        },
        // basic's agents and warm-up, its 10,000 pods as one Deployment's replicas.
        "deployment" => Scenario {
            name: "deployment",
            agents: 5000,
            pods: 10_000,
            warmup: 1000,
            constrained: false,
            task_duration: None,
        },
        // basic's agents, no warm-up (its pods would finish too), 10,000 completions
        // of one Job whose tasks finish after a short run.
        "jobs" => Scenario {
            name: "jobs",
            agents: 5000,
            pods: 10_000,
            warmup: 0,
            constrained: false,
            task_duration: Some(super::bench_jobs::TASK_RUN),
        },
        // basic's agents filled by 20,000 low-priority pods (the warm-up), then
        // 1,000 high-priority pods that each need one of them gone.
        "preemption" => Scenario {
            name: "preemption",
            agents: 5000,
            pods: 1000,
            warmup: 20_000,
            constrained: false,
            task_duration: None,
        },
        other => anyhow::bail!(
            "unknown scenario {other:?}: basic, large, constrained, deployment, jobs, preemption or store"
        ),
    })
}

/// What one run measured.
#[derive(Debug)]
pub struct Report {
    /// Pods per second, first create to last Running.
    pub pods_per_s: f64,
    /// create → bound, median and 99th percentile, ms.
    pub bound_ms: (f64, f64),
    /// create → Running, median and 99th percentile, ms.
    pub running_ms: (f64, f64),
    /// Peak resident memory, MiB.
    pub rss_mib: f64,
    /// CPU time used by the process, seconds.
    pub cpu_s: f64,
    /// CPU time etcd used over the same wave, seconds (on etcd, when its
    /// metrics could be read).
    pub etcd_cpu_s: Option<f64>,
    /// Pods that reached Running.
    pub placed: usize,
}

/// Runs `mesopod bench`.
///
/// # Errors
/// A run that fails to place all its pods, or a part that cannot start.
pub fn run(args: Args) -> anyhow::Result<()> {
    // Quiet by default: the summary line on stdout is the output.
    crate::cmd::init_logging("warn");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    if args.scenario == "store" {
        return run_store(&args, &runtime);
    }
    let mut sc = scenario(&args.scenario)?;
    if let Some(a) = args.agents {
        sc.agents = a;
    }
    if let Some(p) = args.pods {
        sc.pods = p;
    }
    if let Some(w) = args.warmup {
        sc.warmup = w;
    }
    let etcd = fresh_etcd_prefix(&args);
    let store = if etcd.is_some() { "etcd" } else { "redb" };
    anyhow::ensure!(
        args.quota_namespaces == 0 || !matches!(sc.name, "deployment" | "jobs" | "preemption"),
        "--quota-namespaces applies to basic, large and constrained: the {} scenario runs one workload in one namespace",
        sc.name
    );
    if sc.name == "deployment" {
        return runtime.block_on(run_deployment(sc, args, etcd, store));
    }
    if sc.name == "jobs" {
        return runtime.block_on(run_jobs(sc, args, etcd, store));
    }
    if sc.name == "preemption" {
        return runtime.block_on(run_preemption(sc, args, etcd, store));
    }
    let report = runtime.block_on(run_scenario(sc, &args, etcd))?;
    let mut etcd_cpu = report
        .etcd_cpu_s
        .map(|s| format!(" etcd_cpu_s={s:.2}"))
        .unwrap_or_default();
    if args.quota_namespaces > 0 {
        etcd_cpu.push_str(&format!(" quota_namespaces={}", args.quota_namespaces));
    }
    println!(
        "bench scenario={} agents={} pods={} pods_per_s={:.0} bound_p50_ms={:.1} bound_p99_ms={:.1} running_p50_ms={:.1} running_p99_ms={:.1} rss_mib={:.0} cpu_s={:.1} store={}{}",
        sc.name,
        sc.agents,
        sc.pods,
        report.pods_per_s,
        report.bound_ms.0,
        report.bound_ms.1,
        report.running_ms.0,
        report.running_ms.1,
        report.rss_mib,
        report.cpu_s,
        store,
        etcd_cpu
    );
    if report.placed < sc.pods {
        anyhow::bail!("only {} of {} pods reached Running", report.placed, sc.pods);
    }
    Ok(())
}

/// `--scenario store`: the store alone (see `bench_store.rs`).
fn run_store(args: &Args, runtime: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.agents.is_none() && args.warmup.is_none(),
        "--agents and --warmup do not apply to --scenario store: it runs no agents and no warm-up"
    );
    let tmp = tempdir_for_bench()?;
    let dir = args.data_dir.clone().unwrap_or_else(|| tmp.clone());
    let pods = args.pods.unwrap_or(10_000);
    let result = runtime.block_on(crate::cmd::bench_store::run(
        pods,
        &dir,
        fresh_etcd_prefix(args),
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    result
}

/// The run's etcd settings, if on etcd, under a prefix of its own: each run starts
/// from an empty keyspace, as a fresh redb directory does.
fn fresh_etcd_prefix(args: &Args) -> Option<apiserver::store::EtcdConfig> {
    args.etcd.config().map(|mut c| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let run = format!("{}-{nanos}", std::process::id());
        c.prefix = format!("{}/bench-{run}", c.prefix.trim_end_matches('/'));
        c
    })
}

fn app_config(
    sc: Scenario,
    data_dir: std::path::PathBuf,
    etcd: Option<apiserver::store::EtcdConfig>,
    allocation_interval: Duration,
) -> anyhow::Result<AppConfig> {
    let mut agents = Vec::with_capacity(sc.agents);
    for i in 0..sc.agents {
        let zone = format!("zone:z{}", i % 10);
        agents.push(
            AgentConfig::from_flags("cpus:4;mem:16384;disk:100000;ports:[31000-31099]", &zone, i)?
                .simulated(sc.task_duration),
        );
    }
    Ok(AppConfig {
        listen: "127.0.0.1:0".parse()?,
        data_dir: Some(data_dir),
        etcd,
        embedded: localmesos::Config {
            agents,
            timing: Timing {
                allocation_interval,
                ..Timing::default()
            },
            ..Default::default()
        },
        framework: FrameworkConfig::default(),
        scheduling: SchedulingConfig {
            sweep_interval: Duration::from_millis(50),
            revive_min_interval: Duration::from_millis(50),
            ..SchedulingConfig::default()
        },
        default_pod_roles: vec!["*".into()],
        port_strategy: PortStrategy::Fixed,
        resource_defaults: ResourceDefaults::default(),
        scoring: Scoring {
            strategy: Strategy::Spread,
            ..Scoring::default()
        },
        executor: ExecutorCommand {
            program: "/bin/false".into(),
            uri: None,
            shutdown_grace: Duration::from_secs(5),
            args: Vec::new(),
        },
        admission: Admission::none(),
        codec: Codec::Protobuf,
        clock: Arc::new(SystemClock),
        security: Default::default(),
        hardening: crate::hardening::Hardening::default(),
        ha: Default::default(),
        controllers: Default::default(),
    })
}

async fn run_scenario(
    sc: Scenario,
    args: &Args,
    etcd: Option<apiserver::store::EtcdConfig>,
) -> anyhow::Result<Report> {
    let timeout = args.timeout;
    let tmp = tempdir_for_bench()?;
    let dir = args.data_dir.clone().unwrap_or_else(|| tmp.clone());
    let etcd_servers = etcd.as_ref().map(|c| c.servers.clone());
    let app = App::start(app_config(sc, dir, etcd, args.allocation_interval)?)
        .await
        .context("mesopod could not start")?;
    let api = app.api().clone();
    let namespaces = match args.quota_namespaces {
        0 => vec!["default".to_owned()],
        n => super::bench_quota::tenants(&api, n, timeout).await?,
    };
    if sc.warmup > 0 {
        let warmup = (1_000_000, sc.warmup);
        let (_, running, ..) = wave(&api, warmup, sc.constrained, &namespaces, timeout).await?;
        if running.len() < sc.warmup {
            anyhow::bail!(
                "warm-up placed only {} of {} pods",
                running.len(),
                sc.warmup
            );
        }
    }
    let etcd_meter = crate::cmd::etcd_cpu::Meter::start(etcd_servers).await;
    let cpu_before = cpu_seconds();
    let (mut bound, mut running, start, last) =
        wave(&api, (0, sc.pods), sc.constrained, &namespaces, timeout).await?;
    let cpu = cpu_seconds() - cpu_before;
    let etcd_cpu_s = etcd_meter.elapsed().await;
    bound.sort_by(f64::total_cmp);
    running.sort_by(f64::total_cmp);
    let elapsed = last
        .saturating_duration_since(start)
        .as_secs_f64()
        .max(1e-9);
    let report = Report {
        pods_per_s: running.len() as f64 / elapsed,
        bound_ms: (percentile(&bound, 0.5), percentile(&bound, 0.99)),
        running_ms: (percentile(&running, 0.5), percentile(&running, 0.99)),
        rss_mib: peak_rss_mib(),
        cpu_s: cpu,
        etcd_cpu_s,
        placed: running.len(),
    };
    stopped(app, &tmp).await;
    Ok(report)
}

/// `--scenario deployment` (see `bench_deployment.rs`).
async fn run_deployment(
    sc: Scenario,
    args: Args,
    etcd: Option<apiserver::store::EtcdConfig>,
    store: &str,
) -> anyhow::Result<()> {
    let (app, tmp) = started(sc, &args, etcd).await?;
    let m = super::bench_deployment::run(app.api(), sc.pods, args.timeout).await;
    stopped(app, &tmp).await;
    let m = m?;
    println!(
        "bench scenario=deployment agents={} pods={} pods_per_s={:.0} create_s={:.2} created_s={:.2} running_s={:.2} update_s={:.2} update_ratio={:.2} rss_mib={:.0} cpu_s={:.1} update_cpu_s={:.1} store={store}",
        sc.agents,
        sc.pods,
        sc.pods as f64 / m.create_s.max(1e-9),
        m.create_s,
        m.created_s,
        m.running_s,
        m.update_s,
        m.update_s / m.create_s.max(1e-9),
        peak_rss_mib(),
        m.cpu_s,
        m.update_cpu_s,
    );
    Ok(())
}

/// `--scenario jobs` (see `bench_jobs.rs`).
async fn run_jobs(
    sc: Scenario,
    args: Args,
    etcd: Option<apiserver::store::EtcdConfig>,
    store: &str,
) -> anyhow::Result<()> {
    let (app, tmp) = started(sc, &args, etcd).await?;
    let m = super::bench_jobs::run(app.api(), sc.pods, args.timeout).await;
    stopped(app, &tmp).await;
    let m = m?;
    println!(
        "bench scenario=jobs agents={} pods={} completions_per_s={:.0} complete_s={:.2} created_s={:.2} rss_mib={:.0} cpu_s={:.1} store={store}",
        sc.agents,
        sc.pods,
        sc.pods as f64 / m.complete_s.max(1e-9),
        m.complete_s,
        m.created_s,
        peak_rss_mib(),
        m.cpu_s,
    );
    Ok(())
}

/// `--scenario preemption` (see `bench_preemption.rs`): its warm-up is the
/// low-priority pods that fill the agents.
async fn run_preemption(
    sc: Scenario,
    args: Args,
    etcd: Option<apiserver::store::EtcdConfig>,
    store: &str,
) -> anyhow::Result<()> {
    let (app, tmp) = started(Scenario { warmup: 0, ..sc }, &args, etcd).await?;
    let m = super::bench_preemption::run(app.api(), sc.warmup, sc.pods, args.timeout).await;
    stopped(app, &tmp).await;
    let m = m?;
    println!(
        "bench scenario=preemption agents={} pods={} low={} pods_per_s={:.0} running_s={:.2} running_p50_ms={:.1} running_p99_ms={:.1} victims={} victims_per_preemptor={:.2} rss_mib={:.0} cpu_s={:.1} store={store}",
        sc.agents,
        sc.pods,
        sc.warmup,
        m.placed as f64 / m.running_s.max(1e-9),
        m.running_s,
        m.running_ms.0,
        m.running_ms.1,
        m.victims,
        m.victims as f64 / m.placed.max(1) as f64,
        peak_rss_mib(),
        m.cpu_s,
    );
    anyhow::ensure!(
        m.placed == sc.pods,
        "only {} of {} high-priority pods reached Running",
        m.placed,
        sc.pods
    );
    Ok(())
}

/// Starts mesopod for `sc` in a fresh directory (unless `--data-dir`), with its
/// warm-up placed; returns it with the directory to remove after.
async fn started(
    sc: Scenario,
    args: &Args,
    etcd: Option<apiserver::store::EtcdConfig>,
) -> anyhow::Result<(App, std::path::PathBuf)> {
    let tmp = tempdir_for_bench()?;
    let dir = args.data_dir.clone().unwrap_or_else(|| tmp.clone());
    let app = App::start(app_config(sc, dir, etcd, args.allocation_interval)?)
        .await
        .context("mesopod could not start")?;
    if sc.warmup > 0 {
        let default = ["default".to_owned()];
        let warmup = (1_000_000, sc.warmup);
        let (_, running, ..) = wave(app.api(), warmup, false, &default, args.timeout).await?;
        anyhow::ensure!(
            running.len() == sc.warmup,
            "warm-up placed only {} of {} pods",
            running.len(),
            sc.warmup
        );
    }
    Ok((app, tmp))
}

/// Stops mesopod and removes the directory [`started`] (or a scenario) made.
async fn stopped(app: App, tmp: &std::path::Path) {
    app.shutdown().await;
    let _ = std::fs::remove_dir_all(tmp);
}

fn tempdir_for_bench() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("mesopod-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
