//! `httpGet`: kubelet's HTTP probe. 200–399 succeeds; same-host redirects
//! are followed (at most 10), a redirect to another host succeeds with a
//! warning; HTTPS does not verify the server's certificate.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::dial::dial;
use super::tcp::{go_error, join_host_port};
use super::{HttpGet, MAX_OUTPUT, Outcome, Scheme, USER_AGENT};

/// Go's `http.Client` gives up after this many redirects.
const MAX_REDIRECTS: usize = 10;

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
    // The URL is for messages only: built when one is needed.
    match tokio::time::timeout(timeout, follow(first.clone(), &get.headers, timeout)).await {
        Ok(outcome) => outcome,
        Err(_) => Outcome::Failure(format!(
            "Get {:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
            first.url()
        )),
    }
}

async fn follow(mut target: Target, headers: &[(String, String)], timeout: Duration) -> Outcome {
    for _ in 0..=MAX_REDIRECTS {
        let (status, location, body) = match request(&target, headers, timeout).await {
            Ok(r) => r,
            Err(e) => return Outcome::Failure(format!("Get {:?}: {e}", target.url())),
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

/// A response head larger than this is refused.
const MAX_HEAD: usize = 64 * 1024;

/// The request's bytes: kubelet's headers, each replaced by a probe
/// header of the same name; headers that are not valid HTTP are left out.
fn request_bytes(target: &Target, headers: &[(String, String)]) -> Vec<u8> {
    let host = join_host_port(&target.host, target.port);
    let defaults = [
        ("Host", host.as_str()),
        ("User-Agent", USER_AGENT),
        ("Accept", "*/*"),
        ("Connection", "close"),
    ];
    let valid = |(n, v): &&(String, String)| {
        http::HeaderName::try_from(n.as_str()).is_ok()
            && http::HeaderValue::try_from(v.as_str()).is_ok()
    };
    let given: Vec<&(String, String)> = headers.iter().filter(valid).collect();
    let mut out = Vec::with_capacity(160);
    let mut line = |parts: &[&str]| {
        for p in parts {
            out.extend_from_slice(p.as_bytes());
        }
        out.extend_from_slice(b"\r\n");
    };
    line(&["GET ", &target.path, " HTTP/1.1"]);
    for (name, value) in defaults {
        if !given.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
            line(&[name, ": ", value]);
        }
    }
    for (name, value) in given {
        line(&[name, ": ", value]);
    }
    line(&[]);
    out
}

/// What a response head says.
struct Head {
    status: u16,
    location: Option<String>,
    content_length: Option<usize>,
    /// Where the body starts in the bytes read.
    len: usize,
}

fn parse_head(buf: &[u8]) -> Result<Option<Head>, String> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => {
            let find = |name: &str| {
                (response.headers.iter())
                    .find(|h| h.name.eq_ignore_ascii_case(name))
                    .and_then(|h| std::str::from_utf8(h.value).ok())
                    .map(str::to_owned)
            };
            Ok(Some(Head {
                status: response.code.unwrap_or(0),
                location: find("location"),
                content_length: find("content-length").and_then(|v| v.trim().parse().ok()),
                len,
            }))
        }
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
            Err("net/http: response headers too large".into())
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(e) => Err(format!("net/http: malformed HTTP response: {e}")),
    }
}

/// One GET: status, `Location`, and (for a redirect, whose body is the
/// warning's text) at most [`MAX_OUTPUT`] of the body. Hand-rolled over
/// one connection, not hyper's client: probes are the executor's hottest
/// loop, and a success needs only the status line.
async fn request(
    target: &Target,
    headers: &[(String, String)],
    timeout: Duration,
) -> Result<(u16, Option<String>, String), String> {
    let conn = dial(&target.host, target.port, timeout).await?;
    let request = request_bytes(target, headers);
    match target.scheme {
        Scheme::Http => {
            let mut conn = conn.send(&request).await?;
            conn.settle().await;
            response(&mut conn).await
        }
        Scheme::Https => {
            let name = rustls::pki_types::ServerName::try_from(target.host.clone())
                .map_err(|e| format!("invalid host {:?}: {e}", target.host))?;
            let mut tls = tokio_rustls::TlsConnector::from(tls_config()?)
                .connect(name, conn)
                .await
                .map_err(|e| format!("tls: {e}"))?;
            tls.write_all(&request).await.map_err(|e| go_error(&e))?;
            response(&mut tls).await
        }
    }
}

/// Reads the response to a GET sent over `io`.
async fn response(
    io: &mut (impl AsyncRead + Unpin),
) -> Result<(u16, Option<String>, String), String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let head = loop {
        let n = io.read(&mut chunk).await.map_err(|e| go_error(&e))?;
        if n == 0 {
            return Err("EOF".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(head) = parse_head(&buf)? {
            break head;
        }
    };
    // Only a redirect's body is read: it is the warning's text.
    if !(300..400).contains(&head.status) {
        return Ok((head.status, None, String::new()));
    }
    let mut body = buf.split_off(head.len);
    let want = head.content_length.unwrap_or(MAX_OUTPUT).min(MAX_OUTPUT);
    while body.len() < want {
        match io.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    body.truncate(want);
    Ok((
        head.status,
        head.location,
        String::from_utf8_lossy(&body).into_owned(),
    ))
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
