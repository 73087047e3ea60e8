//! One HTTP/1.1 exchange with the API shim, over TLS (rustls with ring, trusting only
//! the CA the scheduler named) or, for a loopback `http://` shim, plain TCP. Its own
//! small client rather than reqwest's rustls feature: that one needs a process-wide
//! crypto provider installed before any reqwest client anywhere is built.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Uri};
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};

/// The longest one exchange may take.
const TIMEOUT: Duration = Duration::from_secs(15);
/// The largest answer read (a Secret or ConfigMap is at most 1 MiB, JSON-encoded).
const MAX_BODY: usize = 4 << 20;

/// Where the shim is and whom to trust.
#[derive(Clone)]
pub(crate) struct Endpoint {
    tls: Option<(tokio_rustls::TlsConnector, ServerName<'static>)>,
    host: String,
    port: u16,
    authority: String,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("authority", &self.authority)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Endpoint {
    /// `server` (`https://host:port` or `http://host:port`) trusting `ca_pem`.
    pub(crate) fn new(server: &str, ca_pem: &str) -> Result<Self, String> {
        let uri: Uri = server
            .parse()
            .map_err(|e| format!("bad API server URL {server:?}: {e}"))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(format!(
                    "the API server URL {server:?} must be http:// or https://"
                ));
            }
        };
        let host = uri
            .host()
            .ok_or_else(|| format!("the API server URL {server:?} has no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let authority = uri.authority().map(ToString::to_string).unwrap_or_default();
        let tls = if https {
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
                let cert = cert.map_err(|e| format!("the API's CA certificate: {e:?}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("the API's CA certificate: {e}"))?;
            }
            if roots.is_empty() {
                return Err("an https API server needs its CA certificate".into());
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map_err(|e| e.to_string())?
                .with_root_certificates(roots)
                .with_no_client_auth();
            let name = ServerName::try_from(host.clone()).map_err(|e| format!("{host}: {e}"))?;
            Some((tokio_rustls::TlsConnector::from(Arc::new(config)), name))
        } else {
            None
        };
        Ok(Self {
            tls,
            host,
            port,
            authority,
        })
    }

    /// `method path` with `bearer` and an optional JSON `body`: the status code and body.
    pub(crate) async fn send(
        &self,
        method: Method,
        path: &str,
        bearer: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(u16, Bytes), String> {
        tokio::time::timeout(TIMEOUT, self.exchange(method, path, bearer, body))
            .await
            .map_err(|_| format!("no answer from {} within {TIMEOUT:?}", self.authority))?
    }

    async fn exchange(
        &self,
        method: Method,
        path: &str,
        bearer: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(u16, Bytes), String> {
        let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", self.authority))?;
        let _ = tcp.set_nodelay(true);
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, &self.authority)
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::AUTHORIZATION, format!("Bearer {bearer}"));
        if body.is_some() {
            req = req.header(http::header::CONTENT_TYPE, "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| e.to_string())?;
        let resp = match &self.tls {
            Some((connector, name)) => {
                let tls = connector
                    .connect(name.clone(), tcp)
                    .await
                    .map_err(|e| format!("TLS with {}: {e}", self.authority))?;
                one_request(TokioIo::new(tls), req).await?
            }
            None => one_request(TokioIo::new(tcp), req).await?,
        };
        let code = resp.status().as_u16();
        let body = http_body_util::Limited::new(resp.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| format!("reading the answer: {e}"))?
            .to_bytes();
        Ok((code, body))
    }
}

async fn one_request<T>(
    io: TokioIo<T>,
    req: Request<Full<Bytes>>,
) -> Result<http::Response<hyper::body::Incoming>, String>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "API connection ended");
        }
    });
    sender.send_request(req).await.map_err(|e| e.to_string())
}
