//! One host of a registry: the distribution API's GETs with its token
//! and basic auth, and the checks of what comes back.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use futures::StreamExt as _;
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncWriteExt as _;

use super::{Clients, tls};
use crate::error::{PullError, error_chain};
use crate::manifest::ACCEPTED;
use crate::reference::Reference;

/// How long a request may wait for the host's answer.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Patience {
    /// The host's response timeout (a mirror's 1.5 s): a host not yet
    /// known to be alive.
    Quick,
    /// The client's own timeouts: the host that resolved the tag, which a
    /// pull-through cache may need a while to fill.
    Full,
}

/// A host that may serve an image, with its client and credentials.
pub(super) struct Endpoint {
    pub(super) clients: Clients,
    pub(super) http: reqwest::Client,
    /// `scheme://host[:port]` and the API root.
    pub(super) base: String,
    /// `scheme://host[:port]`, for messages.
    pub(super) shown: String,
    /// `host[:port]`: the key of its tokens.
    pub(super) host: String,
    pub(super) pull: bool,
    pub(super) resolve: bool,
    /// Not the registry's own host (a mirror, or a `server` a host file
    /// names instead): the `Pulled` event says so.
    pub(super) elsewhere: bool,
    /// This host's own credentials, never another's.
    pub(super) basic: Option<(String, String)>,
    /// A host file's extra headers.
    pub(super) headers: Vec<(String, String)>,
    /// How long the host may take to answer before the next is asked,
    /// when it is not the host that resolved the tag ([`Patience::Quick`]).
    pub(super) response_timeout: Option<Duration>,
    pub(super) reference: Reference,
}

impl Endpoint {
    pub(crate) fn reference(&self) -> String {
        self.reference.to_string()
    }

    fn token_key(&self) -> String {
        format!("{}/{}", self.host, self.reference.repository())
    }

    fn transport(&self, e: &reqwest::Error) -> PullError {
        let chain = error_chain(e);
        if let Some(x509) = tls::x509_words(&chain) {
            return PullError::Other {
                reference: self.reference(),
                detail: format!(
                    "failed to resolve reference \"{}\": failed to do request: {}: {x509}",
                    self.reference(),
                    self.shown
                ),
            };
        }
        if e.is_connect() || e.is_timeout() {
            PullError::Unreachable {
                reference: self.reference(),
                registry: self.host.clone(),
                detail: chain.clone(),
            }
        } else {
            PullError::Other {
                reference: self.reference(),
                detail: chain.clone(),
            }
        }
    }

    /// GETs `path` under `<API root>/<repository>/`, answering one auth
    /// challenge.
    async fn get(
        &self,
        path: &str,
        accept: &[&str],
        patience: Patience,
    ) -> Result<reqwest::Response, PullError> {
        let url = format!("{}/{}/{path}", self.base, self.reference.repository());
        let send = |auth: Option<String>| {
            let mut req = self.http.get(&url);
            for (name, value) in &self.headers {
                req = req.header(name.as_str(), value.as_str());
            }
            if !accept.is_empty() {
                req = req.header(reqwest::header::ACCEPT, accept.join(", "));
            }
            if let Some(auth) = auth {
                req = req.header(reqwest::header::AUTHORIZATION, auth);
            }
            self.answered(req.send(), patience)
        };
        let cached = self.cached_auth();
        let resp = send(cached.clone()).await?;
        if resp.status() != reqwest::StatusCode::UNAUTHORIZED {
            return Ok(resp);
        }
        let challenge = resp
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let auth = self.answer(&challenge, patience).await?;
        let resp = send(Some(auth)).await?;
        if resp.status() == reqwest::StatusCode::UNAUTHORIZED {
            return Err(PullError::Unauthorized {
                reference: self.reference(),
                detail: format!("401 Unauthorized at {url}"),
            });
        }
        Ok(resp)
    }

    /// A request's response, within the host's response timeout (a
    /// mirror's), so that a mirror that accepts and never answers is passed
    /// over quickly.
    async fn answered(
        &self,
        sent: impl std::future::Future<Output = Result<reqwest::Response, reqwest::Error>>,
        patience: Patience,
    ) -> Result<reqwest::Response, PullError> {
        let limit = self
            .response_timeout
            .filter(|_| patience == Patience::Quick);
        let result = match limit {
            None => sent.await,
            Some(limit) => match tokio::time::timeout(limit, sent).await {
                Ok(result) => result,
                Err(_) => {
                    return Err(PullError::Unreachable {
                        reference: self.reference(),
                        registry: self.host.clone(),
                        detail: format!("{} did not answer within {limit:?}", self.shown),
                    });
                }
            },
        };
        result.map_err(|e| self.transport(&e))
    }

    fn cached_auth(&self) -> Option<String> {
        let tokens = self
            .clients
            .tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        tokens.get(&self.token_key()).cloned()
    }

    /// The Authorization value a challenge asks for: basic credentials,
    /// or a bearer token from the challenge's realm.
    async fn answer(&self, challenge: &str, patience: Patience) -> Result<String, PullError> {
        use base64::Engine as _;
        let unauthorized = |detail: String| PullError::Unauthorized {
            reference: self.reference(),
            detail,
        };
        let (scheme, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
        let basic = self.basic.as_ref().map(|(u, p)| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )
        });
        let value = if scheme.eq_ignore_ascii_case("basic") {
            basic.ok_or_else(|| {
                unauthorized(
                    "the registry asks for credentials, and none are configured for it".into(),
                )
            })?
        } else if scheme.eq_ignore_ascii_case("bearer") {
            let params = challenge_params(params);
            let realm = params
                .get("realm")
                .ok_or_else(|| unauthorized(format!("bad challenge {challenge:?}")))?;
            let scope = format!("repository:{}:pull", self.reference.repository());
            let mut query = vec![("scope", scope.as_str())];
            if let Some(service) = params.get("service") {
                query.push(("service", service));
            }
            let mut req = self.http.get(realm).query(&query);
            if let Some(basic) = basic.filter(|_| self.may_send_credentials_to(realm)) {
                req = req.header(reqwest::header::AUTHORIZATION, basic);
            }
            let resp = self.answered(req.send(), patience).await?;
            if !resp.status().is_success() {
                return Err(unauthorized(format!(
                    "token server {realm} answered {}",
                    resp.status()
                )));
            }
            let body: serde_json::Value = resp.json().await.map_err(|e| self.transport(&e))?;
            let token = body
                .get("token")
                .or_else(|| body.get("access_token"))
                .and_then(|t| t.as_str())
                .ok_or_else(|| unauthorized(format!("token server {realm} sent no token")))?;
            format!("Bearer {token}")
        } else {
            return Err(unauthorized(format!(
                "unsupported auth challenge {challenge:?}"
            )));
        };
        let mut tokens = self
            .clients
            .tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        tokens.insert(self.token_key(), value.clone());
        Ok(value)
    }

    /// Whether this host's credentials may go to its token server: over
    /// TLS (Docker Hub's is another host), or to this host itself. A mirror
    /// on plain HTTP cannot send its credential elsewhere in the clear.
    fn may_send_credentials_to(&self, realm: &str) -> bool {
        let Ok(url) = reqwest::Url::parse(realm) else {
            return false;
        };
        let own = self
            .host
            .rsplit_once(':')
            .map_or(self.host.as_str(), |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']');
        url.scheme() == "https"
            || url
                .host_str()
                .map(|h| h.trim_start_matches('[').trim_end_matches(']'))
                == Some(own)
    }

    fn status_error(&self, status: reqwest::StatusCode, what: &str) -> PullError {
        match status.as_u16() {
            404 => PullError::NotFound {
                reference: self.reference(),
            },
            _ => PullError::Other {
                reference: self.reference(),
                detail: format!(
                    "fetching {what} from {}: unexpected status {status}",
                    self.shown
                ),
            },
        }
    }

    /// The manifest at the reference's tag or digest (or at `digest`),
    /// checked against the digest it was asked by, and its digest.
    pub(crate) async fn manifest(
        &self,
        digest: Option<&str>,
        patience: Patience,
    ) -> Result<(Vec<u8>, String), PullError> {
        let at = digest
            .or(self.reference.digest())
            .or(self.reference.tag())
            .unwrap_or("latest")
            .to_string();
        let resp = self
            .get(&format!("manifests/{at}"), ACCEPTED, patience)
            .await?;
        if !resp.status().is_success() {
            return Err(self.status_error(resp.status(), "the manifest"));
        }
        let bytes = resp.bytes().await.map_err(|e| self.transport(&e))?.to_vec();
        let actual = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
        if at.starts_with("sha256:") && at != actual {
            return Err(PullError::DigestMismatch {
                reference: self.reference(),
                expected: at,
                actual,
            });
        }
        Ok((bytes, actual))
    }

    /// Streams the blob `digest` into the file `out`, checking its digest.
    pub(crate) async fn blob(
        &self,
        digest: &str,
        out: &Path,
        patience: Patience,
    ) -> Result<(), PullError> {
        let resp = self.get(&format!("blobs/{digest}"), &[], patience).await?;
        if !resp.status().is_success() {
            return Err(self.status_error(resp.status(), &format!("blob {digest}")));
        }
        let disk = |e: std::io::Error| PullError::Other {
            reference: self.reference(),
            detail: format!("cannot write {}: {e}", out.display()),
        };
        let mut file = tokio::fs::File::create(out).await.map_err(disk)?;
        let mut hash = Sha256::new();
        let mut body = resp.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| self.transport(&e))?;
            hash.update(&chunk);
            file.write_all(&chunk).await.map_err(disk)?;
        }
        file.sync_all().await.map_err(disk)?;
        let actual = format!("sha256:{}", hex::encode(hash.finalize()));
        if actual != digest {
            return Err(PullError::DigestMismatch {
                reference: self.reference(),
                expected: digest.to_string(),
                actual,
            });
        }
        Ok(())
    }
}

/// `realm="…",service="…"` as a map.
fn challenge_params(params: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut rest = params.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let (value, tail) = match after.strip_prefix('"') {
            Some(quoted) => match quoted.split_once('"') {
                Some((v, t)) => (v, t),
                None => (quoted, ""),
            },
            None => after.split_once(',').unwrap_or((after, "")),
        };
        out.insert(key, value.to_string());
        rest = tail.trim_start_matches(',').trim();
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn bearer_challenges_parse() {
        let p = challenge_params(
            r#"realm="https://auth.example/token",service="reg.example",scope="repository:a/b:pull""#,
        );
        assert_eq!(
            p.get("realm").map(String::as_str),
            Some("https://auth.example/token")
        );
        assert_eq!(p.get("service").map(String::as_str), Some("reg.example"));
        assert_eq!(
            p.get("scope").map(String::as_str),
            Some("repository:a/b:pull")
        );
    }
}
