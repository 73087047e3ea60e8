//! The store: concurrent pulls share downloads, gc removes the least
//! recently used unused images past the threshold, archives load offline.

use std::collections::HashSet;
use std::path::Path;

use images::testing::{self, Layer, Registry, Spec};
use images::{ImageStore, PullPolicy, StoreConfig, StoreError};

fn store_with(dir: &Path, threshold: u64) -> ImageStore {
    let mut config = StoreConfig::new(dir.join("images"));
    config.gc_threshold_bytes = threshold;
    testkit::init_crypto();
    ImageStore::open(config).expect("store opens")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_pulls_fetch_each_blob_once() {
    let Some(registry) = Registry::start_or_skip("concurrent_pulls").await else {
        return;
    };
    let base = testing::busybox_layer();
    let a = testing::image(
        vec![base.clone(), Layer::new().file("a", 0o644, b"a").tar()],
        &Spec::default(),
    );
    let b = testing::image(
        vec![base, Layer::new().file("b", 0o644, b"b").tar()],
        &Spec::default(),
    );
    let ref_a = registry.push("test/shared", "a", &a).await;
    let ref_b = registry.push("test/shared", "b", &b).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with(dir.path(), u64::MAX);
    let pulls = (0..8).map(|i| {
        let store = store.clone();
        let r = if i % 2 == 0 {
            ref_a.clone()
        } else {
            ref_b.clone()
        };
        tokio::spawn(async move { store.ensure(&r, PullPolicy::Always, &[]).await })
    });
    let results: Vec<_> = futures::future::join_all(pulls).await;
    for r in results {
        r.expect("task").expect("pull");
    }
    assert_eq!(a.layer_digest(0), b.layer_digest(0));
    assert_eq!(
        registry.blob_fetches("test/shared", &a.layer_digest(0)),
        1,
        "the shared base layer"
    );
    assert_eq!(registry.blob_fetches("test/shared", &a.layer_digest(1)), 1);
    assert_eq!(registry.blob_fetches("test/shared", &b.layer_digest(1)), 1);
}

/// An image of its own 300 kB layer on a small shared base.
fn sized(name: &str) -> testing::TestImage {
    let base = Layer::new().file("base", 0o644, b"shared base").tar();
    let own = Layer::new().file(name, 0o644, &vec![b'x'; 300_000]).tar();
    testing::image(vec![base, own], &Spec::default())
}

#[tokio::test]
async fn gc_removes_the_least_recently_used_unused_images_past_the_threshold() {
    let Some(registry) = Registry::start_or_skip("gc").await else {
        return;
    };
    let refs = [
        registry.push("test/gc", "one", &sized("one")).await,
        registry.push("test/gc", "two", &sized("two")).await,
        registry.push("test/gc", "three", &sized("three")).await,
    ];
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with(dir.path(), 700_000);
    let mut ids = Vec::new();
    for r in &refs {
        ids.push(
            store
                .ensure(r, PullPolicy::IfNotPresent, &[])
                .await
                .expect("pull")
                .image_id,
        );
    }
    // Using "one" again makes "two" the least recently used.
    store
        .ensure(&refs[0], PullPolicy::IfNotPresent, &[])
        .await
        .expect("cached");
    let in_use: HashSet<String> = [ids[2].clone()].into();

    let report = store.gc(&in_use).await.expect("gc");
    assert_eq!(report.removed, vec![ids[1].clone()]);
    assert!(
        report.bytes_before > 900_000 && report.bytes_after <= 700_000,
        "{report:?}"
    );
    let gone = store
        .ensure(&refs[1], PullPolicy::Never, &[])
        .await
        .expect_err("two is gone");
    assert_eq!(gone.reason(), "ErrImageNeverPull");
    for kept in [&refs[0], &refs[2]] {
        let image = store
            .ensure(kept, PullPolicy::Never, &[])
            .await
            .expect("kept");
        assert!(
            image.layers[0].join("base").exists(),
            "the shared base stays"
        );
    }

    let under = store.gc(&in_use).await.expect("gc under the threshold");
    assert!(under.removed.is_empty(), "{under:?}");
    let strict = store_with(dir.path(), 0);
    let report = strict.gc(&in_use).await.expect("gc to zero");
    assert_eq!(
        report.removed,
        vec![ids[0].clone()],
        "the image in use stays"
    );
    strict
        .ensure(&refs[2], PullPolicy::Never, &[])
        .await
        .expect("in use");
}

#[tokio::test]
async fn docker_save_and_oci_archives_load_offline() {
    let image = testing::image(
        vec![
            Layer::new()
                .dir("etc")
                .file(testing::MARKER_PATH, 0o644, testing::MARKER.as_bytes())
                .tar(),
        ],
        &Spec {
            entrypoint: Some(vec!["/bin/app".into()]),
            ..Spec::default()
        },
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store_with(dir.path(), u64::MAX);

    let save = dir.path().join("save.tar.gz");
    let tags: &[&str] = &["example.com/team/app:v1", "app:v2"];
    std::fs::write(
        &save,
        testing::gzip(&testing::docker_save(&[(tags, &image)])),
    )
    .expect("write");
    let loaded = store.load_archive(&save).await.expect("docker save loads");
    let names: Vec<&str> = loaded.iter().map(|i| i.reference.as_str()).collect();
    assert_eq!(
        names,
        ["example.com/team/app:v1", "docker.io/library/app:v2"]
    );
    let app = store
        .ensure("app:v2", PullPolicy::Never, &[])
        .await
        .expect("present");
    assert_eq!(app.config.entrypoint, Some(vec!["/bin/app".to_string()]));
    assert!(app.image_id.starts_with("docker.io/library/app@sha256:"));
    assert_eq!(
        std::fs::read_to_string(app.layers[0].join(testing::MARKER_PATH)).expect("marker"),
        testing::MARKER
    );

    let oci = dir.path().join("oci.tar");
    std::fs::write(
        &oci,
        testing::oci_archive("example.com/team/oci:v1", &image),
    )
    .expect("write");
    let loaded = store.load_archive(&oci).await.expect("OCI layout loads");
    assert_eq!(
        loaded[0].image_id,
        format!("example.com/team/oci@{}", image.digest())
    );
    store
        .ensure("example.com/team/oci:v1", PullPolicy::IfNotPresent, &[])
        .await
        .expect("present");

    // A zstd layer (OCI's `tar+zstd`) unpacks as well as gzip.
    let tar = Layer::new().file("zstd-marker", 0o644, b"zstd").tar();
    let zstd =
        ruzstd::encoding::compress_to_vec(&tar[..], ruzstd::encoding::CompressionLevel::Fastest);
    let zimage = testing::image_with_blobs(vec![tar], vec![zstd], &Spec::default());
    let zpath = dir.path().join("zstd.tar");
    std::fs::write(
        &zpath,
        testing::oci_archive("example.com/team/zstd:v1", &zimage),
    )
    .expect("write");
    let loaded = store.load_archive(&zpath).await.expect("zstd layer loads");
    assert!(loaded[0].layers[0].join("zstd-marker").exists());

    let junk = dir.path().join("junk.tar");
    std::fs::write(&junk, b"not an archive").expect("write");
    let err = store.load_archive(&junk).await.expect_err("junk");
    assert!(matches!(err, StoreError::Archive { .. }), "{err}");

    // A blob named by one digest holding other bytes.
    let index = format!(
        r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"{}","digest":"{}","size":{},"annotations":{{"io.containerd.image.name":"example.com/team/bad:v1"}}}}]}}"#,
        image.media_type,
        image.digest(),
        image.manifest.len()
    );
    let bytes = Layer::new()
        .file("oci-layout", 0o644, br#"{"imageLayoutVersion":"1.0.0"}"#)
        .file("index.json", 0o644, index.as_bytes())
        .file(
            &format!("blobs/sha256/{}", &image.digest()[7..]),
            0o644,
            &image.manifest,
        )
        .file(
            &format!("blobs/sha256/{}", &testing::sha256(&image.config)[7..]),
            0o644,
            &image.config,
        )
        .file(
            &format!("blobs/sha256/{}", &image.layer_digest(0)[7..]),
            0o644,
            b"other bytes",
        )
        .tar();
    let bad = dir.path().join("bad.tar");
    std::fs::write(&bad, bytes).expect("write");
    let err = store.load_archive(&bad).await.expect_err("tampered");
    assert!(err.to_string().contains("holds content of digest"), "{err}");
}
