//! Bad input from a registry: wrong digests, corrupt layers and hostile
//! tarballs are refused with kubelet's reason, and the store keeps nothing
//! of them.

use std::path::Path;

use images::testing::{self, Layer, Registry, Spec};
use images::{ImageStore, PullError, PullPolicy, StoreConfig};

fn store(dir: &Path) -> ImageStore {
    testkit::init_crypto();
    ImageStore::open(StoreConfig::new(dir.join("images"))).expect("store opens")
}

/// The store's directories, empty: nothing half-written, nothing kept.
fn assert_clean(store: &ImageStore) {
    let left: Vec<String> = testing::tree(store.root())
        .into_iter()
        .filter(|p| {
            ![
                "blobs/",
                "blobs/sha256/",
                "layers/",
                "layers/sha256/",
                "images/",
                "refs/",
                "tmp/",
            ]
            .contains(&p.as_str())
        })
        .collect();
    assert!(left.is_empty(), "the store kept {left:?}");
}

fn blob_file(registry: &Registry, digest: &str) -> std::path::PathBuf {
    let hex = &digest[7..];
    registry.storage().join(format!(
        "docker/registry/v2/blobs/sha256/{}/{hex}/data",
        &hex[..2]
    ))
}

#[tokio::test]
async fn a_blob_whose_content_is_not_its_digest_is_refused() {
    let Some(registry) = Registry::start_or_skip("wrong_digest").await else {
        return;
    };
    let image = testing::busybox_image();
    let reference = registry.push("test/tampered", "v1", &image).await;
    let layer = image.layer_digest(0);
    // Tamper with the stored layer behind the registry's back, same length.
    let path = blob_file(&registry, &layer);
    let mut bytes = std::fs::read(&path).expect("the stored layer");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&path, &bytes).expect("tamper");

    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path());
    let err = store
        .ensure(&reference, PullPolicy::IfNotPresent, &[])
        .await
        .expect_err("tampered");
    assert_eq!(err.reason(), "ErrImagePull");
    assert!(
        matches!(&err, PullError::DigestMismatch { expected, .. } if *expected == layer),
        "{err:?}"
    );
    assert!(
        err.to_string().contains(&format!("expected {layer}")),
        "{err}"
    );
    assert_clean(&store);

    let unknown = format!(
        "{}/test/tampered@sha256:{}",
        registry.host(),
        "0".repeat(64)
    );
    let err = store
        .ensure(&unknown, PullPolicy::IfNotPresent, &[])
        .await
        .expect_err("no such digest");
    assert!(matches!(err, PullError::NotFound { .. }), "{err:?}");
}

#[tokio::test]
async fn a_corrupt_layer_is_refused_the_store_left_clean_and_a_retry_pulls_afresh() {
    let Some(registry) = Registry::start_or_skip("corrupt_layer").await else {
        return;
    };
    let tar = testing::busybox_layer();
    let gz = testing::gzip(&tar);
    let truncated = gz[..gz.len() / 2].to_vec();
    let bad = testing::image_with_blobs(vec![tar.clone()], vec![truncated], &Spec::default());
    let reference = registry.push("test/corrupt", "v1", &bad).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path());
    let err = store
        .ensure(&reference, PullPolicy::IfNotPresent, &[])
        .await
        .expect_err("corrupt");
    assert_eq!(err.reason(), "ErrImagePull");
    assert!(
        err.to_string().starts_with(&format!(
            "failed to pull and unpack image \"{reference}\": failed to extract layer {}",
            bad.layer_digest(0)
        )),
        "{err}"
    );
    assert_clean(&store);

    // A layer that unpacks but is not its config's diff ID.
    let other = testing::image_with_blobs(
        vec![tar],
        vec![testing::gzip(&Layer::new().file("x", 0o644, b"x").tar())],
        &Spec::default(),
    );
    let reference2 = registry.push("test/corrupt", "v2", &other).await;
    let err = store
        .ensure(&reference2, PullPolicy::IfNotPresent, &[])
        .await
        .expect_err("diff id");
    assert!(err.to_string().contains("its config says"), "{err}");
    assert_clean(&store);

    // Fixed at the registry, the next pull starts afresh and succeeds.
    registry
        .push("test/corrupt", "v1", &testing::busybox_image())
        .await;
    let image = store
        .ensure(&reference, PullPolicy::IfNotPresent, &[])
        .await
        .expect("retry");
    assert!(image.layers[0].join(testing::MARKER_PATH).exists());
}

#[tokio::test]
async fn hostile_paths_refuse_the_layer() {
    let Some(registry) = Registry::start_or_skip("hostile_paths").await else {
        return;
    };
    let outside = tempfile::tempdir().expect("a directory outside the store");
    let out = outside.path().display().to_string();
    let hostile = [
        (
            "dotdot",
            Layer::new().file_raw("../../escaped", b"x").tar(),
            "escapes the layer's root",
        ),
        (
            "symlink",
            Layer::new()
                .symlink("evil", &out)
                .file_raw("evil/pwned", b"x")
                .tar(),
            "goes through the symlink evil",
        ),
        (
            "hardlink",
            Layer::new()
                .hardlink_raw("shadow", "../../../../etc/shadow")
                .tar(),
            "points outside the layer's root",
        ),
        (
            "hardlink-via-symlink",
            Layer::new()
                .symlink("etc", "/etc")
                .hardlink_raw("shadow", "etc/shadow")
                .tar(),
            "goes through the symlink etc",
        ),
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path());
    for (tag, tar, why) in hostile {
        let image = testing::image(vec![tar], &Spec::default());
        let reference = registry.push("test/hostile", tag, &image).await;
        let err = store
            .ensure(&reference, PullPolicy::IfNotPresent, &[])
            .await
            .expect_err(tag);
        assert!(
            matches!(err, PullError::CorruptLayer { .. }),
            "{tag}: {err:?}"
        );
        assert!(err.to_string().contains(why), "{tag}: {err}");
        assert_clean(&store);
    }
    assert!(
        testing::tree(outside.path()).is_empty(),
        "nothing was written outside"
    );
    assert!(!dir.path().join("escaped").exists() && !dir.path().join("images/escaped").exists());
}
