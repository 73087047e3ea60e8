//! One module per `mesopod` subcommand: its flags and its entry point.

pub mod bench;
mod bench_deployment;
mod bench_jobs;
mod bench_measure;
mod bench_preemption;
mod bench_quota;
mod bench_store;
mod bench_wave;
pub mod containers;
pub mod etcd;
mod etcd_cpu;
pub mod executor;
pub mod image;
pub mod kubeconfig;
pub mod localmesos;
pub mod scheduler;

use anyhow::Context as _;
use clap::Parser as _;

use crate::cli::{Cli, Command};

/// The `mesopod` command line: parses the process's arguments (with
/// `--config` spliced in) and runs the subcommand. The `mesopod` binary and
/// the end-to-end tests' copy of it (`tests/src/bin/mesopod-e2e.rs`) are
/// this function and a global allocator.
pub fn main() -> anyhow::Result<()> {
    // The embedded OCI runtime speaks runc's command line, and its `init`
    // must stay single-threaded: it is dispatched before anything else.
    let raw: Vec<String> = std::env::args().collect();
    if raw.get(1).map(String::as_str) == Some("runtime") {
        std::process::exit(::executor::oci::embedded::main(&raw[2..]));
    }
    // A container's shim is as small: no threads, no logging set up.
    if raw.get(1).map(String::as_str) == Some("shim") {
        std::process::exit(::executor::shim::serve::main(&raw[2..]));
    }
    // Once, before any HTTPS client or server is built: reqwest has no
    // crypto provider of its own (the workspace allows only ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = crate::cli::splice_config(raw).context("bad --config")?;
    let cli = Cli::parse_from(args);
    match cli.command {
        None => scheduler::run(cli.scheduler),
        Some(Command::Scheduler(args)) => scheduler::run(*args),
        Some(Command::Executor(args)) => executor::run(args),
        Some(Command::Localmesos(args)) => localmesos::run(args),
        Some(Command::Bench(args)) => bench::run(args),
        Some(Command::Image(args)) => image::run(args),
        Some(Command::Kubeconfig(args)) => kubeconfig::run(&args),
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (else by `default`, e.g. `info`).
pub fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

/// Resolves on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
