//! What the restart tests share: `mesopod localmesos` and `mesopod scheduler` as
//! processes (stopped when dropped), plain reads of their HTTP endpoints, and the
//! checks after a restart (reconciled as the same framework).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use testkit::{ProcessGuard, wait_until_blocking};

/// A mesopod stopped when dropped, so a failing test leaves nothing behind: SIGTERM
/// first (localmesos then stops its executors and their pods), SIGKILL to its process
/// group if it is still there after ten seconds.
pub type Proc = ProcessGuard<Child>;

/// Starts `mesopod ARGS`; returns it with the URL in its first stdout line naming
/// `marker`.
pub fn spawn(args: &[&str], marker: &str) -> (Proc, String) {
    read_url(
        Proc::spawn(
            Command::new(super::MESOPOD)
                .args(args)
                .stdout(Stdio::piped())
                .stderr(Stdio::null()),
        )
        .expect("mesopod starts"),
        args,
        marker,
    )
}

/// Reads `proc`'s stdout (piped) up to its first line naming `marker`, and returns
/// `proc` with that line's URL; stdout keeps being drained.
pub fn read_url(mut proc: Proc, args: &[&str], marker: &str) -> (Proc, String) {
    let mut lines = BufReader::new(proc.stdout.take().unwrap()).lines();
    let line = loop {
        match lines.next() {
            Some(Ok(l)) if l.contains(marker) => break l,
            Some(Ok(_)) => continue,
            _ => panic!("mesopod {args:?} exited before printing {marker:?}"),
        }
    };
    // Keep draining stdout so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("a URL")
        .to_owned();
    (proc, url)
}

/// `mesopod localmesos` with two agents, offering every 100 ms; and its URL.
pub fn localmesos() -> (Proc, String) {
    spawn(
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
    )
}

/// `mesopod scheduler` on `master` with its data in `data_dir`, plus `extra`; and
/// the URL of its Kubernetes API. Host commands, not images: these tests are about
/// the scheduler.
pub fn scheduler(master: &str, data_dir: &std::path::Path, extra: &[&str]) -> (Proc, String) {
    let data_dir = data_dir.to_str().unwrap();
    let mut args = vec![
        "scheduler",
        "--master",
        master,
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data_dir,
        "--offer-ttl",
        "1s",
        "--container-runtime=process",
    ];
    args.extend_from_slice(extra);
    spawn(&args, "Kubernetes API")
}

/// A plain HTTP/1.0 GET on loopback; Null on any failure.
pub fn get_json(url: &str) -> Value {
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

/// The Running pods of `default` with their task ids, sorted.
pub fn running_pods(api: &str) -> Vec<(String, String)> {
    let list = get_json(&format!("{api}/api/v1/namespaces/default/pods"));
    let mut pods: Vec<(String, String)> = list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|p| p["status"]["phase"] == "Running")
        .map(|p| {
            let field = |v: &Value| v.as_str().unwrap_or("").to_owned();
            (
                field(&p["metadata"]["name"]),
                field(&p["metadata"]["annotations"]["mesopod.io/task-id"]),
            )
        })
        .collect();
    pods.sort();
    pods
}

/// The framework id the scheduler at `api` reports.
pub fn framework_id(api: &str) -> Value {
    let id = get_json(&format!("{api}/debug/framework"))["framework_id"].clone();
    assert!(id.is_string(), "{id}");
    id
}

/// Waits for the restarted scheduler at `api` to complete a reconciliation round with
/// nothing left waiting, then checks it subscribed again as `framework`.
pub fn reconciled_as(api: &str, framework: &Value, why: &str) {
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
    assert_eq!(&fw["framework_id"], framework, "{why}");
    assert_eq!(fw["subscribed"], true);
}

/// Applies `names` as `sleep 300` pods and waits for all of them to run; returns them
/// with their task ids.
pub fn run_sleepers(api: &str, names: &[&str]) -> Vec<(String, String)> {
    let mut yaml = String::new();
    for name in names {
        yaml.push_str("---\n");
        yaml.push_str(&super::cluster::pod_yaml(name, "", "sleep 300"));
    }
    testkit::ok(&testkit::Kubectl::new(api).run_stdin_blocking(&["apply", "-f", "-"], Some(&yaml)));
    // No event to await across processes but what their endpoints show.
    wait_until_blocking(
        "the pods Running",
        Duration::from_secs(60),
        || running_pods(api),
        |pods| pods.len() == names.len(),
    )
}
