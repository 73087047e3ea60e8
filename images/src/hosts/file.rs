//! containerd's `hosts.toml`, and a registry directory in Docker's
//! `certs.d` layout: what one registry directory says about its hosts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::{HOSTS_FILE, HostEntry, HostsError, Scheme, host_port};

/// What a `hosts.toml` says about one host (and, at the top level, about
/// the server). Unknown keys are refused: a misspelt `capabilites` would
/// otherwise silently make a mirror resolve tags.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostFields {
    capabilities: Option<Vec<String>>,
    ca: Option<StringOrList>,
    client: Option<ClientFiles>,
    skip_verify: Option<bool>,
    header: Option<BTreeMap<String, StringOrList>>,
    #[serde(default)]
    override_path: bool,
    dial_timeout: Option<String>,
}

/// A whole file: the server's fields at the top level (serde's `flatten`
/// cannot refuse unknown keys, hence the repetition of [`HostFields`]).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostsFile {
    server: Option<String>,
    #[serde(default)]
    host: indexmap::IndexMap<String, toml::Spanned<HostFields>>,
    capabilities: Option<Vec<String>>,
    ca: Option<StringOrList>,
    client: Option<ClientFiles>,
    skip_verify: Option<bool>,
    header: Option<BTreeMap<String, StringOrList>>,
    #[serde(default)]
    override_path: bool,
    dial_timeout: Option<String>,
}

impl HostsFile {
    fn server_fields(self) -> (Option<String>, HostFields) {
        let fields = HostFields {
            capabilities: self.capabilities,
            ca: self.ca,
            client: self.client,
            skip_verify: self.skip_verify,
            header: self.header,
            override_path: self.override_path,
            dial_timeout: self.dial_timeout,
        };
        (self.server, fields)
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum StringOrList {
    One(String),
    Many(Vec<String>),
}

impl StringOrList {
    fn into_vec(self) -> Vec<String> {
        match self {
            Self::One(s) => vec![s],
            Self::Many(v) => v,
        }
    }
}

/// containerd's three forms: one file, files, or `[cert, key]` pairs.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ClientFiles {
    One(String),
    Many(Vec<ClientFile>),
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ClientFile {
    Combined(String),
    Pair([String; 2]),
}

pub(super) fn load_dir(dir: &Path) -> Result<Vec<HostEntry>, HostsError> {
    let file = dir.join(HOSTS_FILE);
    match std::fs::read_to_string(&file) {
        Ok(text) => parse_hosts_file(&file, dir, &text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(vec![cert_files(dir)?]),
        Err(e) => Err(HostsError::File {
            path: file,
            line: 1,
            detail: e.to_string(),
        }),
    }
}

/// A directory in Docker's `certs.d` layout: the registry with its files.
fn cert_files(dir: &Path) -> Result<HostEntry, HostsError> {
    let mut host = HostEntry::upstream("");
    host.host = String::new();
    host.scheme = None;
    let entries = std::fs::read_dir(dir).map_err(|e| HostsError::Dir {
        path: dir.to_path_buf(),
        detail: e.to_string(),
    })?;
    let mut names: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    names.sort();
    for path in names {
        match path.extension().and_then(|x| x.to_str()) {
            Some("crt") => host.ca.push(path),
            Some("cert") => {
                let key = path.with_extension("key");
                host.client.push((path, key.exists().then_some(key)));
            }
            _ => {}
        }
    }
    Ok(host)
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

fn parse_hosts_file(file: &Path, dir: &Path, text: &str) -> Result<Vec<HostEntry>, HostsError> {
    let at = |line: usize, detail: String| HostsError::File {
        path: file.to_path_buf(),
        line,
        detail,
    };
    let mut parsed: HostsFile = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(text, s.start));
        at(line, e.message().to_string())
    })?;
    let mut out = Vec::new();
    let hosts = std::mem::take(&mut parsed.host);
    for (url, fields) in hosts {
        let line = line_of(text, fields.span().start);
        let entry = host_entry(Some(&url), dir, fields.into_inner()).map_err(|d| at(line, d))?;
        out.push(HostEntry {
            mirror: true,
            ..entry
        });
    }
    let (server, fields) = parsed.server_fields();
    let server = host_entry(server.as_deref(), dir, fields).map_err(|d| at(1, d))?;
    out.push(server);
    Ok(out)
}

/// One host of a file: containerd's `parseHostConfig`. `server` absent: the
/// registry itself (its host filled in when asked for a registry).
fn host_entry(server: Option<&str>, dir: &Path, f: HostFields) -> Result<HostEntry, String> {
    let mut entry = HostEntry::upstream("");
    entry.host = String::new();
    entry.scheme = None;
    if let Some(server) = server.filter(|s| !s.is_empty()) {
        let with_scheme = if server.contains("://") {
            server.to_string()
        } else {
            format!("https://{server}")
        };
        let url = reqwest::Url::parse(&with_scheme)
            .map_err(|e| format!("unable to parse server {server}: {e}"))?;
        entry.scheme = Some(match url.scheme() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            other => return Err(format!("unsupported scheme {other:?} in {server}")),
        });
        if url.query().is_some() || url.fragment().is_some() {
            return Err(format!("query or fragment in host {server}"));
        }
        entry.host = host_port(&url);
        let path = url.path().trim_end_matches('/');
        entry.path = if f.override_path || path.ends_with("/v2") {
            path.to_string()
        } else {
            format!("{path}/v2")
        };
    }
    if let Some(caps) = f.capabilities {
        entry.pull = false;
        entry.resolve = false;
        for cap in caps {
            match cap.to_ascii_lowercase().as_str() {
                "pull" => entry.pull = true,
                "resolve" => entry.resolve = true,
                // mesopod never pushes; the capability is harmless.
                "push" => {}
                _ => return Err(format!("unknown capability {cap}")),
            }
        }
    }
    let abs = |p: String| {
        let p = PathBuf::from(p);
        if p.is_absolute() { p } else { dir.join(p) }
    };
    entry.ca =
        f.ca.map(StringOrList::into_vec)
            .unwrap_or_default()
            .into_iter()
            .map(abs)
            .collect();
    entry.client = match f.client {
        None => Vec::new(),
        Some(ClientFiles::One(file)) => vec![(abs(file), None)],
        Some(ClientFiles::Many(files)) => files
            .into_iter()
            .map(|c| match c {
                ClientFile::Combined(file) => (abs(file), None),
                ClientFile::Pair([cert, key]) => (abs(cert), Some(abs(key))),
            })
            .collect(),
    };
    entry.skip_verify = f.skip_verify.unwrap_or(false);
    entry.header = f
        .header
        .unwrap_or_default()
        .into_iter()
        .flat_map(|(k, v)| v.into_vec().into_iter().map(move |v| (k.clone(), v)))
        .collect();
    for (name, value) in &entry.header {
        reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("invalid header name {name:?}"))?;
        reqwest::header::HeaderValue::from_str(value)
            .map_err(|_| format!("invalid value for header {name:?}"))?;
    }
    entry.dial_timeout = f
        .dial_timeout
        .map(|d| parse_go_duration(&d).ok_or_else(|| format!("invalid dial_timeout {d:?}")))
        .transpose()?;
    Ok(entry)
}

/// Go's `time.ParseDuration` for the forms a timeout takes: `500ms`, `2s`,
/// `1m30s`.
fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(digits);
        let number: f64 = number.parse().ok()?;
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let secs = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += Duration::try_from_secs_f64(number * secs).ok()?;
        rest = after;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("2s"), Some(Duration::from_secs(2)));
        assert_eq!(parse_go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("10"), None);
        assert_eq!(parse_go_duration(""), None);
    }
}
