//! Manifests, manifest lists and image configs, OCI and Docker v2 alike
//! (their JSON has one shape; oci-spec reads both).

use oci_spec::image::{Arch, Descriptor, ImageConfiguration, ImageIndex, ImageManifest, Os};
use serde::{Deserialize, Serialize};

/// Media types a pull accepts, OCI's and Docker's.
pub(crate) const ACCEPTED: &[&str] = &[OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST];
pub(crate) const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub(crate) const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub(crate) const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub(crate) const DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";

/// The parts of an image config a container is built from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageConfig {
    /// `Entrypoint`; `None` when the image has none.
    pub entrypoint: Option<Vec<String>>,
    /// `Cmd`; `None` when the image has none.
    pub cmd: Option<Vec<String>>,
    /// `Env`, `NAME=value` each, in the image's order.
    pub env: Vec<String>,
    /// `WorkingDir`, if set and not empty.
    pub working_dir: Option<String>,
    /// `User` (`name`, `uid`, `uid:gid`, `name:group`), if set and not empty.
    pub user: Option<String>,
}

/// A manifest as fetched: one image, or a list of them.
pub(crate) enum Manifest {
    Image(Box<ImageManifest>),
    Index(Box<ImageIndex>),
}

/// Reads a manifest or an index.
pub(crate) fn parse(bytes: &[u8]) -> Result<Manifest, String> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| format!("manifest is not JSON: {e}"))?;
    let media = value
        .get("mediaType")
        .and_then(|m| m.as_str())
        .unwrap_or("");
    let is_index = media == OCI_INDEX || media == DOCKER_LIST || value.get("manifests").is_some();
    if is_index {
        serde_json::from_value(value)
            .map(|i| Manifest::Index(Box::new(i)))
            .map_err(|e| format!("bad manifest list: {e}"))
    } else {
        if !(media.is_empty() || media == OCI_MANIFEST || media == DOCKER_MANIFEST) {
            return Err(format!("unsupported manifest media type {media}"));
        }
        serde_json::from_value(value)
            .map(|m| Manifest::Image(Box::new(m)))
            .map_err(|e| format!("bad manifest: {e}"))
    }
}

/// The linux/amd64 entry of a list, else the platforms it has.
pub(crate) fn pick_platform(index: &ImageIndex) -> Result<&Descriptor, String> {
    index
        .manifests()
        .iter()
        .find(|d| {
            d.platform()
                .as_ref()
                .is_some_and(|p| *p.os() == Os::Linux && *p.architecture() == Arch::Amd64)
        })
        .ok_or_else(|| {
            let seen: Vec<String> = index
                .manifests()
                .iter()
                .filter_map(|d| d.platform().as_ref())
                .map(|p| format!("{}/{}", p.os(), p.architecture()))
                .collect();
            format!("linux/amd64 wanted, the list has [{}]", seen.join(", "))
        })
}

/// A config read: what containers use, and what the store checks.
pub(crate) struct Config {
    pub(crate) image: ImageConfig,
    pub(crate) diff_ids: Vec<String>,
}

/// Reads an image config, refusing one for another platform.
pub(crate) fn parse_config(bytes: &[u8]) -> Result<Config, ConfigError> {
    let config: ImageConfiguration = serde_json::from_slice(bytes)
        .map_err(|e| ConfigError::Bad(format!("bad image config: {e}")))?;
    if *config.os() != Os::Linux || *config.architecture() != Arch::Amd64 {
        return Err(ConfigError::Platform(format!(
            "linux/amd64 wanted, the image is {}/{}",
            config.os(),
            config.architecture()
        )));
    }
    let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.is_empty());
    let image = match config.config() {
        Some(c) => ImageConfig {
            entrypoint: c.entrypoint().clone(),
            cmd: c.cmd().clone(),
            env: c.env().clone().unwrap_or_default(),
            working_dir: non_empty(c.working_dir()),
            user: non_empty(c.user()),
        },
        None => ImageConfig::default(),
    };
    Ok(Config {
        image,
        diff_ids: config.rootfs().diff_ids().clone(),
    })
}

/// Why a config was refused.
pub(crate) enum ConfigError {
    Bad(String),
    Platform(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_docker_config_gives_the_container_fields() {
        let json = br#"{"architecture":"amd64","os":"linux",
            "config":{"Env":["PATH=/bin"],"Entrypoint":null,"Cmd":["sh"],"WorkingDir":"","User":"1000:1000"},
            "rootfs":{"type":"layers","diff_ids":["sha256:aa"]}}"#;
        let Ok(c) = parse_config(json) else {
            panic!("parses")
        };
        assert_eq!(
            c.image,
            ImageConfig {
                entrypoint: None,
                cmd: Some(vec!["sh".into()]),
                env: vec!["PATH=/bin".into()],
                working_dir: None,
                user: Some("1000:1000".into()),
            }
        );
        assert_eq!(c.diff_ids, vec!["sha256:aa".to_string()]);
    }

    #[test]
    fn another_platform_is_refused() {
        let json =
            br#"{"architecture":"arm64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#;
        assert!(
            matches!(parse_config(json), Err(ConfigError::Platform(m)) if m.contains("linux/arm64"))
        );
    }
}
