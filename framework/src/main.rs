//! The `mesopod` binary: parses the command line and hands over to a subcommand.

use anyhow::Context as _;
use clap::Parser;
use framework::cli::{Cli, Command};
use framework::cmd;

// glibc's malloc spent a fifth of the scale benchmark's CPU in its own
// bookkeeping and kept freed memory in per-thread arenas; mimalloc does both
// far better for a process of many small, short-lived allocations. It is
// built without transparent huge pages (feature `no_thp`): it returns freed
// memory to the system a second after it is freed, and taking a freed page
// back made the kernel zero a whole 2 MiB huge page each time, an eighth of
// the scale benchmark's CPU.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let args = framework::cli::splice_config(std::env::args().collect()).context("bad --config")?;
    let cli = Cli::parse_from(args);
    match cli.command {
        None => cmd::scheduler::run(cli.scheduler),
        Some(Command::Scheduler(args)) => cmd::scheduler::run(*args),
        Some(Command::Executor(args)) => cmd::executor::run(args),
        Some(Command::Localmesos(args)) => cmd::localmesos::run(args),
        Some(Command::Bench(args)) => cmd::bench::run(args),
    }
}
