#![allow(clippy::unwrap_used)]

//! The etcd store's own channel against a real etcd (skipped when etcd is not installed,
//! failed under `CI=true`): TLS with etcd's client-certificate auth, the flags that go
//! with it, and failover past an endpoint that does not answer.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use serde_json::json;

use super::super::{Precondition, Store, StoreError, WriteOp};
use super::{EtcdConfig, EtcdStore};

/// A CA, etcd's serving certificate for 127.0.0.1 and a client certificate, as PEM files.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, pem: String| std::fs::write(dir.path().join(name), pem).unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca, ca_key);
        write("ca.pem", ca_cert.pem());
        let leaf = |sans: Vec<String>, usage: ExtendedKeyUsagePurpose, name: &str| {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(sans).unwrap();
            params.extended_key_usages = vec![usage];
            let cert = params.signed_by(&key, &issuer).unwrap();
            write(&format!("{name}.pem"), cert.pem());
            write(&format!("{name}-key.pem"), key.serialize_pem());
        };
        leaf(
            vec!["127.0.0.1".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
            "etcd",
        );
        leaf(Vec::new(), ExtendedKeyUsagePurpose::ClientAuth, "client");
        Self { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn etcd(&self) -> testkit::etcd::Tls {
        testkit::etcd::Tls {
            cert: self.path("etcd.pem"),
            key: self.path("etcd-key.pem"),
            client_ca: self.path("ca.pem"),
        }
    }

    fn config(&self, url: &str, client_cert: bool) -> EtcdConfig {
        let mut config = EtcdConfig::new(vec![url.to_string()]);
        config.ca_file = Some(self.path("ca.pem"));
        if client_cert {
            config.cert_file = Some(self.path("client.pem"));
            config.key_file = Some(self.path("client-key.pem"));
        }
        config
    }
}

fn put(key: &str) -> WriteOp {
    WriteOp::Put {
        key: key.into(),
        object: json!({"metadata": {"name": key}}),
        precondition: Precondition::Absent,
    }
}

fn storage_error(result: Result<EtcdStore, StoreError>) -> String {
    match result {
        Err(StoreError::Storage(why)) => why,
        Err(other) => panic!("expected a storage error, got {other:?}"),
        Ok(_) => panic!("the store connected"),
    }
}

#[tokio::test]
async fn over_tls_with_a_client_certificate_the_store_reads_and_writes() {
    let pki = Pki::new();
    let Some(etcd) = testkit::etcd::Etcd::start_tls("etcd over TLS", &pki.etcd()).await else {
        return;
    };
    assert!(etcd.url.starts_with("https://"));
    let s = EtcdStore::connect(pki.config(&etcd.url, true), None)
        .await
        .unwrap();
    let changes = s.commit(vec![put("configmaps/a/x")]).await.unwrap();
    assert_eq!(changes.len(), 1);
    assert_eq!(
        s.get("configmaps/a/x").unwrap()["metadata"]["name"],
        "configmaps/a/x"
    );
    // A second process over its own TLS connection sees the write.
    let other = EtcdStore::connect(pki.config(&etcd.url, true), None)
        .await
        .unwrap();
    assert_eq!(other.list("configmaps/a/").0.len(), 1);
    // And a create of the same key conflicts there, as a compare-and-swap does.
    assert_eq!(
        other.commit(vec![put("configmaps/a/x")]).await.unwrap_err(),
        StoreError::AlreadyExists("configmaps/a/x".into())
    );
}

#[tokio::test]
async fn etcd_with_client_cert_auth_refuses_a_store_without_a_certificate() {
    let pki = Pki::new();
    let Some(etcd) = testkit::etcd::Etcd::start_tls("etcd TLS without cert", &pki.etcd()).await
    else {
        return;
    };
    let why = storage_error(EtcdStore::connect(pki.config(&etcd.url, false), None).await);
    // Under TLS 1.3 etcd's alert can come after the client's handshake is done, so the
    // request sees either the alert or the connection it closed.
    assert!(
        why.starts_with("cannot read etcd at https://127.0.0.1:"),
        "{why}"
    );
}

#[tokio::test]
async fn a_store_that_does_not_trust_etcds_ca_refuses_the_connection() {
    let (pki, stranger) = (Pki::new(), Pki::new());
    let Some(etcd) = testkit::etcd::Etcd::start_tls("etcd TLS unknown CA", &pki.etcd()).await
    else {
        return;
    };
    // A client certificate etcd accepts, but the CA of another PKI to check etcd by.
    let mut config = pki.config(&etcd.url, true);
    config.ca_file = Some(stranger.path("ca.pem"));
    storage_error(EtcdStore::connect(config, None).await);
}

#[tokio::test]
async fn the_store_fails_over_past_an_endpoint_that_does_not_answer() {
    let Some(etcd) = testkit::etcd::Etcd::start("etcd failover").await else {
        return;
    };
    // A port nothing listens on once the listener is gone.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let s = EtcdStore::connect(EtcdConfig::new(vec![dead, etcd.url.clone()]), None)
        .await
        .unwrap();
    s.commit(vec![put("configmaps/f/x")]).await.unwrap();
    assert!(s.get("configmaps/f/x").is_some());
}

#[tokio::test]
async fn tls_flags_are_checked_before_anything_is_dialled() {
    let pki = Pki::new();
    let connect = async |config: EtcdConfig| storage_error(EtcdStore::connect(config, None).await);
    // A CA for a plain-HTTP etcd would be ignored: refused instead.
    let why = connect(pki.config("http://127.0.0.1:1", false)).await;
    assert!(why.contains("need https://"), "{why}");
    // So would a key alone.
    let mut config = EtcdConfig::new(vec!["http://127.0.0.1:1".into()]);
    config.key_file = Some(pki.path("client-key.pem"));
    let why = connect(config).await;
    assert!(why.contains("need https://"), "{why}");
    // No URL at all.
    let why = connect(EtcdConfig::new(Vec::new())).await;
    assert!(why.contains("--etcd-servers is empty"), "{why}");
    // https without the CA to verify etcd by.
    let why = connect(EtcdConfig::new(vec!["https://127.0.0.1:1".into()])).await;
    assert!(why.contains("--etcd-cafile"), "{why}");
    // A certificate without its key.
    let mut config = pki.config("https://127.0.0.1:1", true);
    config.key_file = None;
    let why = connect(config).await;
    assert!(why.contains("go together"), "{why}");
    // A CA file that is not there names the flag and the file.
    let mut config = pki.config("https://127.0.0.1:1", false);
    config.ca_file = Some(Path::new("/nonexistent/ca.pem").to_path_buf());
    let why = connect(config).await;
    assert!(why.contains("--etcd-cafile /nonexistent/ca.pem"), "{why}");
    let why = connect(EtcdConfig::new(vec!["unix:///run/etcd.sock".into()])).await;
    assert!(why.contains("not an http:// or https:// URL"), "{why}");
}
