//! `httpGet`: kubelet's HTTP probe. 200–399 succeeds; same-host redirects
//! are followed (at most 10), a redirect to another host succeeds with a
//! warning; HTTPS does not verify the server's certificate.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use super::tcp::{connect, join_host_port};
use super::{HttpGet, MAX_OUTPUT, Outcome, Scheme, USER_AGENT};

/// Go's `http.Client` gives up after this many redirects.
const MAX_REDIRECTS: usize = 10;

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Where one request goes.
#[derive(Debug, Clone)]
struct Target {
    scheme: Scheme,
    host: String,
    port: u16,
    path: String,
}

impl Target {
    fn url(&self) -> String {
        let scheme = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        format!(
            "{scheme}://{}{}",
            join_host_port(&self.host, self.port),
            self.path
        )
    }
}

/// One `httpGet` attempt against `pod_ip` (unless `get.host` is set).
pub async fn probe(get: &HttpGet, pod_ip: &str, timeout: Duration) -> Outcome {
    let first = Target {
        scheme: get.scheme,
        host: get.host.clone().unwrap_or_else(|| pod_ip.to_owned()),
        port: get.port,
        path: if get.path.starts_with('/') {
            get.path.clone()
        } else {
            format!("/{}", get.path)
        },
    };
    let url = first.url();
    match tokio::time::timeout(timeout, follow(first, &get.headers, timeout)).await {
        Ok(outcome) => outcome,
        Err(_) => Outcome::Failure(format!(
            "Get {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        )),
    }
}

async fn follow(mut target: Target, headers: &[(String, String)], timeout: Duration) -> Outcome {
    for _ in 0..=MAX_REDIRECTS {
        let url = target.url();
        let (status, location, body) = match request(&target, headers, timeout).await {
            Ok(r) => r,
            Err(e) => return Outcome::Failure(format!("Get {url:?}: {e}")),
        };
        if (300..400).contains(&status)
            && let Some(next) = location.as_deref().and_then(|l| redirect(&target, l))
        {
            if next.host == target.host {
                target = next;
                continue;
            }
            return Outcome::Warning(format!("Probe terminated redirects, Response body: {body}"));
        }
        return if (200..400).contains(&status) {
            Outcome::Success
        } else {
            Outcome::Failure(format!("HTTP probe failed with statuscode: {status}"))
        };
    }
    Outcome::Failure(format!(
        "Get {:?}: stopped after {MAX_REDIRECTS} redirects",
        target.url()
    ))
}

/// Where a `Location` header points, relative to `from`.
fn redirect(from: &Target, location: &str) -> Option<Target> {
    if location.starts_with('/') {
        return Some(Target {
            path: location.to_owned(),
            ..from.clone()
        });
    }
    let uri: http::Uri = location.parse().ok()?;
    let scheme = match uri.scheme_str() {
        Some("https") => Scheme::Https,
        Some("http") => Scheme::Http,
        _ => return None,
    };
    let authority = uri.authority()?;
    let port = authority.port_u16().unwrap_or(match scheme {
        Scheme::Http => 80,
        Scheme::Https => 443,
    });
    Some(Target {
        scheme,
        host: authority.host().trim_matches(['[', ']']).to_owned(),
        port,
        path: uri
            .path_and_query()
            .map_or("/".into(), |p| p.as_str().to_owned()),
    })
}

/// One GET: status, `Location`, and at most [`MAX_OUTPUT`] of the body.
async fn request(
    target: &Target,
    headers: &[(String, String)],
    timeout: Duration,
) -> Result<(u16, Option<String>, String), String> {
    let tcp = connect(&target.host, target.port, timeout).await?;
    let io: Box<dyn Io> = match target.scheme {
        Scheme::Http => Box::new(tcp),
        Scheme::Https => {
            let name = rustls::pki_types::ServerName::try_from(target.host.clone())
                .map_err(|e| format!("invalid host {:?}: {e}", target.host))?;
            let tls = tokio_rustls::TlsConnector::from(tls_config()?)
                .connect(name, tcp)
                .await
                .map_err(|e| format!("tls: {e}"))?;
            Box::new(tls)
        }
    };
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    let conn = tokio::spawn(conn);
    let mut req = http::Request::get(target.path.as_str())
        .header(
            http::header::HOST,
            join_host_port(&target.host, target.port),
        )
        .header(http::header::USER_AGENT, USER_AGENT)
        .header(http::header::ACCEPT, "*/*")
        .header(http::header::CONNECTION, "close")
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    for (name, value) in headers {
        let (Ok(name), Ok(value)) = (
            http::HeaderName::try_from(name.as_str()),
            http::HeaderValue::try_from(value.as_str()),
        ) else {
            continue;
        };
        // A header given in the probe replaces kubelet's default.
        req.headers_mut().insert(name, value);
    }
    let response = sender.send_request(req).await.map_err(|e| e.to_string());
    let result = match response {
        Ok(response) => {
            let status = response.status().as_u16();
            let location = response
                .headers()
                .get(http::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let mut body = response.into_body();
            let mut read = Vec::new();
            while read.len() < MAX_OUTPUT {
                match body.frame().await {
                    Some(Ok(frame)) => {
                        if let Some(data) = frame.data_ref() {
                            read.extend_from_slice(data);
                        }
                    }
                    _ => break,
                }
            }
            read.truncate(MAX_OUTPUT);
            Ok((
                status,
                location,
                String::from_utf8_lossy(&read).into_owned(),
            ))
        }
        Err(e) => Err(e),
    };
    conn.abort();
    result
}

/// kubelet's HTTPS probes skip verification (`InsecureSkipVerify`).
fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let verifier = Arc::new(NoVerify(Arc::clone(&provider)));
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map(|b| {
                    Arc::new(
                        b.dangerous()
                            .with_custom_certificate_verifier(verifier)
                            .with_no_client_auth(),
                    )
                })
                .map_err(|e| format!("tls: {e}"))
        })
        .clone()
}

#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
