//! What the fault tests (`recovery_*.rs`, `partition_*.rs`) share: mesopod
//! processes with their logs, pods whose processes can be counted (in
//! containers, the default, or as host processes), and the three counts
//! every fault test asserts are zero: pods lost, duplicate launches, panics.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

pub mod image;
pub mod procs;
mod standalone;

#[allow(unused_imports)]
pub use procs::{cgroups_usable, executor_pids};
#[allow(unused_imports)]
pub use standalone::Standalone;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use testkit::{Kubectl, ProcessGuard, ok, wait_until_blocking};

/// The `mesopod` cargo built for these tests.
pub const MESOPOD: &str = env!("CARGO_BIN_EXE_mesopod-e2e");

/// A mesopod process (scheduler or localmesos) whose stderr goes to a log
/// file, so panics can be counted after it is gone.
pub struct Proc {
    pub guard: ProcessGuard<Child>,
    /// The first stdout line holding the marker it was started for.
    pub line: String,
    pub log: PathBuf,
}

impl Proc {
    /// Starts `mesopod ARGS`, logging to `log`, and waits for a stdout line
    /// with `marker`.
    pub fn spawn(args: &[&str], marker: &str, log: &Path) -> Proc {
        let err = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let mut guard = ProcessGuard::spawn(
            Command::new(MESOPOD)
                .args(args)
                .env("RUST_LOG", "info")
                .stdout(Stdio::piped())
                .stderr(err),
        )
        .expect("mesopod starts");
        let stdout = guard.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let line = loop {
            match lines.next() {
                Some(Ok(l)) if l.contains(marker) => break l,
                Some(Ok(_)) => continue,
                _ => panic!(
                    "mesopod {args:?} exited before printing {marker:?}; log:\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                ),
            }
        };
        // Keep draining stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Proc {
            guard,
            line,
            log: log.to_path_buf(),
        }
    }

    /// The URL in the marker line.
    pub fn url(&self) -> String {
        self.line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .expect("a URL")
            .to_owned()
    }

    /// SIGKILL, and wait for it.
    pub fn sigkill(mut self) {
        self.guard.kill().unwrap();
        self.guard.wait().unwrap();
    }

    /// SIGTERM, and wait for it to exit by itself.
    pub fn sigterm(mut self) {
        let pid = self.guard.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let status = self.guard.wait().unwrap();
        assert!(
            status.success(),
            "mesopod exits cleanly on SIGTERM: {status}"
        );
    }
}

/// A free loopback port (for a master that must come back on the same one).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A plain HTTP/1.0 request on loopback; Null on any failure or non-200.
pub fn request_json(method: &str, url: &str, body: &str) -> Value {
    match request(method, url, body) {
        Some(text) => serde_json::from_str(&text).unwrap_or(Value::Bool(true)),
        None => Value::Null,
    }
}

/// The body of a 200 answer to a plain HTTP/1.0 request on loopback.
pub fn request(method: &str, url: &str, body: &str) -> Option<String> {
    use std::io::{Read, Write};
    let rest = url.trim_start_matches("http://");
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let mut conn = std::net::TcpStream::connect(host).ok()?;
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let req = format!(
        "{method} {path} HTTP/1.0\r\nHost: {host}\r\nAccept: application/json\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(req.as_bytes()).ok()?;
    let mut raw = Vec::new();
    let _ = conn.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n")?;
    (head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200")).then(|| body.to_owned())
}

pub fn get_json(url: &str) -> Value {
    request_json("GET", url, "")
}

/// How a test's pods run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// In containers of [`image::IMAGE`], on the embedded runtime (the
    /// default).
    Containers,
    /// As host processes (`--container-runtime=process`).
    Process,
}

impl Mode {
    /// The scheduler's flags for this mode; `store` is the image store its
    /// executors use, when not the embedded cluster's `<data-dir>/images`.
    pub fn scheduler_args(self, store: Option<&Path>) -> Vec<String> {
        match (self, store) {
            (Mode::Process, _) => vec!["--container-runtime=process".to_owned()],
            (Mode::Containers, Some(s)) => vec![format!("--image-store={}", s.display())],
            (Mode::Containers, None) => Vec::new(),
        }
    }

    /// Whether this mode can run here (containers need root and busybox).
    pub fn possible(self, test: &str) -> bool {
        self == Mode::Process || image::containers_possible(test)
    }
}

/// The number each pod's process sleeps: unique per test and pod, so
/// counting `sleep <n>` processes counts that pod's copies.
pub fn marker(base: u32, i: usize) -> String {
    format!("{}", base * 1000 + u32::try_from(i).unwrap())
}

/// `n` pods that print a line and sleep for their marker.
pub fn pods_yaml(prefix: &str, base: u32, n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {prefix}-{i}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 5\n  containers:\n  - name: main\n    image: {}\n    command: [\"/bin/sh\", \"-c\", \"echo hello from {prefix}-{i}; exec sleep {}\"]\n    resources:\n      requests:\n        cpu: 10m\n        memory: 8Mi\n",
                image::IMAGE,
                marker(base, i)
            )
        })
        .collect()
}

/// How many copies of the pod with `marker` run: processes sleeping for
/// it, and in [`Mode::Containers`] only those inside a container's cgroup.
pub fn copies(mode: Mode, marker: &str) -> usize {
    procs::sleepers(marker)
        .into_iter()
        .filter(|pid| mode == Mode::Process || procs::containerised(*pid))
        .count()
}

/// Every process of any of the `n` pods of `base`, contained or not: what
/// must be 0 once they are meant to be gone.
pub fn any_left(base: u32, n: usize) -> usize {
    (0..n)
        .map(|i| procs::sleepers(&marker(base, i)).len())
        .sum()
}

/// The test's pods as (name, phase, ready, task id).
pub fn pods(api: &str, prefix: &str) -> Vec<(String, String, bool, String)> {
    let list = get_json(&format!("{api}/api/v1/namespaces/default/pods"));
    let mut out: Vec<_> = list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter(|p| {
            p["metadata"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with(&format!("{prefix}-")))
        })
        .map(|p| {
            let ready = p["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            (
                p["metadata"]["name"].as_str().unwrap_or("").to_owned(),
                p["status"]["phase"].as_str().unwrap_or("").to_owned(),
                ready,
                p["metadata"]["annotations"]["mesopod.io/task-id"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Waits until all `n` pods are Running and ready; returns them.
pub fn all_running(
    api: &str,
    prefix: &str,
    n: usize,
    within: Duration,
) -> Vec<(String, String, bool, String)> {
    wait_until_blocking(
        &format!("{n} pods Running and ready"),
        within,
        || pods(api, prefix),
        |p| {
            p.len() == n
                && p.iter()
                    .all(|(_, phase, ready, _)| phase == "Running" && *ready)
        },
    )
}

/// What every fault test asserts is zero.
#[derive(Debug, Default, PartialEq)]
pub struct Faults {
    /// Pods not Running, or without their process.
    pub lost: usize,
    /// Pods with more than one copy of their process, or a new task id.
    pub duplicates: usize,
    /// Panics in any log.
    pub panics: usize,
}

/// Counts the faults of the pods `before` (named `<prefix>-<i>`), which
/// should all be Running with the same task ids.
pub fn count_faults(
    mode: Mode,
    api: &str,
    prefix: &str,
    base: u32,
    before: &[(String, String, bool, String)],
    logs: &[&Path],
) -> Faults {
    let now = pods(api, prefix);
    let mut f = Faults::default();
    for (name, _, _, task) in before {
        let found = now.iter().find(|p| &p.0 == name);
        let i: usize = name
            .rsplit('-')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap();
        let copies = copies(mode, &marker(base, i));
        match found {
            Some((_, phase, ready, t)) => {
                if phase != "Running" || !*ready || copies == 0 {
                    f.lost += 1;
                }
                if copies > 1 || t != task {
                    f.duplicates += 1;
                }
            }
            None => f.lost += 1,
        }
    }
    f.panics = panics(logs);
    f
}

/// Lines that report a panic in these logs.
pub fn panics(logs: &[&Path]) -> usize {
    logs.iter()
        .map(|l| {
            std::fs::read_to_string(l)
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains("panicked"))
                .count()
        })
        .sum()
}

/// Stops everything a data dir's embedded cluster left running and wipes
/// it, when dropped: no test leaves pods behind, pass or fail.
pub struct Reset(pub PathBuf);

/// A test's scratch directory: an embedded cluster's data dir, reset when
/// dropped (so no executor or pod outlives the test), and mesopod's log.
pub struct Scratch {
    _reset: Reset,
    /// The data dir (`--data-dir`).
    pub data: PathBuf,
    /// The data dir as a flag value.
    pub data_s: String,
    /// Where mesopod's log goes.
    pub log: PathBuf,
    // Dropped last: the reset needs the data dir.
    _dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        Self {
            _reset: Reset(data.clone()),
            data_s: data.to_str().unwrap().to_owned(),
            log: dir.path().join("mesopod.log"),
            data,
            _dir: dir,
        }
    }
}

impl Drop for Reset {
    fn drop(&mut self) {
        let _ = Command::new(MESOPOD)
            .args(["--reset", "--data-dir"])
            .arg(&self.0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// kubectl `args` against `api`, which must succeed.
pub fn kubectl_ok(api: &str, args: &[&str]) -> String {
    ok(&Kubectl::new(api).run_blocking(args))
}

/// kubectl apply of `yaml`.
pub fn apply(api: &str, yaml: &str) {
    ok(&Kubectl::new(api).run_stdin_blocking(&["apply", "-f", "-"], Some(yaml)));
}
