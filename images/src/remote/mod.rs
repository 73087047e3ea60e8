//! The registry side of a pull: the OCI distribution API's two reads
//! (manifests, blobs), from the hosts [`RegistryHosts`] lists for the
//! image's registry (its mirrors first, the registry itself last).
//!
//! - A tag is resolved on the first host with the `resolve` capability
//!   that answers; content by digest comes from that host first, then from
//!   the other `pull` hosts in order.
//! - A host that is down, answers 5xx or 404, refuses the credentials, or
//!   (for a mirror) does not answer within [`MIRROR_RESPONSE_TIMEOUT`] is
//!   passed over for the next. The host that resolved the tag has shown it
//!   is alive: it gets the registry's full timeouts for the content, which
//!   a pull-through cache may take a while to fetch. Content whose digest is wrong is never
//!   passed over: it fails the pull, whoever served it.
//! - Each host gets only its own credentials and its own TLS settings.

mod endpoint;
mod tls;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::auth::{self, RegistryAuth};
use crate::error::{PullError, error_chain};
use crate::hosts::{HostEntry, RegistryHosts, Scheme};
use crate::reference::Reference;
use endpoint::{Endpoint, Patience};

pub(crate) use tls::DOCKER_CERTS_DIR;

/// How long a mirror may take to connect: a mirror that is down must not
/// hold a pull up (dockerd's and containerd's 30 s is for the registry).
const MIRROR_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a mirror may take to answer a request's headers before the
/// next host is asked. With the connect timeout, a mirror that accepts
/// and never answers costs a pull under 2 s.
pub(crate) const MIRROR_RESPONSE_TIMEOUT: Duration = Duration::from_millis(1500);
/// The registry's own connect timeout.
const REGISTRY_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP clients and the hosts' tokens, shared by a store's pulls.
#[derive(Clone)]
pub(crate) struct Clients {
    insecure: Arc<Vec<String>>,
    certs_dir: Arc<PathBuf>,
    hosts: Arc<RegistryHosts>,
    /// By TLS settings and connect timeout.
    http: Arc<Mutex<HashMap<ClientKey, reqwest::Client>>>,
    /// Authorization values by `host/repository`.
    tokens: Arc<Mutex<HashMap<String, String>>>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct ClientKey {
    /// CA certificates trusted beside the system's roots.
    cas: Vec<u8>,
    /// A client certificate and its key.
    identity: Vec<u8>,
    skip_verify: bool,
    connect_timeout: Duration,
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

impl Clients {
    pub(crate) fn new(
        insecure: Vec<String>,
        certs_dir: PathBuf,
        hosts: RegistryHosts,
    ) -> Result<Self, String> {
        let clients = Self {
            insecure: Arc::new(insecure),
            certs_dir: Arc::new(certs_dir),
            hosts: Arc::new(hosts),
            http: Arc::default(),
            tokens: Arc::default(),
        };
        // Fail at open, not at the first pull, if TLS cannot be set up.
        clients
            .client(&ClientKey {
                cas: Vec::new(),
                identity: Vec::new(),
                skip_verify: false,
                connect_timeout: REGISTRY_CONNECT_TIMEOUT,
            })
            .map_err(|(what, e)| format!("{what}: {e}"))?;
        Ok(clients)
    }

    fn client(&self, key: &ClientKey) -> Result<reqwest::Client, (&'static str, String)> {
        let mut cached = self.http.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = cached.get(key) {
            return Ok(client.clone());
        }
        // reqwest's rustls takes the process-wide provider. `mesopod`
        // installs ring first thing; a program (or test) that did not gets
        // ring here instead of reqwest's panic.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(key.connect_timeout)
            .read_timeout(Duration::from_secs(60))
            .user_agent(concat!("mesopod/", env!("CARGO_PKG_VERSION")));
        if !key.cas.is_empty() {
            let certs = reqwest::Certificate::from_pem_bundle(&key.cas)
                .map_err(|e| ("not PEM certificates", error_chain(&e)))?;
            if certs.is_empty() {
                return Err(("no certificate in its CA files", String::new()));
            }
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        if !key.identity.is_empty() {
            let identity = reqwest::Identity::from_pem(&key.identity)
                .map_err(|e| ("not a PEM client certificate and key", error_chain(&e)))?;
            builder = builder.identity(identity);
        }
        if key.skip_verify {
            builder = builder.tls_danger_accept_invalid_certs(true);
        }
        let client = builder
            .build()
            .map_err(|e| ("TLS setup failed", error_chain(&e)))?;
        cached.insert(key.clone(), client.clone());
        Ok(client)
    }

    /// The hosts of `reference`'s registry, each with the first of `creds`
    /// for it.
    pub(crate) fn remote(
        &self,
        reference: &Reference,
        creds: &[RegistryAuth],
    ) -> Result<Remote, PullError> {
        let endpoints = self
            .hosts
            .endpoints(reference.registry())
            .into_iter()
            .map(|host| self.endpoint(reference, host, creds))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Remote {
            reference: reference.clone(),
            endpoints: endpoints.into(),
            first: None,
        })
    }

    fn endpoint(
        &self,
        reference: &Reference,
        host: HostEntry,
        creds: &[RegistryAuth],
    ) -> Result<Endpoint, PullError> {
        let other = |detail: String| PullError::Other {
            reference: reference.to_string(),
            detail,
        };
        let docker_cas = tls::docker_cas(&self.certs_dir, &host.host).map_err(other)?;
        let mut cas = tls::concat(&host.ca).map_err(other)?;
        let has_cas = docker_cas.is_some() || !host.ca.is_empty();
        cas.extend(docker_cas.unwrap_or_default());
        let plain = match host.scheme {
            Some(Scheme::Http) => true,
            Some(Scheme::Https) => false,
            // Docker's rule, with its certs.d: a loopback registry speaks
            // plain HTTP unless a CA directory says it serves TLS.
            None => (is_loopback(&host.host) && !has_cas) || self.insecure.contains(&host.host),
        };
        let mut identity = Vec::new();
        if let Some((cert, key)) = host.client.first() {
            let files: Vec<PathBuf> = std::iter::once(cert.clone()).chain(key.clone()).collect();
            identity = tls::concat(&files).map_err(other)?;
        }
        let key = ClientKey {
            cas: if plain { Vec::new() } else { cas },
            identity: if plain { Vec::new() } else { identity },
            skip_verify: host.skip_verify && !plain,
            connect_timeout: host.dial_timeout.unwrap_or(if host.mirror {
                MIRROR_CONNECT_TIMEOUT
            } else {
                REGISTRY_CONNECT_TIMEOUT
            }),
        };
        let http = self.client(&key).map_err(|(what, e)| {
            other(format!(
                "TLS settings of {}: {what}{}{e}",
                host.shown(),
                if e.is_empty() { "" } else { ": " }
            ))
        })?;
        let origin = format!("{}://{}", if plain { "http" } else { "https" }, host.host);
        Ok(Endpoint {
            clients: self.clone(),
            http,
            base: format!("{origin}{}", host.path),
            shown: origin,
            host: host.host.clone(),
            pull: host.pull,
            resolve: host.resolve,
            elsewhere: host.mirror || host.host != HostEntry::upstream(reference.registry()).host,
            basic: auth::for_registry(creds, &auth::normalise_registry(&host.host))
                .map(RegistryAuth::user_password),
            headers: host.header,
            response_timeout: host.mirror.then_some(MIRROR_RESPONSE_TIMEOUT),
            reference: reference.clone(),
        })
    }
}

/// One image's hosts, in the order they are tried.
#[derive(Clone)]
pub(crate) struct Remote {
    reference: Reference,
    endpoints: Arc<[Endpoint]>,
    /// The host that resolved the tag: asked first for content by digest.
    first: Option<usize>,
}

/// What an operation needs of a host.
#[derive(Clone, Copy)]
enum Need {
    Resolve,
    Pull,
}

impl Remote {
    pub(crate) fn reference(&self) -> String {
        self.reference.to_string()
    }

    /// The hosts that can do `need`, the preferred one first.
    fn order(&self, need: Need) -> Vec<usize> {
        let able = |i: &usize| {
            let e = &self.endpoints[*i];
            match need {
                Need::Resolve => e.resolve,
                Need::Pull => e.pull,
            }
        };
        let first = self.first.filter(able);
        first
            .into_iter()
            .chain((0..self.endpoints.len()).filter(|i| Some(*i) != first && able(i)))
            .collect()
    }

    /// Runs `op` on each host that can do `need` until one succeeds or
    /// fails with what no other host can mend. The error is the first
    /// that is not "not found" (containerd's choice), else "not found".
    async fn each<T, F, Fut>(&self, need: Need, op: F) -> Result<(T, usize), PullError>
    where
        F: Fn(usize, Patience) -> Fut,
        Fut: std::future::Future<Output = Result<T, PullError>>,
    {
        let mut first_error: Option<PullError> = None;
        let mut not_found = None;
        let order = self.order(need);
        if order.is_empty() {
            return Err(PullError::Other {
                reference: self.reference(),
                detail: "no host configured for this registry may serve it".into(),
            });
        }
        for i in order {
            let endpoint = &self.endpoints[i];
            let patience = if Some(i) == self.first {
                Patience::Full
            } else {
                Patience::Quick
            };
            match op(i, patience).await {
                Ok(found) => return Ok((found, i)),
                Err(e) if !passable(&e) => return Err(e),
                Err(e) => {
                    tracing::debug!(
                        image = %self.reference,
                        host = %endpoint.shown,
                        error = %e,
                        "registry host passed over"
                    );
                    match e {
                        PullError::NotFound { .. } => not_found = Some(e),
                        e => {
                            first_error.get_or_insert(e);
                        }
                    }
                }
            }
        }
        Err(first_error
            .or(not_found)
            .unwrap_or_else(|| PullError::NotFound {
                reference: self.reference(),
            }))
    }

    /// The manifest at the reference's tag or digest, its digest, and this
    /// remote preferring the host that served it.
    pub(crate) async fn resolve(&self) -> Result<(Vec<u8>, String, Remote), PullError> {
        let need = if self.reference.digest().is_some() {
            Need::Pull
        } else {
            Need::Resolve
        };
        let ((bytes, digest), i) = self
            .each(need, |i, p| self.endpoints[i].manifest(None, p))
            .await?;
        let mut preferring = self.clone();
        preferring.first = Some(i);
        Ok((bytes, digest, preferring))
    }

    /// The manifest `digest`.
    pub(crate) async fn manifest(&self, digest: &str) -> Result<(Vec<u8>, String), PullError> {
        self.each(Need::Pull, |i, p| {
            self.endpoints[i].manifest(Some(digest), p)
        })
        .await
        .map(|(found, _)| found)
    }

    /// Streams the blob `digest` into the file `out`, checking its digest.
    pub(crate) async fn blob(&self, digest: &str, out: &Path) -> Result<(), PullError> {
        self.each(Need::Pull, |i, p| self.endpoints[i].blob(digest, out, p))
            .await
            .map(|((), _)| ())
    }

    /// The host that served the tag when it is not the registry's own (a
    /// mirror, or a host file's `server`), as `http(s)://host:port`, for
    /// the `Pulled` event.
    pub(crate) fn mirror(&self) -> Option<String> {
        let e = &self.endpoints[self.first?];
        e.elsewhere.then(|| e.shown.clone())
    }
}

/// Whether another host may mend `e`: not for content that is wrong.
fn passable(e: &PullError) -> bool {
    !matches!(
        e,
        PullError::DigestMismatch { .. }
            | PullError::BadManifest { .. }
            | PullError::CorruptLayer { .. }
            | PullError::Platform { .. }
    )
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

    fn clients(certs: &Path, mirrors: &[&str]) -> Clients {
        let mirrors: Vec<String> = mirrors.iter().map(|m| m.to_string()).collect();
        let hosts = RegistryHosts::load(&mirrors, None).unwrap();
        Clients::new(vec!["10.0.0.9:5000".into()], certs.into(), hosts).unwrap()
    }

    fn bases(clients: &Clients, image: &str) -> Vec<String> {
        let reference = Reference::parse(image).unwrap();
        let remote = clients.remote(&reference, &[]).unwrap();
        remote.endpoints.iter().map(|e| e.base.clone()).collect()
    }

    #[test]
    fn a_registry_with_docker_ca_files_speaks_tls_even_on_loopback() {
        testkit::init_crypto();
        let certs = tempfile::tempdir().unwrap();
        let clients = clients(certs.path(), &[]);
        let base = |image: &str| bases(&clients, image).join(" ");
        assert_eq!(base("127.0.0.1:5000/a"), "http://127.0.0.1:5000/v2");
        assert_eq!(
            base("registry.example:5000/a"),
            "https://registry.example:5000/v2"
        );
        assert_eq!(
            base("10.0.0.9:5000/a"),
            "http://10.0.0.9:5000/v2",
            "--insecure-registry"
        );
        assert_eq!(base("busybox"), "https://registry-1.docker.io/v2");
        let dir = certs.path().join("127.0.0.1:5000");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("ca.crt"), "not a certificate").unwrap();
        let reference = Reference::parse("127.0.0.1:5000/a").unwrap();
        let bad = clients.remote(&reference, &[]).err().unwrap();
        assert!(bad.to_string().contains("127.0.0.1:5000"), "{bad}");
        std::fs::write(
            dir.join("ca.crt"),
            include_str!("../../../tests/tests/fixtures/tls/ca.pem"),
        )
        .unwrap();
        assert_eq!(base("127.0.0.1:5000/a"), "https://127.0.0.1:5000/v2");
    }

    #[test]
    fn each_host_gets_only_its_own_credentials() {
        testkit::init_crypto();
        let certs = tempfile::tempdir().unwrap();
        let clients = clients(certs.path(), &["http://127.0.0.1:5001"]);
        let creds = [
            RegistryAuth::basic("docker.io", "hub-user", "hub-pw"),
            RegistryAuth::basic("127.0.0.1:5001", "mirror-user", "mirror-pw"),
        ];
        let reference = Reference::parse("busybox").unwrap();
        let remote = clients.remote(&reference, &creds).unwrap();
        let users: Vec<Option<String>> = remote
            .endpoints
            .iter()
            .map(|e| e.basic.as_ref().map(|(u, _)| u.clone()))
            .collect();
        assert_eq!(users, [Some("mirror-user".into()), Some("hub-user".into())]);
        let hub_only = clients.remote(&reference, &creds[..1]).unwrap();
        assert!(hub_only.endpoints[0].basic.is_none(), "not the hub's");
    }

    #[test]
    fn content_is_asked_of_the_resolving_host_first() {
        testkit::init_crypto();
        let certs = tempfile::tempdir().unwrap();
        let clients = clients(
            certs.path(),
            &["http://127.0.0.1:5001", "http://127.0.0.1:5002"],
        );
        let reference = Reference::parse("busybox").unwrap();
        let mut remote = clients.remote(&reference, &[]).unwrap();
        assert_eq!(remote.order(Need::Pull), [0, 1, 2]);
        remote.first = Some(1);
        assert_eq!(remote.order(Need::Pull), [1, 0, 2]);
        assert_eq!(remote.mirror().as_deref(), Some("http://127.0.0.1:5002"));
        remote.first = Some(2);
        assert_eq!(remote.mirror(), None, "Docker Hub is no mirror");
    }
}
