//! The `mesopod` binary.

use clap::Parser;
use framework::cli::{Cli, Command};

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or(Command::Scheduler);
    anyhow::bail!(
        "`mesopod {}` is not built yet: see the open issues",
        command.name()
    )
}
