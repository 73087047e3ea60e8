//! The `mesopod` command line: one binary, several subcommands.
//!
//! Each subcommand's flags and entry point live in their own module under
//! [`crate::cmd`], so the parts of the binary change independently.

use clap::{Parser, Subcommand};

use crate::cmd;

/// Kubernetes pods on Apache Mesos.
#[derive(Debug, Parser)]
#[command(
    name = "mesopod",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// What to run; `scheduler` when omitted.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Scheduler flags, accepted without the `scheduler` word.
    #[command(flatten)]
    pub scheduler: cmd::scheduler::Args,
}

/// The subcommands of `mesopod`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The framework with its Kubernetes API shim (the default).
    Scheduler(Box<cmd::scheduler::Args>),
    /// The custom executor that a Mesos agent launches.
    Executor(cmd::executor::Args),
    /// A standalone local Mesos master with agents.
    Localmesos(cmd::localmesos::Args),
    /// The scale benchmark.
    Bench(cmd::bench::Args),
}
