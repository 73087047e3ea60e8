//! Serving a router over TLS (rustls, HTTP/1.1 and HTTP/2 chosen by ALPN, as kubectl and
//! client-go use HTTP/2) or over plain TCP, with graceful shutdown. Client certificates
//! verified against the client CA reach handlers as [`PeerCertificates`].

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;

use crate::auth::AuthError;

/// The verified client certificate chain of a TLS connection (leaf first).
#[derive(Debug, Clone)]
pub struct PeerCertificates(pub Arc<Vec<CertificateDer<'static>>>);

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long open requests may take to finish once shutdown begins.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

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

/// Serves `router` on `listener` (over TLS with `tls`) until `shutdown` resolves, then
/// lets open requests finish for a few seconds.
///
/// # Errors
/// Never today: a failed accept or handshake affects only that connection.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<Arc<ServerConfig>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let builder = Builder::new(TokioExecutor::new());
    let acceptor = tls.map(TlsAcceptor::from);
    tokio::pin!(shutdown);
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let router = router.clone();
        let builder = builder.clone();
        let watcher = graceful.watcher();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let Some(acceptor) = acceptor else {
                let conn = builder.serve_connection(TokioIo::new(stream), service(router, None));
                let _ = watcher.watch(conn.into_owned()).await;
                return;
            };
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => return,
            };
            let peer = tls.get_ref().1.peer_certificates().map(|certs| {
                PeerCertificates(Arc::new(
                    certs.iter().map(|c| c.clone().into_owned()).collect(),
                ))
            });
            let conn = builder.serve_connection(TokioIo::new(tls), service(router, peer));
            let _ = watcher.watch(conn.into_owned()).await;
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown()).await;
    Ok(())
}

fn service(
    router: Router,
    peer: Option<PeerCertificates>,
) -> impl hyper::service::Service<
    hyper::Request<Incoming>,
    Response = axum::response::Response,
    Error = std::convert::Infallible,
    Future = impl Future<Output = Result<axum::response::Response, std::convert::Infallible>> + Send,
> + Clone {
    hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        if let Some(peer) = &peer {
            req.extensions_mut().insert(peer.clone());
        }
        router.clone().oneshot(req.map(axum::body::Body::new))
    })
}
