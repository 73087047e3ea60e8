//! mesopod on etcd end to end: `mesopod scheduler --etcd-servers URL` places pods
//! kubectl creates; SIGKILLed and started again with an EMPTY data directory, it finds
//! everything in etcd (pods, their status, the framework id), resubscribes as the
//! same framework and launches nothing twice. Needs etcd (`.ci/install-etcd.sh`):
//! skipped without it, failed under `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::MESOPOD;
use common::cluster::pod_yaml;
use serde_json::Value;
use testkit::{Kubectl, ProcessGuard, ok, wait_until_blocking};

type Proc = ProcessGuard<Child>;

/// Starts `mesopod ARGS`; returns it with the URL of its first stdout line naming `marker`.
fn spawn(args: &[&str], marker: &str) -> (Proc, String) {
    let mut proc = Proc::spawn(
        Command::new(MESOPOD)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    )
    .expect("mesopod starts");
    let mut lines = BufReader::new(proc.stdout.take().unwrap()).lines();
    let line = loop {
        match lines.next() {
            Some(Ok(l)) if l.contains(marker) => break l,
            Some(Ok(_)) => continue,
            _ => panic!("mesopod {args:?} exited before printing {marker:?}"),
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("a URL")
        .to_owned();
    (proc, url)
}

fn get(api: &str, what: &[&str]) -> Value {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", "json"]);
    serde_json::from_slice(&plain_kubectl(api, &args)).unwrap_or(Value::Null)
}

/// kubectl's stdout, run without testkit's runtime: these run inside
/// `wait_until_blocking`, which has one already.
fn plain_kubectl(api: &str, args: &[&str]) -> Vec<u8> {
    Command::new(testkit::KUBECTL)
        .arg(format!("--server={api}"))
        .args(args)
        .output()
        .map(|o| o.stdout)
        .unwrap_or_default()
}

fn raw(api: &str, path: &str) -> Value {
    serde_json::from_slice(&plain_kubectl(api, &["get", "--raw", path])).unwrap_or(Value::Null)
}

fn running(api: &str) -> Vec<(String, String)> {
    get(api, &["pods"])["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|p| p["status"]["phase"] == "Running")
        .map(|p| {
            let name = p["metadata"]["name"].as_str().unwrap_or("").to_owned();
            let task = p["metadata"]["annotations"]["mesopod.io/task-id"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            (name, task)
        })
        .collect()
}

#[test]
fn a_scheduler_on_etcd_restarts_from_etcd_alone() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(etcd) = runtime.block_on(testkit::etcd::Etcd::start(
        "a_scheduler_on_etcd_restarts_from_etcd_alone",
    )) else {
        return;
    };
    let (_master, master) = spawn(
        &[
            "localmesos",
            "--listen",
            "127.0.0.1:0",
            "--agents",
            "2",
            "--allocation-interval",
            "100ms",
        ],
        "http://",
    );
    let scheduler = |data: &tempfile::TempDir| {
        let data_dir = data.path().to_str().unwrap().to_owned();
        spawn(
            &[
                "scheduler",
                "--master",
                &master,
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                &data_dir,
                "--etcd-servers",
                &etcd.url,
                "--offer-ttl",
                "1s",
                "--container-runtime=process",
            ],
            "Kubernetes API",
        )
    };
    let first_dir = tempfile::tempdir().unwrap();
    let (mut first, api) = scheduler(&first_dir);
    let mut yaml = String::new();
    for name in ["keep-a", "keep-b"] {
        yaml.push_str("---\n");
        yaml.push_str(&pod_yaml(name, "", "sleep 300"));
    }
    ok(&Kubectl::new(&api).run_stdin_blocking(&["apply", "-f", "-"], Some(&yaml)));
    // No event to await across processes but what their endpoints show.
    let before = wait_until_blocking(
        "two pods Running",
        Duration::from_secs(60),
        || running(&api),
        |pods| pods.len() == 2,
    );
    let framework_before = raw(&api, "/debug/framework")["framework_id"].clone();
    assert!(framework_before.is_string(), "{framework_before}");
    first.kill().unwrap();
    first.wait().unwrap();

    let second_dir = tempfile::tempdir().unwrap();
    let (_second, api) = scheduler(&second_dir);
    assert_eq!(
        running(&api),
        before,
        "pods, status and task ids come back from etcd"
    );
    wait_until_blocking(
        "a completed reconciliation round",
        Duration::from_secs(60),
        || raw(&api, "/debug/reconciliation"),
        |r| {
            r["rounds_completed"].as_u64().unwrap_or(0) >= 1
                && r["waiting"].as_array().is_some_and(|w| w.is_empty())
        },
    );
    let fw = raw(&api, "/debug/framework");
    assert_eq!(
        fw["framework_id"], framework_before,
        "the framework id comes from etcd"
    );
    assert_eq!(fw["subscribed"], true);
    // Reconciled, nothing relaunched: the same tasks run.
    assert_eq!(running(&api), before);
}
