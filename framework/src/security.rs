//! The API's security flags (kube-apiserver's names) and what they resolve to: plain
//! HTTP on loopback by default, or TLS with authentication and RBAC, with a PKI mesopod
//! makes for itself on first start.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use apiserver::Api;
use apiserver::auth::node_keys::NodeKeys;
use apiserver::auth::sa::TokenAuthority;
use apiserver::auth::{Auth, Authenticator};

use crate::pki::{self, PkiFiles};

/// The issuer of service account tokens when `--service-account-issuer` is not given.
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// Security flags of `mesopod scheduler`.
#[derive(Debug, Clone, clap::Args)]
pub struct SecurityArgs {
    /// Serve the API over HTTPS on this port of --bind-address (0: any free port);
    /// turns on authentication and authorization.
    #[arg(long)]
    pub secure_port: Option<u16>,
    /// The address HTTPS listens on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// The serving certificate (PEM); default: made in DATA_DIR/pki on first start.
    #[arg(long)]
    pub tls_cert_file: Option<PathBuf>,
    /// The serving certificate's key (PEM).
    #[arg(long)]
    pub tls_private_key_file: Option<PathBuf>,
    /// CA whose client certificates authenticate (CN user, O groups); default: the
    /// generated CA when the serving certificate is generated.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// Static bearer tokens, CSV: token,user,uid,"group1,group2".
    #[arg(long)]
    pub token_auth_file: Option<PathBuf>,
    /// Let requests without credentials in as system:anonymous.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub anonymous_auth: bool,
    /// `Node,RBAC` (default with authentication: executors read only what their
    /// agent's pods reference), `RBAC`, or `AlwaysAllow`.
    #[arg(long, default_value = "Node,RBAC")]
    pub authorization_mode: String,
    /// The key that signs service account tokens; default: generated with the PKI.
    #[arg(long)]
    pub service_account_signing_key_file: Option<PathBuf>,
    /// Keys that verify service account tokens (repeatable; the signing key always does).
    #[arg(long = "service-account-key-file")]
    pub service_account_key_files: Vec<PathBuf>,
    /// Issuers of service account tokens; the first signs, all are accepted.
    #[arg(long = "service-account-issuer")]
    pub service_account_issuers: Vec<String>,
    /// Audiences a token must name one of (default: the issuers).
    #[arg(long, value_delimiter = ',')]
    pub api_audiences: Vec<String>,
}

/// The HTTPS side of a resolved configuration.
#[derive(Debug, Clone)]
pub struct Secure {
    /// Serving certificate and key.
    pub cert: PathBuf,
    /// Serving key.
    pub key: PathBuf,
    /// Client CA.
    pub client_ca: Option<PathBuf>,
    /// Token file.
    pub token_file: Option<PathBuf>,
    /// Anonymous requests allowed.
    pub anonymous: bool,
    /// RBAC (else AlwaysAllow).
    pub rbac: bool,
    /// The Node authorizer in front of RBAC.
    pub node: bool,
    /// Executors' node keys, registered through Mesos: the scheduler writes, the
    /// authenticator reads.
    pub node_keys: Arc<NodeKeys>,
    /// Service account token signing key.
    pub sa_signing_key: Option<PathBuf>,
    /// Service account token verifying keys.
    pub sa_keys: Vec<PathBuf>,
    /// Issuers.
    pub issuers: Vec<String>,
    /// Audiences.
    pub audiences: Vec<String>,
    /// The generated PKI, whose admin kubeconfig is written once the port is known.
    pub pki: Option<(PathBuf, PkiFiles)>,
}

/// How the API is served: plain HTTP (`None`, loopback only) or HTTPS.
#[derive(Debug, Clone, Default)]
pub struct Security {
    /// HTTPS with authentication, if on.
    pub secure: Option<Secure>,
}

/// Why the security flags cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    /// A combination that cannot work, with the flags to fix it.
    #[error("{0}")]
    Flags(String),
    /// The generated PKI failed.
    #[error(transparent)]
    Pki(#[from] pki::PkiError),
    /// A file given could not be used.
    #[error(transparent)]
    Auth(#[from] apiserver::auth::AuthError),
    /// The bootstrap RBAC policy could not be stored.
    #[error(transparent)]
    Api(#[from] apiserver::ApiError),
}

impl SecurityArgs {
    /// The address to listen on and the security it runs with; `listen` is the plain
    /// `--listen` address, used when HTTPS is off.
    ///
    /// # Errors
    /// Flags that need HTTPS without it, half a certificate pair, an unknown mode, or a
    /// PKI that cannot be made.
    pub fn resolve(
        &self,
        data_dir: &Path,
        listen: SocketAddr,
    ) -> Result<(SocketAddr, Security), SecurityError> {
        let https = self.secure_port.is_some() || self.tls_cert_file.is_some();
        if !https {
            for (given, flag) in [
                (self.client_ca_file.is_some(), "--client-ca-file"),
                (self.token_auth_file.is_some(), "--token-auth-file"),
                (
                    self.tls_private_key_file.is_some(),
                    "--tls-private-key-file",
                ),
            ] {
                if given {
                    return Err(SecurityError::Flags(format!(
                        "{flag} needs HTTPS: pass --secure-port"
                    )));
                }
            }
            return Ok((listen, Security::default()));
        }
        let (rbac, node) = match self.authorization_mode.as_str() {
            "Node,RBAC" => (true, true),
            "RBAC" => (true, false),
            "AlwaysAllow" => (false, false),
            other => {
                return Err(SecurityError::Flags(format!(
                    "--authorization-mode must be Node,RBAC, RBAC or AlwaysAllow, not {other:?}"
                )));
            }
        };
        let addr = SocketAddr::new(self.bind_address, self.secure_port.unwrap_or(6443));
        let (cert, key, client_ca, sa_signing_key, generated) =
            match (&self.tls_cert_file, &self.tls_private_key_file) {
                (Some(c), Some(k)) => (
                    c.clone(),
                    k.clone(),
                    self.client_ca_file.clone(),
                    self.service_account_signing_key_file.clone(),
                    None,
                ),
                (None, None) => {
                    let mut hosts = vec![hostname()];
                    if !self.bind_address.is_unspecified() {
                        hosts.push(self.bind_address.to_string());
                    }
                    let files = pki::ensure(data_dir, &hosts)?;
                    (
                        files.serving_cert.clone(),
                        files.serving_key.clone(),
                        Some(
                            self.client_ca_file
                                .clone()
                                .unwrap_or_else(|| files.ca_cert.clone()),
                        ),
                        Some(
                            self.service_account_signing_key_file
                                .clone()
                                .unwrap_or_else(|| files.sa_key.clone()),
                        ),
                        Some((data_dir.to_owned(), files)),
                    )
                }
                _ => {
                    return Err(SecurityError::Flags(
                        "--tls-cert-file and --tls-private-key-file go together".into(),
                    ));
                }
            };
        let issuers = if self.service_account_issuers.is_empty() {
            vec![DEFAULT_ISSUER.to_owned()]
        } else {
            self.service_account_issuers.clone()
        };
        Ok((
            addr,
            Security {
                secure: Some(Secure {
                    cert,
                    key,
                    client_ca,
                    token_file: self.token_auth_file.clone(),
                    anonymous: self.anonymous_auth,
                    rbac,
                    node,
                    node_keys: Arc::default(),
                    sa_signing_key,
                    sa_keys: self.service_account_key_files.clone(),
                    issuers,
                    audiences: self.api_audiences.clone(),
                    pki: generated,
                }),
            },
        ))
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// What serving needs: the TLS configuration and the authenticator with its authorizer.
pub struct Serving {
    /// The rustls configuration.
    pub tls: Arc<rustls::ServerConfig>,
    /// Authentication and authorization.
    pub auth: Arc<Auth>,
}

impl Secure {
    /// Loads the files and stores the bootstrap RBAC policy.
    ///
    /// # Errors
    /// A file cannot be used, or the store failed.
    pub async fn serving(&self, api: &Api) -> Result<Serving, SecurityError> {
        let tls = apiserver::tls::server_config(&self.cert, &self.key, self.client_ca.as_deref())?;
        let tokens = match &self.token_file {
            Some(f) => apiserver::auth::tokenfile::load(f)?,
            None => Default::default(),
        };
        let keys: Vec<&Path> = self.sa_keys.iter().map(PathBuf::as_path).collect();
        let service_accounts = if self.sa_signing_key.is_some() || !keys.is_empty() {
            Some(Arc::new(TokenAuthority::load(
                self.sa_signing_key.as_deref(),
                &keys,
                self.issuers.clone(),
                self.audiences.clone(),
            )?))
        } else {
            None
        };
        let authn = Authenticator {
            tokens,
            service_accounts,
            anonymous: self.anonymous,
            nodes: Some(self.node_keys.clone()),
        };
        let auth = if self.rbac {
            Auth::with_node(api.clone(), authn, self.node).await?
        } else {
            Auth::new(api.clone(), authn, false).await?
        };
        Ok(Serving { tls, auth })
    }

    /// Writes the admin kubeconfig for the address actually bound, if the PKI is ours.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn write_kubeconfig(&self, addr: SocketAddr) -> Result<Option<PathBuf>, SecurityError> {
        let Some((dir, files)) = &self.pki else {
            return Ok(None);
        };
        let host = if addr.ip().is_unspecified() {
            SocketAddr::new([127, 0, 0, 1].into(), addr.port())
        } else {
            addr
        };
        Ok(Some(pki::write_kubeconfig(
            dir,
            &format!("https://{host}"),
            files,
        )?))
    }
}
