//! The registry side of a pull: the OCI distribution API's two reads
//! (manifests, blobs) with its token and basic auth, over plain HTTP for
//! loopback and `insecure_registries`, else TLS, trusting the system's roots
//! and the registry's CAs in Docker's `certs.d` directory.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use sha2::{Digest as _, Sha256};
use tokio::io::AsyncWriteExt as _;

use crate::auth::{self, RegistryAuth};
use crate::error::{PullError, error_chain};
use crate::manifest::ACCEPTED;
use crate::reference::Reference;

/// Docker's directory of per-registry TLS files.
pub(crate) const DOCKER_CERTS_DIR: &str = "/etc/docker/certs.d";

/// The HTTP clients and the registries' tokens, shared by a store's pulls.
#[derive(Clone)]
pub(crate) struct Clients {
    insecure: Arc<Vec<String>>,
    certs_dir: Arc<PathBuf>,
    /// For registries with no CA of their own: the system's roots.
    http: reqwest::Client,
    /// For registries with CAs in `certs_dir`, by registry and CA bytes.
    with_ca: Arc<Mutex<HashMap<CaKey, reqwest::Client>>>,
    /// Bearer tokens by `registry/repository`.
    tokens: Arc<Mutex<HashMap<String, String>>>,
}

/// A registry and the bytes of its CA files.
type CaKey = (String, Vec<u8>);

/// One image's registry, with the credentials for it.
#[derive(Clone)]
pub(crate) struct Remote {
    clients: Clients,
    http: reqwest::Client,
    base: String,
    reference: Reference,
    basic: Option<(String, String)>,
}

/// Whether Docker would reach `registry` over plain HTTP: a loopback
/// address or `localhost`.
pub(crate) fn is_loopback(registry: &str) -> bool {
    let host = match registry.rsplit_once(':') {
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => registry,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn client_builder() -> reqwest::ClientBuilder {
    // reqwest's rustls takes the process-wide provider. `mesopod` installs
    // ring first thing; a program (or test) that did not gets ring here
    // instead of reqwest's panic. Err means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .read_timeout(std::time::Duration::from_secs(60))
        .user_agent(concat!("mesopod/", env!("CARGO_PKG_VERSION")))
}

/// The PEM bytes of Docker's CA files for `registry`: every `*.crt` in
/// `<certs_dir>/<registry>/`, in name order; `None` without that directory.
fn registry_cas(certs_dir: &Path, registry: &str) -> Result<Option<Vec<u8>>, String> {
    let dir = certs_dir.join(registry);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", dir.display())),
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "crt"))
        .collect();
    files.sort();
    let mut pem = Vec::new();
    for file in files {
        let bytes =
            std::fs::read(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        pem.extend_from_slice(&bytes);
        pem.push(b'\n');
    }
    Ok((!pem.is_empty()).then_some(pem))
}

/// containerd's words for a certificate rustls refused, from an error chain.
fn x509_words(chain: &str) -> Option<String> {
    if !chain.contains("invalid peer certificate") {
        return None;
    }
    let what = if chain.contains("UnknownIssuer") {
        "x509: certificate signed by unknown authority".to_string()
    } else if chain.contains("Expired") || chain.contains("NotValidYet") {
        "x509: certificate has expired or is not yet valid".to_string()
    } else if chain.contains("NotValidForName") {
        "x509: certificate is not valid for the registry's name".to_string()
    } else {
        format!("x509: {chain}")
    };
    Some(format!("tls: failed to verify certificate: {what}"))
}

impl Clients {
    pub(crate) fn new(insecure: Vec<String>, certs_dir: PathBuf) -> Result<Self, reqwest::Error> {
        Ok(Self {
            insecure: Arc::new(insecure),
            certs_dir: Arc::new(certs_dir),
            http: client_builder().build()?,
            with_ca: Arc::default(),
            tokens: Arc::default(),
        })
    }

    /// The client for a registry whose CAs are `pem`: the system's roots
    /// and these.
    fn client_with_cas(&self, registry: &str, pem: Vec<u8>) -> Result<reqwest::Client, String> {
        let key = (registry.to_string(), pem);
        let mut cached = self.with_ca.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = cached.get(&key) {
            return Ok(client.clone());
        }
        let shown = self.certs_dir.join(registry);
        let certs = reqwest::Certificate::from_pem_bundle(&key.1)
            .map_err(|e| format!("{}: not PEM certificates: {e}", shown.display()))?;
        if certs.is_empty() {
            return Err(format!(
                "{}: no certificate in its *.crt files",
                shown.display()
            ));
        }
        let client = certs
            .into_iter()
            .fold(
                client_builder(),
                reqwest::ClientBuilder::add_root_certificate,
            )
            .build()
            .map_err(|e| format!("{}: {}", shown.display(), error_chain(&e)))?;
        cached.insert(key, client.clone());
        Ok(client)
    }

    /// The registry of `reference`, with the first of `creds` for it.
    pub(crate) fn remote(
        &self,
        reference: &Reference,
        creds: &[RegistryAuth],
    ) -> Result<Remote, PullError> {
        let registry = reference.registry();
        let other = |detail: String| PullError::Other {
            reference: reference.to_string(),
            detail,
        };
        let cas = registry_cas(&self.certs_dir, registry).map_err(other)?;
        // Docker's rule, with its certs.d: a loopback registry speaks plain
        // HTTP unless a CA directory says it serves TLS.
        let plain =
            (is_loopback(registry) && cas.is_none()) || self.insecure.iter().any(|r| r == registry);
        let http = match cas {
            Some(pem) if !plain => self.client_with_cas(registry, pem).map_err(other)?,
            _ => self.http.clone(),
        };
        // Docker Hub's API lives on another host than its name.
        let host = if registry == crate::reference::DOCKER_HUB {
            "registry-1.docker.io"
        } else {
            registry
        };
        Ok(Remote {
            clients: self.clone(),
            http,
            base: format!("{}://{host}", if plain { "http" } else { "https" }),
            reference: reference.clone(),
            basic: auth::for_registry(creds, registry).map(RegistryAuth::user_password),
        })
    }
}

impl Remote {
    pub(crate) fn reference(&self) -> String {
        self.reference.to_string()
    }

    fn token_key(&self) -> String {
        self.reference.name()
    }

    fn transport(&self, e: &reqwest::Error) -> PullError {
        let chain = error_chain(e);
        if let Some(x509) = x509_words(&chain) {
            return PullError::Other {
                reference: self.reference(),
                detail: format!(
                    "failed to resolve reference \"{}\": failed to do request: {}: {x509}",
                    self.reference(),
                    self.base
                ),
            };
        }
        if e.is_connect() || e.is_timeout() {
            PullError::Unreachable {
                reference: self.reference(),
                registry: self.reference.registry().to_string(),
                detail: chain.clone(),
            }
        } else {
            PullError::Other {
                reference: self.reference(),
                detail: chain.clone(),
            }
        }
    }

    /// GETs `path` under `/v2/<repository>/`, answering one auth challenge.
    async fn get(&self, path: &str, accept: &[&str]) -> Result<reqwest::Response, PullError> {
        let url = format!("{}/v2/{}/{path}", self.base, self.reference.repository());
        let send = |auth: Option<String>| {
            let mut req = self.http.get(&url);
            if !accept.is_empty() {
                req = req.header(reqwest::header::ACCEPT, accept.join(", "));
            }
            if let Some(auth) = auth {
                req = req.header(reqwest::header::AUTHORIZATION, auth);
            }
            req.send()
        };
        let cached = self.cached_auth();
        let resp = send(cached.clone()).await.map_err(|e| self.transport(&e))?;
        if resp.status() != reqwest::StatusCode::UNAUTHORIZED {
            return Ok(resp);
        }
        let challenge = resp
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let auth = self.answer(&challenge).await?;
        let resp = send(Some(auth)).await.map_err(|e| self.transport(&e))?;
        if resp.status() == reqwest::StatusCode::UNAUTHORIZED {
            return Err(PullError::Unauthorized {
                reference: self.reference(),
                detail: format!("401 Unauthorized at {url}"),
            });
        }
        Ok(resp)
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
    async fn answer(&self, challenge: &str) -> Result<String, PullError> {
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
            if let Some(basic) = basic {
                req = req.header(reqwest::header::AUTHORIZATION, basic);
            }
            let resp = req.send().await.map_err(|e| self.transport(&e))?;
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

    fn status_error(&self, status: reqwest::StatusCode, what: &str) -> PullError {
        match status.as_u16() {
            404 => PullError::NotFound {
                reference: self.reference(),
            },
            _ => PullError::Other {
                reference: self.reference(),
                detail: format!("fetching {what}: unexpected status {status}"),
            },
        }
    }

    /// The manifest at the reference's tag or digest (or at `digest`),
    /// checked against the digest it was asked by, and its digest.
    pub(crate) async fn manifest(
        &self,
        digest: Option<&str>,
    ) -> Result<(Vec<u8>, String), PullError> {
        let at = digest
            .or(self.reference.digest())
            .or(self.reference.tag())
            .unwrap_or("latest")
            .to_string();
        let resp = self.get(&format!("manifests/{at}"), ACCEPTED).await?;
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
    pub(crate) async fn blob(&self, digest: &str, out: &Path) -> Result<(), PullError> {
        let resp = self.get(&format!("blobs/{digest}"), &[]).await?;
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
    fn loopback_registries_are_plain_http() {
        assert!(is_loopback("127.0.0.1:5000"));
        assert!(is_loopback("127.1.2.3"));
        assert!(is_loopback("localhost:5000"));
        assert!(is_loopback("[::1]:5000"));
        assert!(!is_loopback("registry.example:5000"));
        assert!(!is_loopback("10.0.0.1:5000"));
        assert!(!is_loopback("docker.io"));
    }

    #[test]
    fn a_registry_with_docker_ca_files_speaks_tls_even_on_loopback() {
        testkit::init_crypto();
        let certs = tempfile::tempdir().unwrap();
        let clients = Clients::new(vec!["10.0.0.9:5000".into()], certs.path().into()).unwrap();
        let base = |image: &str| {
            let reference = Reference::parse(image).unwrap();
            clients.remote(&reference, &[]).unwrap().base
        };
        assert_eq!(base("127.0.0.1:5000/a"), "http://127.0.0.1:5000");
        assert_eq!(
            base("registry.example:5000/a"),
            "https://registry.example:5000"
        );
        assert_eq!(
            base("10.0.0.9:5000/a"),
            "http://10.0.0.9:5000",
            "--insecure-registry"
        );
        assert_eq!(base("busybox"), "https://registry-1.docker.io");
        let dir = certs.path().join("127.0.0.1:5000");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("ca.crt"), "not a certificate").unwrap();
        let reference = Reference::parse("127.0.0.1:5000/a").unwrap();
        let bad = clients.remote(&reference, &[]).err().unwrap();
        assert!(bad.to_string().contains("127.0.0.1:5000"), "{bad}");
        std::fs::write(
            dir.join("ca.crt"),
            include_str!("../../tests/tests/fixtures/tls/ca.pem"),
        )
        .unwrap();
        assert_eq!(base("127.0.0.1:5000/a"), "https://127.0.0.1:5000");
    }

    #[test]
    fn refused_certificates_read_as_containerd_says() {
        assert_eq!(
            x509_words("error sending request: client error (Connect): invalid peer certificate: UnknownIssuer")
                .as_deref(),
            Some("tls: failed to verify certificate: x509: certificate signed by unknown authority")
        );
        assert_eq!(x509_words("connection refused"), None);
    }

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
