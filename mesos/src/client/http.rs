//! Plumbing shared by both clients: endpoints, POST with manual redirects,
//! status mapping, bounded error bodies, typed event streams.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue, LOCATION};
use reqwest::{Response, Url};
use serde::de::DeserializeOwned;
use tracing::debug;

use super::{ClientError, EventStream};
use crate::codec::Codec;
use crate::recordio::{self, DEFAULT_MAX_RECORD_LEN};

/// The header that ties calls to a scheduler subscription.
pub(crate) const STREAM_ID_HEADER: &str = "Mesos-Stream-Id";

/// Mesos redirects once, to the leader; a few more hops allow for an
/// election in progress, and the cap stops a redirect loop.
const MAX_REDIRECTS: usize = 5;

/// Error bodies are Mesos' one-line explanations; anything bigger is cut
/// so that a broken server cannot fill memory through an error.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// A master or agent that does not accept a connection in this time is
/// treated as down, so the next master can be tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Default deadline for response *headers* (and for error bodies). Calls
/// answer at once with 202; a SUBSCRIBE answers its headers at once too
/// (its body then streams for as long as the subscription lives).
pub(crate) const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(30);

/// A reqwest client that never follows redirects itself and ignores proxy
/// variables (masters and agents are reached directly).
pub(crate) fn client() -> Result<reqwest::Client, ClientError> {
    Ok(reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT)
        .no_proxy()
        .build()?)
}

/// The https client of a `--mesos-cafile` configuration: reqwest over
/// exactly that rustls configuration (its roots, its provider), https only.
pub(crate) fn tls_client(
    config: &Arc<rustls::ClientConfig>,
) -> Result<reqwest::Client, ClientError> {
    super::security::https_client(config, CONNECT_TIMEOUT)
        .map_err(|e| ClientError::Tls(e.to_string()))
}

/// `http://host:port[/prefix]` + `path`, from a URL or a bare `host:port`.
pub(crate) fn endpoint(base: &str, path: &str) -> Result<Url, ClientError> {
    let invalid = || ClientError::InvalidEndpoint(base.to_owned());
    let trimmed = base.trim();
    let with_scheme = if trimmed.contains("://") {
        trimmed.to_owned()
    } else {
        format!("http://{trimmed}")
    };
    let mut url = Url::parse(&with_scheme).map_err(|_| invalid())?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(invalid());
    }
    let prefix = url.path().trim_end_matches('/').to_owned();
    url.set_path(&format!("{prefix}{path}"));
    url.set_query(None);
    url.set_fragment(None);
    Ok(url)
}

/// The base a caller should keep for later calls: the URL without `path`.
pub(crate) fn base_of(url: &Url, path: &str) -> String {
    let s = url.as_str();
    s.strip_suffix(path)
        .unwrap_or(s)
        .trim_end_matches('/')
        .to_owned()
}

/// A successful (2xx) response and the URL that finally gave it.
pub(crate) struct Posted {
    pub(crate) response: Response,
    pub(crate) url: Url,
}

/// What one POST needs.
pub(crate) struct Request<'a> {
    pub(crate) http: &'a reqwest::Client,
    pub(crate) codec: Codec,
    pub(crate) body: Bytes,
    pub(crate) stream_id: Option<&'a str>,
    pub(crate) timeout: Duration,
    /// `Authorization`, if the client has a credential.
    pub(crate) auth: Option<&'a HeaderValue>,
    /// How https URLs are reached; without it they are refused.
    pub(crate) tls: Option<&'a reqwest::Client>,
}

/// POSTs the body to `url`, following redirects (including Mesos'
/// protocol-relative `Location: //host:port/...`), and maps every non-2xx
/// status to its [`ClientError`].
pub(crate) async fn post(req: &Request<'_>, mut url: Url) -> Result<Posted, ClientError> {
    for _ in 0..=MAX_REDIRECTS {
        let response = tokio::time::timeout(req.timeout, send(req, &url))
            .await
            .map_err(|_| ClientError::Timeout(req.timeout))??;
        let status = response.status();
        if status.is_success() {
            return Ok(Posted { response, url });
        }
        if status.is_redirection() {
            let next = redirect_target(&url, &response)?;
            debug!(from = %url, to = %next, status = status.as_u16(), "following redirect");
            url = next;
            continue;
        }
        let challenge = response
            .headers()
            .get_all(reqwest::header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect::<Vec<_>>()
            .join(", ");
        let body = tokio::time::timeout(req.timeout, bounded_text(response))
            .await
            .unwrap_or_else(|_| String::from("(body not received in time)"));
        if status.as_u16() == 401 {
            return Err(ClientError::Unauthorized { body, challenge });
        }
        return Err(ClientError::from_status(status.as_u16(), body));
    }
    Err(ClientError::Redirect(format!(
        "more than {MAX_REDIRECTS} redirects, last to {url}"
    )))
}

/// One POST of `req` to `url`: over the plain client for http, over the
/// `--mesos-cafile` client for https (refused without one: no plaintext
/// fallback, no default trust).
async fn send(req: &Request<'_>, url: &Url) -> Result<Response, ClientError> {
    let mut headers = reqwest::header::HeaderMap::new();
    let content_type = HeaderValue::from_static(req.codec.content_type());
    headers.insert(CONTENT_TYPE, content_type.clone());
    headers.insert(ACCEPT, content_type);
    if let Some(id) = req.stream_id
        && let Ok(v) = HeaderValue::from_str(id)
    {
        headers.insert(STREAM_ID_HEADER, v);
    }
    if let Some(auth) = req.auth {
        headers.insert(AUTHORIZATION, auth.clone());
    }
    if url.scheme() == "https" {
        let Some(tls) = req.tls else {
            return Err(ClientError::InvalidEndpoint(format!(
                "{url}: an https master needs --mesos-cafile"
            )));
        };
        return tls
            .post(url.clone())
            .headers(headers)
            .body(req.body.clone())
            .send()
            .await
            .map_err(|e| ClientError::Tls(format!("{url}: {}", error_chain(&e))));
    }
    if req.tls.is_some() {
        return Err(ClientError::InvalidEndpoint(format!(
            "{url}: --mesos-cafile allows only https:// (no plaintext fallback)"
        )));
    }
    Ok(req
        .http
        .post(url.clone())
        .headers(headers)
        .body(req.body.clone())
        .send()
        .await?)
}

fn redirect_target(url: &Url, response: &Response) -> Result<Url, ClientError> {
    let location = response
        .headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            ClientError::Redirect(format!(
                "{} from {url} without a Location",
                response.status()
            ))
        })?;
    // `join` resolves "//host:port/path" against the current scheme, as
    // RFC 3986 says, and "/path" against the current host.
    let next = url
        .join(location)
        .map_err(|e| ClientError::Redirect(format!("bad Location '{location}': {e}")))?;
    if !matches!(next.scheme(), "http" | "https") {
        return Err(ClientError::Redirect(format!(
            "Location '{location}' is not HTTP"
        )));
    }
    // Credentials and calls never fall back to plaintext.
    if url.scheme() == "https" && next.scheme() != "https" {
        return Err(ClientError::Redirect(format!(
            "refusing a redirect from https to '{location}'"
        )));
    }
    Ok(next)
}

/// An error and its causes, `a: b: c` (reqwest's own text hides why a
/// handshake failed).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// The body as text, cut at [`MAX_ERROR_BODY`] bytes.
async fn bounded_text(mut response: Response) -> String {
    let mut buf = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = MAX_ERROR_BODY - buf.len();
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if buf.len() >= MAX_ERROR_BODY {
            break;
        }
    }
    String::from_utf8_lossy(&buf).trim().to_owned()
}

/// The codec of a streamed response: its `Content-Type` when that names a
/// Mesos codec (or `Message-Content-Type` for `application/recordio`
/// streams), else the one asked for.
fn response_codec(response: &Response, asked: Codec) -> Codec {
    let header = |name: &str| response.headers().get(name).and_then(|v| v.to_str().ok());
    let content_type = header(CONTENT_TYPE.as_str());
    let declared = match content_type {
        Some(ct) if ct.trim().starts_with("application/recordio") => header("Message-Content-Type"),
        other => other,
    };
    Codec::from_content_type(declared).unwrap_or(asked)
}

/// The response body as a stream of typed messages. A record that does
/// not decode yields an error and the stream goes on (framing is intact);
/// broken framing or a broken connection yields one error and ends it.
pub(crate) fn event_stream<M>(response: Response, asked: Codec) -> EventStream<M>
where
    M: prost::Message + DeserializeOwned + Default + Send + 'static,
{
    let codec = response_codec(&response, asked);
    if codec != asked {
        debug!(?asked, got = ?codec, "event stream uses a different codec than asked");
    }
    let records = recordio::decode_stream(response.bytes_stream(), DEFAULT_MAX_RECORD_LEN);
    Box::pin(records.map(move |record| Ok(codec.decode::<M>(&record?)?)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn endpoints_accept_urls_and_bare_host_ports() {
        assert_eq!(
            endpoint("10.0.0.1:5051", "/api/v1/executor")
                .unwrap()
                .as_str(),
            "http://10.0.0.1:5051/api/v1/executor"
        );
        assert_eq!(
            endpoint("http://m1:5050/", "/api/v1/scheduler")
                .unwrap()
                .as_str(),
            "http://m1:5050/api/v1/scheduler"
        );
        assert_eq!(
            endpoint("http://proxy/mesos", "/api/v1/scheduler")
                .unwrap()
                .as_str(),
            "http://proxy/mesos/api/v1/scheduler"
        );
        assert!(endpoint("ftp://m1", "/x").is_err());
        assert!(endpoint("http://", "/x").is_err());
        let url = endpoint("http://proxy/mesos", "/api/v1/scheduler").unwrap();
        assert_eq!(base_of(&url, "/api/v1/scheduler"), "http://proxy/mesos");
    }

    #[test]
    fn protocol_relative_locations_keep_the_scheme() {
        let here = Url::parse("http://m1:5050/api/v1/scheduler").unwrap();
        assert_eq!(
            here.join("//m2:5051/api/v1/scheduler").unwrap().as_str(),
            "http://m2:5051/api/v1/scheduler"
        );
    }
}
