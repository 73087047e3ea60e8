//! `mesopod image load FILE`: imports a `docker save` tarball or an OCI
//! image layout archive into the embedded cluster's image store, as `kind
//! load image-archive` does, so pods can use it with no registry.

use std::path::PathBuf;

use anyhow::Context as _;

/// Flags of `mesopod image`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// What to do with images.
    #[command(subcommand)]
    pub command: ImageCommand,
    /// The scheduler's data directory; the embedded cluster's image store
    /// is its `images` directory.
    #[arg(
        long,
        default_value = "mesopod-data",
        env = "MESOPOD_DATA_DIR",
        global = true
    )]
    pub data_dir: PathBuf,
    /// The image store itself, instead of `<data-dir>/images` (an agent's
    /// `<work dir>/images`).
    #[arg(long, global = true)]
    pub image_store: Option<PathBuf>,
}

/// The subcommands of `mesopod image`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ImageCommand {
    /// Imports the images of a `docker save` or OCI layout archive (plain
    /// or gzip).
    Load {
        /// The archive.
        file: PathBuf,
    },
}

/// Runs `mesopod image`.
pub fn run(args: Args) -> anyhow::Result<()> {
    super::init_logging("warn");
    let root = args
        .image_store
        .clone()
        .unwrap_or_else(|| args.data_dir.join("images"));
    let ImageCommand::Load { file } = args.command;
    let store = images::ImageStore::open(images::StoreConfig::new(&root))
        .with_context(|| format!("cannot open the image store {}", root.display()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start a runtime")?;
    let loaded = runtime.block_on(store.load_archive(&file))?;
    for image in loaded {
        println!("Loaded image: {} ({})", image.reference, image.image_id);
    }
    Ok(())
}
