//! Mirrors, against real registries on loopback (Debian's docker-registry):
//! `--registry-mirror` for Docker Hub and containerd's `hosts.toml`. None of
//! these tests reaches Docker Hub: every pull is served before it would be.

use std::path::Path;
use std::time::Duration;

use images::testing::{self, Registry};
use images::{Fetched, ImageStore, PullError, PullPolicy, RegistryHosts, StoreConfig};

/// A pull that would wait for Docker Hub or a silent mirror's read timeout
/// (60 s) fails the test here instead of hanging it.
const PULL_LIMIT: Duration = Duration::from_secs(20);

fn store(dir: &Path, mirrors: &[String], config_dir: Option<&Path>) -> ImageStore {
    testkit::init_crypto();
    let mut config = StoreConfig::new(dir.join("images"));
    config.hosts = RegistryHosts::load(mirrors, config_dir).expect("hosts load");
    ImageStore::open(config).expect("store opens")
}

async fn pull(
    store: &ImageStore,
    image: &str,
    policy: PullPolicy,
) -> Result<(images::Image, Fetched), PullError> {
    tokio::time::timeout(PULL_LIMIT, store.ensure_fetched(image, policy, &[]))
        .await
        .expect("the pull ends without waiting for an unreachable host")
}

fn url(registry: &Registry) -> String {
    format!("http://{}", registry.host())
}

#[tokio::test]
async fn docker_hub_images_come_from_the_mirror() {
    let Some(mirror) = Registry::start_or_skip("mirror_serves_docker_hub").await else {
        return;
    };
    let image = testing::busybox_image();
    mirror.push("library/busybox", "latest", &image).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path(), &[url(&mirror)], None);

    let (pulled, how) = pull(&store, "busybox", PullPolicy::IfNotPresent)
        .await
        .expect("pulled through the mirror");
    // The image keeps its name: what the pod asked for, and the digest.
    assert_eq!(pulled.reference, "docker.io/library/busybox:latest");
    assert_eq!(
        pulled.image_id,
        format!("docker.io/library/busybox@{}", image.digest())
    );
    assert_eq!(
        how,
        Fetched::Pulled {
            mirror: Some(url(&mirror))
        }
    );

    // Always resolves the tag again, on the mirror, and fetches no layer
    // the store has.
    let layer = image.layer_digest(0);
    assert_eq!(mirror.blob_fetches("library/busybox", &layer), 1);
    let (again, how) = pull(&store, "library/busybox:latest", PullPolicy::Always)
        .await
        .expect("pulled again");
    assert_eq!(again.image_id, pulled.image_id);
    assert!(matches!(how, Fetched::Pulled { .. }), "{how:?}");
    assert_eq!(mirror.blob_fetches("library/busybox", &layer), 1);
}

#[tokio::test]
async fn mirrors_that_are_down_or_silent_are_passed_over_in_order() {
    let Some(good) = Registry::start_or_skip("mirror_fall_through").await else {
        return;
    };
    let image = testing::busybox_image();
    good.push("library/busybox", "latest", &image).await;
    // Down: nothing listens on a port just freed.
    let down = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    // Silent: the kernel completes connections to a listener nobody
    // accepts on, and no answer ever comes.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
    let silent_url = format!("http://{}", silent.local_addr().expect("address"));
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(
        dir.path(),
        &[format!("http://{down}"), silent_url, url(&good)],
        None,
    );

    let started = std::time::Instant::now();
    let (pulled, how) = pull(&store, "busybox:latest", PullPolicy::IfNotPresent)
        .await
        .expect("the third mirror serves it");
    eprintln!(
        "fall-through past a down and a silent mirror took {:?}",
        started.elapsed()
    );
    assert_eq!(
        pulled.image_id,
        format!("docker.io/library/busybox@{}", image.digest())
    );
    assert_eq!(
        how,
        Fetched::Pulled {
            mirror: Some(url(&good))
        }
    );
}

#[tokio::test]
async fn hosts_toml_falls_through_a_mirror_without_the_image_to_the_server() {
    let Some(empty) = Registry::start_or_skip("hosts_toml_server").await else {
        return;
    };
    let upstream = Registry::start().await;
    let image = testing::busybox_image();
    upstream.push("library/busybox", "1.36", &image).await;
    let config = tempfile::tempdir().expect("tempdir");
    let hub = config.path().join("docker.io");
    std::fs::create_dir_all(&hub).expect("dir");
    std::fs::write(
        hub.join("hosts.toml"),
        format!(
            "server = \"{}\"\n\n[host.\"{}\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
            url(&upstream),
            url(&empty)
        ),
    )
    .expect("hosts.toml");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path(), &[], Some(config.path()));

    let (pulled, how) = pull(&store, "busybox:1.36", PullPolicy::IfNotPresent)
        .await
        .expect("the server serves it");
    assert_eq!(
        pulled.image_id,
        format!("docker.io/library/busybox@{}", image.digest())
    );
    assert_eq!(
        how,
        Fetched::Pulled {
            mirror: Some(url(&upstream))
        },
        "the file's server stands in for Docker Hub, and the event says so"
    );
    assert_eq!(
        upstream.blob_fetches("library/busybox", &image.layer_digest(0)),
        1
    );

    // An image nobody has is "not found", not the empty mirror's answer.
    let err = pull(&store, "busybox:nope", PullPolicy::IfNotPresent)
        .await
        .expect_err("nobody has it");
    assert!(matches!(err, PullError::NotFound { .. }), "{err:?}");
}

#[tokio::test]
async fn a_mirror_that_serves_other_bytes_for_a_digest_is_refused() {
    let Some(liar) = Registry::start_or_skip("mirror_wrong_digest").await else {
        return;
    };
    let honest = Registry::start().await;
    let image = testing::busybox_image();
    liar.push("library/busybox", "latest", &image).await;
    honest.push("library/busybox", "latest", &image).await;
    let layer = image.layer_digest(0);
    let hex = &layer[7..];
    let path = liar.storage().join(format!(
        "docker/registry/v2/blobs/sha256/{}/{hex}/data",
        &hex[..2]
    ));
    let mut bytes = std::fs::read(&path).expect("the stored layer");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&path, &bytes).expect("tamper");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path(), &[url(&liar), url(&honest)], None);

    let err = pull(&store, "busybox", PullPolicy::IfNotPresent)
        .await
        .expect_err("the wrong bytes are refused");
    assert_eq!(err.reason(), "ErrImagePull");
    assert!(
        matches!(&err, PullError::DigestMismatch { expected, .. } if *expected == layer),
        "{err:?}"
    );
    // Refused, not mended from another host behind the user's back.
    assert_eq!(honest.blob_fetches("library/busybox", &layer), 0);
}

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/tests/fixtures/tls")
        .join(name)
}

#[tokio::test]
async fn a_tls_mirror_is_trusted_through_its_hosts_toml_ca() {
    testkit::init_crypto();
    let tls = testing::TlsFiles {
        cert: fixture("server.pem"),
        key: fixture("server.key"),
        ca: fixture("ca.pem"),
    };
    let Some(mirror) = Registry::start_tls_or_skip("tls_mirror", tls).await else {
        return;
    };
    let image = testing::busybox_image();
    mirror.push("library/busybox", "latest", &image).await;
    let config = tempfile::tempdir().expect("tempdir");
    let hub = config.path().join("docker.io");
    std::fs::create_dir_all(&hub).expect("dir");
    std::fs::copy(fixture("ca.pem"), hub.join("mirror-ca.pem")).expect("ca");
    std::fs::write(
        hub.join("hosts.toml"),
        format!(
            "[host.\"https://{}\"]\n  ca = \"mirror-ca.pem\"\n",
            mirror.host()
        ),
    )
    .expect("hosts.toml");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path(), &[], Some(config.path()));
    let (_, how) = pull(&store, "busybox", PullPolicy::IfNotPresent)
        .await
        .expect("pulled over TLS with the file's CA");
    assert_eq!(
        how,
        Fetched::Pulled {
            mirror: Some(format!("https://{}", mirror.host()))
        }
    );
}

#[tokio::test]
async fn a_mirror_gets_its_own_credentials_and_never_docker_hubs() {
    let Some(mirror) = Registry::start_or_skip("mirror_credentials").await else {
        return;
    };
    let mut private = Registry::start_with_auth().await;
    let image = testing::busybox_image();
    private.push("library/busybox", "latest", &image).await;
    let dir = tempfile::tempdir().expect("tempdir");
    // The private mirror first, then a server without the image (in place
    // of Docker Hub, which no test reaches): with only Docker Hub's
    // credentials, the private mirror refuses them and the pull falls
    // through to the server, which has nothing.
    let config = tempfile::tempdir().expect("tempdir");
    let hub_dir = config.path().join("docker.io");
    std::fs::create_dir_all(&hub_dir).expect("dir");
    std::fs::write(
        hub_dir.join("hosts.toml"),
        format!("server = \"{}\"\n", url(&mirror)),
    )
    .expect("hosts.toml");
    let store = store(dir.path(), &[url(&private)], Some(config.path()));
    let hub = [images::RegistryAuth::basic(
        "docker.io",
        testing::AUTH_USER,
        testing::AUTH_PASSWORD,
    )];
    let err = tokio::time::timeout(
        PULL_LIMIT,
        store.ensure_fetched("busybox", PullPolicy::IfNotPresent, &hub),
    )
    .await
    .expect("ends")
    .expect_err("Docker Hub's credentials are not the mirror's");
    // The first failure that is not "not found" is the one shown.
    assert!(matches!(err, PullError::Unauthorized { .. }), "{err:?}");

    let own = [images::RegistryAuth::basic(
        &private.host(),
        testing::AUTH_USER,
        testing::AUTH_PASSWORD,
    )];
    let (_, how) = tokio::time::timeout(
        PULL_LIMIT,
        store.ensure_fetched("busybox", PullPolicy::IfNotPresent, &own),
    )
    .await
    .expect("ends")
    .expect("the mirror's own credentials");
    assert_eq!(
        how,
        Fetched::Pulled {
            mirror: Some(url(&private))
        }
    );
    private.stop();
}
