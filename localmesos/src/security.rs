//! What localmesos enforces, with Mesos' flags: framework authentication
//! (`--authenticate_http_frameworks` with `--credentials`), authentication of
//! the read-only operator endpoints (`--authenticate_http_readonly`: the
//! master's and agents' `/state`, the sandbox files, the maintenance
//! status), of the read-write ones (`--authenticate_http_readwrite`: the
//! operator API `POST /api/v1`, the maintenance schedule, machine
//! down/up), executor
//! authentication (`--authenticate_http_executors` with `--jwt_secret_key`),
//! and whether the `/admin/` fault routes are served (`--enable-faults`,
//! loopback only). Everything is off by default except what keeps the
//! server alive: the connection cap and header-read timeout.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Principals and their secrets, from Mesos' `--credentials` JSON
/// (`{"credentials":[{"principal":"…","secret":"…"}]}`).
#[derive(Clone, Default)]
pub struct Credentials(HashMap<String, String>);

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Principals only, never secrets.
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// Why a credentials or key file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not what the flag takes.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
}

fn read(path: &Path) -> Result<Vec<u8>, SecurityError> {
    std::fs::read(path).map_err(|source| SecurityError::Read {
        path: path.display().to_string(),
        source,
    })
}

impl Credentials {
    /// Mesos' JSON credentials.
    ///
    /// # Errors
    /// A message saying what is wrong with the JSON.
    pub fn from_json(bytes: &[u8]) -> Result<Self, String> {
        #[derive(serde::Deserialize)]
        struct File {
            credentials: Vec<Entry>,
        }
        #[derive(serde::Deserialize)]
        struct Entry {
            principal: String,
            #[serde(default)]
            secret: String,
        }
        let file: File = serde_json::from_slice(bytes).map_err(|e| {
            format!("not Mesos' JSON credentials ({{\"credentials\":[{{\"principal\",\"secret\"}}]}}): {e}")
        })?;
        if file.credentials.is_empty() {
            return Err("no credentials".into());
        }
        Ok(Self(
            file.credentials
                .into_iter()
                .map(|e| (e.principal, e.secret))
                .collect(),
        ))
    }

    /// [`Credentials::from_json`] of a file (`--credentials`).
    ///
    /// # Errors
    /// [`SecurityError`].
    pub fn load(path: &Path) -> Result<Self, SecurityError> {
        Self::from_json(&read(path)?).map_err(|message| SecurityError::Invalid {
            path: path.display().to_string(),
            message,
        })
    }

    /// One principal and secret (for tests and embedders).
    pub fn single(principal: &str, secret: &str) -> Self {
        Self(HashMap::from([(principal.to_owned(), secret.to_owned())]))
    }

    /// Whether `principal` has `secret`, compared in constant time.
    pub(crate) fn check(&self, principal: &str, secret: &str) -> bool {
        self.0.get(principal).is_some_and(|s| {
            s.len() == secret.len()
                && s.bytes()
                    .zip(secret.bytes())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0
        })
    }
}

/// Reads `--jwt_secret_key`: the file's bytes are the HMAC key, as Mesos
/// reads it.
///
/// # Errors
/// [`SecurityError`] for an unreadable or empty file.
pub fn load_jwt_secret_key(path: &Path) -> Result<Arc<[u8]>, SecurityError> {
    let key = read(path)?;
    if key.is_empty() {
        return Err(SecurityError::Invalid {
            path: path.display().to_string(),
            message: "the key file is empty".into(),
        });
    }
    Ok(key.into())
}

/// The token an agent with `key` gives container `cid` of executor `eid`
/// of framework `fid` (`MESOS_EXECUTOR_AUTHENTICATION_TOKEN`): for tools
/// and tests that play an executor.
pub fn executor_token(key: &[u8], fid: &str, eid: &str, cid: &str) -> String {
    crate::agent::token::mint(key, fid, eid, cid)
}

/// Mesos' master and agent servers have no such knobs; localmesos caps
/// connections and the time to send headers so a flood of idle sockets
/// cannot take it down.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// See [`DEFAULT_MAX_CONNECTIONS`].
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);

/// What the cluster enforces. [`Security::default`]: nothing but the
/// connection limits, and no fault routes.
#[derive(Clone, Debug)]
pub struct Security {
    /// Framework authentication: calls to `/api/v1/scheduler` need HTTP
    /// basic credentials from this list (`--authenticate_http_frameworks`
    /// with `--credentials`).
    pub framework_credentials: Option<Credentials>,
    /// The read-only operator endpoints (`/state` of the master and of
    /// each agent, `/files/*`) need HTTP basic credentials from
    /// `framework_credentials` too (`--authenticate_http_readonly`): they
    /// name every framework, task and sandbox path.
    pub authenticate_http_readonly: bool,
    /// The read-write operator endpoints (`POST /api/v1`, the maintenance
    /// schedule, `/machine/down` and `/machine/up`) need HTTP basic
    /// credentials from `framework_credentials` too
    /// (`--authenticate_http_readwrite`): they change the cluster.
    pub authenticate_http_readwrite: bool,
    /// Agents mint `MESOS_EXECUTOR_AUTHENTICATION_TOKEN` with this key
    /// (`--jwt_secret_key`).
    pub jwt_secret_key: Option<Arc<[u8]>>,
    /// Agents refuse executor calls without a valid token
    /// (`--authenticate_http_executors`; needs `jwt_secret_key`).
    pub authenticate_http_executors: bool,
    /// Serve the `/admin/` fault routes (`--enable-faults`); only ever on a
    /// loopback master address.
    pub enable_faults: bool,
    /// Connections each server (master, agents) keeps open at most.
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers.
    pub header_read_timeout: Duration,
}

impl Default for Security {
    fn default() -> Self {
        Self {
            framework_credentials: None,
            authenticate_http_readonly: false,
            authenticate_http_readwrite: false,
            jwt_secret_key: None,
            authenticate_http_executors: false,
            enable_faults: false,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
        }
    }
}

impl Security {
    /// The connection limits of every server of the cluster.
    pub(crate) fn conn_limits(&self) -> connlimits::ConnLimits {
        connlimits::ConnLimits {
            max_connections: self.max_connections,
            header_read_timeout: self.header_read_timeout,
        }
    }

    /// Checks the combination, as Mesos refuses to start with a bad one.
    ///
    /// # Errors
    /// A message naming the flags.
    pub fn validate(&self) -> Result<(), String> {
        if self.authenticate_http_executors && self.jwt_secret_key.is_none() {
            return Err("--authenticate_http_executors needs --jwt_secret_key".into());
        }
        if self.authenticate_http_readonly && self.framework_credentials.is_none() {
            return Err("--authenticate_http_readonly needs --credentials".into());
        }
        if self.authenticate_http_readwrite && self.framework_credentials.is_none() {
            return Err("--authenticate_http_readwrite needs --credentials".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn mesos_json_credentials_parse_and_check() {
        let c = Credentials::from_json(
            br#"{"credentials":[{"principal":"mesopod","secret":"s3cret"},{"principal":"other","secret":"x"}]}"#,
        )
        .unwrap();
        assert!(c.check("mesopod", "s3cret"));
        assert!(!c.check("mesopod", "s3cre"));
        assert!(!c.check("mesopod", "x"));
        assert!(!c.check("nobody", "x"));
        assert!(!format!("{c:?}").contains("s3cret"));
        assert!(Credentials::from_json(b"mesopod s3cret").is_err());
        assert!(Credentials::from_json(br#"{"credentials":[]}"#).is_err());
    }
}
