//! Rootless containers through the embedded runtime's CLI (`mesopod
//! runtime`), run by an unprivileged user: the test runs as root (as CI
//! does) and drops to a uid of its own for every runtime command.
//!
//! - The container's `id -u` is 0, while its process is the unprivileged
//!   uid on the host, and the host's `/etc/shadow`, bound into the
//!   container, cannot be read.
//! - `runtime exec` joins the container (its user namespace first) as root
//!   of that namespace.
//! - A memory limit the runtime cannot enforce (the cgroup is not
//!   delegated to that uid) and a `runAsUser` the single-id mapping lacks
//!   are refused with the reason, and nothing is left behind.
//!
//! (Which sysctl forbids user namespaces, and the message that names it,
//! is `executor::oci::rootless`'s unit test: a test cannot turn the host's
//! off without breaking every other test that runs beside it.)
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;
use crate::containers_support;

use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use containers_support::rootless_prerequisites;

/// The unprivileged user the runtime runs as (no passwd entry needed).
const UID: u32 = 41_616;
const GID: u32 = 41_616;

/// A directory tree owned by [`UID`]: the runtime's state root and bundles.
struct Workspace {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Workspace {
    fn new() -> Workspace {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::chown(&path, Some(UID), Some(GID)).unwrap();
        Workspace { _dir: dir, path }
    }

    /// A bundle `name` with a busybox root and `config.json` from `spec`.
    fn bundle(&self, name: &str, spec: &serde_json::Value) -> PathBuf {
        let bundle = self.path.join(name);
        let rootfs = bundle.join("rootfs");
        for d in ["bin", "etc", "proc", "dev", "sys", "tmp", "host-etc"] {
            std::fs::create_dir_all(rootfs.join(d)).unwrap();
        }
        std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).unwrap();
        for applet in ["sh", "id", "cat", "echo", "sleep", "hostname"] {
            std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet)).unwrap();
        }
        std::fs::write(rootfs.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
        std::fs::write(
            bundle.join("config.json"),
            serde_json::to_vec_pretty(spec).unwrap(),
        )
        .unwrap();
        chown_tree(&bundle);
        bundle
    }

    /// `mesopod runtime --root <state> ARGS…` as [`UID`].
    fn runtime(&self, args: &[&str]) -> Command {
        let mut c = Command::new(common::MESOPOD);
        c.arg("runtime")
            .arg("--root")
            .arg(self.path.join("state"))
            .args(args)
            .uid(UID)
            .gid(GID)
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.runtime(args).output().unwrap()
    }
}

fn chown_tree(path: &Path) {
    std::os::unix::fs::lchown(path, Some(UID), Some(GID)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for e in std::fs::read_dir(path).unwrap() {
            chown_tree(&e.unwrap().path());
        }
    }
}

/// An OCI config in the shape mesopod writes: the defaults runc gives a
/// container, the host's `/etc` bound read-only at `/host-etc`, and `script`.
fn spec(script: &str) -> serde_json::Value {
    let caps = [
        "CAP_CHOWN",
        "CAP_DAC_OVERRIDE",
        "CAP_FOWNER",
        "CAP_SETUID",
        "CAP_SETGID",
    ];
    serde_json::json!({
        "ociVersion": "1.0.2",
        "process": {
            "user": {"uid": 0, "gid": 0},
            "args": ["/bin/sh", "-c", script],
            "env": ["PATH=/bin"],
            "cwd": "/",
            "capabilities": {"bounding": caps, "effective": caps, "permitted": caps},
            "noNewPrivileges": true
        },
        "root": {"path": "rootfs"},
        "hostname": "rootless-box",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs",
             "options": ["nosuid", "noexec", "nodev", "ro"]},
            {"destination": "/host-etc", "type": "bind", "source": "/etc",
             "options": ["rbind", "ro"]}
        ],
        "linux": {
            "namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "ipc"}, {"type": "uts"}],
            "maskedPaths": ["/proc/kcore"],
            "readonlyPaths": ["/proc/sys"]
        }
    })
}

/// Deletes the container (as [`UID`]) however the test ends.
struct Container<'a> {
    ws: &'a Workspace,
    id: &'a str,
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        let _ = self.ws.run(&["delete", "--force", self.id]);
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `(real, effective, saved, fs)` uids of `pid` on the host.
fn host_uids(pid: i64) -> Vec<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    line.split_whitespace()
        .skip(1)
        .map(|n| n.parse().unwrap())
        .collect()
}

#[test]
fn root_in_the_container_is_an_unprivileged_user_on_the_host() {
    if !rootless_prerequisites("rootless containers test") {
        return;
    }
    let ws = Workspace::new();
    let script = "echo uid=$(id -u) gid=$(id -g); \
                  cat /host-etc/shadow >/dev/null 2>/tmp/err; echo shadow=$?; cat /tmp/err; \
                  echo host=$(hostname); echo ready; exec sleep 120";
    let bundle = ws.bundle("box", &spec(script));
    let out_path = ws.path.join("box.out");
    let out = std::fs::File::create(&out_path).unwrap();
    let id = "rootless-1";
    let _container = Container { ws: &ws, id };
    let ran = ws
        .runtime(&["run", "--detach", "--bundle", bundle.to_str().unwrap(), id])
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .status()
        .unwrap();
    let text = testkit::wait_until_blocking(
        "the container's output",
        Duration::from_secs(20),
        || std::fs::read_to_string(&out_path).unwrap_or_default(),
        |t| t.contains("ready") || !ran.success(),
    );
    assert!(ran.success(), "runtime run failed: {text}");
    assert!(text.contains("uid=0 gid=0"), "{text}");
    assert!(text.contains("host=rootless-box"), "{text}");
    // The host's shadow file is in the container, and its root cannot read it.
    assert!(text.contains("shadow=1"), "{text}");
    assert!(text.contains("Permission denied"), "{text}");

    let state = ws.run(&["state", id]);
    assert!(state.status.success(), "{}", stderr(&state));
    let state: serde_json::Value = serde_json::from_slice(&state.stdout).unwrap();
    let pid = state["pid"].as_i64().unwrap();
    assert_eq!(
        host_uids(pid),
        vec![UID; 4],
        "the container's process on the host"
    );
    let map = std::fs::read_to_string(format!("/proc/{pid}/uid_map")).unwrap();
    assert_eq!(
        map.split_whitespace().collect::<Vec<_>>(),
        ["0", &UID.to_string(), "1"],
        "uid_map {map:?}"
    );

    let exec = ws.run(&["exec", id, "/bin/sh", "-c", "id -u; cat /host-etc/shadow"]);
    let said = String::from_utf8_lossy(&exec.stdout);
    assert_eq!(
        said.lines().next(),
        Some("0"),
        "exec: {said} {}",
        stderr(&exec)
    );
    assert_eq!(
        exec.status.code(),
        Some(1),
        "exec can read /etc/shadow: {}",
        stderr(&exec)
    );

    let deleted = ws.run(&["delete", "--force", id]);
    assert!(deleted.status.success(), "{}", stderr(&deleted));
    testkit::wait_until_blocking(
        "the container's process to end",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.contains(") Z "))
                .unwrap_or(true)
        },
        |gone| *gone,
    );
}

#[test]
fn limits_and_ids_a_rootless_container_cannot_honour_are_refused_with_the_reason() {
    if !rootless_prerequisites("rootless containers test") {
        return;
    }
    let ws = Workspace::new();
    // The runtime's cgroup is this test's, owned by root: not delegated.
    let mut limited = spec("exec sleep 60");
    limited["linux"]["cgroupsPath"] = "rootless-limited".into();
    limited["linux"]["resources"] = serde_json::json!({"memory": {"limit": 64 << 20}});
    let bundle = ws.bundle("limited", &limited);
    let _c = Container {
        ws: &ws,
        id: "limited",
    };
    let out = ws.run(&[
        "run",
        "--detach",
        "--bundle",
        bundle.to_str().unwrap(),
        "limited",
    ]);
    let err = stderr(&out);
    assert!(!out.status.success(), "a memory limit ran unenforced");
    assert!(
        err.contains("rootless: a memory limit (67108864 bytes) cannot be enforced")
            && err.contains(&format!("not delegated to uid {UID}")),
        "{err}"
    );
    let list = ws.run(&["list"]);
    assert_eq!(
        String::from_utf8_lossy(&list.stdout).trim(),
        "",
        "a refused container is listed"
    );

    let mut as_user = spec("exec sleep 60");
    as_user["process"]["user"] = serde_json::json!({"uid": 1000, "gid": 1000});
    let bundle = ws.bundle("as-user", &as_user);
    let _c = Container {
        ws: &ws,
        id: "as-user",
    };
    let out = ws.run(&[
        "run",
        "--detach",
        "--bundle",
        bundle.to_str().unwrap(),
        "as-user",
    ]);
    let err = stderr(&out);
    assert!(
        !out.status.success(),
        "uid 1000 ran in a rootless container"
    );
    assert!(
        err.contains("maps only uid 0 and gid 0") && err.contains("uid 1000"),
        "{err}"
    );
}
