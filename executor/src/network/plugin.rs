//! Running the plugins of a configuration list, as the CNI 1.0 spec says: the
//! `CNI_*` environment, the plugin's configuration on stdin with `name`,
//! `cniVersion`, `prevResult` and the `runtimeConfig` of its capabilities, the
//! result (or a CNI error) on stdout.

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};

use super::conf::NetworkConfig;
use super::{NetworkError, POD_IFNAME, PortMapping};

/// A CNI operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Command {
    Add,
    Check,
    Del,
}

impl Command {
    fn as_str(self) -> &'static str {
        match self {
            Command::Add => "ADD",
            Command::Check => "CHECK",
            Command::Del => "DEL",
        }
    }
}

/// What every plugin of one pod is run with.
pub(super) struct Invocation<'a> {
    pub(super) id: &'a str,
    pub(super) netns: &'a Path,
    pub(super) bin_dirs: &'a [PathBuf],
    pub(super) ports: &'a [PortMapping],
}

impl Invocation<'_> {
    /// Runs `cmd` through the list: ADD chains each result into the next plugin's
    /// `prevResult`; CHECK and DEL give every plugin `cached` (ADD's final result).
    /// DEL runs in reverse and asks every plugin even after a failure.
    pub(super) fn run(
        &self,
        config: &NetworkConfig,
        cmd: Command,
        cached: Option<&Value>,
    ) -> Result<Value, NetworkError> {
        match cmd {
            Command::Add => {
                let mut prev: Option<Value> = None;
                for p in &config.plugins {
                    prev = Some(self.one(config, p, cmd, prev.as_ref())?);
                }
                Ok(prev.unwrap_or(Value::Null))
            }
            Command::Check => {
                for p in &config.plugins {
                    self.one(config, p, cmd, cached)?;
                }
                Ok(Value::Null)
            }
            Command::Del => {
                let mut first_error = None;
                for p in config.plugins.iter().rev() {
                    match self.one(config, p, cmd, cached) {
                        Ok(_) => {}
                        // A plugin that is not there holds nothing to release.
                        Err(e @ NetworkError::PluginMissing { .. }) => {
                            tracing::warn!(pod = self.id, error = %e, "CNI DEL skips it");
                        }
                        Err(e) => {
                            tracing::warn!(pod = self.id, error = %e, "CNI DEL");
                            first_error.get_or_insert(e);
                        }
                    }
                }
                first_error.map_or(Ok(Value::Null), Err)
            }
        }
    }

    fn one(
        &self,
        config: &NetworkConfig,
        plugin: &Value,
        cmd: Command,
        prev: Option<&Value>,
    ) -> Result<Value, NetworkError> {
        let kind = plugin
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let path_list = self
            .bin_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(":");
        let binary = self
            .bin_dirs
            .iter()
            .map(|d| d.join(&kind))
            .find(|p| p.is_file())
            .ok_or_else(|| NetworkError::PluginMissing {
                plugin: kind.clone(),
                path: path_list.clone(),
            })?;
        let stdin = serde_json::to_vec(&self.stdin(config, plugin, prev)).unwrap_or_default();
        let failed = |code, msg: String| NetworkError::Plugin {
            plugin: kind.clone(),
            command: cmd.as_str(),
            code,
            msg,
        };
        let mut child = std::process::Command::new(&binary)
            .env("CNI_COMMAND", cmd.as_str())
            .env("CNI_CONTAINERID", self.id)
            .env("CNI_NETNS", self.netns)
            .env("CNI_IFNAME", POD_IFNAME)
            .env("CNI_PATH", &path_list)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| failed(0, format!("{}: {e}", binary.display())))?;
        if let Some(mut input) = child.stdin.take() {
            // A plugin that exits without reading fails below with its own message.
            let _ = input.write_all(&stdin);
        }
        let out = child
            .wait_with_output()
            .map_err(|e| failed(0, e.to_string()))?;
        let parsed: Option<Value> = serde_json::from_slice(&out.stdout).ok();
        if !out.status.success() {
            let code = parsed
                .as_ref()
                .and_then(|v| v.get("code"))
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let msg = parsed
                .as_ref()
                .and_then(|v| v.get("msg"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| String::from_utf8_lossy(&out.stderr).trim().to_owned());
            return Err(failed(code, msg));
        }
        match cmd {
            Command::Add => parsed.ok_or_else(|| failed(0, "the result is not JSON".into())),
            Command::Check | Command::Del => Ok(Value::Null),
        }
    }

    /// The plugin's stdin: its configuration plus what the runtime adds.
    fn stdin(&self, config: &NetworkConfig, plugin: &Value, prev: Option<&Value>) -> Value {
        let mut conf = plugin.clone();
        let Some(map) = conf.as_object_mut() else {
            return conf;
        };
        map.insert("name".into(), json!(config.name));
        map.insert("cniVersion".into(), json!(config.cni_version));
        if let Some(prev) = prev {
            map.insert("prevResult".into(), prev.clone());
        }
        let wants_ports = plugin
            .pointer("/capabilities/portMappings")
            .and_then(Value::as_bool)
            == Some(true);
        if wants_ports && !self.ports.is_empty() {
            map.insert(
                "runtimeConfig".into(),
                json!({ "portMappings": self.ports }),
            );
        }
        conf
    }
}

/// The first address of a CNI result (`ips[].address` is CIDR notation).
pub(super) fn first_ip(result: &Value) -> Option<IpAddr> {
    result
        .get("ips")?
        .as_array()?
        .iter()
        .filter_map(|ip| ip.get("address")?.as_str())
        .find_map(|cidr| cidr.split('/').next()?.parse().ok())
}
