//! Serving a router over TLS (rustls, HTTP/1.1 and HTTP/2 chosen by ALPN, as kubectl and
//! client-go use HTTP/2) or over plain TCP, through `connlimits`' accept loop (connection
//! cap, header-read and handshake timeout, graceful shutdown). Client certificates
//! verified against the client CA reach handlers as [`PeerCertificates`].

use std::future::Future;
use std::path::Path;
use std::sync::Arc;

use axum::Router;
use axum::http::Extensions;
use connlimits::ConnLimits;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use crate::auth::AuthError;

/// The verified client certificate chain of a TLS connection (leaf first).
#[derive(Debug, Clone)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

fn tls_err(what: &Path, e: impl std::fmt::Debug) -> AuthError {
    AuthError::Tls(format!("{}: {e:?}", what.display()))
}

/// The certificates of a PEM file.
///
/// # Errors
/// Unreadable, or no certificate in it.
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, AuthError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| tls_err(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls_err(path, e))?;
    if certs.is_empty() {
        return Err(tls_err(path, "no certificate in the file"));
    }
    Ok(certs)
}

/// A rustls server configuration from `--tls-cert-file` and `--tls-private-key-file`,
/// asking for (not requiring) client certificates signed by `--client-ca-file`.
///
/// # Errors
/// A file that cannot be read or used.
pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>, AuthError> {
    let certs = load_certs(cert)?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| tls_err(key, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| AuthError::Tls(e.to_string()))?;
    let builder = match client_ca {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for c in load_certs(ca)? {
                roots.add(c).map_err(|e| tls_err(ca, e))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .allow_unauthenticated()
                .build()
                .map_err(|e| tls_err(ca, e))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| AuthError::Tls(format!("{}: {e}", cert.display())))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The TLS step of `connlimits`' accept loop: a rustls handshake, after
/// which the verified client chain rides on every request of the
/// connection as [`PeerCertificates`].
#[derive(Clone)]
pub struct TlsHandshake(TlsAcceptor);

impl TlsHandshake {
    /// Handshakes with `config` (see [`server_config`]).
    pub fn new(config: Arc<ServerConfig>) -> Self {
        Self(TlsAcceptor::from(config))
    }
}

impl std::fmt::Debug for TlsHandshake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsHandshake").finish_non_exhaustive()
    }
}

impl connlimits::Handshake for TlsHandshake {
    type Stream = TlsStream<TcpStream>;

    async fn handshake(&self, tcp: TcpStream) -> std::io::Result<(Self::Stream, Extensions)> {
        let tls = self.0.accept(tcp).await?;
        let mut extensions = Extensions::new();
        if let Some(certs) = tls.get_ref().1.peer_certificates() {
            extensions.insert(PeerCertificates(Arc::new(
                certs.iter().map(|c| c.clone().into_owned()).collect(),
            )));
        }
        Ok((tls, extensions))
    }
}

/// Serves `router` on `listener`, over TLS with `tls` (HTTP/1.1 or HTTP/2 by
/// ALPN) or plain TCP without, through `connlimits`' one accept loop: the
/// connection cap, the header-read timeout (which bounds the handshake too)
/// and graceful shutdown when `shutdown` resolves.
///
/// # Errors
/// Never today: a failed accept or handshake affects only that connection.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<Arc<ServerConfig>>,
    limits: ConnLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    match tls {
        Some(config) => {
            connlimits::serve_with_handshake(
                listener,
                TlsHandshake::new(config),
                router,
                limits,
                shutdown,
            )
            .await
        }
        None => connlimits::serve_with_shutdown(listener, router, limits, shutdown).await,
    }
}
