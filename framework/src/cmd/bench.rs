//! `mesopod bench`.

/// Flags of `mesopod bench`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Args {}

/// Runs `mesopod bench`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`mesopod bench` is not built yet: see the open issues")
}
