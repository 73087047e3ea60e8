//! https towards masters with `--mesos-cafile` (and any other https peer
//! with its own CA, such as admission webhooks): HTTP/1.1 over rustls
//! (ring), trusting only the configured CA, beside reqwest's plain-HTTP path.
//!
//! reqwest's own rustls support would need a process-wide crypto provider
//! installed before *any* reqwest client is built (every test and tool in
//! the workspace), so https is spoken here and the answer handed back as a
//! `reqwest::Response`, which the rest of the client reads as before.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyDataStream, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use reqwest::Url;
use reqwest::header::{HOST, HeaderMap};
use rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

use super::ClientError;

/// Open connections kept for reuse, per `host:port`.
const IDLE_PER_HOST: usize = 4;

/// An https client trusting one rustls configuration's roots. Cheap to
/// share behind an `Arc`; keeps a few idle connections per host.
pub struct TlsClient {
    connector: TlsConnector,
    connect_timeout: Duration,
    idle: Mutex<HashMap<String, Vec<SendRequest<Full<Bytes>>>>>,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient").finish_non_exhaustive()
    }
}

fn tls_error(url: &Url, e: impl std::fmt::Display) -> ClientError {
    ClientError::Tls(format!("{url}: {e}"))
}

impl TlsClient {
    /// A client trusting `config`'s roots, giving up on a connect after
    /// `connect_timeout`.
    pub fn new(config: Arc<rustls::ClientConfig>, connect_timeout: Duration) -> Self {
        Self {
            connector: TlsConnector::from(config),
            connect_timeout,
            idle: Mutex::default(),
        }
    }

    fn take_idle(&self, authority: &str) -> Option<SendRequest<Full<Bytes>>> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let list = idle.get_mut(authority)?;
        while let Some(s) = list.pop() {
            if s.is_ready() {
                return Some(s);
            }
        }
        None
    }

    fn put_idle(&self, authority: String, sender: SendRequest<Full<Bytes>>) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let list = idle.entry(authority).or_default();
        list.retain(|s| !s.is_closed());
        if list.len() < IDLE_PER_HOST {
            list.push(sender);
        }
    }

    async fn connect(
        &self,
        url: &Url,
        host: &str,
        port: u16,
    ) -> Result<SendRequest<Full<Bytes>>, ClientError> {
        let tcp = tokio::time::timeout(
            self.connect_timeout,
            tokio::net::TcpStream::connect((host, port)),
        )
        .await
        .map_err(|_| ClientError::Timeout(self.connect_timeout))?
        .map_err(|e| tls_error(url, e))?;
        let _ = tcp.set_nodelay(true);
        let name = ServerName::try_from(host.to_owned()).map_err(|e| tls_error(url, e))?;
        let tls = self
            .connector
            .connect(name, tcp)
            .await
            .map_err(|e| tls_error(url, e))?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| tls_error(url, e))?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "https connection to a Mesos master ended");
            }
        });
        Ok(sender)
    }

    /// POSTs `body` with `headers` to the https `url`.
    ///
    /// # Errors
    /// [`ClientError::Tls`] when connecting, the handshake or the exchange
    /// fails; [`ClientError::Timeout`] for a connect past the timeout.
    pub async fn post(
        &self,
        url: &Url,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<reqwest::Response, ClientError> {
        let host = url
            .host_str()
            .ok_or_else(|| ClientError::InvalidEndpoint(url.to_string()))?;
        let port = url.port_or_known_default().unwrap_or(443);
        let authority = format!("{host}:{port}");
        let mut sender = match self.take_idle(&authority) {
            Some(s) => s,
            None => self.connect(url, host, port).await?,
        };
        let path = match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_owned(),
        };
        let mut request = hyper::Request::post(path)
            .header(HOST, &authority)
            .body(Full::new(body))
            .map_err(|e| tls_error(url, e))?;
        request.headers_mut().extend(headers);
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| tls_error(url, e))?;
        // HTTP/1: ready again once this response's body is read; a streaming
        // SUBSCRIBE's never is, and the pool skips it.
        self.put_idle(authority, sender);
        let (parts, incoming) = response.into_parts();
        let body = reqwest::Body::wrap_stream(BodyDataStream::new(incoming));
        Ok(reqwest::Response::from(http::Response::from_parts(
            parts, body,
        )))
    }
}
