//! What the containers_* tests share: the prerequisites check, a busybox
//! image built from Debian's busybox-static, and a one-agent cluster on a
//! given container runtime.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use framework::app::{App, AppConfig};
use images::testing::{Layer, Spec, TestImage, docker_save, image};
use images::{ImageStore, StoreConfig};

use crate::common::cluster::{Setup, agent, app_config};

pub mod in_process;
pub mod registry_agents;

/// The file only the test image has.
pub const IMAGE_FILE: &str = "/etc/only-in-image";
/// Its content.
pub const IMAGE_FILE_TEXT: &str = "this file lives only in the image";
/// The name the test image is loaded under (registries give theirs).
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
    available("containers test", &missing)
}

/// Whether a rootless test can run here: as root (it drops to an
/// unprivileged uid itself), with busybox, where the kernel allows
/// unprivileged user namespaces. In CI a missing need fails it.
pub fn rootless_prerequisites(what: &str) -> bool {
    let mut missing = Vec::new();
    if !rustix::process::geteuid().is_root() {
        missing.push("root (to drop to an unprivileged uid itself)".to_owned());
    }
    if !Path::new("/bin/busybox").exists() {
        missing.push("/bin/busybox (apt-get install busybox-static)".to_owned());
    }
    if let Some(why) = executor::oci::rootless::kernel_refusal() {
        missing.push(why);
    }
    available(what, &missing)
}

/// True when nothing is `missing`; else fails in CI and skips loudly elsewhere.
fn available(what: &str, missing: &[String]) -> bool {
    if missing.is_empty() {
        return true;
    }
    let msg = format!("{what} needs {}", missing.join(", "));
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{msg}");
    }
    eprintln!("SKIPPED: {msg}");
    false
}

/// The test image: busybox with every applet, a passwd with root, a user
/// 1000 and nobody, [`IMAGE_FILE`], an Entrypoint that echoes and a Cmd.
pub fn test_image() -> TestImage {
    test_image_with_env(&[])
}

/// [`test_image`] whose config also sets `env` (`KEY=value`): an image of
/// other content, told apart by what its containers print.
pub fn test_image_with_env(env: &[&str]) -> TestImage {
    let busybox = std::fs::read("/bin/busybox").expect("/bin/busybox (busybox-static)");
    let mut layer = Layer::new()
        .dir("bin")
        .file("bin/busybox", 0o755, &busybox)
        .dir("etc")
        .file(IMAGE_FILE.trim_start_matches('/'), 0o644, IMAGE_FILE_TEXT.as_bytes())
        .file(
            "etc/passwd",
            0o644,
            b"root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
        )
        .file("etc/group", 0o644, b"root:x:0:\napp:x:1000:\nnogroup:x:65534:\n");
    for dir in ["tmp", "proc", "dev", "sys", "root"] {
        layer = layer.dir(dir);
    }
    let list = std::process::Command::new("/bin/busybox")
        .arg("--list")
        .output()
        .unwrap();
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        if applet != "busybox" {
            layer = layer.symlink(&format!("bin/{applet}"), "/bin/busybox");
        }
    }
    let spec = Spec {
        entrypoint: Some(vec!["/bin/echo".into(), "entrypoint ran with".into()]),
        cmd: Some(vec!["the image's cmd".into()]),
        env: ["PATH=/bin", "FROM_IMAGE=yes"]
            .iter()
            .chain(env)
            .map(|e| (*e).to_owned())
            .collect(),
        ..Spec::default()
    };
    image(vec![layer.tar()], &spec)
}

/// Loads the test image into the store at `store` as `name`, as
/// `mesopod image load` does (a `docker save` archive).
pub async fn load_image(store: &Path, name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("image.tar");
    let img = test_image();
    std::fs::write(&archive, docker_save(&[(&[name], &img)])).unwrap();
    let store = ImageStore::open(StoreConfig::new(store)).unwrap();
    store.load_archive(&archive).await.unwrap();
}

/// A one-agent cluster whose executor runs containers with `runtime`
/// (`embedded` or a CLI path) from `store`.
pub async fn cluster(runtime: &str, store: &Path) -> App {
    cluster_with(runtime, store, |_| {}).await
}

/// [`cluster`], with `tune` applied to its configuration first.
pub async fn cluster_with(runtime: &str, store: &Path, tune: impl FnOnce(&mut AppConfig)) -> App {
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
    tune(&mut cfg);
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

/// The pod sandbox directories of the agents under `work`.
pub fn sandboxes_dirs(work: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(work.join("slaves"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|agent| agent.path().join("mesopod-runtime-sandboxes"))
        .collect()
}

/// The pod sandboxes left under `work`.
pub fn sandboxes_left(work: &Path) -> Vec<PathBuf> {
    sandboxes_dirs(work)
        .iter()
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
        .map(|e| e.path())
        .collect()
}

/// The executors whose sandbox is under `work`.
pub fn executors_under(work: &Path) -> Vec<u32> {
    let want = format!("MESOS_SANDBOX={}", work.display());
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let env = std::fs::read(e.path().join("environ")).ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let is_executor = cmdline.split(|b| *b == 0).any(|a| a == b"executor");
            let ours = env
                .split(|b| *b == 0)
                .any(|kv| kv.starts_with(want.as_bytes()));
            (is_executor && ours).then_some(pid)
        })
        .collect()
}

/// SIGKILLs `pid` (gone already is fine).
pub fn sigkill(pid: u32) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
}

/// Whether `pid` runs (a zombie does not).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

/// SIGKILLs the one executor whose sandbox is under `work`; its pid.
pub fn kill_the_executor(work: &Path) -> u32 {
    let executors = executors_under(work);
    assert_eq!(
        executors.len(),
        1,
        "one executor on the agent: {executors:?}"
    );
    sigkill(executors[0]);
    executors[0]
}
