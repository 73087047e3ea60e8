//! The embedded cluster's own credentials. Pods share the host's network by
//! default, so the embedded master and agents on loopback are reachable
//! from inside any pod; without authentication one SUBSCRIBE with
//! mesopod's framework id would take the framework over, and its stream
//! could kill any tenant's pod. So the embedded cluster authenticates by
//! default, as a production Mesos cluster does:
//!
//! - frameworks (`--authenticate_http_frameworks`), the read-only
//!   operator endpoints, `/state` and the sandbox files
//!   (`--authenticate_http_readonly`), and the read-write ones, the
//!   operator API and maintenance (`--authenticate_http_readwrite`), with
//!   one principal whose secret
//!   mesopod makes at first start in `DATA_DIR/mesos-auth/secret` (as k3s
//!   makes its token) and then uses itself;
//! - executors (`--authenticate_http_executors`), with an HMAC key in
//!   `DATA_DIR/mesos-auth/jwt_secret_key` that agents sign each executor's
//!   token with. It is kept across restarts because recovered executors
//!   keep the token they were started with.
//!
//! # Guarantees
//! The directory is 0700 and both files 0600, written whole (a temporary
//! file renamed into place), so a crash never leaves a half-written
//! secret. Neither secret is logged.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use mesos::client::Credential;
use ring::rand::{SecureRandom as _, SystemRandom};

/// The folder of the data directory that holds the credentials.
pub const DIR: &str = "mesos-auth";
/// The framework's secret (plain text, Mesos' `--secret-file` format).
pub const SECRET_FILE: &str = "secret";
/// The agents' executor token key (Mesos' `--jwt_secret_key`).
pub const JWT_KEY_FILE: &str = "jwt_secret_key";
/// The principal when `--principal` is not given.
pub const DEFAULT_PRINCIPAL: &str = "mesopod";

/// Random bytes in each secret: 256 bits, as k3s' and kubeadm's tokens
/// are at least.
const SECRET_BYTES: usize = 32;

/// Why the credentials cannot be made or read.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddedAuthError {
    /// A file or the directory cannot be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The system's random source failed.
    #[error("cannot make a random secret")]
    Random,
    /// A stored secret is not usable.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// What the embedded cluster enforces and what mesopod presents to it.
#[derive(Debug, Clone)]
pub struct EmbeddedAuth {
    /// The cluster's settings: frameworks, read-only endpoints and
    /// executors authenticated.
    pub security: localmesos::Security,
    /// mesopod's own credential towards it.
    pub credential: Credential,
}

/// Makes the credentials in `data_dir` unless they are there, and returns
/// them for `principal`.
///
/// # Errors
/// [`EmbeddedAuthError`] naming the file.
pub fn ensure(data_dir: &Path, principal: &str) -> Result<EmbeddedAuth, EmbeddedAuthError> {
    let dir = data_dir.join(DIR);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|source| EmbeddedAuthError::Io {
            path: dir.clone(),
            source,
        })?;
    let secret = read_or_make(&dir.join(SECRET_FILE), |bytes| {
        hex::encode(bytes).into_bytes()
    })?;
    let secret_path = dir.join(SECRET_FILE);
    let secret = String::from_utf8(secret)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty() && !s.contains(':'))
        .ok_or_else(|| EmbeddedAuthError::Invalid {
            path: secret_path.clone(),
            message: "the secret must be non-empty text without ':'".into(),
        })?;
    let key = read_or_make(&dir.join(JWT_KEY_FILE), <[u8]>::to_vec)?;
    let credential =
        Credential::new(principal, &secret).map_err(|e| EmbeddedAuthError::Invalid {
            path: secret_path,
            message: e.to_string(),
        })?;
    let security = localmesos::Security {
        framework_credentials: Some(localmesos::Credentials::single(principal, &secret)),
        authenticate_http_readonly: true,
        authenticate_http_readwrite: true,
        jwt_secret_key: Some(key.into()),
        authenticate_http_executors: true,
        ..localmesos::Security::default()
    };
    Ok(EmbeddedAuth {
        security,
        credential,
    })
}

/// The file's bytes; if it does not exist, `encode`d random bytes written
/// to it first (0600, whole or not at all). An existing file readable by
/// others is tightened to 0600: it is ours, and a secret.
fn read_or_make(
    path: &Path,
    encode: impl Fn(&[u8]) -> Vec<u8>,
) -> Result<Vec<u8>, EmbeddedAuthError> {
    let io = |source| EmbeddedAuthError::Io {
        path: path.to_owned(),
        source,
    };
    match std::fs::read(path) {
        Ok(bytes) if !bytes.is_empty() => {
            let mode = std::fs::metadata(path).map_err(io)?.permissions().mode();
            if mode & 0o077 != 0 {
                tracing::warn!(path = %path.display(), "a credential file was readable by others; made it 0600");
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                    .map_err(io)?;
            }
            return Ok(bytes);
        }
        Ok(_) => {
            return Err(EmbeddedAuthError::Invalid {
                path: path.to_owned(),
                message: "the file is empty; remove it to have a new one made".into(),
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    let mut random = [0u8; SECRET_BYTES];
    SystemRandom::new()
        .fill(&mut random)
        .map_err(|_| EmbeddedAuthError::Random)?;
    let bytes = encode(&random);
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    f.write_all(&bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn first_start_makes_private_files_and_later_starts_reuse_them() {
        let data = tempfile::tempdir().unwrap();
        let first = ensure(data.path(), "mesopod").unwrap();
        let dir = data.path().join(DIR);
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(SECRET_FILE)), 0o600);
        assert_eq!(mode(&dir.join(JWT_KEY_FILE)), 0o600);
        assert!(first.security.authenticate_http_executors);
        assert!(first.security.authenticate_http_readonly);
        assert!(first.security.validate().is_ok());

        let secret = std::fs::read_to_string(dir.join(SECRET_FILE)).unwrap();
        assert_eq!(secret.len(), 2 * SECRET_BYTES, "hex of 32 random bytes");
        let key = std::fs::read(dir.join(JWT_KEY_FILE)).unwrap();

        let again = ensure(data.path(), "mesopod").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join(SECRET_FILE)).unwrap(),
            secret
        );
        assert_eq!(again.security.jwt_secret_key.as_deref(), Some(&key[..]));
        assert_eq!(
            first.credential.authorization(),
            again.credential.authorization()
        );
        assert!(
            !format!("{again:?}").contains(&secret),
            "Debug never shows the secret"
        );
    }

    #[test]
    fn an_existing_secret_readable_by_others_is_tightened() {
        let data = tempfile::tempdir().unwrap();
        ensure(data.path(), "mesopod").unwrap();
        let file = data.path().join(DIR).join(SECRET_FILE);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        ensure(data.path(), "mesopod").unwrap();
        assert_eq!(mode(&file), 0o600);
    }

    #[test]
    fn an_empty_or_unusable_secret_is_refused_with_its_path() {
        let data = tempfile::tempdir().unwrap();
        ensure(data.path(), "mesopod").unwrap();
        let file = data.path().join(DIR).join(SECRET_FILE);
        std::fs::write(&file, "").unwrap();
        let err = ensure(data.path(), "mesopod").unwrap_err().to_string();
        assert!(err.contains("secret") && err.contains("empty"), "{err}");
        std::fs::write(&file, "a:b").unwrap();
        let err = ensure(data.path(), "mesopod").unwrap_err().to_string();
        assert!(err.contains("without ':'"), "{err}");
    }
}
