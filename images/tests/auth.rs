//! Credentials: a registry that asks for basic auth is pulled from with a
//! Docker config.json (`--registry-config`) or with the caller's
//! credentials (imagePullSecrets), and refused without.

use images::testing::{self, AUTH_PASSWORD, AUTH_USER, Registry};
use images::{ImageStore, PullPolicy, RegistryAuth, StoreConfig, StoreError};

#[tokio::test]
async fn credentials_from_a_docker_config_or_the_caller() {
    if !testing::require(
        "registry_auth",
        std::path::Path::new(testing::REGISTRY_BIN).exists(),
        "docker-registry (.ci/install-registry.sh)",
    ) {
        return;
    }
    let registry = Registry::start_with_auth().await;
    let reference = registry
        .push("private/app", "v1", &testing::busybox_image())
        .await;
    let dir = tempfile::tempdir().expect("tempdir");

    testkit::init_crypto();

    let anonymous = ImageStore::open(StoreConfig::new(dir.path().join("a"))).expect("store");
    let err = anonymous
        .ensure(&reference, PullPolicy::IfNotPresent, &[])
        .await
        .expect_err("no creds");
    assert_eq!(err.reason(), "ErrImagePull");
    assert!(err.to_string().contains("failed to authorize"), "{err}");

    let wrong = [RegistryAuth::basic(&registry.host(), AUTH_USER, "wrong")];
    let err = anonymous
        .ensure(&reference, PullPolicy::IfNotPresent, &wrong)
        .await
        .expect_err("bad creds");
    assert!(err.to_string().contains("401 Unauthorized"), "{err}");
    assert!(
        !err.to_string().contains("wrong"),
        "no password in messages: {err}"
    );

    let right = [RegistryAuth::basic(
        &registry.host(),
        AUTH_USER,
        AUTH_PASSWORD,
    )];
    anonymous
        .ensure(&reference, PullPolicy::IfNotPresent, &right)
        .await
        .expect("the caller's creds");

    use base64::Engine as _;
    let auth =
        base64::engine::general_purpose::STANDARD.encode(format!("{AUTH_USER}:{AUTH_PASSWORD}"));
    let config_file = dir.path().join("config.json");
    std::fs::write(
        &config_file,
        format!(
            r#"{{"auths":{{"http://{}":{{"auth":"{auth}"}}}}}}"#,
            registry.host()
        ),
    )
    .expect("write");
    let mut config = StoreConfig::new(dir.path().join("b"));
    config.registry_config = Some(config_file.clone());
    testkit::init_crypto();
    let store = ImageStore::open(config).expect("store");
    let image = store
        .ensure(&reference, PullPolicy::Always, &[])
        .await
        .expect("config.json creds");
    assert!(image.layers[0].join(testing::MARKER_PATH).exists());

    std::fs::write(&config_file, b"{not json").expect("write");
    let mut config = StoreConfig::new(dir.path().join("c"));
    config.registry_config = Some(config_file);
    testkit::init_crypto();
    let err = ImageStore::open(config).err().expect("a bad config.json");
    assert!(matches!(err, StoreError::RegistryConfig { .. }), "{err}");
}
