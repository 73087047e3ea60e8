//! Pod networking through CNI plugins (the CNI 1.0 runtime side).
//!
//! # Contract
//!
//! On an agent started with `--cni-conf-dir`, each pod that is not `hostNetwork`
//! gets its own network namespace, bind-mounted at a path the caller chooses (under
//! the pod's directory), and the plugins of the first network configuration in that
//! directory (as libcni picks it: file names sorted, `.conflist`, `.conf` or `.json`)
//! are run on it: `ADD` in order with each result passed on as `prevResult`, `DEL` in
//! reverse with the final result, as the CNI spec says. `hostPort`s reach a plugin
//! that declares the `portMappings` capability (`portmap`) as
//! `runtimeConfig.portMappings`.
//!
//! Before the first plugin runs, a record of the attachment is written under the
//! records directory (in the agent's work dir), so that what a crashed executor
//! leaves behind is released by the next one ([`Cni::release_orphans`]): `DEL` is
//! idempotent in every plugin, so releasing an attachment whose `ADD` never finished
//! is safe. A failed `attach` undoes itself: nothing half-attached remains.
//!
//! Plugins run synchronously; callers on a runtime use `spawn_blocking`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde_json::Value;

mod conf;
mod netns;
mod plugin;
mod pod;
mod record;

pub use conf::NetworkConfig;
pub use netns::{create_netns, remove_netns};
use plugin::Command;
pub use pod::{host_network, host_ports};
use record::Record;

/// Debian's plugin directory (`containernetworking-plugins`).
pub const DEBIAN_CNI_BIN_DIR: &str = "/usr/lib/cni";
/// The CNI convention, and the default of `--cni-bin-dir`.
pub const DEFAULT_CNI_BIN_DIR: &str = "/opt/cni/bin";
/// The interface the pod sees, as kubelet names it.
pub const POD_IFNAME: &str = "eth0";

/// Why a pod's network could not be set up or released.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// The configuration directory has no usable network configuration.
    #[error("CNI configuration in {dir}: {reason}")]
    Config {
        /// `--cni-conf-dir`.
        dir: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A plugin is not in any of the plugin directories.
    #[error("CNI plugin {plugin:?} not found in {path}")]
    PluginMissing {
        /// The plugin's `type`.
        plugin: String,
        /// The directories searched (`CNI_PATH`).
        path: String,
    },
    /// A plugin failed; `code` and `msg` are the CNI error it printed.
    #[error("CNI plugin {plugin} {command} failed (code {code}): {msg}")]
    Plugin {
        /// The plugin's `type`.
        plugin: String,
        /// `ADD`, `DEL` or `CHECK`.
        command: &'static str,
        /// The CNI error code (0 when it printed none).
        code: u64,
        /// Its message (or its stderr).
        msg: String,
    },
    /// `ADD` succeeded but the result holds no IP address.
    #[error("CNI result of network {network:?} has no IP address")]
    NoAddress {
        /// The network's name.
        network: String,
    },
    /// The network namespace or the record could not be made or removed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// On which path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// What the agent's `--cni-conf-dir` and `--cni-bin-dir` say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CniSettings {
    /// Where the network configuration is.
    pub conf_dir: PathBuf,
    /// Where the plugins are (`CNI_PATH`).
    pub bin_dirs: Vec<PathBuf>,
}

/// A `hostPort` to map to the pod.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortMapping {
    /// The agent's port.
    pub host_port: u16,
    /// The pod's port.
    pub container_port: u16,
    /// `tcp`, `udp` or `sctp` (lower case, as CNI has it).
    pub protocol: String,
}

/// A pod attached to the network.
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    /// The pod's network namespace.
    pub netns: PathBuf,
    /// The pod's IP (`status.podIP`).
    pub ip: IpAddr,
    /// The final CNI result.
    pub result: Value,
}

/// Runs one agent's CNI network for its pods.
#[derive(Debug, Clone)]
pub struct Cni {
    settings: CniSettings,
    records: PathBuf,
}

impl Cni {
    /// The network of `settings`, keeping its records under `records`.
    pub fn new(settings: CniSettings, records: impl Into<PathBuf>) -> Cni {
        Cni {
            settings,
            records: records.into(),
        }
    }

    /// The network configuration the plugins are run with.
    pub fn config(&self) -> Result<NetworkConfig, NetworkError> {
        NetworkConfig::load(&self.settings.conf_dir)
    }

    /// Creates the network namespace at `netns` and attaches it as `id` (a CNI
    /// container ID: the pod's UID), mapping `ports`.
    pub fn attach(
        &self,
        id: &str,
        netns: &Path,
        ports: &[PortMapping],
    ) -> Result<Attachment, NetworkError> {
        let config = self.config()?;
        let mut rec = Record {
            id: id.to_owned(),
            netns: netns.to_owned(),
            config: config.raw.clone(),
            ports: ports.to_vec(),
            result: None,
        };
        rec.write(&self.records)?;
        let attached = create_netns(netns).and_then(|()| {
            let result = self.command(&rec, Command::Add)?;
            let ip = plugin::first_ip(&result).ok_or_else(|| NetworkError::NoAddress {
                network: config.name.clone(),
            })?;
            Ok((result, ip))
        });
        match attached {
            Ok((result, ip)) => {
                rec.result = Some(result.clone());
                rec.write(&self.records)?;
                Ok(Attachment {
                    netns: netns.to_owned(),
                    ip,
                    result,
                })
            }
            Err(e) => {
                if let Err(undo) = self.release(&rec) {
                    tracing::warn!(pod = id, error = %undo, "undoing a failed CNI ADD");
                }
                Err(e)
            }
        }
    }

    /// Asks the plugins whether `id`'s attachment is still as `ADD` made it.
    pub fn check(&self, id: &str) -> Result<(), NetworkError> {
        let rec = Record::read(&self.records, id)?;
        self.command(&rec, Command::Check).map(drop)
    }

    /// Detaches `id`: `DEL` through every plugin, then the namespace and the record go.
    pub fn detach(&self, id: &str) -> Result<(), NetworkError> {
        let rec = Record::read(&self.records, id)?;
        self.release(&rec)
    }

    /// The IDs with a record: attached, or left by an executor that died.
    pub fn recorded(&self) -> Vec<String> {
        Record::ids(&self.records)
    }

    /// Detaches every recorded pod for which `live` is false (what a dead
    /// executor left behind); returns what was released and how it went.
    pub fn release_orphans(
        &self,
        live: impl Fn(&str) -> bool,
    ) -> Vec<(String, Result<(), NetworkError>)> {
        self.recorded()
            .into_iter()
            .filter(|id| !live(id))
            .map(|id| {
                let done = self.detach(&id);
                (id, done)
            })
            .collect()
    }

    fn release(&self, rec: &Record) -> Result<(), NetworkError> {
        // Every plugin is asked even after one fails, so that each frees what it holds.
        let del = self.command(rec, Command::Del).map(drop);
        let ns = remove_netns(&rec.netns);
        del?;
        ns?;
        Record::remove(&self.records, &rec.id)
    }

    fn command(&self, rec: &Record, cmd: Command) -> Result<Value, NetworkError> {
        let config = NetworkConfig::parse(rec.config.clone(), &self.settings.conf_dir)?;
        let invocation = plugin::Invocation {
            id: &rec.id,
            netns: &rec.netns,
            bin_dirs: &self.settings.bin_dirs,
            ports: &rec.ports,
        };
        invocation.run(&config, cmd, rec.result.as_ref())
    }
}
