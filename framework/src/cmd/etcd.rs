//! kube-apiserver's `--etcd-*` flags: with `--etcd-servers` the API shim keeps its
//! state in etcd v3 instead of the embedded redb store.

use std::path::PathBuf;
use std::time::Duration;

use apiserver::store::{DEFAULT_ETCD_COMPACTION_INTERVAL, DEFAULT_ETCD_PREFIX, EtcdConfig};

/// The etcd flags of `mesopod scheduler` and `mesopod bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct EtcdArgs {
    /// etcd client URLs, comma-separated (kube-apiserver's flag); unset keeps the
    /// embedded redb store in `--data-dir`.
    #[arg(long, value_delimiter = ',', env = "MESOPOD_ETCD_SERVERS")]
    pub etcd_servers: Vec<String>,
    /// The prefix of every key mesopod writes in etcd.
    #[arg(long, default_value = DEFAULT_ETCD_PREFIX)]
    pub etcd_prefix: String,
    /// The CA file that verifies etcd's serving certificate (https:// servers).
    #[arg(long)]
    pub etcd_cafile: Option<PathBuf>,
    /// The client certificate mesopod presents to etcd.
    #[arg(long)]
    pub etcd_certfile: Option<PathBuf>,
    /// The key of `--etcd-certfile`.
    #[arg(long)]
    pub etcd_keyfile: Option<PathBuf>,
    /// How often etcd is compacted to the revision of one interval earlier, as
    /// kube-apiserver does (every replica tries; one compacts); 0 disables it.
    #[arg(long, default_value = "5m", value_parser = interval)]
    pub etcd_compaction_interval: Duration,
}

impl EtcdArgs {
    /// The store settings, if `--etcd-servers` was given.
    pub fn config(&self) -> Option<EtcdConfig> {
        if self.etcd_servers.is_empty() {
            return None;
        }
        let mut config = EtcdConfig::new(self.etcd_servers.clone());
        config.prefix.clone_from(&self.etcd_prefix);
        config.ca_file.clone_from(&self.etcd_cafile);
        config.cert_file.clone_from(&self.etcd_certfile);
        config.key_file.clone_from(&self.etcd_keyfile);
        config.compaction_interval = self.etcd_compaction_interval;
        Some(config)
    }
}

/// A duration flag (`30s`, `5m`), or `0` to turn the thing off as with kube-apiserver.
fn interval(text: &str) -> Result<Duration, mesos::duration::DurationError> {
    match text.trim() {
        "0" => Ok(Duration::ZERO),
        t => mesos::duration::parse_flag(t),
    }
}

impl Default for EtcdArgs {
    fn default() -> Self {
        Self {
            etcd_servers: Vec::new(),
            etcd_prefix: DEFAULT_ETCD_PREFIX.into(),
            etcd_cafile: None,
            etcd_certfile: None,
            etcd_keyfile: None,
            etcd_compaction_interval: DEFAULT_ETCD_COMPACTION_INTERVAL,
        }
    }
}
