//! `kubectl logs` as in Kubernetes, end to end: pods under the real
//! `mesopod executor` on localmesos agents (process mode: the log path is
//! the same pipes and CRI files as under a container runtime), read with the
//! real kubectl.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::cluster::*;
use k8s_openapi::jiff::Timestamp;
use testkit::{Kubectl, ok, stderr, wait_until};

const T: Duration = Duration::from_secs(90);

/// Runs twice: the first run fails, the second stays up; each prints to
/// both streams, the second 3 s apart so lines can be dated.
const TWO_RUNS: &str = "n=$(cat count 2>/dev/null || echo 0); n=$((n+1)); echo $n > count; \
    echo \"run $n early\"; echo \"run $n warn\" >&2; \
    if [ $n -lt 2 ]; then exit 1; fi; \
    sleep 3; echo \"run $n late\"; for i in 1 2 3 4 5; do echo \"line $i\"; done; sleep 600";

// The agents' work dir is localmesos' temporary one: a persistent one would
// checkpoint, and mesopod's shutdown would then leave the executors (and
// their `sleep 600`) running for a restart to recover, past the test.
async fn app(executor_args: &[&str]) -> framework::app::App {
    let mut cfg = app_config(Setup::default());
    cfg.executor.args.push("--restart-backoff=200ms".into());
    cfg.executor
        .args
        .extend(executor_args.iter().map(|a| a.to_string()));
    framework::app::App::start(cfg)
        .await
        .expect("mesopod starts")
}

async fn logs(server: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["logs"];
    all.extend_from_slice(args);
    Kubectl::new(server).run(&all).await
}

fn sorted_lines(text: &str) -> Vec<&str> {
    let mut v: Vec<&str> = text.lines().collect();
    v.sort_unstable();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_show_one_run_previous_the_one_before_and_filter_as_kubelet() {
    let app = app(&[]).await;
    let server = app.api_url();
    let yaml =
        pod_yaml("runs", "", TWO_RUNS).replace("restartPolicy: Never", "restartPolicy: OnFailure");
    ok(&Kubectl::new(&server)
        .run_stdin(&["apply", "-f", "-"], Some(&yaml))
        .await);
    let fresh = pod_yaml("fresh", "", "echo up; sleep 600");
    ok(&Kubectl::new(&server)
        .run_stdin(&["apply", "-f", "-"], Some(&fresh))
        .await);

    let current = wait_until(
        "the second run's last line",
        T,
        async || String::from_utf8_lossy(&logs(&server, &["runs"]).await.stdout).into_owned(),
        |t| t.contains("line 5"),
    )
    .await;
    // Only the current run, stdout and stderr together.
    assert_eq!(
        sorted_lines(&current),
        [
            "line 1",
            "line 2",
            "line 3",
            "line 4",
            "line 5",
            "run 2 early",
            "run 2 late",
            "run 2 warn"
        ],
        "{current}"
    );
    let pod = app.api().get_pod("default", "runs").unwrap();
    let cs = &pod.status.unwrap().container_statuses.unwrap()[0];
    assert_eq!(cs.restart_count, 1);

    // --previous: only the run before.
    let previous = ok(&logs(&server, &["runs", "--previous"]).await);
    assert_eq!(
        sorted_lines(&previous),
        ["run 1 early", "run 1 warn"],
        "{previous}"
    );

    // --timestamps: every line starts with an RFC3339 time, nine digits.
    let stamped = ok(&logs(&server, &["runs", "--timestamps"]).await);
    let mut late_at = None;
    for line in stamped.lines() {
        let (ts, text) = line.split_once(' ').expect("a timestamp and a text");
        assert_eq!(ts.len(), "2016-10-06T00:17:09.669794202Z".len(), "{line}");
        let parsed: Timestamp = ts.parse().unwrap_or_else(|e| panic!("{line}: {e}"));
        if text == "run 2 late" {
            late_at = Some(parsed);
        }
    }
    let late_at = late_at.expect("the late line");

    // --since-time: kubectl sends whole seconds; early was 3 s before late.
    let since_time = late_at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let since = ok(&logs(&server, &["runs", &format!("--since-time={since_time}")]).await);
    assert!(since.starts_with("run 2 late\n"), "{since}");
    assert!(since.ends_with("line 5\n"), "{since}");

    // --since=Ns: a window that begins between early and late.
    let now = executor::logs::cri::timestamp(SystemTime::now());
    let age = (now.as_second() - late_at.as_second()).max(0) + 2;
    let since = ok(&logs(&server, &["runs", &format!("--since={age}s")]).await);
    assert!(!since.contains("early"), "--since={age}s: {since}");
    assert!(since.contains("run 2 late"), "--since={age}s: {since}");

    // --tail and --limit-bytes.
    let tail = ok(&logs(&server, &["runs", "--tail=2"]).await);
    assert_eq!(tail, "line 4\nline 5\n");
    let limited = ok(&logs(&server, &["runs", "--limit-bytes=5"]).await);
    assert_eq!(limited, current[..5]);

    // --previous without a restart: kubelet's error, as a 400.
    wait_pod(app.api(), "default", "fresh", T, |p| phase(p) == "Running").await;
    let none = logs(&server, &["fresh", "--previous"]).await;
    assert!(!none.status.success());
    assert_eq!(
        stderr(&none).trim(),
        "Error from server (BadRequest): previous terminated container \"main\" in pod \"fresh\" not found"
    );
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_ends_when_the_container_does() {
    let app = app(&[]).await;
    let server = app.api_url();
    let yaml = pod_yaml(
        "follow",
        "",
        "echo first; sleep 2; echo second >&2; sleep 1; echo third",
    );
    ok(&Kubectl::new(&server)
        .run_stdin(&["apply", "-f", "-"], Some(&yaml))
        .await);
    wait_pod(app.api(), "default", "follow", T, |p| phase(p) == "Running").await;
    let followed = ok(&logs(&server, &["-f", "follow"]).await);
    assert_eq!(followed, "first\nsecond\nthird\n");
    app.shutdown().await;
}

fn find_dir(root: &Path, suffix: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(root).ok()?.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        if path.to_string_lossy().ends_with(suffix) {
            return Some(path);
        }
        if let Some(found) = find_dir(&path, suffix) {
            return Some(found);
        }
    }
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_rotate_at_the_agents_size_and_keep_at_most_max_files() {
    let app = app(&[
        "--container-log-max-size=2Ki",
        "--container-log-max-files=3",
    ])
    .await;
    let work = app.local().unwrap().work_dir().to_path_buf();
    let server = app.api_url();
    // 300 lines of ~60 bytes in CRI form: about nine files' worth.
    let yaml = pod_yaml(
        "rot",
        "",
        "i=1; while [ $i -le 300 ]; do echo \"line $i\"; i=$((i+1)); done; echo done; sleep 600",
    );
    ok(&Kubectl::new(&server)
        .run_stdin(&["apply", "-f", "-"], Some(&yaml))
        .await);
    let text = wait_until(
        "the last line",
        T,
        async || String::from_utf8_lossy(&logs(&server, &["rot"]).await.stdout).into_owned(),
        |t| t.ends_with("done\n"),
    )
    .await;
    assert!(text.contains("line 300\n"), "{text}");
    assert!(
        !text.contains("line 1\n"),
        "the first lines were rotated away"
    );
    let pod = app.api().get_pod("default", "rot").unwrap();
    let uid = pod.metadata.uid.unwrap();
    let dir = find_dir(&work, &format!("default_rot_{uid}/main")).expect("the log directory");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files.len(), 3, "{files:?}");
    assert!(files.iter().all(|f| f.starts_with("0.log")), "{files:?}");
    for f in &files {
        let len = std::fs::metadata(dir.join(f)).unwrap().len();
        assert!(len <= 2048, "{f}: {len} bytes");
    }
    app.shutdown().await;
}
