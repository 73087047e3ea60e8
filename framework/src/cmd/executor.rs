//! `mesopod executor`.

/// Flags of `mesopod executor`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Args {}

/// Runs `mesopod executor`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`mesopod executor` is not built yet: see the open issues")
}
