//! Registry credentials: a Docker `config.json` (`--registry-config`)
//! today, a pod's `imagePullSecrets` (the same JSON) later.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use serde::Deserialize;

/// A user name and password for one registry. `Debug` never shows the
/// password.
#[derive(Clone, PartialEq, Eq)]
pub struct RegistryAuth {
    registry: String,
    username: String,
    password: String,
}

/// Why a Docker config does not give credentials.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// Not JSON of the config's shape.
    #[error("registry config is not a Docker config.json: {0}")]
    Json(#[from] serde_json::Error),
    /// An `auth` that is not base64 of `user:password`.
    #[error("registry config: the auth of {0} is not base64 of user:password")]
    BadAuth(String),
}

#[derive(Deserialize)]
struct DockerConfig {
    auths: Option<BTreeMap<String, Entry>>,
}

#[derive(Deserialize)]
struct Entry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

impl RegistryAuth {
    /// Credentials for `registry` (`docker.io`, `host:port`).
    pub fn basic(registry: &str, username: &str, password: &str) -> Self {
        Self {
            registry: normalise_registry(registry),
            username: username.to_string(),
            password: password.to_string(),
        }
    }

    /// Every entry of a Docker `config.json` (`{"auths": {...}}`) or a
    /// legacy `.dockercfg` (the map alone), each with an `auth` of base64
    /// `user:password` or a `username` and `password`. Keys may be URLs
    /// (`https://index.docker.io/v1/` is Docker Hub).
    ///
    /// # Errors
    ///
    /// When the bytes are not such a config.
    pub fn from_docker_config(bytes: &[u8]) -> Result<Vec<Self>, AuthError> {
        let value: serde_json::Value = serde_json::from_slice(bytes)?;
        let entries: BTreeMap<String, Entry> = if value.get("auths").is_some() {
            serde_json::from_value::<DockerConfig>(value)?
                .auths
                .unwrap_or_default()
        } else {
            serde_json::from_value(value)?
        };
        let mut out = Vec::new();
        for (key, entry) in entries {
            let (username, password) = match (entry.auth, entry.username, entry.password) {
                (Some(auth), _, _) if !auth.is_empty() => {
                    decode_auth(&auth).ok_or_else(|| AuthError::BadAuth(key.clone()))?
                }
                (_, Some(u), Some(p)) => (u, p),
                _ => continue,
            };
            out.push(Self::basic(&key, &username, &password));
        }
        Ok(out)
    }

    /// The registry these credentials are for, normalised as references are.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    pub(crate) fn user_password(&self) -> (String, String) {
        (self.username.clone(), self.password.clone())
    }
}

impl fmt::Debug for RegistryAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryAuth")
            .field("registry", &self.registry)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

fn decode_auth(auth: &str) -> Option<(String, String)> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (u, p) = text.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

/// `https://index.docker.io/v1/` -> `docker.io`, `http://h:5000/x` -> `h:5000`.
pub(crate) fn normalise_registry(key: &str) -> String {
    let host = key
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    let host = host.split('/').next().unwrap_or(host);
    match host {
        "index.docker.io" | "registry-1.docker.io" | "docker.io" => {
            crate::reference::DOCKER_HUB.to_string()
        }
        other => other.to_string(),
    }
}

/// The first credentials for `registry`, if any.
pub(crate) fn for_registry<'a>(
    creds: impl IntoIterator<Item = &'a RegistryAuth>,
    registry: &str,
) -> Option<&'a RegistryAuth> {
    creds.into_iter().find(|c| c.registry == registry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_config_entries_become_credentials() {
        let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cret");
        let json = format!(
            r#"{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{auth}"}},
                 "127.0.0.1:5000": {{"username": "bob", "password": "pw"}},
                 "empty.example": {{}}}}}}"#
        );
        let creds = RegistryAuth::from_docker_config(json.as_bytes()).expect("parses");
        assert_eq!(
            creds,
            vec![
                RegistryAuth::basic("127.0.0.1:5000", "bob", "pw"),
                RegistryAuth::basic("docker.io", "alice", "s3cret"),
            ]
        );
        assert!(!format!("{creds:?}").contains("s3cret"));
        assert_eq!(
            for_registry(&creds, "docker.io").map(|c| c.registry()),
            Some("docker.io")
        );
    }

    #[test]
    fn legacy_dockercfg_and_bad_auth() {
        let creds =
            RegistryAuth::from_docker_config(br#"{"h:1": {"username": "u", "password": "p"}}"#)
                .expect("parses");
        assert_eq!(creds, vec![RegistryAuth::basic("h:1", "u", "p")]);
        let err = RegistryAuth::from_docker_config(br#"{"auths": {"h": {"auth": "!!"}}}"#)
            .expect_err("bad auth");
        assert!(err.to_string().contains("not base64"), "{err}");
        assert!(RegistryAuth::from_docker_config(b"[1]").is_err());
    }
}
