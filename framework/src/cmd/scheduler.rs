//! `mesopod scheduler`.

/// Flags of `mesopod scheduler`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Args {}

/// Runs `mesopod scheduler`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`mesopod scheduler` is not built yet: see the open issues")
}
