//! What the containers_* tests share: the prerequisites check, a busybox
//! image built from Debian's busybox-static, and a one-agent cluster on a
//! given container runtime.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use executor::oci::image::{DirStore, ImageConfig};
use framework::app::App;

use crate::common::cluster::{Setup, agent, app_config};

/// The file only the test image has.
pub const IMAGE_FILE: &str = "/etc/only-in-image";
/// Its content.
pub const IMAGE_FILE_TEXT: &str = "this file lives only in the image";
/// The test image: busybox, Entrypoint echoes, runs as root.
pub const IMAGE: &str = "mesopod.test/busybox:1";
/// Debian's runc.
pub const RUNC: &str = "/usr/sbin/runc";

/// Whether containers can run here (root, busybox-static, namespaces). In
/// CI a missing prerequisite fails the test; elsewhere it is skipped loudly.
pub fn prerequisites(needs_runc: bool) -> bool {
    let mut missing = Vec::new();
    if !rustix::process::geteuid().is_root() {
        missing.push("root (containers need namespaces and cgroups)".to_owned());
    }
    if !Path::new("/bin/busybox").exists() {
        missing.push("/bin/busybox (apt-get install busybox-static)".to_owned());
    }
    if needs_runc && !Path::new(RUNC).exists() {
        missing.push(format!("{RUNC} (.ci/install-runc.sh)"));
    }
    if missing.is_empty() {
        return true;
    }
    let msg = format!("containers test needs {}", missing.join(", "));
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{msg}");
    }
    eprintln!("SKIPPED: {msg}");
    false
}

/// Builds the test image into `store`: busybox and its applets, a passwd
/// with root, a user 1000 and nobody, and [`IMAGE_FILE`].
pub fn build_image(store: &Path) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("rootfs");
    for d in ["bin", "etc", "tmp", "proc", "sys", "dev", "root"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::set_permissions(
        root.join("tmp"),
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )
    .unwrap();
    std::fs::copy("/bin/busybox", root.join("bin/busybox")).unwrap();
    let list = std::process::Command::new("/bin/busybox")
        .arg("--list")
        .output()
        .unwrap();
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        if applet != "busybox" {
            let _ = std::os::unix::fs::symlink("busybox", root.join("bin").join(applet));
        }
    }
    std::fs::write(
        root.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
    )
    .unwrap();
    std::fs::write(
        root.join("etc/group"),
        "root:x:0:\napp:x:1000:\nnogroup:x:65534:\n",
    )
    .unwrap();
    std::fs::write(
        root.join(IMAGE_FILE.trim_start_matches('/')),
        IMAGE_FILE_TEXT,
    )
    .unwrap();
    let config = ImageConfig {
        entrypoint: Some(vec!["/bin/echo".into(), "entrypoint ran with".into()]),
        cmd: Some(vec!["the image's cmd".into()]),
        env: Some(vec!["PATH=/bin".into(), "FROM_IMAGE=yes".into()]),
        working_dir: Some("/tmp".into()),
        user: None,
    };
    DirStore::new(store)
        .import(IMAGE, &root, "mesopod.test/busybox@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", &config)
        .unwrap();
}

/// A one-agent cluster whose executor runs containers with `runtime`
/// (`embedded` or a CLI path) from `store`.
pub async fn cluster(runtime: &str, store: &Path) -> App {
    let mut cfg = app_config(Setup {
        agents: vec![agent(
            "cpus:8;mem:8192;disk:20480;ports:[31000-31010]",
            "rack:r0",
            0,
        )],
        ..Setup::default()
    });
    cfg.executor.args = vec![
        format!("--container-runtime={runtime}"),
        format!("--image-store={}", store.display()),
    ];
    App::start(cfg).await.expect("mesopod starts")
}

/// The pids of processes whose environment holds `marker` (`KEY=value`).
pub fn processes_with_env(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|kv| kv == marker.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

/// A temp dir for an image store.
pub fn store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    (dir, path)
}
