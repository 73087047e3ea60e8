//! TLS towards masters and agents, and the credentials calls carry: HTTP
//! basic for frameworks (Mesos' `--principal`/`--secret-file`), a bearer
//! token for executors (`MESOS_EXECUTOR_AUTHENTICATION_TOKEN`).
//!
//! TLS uses rustls with the ring provider. With a CA file only that CA is
//! trusted, and every endpoint must be `https://`: there is no plaintext
//! fallback, and a redirect from https to http is refused.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use reqwest::header::HeaderValue;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

/// Why TLS or credentials cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    /// A file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The CA file holds no usable certificate.
    #[error("{path}: {message}")]
    Ca {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The secret or principal cannot be sent.
    #[error("{0}")]
    Credential(String),
}

/// A framework's principal and secret, sent as HTTP basic on every call.
#[derive(Clone)]
pub struct Credential {
    principal: String,
    header: HeaderValue,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("Credential")
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

impl Credential {
    /// `principal` and `secret`. Mesos splits the decoded header on `:`, so
    /// neither may contain one in the secret, nor be empty.
    ///
    /// # Errors
    /// [`SecurityError::Credential`] for an empty principal or secret, or a
    /// `:` in either.
    pub fn new(principal: &str, secret: &str) -> Result<Self, SecurityError> {
        if principal.is_empty() || secret.is_empty() {
            return Err(SecurityError::Credential(
                "the principal and the secret must not be empty".into(),
            ));
        }
        if principal.contains(':') || secret.contains(':') {
            return Err(SecurityError::Credential(
                "Mesos' basic authentication cannot carry a ':' in the principal or the secret"
                    .into(),
            ));
        }
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{principal}:{secret}"));
        let mut header = HeaderValue::from_str(&format!("Basic {encoded}"))
            .map_err(|e| SecurityError::Credential(e.to_string()))?;
        header.set_sensitive(true);
        Ok(Self {
            principal: principal.to_owned(),
            header,
        })
    }

    /// `principal` with the secret read from `path`: the file's text with
    /// surrounding whitespace trimmed (as Mesos frameworks read
    /// `--secret-file`), or Mesos' credential JSON
    /// `{"principal": "...", "secret": "..."}`, whose principal must then be
    /// `principal`.
    ///
    /// # Errors
    /// [`SecurityError::Read`], or [`SecurityError::Credential`].
    pub fn from_secret_file(principal: &str, path: &Path) -> Result<Self, SecurityError> {
        let text = std::fs::read_to_string(path).map_err(|source| SecurityError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let text = text.trim();
        if text.starts_with('{') {
            #[derive(serde::Deserialize)]
            struct Json {
                principal: String,
                secret: String,
            }
            let json: Json = serde_json::from_str(text).map_err(|e| {
                SecurityError::Credential(format!(
                    "{}: not a Mesos credential: {e}",
                    path.display()
                ))
            })?;
            if json.principal != principal {
                return Err(SecurityError::Credential(format!(
                    "{} is the credential of principal '{}', not of --principal '{principal}'",
                    path.display(),
                    json.principal
                )));
            }
            return Self::new(principal, &json.secret);
        }
        Self::new(principal, text)
    }

    /// The principal.
    pub fn principal(&self) -> &str {
        &self.principal
    }

    /// The `Authorization` header that carries it (marked sensitive, so
    /// hyper and reqwest never log it): for the read-only endpoints
    /// (`/state`, sandbox files) of a cluster with
    /// `--authenticate_http_readonly`, which take the same credential.
    pub fn authorization(&self) -> &HeaderValue {
        &self.header
    }
}

/// A bearer token (an executor's `MESOS_EXECUTOR_AUTHENTICATION_TOKEN`).
pub(crate) fn bearer(token: &str) -> Result<HeaderValue, SecurityError> {
    let mut header = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| SecurityError::Credential("the token is not a valid header value".into()))?;
    header.set_sensitive(true);
    Ok(header)
}

/// How a client reaches its servers.
#[derive(Clone, Debug, Default)]
pub struct ClientSecurity {
    /// Trust only this CA and speak only https (`--mesos-cafile`).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Sent as `Authorization` on every call.
    pub credential: Option<Credential>,
}

/// A TLS client configuration trusting exactly the certificates in
/// `ca_file` (PEM).
///
/// # Errors
/// [`SecurityError`] when the file cannot be read or holds no certificate.
pub fn tls_from_ca_file(ca_file: &Path) -> Result<Arc<rustls::ClientConfig>, SecurityError> {
    let shown = ca_file.display().to_string();
    let pem = std::fs::read(ca_file).map_err(|source| SecurityError::Read {
        path: shown.clone(),
        source,
    })?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| SecurityError::Ca {
            path: shown.clone(),
            message: format!("not PEM: {e}"),
        })?;
        roots.add(cert).map_err(|e| SecurityError::Ca {
            path: shown.clone(),
            message: format!("not a CA certificate: {e}"),
        })?;
    }
    if roots.is_empty() {
        return Err(SecurityError::Ca {
            path: shown,
            message: "no certificate in the file".into(),
        });
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| SecurityError::Ca {
        path: shown,
        message: e.to_string(),
    })?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

/// An https-only reqwest client over exactly `config` (its roots and its
/// crypto provider: no process-wide provider is needed), connecting within
/// `connect_timeout`, following no redirects and ignoring proxy variables:
/// the client of `--mesos-cafile` and `--admission-webhook-cafile`.
///
/// # Errors
/// [`SecurityError::Credential`] if reqwest cannot build it.
pub fn https_client(
    config: &Arc<rustls::ClientConfig>,
    connect_timeout: Duration,
) -> Result<reqwest::Client, SecurityError> {
    reqwest::Client::builder()
        .tls_backend_preconfigured(rustls::ClientConfig::clone(config))
        .https_only(true)
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(connect_timeout)
        .no_proxy()
        .build()
        .map_err(|e| SecurityError::Credential(format!("cannot build the https client: {e}")))
}
