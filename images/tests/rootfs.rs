//! Root filesystems from layers: an overlay where the kernel allows it, a
//! flattened copy otherwise, and both apply the layers' whiteouts alike.

use std::path::Path;

use images::testing::{self, Layer, Spec};
use images::{Image, ImageStore, PullPolicy, StoreConfig, rootfs};

/// An image whose upper layer deletes `a/gone` and `x`, and hides `o`'s
/// lower contents behind its own `o/new`; loaded from a `docker save`.
async fn layered(dir: &Path) -> Image {
    let lower = Layer::new()
        .dir("a")
        .file("a/keep", 0o644, b"keep")
        .file("a/gone", 0o644, b"gone")
        .dir("o")
        .file("o/old", 0o644, b"old")
        .file("x", 0o600, b"x")
        .tar();
    let upper = Layer::new()
        .file("a/.wh.gone", 0o644, b"")
        .dir("o")
        .file("o/.wh..wh..opq", 0o644, b"")
        .file("o/new", 0o644, b"new")
        .file(".wh.x", 0o644, b"")
        .tar();
    let image = testing::image(vec![lower, upper], &Spec::default());
    let archive = dir.join("layered.tar");
    let tags: &[&str] = &["example.com/layered:v1"];
    std::fs::write(&archive, testing::docker_save(&[(tags, &image)])).expect("write");
    testkit::init_crypto();
    let store = ImageStore::open(StoreConfig::new(dir.join("images"))).expect("store");
    store.load_archive(&archive).await.expect("load");
    store
        .ensure("example.com/layered:v1", PullPolicy::Never, &[])
        .await
        .expect("present")
}

fn assert_merged(root: &Path) {
    let view = testing::tree(root);
    assert_eq!(view, ["a/", "a/keep", "o/", "o/new"], "merged view");
    assert_eq!(
        std::fs::read_to_string(root.join("a/keep")).expect("keep"),
        "keep"
    );
}

#[tokio::test]
async fn a_flattened_copy_applies_whiteouts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = layered(dir.path()).await;
    let fs = rootfs::assemble_copy(&image, &dir.path().join("c")).expect("copy");
    assert!(!fs.overlay);
    assert_merged(&fs.path);
    fs.release().expect("release");
}

#[tokio::test]
async fn an_overlay_applies_whiteouts_and_keeps_writes_in_the_container() {
    if !testing::require_root("overlay rootfs") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let image = layered(dir.path()).await;
    let container = dir.path().join("c");
    let fs = rootfs::assemble(&image, &container, false).expect("overlay");
    assert!(fs.overlay, "root gets an overlay");
    assert_merged(&fs.path);
    std::fs::write(fs.path.join("a/written"), b"w").expect("writable");
    assert!(
        container.join("upper/a/written").exists(),
        "writes go to the container's layer"
    );
    assert!(
        !image.layers[0].join("a/written").exists() && !image.layers[1].join("a/written").exists()
    );
    fs.release().expect("release");
    assert!(testing::tree(&fs.path).is_empty(), "unmounted");

    let ro = rootfs::assemble(&image, &dir.path().join("ro"), true).expect("read-only overlay");
    let err = std::fs::write(ro.path.join("a/written"), b"w").expect_err("read-only");
    assert_eq!(err.raw_os_error(), Some(30), "EROFS: {err}");
    ro.release().expect("release");
}
