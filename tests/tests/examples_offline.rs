//! Every manifest in `examples/` runs, offline, on the `mesopod` binary's
//! embedded cluster, in both ways README gives:
//! - pulling `busybox` through `--registry-mirror`, a loopback registry
//!   holding Docker Hub's `library/busybox` tags built from Debian's
//!   busybox-static (the mirror has every tag the examples name, so no pull
//!   falls through to Docker Hub);
//! - with no registry at all, after `scripts/busybox-image.sh` and
//!   `mesopod image load`.
//!
//! Also: a bad mirror URL or `hosts.toml` stops `mesopod` at startup, with
//! Docker's words or the file and line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::MESOPOD;
use images::testing::{self, Registry, Spec};
use testkit::{Kubectl, ProcessGuard, ok};

/// Within testkit's 60 s for one kubectl, so kubectl says what it waited for.
const WAIT: &str = "--timeout=55s";

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// The embedded cluster of the real binary, two agents (`rack:r0`,
/// `rack:r1`), with `extra` flags; and its API's URL.
async fn cluster(dir: &Path, extra: &[&str]) -> (ProcessGuard<tokio::process::Child>, String) {
    let mut cmd = tokio::process::Command::new(MESOPOD);
    cmd.args([
        "--listen",
        "127.0.0.1:0",
        "--agents",
        "2",
        "--attributes",
        "rack:r{i}",
    ])
    .args(extra)
    .arg("--data-dir")
    .arg(dir.join("data"))
    .current_dir(dir)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(std::fs::File::create(dir.join("mesopod.log")).unwrap());
    common::cluster::serving(&mut cmd, &dir.join("mesopod.log"), String::new).await
}

/// Deletes what the examples made and waits for their pods to go (their
/// containers end with them, freeing host port 31080), then stops the
/// cluster. Its executors outlive it by design (a restarted mesopod adopts
/// them), so the test ends them, and waits until nothing it started (all
/// name a path under `dir`) runs.
async fn stop(k: &Kubectl, mut proc: ProcessGuard<tokio::process::Child>, dir: &Path) {
    ok(&k
        .run(&["delete", "cronjob,job,deploy,pod", "--all", "--wait=false"])
        .await);
    testkit::wait_until(
        "every pod to be gone",
        Duration::from_secs(55),
        async || ok(&k.run(&["get", "pods", "-o", "name"]).await),
        |names| names.trim().is_empty(),
    )
    .await;
    let pid = rustix::process::Pid::from_raw(proc.id().unwrap() as i32).unwrap();
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    let _ = tokio::time::timeout(Duration::from_secs(30), proc.wait()).await;
    for pid in processes_naming(dir) {
        if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
    testkit::wait_until(
        "every process of the cluster to end",
        Duration::from_secs(30),
        async || processes_naming(dir),
        Vec::is_empty,
    )
    .await;
}

/// The live processes whose command line names a path under `dir`.
fn processes_naming(dir: &Path) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
        })
        .collect()
}

/// The examples' file names, checked: a new example fails here until
/// [`run_every_example`] checks it.
fn example_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(examples_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "cronjob.yaml",
            "hello.yaml",
            "indexed-job.yaml",
            "init-and-wildcard-port.yaml",
            "rack-selector.yaml",
            "web-hostport.yaml",
            "worker-deployment.yaml",
        ]
    );
    names
}

/// Applies every example and waits for what its comments promise; returns
/// the messages of the `Pulled` events.
async fn run_every_example(k: &Kubectl) -> Vec<String> {
    for name in example_names() {
        ok(&k
            .run(&["apply", "-f", examples_dir().join(name).to_str().unwrap()])
            .await);
    }
    // From the CronJob's template, now rather than at the next minute.
    ok(&k
        .run(&["create", "job", "heartbeat-now", "--from=cronjob/heartbeat"])
        .await);

    ok(&k
        .run(&[
            "wait",
            "--for=jsonpath={.status.phase}=Succeeded",
            "pod/hello",
            WAIT,
        ])
        .await);
    let hello = ok(&k.run(&["logs", "hello"]).await);
    assert!(hello.contains("hello from mesopod on hello"), "{hello}");
    for job in ["squares", "heartbeat-now"] {
        ok(&k
            .run(&[
                "wait",
                "--for=condition=complete",
                &format!("job/{job}"),
                WAIT,
            ])
            .await);
    }
    let squares = ok(&k
        .run(&["logs", "-l", "job-name=squares", "--prefix=false"])
        .await);
    for i in 0..5 {
        let line = format!("{i} squared is {}", i * i);
        assert!(squares.contains(&line), "{line:?} not in {squares}");
    }
    assert!(
        ok(&k.run(&["logs", "job/heartbeat-now"]).await).contains("alive"),
        "the CronJob's command ran"
    );
    for deploy in ["init-demo", "on-rack-r1", "web", "worker"] {
        ok(&k
            .run(&["rollout", "status", &format!("deploy/{deploy}"), WAIT])
            .await);
    }
    let racks = ok(&k
        .run(&[
            "get",
            "pods",
            "-l",
            "app=on-rack-r1",
            "-o",
            "jsonpath={range .items[*]}{.spec.nodeName}{\"\\n\"}{end}",
        ])
        .await);
    let nodes: Vec<&str> = racks.lines().collect();
    assert_eq!(nodes.len(), 2, "{racks}");
    assert!(nodes.iter().all(|n| *n == nodes[0]), "one rack: {racks}");
    let rack = ok(&k
        .run(&[
            "get",
            "node",
            nodes[0],
            "-o",
            "jsonpath={.metadata.labels.rack}",
        ])
        .await);
    assert_eq!(rack, "r1");

    let events = ok(&k
        .run(&[
            "get",
            "events",
            "--field-selector",
            "reason=Pulled",
            "-o",
            "json",
        ])
        .await);
    let events: serde_json::Value = serde_json::from_str(&events).unwrap();
    events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["message"].as_str().map(str::to_owned))
        .collect()
}

/// One test for both ways, one after the other: `web-hostport.yaml` binds
/// host port 31080, which two clusters side by side would both want.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_runs_offline_from_a_mirror_then_from_image_load() {
    if !testing::require_root("examples_offline") {
        return;
    }
    let Some(mirror) = Registry::start_or_skip("examples_offline").await else {
        return;
    };
    through_a_registry_mirror(&mirror).await;
    with_no_registry_after_image_load().await;
}

async fn through_a_registry_mirror(mirror: &Registry) {
    let busybox = testing::image(vec![testing::busybox_full_layer()], &Spec::default());
    for tag in ["latest", "1.36", "1.37"] {
        mirror.push("library/busybox", tag, &busybox).await;
    }
    // A first mirror that lies: it has only `library/tampered`, whose layer
    // it serves with other bytes; for everything else it says 404, and the
    // pull falls through to the good mirror.
    let liar = Registry::start().await;
    let tampered = testing::image(
        vec![
            testing::Layer::new()
                .file("tampered", 0o644, b"not what the digest says")
                .tar(),
        ],
        &Spec::default(),
    );
    liar.push("library/tampered", "1", &tampered).await;
    let layer = tampered.layer_digest(0);
    let blob = liar.storage().join(format!(
        "docker/registry/v2/blobs/sha256/{}/{}/data",
        &layer[7..9],
        &layer[7..]
    ));
    let mut bytes = std::fs::read(&blob).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&blob, &bytes).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let mirror_url = format!("http://{}", mirror.host());
    let liar_url = format!("http://{}", liar.host());
    let (proc, server) = cluster(
        dir.path(),
        &[
            "--registry-mirror",
            &liar_url,
            "--registry-mirror",
            &mirror_url,
        ],
    )
    .await;
    let k = Kubectl::new(&server);
    let messages = run_every_example(&k).await;

    // `image: busybox` is Docker Hub's `library/busybox:latest`.
    let plain = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: plain\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: busybox\n    command: [\"echo\", \"latest from the mirror\"]\n";
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(plain)).await);
    ok(&k
        .run(&[
            "wait",
            "--for=jsonpath={.status.phase}=Succeeded",
            "pod/plain",
            WAIT,
        ])
        .await);
    assert_eq!(
        ok(&k.run(&["logs", "plain"]).await).trim(),
        "latest from the mirror"
    );

    // The wrong bytes are refused, and the pod says so.
    let liar_pod = plain
        .replace("name: plain", "name: tampered")
        .replace("image: busybox", "image: tampered:1");
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&liar_pod)).await);
    ok(&k
        .run(&[
            "wait",
            "--for=jsonpath={.status.containerStatuses[0].state.waiting.reason}=ErrImagePull",
            "pod/tampered",
            WAIT,
        ])
        .await);
    // The waiting message may already be the back-off's; the Failed event
    // keeps the pull's error.
    let failed = testkit::wait_until(
        "the Failed event of the tampered pull",
        Duration::from_secs(55),
        async || {
            ok(&k
                .run(&[
                    "get",
                    "events",
                    "--field-selector",
                    "involvedObject.name=tampered,reason=Failed",
                    "-o",
                    "jsonpath={.items[*].message}",
                ])
                .await)
        },
        |m| m.contains("unexpected commit digest"),
    )
    .await;
    assert!(failed.contains(&layer), "{failed}");

    // Every pull came through the mirror, and the pods show the image by
    // its own name.
    let pulled: Vec<&String> = messages
        .iter()
        .filter(|m| m.starts_with("Successfully pulled image"))
        .collect();
    assert!(!pulled.is_empty(), "{messages:?}");
    for m in &pulled {
        assert!(m.ends_with(&format!("Pulled from {mirror_url}.")), "{m}");
    }
    let id = ok(&k
        .run(&[
            "get",
            "pod",
            "hello",
            "-o",
            "jsonpath={.status.containerStatuses[0].imageID}",
        ])
        .await);
    assert_eq!(
        id,
        format!("docker.io/library/busybox@{}", busybox.digest())
    );
    stop(&k, proc, dir.path()).await;
}

async fn with_no_registry_after_image_load() {
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("busybox.tar");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/busybox-image.sh");
    let built = std::process::Command::new("sh")
        .arg(&script)
        .arg(&archive)
        .output()
        .unwrap();
    assert!(built.status.success(), "{built:?}");
    let loaded = std::process::Command::new(MESOPOD)
        .args(["image", "load"])
        .arg(&archive)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .unwrap();
    assert!(loaded.status.success(), "{loaded:?}");
    let said = String::from_utf8_lossy(&loaded.stdout);
    assert!(
        said.contains("Loaded image: docker.io/library/busybox:1.36"),
        "{said}"
    );

    let (proc, server) = cluster(dir.path(), &[]).await;
    let k = Kubectl::new(&server);
    let messages = run_every_example(&k).await;
    assert!(!messages.is_empty());
    for m in &messages {
        assert!(m.contains("already present on machine"), "{m}");
    }
    stop(&k, proc, dir.path()).await;
}

/// `mesopod` with `args`, which must refuse to start: its stderr.
async fn refused(dir: &Path, args: &[&str]) -> String {
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(MESOPOD)
            .args(["--listen", "127.0.0.1:0", "--agents", "1"])
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("mesopod exits at once")
    .unwrap();
    assert!(!out.status.success(), "{args:?} was accepted");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn a_bad_mirror_or_hosts_file_stops_mesopod_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let err = refused(dir.path(), &["--registry-mirror", "ftp://mirror.example"]).await;
    assert!(
        err.contains("--registry-mirror: invalid mirror: unsupported scheme \"ftp\""),
        "{err}"
    );
    let err = refused(dir.path(), &["--registry-mirror", "https://m.example/v2/x"]).await;
    assert!(err.contains("path \"/v2/x\" not allowed"), "{err}");

    let hosts = dir.path().join("certs.d");
    std::fs::create_dir_all(hosts.join("docker.io")).unwrap();
    let file = hosts.join("docker.io").join("hosts.toml");
    std::fs::write(
        &file,
        "server = \"https://registry-1.docker.io\"\n\n[host.\"http://127.0.0.1:5000\"]\n  capabilities = [\"pull\", \"resolve\"\n",
    )
    .unwrap();
    let err = refused(
        dir.path(),
        &["--registry-config-dir", hosts.to_str().unwrap()],
    )
    .await;
    assert!(
        err.contains(&format!("--registry-config-dir: {}:4: ", file.display())),
        "{err}"
    );
}
