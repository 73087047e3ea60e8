//! Rootless pods end to end: the embedded cluster (`mesopod`, its agents
//! and their executors) runs as an unprivileged uid, and its pods run in
//! real containers from a registry image, driven with the real kubectl.
//! The test runs as root (as CI does) only to drop to that uid.
//!
//! - A pod of two containers: its logs show a file only in the image, `id
//!   -u` is 0 inside while the process is the unprivileged uid on the host,
//!   the host's `/etc/shadow` is neither visible nor readable, both
//!   containers have the pod's hostname (one shared UTS namespace) and see
//!   one emptyDir; no root filesystem of the pod is mounted on the host;
//!   deleting it leaves no process.
//! - `runAsUser: 1000`, which the single-id mapping lacks, is refused with
//!   `CreateContainerConfigError` and the reason.
//! - `kubectl exec` joins a container as its root; after the delete
//!   nothing of the pod is mounted in the executor's own namespace either.
//! - SIGKILL of the executor kills its containers; stopped, the cluster
//!   leaves no process of its uid.
//! - As `nobody` with a subordinate range (`/etc/subuid`, newuidmap from
//!   `.ci/install-uidmap.sh`), `runAsUser: 1000` runs: `id -u` is 1000,
//!   and on the host the process is the range's id for it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;
use crate::containers_support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::MESOPOD;
use containers_support::{
    IMAGE_FILE, IMAGE_FILE_TEXT, executors_under, processes_with_env, rootless_prerequisites,
    test_image,
};
use images::testing::Registry;
use k8s_openapi::api::core::v1::Pod;
use testkit::{Kubectl, ProcessGuard, ok, wait_until};

/// The unprivileged user the cluster runs as (no passwd entry needed).
const UID: u32 = 41_617;
/// The user of the subordinate-range test (newuidmap needs a passwd
/// entry: Debian's `nobody`), and its range.
const RANGED_UID: u32 = 65_534;
const RANGED_USER: &str = "nobody";
const RANGE_START: u32 = 3_100_000;
const T: Duration = Duration::from_secs(90);

/// `mesopod` as `uid` with its data in `dir`; and its API's URL.
async fn cluster(dir: &Path, uid: u32) -> (ProcessGuard<tokio::process::Child>, String) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(dir, Some(uid), Some(uid)).unwrap();
    let mut cmd = tokio::process::Command::new(MESOPOD);
    cmd.args([
        "--listen",
        "127.0.0.1:0",
        "--agents",
        "1",
        "--allowed-host-paths",
        "/etc",
    ])
    .arg("--data-dir")
    .arg(dir.join("data"))
    .env("HOME", dir)
    .env_remove("CI")
    .current_dir(dir)
    .uid(uid)
    .gid(uid)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(std::fs::File::create(dir.join("mesopod.log")).unwrap());
    common::cluster::serving(&mut cmd, &dir.join("mesopod.log"), || {
        format!(
            "{:?}",
            std::process::Command::new("ls")
                .arg("-laR")
                .arg(dir)
                .output()
        )
    })
    .await
}

fn log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("mesopod.log")).unwrap_or_default()
}

async fn get(k: &Kubectl, name: &str) -> Option<Pod> {
    let out = k.run(&["get", "pod", name, "-o", "json"]).await;
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

fn waiting(p: &Option<Pod>) -> Option<(String, String)> {
    let w = p
        .as_ref()?
        .status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .state
        .as_ref()?
        .waiting
        .clone()?;
    Some((w.reason?, w.message.unwrap_or_default()))
}

/// The host uid of process `pid` (`/proc/<pid>/status`), while it runs: a zombie
/// has ended. (Another test in this binary may have made it a child subreaper, so an
/// orphan of this test's cluster can end as its zombie rather than init's.)
fn host_uid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let zombie = status
        .lines()
        .find_map(|l| l.strip_prefix("State:"))
        .is_some_and(|s| s.trim_start().starts_with('Z'));
    if zombie {
        return None;
    }
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn pod(name: &str, image: &str, marker: &str, containers: &[(&str, &str)], extra: &str) -> String {
    let mut yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  volumes:\n  - name: shared\n    emptyDir: {{}}\n  - name: host-etc\n    hostPath:\n      path: /etc\n  containers:\n"
    );
    for (c, script) in containers {
        yaml.push_str(&format!(
            "  - name: {c}\n    image: {image}\n    command: [\"/bin/sh\", \"-c\", {script:?}]\n    env:\n    - name: ROOTLESS_MARKER\n      value: {marker}\n    volumeMounts:\n    - name: shared\n      mountPath: /shared\n    - name: host-etc\n      mountPath: /host-etc\n      readOnly: true\n{extra}"
        ));
    }
    yaml
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_root_runs_pods_in_rootless_containers() {
    if !rootless_prerequisites("rootless pods test") {
        return;
    }
    let Some(registry) = Registry::start_or_skip("rootless pods").await else {
        return;
    };
    let image = registry.push("test/rootless", "1", &test_image()).await;
    let tmp = tempfile::tempdir().unwrap();
    let dir: PathBuf = tmp.path().to_path_buf();
    let (mut mesopod, server) = cluster(&dir, UID).await;
    let k = Kubectl::new(&server);

    let node: serde_json::Value =
        serde_json::from_str(&ok(&k.run(&["get", "nodes", "-o", "json"]).await)).unwrap();
    let labels = &node["items"][0]["metadata"]["labels"];
    assert_eq!(labels["mesopod.io/rootless"], "true", "{node}");
    assert_eq!(labels["mesopod.io/container-runtime"], "embedded", "{node}");

    // Two containers of one pod: the image's file, root inside, no host
    // shadow, the pod's hostname in both, one emptyDir between them.
    let a = format!(
        "cat {IMAGE_FILE}; echo; echo uid=$(id -u); echo host=$(hostname); \
         test -e /etc/shadow && echo shadow-visible || echo no-shadow; \
         test -e /host-etc/shadow && echo host-shadow-bound; \
         cat /host-etc/shadow >/dev/null 2>&1 && echo shadow-read || echo shadow-denied; \
         echo from-a > /shared/note; exec sleep 3600"
    );
    let b = "while ! test -e /shared/note; do sleep 0.1; done; \
             echo b-host=$(hostname) b-read=$(cat /shared/note); exec sleep 3600";
    let yaml = pod("lone", &image, "pod-one", &[("a", &a), ("b", b)], "");
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    let logs = async |c: &str| {
        String::from_utf8_lossy(&k.run(&["logs", "lone", "-c", c]).await.stdout).into_owned()
    };
    let text = wait_until(
        "container a's output",
        T,
        async || logs("a").await,
        |t| t.contains("shadow-"),
    )
    .await;
    eprintln!("container a said:\n{text}");
    for want in [
        IMAGE_FILE_TEXT,
        "uid=0",
        "host=lone",
        "no-shadow",
        "host-shadow-bound",
        "shadow-denied",
    ] {
        assert!(
            text.contains(want),
            "{want:?} not in a's logs:\n{text}\n{}",
            log(&dir)
        );
    }
    let text = wait_until(
        "container b's output",
        T,
        async || logs("b").await,
        |t| t.contains("b-read"),
    )
    .await;
    assert!(text.contains("b-host=lone b-read=from-a"), "{text}");

    // kubectl exec joins the container, as its root.
    let out = ok(&k
        .run(&[
            "exec",
            "lone",
            "-c",
            "b",
            "--",
            "sh",
            "-c",
            "id -u; cat /shared/note; hostname",
        ])
        .await);
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>(),
        ["0", "from-a", "lone"],
        "{out}"
    );

    // On the host the containers are the unprivileged uid, and nothing of
    // the pod is mounted in the host's mount table.
    let pids = processes_with_env("ROOTLESS_MARKER=pod-one");
    assert!(pids.len() >= 2, "{pids:?}");
    for pid in &pids {
        assert_eq!(host_uid(*pid), Some(UID), "pid {pid}");
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let ours = dir.display().to_string();
    assert!(
        !mounts.lines().any(|l| l.contains(&ours)),
        "the pod's mounts reached the host:\n{mounts}"
    );

    ok(&k
        .run(&["delete", "pod", "lone", "--wait=true", "--timeout=60s"])
        .await);
    // Nor is anything of it left mounted in the executor's own namespace.
    let holder = holder_of(UID).expect("the executor's namespace holder");
    wait_until(
        "the pod's mounts to go from the holder's namespace",
        T,
        async || {
            std::fs::read_to_string(format!("/proc/{holder}/mountinfo"))
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains(&ours))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        },
        Vec::is_empty,
    )
    .await;
    wait_until(
        "pod one's processes to end",
        T,
        async || processes_with_env("ROOTLESS_MARKER=pod-one"),
        Vec::is_empty,
    )
    .await;

    // A uid the single-id mapping lacks is refused, with the reason.
    let yaml = pod(
        "as-1000",
        &image,
        "pod-two",
        &[("a", "id -u")],
        "    securityContext:\n      runAsUser: 1000\n",
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    let seen = wait_until(
        "the refusal",
        T,
        async || get(&k, "as-1000").await,
        |p| waiting(p).is_some_and(|(r, _)| r == "CreateContainerConfigError"),
    )
    .await;
    let (_, message) = waiting(&seen).unwrap();
    assert!(
        message.contains("rootless") && message.contains("uid 1000"),
        "{message}"
    );
    assert!(processes_with_env("ROOTLESS_MARKER=pod-two").is_empty());
    ok(&k.run(&["delete", "pod", "as-1000", "--wait=false"]).await);

    // SIGKILL of the executor takes its containers with it.
    let yaml = pod(
        "sleeper",
        &image,
        "pod-three",
        &[("a", "echo up; exec sleep 3600")],
        "",
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    wait_until(
        "the sleeper",
        T,
        async || processes_with_env("ROOTLESS_MARKER=pod-three"),
        |p| !p.is_empty(),
    )
    .await;
    let execs = executors_under(&dir);
    assert!(!execs.is_empty(), "no executor found");
    for pid in execs {
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(pid as i32).unwrap(),
            rustix::process::Signal::KILL,
        );
    }
    wait_until(
        "the sleeper to die with its executor",
        T,
        async || processes_with_env("ROOTLESS_MARKER=pod-three"),
        Vec::is_empty,
    )
    .await;

    // Stopped, the cluster leaves nothing of that uid running (the
    // executors' namespace holders included).
    let pid = rustix::process::Pid::from_raw(mesopod.id().unwrap() as i32).unwrap();
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    let _ = tokio::time::timeout(Duration::from_secs(30), mesopod.wait()).await;
    wait_until(
        "every process of the uid to end",
        T,
        async || processes_of(UID),
        Vec::is_empty,
    )
    .await;
    let warnings: Vec<String> = log(&dir)
        .lines()
        .filter(|l| l.contains("rootless"))
        .map(str::to_owned)
        .collect();
    assert!(warnings.is_empty(), "{warnings:#?}");
}

/// The pid of `uid`'s executor's namespace holder (`runtime rootless-ns`).
fn holder_of(uid: u32) -> Option<u32> {
    processes_of(uid).into_iter().find(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == b"rootless-ns"))
    })
}

/// The processes whose real uid is `uid`.
fn processes_of(uid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| host_uid(*pid) == Some(uid))
        .collect()
}

/// Appends a line to `/etc/subuid` and `/etc/subgid` for the test's
/// user; removes exactly that line again when dropped.
struct SubordinateIds(String);

impl SubordinateIds {
    fn add(user: &str, start: u32, count: u32) -> SubordinateIds {
        let line = format!("{user}:{start}:{count}\n");
        for f in ["/etc/subuid", "/etc/subgid"] {
            let mut text = std::fs::read_to_string(f).unwrap_or_default();
            text.push_str(&line);
            std::fs::write(f, text).unwrap();
        }
        SubordinateIds(line)
    }
}

impl Drop for SubordinateIds {
    fn drop(&mut self) {
        for f in ["/etc/subuid", "/etc/subgid"] {
            if let Ok(text) = std::fs::read_to_string(f) {
                let _ = std::fs::write(f, text.replacen(&self.0, "", 1));
            }
        }
    }
}

/// With a subordinate range (`/etc/subuid`, newuidmap), `runAsUser` within
/// it runs: `id -u` is that uid, and on the host it is the range's id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_with_subordinate_ids_runs_pods_as_other_users() {
    if !rootless_prerequisites("rootless pods test") {
        return;
    }
    if !Path::new("/usr/bin/newuidmap").exists() {
        let msg = "rootless subordinate ids test needs newuidmap (.ci/install-uidmap.sh)";
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED: {msg}");
        return;
    }
    let Some(registry) = Registry::start_or_skip("rootless pods with subordinate ids").await else {
        return;
    };
    let image = registry
        .push("test/rootless-ranged", "1", &test_image())
        .await;
    let _ids = SubordinateIds::add(RANGED_USER, RANGE_START, 65_536);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let (mut mesopod, server) = cluster(&dir, RANGED_UID).await;
    let k = Kubectl::new(&server);
    let yaml = pod(
        "app",
        &image,
        "pod-ranged",
        &[(
            "a",
            "echo uid=$(id -u) gid=$(id -g) groups=$(id -G); exec sleep 3600",
        )],
        "    securityContext:\n      runAsUser: 1000\n      runAsGroup: 1000\n",
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    let (text, _) = wait_until(
        "the pod's output",
        T,
        async || {
            let logs = String::from_utf8_lossy(&k.run(&["logs", "app"]).await.stdout).into_owned();
            (logs, waiting(&get(&k, "app").await))
        },
        |(t, _)| t.contains("uid="),
    )
    .await;
    assert!(text.contains("uid=1000 gid=1000"), "{text}\n{}", log(&dir));
    let pids = processes_with_env("ROOTLESS_MARKER=pod-ranged");
    assert!(!pids.is_empty());
    for pid in &pids {
        assert_eq!(host_uid(*pid), Some(RANGE_START + 999), "pid {pid}");
    }
    ok(&k
        .run(&["delete", "pod", "app", "--wait=true", "--timeout=60s"])
        .await);
    wait_until(
        "the pod's processes to end",
        T,
        async || processes_with_env("ROOTLESS_MARKER=pod-ranged"),
        Vec::is_empty,
    )
    .await;
    let pid = rustix::process::Pid::from_raw(mesopod.id().unwrap() as i32).unwrap();
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    let _ = tokio::time::timeout(Duration::from_secs(30), mesopod.wait()).await;
    // Its executor waits for its agent to come back (checkpointing) until
    // `--reset` stops it, as a user would.
    let reset = tokio::process::Command::new(MESOPOD)
        .arg("--reset")
        .arg("--data-dir")
        .arg(dir.join("data"))
        .uid(RANGED_UID)
        .gid(RANGED_UID)
        .output()
        .await
        .unwrap();
    assert!(reset.status.success(), "{reset:?}");
    wait_until(
        "every process of the uid to end",
        T,
        async || processes_of(RANGED_UID),
        Vec::is_empty,
    )
    .await;
}
