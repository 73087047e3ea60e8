//! Where a registry's content may come from: Docker's `--registry-mirror`
//! (mirrors of Docker Hub) and containerd's per-registry host configuration
//! (`<config dir>/<registry>/hosts.toml`, containerd's `config_path`).
//!
//! The rules are containerd's, so a platform team reuses its files:
//! - A registry's directory is `<dir>/<host>_<port>_`, else `<dir>/<host:port>`,
//!   else `<dir>/_default`.
//! - Its `hosts.toml` lists `[host."<url>"]` tables, tried in the order the
//!   file gives them, then `server` (the registry itself when absent; Docker
//!   Hub's is `https://registry-1.docker.io`). A host URL's path is its API
//!   root with `/v2` appended unless `override_path`; `capabilities` default
//!   to all. `ca`, `client` and relative paths are relative to the
//!   directory. A directory without `hosts.toml` holds Docker's certificate
//!   files (`*.crt` CAs, `*.cert`/`*.key` client pairs) for the registry.
//! - `--registry-mirror`s come before `docker.io`'s own hosts, in the order
//!   given, as dockerd's.
//!
//! Every file is read and checked when the configuration is loaded, so a
//! bad file stops the agent at startup with its path and line, instead of
//! failing pulls later (containerd logs and ignores it). Changes need a
//! restart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod file;

use crate::reference::DOCKER_HUB;

/// The file containerd reads in each registry's directory.
pub(crate) const HOSTS_FILE: &str = "hosts.toml";
/// The directory that applies to registries without one of their own.
const DEFAULT_DIR: &str = "_default";

/// Why a mirror or a host configuration is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostsError {
    /// A `--registry-mirror` that is not an HTTP(S) URL of a host.
    #[error("invalid mirror: {0}")]
    Mirror(String),
    /// A `hosts.toml` that does not parse or says something invalid.
    #[error("{path}:{line}: {detail}")]
    File {
        /// The file.
        path: PathBuf,
        /// The 1-based line the problem is on.
        line: usize,
        /// What is wrong.
        detail: String,
    },
    /// The configuration directory cannot be read.
    #[error("registry config dir {path}: {detail}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The error.
        detail: String,
    },
}

/// `http` or `https`; `None` on the registry itself when no file says,
/// which then follows Docker's rule (plain HTTP on loopback and for
/// `--insecure-registry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    Http,
    Https,
}

/// One host that may serve a registry's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostEntry {
    pub scheme: Option<Scheme>,
    /// `host[:port]`.
    pub host: String,
    /// The API root, `/v2` unless the file overrides it.
    pub path: String,
    /// May serve content by digest (manifests and blobs).
    pub pull: bool,
    /// May resolve a tag to a digest.
    pub resolve: bool,
    pub ca: Vec<PathBuf>,
    /// Client certificate and key files; no key: the certificate file holds it.
    pub client: Vec<(PathBuf, Option<PathBuf>)>,
    pub skip_verify: bool,
    pub header: Vec<(String, String)>,
    pub dial_timeout: Option<Duration>,
    /// A host other than the registry itself (a mirror): its failures fall
    /// through to the next host quickly.
    pub mirror: bool,
}

impl HostEntry {
    pub(crate) fn upstream(registry: &str) -> Self {
        let (scheme, host) = if registry == DOCKER_HUB {
            (Some(Scheme::Https), "registry-1.docker.io".to_string())
        } else {
            (None, registry.to_string())
        };
        HostEntry {
            scheme,
            host,
            path: "/v2".into(),
            pull: true,
            resolve: true,
            ca: Vec::new(),
            client: Vec::new(),
            skip_verify: false,
            header: Vec::new(),
            dial_timeout: None,
            mirror: false,
        }
    }

    /// What the host is shown as in messages: its URL without the API root.
    pub(crate) fn shown(&self) -> String {
        match self.scheme {
            Some(Scheme::Http) => format!("http://{}", self.host),
            Some(Scheme::Https) => format!("https://{}", self.host),
            None => self.host.clone(),
        }
    }
}

/// The mirrors and host files of every registry, read once.
#[derive(Debug, Clone, Default)]
pub struct RegistryHosts {
    mirrors: Vec<HostEntry>,
    /// By directory name (`docker.io`, `host_5000_`, `_default`): the hosts
    /// its file lists, or, for a directory of certificate files, the
    /// registry itself with those files (its `host` empty until asked).
    dirs: BTreeMap<String, Vec<HostEntry>>,
}

impl RegistryHosts {
    /// Checks `mirrors` (Docker's `--registry-mirror`) and reads every
    /// registry directory under `config_dir`.
    ///
    /// # Errors
    ///
    /// A mirror that is not `http(s)://host[:port]`, or a file that does
    /// not parse, with its path and line.
    pub fn load(mirrors: &[String], config_dir: Option<&Path>) -> Result<Self, HostsError> {
        let mirrors = mirrors
            .iter()
            .map(|m| parse_mirror(m))
            .collect::<Result<Vec<_>, _>>()?;
        let mut dirs = BTreeMap::new();
        if let Some(root) = config_dir {
            let dir_error = |e: std::io::Error| HostsError::Dir {
                path: root.to_path_buf(),
                detail: e.to_string(),
            };
            for entry in std::fs::read_dir(root).map_err(dir_error)? {
                let entry = entry.map_err(dir_error)?;
                if !entry.file_type().map_err(dir_error)?.is_dir() {
                    continue;
                }
                let name = entry.file_name().to_string_lossy().into_owned();
                dirs.insert(name, file::load_dir(&entry.path())?);
            }
        }
        Ok(Self { mirrors, dirs })
    }

    /// The hosts to try for `registry`, in order; the last is the
    /// registry's own server unless its file names another.
    pub(crate) fn endpoints(&self, registry: &str) -> Vec<HostEntry> {
        let mut out = if registry == DOCKER_HUB {
            self.mirrors.clone()
        } else {
            Vec::new()
        };
        let dir = [host_directory(registry), registry.to_string()]
            .into_iter()
            .chain([DEFAULT_DIR.to_string()])
            .find_map(|name| self.dirs.get(&name));
        let hosts = dir
            .cloned()
            .unwrap_or_else(|| vec![HostEntry::upstream(registry)]);
        for mut host in hosts {
            if host.host.is_empty() {
                // The file gave no server: the registry itself, with the
                // file's settings for it.
                let upstream = HostEntry::upstream(registry);
                host.host = upstream.host;
                host.scheme = host.scheme.or(upstream.scheme);
            }
            out.push(host);
        }
        out
    }
}

/// containerd's directory name for `host:port`: `host_port_`.
fn host_directory(registry: &str) -> String {
    match registry.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() => format!("{host}_{port}_"),
        _ => registry.to_string(),
    }
}

/// Docker's checks of a `--registry-mirror`, and a path refused too: a
/// mirror mirrors the whole registry.
fn parse_mirror(text: &str) -> Result<HostEntry, HostsError> {
    let bad = |detail: String| HostsError::Mirror(detail);
    match text.split_once("://") {
        Some((scheme, _)) if !scheme.is_empty() => {}
        _ => {
            return Err(bad(format!(
                "no scheme specified for {text:?}: must use either 'https://' or 'http://'"
            )));
        }
    }
    let url =
        reqwest::Url::parse(text).map_err(|e| bad(format!("{text:?} is not a valid URI: {e}")))?;
    let scheme = match url.scheme() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => {
            return Err(bad(format!(
                "unsupported scheme {other:?} in {text:?}: must use either 'https://' or 'http://'"
            )));
        }
    };
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad(format!("query or fragment at end of the URI {text:?}")));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad(format!(
            "username/password not allowed in URI {:?}",
            format!("{}://{}", url.scheme(), host_port(&url))
        )));
    }
    if url.path() != "/" && !url.path().is_empty() {
        return Err(bad(format!(
            "path {:?} not allowed in URI {text:?}: a mirror serves the registry's whole API at /v2/",
            url.path()
        )));
    }
    let mut host = HostEntry::upstream(&host_port(&url));
    host.scheme = Some(scheme);
    host.mirror = true;
    Ok(host)
}

pub(super) fn host_port(url: &reqwest::Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn write(dir: &Path, registry: &str, text: &str) {
        let d = dir.join(registry);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(HOSTS_FILE), text).unwrap();
    }

    fn shown(hosts: &[HostEntry]) -> Vec<String> {
        hosts
            .iter()
            .map(|h| format!("{}{}", h.shown(), h.path))
            .collect()
    }

    #[test]
    fn docker_mirrors_come_first_then_docker_hub() {
        let hosts = RegistryHosts::load(
            &["http://127.0.0.1:5001".into(), "https://m.example/".into()],
            None,
        )
        .unwrap();
        let hub = hosts.endpoints("docker.io");
        assert_eq!(
            shown(&hub),
            [
                "http://127.0.0.1:5001/v2",
                "https://m.example/v2",
                "https://registry-1.docker.io/v2"
            ]
        );
        assert!(hub[0].mirror && hub[1].mirror && !hub[2].mirror);
        assert_eq!(shown(&hosts.endpoints("quay.io")), ["quay.io/v2"]);
    }

    #[test]
    fn bad_mirrors_are_refused_as_docker_refuses_them() {
        for (mirror, words) in [
            ("127.0.0.1:5001", "no scheme specified"),
            ("ftp://m.example", "unsupported scheme \"ftp\""),
            ("https://m.example/?a=b", "query or fragment"),
            ("https://m.example/#x", "query or fragment"),
            (
                "https://u:secret@m.example",
                "username/password not allowed",
            ),
            ("https://m.example/mirror", "path \"/mirror\" not allowed"),
        ] {
            let err = RegistryHosts::load(&[mirror.into()], None).unwrap_err();
            let text = err.to_string();
            assert!(text.starts_with("invalid mirror: "), "{text}");
            assert!(text.contains(words), "{mirror}: {text}");
            assert!(!text.contains("secret"), "{text}");
        }
    }

    #[test]
    fn hosts_files_keep_their_order_and_containerd_defaults() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "docker.io",
            r#"
server = "http://127.0.0.1:5009"

[host."http://127.0.0.1:5003"]
  capabilities = ["pull"]

[host."https://mirror.example/prefix"]
  ca = "ca.pem"
  client = [["c.cert", "/abs/c.key"], "both.pem"]
  skip_verify = true
  dial_timeout = "1m500ms"
  [host."https://mirror.example/prefix".header]
    x-team = "blue"

[host."http://127.0.0.1:5002"]
  override_path = true
"#,
        );
        let hosts = RegistryHosts::load(&["http://127.0.0.1:5001".into()], Some(dir.path()))
            .unwrap()
            .endpoints("docker.io");
        assert_eq!(
            shown(&hosts),
            [
                "http://127.0.0.1:5001/v2",
                "http://127.0.0.1:5003/v2",
                "https://mirror.example/prefix/v2",
                "http://127.0.0.1:5002",
                "http://127.0.0.1:5009/v2",
            ]
        );
        assert!((hosts[1].pull, hosts[1].resolve) == (true, false));
        assert!((hosts[2].pull, hosts[2].resolve) == (true, true));
        let d = dir.path().join("docker.io");
        assert_eq!(hosts[2].ca, vec![d.join("ca.pem")]);
        assert_eq!(
            hosts[2].client,
            vec![
                (d.join("c.cert"), Some(PathBuf::from("/abs/c.key"))),
                (d.join("both.pem"), None)
            ]
        );
        assert!(hosts[2].skip_verify);
        assert_eq!(hosts[2].dial_timeout, Some(Duration::from_millis(60_500)));
        assert_eq!(hosts[2].header, vec![("x-team".into(), "blue".into())]);
        assert!(hosts[3].mirror && !hosts[4].mirror);
    }

    #[test]
    fn directories_follow_containerd_precedence() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "_default", "[host.\"http://127.0.0.1:7000\"]\n");
        write(
            dir.path(),
            "reg.example_5000_",
            "[host.\"http://127.0.0.1:7001\"]\n",
        );
        write(
            dir.path(),
            "reg.example:5000",
            "[host.\"http://127.0.0.1:7002\"]\n",
        );
        write(
            dir.path(),
            "other.example:5000",
            "[host.\"http://127.0.0.1:7003\"]\n",
        );
        let certs = dir.path().join("certs.example");
        std::fs::create_dir_all(&certs).unwrap();
        std::fs::write(certs.join("ca.crt"), "x").unwrap();
        std::fs::write(certs.join("me.cert"), "x").unwrap();
        std::fs::write(certs.join("me.key"), "x").unwrap();
        let hosts = RegistryHosts::load(&[], Some(dir.path())).unwrap();
        assert_eq!(
            shown(&hosts.endpoints("reg.example:5000")),
            ["http://127.0.0.1:7001/v2", "reg.example:5000/v2"]
        );
        assert_eq!(
            shown(&hosts.endpoints("other.example:5000")),
            ["http://127.0.0.1:7003/v2", "other.example:5000/v2"]
        );
        assert_eq!(
            shown(&hosts.endpoints("docker.io")),
            [
                "http://127.0.0.1:7000/v2",
                "https://registry-1.docker.io/v2"
            ]
        );
        let certs_only = hosts.endpoints("certs.example");
        assert_eq!(shown(&certs_only), ["certs.example/v2"]);
        assert_eq!(certs_only[0].ca, vec![certs.join("ca.crt")]);
        assert_eq!(
            certs_only[0].client,
            vec![(certs.join("me.cert"), Some(certs.join("me.key")))]
        );
    }

    #[test]
    fn a_bad_file_names_its_path_and_line() {
        let dir = tempfile::tempdir().unwrap();
        for (text, line, words) in [
            (
                "server = \"https://a\"\n\n[host.\"http://b\"\ncapabilities = 1\n",
                3,
                "",
            ),
            (
                "server = \"https://a\"\n[host.\"http://b\"]\n  capabilites = [\"pull\"]\n",
                3,
                "unknown field `capabilites`",
            ),
            (
                "\n[host.\"http://b\"]\n  capabilities = [\"fly\"]\n",
                2,
                "unknown capability fly",
            ),
            ("[host.\"ftp://b\"]\n", 1, "unsupported scheme"),
            (
                "[host.\"http://b\"]\ndial_timeout = \"soon\"\n",
                1,
                "invalid dial_timeout",
            ),
        ] {
            write(dir.path(), "r.example", text);
            let err = RegistryHosts::load(&[], Some(dir.path())).unwrap_err();
            let file = dir.path().join("r.example").join(HOSTS_FILE);
            let prefix = format!("{}:{line}: ", file.display());
            let text = err.to_string();
            assert!(text.starts_with(&prefix), "{text:?} vs {prefix:?}");
            assert!(text.contains(words), "{text}");
        }
    }
}
