//! `mesopod kubeconfig`: prints the admin kubeconfig that mesopod wrote in its data
//! directory on its first start with HTTPS, e.g. `mesopod kubeconfig > ~/.kube/config`.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;

/// Flags of `mesopod kubeconfig`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The data directory mesopod runs with.
    #[arg(long, default_value = "mesopod-data", env = "MESOPOD_DATA_DIR")]
    pub data_dir: PathBuf,
}

/// Runs `mesopod kubeconfig`.
///
/// # Errors
/// No kubeconfig in the data directory (mesopod never ran there with HTTPS).
pub fn run(args: &Args) -> anyhow::Result<()> {
    let path = crate::pki::kubeconfig_path(&args.data_dir);
    let text = std::fs::read(&path).with_context(|| {
        format!(
            "no kubeconfig at {}: start mesopod with --secure-port and --data-dir {} first",
            path.display(),
            args.data_dir.display()
        )
    })?;
    std::io::stdout()
        .write_all(&text)
        .context("cannot write to stdout")
}
