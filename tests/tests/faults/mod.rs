//! What the fault tests (`recovery_*.rs`, `partition_*.rs`) share: mesopod
//! processes with their logs, pods whose processes can be counted, and the
//! three counts every fault test asserts are zero: pods lost, duplicate
//! launches, panics.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

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
        // The fault tests count host processes per pod, so a scheduler runs
        // its pods in process mode (containers' own orphan and restart
        // behaviour is `containers_orphans.rs`'s).
        let mut args = args.to_vec();
        if args.first() != Some(&"localmesos") {
            args.push("--container-runtime=process");
        }
        let args = args.as_slice();
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
                "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {prefix}-{i}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 5\n  containers:\n  - name: main\n    image: busybox\n    command: [\"/bin/sh\", \"-c\", \"echo hello from {prefix}-{i}; exec sleep {}\"]\n    resources:\n      requests:\n        cpu: 10m\n        memory: 8Mi\n",
                marker(base, i)
            )
        })
        .collect()
}

/// How many processes run `sleep <marker>`.
pub fn copies(marker: &str) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|c| {
            let argv: Vec<&[u8]> = c.split(|b| *b == 0).filter(|a| !a.is_empty()).collect();
            argv.len() == 2 && argv[0].ends_with(b"sleep") && argv[1] == marker.as_bytes()
        })
        .count()
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
        let copies = copies(&marker(base, i));
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

/// A standalone `mesopod localmesos` on a fixed port with its work dir at
/// `<data>/localmesos` (so [`Reset`] of `data` cleans it), and a
/// `mesopod scheduler` against it.
pub struct Standalone {
    pub port: u16,
    pub work: PathBuf,
    pub lm_log: PathBuf,
    pub sched_log: PathBuf,
    pub master: String,
    pub api: String,
}

impl Standalone {
    /// Starts both; returns them with the processes.
    pub fn start(dir: &Path) -> (Standalone, Proc, Proc) {
        let port = free_port();
        let work = dir.join("lm").join("localmesos");
        let lm_log = dir.join("localmesos.log");
        let sched_log = dir.join("scheduler.log");
        let mut s = Standalone {
            port,
            work,
            lm_log,
            sched_log,
            master: String::new(),
            api: String::new(),
        };
        let lm = s.localmesos();
        s.master = lm.url();
        let data = dir.join("scheduler-data");
        let sched = Proc::spawn(
            &[
                "scheduler",
                "--master",
                &s.master,
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                data.to_str().unwrap(),
                "--offer-ttl",
                "1s",
            ],
            "Kubernetes API",
            &s.sched_log,
        );
        s.api = sched.url();
        (s, lm, sched)
    }

    /// (Re)starts localmesos on its port and work dir.
    pub fn localmesos(&self) -> Proc {
        Proc::spawn(
            &[
                "localmesos",
                "--listen",
                &format!("127.0.0.1:{}", self.port),
                "--agents",
                "2",
                "--allocation-interval",
                "100ms",
                "--heartbeat-interval",
                "1s",
                "--work-dir",
                self.work.to_str().unwrap(),
                "--recovery-timeout",
                "2mins",
                // the partition test drives localmesos' /admin/ fault routes
                "--enable-faults",
            ],
            "http://",
            &self.lm_log,
        )
    }

    /// The [`Reset`] that stops whatever this cluster leaves running.
    pub fn reset(&self) -> Reset {
        Reset(self.work.parent().unwrap().to_path_buf())
    }

    pub fn logs(&self) -> [&Path; 2] {
        [&self.lm_log, &self.sched_log]
    }

    /// Every live task in the master's `/state`: (task id, agent id,
    /// framework id, executor id, state).
    pub fn tasks(&self) -> Vec<[String; 5]> {
        let state = get_json(&format!("{}/state", self.master));
        let mut out = Vec::new();
        for fw in state["frameworks"].as_array().into_iter().flatten() {
            for t in fw["tasks"].as_array().into_iter().flatten() {
                let s = |k: &str| t[k].as_str().unwrap_or("").to_owned();
                out.push([
                    s("id"),
                    s("slave_id"),
                    s("framework_id"),
                    s("executor_id"),
                    s("state"),
                ]);
            }
        }
        out.sort();
        out
    }

    /// POSTs an admin fault route; whether it answered 200.
    pub fn admin(&self, route: &str, body: &str) -> bool {
        !request_json("POST", &format!("{}/admin/{route}", self.master), body).is_null()
    }
}

/// Whether this process may use cgroup v2 (root, a writable mount), as
/// localmesos' agents need to give each executor its own cgroup.
pub fn cgroups_usable() -> bool {
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    let v2 = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| {
            l.split(" - ")
                .nth(1)
                .is_some_and(|r| r.starts_with("cgroup2 "))
        });
    root && v2
}
