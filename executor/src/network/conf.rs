//! The network configuration: the first file of the configuration directory, as libcni
//! chooses it, with a single plugin's `.conf` read as a list of one.

use std::path::Path;

use serde_json::{Value, json};

use super::NetworkError;

/// A network configuration list.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkConfig {
    /// `name`.
    pub name: String,
    /// `cniVersion`.
    pub cni_version: String,
    /// `plugins`, in order.
    pub plugins: Vec<Value>,
    /// The list as read (what the record keeps, so DEL uses what ADD used).
    pub raw: Value,
}

impl NetworkConfig {
    /// The first configuration in `dir` (names sorted; `.conflist`, `.conf`, `.json`).
    pub fn load(dir: &Path) -> Result<NetworkConfig, NetworkError> {
        let bad = |reason: String| NetworkError::Config {
            dir: dir.to_owned(),
            reason,
        };
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| bad(e.to_string()))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.extension()
                    .is_some_and(|x| x == "conflist" || x == "conf" || x == "json")
            })
            .collect();
        files.sort();
        let file = files
            .first()
            .ok_or_else(|| bad("no .conflist, .conf or .json file".into()))?;
        let text =
            std::fs::read_to_string(file).map_err(|e| bad(format!("{}: {e}", file.display())))?;
        let mut value: Value =
            serde_json::from_str(&text).map_err(|e| bad(format!("{}: {e}", file.display())))?;
        if value.get("plugins").is_none() {
            // A single plugin's configuration: a list of one.
            let name = value.get("name").cloned().unwrap_or(Value::Null);
            let version = value.get("cniVersion").cloned().unwrap_or(Value::Null);
            value = json!({"cniVersion": version, "name": name, "plugins": [value]});
        }
        NetworkConfig::parse(value, dir)
    }

    /// A configuration list from its JSON.
    pub fn parse(raw: Value, dir: &Path) -> Result<NetworkConfig, NetworkError> {
        let bad = |reason: &str| NetworkError::Config {
            dir: dir.to_owned(),
            reason: reason.to_owned(),
        };
        let text = |key: &str| raw.get(key).and_then(Value::as_str).map(str::to_owned);
        let name = text("name").ok_or_else(|| bad("the network has no \"name\""))?;
        let cni_version = text("cniVersion").unwrap_or_else(|| "1.0.0".into());
        let plugins = raw
            .get("plugins")
            .and_then(Value::as_array)
            .cloned()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| bad("\"plugins\" is not a non-empty list"))?;
        if plugins
            .iter()
            .any(|p| p.get("type").and_then(Value::as_str).is_none())
        {
            return Err(bad("a plugin has no \"type\""));
        }
        Ok(NetworkConfig {
            name,
            cni_version,
            plugins,
            raw,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_first_file_is_the_network_and_a_single_plugin_is_a_list_of_one() {
        let dir = tempfile::tempdir().unwrap();
        let err = NetworkConfig::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("no .conflist, .conf or .json file"), "{err}");

        std::fs::write(dir.path().join("README"), "not a network").unwrap();
        std::fs::write(
            dir.path().join("20-b.conflist"),
            r#"{"name": "b", "plugins": [{"type": "bridge"}]}"#,
        )
        .unwrap();
        std::fs::write(
            dir.path().join("10-a.conf"),
            r#"{"cniVersion": "0.4.0", "name": "a", "type": "ptp"}"#,
        )
        .unwrap();
        let c = NetworkConfig::load(dir.path()).unwrap();
        assert_eq!((c.name.as_str(), c.cni_version.as_str()), ("a", "0.4.0"));
        assert_eq!(c.plugins.len(), 1);
        assert_eq!(c.plugins[0]["type"], "ptp");

        std::fs::write(dir.path().join("00-bad.conflist"), "{").unwrap();
        let err = NetworkConfig::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("00-bad.conflist"), "{err}");
        std::fs::write(
            dir.path().join("00-bad.conflist"),
            r#"{"name": "x", "plugins": [{}]}"#,
        )
        .unwrap();
        let err = NetworkConfig::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("a plugin has no \"type\""), "{err}");
    }
}
