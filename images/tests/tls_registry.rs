//! Pulls over TLS: a registry serving HTTPS with a test CA's certificate
//! (Debian's docker-registry), trusted through Docker's
//! `certs.d/HOST:PORT/ca.crt`; a CA directory holding another CA fails the
//! pull with ErrImagePull and containerd's x509 words.

use std::path::{Path, PathBuf};

use images::testing::{self, Registry, TlsFiles};
use images::{ImageStore, PullPolicy, StoreConfig};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/tests/fixtures/tls")
        .join(name)
}

/// A store under `dir` whose certs.d trusts `ca` for `registry`.
fn store_trusting(dir: &Path, registry: &str, ca: &str) -> ImageStore {
    let certs = dir.join("certs.d");
    std::fs::create_dir_all(certs.join(registry)).expect("certs.d");
    std::fs::copy(fixture(ca), certs.join(registry).join("ca.crt")).expect("ca.crt");
    let mut config = StoreConfig::new(dir.join("images"));
    config.certs_dir = certs;
    ImageStore::open(config).expect("store opens")
}

#[tokio::test]
async fn a_tls_registry_is_pulled_from_with_its_ca_trusted_and_refused_without() {
    testkit::init_crypto();
    let tls = TlsFiles {
        cert: fixture("server.pem"),
        key: fixture("server.key"),
        ca: fixture("ca.pem"),
    };
    let Some(registry) = Registry::start_tls_or_skip("tls_registry", tls).await else {
        return;
    };
    let image = testing::busybox_image();
    let reference = registry.push("test/busybox", "v1", &image).await;

    let trusted = tempfile::tempdir().expect("tempdir");
    let store = store_trusting(trusted.path(), &registry.host(), "ca.pem");
    let pulled = store
        .ensure(&reference, PullPolicy::Always, &[])
        .await
        .expect("pull over TLS with the registry's CA trusted");
    assert_eq!(
        pulled.image_id,
        format!("{}/test/busybox@{}", registry.host(), image.digest())
    );

    let untrusted = tempfile::tempdir().expect("tempdir");
    let store = store_trusting(untrusted.path(), &registry.host(), "other-ca.pem");
    let err = store
        .ensure(&reference, PullPolicy::Always, &[])
        .await
        .expect_err("a certificate from an untrusted CA");
    assert_eq!(err.reason(), "ErrImagePull");
    let message = err.to_string();
    assert!(
        message.contains("x509: certificate signed by unknown authority"),
        "{message}"
    );
    assert!(
        message.contains(&format!("https://{}", registry.host())),
        "{message}"
    );
}
