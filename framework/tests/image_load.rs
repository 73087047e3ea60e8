//! `mesopod image load FILE` imports an archive into the embedded
//! cluster's store (`<data-dir>/images`), where a pull with policy Never
//! finds it.

use std::process::Command;

use images::testing::{self, Layer, Spec};
use images::{ImageStore, PullPolicy, StoreConfig};

const MESOPOD: &str = env!("CARGO_BIN_EXE_mesopod");

#[tokio::test]
async fn image_load_imports_a_docker_save_archive_into_the_data_dir() {
    testkit::init_crypto();
    let dir = tempfile::tempdir().expect("tempdir");
    let image = testing::image(
        vec![
            Layer::new()
                .dir("etc")
                .file(testing::MARKER_PATH, 0o644, testing::MARKER.as_bytes())
                .tar(),
        ],
        &Spec::default(),
    );
    let archive = dir.path().join("app.tar");
    let tags: &[&str] = &["app:v1"];
    std::fs::write(&archive, testing::docker_save(&[(tags, &image)])).expect("write");
    let data = dir.path().join("data");

    let out = Command::new(MESOPOD)
        .args(["image", "load"])
        .arg(&archive)
        .arg("--data-dir")
        .arg(&data)
        .output()
        .expect("mesopod runs");
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("Loaded image: docker.io/library/app:v1 (docker.io/library/app@sha256:"),
        "{stdout}"
    );

    testkit::init_crypto();

    let store = ImageStore::open(StoreConfig::new(data.join("images"))).expect("store");
    let loaded = store
        .ensure("app:v1", PullPolicy::Never, &[])
        .await
        .expect("loaded");
    assert!(loaded.layers[0].join(testing::MARKER_PATH).exists());

    let out = Command::new(MESOPOD)
        .args(["image", "load", "/nonexistent/archive.tar", "--data-dir"])
        .arg(&data)
        .output()
        .expect("mesopod runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/archive.tar"), "{stderr}");
}
