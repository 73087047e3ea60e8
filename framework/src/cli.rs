//! The `mesopod` command line: one binary, several subcommands.

use clap::{Parser, Subcommand};

/// Kubernetes pods on Apache Mesos.
#[derive(Debug, Parser)]
#[command(name = "mesopod", version, about)]
pub struct Cli {
    /// What to run; `scheduler` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands of `mesopod`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The framework with its Kubernetes API shim (the default).
    Scheduler,
    /// The custom executor that a Mesos agent launches.
    Executor,
    /// A standalone local Mesos master with agents.
    Localmesos,
    /// The scale benchmark.
    Bench,
}

impl Command {
    /// The subcommand's name as typed on the command line.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Scheduler => "scheduler",
            Command::Executor => "executor",
            Command::Localmesos => "localmesos",
            Command::Bench => "bench",
        }
    }
}
