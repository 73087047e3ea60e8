//! `mesopod localmesos`.

/// Flags of `mesopod localmesos`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Args {}

/// Runs `mesopod localmesos`.
pub fn run(_args: Args) -> anyhow::Result<()> {
    anyhow::bail!("`mesopod localmesos` is not built yet: see the open issues")
}
