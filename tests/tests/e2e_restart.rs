//! End to end across processes: SIGKILL mesopod while pods run, start it
//! again on the same data directory, and check that it rebuilds its
//! registry, reconciles, keeps the pods' status and launches nothing twice.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::MESOPOD;
use common::cluster::pod_yaml;
use serde_json::Value;
use testkit::{Kubectl, ProcessGuard, ok, wait_until_blocking};

/// A mesopod stopped when dropped, so a failing test leaves nothing
/// behind: SIGTERM first (localmesos then stops its executors and their
/// pods), SIGKILL to its process group if it is still there after ten
/// seconds.
type Proc = ProcessGuard<Child>;

/// Starts `mesopod ARGS` and returns it with the first stdout line containing `marker`.
fn spawn(args: &[&str], marker: &str) -> (Proc, String) {
    let mut proc = Proc::spawn(
        Command::new(MESOPOD)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    )
    .expect("mesopod starts");
    let stdout = proc.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let line = loop {
        match lines.next() {
            Some(Ok(l)) if l.contains(marker) => break l,
            Some(Ok(_)) => continue,
            _ => panic!("mesopod {args:?} exited before printing {marker:?}"),
        }
    };
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (proc, line)
}

fn url_in(line: &str) -> String {
    line.split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("a URL")
        .to_owned()
}

/// A plain HTTP/1.0 GET on loopback; Null on any failure.
fn get_json(url: &str) -> Value {
    use std::io::{Read, Write};
    let rest = url.trim_start_matches("http://");
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let Ok(mut conn) = std::net::TcpStream::connect(host) else {
        return Value::Null;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    if conn
        .write_all(
            format!("GET {path} HTTP/1.0\r\nHost: {host}\r\nAccept: application/json\r\n\r\n")
                .as_bytes(),
        )
        .is_err()
    {
        return Value::Null;
    }
    let mut raw = Vec::new();
    let _ = conn.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return Value::Null;
    };
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Value::Null;
    }
    serde_json::from_str(body).unwrap_or(Value::Null)
}

fn running_pods(api: &str) -> Vec<(String, String)> {
    let list = get_json(&format!("{api}/api/v1/namespaces/default/pods"));
    list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|p| p["status"]["phase"] == "Running")
        .map(|p| {
            (
                p["metadata"]["name"].as_str().unwrap_or("").to_owned(),
                p["metadata"]["annotations"]["mesopod.io/task-id"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            )
        })
        .collect()
}

fn master_tasks(master: &str) -> Vec<(String, String)> {
    let state = get_json(&format!("{master}/state"));
    let mut out = Vec::new();
    for fw in state["frameworks"].as_array().cloned().unwrap_or_default() {
        let live = fw["tasks"].as_array().cloned().unwrap_or_default();
        let done = fw["completed_tasks"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for t in live.into_iter().chain(done) {
            out.push((
                t["id"].as_str().unwrap_or("").to_owned(),
                t["state"].as_str().unwrap_or("").to_owned(),
            ));
        }
    }
    out
}

#[test]
fn sigkill_and_restart_rebuilds_the_registry_and_launches_nothing_twice() {
    let data = tempfile::tempdir().unwrap();
    let (_master, line) = spawn(
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
    let master = url_in(&line);
    let data_dir = data.path().to_str().unwrap().to_owned();
    let sched_args = [
        "scheduler",
        "--master",
        &master,
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        &data_dir,
        "--offer-ttl",
        "1s",
        // Host commands, not images: this test is about the scheduler.
        "--container-runtime=process",
    ];
    let (mut first, line) = spawn(&sched_args, "Kubernetes API");
    let api = url_in(&line);

    let mut yaml = String::new();
    for name in ["keep-a", "keep-b", "keep-c"] {
        yaml.push_str("---\n");
        yaml.push_str(&pod_yaml(name, "", "sleep 300"));
    }
    ok(&Kubectl::new(&api).run_stdin_blocking(&["apply", "-f", "-"], Some(&yaml)));
    // No event to await across processes but what their endpoints show.
    wait_until_blocking(
        "three pods Running",
        Duration::from_secs(60),
        || running_pods(&api),
        |pods| pods.len() == 3,
    );
    let before = running_pods(&api);
    let framework_before = get_json(&format!("{api}/debug/framework"))["framework_id"].clone();
    assert!(framework_before.is_string());

    first.kill().unwrap();
    first.wait().unwrap();
    let tasks_before = master_tasks(&master);
    assert_eq!(tasks_before.len(), 3, "{tasks_before:?}");

    let (_second, line) = spawn(&sched_args, "Kubernetes API");
    let api = url_in(&line);
    // No event to await across processes but what their endpoints show.
    wait_until_blocking(
        "a completed reconciliation round",
        Duration::from_secs(60),
        || get_json(&format!("{api}/debug/reconciliation")),
        |r| {
            r["rounds_completed"].as_u64().unwrap_or(0) >= 1
                && r["waiting"].as_array().is_some_and(|w| w.is_empty())
        },
    );
    let fw = get_json(&format!("{api}/debug/framework"));
    assert_eq!(
        fw["framework_id"], framework_before,
        "the framework id is reused"
    );
    assert_eq!(fw["subscribed"], true);

    let tasks = get_json(&format!("{api}/debug/registry/tasks"));
    let registry: Vec<(String, String)> = tasks
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap().to_owned(),
                t["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(registry.len(), 3, "{registry:?}");
    assert!(registry.iter().all(|(_, s)| s == "running"), "{registry:?}");
    let mut after = running_pods(&api);
    let mut before = before;
    after.sort();
    before.sort();
    assert_eq!(after, before, "same pods, same tasks, still Running");
    let tasks_after = master_tasks(&master);
    assert_eq!(
        tasks_after.len(),
        3,
        "nothing launched twice: {tasks_after:?}"
    );
}
