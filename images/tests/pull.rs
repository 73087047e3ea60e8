//! Pulls from a real registry on loopback (Debian's docker-registry):
//! tags, digests, manifest lists, the cache, pull policies and bad input.

use std::collections::HashSet;

use images::testing::{self, Registry, Spec};
use images::{ImageStore, PullPolicy, StoreConfig, rootfs};

fn store(dir: &std::path::Path) -> ImageStore {
    testkit::init_crypto();
    ImageStore::open(StoreConfig::new(dir.join("images"))).expect("store opens")
}

#[tokio::test]
async fn pull_by_tag_and_by_digest_then_run_from_the_rootfs() {
    let Some(registry) = Registry::start_or_skip("pull_by_tag_and_by_digest").await else {
        return;
    };
    let image = testing::busybox_image();
    let reference = registry.push("test/busybox", "v1", &image).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path());

    let pulled = store
        .ensure(&reference, PullPolicy::IfNotPresent, &[])
        .await
        .expect("pull by tag");
    assert_eq!(
        pulled.image_id,
        format!("{}/test/busybox@{}", registry.host(), image.digest())
    );
    assert_eq!(pulled.reference, reference);
    assert_eq!(pulled.config.cmd, Some(vec!["sh".to_string()]));
    assert_eq!(pulled.config.env, vec!["PATH=/bin".to_string()]);
    assert_eq!(pulled.layers.len(), 1);
    let marker =
        std::fs::read_to_string(pulled.layers[0].join(testing::MARKER_PATH)).expect("marker");
    assert_eq!(marker, testing::MARKER);

    let by_digest = format!("{}/test/busybox@{}", registry.host(), image.digest());
    let again = store
        .ensure(&by_digest, PullPolicy::Always, &[])
        .await
        .expect("pull by digest");
    assert_eq!(again.image_id, pulled.image_id);
    assert_eq!(again.layers, pulled.layers);

    let container = dir.path().join("c1");
    let fs = rootfs::assemble(&pulled, &container, false).expect("assemble");
    let marker =
        std::fs::read_to_string(fs.path.join(testing::MARKER_PATH)).expect("marker in rootfs");
    assert_eq!(marker, testing::MARKER);
    let out = std::process::Command::new("chroot")
        .arg(&fs.path)
        .args(["/bin/sh", "-c", "cat /etc/mesopod-image"])
        .output();
    if testing::require_root("overlay rootfs and chroot") {
        assert!(fs.overlay, "root gets an overlay rootfs");
        let out = out.expect("chroot runs");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            testing::MARKER,
            "{out:?}"
        );
    }
    fs.release().expect("release");
}

#[tokio::test]
async fn a_manifest_list_gives_its_amd64_image_and_another_platform_is_refused() {
    let Some(registry) = Registry::start_or_skip("manifest_list").await else {
        return;
    };
    let amd64 = testing::busybox_image();
    let arm = testing::image(
        vec![testing::Layer::new().file("arm", 0o644, b"arm").tar()],
        &Spec {
            architecture: "arm64".into(),
            ..Spec::default()
        },
    );
    let list = registry
        .push_list(
            "test/multi",
            "v1",
            &[(&arm, "linux", "arm64"), (&amd64, "linux", "amd64")],
        )
        .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path());
    let pulled = store
        .ensure(&list, PullPolicy::IfNotPresent, &[])
        .await
        .expect("pull the list");
    assert!(
        pulled.layers[0].join(testing::MARKER_PATH).exists(),
        "the amd64 image"
    );
    // The image id is the list's digest, as containerd's repo digest is.
    assert!(
        pulled
            .image_id
            .starts_with(&format!("{}/test/multi@sha256:", registry.host()))
    );
    assert_ne!(
        pulled.image_id,
        format!("{}/test/multi@{}", registry.host(), amd64.digest())
    );

    let only_arm = registry
        .push_list("test/multi", "arm-only", &[(&arm, "linux", "arm64")])
        .await;
    let err = store
        .ensure(&only_arm, PullPolicy::IfNotPresent, &[])
        .await
        .expect_err("no amd64");
    assert_eq!(err.reason(), "ErrImagePull");
    assert!(
        err.to_string()
            .contains("no match for platform in manifest"),
        "{err}"
    );
    assert!(err.to_string().contains("linux/arm64"), "{err}");

    let direct = registry.push("test/multi", "arm-direct", &arm).await;
    let err = store
        .ensure(&direct, PullPolicy::IfNotPresent, &[])
        .await
        .expect_err("arm image");
    assert!(
        err.to_string().contains("the image is linux/arm64"),
        "{err}"
    );
}

#[tokio::test]
async fn docker_media_types_pull_too() {
    let Some(registry) = Registry::start_or_skip("docker_media_types").await else {
        return;
    };
    let image = testing::image(
        vec![testing::busybox_layer()],
        &Spec {
            docker_media_types: true,
            ..Spec::default()
        },
    );
    let reference = registry.push("test/docker", "v2", &image).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let pulled = store(dir.path())
        .ensure(&reference, PullPolicy::IfNotPresent, &[])
        .await
        .expect("pull");
    assert!(pulled.layers[0].join("bin/busybox").exists());
}

#[tokio::test]
async fn a_second_pull_is_served_from_the_store_without_the_registry() {
    let Some(mut registry) = Registry::start_or_skip("served_from_cache").await else {
        return;
    };
    let image = testing::busybox_image();
    let reference = registry.push("test/cache", "v1", &image).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path());
    let (first, how) = store
        .ensure_fetched(&reference, PullPolicy::IfNotPresent, &[])
        .await
        .expect("pull");
    assert_eq!(how, images::Fetched::Pulled { mirror: None });
    registry.stop();
    let (second, how) = store
        .ensure_fetched(&reference, PullPolicy::IfNotPresent, &[])
        .await
        .expect("cached");
    assert_eq!(how, images::Fetched::Present);
    assert_eq!(second, first);
    let never = store
        .ensure(&reference, PullPolicy::Never, &[])
        .await
        .expect("Never finds it");
    assert_eq!(never.image_id, first.image_id);
    // Always asks the registry, which is gone.
    let err = store
        .ensure(&reference, PullPolicy::Always, &[])
        .await
        .expect_err("registry gone");
    assert_eq!(err.reason(), "ErrImagePull");
    assert!(err.to_string().contains("is unreachable"), "{err}");
}

#[tokio::test]
async fn never_with_a_missing_image_and_unknown_images() {
    let Some(registry) = Registry::start_or_skip("never_and_unknown").await else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path());
    let missing = format!("{}/test/nothing:v1", registry.host());
    let err = store
        .ensure(&missing, PullPolicy::Never, &[])
        .await
        .expect_err("Never");
    assert_eq!(err.reason(), "ErrImageNeverPull");
    assert_eq!(
        err.to_string(),
        format!("Container image \"{missing}\" is not present with pull policy of Never")
    );

    let err = store
        .ensure(&missing, PullPolicy::IfNotPresent, &[])
        .await
        .expect_err("unknown");
    assert_eq!(err.reason(), "ErrImagePull");
    assert_eq!(
        err.to_string(),
        format!(
            "failed to pull and unpack image \"{missing}\": failed to resolve reference \"{missing}\": {missing}: not found"
        )
    );

    let err = store
        .ensure("Bad:Name", PullPolicy::IfNotPresent, &[])
        .await
        .expect_err("bad name");
    assert_eq!(err.reason(), "InvalidImageName");
    assert!(
        err.to_string()
            .starts_with("Failed to apply default image tag \"Bad:Name\""),
        "{err}"
    );

    let err = store
        .ensure("127.0.0.1:1/x:v1", PullPolicy::IfNotPresent, &[])
        .await
        .expect_err("nothing on port 1");
    assert!(
        err.to_string()
            .contains("registry 127.0.0.1:1 is unreachable"),
        "{err}"
    );
    assert!(
        store
            .gc(&HashSet::new())
            .await
            .expect("gc")
            .removed
            .is_empty()
    );
}
