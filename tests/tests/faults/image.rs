//! The image the fault tests' pods run: busybox (Debian's busybox-static)
//! imported into an image store with `mesopod image load`, as a user does
//! without a registry.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;

use images::testing::{busybox_image, docker_save};

/// The name pods use.
pub const IMAGE: &str = "mesopod.test/busybox:1";

/// Whether containers can run here: root and `/bin/busybox`. Under
/// `CI=true` a missing one fails the test; otherwise it is skipped loudly.
pub fn containers_possible(test: &str) -> bool {
    let mut missing = Vec::new();
    if !rustix::process::geteuid().is_root() {
        missing.push("root (containers need namespaces and cgroups)");
    }
    if !Path::new("/bin/busybox").exists() {
        missing.push("/bin/busybox (apt-get install busybox-static)");
    }
    if missing.is_empty() {
        return true;
    }
    let what = missing.join(", ");
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{test}: CI=true and containers need {what}"
    );
    eprintln!("SKIPPED {test}: containers need {what}");
    false
}

/// Loads [`IMAGE`] into the image store at `store`.
pub fn load(store: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("busybox.tar");
    std::fs::write(&archive, docker_save(&[(&[IMAGE], &busybox_image())])).unwrap();
    let out = Command::new(super::MESOPOD)
        .args(["image", "load", "--image-store"])
        .arg(store)
        .arg(&archive)
        .output()
        .unwrap();
    assert!(out.status.success(), "mesopod image load: {out:?}");
}
