//! etcd's gRPC over one HTTP/2 connection, without tower's buffer and balancer.
//!
//! etcd-client always puts its endpoints behind tonic's balanced channel, even for one
//! endpoint: every call is handed through a queue to a worker task that picks an
//! endpoint, and only then reaches the connection. In `mesopod bench` on etcd that
//! buffer and balancer were 5% of mesopod's CPU samples. This channel sends each call straight
//! into the HTTP/2 connection from the caller's task (hyper's `SendRequest` is a handle
//! many tasks share), and keeps etcd-client's failover: when the connection is gone,
//! the next call dials the next endpoint in the list.
//!
//! Connections are dialled and driven on the store's runtime, so they outlive the
//! runtime of whichever caller happened to need one. `https://` endpoints speak TLS
//! (rustls, ALPN `h2`) verified against `--etcd-cafile`, with `--etcd-certfile` and
//! `--etcd-keyfile` as the client certificate for etcd's `--client-cert-auth`.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use http::uri::{Authority, PathAndQuery, Scheme, Uri};
use hyper::client::conn::http2::SendRequest;
use hyper::rt::{Read, Write};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio::runtime::Handle;
use tokio_rustls::TlsConnector;
use tonic::body::Body;

use super::super::StoreError;
use super::EtcdConfig;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long dialling one endpoint may take (etcd-client's `connect_timeout` here).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// HTTP/2 pings on an idle connection, and how long a ping may go unanswered: a dead
/// etcd is noticed as with etcd-client's keep-alive settings.
const KEEP_ALIVE: Duration = Duration::from_secs(10);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(5);

/// One etcd endpoint, as calls address it.
#[derive(Debug, Clone)]
struct Endpoint {
    scheme: Scheme,
    authority: Authority,
}

impl Endpoint {
    fn parse(url: &str) -> Result<Self, StoreError> {
        let bad = |why: &str| StoreError::Storage(format!("--etcd-servers {url:?}: {why}"));
        let not_http = || bad("not an http:// or https:// URL");
        let uri: Uri = url.parse().map_err(|_| not_http())?;
        let scheme = match uri.scheme() {
            Some(s) if *s == Scheme::HTTP || *s == Scheme::HTTPS => s.clone(),
            _ => return Err(not_http()),
        };
        let authority = uri.authority().cloned().ok_or_else(|| bad("no host"))?;
        Ok(Self { scheme, authority })
    }

    fn tls(&self) -> bool {
        self.scheme == Scheme::HTTPS
    }

    /// The host as a certificate names it: `[::1]` is the address `::1`.
    fn host(&self) -> &str {
        self.authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
    }

    fn address(&self) -> (String, u16) {
        let port = self.authority.port_u16().unwrap_or(2379);
        (self.host().to_string(), port)
    }
}

fn read_err(flag: &str, path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Storage(format!("{flag} {}: {e}", path.display()))
}

/// The TLS client settings of `config`, if any endpoint is `https://`.
fn tls_connector(config: &EtcdConfig, tls: bool) -> Result<Option<TlsConnector>, StoreError> {
    let given = config.ca_file.is_some() || config.cert_file.is_some() || config.key_file.is_some();
    if !tls {
        if given {
            return Err(StoreError::Storage(
                "--etcd-cafile, --etcd-certfile and --etcd-keyfile need https:// --etcd-servers"
                    .into(),
            ));
        }
        return Ok(None);
    }
    let Some(ca) = &config.ca_file else {
        return Err(StoreError::Storage(
            "https:// --etcd-servers need --etcd-cafile, the CA that signed etcd's certificate"
                .into(),
        ));
    };
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(ca).map_err(|e| read_err("--etcd-cafile", ca, e))?;
    for cert in certs {
        let cert = cert.map_err(|e| read_err("--etcd-cafile", ca, e))?;
        roots
            .add(cert)
            .map_err(|e| read_err("--etcd-cafile", ca, e))?;
    }
    if roots.is_empty() {
        return Err(read_err("--etcd-cafile", ca, "no certificate in the file"));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(super::storage)?
        .with_root_certificates(roots);
    let mut client = match (&config.cert_file, &config.key_file) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .and_then(Iterator::collect::<Result<Vec<_>, _>>)
                .map_err(|e| read_err("--etcd-certfile", cert, e))?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|e| read_err("--etcd-keyfile", key, e))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| read_err("--etcd-certfile", cert, e))?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => {
            return Err(StoreError::Storage(
                "--etcd-certfile and --etcd-keyfile go together".into(),
            ));
        }
    };
    client.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Some(TlsConnector::from(Arc::new(client))))
}

struct Current {
    sender: Option<SendRequest<Body>>,
    /// The endpoint `sender` talks to, or the one to dial next.
    at: usize,
}

struct Inner {
    endpoints: Vec<Endpoint>,
    current: Mutex<Current>,
    /// One dial at a time: callers that find the connection gone together wait for
    /// the same new one.
    dialing: tokio::sync::Mutex<()>,
    tls: Option<TlsConnector>,
    runtime: Handle,
}

/// A tower service for etcd-client's `Channel::Custom`. See the module documentation.
#[derive(Clone)]
pub(crate) struct Direct {
    inner: Arc<Inner>,
}

impl Direct {
    /// The channel to `config`'s endpoints; nothing is dialled until the first call.
    pub(crate) fn new(config: &EtcdConfig, runtime: Handle) -> Result<Self, StoreError> {
        let endpoints = config
            .servers
            .iter()
            .map(|s| Endpoint::parse(s))
            .collect::<Result<Vec<_>, _>>()?;
        if endpoints.is_empty() {
            return Err(StoreError::Storage("--etcd-servers is empty".into()));
        }
        let tls = tls_connector(config, endpoints.iter().any(Endpoint::tls))?;
        Ok(Self {
            inner: Arc::new(Inner {
                endpoints,
                current: Mutex::new(Current {
                    sender: None,
                    at: 0,
                }),
                dialing: tokio::sync::Mutex::new(()),
                tls,
                runtime,
            }),
        })
    }
}

impl Inner {
    fn live(&self) -> Option<(SendRequest<Body>, usize)> {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        current
            .sender
            .as_ref()
            .filter(|s| !s.is_closed())
            .map(|s| (s.clone(), current.at))
    }

    async fn sender(self: &Arc<Self>) -> Result<(SendRequest<Body>, usize), BoxError> {
        if let Some(live) = self.live() {
            return Ok(live);
        }
        let _dialing = self.dialing.lock().await;
        if let Some(live) = self.live() {
            return Ok(live);
        }
        let start = {
            let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
            // A connection that was up and is gone: try the next endpoint first.
            if current.sender.take().is_some() {
                current.at = (current.at + 1) % self.endpoints.len();
            }
            current.at
        };
        let mut last = None;
        for n in 0..self.endpoints.len() {
            let at = (start + n) % self.endpoints.len();
            let endpoint = self.endpoints[at].clone();
            let dialled = self
                .runtime
                .spawn(dial(endpoint.clone(), self.tls.clone()))
                .await;
            match dialled {
                Ok(Ok(sender)) => {
                    let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
                    current.sender = Some(sender.clone());
                    current.at = at;
                    return Ok((sender, at));
                }
                Ok(Err(e)) => {
                    tracing::warn!(endpoint = %endpoint.authority, error = %e, "cannot reach etcd");
                    last = Some(e);
                }
                Err(e) => last = Some(Box::new(e)),
            }
        }
        Err(last.unwrap_or_else(|| "no etcd endpoint".into()))
    }
}

async fn dial(
    endpoint: Endpoint,
    tls: Option<TlsConnector>,
) -> Result<SendRequest<Body>, BoxError> {
    let connect = async {
        let tcp = TcpStream::connect(endpoint.address()).await?;
        tcp.set_nodelay(true)?;
        Ok::<_, BoxError>(tcp)
    };
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, connect)
        .await
        .map_err(|_| "connect timed out")??;
    match tls {
        Some(tls) if endpoint.tls() => {
            let name = ServerName::try_from(endpoint.host().to_string())?;
            let stream = tokio::time::timeout(CONNECT_TIMEOUT, tls.connect(name, tcp))
                .await
                .map_err(|_| "TLS handshake timed out")??;
            handshake(&endpoint, TokioIo::new(stream)).await
        }
        _ => handshake(&endpoint, TokioIo::new(tcp)).await,
    }
}

/// HTTP/2 on `io`; the connection runs as a task of its own.
async fn handshake<T>(endpoint: &Endpoint, io: T) -> Result<SendRequest<Body>, BoxError>
where
    T: Read + Write + Unpin + Send + 'static,
{
    let (sender, connection) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .keep_alive_interval(KEEP_ALIVE)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
        .keep_alive_while_idle(true)
        .handshake(io)
        .await?;
    let authority = endpoint.authority.clone();
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(endpoint = %authority, error = %e, "etcd connection ended");
        }
    });
    Ok(sender)
}

type Call = Pin<Box<dyn Future<Output = Result<http::Response<Body>, BoxError>> + Send>>;

impl tower::Service<http::Request<Body>> for Direct {
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = Call;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: http::Request<Body>) -> Self::Future {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            let (mut sender, at) = inner.sender().await?;
            let endpoint = &inner.endpoints[at];
            let path = request
                .uri()
                .path_and_query()
                .cloned()
                .unwrap_or_else(|| PathAndQuery::from_static("/"));
            *request.uri_mut() = Uri::builder()
                .scheme(endpoint.scheme.clone())
                .authority(endpoint.authority.clone())
                .path_and_query(path)
                .build()?;
            sender.ready().await?;
            let response = sender.send_request(request).await?;
            Ok(response.map(Body::new))
        })
    }
}
